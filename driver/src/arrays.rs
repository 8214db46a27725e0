//! Stored arrays from the command line (`nums-cloud ls show get put rm`): listing, NumPy's
//! preview (reading only the blocks it prints), `get` through the streamed writers of
//! `export`, `put` as a job of one array.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use ndarray::IxDyn;
use nums_layout::zarr::ATTRIBUTES_KEY;
use nums_layout::{ArrayMeta, Block, DType, Store, StoreSpec, StoredArray};
use serde::Serialize;

use crate::human::{LINE_WIDTH, Printed, format_values, nest};

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
    /// For an input file a run imported (and later runs reuse while it is unchanged):
    /// the file.
    pub imported_from: Option<String>,
}

/// The arrays stored under `prefix` (runs' staging areas left out), sorted by path.
pub(crate) async fn list(store: &Store, prefix: &str) -> anyhow::Result<Vec<ArrayInfo>> {
    let imports: BTreeMap<String, String> = crate::runs::imports(store)
        .await?
        .into_iter()
        .map(|(_, i)| (i.array, i.file))
        .collect();
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
            imported_from: imports.get(&path).cloned(),
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
            let b = crate::export::read(arr, store, &bidx).await?;
            blocks.insert(bidx.clone(), b);
        }
        let b = &blocks[&bidx];
        let local: Vec<usize> = g
            .iter()
            .zip(&m.block)
            .map(|(&x, &b)| (x % b) as usize)
            .collect();
        values.push(nums_layout::with_block!(b, a => crate::human::printed(a[IxDyn(&local)])));
    }
    let values = format_values(values);
    let width = values.iter().map(String::len).max().unwrap_or(1);
    let cut: Vec<bool> = m
        .shape
        .iter()
        .map(|&n| summarise && n > 2 * EDGE_ITEMS as u64)
        .collect();
    // NumPy's repr: the closing `)` counts against the line width.
    let body = nest(&values, &shape, &cut, width, "array(".len(), LINE_WIDTH - 1);
    // What the values do not say (NumPy's `extras`): the shape of a summarised array,
    // then a dtype other than the default of its kind; on a line of their own when they
    // would pass the line width.
    let mut extras = Vec::new();
    if summarise {
        extras.push(format!(
            "shape=({})",
            m.shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
                + if m.ndim() == 1 { "," } else { "" }
        ));
    }
    // NumPy names the dtype unless it is the default of its kind.
    if !matches!(
        m.dtype,
        DType::Float64 | DType::Int64 | DType::Bool | DType::Complex128
    ) {
        extras.push(format!("dtype={}", m.dtype.name()));
    }
    if extras.is_empty() {
        return Ok(format!("array({body})"));
    }
    let text = format!("array({body},");
    let extra = extras.join(", ") + ")";
    let last_line = text.len() - text.rfind('\n').map_or(0, |i| i + 1);
    let spacer = if last_line + extra.len() + 1 > LINE_WIDTH {
        format!("\n{}", " ".repeat("array(".len()))
    } else {
        " ".into()
    };
    Ok(format!("{text}{spacer}{extra}"))
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

/// Opens the array at `path`, or says plainly that there is none, and what to try.
pub(crate) async fn open(store: &Store, path: &str) -> anyhow::Result<StoredArray> {
    match StoredArray::open(store, path).await {
        Ok(a) => Ok(a),
        Err(nums_layout::Error::NotFound { .. }) => {
            let all = list(store, "").await.unwrap_or_default();
            let name = path.rsplit('/').next().unwrap_or(path);
            let job = path.split('/').next().unwrap_or(path);
            let like: Vec<&str> = all
                .iter()
                .map(|i| i.path.as_str())
                .filter(|p| p.rsplit('/').next() == Some(name) || p.starts_with(&format!("{job}/")))
                .collect();
            let hint = if like.is_empty() {
                KEPT.to_string()
            } else {
                format!("the store holds {}", shown(&like))
            };
            bail!("no array {path} in store {}: {hint}", store.spec())
        }
        Err(e) => Err(e.into()),
    }
}

/// Why the store holds no array a user expects after a job.
const KEPT: &str = "a job keeps in the store only the outputs its [outputs] put there (a path \
     such as nums-data/JOB/ARRAY); outputs written to files (.npy, .csv) or elsewhere are not \
     in it. `nums-cloud run --keep` also keeps a copy of every output at JOB/ARRAY";

/// Up to 8 paths, for a message.
fn shown(paths: &[&str]) -> String {
    let mut s = paths.iter().take(8).copied().collect::<Vec<_>>().join(", ");
    if paths.len() > 8 {
        s += &format!(" and {} more", paths.len() - 8);
    }
    s
}

/// Why `ls` found no array under `prefix` (the store exists), and what to try.
pub(crate) async fn why_none(store: &Store, prefix: &str) -> anyhow::Result<String> {
    let all = list(store, "").await?;
    let paths: Vec<&str> = all.iter().map(|i| i.path.as_str()).collect();
    Ok(if paths.is_empty() {
        format!("no arrays in store {}: {KEPT}", store.spec())
    } else {
        format!(
            "no arrays under {}/ in store {}; it holds {}",
            prefix.trim_matches('/'),
            store.spec(),
            shown(&paths)
        )
    })
}

/// `get` (the CLI's): writes a stored array to a `.npy`, `.csv` or `.parquet` file, streamed, holding
/// the file's output lease (as a run writing it would: one writer at a time). Ctrl-C stops
/// it, leaving the file as it was (and no partial file).
pub(crate) async fn get(store: &Store, path: &str, file: &Path) -> anyhow::Result<ArrayMeta> {
    let arr = open(store, path).await?;
    let file = std::path::absolute(file).context("no working directory")?;
    let target = match file.extension().and_then(|e| e.to_str()) {
        Some("npy") => crate::job::Target::Npy(file.clone()),
        Some("csv") => crate::job::Target::Csv(file.clone()),
        Some("parquet") => crate::job::Target::Parquet(file.clone()),
        _ => bail!(
            "{}: get writes a .npy, .csv or .parquet file",
            file.display()
        ),
    };
    let (spec, key) = crate::export::lease_beside(&target);
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
                crate::job::Target::Csv(_) => {
                    crate::export::export_csv(&arr, store, &file, None).await
                }
                crate::job::Target::Parquet(_) => {
                    crate::export::export_parquet(&arr, store, &file, None).await
                }
                _ => crate::export::export_npy(&arr, store, &file).await,
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
    // No job file exists: errors name the command and the file put (line 0: none), and
    // the flags rather than the keys (`put_error`).
    let mut job = crate::job::Job::parse(&cwd.join(format!("put-{job}.toml")), &text)
        .map_err(|e| put_job_error(e, &file))?;
    job.file = std::path::PathBuf::from(format!("nums-cloud put {}", file.display()));
    job.name_line = 0;
    job.storage_line = 0;
    job.arrays.iter_mut().for_each(|a| a.line = 0);
    job.outputs.iter_mut().for_each(|o| o.line = 0);
    Ok(job)
}

/// An error of `put`'s job in the words of the command line: the command and its file
/// instead of a job file, the flag instead of the key.
pub(crate) fn put_error(mut e: anyhow::Error, file: &Path) -> anyhow::Error {
    if let Some(j) = e.downcast_mut::<crate::job::JobError>() {
        *j = put_job_error(j.clone(), file);
    }
    e
}

fn put_job_error(mut j: crate::job::JobError, file: &Path) -> crate::job::JobError {
    let file = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    j.file = std::path::PathBuf::from(format!("nums-cloud put {}", file.display()));
    j.line = 0;
    j.key = match j.key.split('.').collect::<Vec<_>>().as_slice() {
        ["arrays", _, key] if *key != "load" => format!("--{key}"),
        ["storage", ..] => "--storage".into(),
        _ => String::new(),
    };
    j
}

/// What `rm` deletes: prefixes (arrays, a job, its uploaded inputs) with their objects,
/// and the entries of the index of imports that would name what is gone.
#[derive(Debug, Default)]
pub(crate) struct RmTargets {
    pub prefixes: Vec<(String, usize)>,
    pub index: Vec<String>,
}

/// What `rm` would delete: every object of the arrays (or of the whole job; with
/// `imports`, the inputs runs imported, of the job or of every job), refusing a job
/// another driver is running.
pub(crate) async fn rm_targets(
    store: &Store,
    arrays: &[String],
    job: Option<&str>,
    imports: bool,
) -> anyhow::Result<RmTargets> {
    let mut out = Vec::new();
    let index = crate::runs::imports(store).await?;
    if imports {
        let mine = |p: &str| job.is_none_or(|j| p.starts_with(&format!("{j}/")));
        for (_, i) in index.iter().filter(|(_, i)| mine(&i.array)) {
            let n = store.list(&i.array).await?.len();
            if n > 0 && !out.iter().any(|(p, _): &(String, usize)| p == &i.array) {
                out.push((i.array.clone(), n));
            }
        }
        // Local inputs uploaded for Lambda's functions (a run uploads them again).
        let (_, jobs) = store.list_dir("").await?;
        for j in jobs
            .iter()
            .filter(|j| !crate::runs::reserved(j) && mine(&format!("{j}/")))
        {
            let uploads = format!("{j}/{}", crate::runs::INPUTS);
            let n = store.list(&uploads).await?.len();
            if n > 0 {
                out.push((uploads, n));
            }
        }
        let targets = RmTargets {
            index: index
                .iter()
                .filter(|(_, i)| mine(&i.array))
                .map(|(k, _)| k.clone())
                .collect(),
            prefixes: out,
        };
        if targets.prefixes.is_empty() && targets.index.is_empty() {
            bail!(
                "no imported inputs in store {}{}",
                store.spec(),
                job.map(|j| format!(" for job {j}")).unwrap_or_default()
            );
        }
        return Ok(targets);
    }
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
    // The index's entries of what goes.
    let gone = |a: &str| {
        out.iter()
            .any(|(p, _)| a == p || a.starts_with(&format!("{p}/")))
    };
    Ok(RmTargets {
        index: index
            .iter()
            .filter(|(_, i)| gone(&i.array))
            .map(|(k, _)| k.clone())
            .collect(),
        prefixes: out,
    })
}

/// Human-readable `ls` table.
/// `ls`'s tables: the arrays jobs made, then apart the input files runs imported.
pub(crate) fn ls_table(infos: &[ArrayInfo]) -> String {
    let (imports, made): (Vec<ArrayInfo>, Vec<ArrayInfo>) = infos
        .iter()
        .cloned()
        .partition(|i| i.imported_from.is_some());
    let mut s = String::new();
    if !made.is_empty() {
        s += &table(&made, "job (run)");
    }
    if !imports.is_empty() {
        if !s.is_empty() {
            s.push('\n');
        }
        s += "imported inputs (read in place by later runs while the file is unchanged; \
              `nums-cloud rm --imports` removes them):\n";
        s += &table(&imports, "imported from");
    }
    s
}

/// One table of arrays; the last column is `last` (the job and run, or the file).
pub(crate) fn table(infos: &[ArrayInfo], last: &str) -> String {
    let mut rows = vec![[
        "array".to_string(),
        "shape".into(),
        "dtype".into(),
        "block".into(),
        "stored".into(),
        "ratio".into(),
        last.into(),
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
            crate::human::human(i.stored_bytes),
            format!("{:.2}", i.compression_ratio),
            match (&i.imported_from, &i.job, &i.run) {
                (Some(f), _, _) if last != "job (run)" => f.clone(),
                (_, Some(j), Some(r)) => format!("{j} ({r})"),
                (_, Some(j), None) => j.clone(),
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
