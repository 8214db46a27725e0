//! A run's outputs, written where the job file says: `.npy` and CSV files streamed by the
//! driver block-row by block-row (it holds one row of blocks at a time, never a whole
//! array); `.npy` files on S3 written by the functions as the parts of one multipart
//! upload, in a stage of their own; Zarr arrays elsewhere copied chunk by chunk. And the
//! lease beside each output that no other writer may write at once.

use std::path::Path;

use anyhow::{Context, anyhow, bail};
use futures::{StreamExt, TryStreamExt};
use ndarray::SliceInfoElem;
use nums_layout::{ArrayMeta, Block, Store, StoreSpec, StoredArray};

use crate::graph::{self, Graph, NodeOp};
use crate::job::{Job, OutputDef, Target};
use crate::stage::Stages;
use crate::tasks;

/// One output as the summary shows it: its name, where it went, its metadata, and its
/// values when it is small enough to print.
pub(crate) type Output = (String, Target, ArrayMeta, Option<Block>);

/// Writes output `o`, stored at `arr` when the run is done, where the job file says;
/// `names` its columns' names where they are known ([`job_column_names`]), else Parquet's
/// columns get `parquet_names` (a job's: `NAME_0`, ...). A CSV output has a header line
/// when the job asks, or with `read_with_names` (a loaded input's own names).
pub(crate) async fn write_output(
    stages: &Stages<'_>,
    probes: &graph::Probes,
    o: &OutputDef,
    arr: StoredArray,
    (names, read_with_names): (Option<Vec<String>>, bool),
    parquet_names: Option<Vec<String>>,
) -> anyhow::Result<Output> {
    let about = || format!("output {}", o.name);
    if let Target::NpyStore { store: spec, key } = &o.target {
        export_npy_to_s3(stages, probes, &arr, spec, key, &o.name)
            .await
            .with_context(about)?;
    }
    let header = match (o.header, &names) {
        (Some(true), n) => Some(
            n.clone()
                .unwrap_or_else(|| default_names(&o.name, &arr.meta)),
        ),
        (None, Some(n)) if read_with_names => Some(n.clone()),
        _ => None,
    };
    // A Parquet file's columns always have names: the caller's when none are known.
    let names = match (&o.target, names) {
        (Target::Parquet(_), None) => parquet_names,
        (_, n) => n,
    };
    let preview = export(&arr, &o.target, stages.store, header, names)
        .await
        .with_context(about)?;
    Ok((o.name.clone(), o.target.clone(), arr.meta, preview))
}

/// The names of the columns of a job's array `id`: its loaded inputs' (a CSV with
/// `header = true`, a Parquet file) through what keeps columns ([`Graph::column_names`]).
pub(crate) fn job_column_names(
    job: &Job,
    probes: &graph::Probes,
    g: &Graph,
    id: graph::NodeId,
) -> Option<Vec<String>> {
    let roots = job
        .arrays
        .iter()
        .filter(|a| matches!(a.source, crate::job::Source::Load { .. }))
        .filter_map(|a| {
            let names = probe_columns(probes.0.get(&a.name)?)?;
            Some((*g.named.get(&a.name)?, names))
        })
        .collect();
    g.column_names(id, &|n| &g.nodes[n].op, &roots)
}

/// The names of the columns an input is read with (a CSV's header, a Parquet file's), in
/// the order it keeps them; `None` when they have none.
pub(crate) fn probe_columns(p: &graph::Probe) -> Option<Vec<String>> {
    match p {
        graph::Probe::Csv { index, usecols, .. } if !index.names.is_empty() => Some(
            usecols
                .iter()
                .map(|&c| index.names[c as usize].clone())
                .collect(),
        ),
        graph::Probe::Parquet { names, columns, .. } => {
            Some(columns.iter().map(|&c| names[c as usize].clone()).collect())
        }
        _ => None,
    }
}

/// Column names for an array whose columns have none: its own name for a 1-D array,
/// `NAME_0`, `NAME_1`, ... for the columns of a 2-D one.
pub(crate) fn default_names(name: &str, meta: &ArrayMeta) -> Vec<String> {
    match meta.ndim() {
        2 => (0..meta.shape[1]).map(|j| format!("{name}_{j}")).collect(),
        _ => vec![name.to_string()],
    }
}

/// The leases a run of `job` takes for its outputs that are not its own arrays (those
/// are the job lease's), so that no other writer writes one at once: `(store, key, output)`.
pub(crate) fn output_leases(
    job: &Job,
    store: &Store,
) -> anyhow::Result<Vec<(Store, String, String)>> {
    let mut leases = Vec::new();
    for o in job.outputs.iter().filter(|o| !writes_home(job, store, o)) {
        let (spec, key) = lease_beside(&o.target);
        let s = Store::open_counted(&spec, &store.counters)
            .with_context(|| format!("output {}", o.name))?;
        leases.push((s, key, o.target.place().display().to_string()));
    }
    Ok(leases)
}

/// The store and key of the lease of an output at `target`: `.<name>.nums-cloud-lease.json`
/// in the folder the output goes in, in the output's own store.
pub(crate) fn lease_beside(target: &Target) -> (StoreSpec, String) {
    let (spec, path) = match target {
        Target::Npy(p) | Target::Csv(p) | Target::Parquet(p) => {
            let dir = p.parent().unwrap_or(Path::new("/"));
            let spec = StoreSpec {
                url: url::Url::from_directory_path(dir)
                    .map(|u| u.to_string())
                    .unwrap_or_default(),
                endpoint: None,
            };
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            (spec, name.into_owned())
        }
        Target::NpyStore { store, key: path } | Target::Zarr { store, path } => {
            (store.clone(), path.clone())
        }
    };
    let key = match path.rsplit_once('/') {
        Some((dir, name)) => format!("{dir}/.{name}.nums-cloud-lease.json"),
        None => format!(".{path}.nums-cloud-lease.json"),
    };
    (spec, key)
}

/// Whether output `o` is the job's own array `<job>/<name>` in the job's store.
pub(crate) fn writes_home(job: &Job, store: &Store, o: &OutputDef) -> bool {
    matches!(&o.target, Target::Zarr { store: spec, path }
        if graph::relative_to(store.spec(), spec, path) == Some(format!("{}/{}", job.name, o.name)))
}

/// A `.npy` file the main stage's functions write themselves, each block into its place
/// (no copy of the array in the store, no pass of the driver over it): an output of the
/// local backend (its functions see the driver's files) of at least [`BY_FUNCTIONS`].
/// Made before the main stage is planned, renamed into place after the commit.
pub(crate) struct FileOutput {
    pub name: String,
    path: std::path::PathBuf,
    file: crate::npy::BlockFile,
}

/// The least size of an output its functions write to its `.npy` file: smaller ones the
/// driver writes (and prints).
const BY_FUNCTIONS: u64 = 1 << 20;

/// The outputs of `job` its functions write to their `.npy` files themselves.
pub(crate) fn by_functions<'a>(
    job: &'a Job,
    g: &Graph,
) -> impl Iterator<Item = (&'a OutputDef, &'a Path)> {
    job.outputs.iter().filter_map(move |o| {
        let Target::Npy(path) = &o.target else {
            return None;
        };
        let meta = &g.nodes[*g.named.get(&o.name)?].meta;
        let bytes = meta.len() * meta.dtype.size() as u64;
        (job.compute.backend == crate::job::Backend::Local
            && meta.ndim() > 0
            && bytes >= BY_FUNCTIONS)
            .then_some((o, path.as_path()))
    })
}

/// Makes the partial files of the outputs the functions write ([`by_functions`]): on a
/// resumed run, the ones the run it resumes left are kept (their blocks written are done).
pub(crate) fn make_file_outputs(
    job: &Job,
    g: &Graph,
    resume: bool,
) -> anyhow::Result<Vec<FileOutput>> {
    by_functions(job, g)
        .map(|(o, path)| {
            let meta = &g.nodes[g.named[&o.name]].meta;
            let header = crate::npy::header(meta.dtype, &meta.shape);
            let len = header.len() as u64 + meta.len() * meta.dtype.size() as u64;
            let file = crate::npy::BlockFile::open(path, &header, len, resume)
                .map_err(|e| anyhow!(e))
                .with_context(|| format!("output {}", o.name))?;
            Ok(FileOutput {
                name: o.name.clone(),
                path: path.to_path_buf(),
                file,
            })
        })
        .collect()
}

/// `g` (the main stage's graph) with the blocks of the outputs in `files` written into
/// their files by the functions: a node per output whose blocks (one int64 per block
/// written, named after the file, so that a resumed run never takes another file's
/// blocks as written) are the stage's; the output itself is then stored only where
/// another invocation reads it, unless it is kept in the store too (`keep`, or another
/// output made from its stored copy). `files`: `None` for a plan, which makes no file.
pub(crate) fn with_file_outputs(
    job: &Job,
    mut g: Graph,
    files: Option<&[FileOutput]>,
    keep: bool,
) -> Graph {
    let fused: Vec<(&OutputDef, &Path)> = by_functions(job, &g).collect();
    for (o, path) in &fused {
        let x = g.named[&o.name];
        let (partial, identity) = match files.and_then(|f| f.iter().find(|f| f.name == o.name)) {
            Some(f) => (f.file.path().to_path_buf(), f.file.identity()),
            None if files.is_some() => continue,
            None => (crate::npy::partial_path(path), 0),
        };
        let m = &g.nodes[x].meta;
        let grid = m.grid();
        let meta = ArrayMeta::new(grid.clone(), vec![1; grid.len()], nums_layout::DType::Int64);
        let offset = crate::npy::header(m.dtype, &m.shape).len() as u64;
        let tag = format!("export-{}-{identity:08x}", o.name);
        let id = g.nodes.len();
        g.nodes.push(graph::Node {
            id,
            meta,
            op: NodeOp::ExportNpyFile {
                x,
                path: partial.to_string_lossy().into_owned(),
                offset,
            },
            name: Some(tag.clone()),
            persist: true,
            def: Some(o.name.clone()),
        });
        g.named.insert(tag, id);
        // Stored too where the store keeps it, another output is made from its stored
        // copy, or it is not the main stage's to make.
        let stored = job.outputs.iter().any(|other| {
            g.named.get(&other.name) == Some(&x) && !fused.iter().any(|(f, _)| f.name == other.name)
        });
        let op = &g.nodes[x].op;
        let made_here =
            !op.is_import() && !matches!(op, NodeOp::InPlace { .. } | NodeOp::Fit { .. });
        if !keep && !stored && made_here {
            g.nodes[x].persist = false;
        }
    }
    g
}

impl FileOutput {
    /// Renames the file the functions wrote into place: the output as the summary shows it.
    pub(crate) fn finish(self, o: &OutputDef, meta: ArrayMeta) -> anyhow::Result<Output> {
        self.file
            .finish(&self.path)
            .map_err(|e| anyhow!(e))
            .with_context(|| format!("output {}", o.name))?;
        Ok((o.name.clone(), o.target.clone(), meta, None))
    }
}

/// Writes an output to a `.npy` file on S3. One of at most 5 MiB is written by the driver
/// with one PUT; a larger one by the functions in a stage of its own, each task writing
/// whole rows as one part of a multipart upload the driver starts and completes (parts of
/// at least 5 MiB, at most 10,000 of them), so the file appears whole or not at all (an
/// upload that fails is aborted).
async fn export_npy_to_s3(
    st: &Stages<'_>,
    probes: &graph::Probes,
    arr: &StoredArray,
    spec: &StoreSpec,
    key: &str,
    name: &str,
) -> anyhow::Result<()> {
    const MIN_PART: u64 = 5 << 20;
    let dst = Store::open_counted(spec, &st.store.counters)?;
    let meta = &arr.meta;
    let header = crate::npy::header(meta.dtype, &meta.shape);
    let size = meta.dtype.size() as u64;
    if meta.ndim() == 0 || meta.len() * size <= MIN_PART {
        let mut bytes = header;
        bytes.extend_from_slice(&arr.read_whole(st.store).await?.le_bytes());
        return Ok(dst.put(key, bytes.into()).await?);
    }
    // Rows per part: about 64 MiB (a sixteenth of memory_mb if less: a re-blocking task
    // holds the blocks it reads and its part, three times over), at least 5 MiB.
    let row = meta.shape[1..].iter().product::<u64>() * size;
    let target = ((st.cfg.compute.memory_mb << 20) / 16).clamp(MIN_PART, 64 << 20);
    let rows = (target / row)
        .max(MIN_PART.div_ceil(row))
        .max(meta.shape[0].div_ceil(10_000))
        .min(meta.shape[0]);
    let parts = meta.shape[0].div_ceil(rows);
    let upload = dst.create_multipart(key).await?;
    let etags = async {
        let mut g = Graph::default();
        let node = |g: &Graph, meta: ArrayMeta, op: NodeOp| graph::Node {
            id: g.nodes.len(),
            meta,
            op,
            name: None,
            persist: false,
            def: Some(name.to_string()),
        };
        let n = node(
            &g,
            meta.clone(),
            NodeOp::InPlace {
                path: arr.path.clone(),
                sparse: false,
                foreign: None,
            },
        );
        g.nodes.push(n);
        let mut block = meta.shape.clone();
        block[0] = rows;
        if meta.block != block {
            let m = ArrayMeta::new(meta.shape.clone(), block, meta.dtype);
            let n = node(&g, m, NodeOp::Rechunk { x: 0 });
            g.nodes.push(n);
        }
        let etag_meta = ArrayMeta::new(
            vec![parts, nums_layout::batch::ETAG_BYTES as u64],
            vec![1, nums_layout::batch::ETAG_BYTES as u64],
            nums_layout::DType::Int64,
        );
        let op = NodeOp::ExportNpy {
            x: g.nodes.len() - 1,
            dest: spec.clone(),
            key: key.to_string(),
            upload: upload.clone(),
            header,
        };
        let mut n = node(&g, etag_meta, op);
        // Named after the upload: a resumed run never takes another upload's parts as done.
        let tag = format!(
            "export-{name}-{:08x}",
            crate::runs::fnv(upload.as_bytes()) as u32
        );
        (n.name, n.persist) = (Some(tag.clone()), true);
        let id = n.id;
        g.named.insert(tag.clone(), id);
        g.nodes.push(n);
        st.run_graph(&tag, &g, probes).await?;
        let prefix = st.prefix()?;
        let tags = StoredArray::new(&tasks::node_path(&prefix, &g, id), g.nodes[id].meta.clone())?;
        let Block::I64(values) = tags.read_whole(st.store).await? else {
            return Err(anyhow!("the parts' ETags are not int64"));
        };
        values
            .rows()
            .into_iter()
            .map(|r| {
                let b = Block::I64(r.to_owned().into_dyn());
                nums_function::export::etag_of(&b).map_err(|e| anyhow!(e))
            })
            .collect::<anyhow::Result<Vec<String>>>()
    }
    .await;
    let done = match etags {
        Ok(etags) => dst
            .complete_multipart(key, &upload, etags)
            .await
            .map_err(Into::into),
        Err(e) => Err(e),
    };
    if done.is_err() {
        let _ = dst.abort_multipart(key, &upload).await;
    }
    done
}

/// Writes an output (a CSV's `header` line and a Parquet file's column `names`, when
/// known); returns the values when the array is small enough to print.
async fn export(
    arr: &StoredArray,
    target: &Target,
    store: &Store,
    header: Option<Vec<String>>,
    names: Option<Vec<String>>,
) -> anyhow::Result<Option<Block>> {
    const PREVIEW: u64 = 64;
    match target {
        Target::Npy(path) | Target::Csv(path) | Target::Parquet(path) => {
            match target {
                Target::Csv(_) => export_csv(arr, store, path, header.as_deref()).await?,
                Target::Parquet(_) => export_parquet(arr, store, path, names.as_deref()).await?,
                _ => export_npy(arr, store, path).await?,
            }
            if arr.meta.len() <= PREVIEW {
                return Ok(Some(values(arr, store).await?));
            }
            Ok(None)
        }
        Target::NpyStore { .. } => {
            // Written by `export_npy_to_s3`.
            if arr.meta.len() <= PREVIEW {
                return Ok(Some(values(arr, store).await?));
            }
            Ok(None)
        }
        Target::Zarr { store: spec, path }
            if graph::relative_to(store.spec(), spec, path).as_deref()
                == Some(arr.path.as_str()) =>
        {
            // The output already is where it should be.
            Ok(None)
        }
        Target::Zarr { store: spec, path } => {
            let dst = Store::open_counted(spec, &store.counters)?;
            // Checked again now: it may have changed since the run began.
            crate::plan::replaceable(&dst, path)
                .await
                .map_err(|e| anyhow!(e))?;
            let out = StoredArray::new(path, arr.meta.clone())?;
            // As a commit does: the old array goes (its metadata first), the chunks come,
            // the metadata last, so a reader never sees old and new chunks mixed.
            dst.delete(&out.metadata_key()).await?;
            dst.delete_prefix(path).await?;
            // Same format on both sides: copy the encoded chunks as they are.
            futures::stream::iter(arr.meta.blocks())
                .map(|idx| {
                    let (dst, src) = (&dst, store);
                    let (from, to) = (arr.block_key(&idx), out.block_key(&idx));
                    async move {
                        let bytes = src.get(&from).await?;
                        dst.put(&to, bytes).await
                    }
                })
                .buffer_unordered(8)
                .try_collect::<Vec<()>>()
                .await?;
            // (An array a session computed in its own process has none: described now.)
            match store.get_opt(&arr.metadata_key()).await? {
                Some(src_meta) => dst.put(&out.metadata_key(), src_meta).await?,
                None => out.write_metadata(&dst).await?,
            }
            if arr.meta.len() <= PREVIEW {
                return Ok(Some(arr.read_whole(store).await?));
            }
            Ok(None)
        }
    }
}

/// The values of a small output, for the summary (a missing chunk of an array written by
/// others is its fill value).
async fn values(arr: &StoredArray, store: &Store) -> anyhow::Result<Block> {
    Ok(if arr.complete {
        arr.read_whole(store).await?
    } else {
        arr.read_whole_or_fill(store).await?
    })
}

/// Blocks read at once while streaming, and the bytes they may hold.
const READ_AHEAD: usize = 8;

const READ_AHEAD_BYTES: u64 = 64 << 20;

/// Calls `f` with each block-row of the array (all blocks whose index on axis 0 is `i`,
/// assembled: rows `i * block[0]..` of the whole array), in order. A 0-d array is one call.
/// Missing blocks of arrays nums-cloud wrote are errors; of others, the fill value.
/// One slab's memory serves every block-row of its shape, and a block-row of one block is
/// passed as it is. (Decoding on the blocking pool was tried: its threads' malloc arenas
/// held freed blocks, doubling the driver's peak memory for little time.)
async fn for_each_row_slab(
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
            if !slab.assign(&info, &b) {
                bail!("a block's dtype differs from its array's");
            }
        }
        f(slab)?;
    }
    Ok(())
}

pub(crate) async fn read(arr: &StoredArray, store: &Store, idx: &[u64]) -> anyhow::Result<Block> {
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

/// Refuses an array a CSV or Parquet file cannot hold (`what`: the kind of file).
fn one_or_two_d(arr: &StoredArray, what: &str) -> anyhow::Result<()> {
    if arr.meta.ndim() == 0 || arr.meta.ndim() > 2 {
        bail!(
            "{}: a {what} file holds a 1-D or 2-D array; this one has shape {:?}",
            arr.path,
            arr.meta.shape
        );
    }
    Ok(())
}

/// Writes a 1-D or 2-D array to a CSV file (comma-separated, after a `header` line of
/// column names if given) row by row, as `np.savetxt(path, a, delimiter=",")` would
/// with full precision.
pub(crate) async fn export_csv(
    arr: &StoredArray,
    store: &Store,
    path: &Path,
    header: Option<&[String]>,
) -> anyhow::Result<()> {
    one_or_two_d(arr, "CSV")?;
    let mut w = crate::npy::CsvWriter::create(path, header).map_err(|e| anyhow!(e))?;
    for_each_row_slab(arr, store, |slab| w.write(slab).map_err(|e| anyhow!(e))).await?;
    w.finish().map_err(|e| anyhow!(e))
}

/// Writes a 1-D or 2-D array to a Parquet file, one row group per block-row, its columns
/// named `names` (default: [`default_names`] of the array's last path segment).
pub(crate) async fn export_parquet(
    arr: &StoredArray,
    store: &Store,
    path: &Path,
    names: Option<&[String]>,
) -> anyhow::Result<()> {
    one_or_two_d(arr, "Parquet")?;
    let names = match names {
        Some(n) => n.to_vec(),
        None => default_names(arr.path.rsplit('/').next().unwrap_or("x"), &arr.meta),
    };
    let mut w =
        crate::npy::ParquetWriter::create(path, arr.meta.dtype, &names).map_err(|e| anyhow!(e))?;
    for_each_row_slab(arr, store, |slab| w.write(slab).map_err(|e| anyhow!(e))).await?;
    w.finish().map_err(|e| anyhow!(e))
}
