//! Stored arrays from the command line (`nums-cloud ls show get put rm`) and the streamed
//! readers the driver exports with: an array is read block-row by block-row, so the driver
//! holds one row of blocks at a time, never a whole array.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use futures::StreamExt;
use ndarray::{Axis, IxDyn, SliceInfoElem};
use nums_layout::zarr::ATTRIBUTES_KEY;
use nums_layout::{ArrayMeta, Block, DType, Store, StoreSpec, StoredArray};
use serde::Serialize;

/// Blocks read at once while streaming, and the bytes they may hold.
const READ_AHEAD: usize = 8;
const READ_AHEAD_BYTES: u64 = 64 << 20;

/// Calls `f` with each block-row of the array (all blocks whose index on axis 0 is `i`,
/// assembled: rows `i * block[0]..` of the whole array), in order. A 0-d array is one call.
/// Missing blocks of arrays nums-cloud wrote are errors; of others, the fill value.
/// One slab's memory serves every block-row of its shape, and a block-row of one block is
/// passed as it is. (Decoding on the blocking pool was tried: its threads' malloc arenas
/// held freed blocks, doubling the driver's peak memory for little time.)
pub(crate) async fn for_each_row_slab(
    arr: &StoredArray,
    store: &Store,
    mut f: impl FnMut(&Block) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let m = &arr.meta;
    let grid = m.grid();
    if m.ndim() == 0 {
        return f(&read(arr, store, &[]).await?);
    }
    let per_row: u64 = grid[1..].iter().product();
    // Reads run ahead across block-rows (on S3 each is a round trip), within
    // READ_AHEAD_BYTES of decoded blocks.
    let block_bytes = m.block.iter().product::<u64>() * m.dtype.size() as u64;
    let ahead = (READ_AHEAD_BYTES / block_bytes.max(1)).clamp(1, READ_AHEAD as u64) as usize;
    let mut reads = futures::stream::iter(0..grid[0] * per_row)
        .map(|k| {
            let idx = nums_layout::meta::unravel(k, &grid);
            async move { Ok::<_, anyhow::Error>((idx.clone(), read(arr, store, &idx).await?)) }
        })
        .buffered(ahead);
    let mut slab: Option<Block> = None;
    for i in 0..grid[0] {
        let rows = m.block_shape(&{
            let mut idx = vec![0; m.ndim()];
            idx[0] = i;
            idx
        })[0];
        let mut shape: Vec<usize> = m.shape.iter().map(|&s| s as usize).collect();
        shape[0] = rows;
        let mut blocks = Vec::with_capacity(per_row as usize);
        for _ in 0..per_row {
            blocks.push(reads.next().await.expect("a block per index")?);
        }
        // Each block-row gives the task's other futures their turn (a run's Ctrl-C): reads
        // of local blocks are often ready at once, and a whole export would run through.
        tokio::task::yield_now().await;
        if let [(_, b)] = blocks.as_slice()
            && b.shape() == shape.as_slice()
        {
            f(b)?; // one block is the whole block-row: no slab to assemble
            continue;
        }
        // The blocks cover the slab: its old values are all overwritten.
        let slab = match slab.take() {
            Some(s) if s.shape() == shape.as_slice() => slab.insert(s),
            _ => slab.insert(Block::zeros(m.dtype, &shape)),
        };
        for (idx, b) in blocks {
            let o = m.block_origin(&idx);
            let info: Vec<SliceInfoElem> = b
                .shape()
                .iter()
                .enumerate()
                .map(|(d, &n)| {
                    let start = if d == 0 { 0 } else { o[d] as isize };
                    SliceInfoElem::from(start..start + n as isize)
                })
                .collect();
            assign(slab, &info, b)?;
        }
        f(slab)?;
    }
    Ok(())
}

fn assign(dst: &mut Block, info: &[SliceInfoElem], src: Block) -> anyhow::Result<()> {
    match (dst, src) {
        (Block::F64(d), Block::F64(s)) => d.slice_mut(info).assign(&s),
        (Block::F32(d), Block::F32(s)) => d.slice_mut(info).assign(&s),
        (Block::I64(d), Block::I64(s)) => d.slice_mut(info).assign(&s),
        (Block::Bool(d), Block::Bool(s)) => d.slice_mut(info).assign(&s),
        _ => bail!("a block's dtype differs from its array's"),
    }
    Ok(())
}

async fn read(arr: &StoredArray, store: &Store, idx: &[u64]) -> anyhow::Result<Block> {
    let b = if arr.complete {
        arr.read_block(store, idx).await
    } else {
        arr.read_block_or_fill(store, idx).await
    };
    b.with_context(|| format!("array {} block {idx:?}", arr.path))
}

/// Writes an array to a `.npy` file block-row by block-row (a partial file renamed at the
/// end, so the file is the old one or the whole new one).
pub(crate) async fn export_npy(
    arr: &StoredArray,
    store: &Store,
    path: &Path,
) -> anyhow::Result<()> {
    let mut w = crate::npy::NpyWriter::create(path, arr.meta.dtype, &arr.meta.shape)
        .map_err(|e| anyhow!(e))?;
    for_each_row_slab(arr, store, |slab| w.write(slab).map_err(|e| anyhow!(e))).await?;
    w.finish().map_err(|e| anyhow!(e))
}

/// Writes a 1-D or 2-D array to a CSV file (comma-separated, no header) row by row, as
/// `np.savetxt(path, a, delimiter=",")` would with full precision.
pub(crate) async fn export_csv(
    arr: &StoredArray,
    store: &Store,
    path: &Path,
) -> anyhow::Result<()> {
    if arr.meta.ndim() == 0 || arr.meta.ndim() > 2 {
        bail!(
            "{}: a CSV file holds a 1-D or 2-D array; this one has shape {:?}",
            arr.path,
            arr.meta.shape
        );
    }
    let mut w = crate::npy::CsvWriter::create(path).map_err(|e| anyhow!(e))?;
    for_each_row_slab(arr, store, |slab| w.write(slab).map_err(|e| anyhow!(e))).await?;
    w.finish().map_err(|e| anyhow!(e))
}

/// What `ls` shows of one stored array.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ArrayInfo {
    /// Its path under the store root.
    pub path: String,
    pub shape: Vec<u64>,
    pub dtype: String,
    pub block: Vec<u64>,
    /// Bytes of its chunks in the store.
    pub stored_bytes: u64,
    /// Its values' bytes in memory.
    pub nbytes: u64,
    /// `nbytes / stored_bytes`.
    pub compression_ratio: f64,
    /// The job and run that wrote it (nums-cloud's attributes), if any.
    pub job: Option<String>,
    pub run: Option<String>,
    /// What made it, in the job file's words.
    pub source: Option<String>,
}

/// The arrays stored under `prefix` (runs' staging areas left out), sorted by path.
pub(crate) async fn list(store: &Store, prefix: &str) -> anyhow::Result<Vec<ArrayInfo>> {
    let keys = store.list_sizes(prefix.trim_matches('/')).await?;
    let mut by_array: BTreeMap<String, u64> = BTreeMap::new();
    let arrays: Vec<String> = keys
        .iter()
        .filter_map(|(k, _)| {
            k.strip_suffix("/zarr.json")
                .or((k == "zarr.json").then_some(""))
        })
        .filter(|p| !p.split('/').any(|s| s == crate::runs::RUNS))
        .map(str::to_string)
        .collect();
    for (k, size) in &keys {
        // The array a chunk belongs to: the longest array path that prefixes it.
        if let Some(a) = arrays
            .iter()
            .filter(|a| k.starts_with(&format!("{a}/c")) || (a.is_empty() && k.starts_with('c')))
            .max_by_key(|a| a.len())
        {
            *by_array.entry(a.clone()).or_default() += size;
        }
    }
    let mut out = Vec::new();
    for path in arrays {
        let json: serde_json::Value =
            serde_json::from_slice(&store.get(&format!("{path}/zarr.json")).await?)
                .with_context(|| format!("{path}/zarr.json"))?;
        let Ok(arr) = StoredArray::from_json(&path, &json) else {
            continue; // a Zarr array of a dtype nums-cloud does not read
        };
        let attrs = json.get("attributes").and_then(|a| a.get(ATTRIBUTES_KEY));
        let text = |k: &str| {
            attrs
                .and_then(|a| a.get(k))
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let stored = by_array.get(&path).copied().unwrap_or(0);
        out.push(ArrayInfo {
            shape: arr.meta.shape.clone(),
            dtype: arr.meta.dtype.name().into(),
            block: arr.meta.block.clone(),
            stored_bytes: stored,
            nbytes: arr.meta.nbytes(),
            compression_ratio: if stored == 0 {
                0.0
            } else {
                arr.meta.nbytes() as f64 / stored as f64
            },
            job: text("job"),
            run: text("run"),
            source: text("source"),
            path,
        });
    }
    Ok(out)
}

/// NumPy's summary of a large array: at most this many items per axis at each end.
const EDGE_ITEMS: usize = 3;
/// NumPy's threshold: arrays with more elements are summarised.
const THRESHOLD: u64 = 1000;

/// The array as NumPy prints it (`array([...])`, summarised with `...` past 1000 elements),
/// reading only the blocks that hold the printed elements.
pub(crate) async fn preview(arr: &StoredArray, store: &Store) -> anyhow::Result<String> {
    let m = &arr.meta;
    if m.is_empty() && m.ndim() > 0 {
        // As NumPy prints one: `[]` with its dtype (and its shape past one axis).
        let shape = match m.ndim() {
            1 => String::new(),
            _ => format!(
                "shape=({}), ",
                m.shape
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        return Ok(format!("array([], {shape}dtype={})", m.dtype.name()));
    }
    let summarise = m.len() > THRESHOLD;
    // Per axis, the indices printed.
    let kept: Vec<Vec<u64>> = m
        .shape
        .iter()
        .map(|&n| {
            if summarise && n > 2 * EDGE_ITEMS as u64 {
                (0..EDGE_ITEMS as u64)
                    .chain(n - EDGE_ITEMS as u64..n)
                    .collect()
            } else {
                (0..n).collect()
            }
        })
        .collect();
    let shape: Vec<usize> = kept.iter().map(Vec::len).collect();
    // The blocks that hold them, each read once.
    let mut blocks: BTreeMap<Vec<u64>, Block> = BTreeMap::new();
    let count: usize = shape.iter().product();
    let mut values: Vec<Printed> = Vec::with_capacity(count);
    for lin in 0..count as u64 {
        let at =
            nums_layout::meta::unravel(lin, &shape.iter().map(|&s| s as u64).collect::<Vec<_>>());
        let g: Vec<u64> = at.iter().zip(&kept).map(|(&i, k)| k[i as usize]).collect();
        let bidx: Vec<u64> = g.iter().zip(&m.block).map(|(&x, &b)| x / b).collect();
        if !blocks.contains_key(&bidx) {
            let b = read(arr, store, &bidx).await?;
            blocks.insert(bidx.clone(), b);
        }
        let b = &blocks[&bidx];
        let local: Vec<usize> = g
            .iter()
            .zip(&m.block)
            .map(|(&x, &b)| (x % b) as usize)
            .collect();
        values.push(match b {
            Block::F64(a) => Printed::Float(a[IxDyn(&local)]),
            Block::F32(a) => Printed::Float(a[IxDyn(&local)] as f64),
            Block::I64(a) => Printed::Text(a[IxDyn(&local)].to_string()),
            Block::Bool(a) => Printed::Text(if a[IxDyn(&local)] { "True" } else { "False" }.into()),
        });
    }
    let values = format_values(values);
    let width = values.iter().map(String::len).max().unwrap_or(1);
    let cut: Vec<bool> = m
        .shape
        .iter()
        .map(|&n| summarise && n > 2 * EDGE_ITEMS as u64)
        .collect();
    let body = nest(&values, &shape, &cut, width, 7);
    let mut suffix = match m.dtype {
        DType::Float64 | DType::Int64 | DType::Bool => String::new(),
        d => format!(", dtype={}", d.name()),
    };
    if summarise {
        suffix += &format!(
            ", shape=({})",
            m.shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
                + if m.ndim() == 1 { "," } else { "" }
        );
    }
    Ok(format!("array({body}{suffix})"))
}

/// A small in-memory block's values as NumPy prints an array's (nested brackets, NumPy's
/// float format), without `array(...)` around them: the run summary's preview of an output.
pub(crate) fn format_block(b: &Block) -> String {
    let values: Vec<Printed> = match b {
        Block::F64(a) => a.iter().map(|&v| Printed::Float(v)).collect(),
        Block::F32(a) => a.iter().map(|&v| Printed::Float(v as f64)).collect(),
        Block::I64(a) => a.iter().map(|v| Printed::Text(v.to_string())).collect(),
        Block::Bool(a) => a
            .iter()
            .map(|&v| Printed::Text(if v { "True" } else { "False" }.into()))
            .collect(),
    };
    let shape = b.shape().to_vec();
    let values = format_values(values);
    let width = values.iter().map(String::len).max().unwrap_or(1);
    nest(&values, &shape, &vec![false; shape.len()], width, 1)
}

/// One printed element before formatting.
enum Printed {
    Float(f64),
    Text(String),
}

/// NumPy's float format for an array: positional with as few decimals as the values need
/// (at most 8, dropped together), or scientific with 8 when the magnitudes span more than
/// 1e3 or reach 1e16 or fall under 1e-4.
fn format_values(values: Vec<Printed>) -> Vec<String> {
    let finite: Vec<f64> = values
        .iter()
        .filter_map(|p| match p {
            Printed::Float(v) if v.is_finite() && *v != 0.0 => Some(v.abs()),
            _ => None,
        })
        .collect();
    let (lo, hi) = finite
        .iter()
        .fold((f64::INFINITY, 0f64), |(l, h), &v| (l.min(v), h.max(v)));
    let sci = !finite.is_empty() && (hi >= 1e16 || lo < 1e-4 || hi / lo > 1e3);
    let special = |v: f64| {
        if v.is_nan() {
            Some("nan".to_string())
        } else if v.is_infinite() {
            Some(if v > 0.0 { "inf" } else { "-inf" }.to_string())
        } else {
            None
        }
    };
    let decimals = if sci {
        8
    } else {
        values
            .iter()
            .filter_map(|p| match p {
                Printed::Float(v) if v.is_finite() => Some(format!("{v:.8}")),
                _ => None,
            })
            .filter_map(|t| {
                t.split_once('.')
                    .map(|(_, f)| f.trim_end_matches('0').len())
            })
            .max()
            .unwrap_or(0)
    };
    values
        .into_iter()
        .map(|p| match p {
            Printed::Text(t) => t,
            Printed::Float(v) => special(v).unwrap_or_else(|| {
                if sci {
                    let t = format!("{v:.8e}");
                    let (mant, exp) = t.split_once('e').expect("exponent");
                    let e: i32 = exp.parse().expect("exponent");
                    format!("{mant}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
                } else if decimals == 0 {
                    format!("{v:.0}.")
                } else {
                    format!("{v:.decimals$}")
                }
            }),
        })
        .collect()
}

/// Nested brackets as NumPy prints them, `...` where an axis is summarised.
fn nest(values: &[String], shape: &[usize], cut: &[bool], width: usize, indent: usize) -> String {
    if shape.is_empty() {
        return values.first().cloned().unwrap_or_default();
    }
    let n = shape[0];
    let inner: usize = shape[1..].iter().product();
    let mut parts: Vec<String> = (0..n)
        .map(|i| {
            let v = &values[i * inner..(i + 1) * inner];
            if shape.len() == 1 {
                format!("{:>width$}", v[0])
            } else {
                nest(v, &shape[1..], &cut[1..], width, indent + 1)
            }
        })
        .collect();
    if cut[0] {
        parts.insert(n / 2, "...".into());
    }
    let sep = if shape.len() == 1 {
        ", ".to_string()
    } else {
        format!(",{}{}", "\n".repeat(shape.len() - 1), " ".repeat(indent))
    };
    format!("[{}]", parts.join(&sep))
}

/// Where `ls`/`show`/`get`/`put`/`rm` look: `--storage` (and `--endpoint`), or a job file's
/// `[storage]`, or the default `file://nums-data` in the working directory.
pub(crate) fn store_spec(
    storage: Option<&str>,
    endpoint: Option<&str>,
    job: Option<&Path>,
) -> anyhow::Result<StoreSpec> {
    if let Some(j) = job {
        if storage.is_some() {
            bail!("give --storage or --job, not both");
        }
        return Ok(crate::job::Job::load(j)?.storage);
    }
    let cwd = std::env::current_dir().context("no working directory")?;
    crate::job::resolve_store_url(
        &cwd,
        storage.unwrap_or("file://nums-data"),
        endpoint.map(str::to_string),
    )
    .map_err(|e| anyhow!(e))
}

/// An array path under the store root as the user gives it: relative, no `.` or `..`, no
/// name the store layout reserves (`crate::runs::RESERVED`).
pub(crate) fn array_path(p: &str) -> anyhow::Result<String> {
    let t = p.trim_matches('/');
    if t.is_empty()
        || p.starts_with('/')
        || t.split('/').any(|s| s == ".." || s == "." || s.is_empty())
    {
        bail!(
            "{p:?} is not an array path in the store (a relative path such as job/X, without . or ..)"
        );
    }
    if let Some(s) = t.split('/').find(|s| crate::runs::reserved(s)) {
        bail!("{p:?}: {}", crate::runs::reserved_error(s));
    }
    Ok(t.to_string())
}

/// Opens the array at `path`, or says plainly that there is none.
pub(crate) async fn open(store: &Store, path: &str) -> anyhow::Result<StoredArray> {
    match StoredArray::open(store, path).await {
        Ok(a) => Ok(a),
        Err(nums_layout::Error::NotFound { .. }) => {
            bail!("no array {path} in store {}", store.spec())
        }
        Err(e) => Err(e.into()),
    }
}

/// `get` (the CLI's): writes a stored array to a `.npy` or `.csv` file, streamed, holding
/// the file's output lease (as a run writing it would: one writer at a time). Ctrl-C stops
/// it, leaving the file as it was (and no partial file).
pub(crate) async fn get(store: &Store, path: &str, file: &Path) -> anyhow::Result<ArrayMeta> {
    let arr = open(store, path).await?;
    let file = std::path::absolute(file).context("no working directory")?;
    let target = match file.extension().and_then(|e| e.to_str()) {
        Some("npy") => crate::job::Target::Npy(file.clone()),
        Some("csv") => crate::job::Target::Csv(file.clone()),
        _ => bail!("{}: get writes a .npy or a .csv file", file.display()),
    };
    let (spec, key) = crate::run::lease_beside(&target);
    let lease = crate::runs::OutputLease::take(
        &Store::open(&spec)?,
        &key,
        &file.display().to_string(),
        "nums-cloud get",
        "get",
    )
    .await?;
    // Listening from now on: a Ctrl-C once the partial file exists must find the handler.
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let written = async {
        lease.check().await?;
        // A partial file a killed writer left.
        let _ = std::fs::remove_file(crate::npy::partial_path(&file));
        let write = async {
            match target {
                crate::job::Target::Csv(_) => export_csv(&arr, store, &file).await,
                _ => export_npy(&arr, store, &file).await,
            }
        };
        // Dropping the write removes its partial file.
        tokio::select! {
            r = write => r,
            _ = sigint.recv() => {
                Err(anyhow!("interrupted (Ctrl-C): {} is as it was", file.display()))
            }
        }
    }
    .await;
    lease.release().await?;
    written.map(|()| arr.meta)
}

/// `put`: a job that imports `file` as `<job>/<name>` (`path` = `job/name`), run as any
/// job is (checked, staged, committed whole), with `block` if given.
pub(crate) fn put_job(
    spec: &StoreSpec,
    file: &Path,
    path: &str,
    block: Option<&[u64]>,
    load_keys: &str,
) -> anyhow::Result<crate::job::Job> {
    let (job, name) = path
        .split_once('/')
        .filter(|(_, n)| !n.contains('/'))
        .ok_or_else(|| {
            anyhow!("{path:?}: put takes JOB/NAME (an array NAME under the job prefix JOB)")
        })?;
    if !crate::job::is_identifier(name) {
        bail!("{name:?}: an array name is an identifier (letters, digits, '_')");
    }
    let file = std::path::absolute(file).context("no working directory")?;
    if !file.exists() {
        bail!("{}: no such file", file.display());
    }
    let toml_str = |s: &str| serde_json::to_string(s).expect("string");
    let mut text = format!(
        "name = {}\n[storage]\nurl = {}\n",
        toml_str(job),
        toml_str(&spec.url)
    );
    if let Some(e) = &spec.endpoint {
        text += &format!("endpoint = {}\n", toml_str(e));
    }
    let block = block
        .map(|b| {
            format!(
                ", block = [{}]",
                b.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            )
        })
        .unwrap_or_default();
    text += &format!(
        "[arrays]\n{name} = {{ load = {}{block}{load_keys} }}\n[outputs]\n{name} = {}\n",
        toml_str(&file.to_string_lossy()),
        toml_str(&format!("{}/{path}", spec.url.trim_end_matches('/')))
    );
    let cwd = std::env::current_dir().context("no working directory")?;
    Ok(crate::job::Job::parse(
        &cwd.join(format!("put-{job}.toml")),
        &text,
    )?)
}

/// What `rm` would delete: every object of the arrays (or of the whole job), refusing a
/// job another driver is running.
pub(crate) async fn rm_targets(
    store: &Store,
    arrays: &[String],
    job: Option<&str>,
) -> anyhow::Result<Vec<(String, usize)>> {
    let mut out = Vec::new();
    if let Some(j) = job {
        let j = array_path(j)?;
        if j.contains('/') {
            bail!("{j:?}: --job takes a job name");
        }
        if let Some(b) = store.get_opt(&crate::runs::lease_key(&j)).await? {
            let l: crate::runs::Lease = serde_json::from_slice(&b).context("_lease.json")?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            if l.expires > now {
                bail!(
                    "job {j} is being run (run {}, pid {} on {}); stop it first",
                    l.run,
                    l.pid,
                    l.host
                );
            }
        }
        let n = store.list(&j).await?.len();
        if n == 0 {
            bail!("no job {j} in store {}", store.spec());
        }
        out.push((j, n));
    }
    for a in arrays {
        let p = array_path(a)?;
        open(store, &p).await?;
        let n = store.list(&p).await?.len();
        out.push((p, n));
    }
    Ok(out)
}

/// Human-readable `ls` table.
pub(crate) fn ls_table(infos: &[ArrayInfo]) -> String {
    let mut rows = vec![[
        "array".to_string(),
        "shape".into(),
        "dtype".into(),
        "block".into(),
        "stored".into(),
        "ratio".into(),
        "job (run)".into(),
    ]];
    for i in infos {
        let dims = |v: &[u64]| {
            format!(
                "({})",
                v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            )
        };
        rows.push([
            i.path.clone(),
            dims(&i.shape),
            i.dtype.clone(),
            dims(&i.block),
            crate::report::human(i.stored_bytes),
            format!("{:.2}", i.compression_ratio),
            match (&i.job, &i.run) {
                (Some(j), Some(r)) => format!("{j} ({r})"),
                (Some(j), None) => j.clone(),
                _ => "-".into(),
            },
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|r| {
            r.iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
                + "\n"
        })
        .collect()
}

/// The values of a whole (small) array as a Block, in C order: for previews and tests.
pub(crate) async fn read_small(arr: &StoredArray, store: &Store) -> anyhow::Result<Block> {
    let shape: Vec<usize> = arr.meta.shape.iter().map(|&s| s as usize).collect();
    let mut slabs = Vec::new();
    for_each_row_slab(arr, store, |s| {
        slabs.push(s.clone());
        Ok(())
    })
    .await?;
    if shape.is_empty() {
        return Ok(slabs.pop().expect("one slab"));
    }
    if slabs.is_empty() {
        // An empty array (no block-rows): nothing to concatenate.
        return Ok(Block::zeros(arr.meta.dtype, &shape));
    }
    macro_rules! cat {
        ($v:ident, $t:ty) => {{
            let views: Vec<_> = slabs
                .iter()
                .map(|s| match s {
                    Block::$v(a) => Ok(a.view()),
                    _ => Err(anyhow!("dtype")),
                })
                .collect::<anyhow::Result<_>>()?;
            Block::$v(ndarray::concatenate(Axis(0), &views)?.into_shape_with_order(IxDyn(&shape))?)
        }};
    }
    Ok(match arr.meta.dtype {
        DType::Float64 => cat!(F64, f64),
        DType::Float32 => cat!(F32, f32),
        DType::Int64 => cat!(I64, i64),
        DType::Bool => cat!(Bool, bool),
    })
}
