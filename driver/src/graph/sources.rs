//! Where input arrays come from. [`probe`] is the only I/O of checking a job: it reads
//! what every `load` holds (a `.npy` header, a CSV's row index, a Zarr array's
//! metadata) before the graph is built, so that building the graph is pure.

use std::path::Path;
use std::sync::Arc;

use crate::job::Backend;
use nums_layout::IoCounters;
use nums_layout::batch::CSV_PIECE;

use super::*;

/// What one `load` input holds, learnt before the graph is built.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    /// A `.npy` file (its header only): `key` in the store `source` (its folder, or its
    /// bucket).
    Npy {
        path: String,
        source: StoreSpec,
        key: String,
        shape: Vec<u64>,
        dtype: DType,
        header: crate::npy::NpyHeader,
        /// A local file the run uploads to `key` of `source` (the job's store) first.
        upload: Option<std::path::PathBuf>,
        /// What the file holds now (`Store::version`): a run resumes only work made from
        /// the same, and fails if it changes while the run reads it.
        version: String,
    },
    /// A CSV file of numbers: where its data rows are (no field is parsed before the run).
    Csv {
        path: String,
        source: StoreSpec,
        key: String,
        shape: Vec<u64>,
        index: std::sync::Arc<nums_function::csv_index::CsvIndex>,
        /// The field separator.
        delimiter: u8,
        /// The file's columns the array keeps, in order (resolved from `usecols`).
        usecols: Vec<u64>,
        /// The array's dtype: float64, or the promotion of the kept columns' `dtypes`.
        dtype: DType,
        /// The dtype each kept column parses as (empty: none has its own).
        dtypes: Vec<DType>,
        /// As for `Npy`.
        upload: Option<std::path::PathBuf>,
        /// As for `Npy`.
        version: String,
    },
    /// A Parquet file (its footer only): its numeric columns (or those `usecols` names)
    /// as one array.
    Parquet {
        path: String,
        source: StoreSpec,
        key: String,
        shape: Vec<u64>,
        dtype: DType,
        /// The file's columns the array keeps, in order (resolved from `usecols`).
        columns: Vec<u64>,
        /// Every column of the file: its name, and its kind or why it cannot be read.
        names: Vec<String>,
        kinds: Vec<Result<DType, String>>,
        /// The footer's metadata: (start, length) in the file.
        metadata: (u64, u64),
        /// Per row group: rows, and the compressed bytes of each column chunk.
        row_groups: std::sync::Arc<Vec<(u64, Vec<u64>)>>,
        /// As for `Npy`.
        upload: Option<std::path::PathBuf>,
        /// As for `Npy`.
        version: String,
    },
    /// A Zarr v2 or v3 array. `in_place` is the path the functions read it at, in place:
    /// under the job's store root when it lies there and is encoded as nums-cloud
    /// encodes; else (`foreign`: any store, codecs, chunk keys) in its own store, in its
    /// own chunks. `None`: imported (see [`IN_PLACE_MAX_CHUNKS`]).
    /// `sparse`: not written by nums-cloud (chunks never written are its fill value).
    /// `stamp` identifies the metadata read, and a foreign array's `chunks` every chunk it
    /// held, to notice the array changing while a run reads it.
    Zarr {
        store: StoreSpec,
        path: String,
        meta: ArrayMeta,
        in_place: Option<String>,
        sparse: bool,
        stamp: u64,
        foreign: Option<Arc<nums_layout::Foreign>>,
    },
}

impl Probe {
    pub fn shape(&self) -> &[u64] {
        match self {
            Probe::Npy { shape, .. } | Probe::Csv { shape, .. } | Probe::Parquet { shape, .. } => {
                shape
            }
            Probe::Zarr { meta, .. } => &meta.shape,
        }
    }

    /// Where the input is (the file as the job file names it, or the Zarr array's URL)
    /// and what it held when probed: a file's [`nums_layout::Store::version`], a Zarr
    /// array's `zarr.json` stamp. A run resumes only work made from the same, and fails
    /// if it changes while the run reads it.
    pub fn version(&self) -> (String, String) {
        match self {
            Probe::Npy { path, version, .. }
            | Probe::Csv { path, version, .. }
            | Probe::Parquet { path, version, .. } => (path.clone(), version.clone()),
            Probe::Zarr {
                store,
                path,
                stamp,
                foreign,
                ..
            } => (
                zarr_url(store, path),
                zarr_version(*stamp, foreign.as_ref().and_then(|f| f.chunks)),
            ),
        }
    }

    /// What the input holds now, as [`Probe::version`] says it (`None`: it is gone).
    pub async fn version_now(
        &self,
        job: &Job,
        io: &Arc<IoCounters>,
    ) -> Result<Option<String>, nums_layout::Error> {
        match self {
            Probe::Zarr {
                store,
                path,
                foreign,
                ..
            } => {
                let s = nums_layout::Store::open_counted(store, io)?;
                match nums_layout::StoredArray::open_stamped(&s, path).await {
                    Ok((arr, stamp)) => {
                        let now = match foreign.as_ref().and_then(|f| f.chunks) {
                            Some(_) => Some(arr.chunks_fingerprint(&s).await?),
                            None => None,
                        };
                        Ok(Some(zarr_version(stamp, now)))
                    }
                    Err(nums_layout::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            }
            _ => {
                // Where the probe read it (a local file, before any upload for Lambda).
                let (source, key) = split_zarr_location(&self.version().0, &job.storage);
                let s = nums_layout::Store::open_counted(&source, io)?;
                Ok(s.version(&key).await?.map(|(_, v)| v))
            }
        }
    }

    /// The local file a run uploads first (the lambda backend), and its key in the store.
    pub fn upload(&self) -> Option<(&std::path::Path, &str)> {
        match self {
            Probe::Npy {
                upload: Some(file),
                key,
                ..
            }
            | Probe::Csv {
                upload: Some(file),
                key,
                ..
            }
            | Probe::Parquet {
                upload: Some(file),
                key,
                ..
            } => Some((file, key)),
            _ => None,
        }
    }
}

/// What a Zarr input held: its metadata's stamp, and a foreign array's chunks'.
fn zarr_version(stamp: u64, chunks: Option<u64>) -> String {
    match chunks {
        Some(c) => format!("zarr.json {stamp:016x}, chunks {c:016x}"),
        None => format!("zarr.json {stamp:016x}"),
    }
}

/// A foreign Zarr array of more chunks than this is imported into nums-cloud's blocks
/// (each import task reads the chunks its block overlaps) rather than read in place: its
/// chunks would be the blocks, and an array may have at most this many
/// ([`super::shape::MAX_BLOCKS_PER_ARRAY`]).
pub(crate) const IN_PLACE_MAX_CHUNKS: u64 = super::shape::MAX_BLOCKS_PER_ARRAY;

/// The foreign Zarr arrays `g` reads in place whose chunks are not the ones they had when
/// they were opened, by URL: what a compute read of them may mix old and new chunks.
pub(crate) async fn foreign_changed(
    g: &Graph,
    io: &Arc<IoCounters>,
) -> Result<Vec<String>, nums_layout::Error> {
    let mut seen = std::collections::HashSet::new();
    let mut changed = Vec::new();
    for n in &g.nodes {
        let NodeOp::InPlace {
            path,
            foreign: Some(f),
            ..
        } = &n.op
        else {
            continue;
        };
        let Some(then) = f.chunks else { continue };
        if !seen.insert((f.store.clone(), path.clone())) {
            continue;
        }
        let s = nums_layout::Store::open_counted(&f.store, io)?;
        let arr = nums_layout::StoredArray::foreign(path, f, &n.meta)?;
        if arr.chunks_fingerprint(&s).await? != then {
            changed.push(zarr_url(&f.store, path));
        }
    }
    Ok(changed)
}

/// The probes of a job's inputs, by array name.
#[derive(Debug, Clone, Default)]
pub struct Probes(pub HashMap<String, Probe>);

/// The row indexes of the pieces after the first of large CSV inputs, counted by the
/// functions before the job is checked (`csv_count`), by the input's path.
#[derive(Debug, Clone, Default)]
pub struct Counted(pub HashMap<String, Vec<(u64, nums_function::csv_index::CsvIndex)>>);

/// Reads what every `load` of the job holds. Errors name the file, line and key.
pub async fn probe(job: &Job) -> Result<Probes, JobError> {
    probe_with(job, &Counted::default(), &Default::default()).await
}

/// [`probe`], taking the rows of the CSV inputs in `counted` from there; the requests it
/// makes count into `io`.
pub async fn probe_with(
    job: &Job,
    counted: &Counted,
    io: &Arc<IoCounters>,
) -> Result<Probes, JobError> {
    let mut out = HashMap::new();
    for def in &job.arrays {
        let Source::Load { path, csv } = &def.source else {
            continue;
        };
        let key = |k: &str| format!("arrays.{}.{k}", def.name);
        if let Some(p) = reuse_import(job, path, csv, def.dtype, io).await {
            out.insert(def.name.clone(), p);
            continue;
        }
        let p = probe_one(job, path, csv, counted.0.get(path), io)
            .await
            .map_err(|(k, m)| job.err(def.line, key(k), m))?;
        out.insert(def.name.clone(), p);
    }
    Ok(Probes(out))
}

/// How a `load` of a file is read, as the index of imports tells imports apart: the
/// dtype asked for and the CSV or Parquet options.
pub(crate) fn import_options(csv: &crate::job::CsvOptions, dtype: Option<DType>) -> String {
    format!("{csv:?} dtype {dtype:?}")
}

/// Whether a `load` is of a file the functions import (rather than a Zarr array).
pub(crate) fn is_file(path: &str) -> bool {
    [".npy", ".csv", ".parquet"]
        .iter()
        .any(|x| path.ends_with(x))
}

/// The array an earlier run imported the file at `path` to (read with `csv` and
/// `dtype`), when the store's index names one, that array is as the import left it, and
/// the file holds what it held then: a probe that reads it in place. `None` otherwise
/// (any error included: the file is then imported as usual).
pub(crate) async fn reuse_import(
    job: &Job,
    path: &str,
    csv: &crate::job::CsvOptions,
    dtype: Option<DType>,
    io: &Arc<IoCounters>,
) -> Option<Probe> {
    if !is_file(path) {
        return None;
    }
    let options = import_options(csv, dtype);
    let store = nums_layout::Store::open_counted(&job.storage, io).ok()?;
    let mut entries =
        crate::runs::imports_under(&store, &crate::runs::import_folder(path, &options))
            .await
            .ok()?;
    if entries.is_empty() {
        return None;
    }
    let (source, key) = split_zarr_location(path, &job.storage);
    let (_, version) = nums_layout::Store::open_counted(&source, io)
        .ok()?
        .version(&key)
        .await
        .ok()??;
    // The job's own import first, then any other job's.
    let own = format!("{}/", job.name);
    entries.sort_by_key(|(_, e)| !e.array.starts_with(&own));
    let mut found = None;
    for (_, entry) in entries {
        if entry.file != path || entry.options != options || entry.version != version {
            continue;
        }
        let Ok((arr, stamp)) = nums_layout::StoredArray::open_stamped(&store, &entry.array).await
        else {
            continue;
        };
        if stamp == entry.stamp && arr.native && arr.complete {
            found = Some((entry, arr, stamp));
            break;
        }
    }
    let (entry, arr, stamp) = found?;
    tracing::debug!(
        "{path}: unchanged since it was imported to {}; read there",
        entry.array
    );
    Some(Probe::Zarr {
        store: job.storage.clone(),
        path: entry.array.clone(),
        meta: arr.meta,
        in_place: Some(entry.array),
        sparse: false,
        stamp,
        foreign: None,
    })
}

/// An input's probe; an error names the key it is about (`load`, or a CSV option).
async fn probe_one(
    job: &Job,
    path: &str,
    csv: &crate::job::CsvOptions,
    counted: Option<&Vec<(u64, nums_function::csv_index::CsvIndex)>>,
    io: &Arc<IoCounters>,
) -> Result<Probe, (&'static str, String)> {
    if path.ends_with(".csv") {
        return probe_csv_file(job, path, csv, counted, io).await;
    }
    let mut p = probe_load(job, path, io).await.map_err(|m| ("load", m))?;
    if let Probe::Parquet { .. } = p {
        p = select_parquet(p, csv.usecols.as_deref())?;
    }
    Ok(p)
}

async fn probe_csv_file(
    job: &Job,
    path: &str,
    csv: &crate::job::CsvOptions,
    counted: Option<&Vec<(u64, nums_function::csv_index::CsvIndex)>>,
    io: &Arc<IoCounters>,
) -> Result<Probe, (&'static str, String)> {
    let load = |m: String| ("load", m);
    let local = !path.starts_with("s3://");
    let (source, key) = split_zarr_location(path, &job.storage);
    let s = nums_layout::Store::open_counted(&source, io).map_err(|e| load(e.to_string()))?;
    let (size, version) = s
        .version(&key)
        .await
        .map_err(|e| load(format!("cannot read {path}: {e}")))?
        .ok_or_else(|| load(format!("cannot read {path}: no such file")))?;
    let mut p = probe_csv(&s, path, source.clone(), key, size, csv, counted).await?;
    if let Probe::Csv { version: v, .. } = &mut p {
        *v = version;
    }
    if local {
        stage_upload(job, path, &mut p);
    }
    Ok(p)
}

async fn probe_load(job: &Job, path: &str, io: &Arc<IoCounters>) -> Result<Probe, String> {
    let local = !path.starts_with("s3://");
    if path.ends_with(".csv") || path.ends_with(".npy") || path.ends_with(".parquet") {
        let (source, key) = split_zarr_location(path, &job.storage);
        let s = nums_layout::Store::open_counted(&source, io).map_err(|e| e.to_string())?;
        let (size, version) = s
            .version(&key)
            .await
            .map_err(|e| format!("cannot read {path}: {e}"))?
            .ok_or_else(|| format!("cannot read {path}: no such file"))?;
        let mut p = if path.ends_with(".parquet") {
            probe_parquet(&s, path, source.clone(), key, size).await
        } else {
            probe_npy(&s, path, source.clone(), key, size).await
        }?;
        if let Probe::Npy { version: v, .. } | Probe::Parquet { version: v, .. } = &mut p {
            *v = version;
        }
        if local {
            stage_upload(job, path, &mut p);
        }
        return Ok(p);
    }
    let (store, apath) = split_zarr_location(path, &job.storage);
    let s = nums_layout::Store::open_counted(&store, io).map_err(|e| e.to_string())?;
    let opened = nums_layout::StoredArray::open_stamped(&s, &apath).await;
    let (arr, stamp) = match opened {
        Ok(a) => a,
        Err(nums_layout::Error::NotFound { .. }) => {
            // An array of a job whose commit is under way (or was cut short) has no
            // metadata until the commit ends: say so rather than "not found".
            let committing = if local {
                Path::new(path)
                    .parent()
                    .is_some_and(|d| d.join(crate::runs::commit_key("")).exists())
            } else {
                let job_dir = apath.rsplit_once('/').map_or("", |(d, _)| d);
                !job_dir.is_empty()
                    && s.head(&crate::runs::commit_key(job_dir))
                        .await
                        .ok()
                        .flatten()
                        .is_some()
            };
            return Err(if committing {
                format!(
                    "{path}: a run of its job is replacing this array (or that run's commit was \
                     cut short: run the job again, or with --resume, to finish it)"
                )
            } else if local {
                format!(
                    "{path} is neither a .npy, .csv or .parquet file nor a Zarr array (no zarr.json or .zarray)"
                )
            } else {
                format!("{path}: no Zarr array there (no zarr.json or .zarray)")
            });
        }
        Err(e) => return Err(e.to_string()),
    };
    // nums-cloud's own arrays in the job's store are read as they are; any other (another
    // tool's codecs or chunk keys, Zarr v2, another store) in its own chunks, decoded as
    // its metadata says; one of too many chunks to be blocks is imported.
    let (in_place, foreign) = match relative_to(&job.storage, &store, &apath) {
        Some(rel) if arr.native => (Some(rel), None),
        _ if arr.meta.num_blocks() > IN_PLACE_MAX_CHUNKS => (None, None),
        _ => {
            let f = arr.foreign_in(&s).await.map_err(|e| e.to_string())?;
            (Some(apath.clone()), Some(Arc::new(f)))
        }
    };
    Ok(Probe::Zarr {
        store,
        path: apath,
        sparse: !arr.complete,
        meta: arr.meta,
        in_place,
        stamp,
        foreign,
    })
}

/// A `.npy` file's header (one or two ranged reads), checked against the file's size.
async fn probe_npy(
    s: &nums_layout::Store,
    path: &str,
    source: StoreSpec,
    key: String,
    size: u64,
) -> Result<Probe, String> {
    let bad = |m: String| format!("{path} is not a .npy file: {m}");
    let read = |n: u64| s.get_range(&key, 0..n.min(size));
    let mut head = read(4096).await.map_err(|e| e.to_string())?;
    let header = match crate::npy::parse_header(&head) {
        Err(m) if m.starts_with("needs ") => {
            let n: u64 = m["needs ".len()..]
                .split(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            head = read(n).await.map_err(|e| e.to_string())?;
            crate::npy::parse_header(&head).map_err(bad)?
        }
        r => r.map_err(bad)?,
    };
    let dtype = header.dtype().map_err(|m| format!("{path}: {m}"))?;
    if header.file_size() != size {
        return Err(format!(
            "{path}: the header says {} bytes of data, the file has {} (truncated or not a .npy file)",
            header.file_size() - header.offset,
            size.saturating_sub(header.offset)
        ));
    }
    Ok(Probe::Npy {
        path: path.to_string(),
        source,
        key,
        shape: header.shape.clone(),
        dtype,
        header,
        upload: None,
        version: String::new(),
    })
}

/// A Parquet file's footer: its numeric columns' shape and dtype, and its row groups.
async fn probe_parquet(
    s: &nums_layout::Store,
    path: &str,
    source: StoreSpec,
    key: String,
    size: u64,
) -> Result<Probe, String> {
    use nums_function::parquet::{TAIL, describe, metadata_len};
    let read = |r: std::ops::Range<u64>| {
        let key = &key;
        async move {
            s.get_range(key, r)
                .await
                .map_err(|e| format!("cannot read {path}: {e}"))
        }
    };
    if size < TAIL + 4 {
        return Err(format!("{path} is not a Parquet file (too short)"));
    }
    let len = metadata_len(&read(size - TAIL..size).await?, path)?;
    let start = size
        .checked_sub(TAIL + len)
        .filter(|&st| st >= 4)
        .ok_or_else(|| format!("{path}: the Parquet footer's length is past the file's start"))?;
    let d = describe(&read(start..start + len).await?, path)?;
    // Every column; `select_parquet` then keeps those `usecols` names (shape, dtype).
    Ok(Probe::Parquet {
        path: path.to_string(),
        source,
        key,
        shape: vec![d.rows, d.columns.len() as u64],
        dtype: DType::Float64,
        columns: (0..d.columns.len() as u64).collect(),
        names: d.columns,
        kinds: d.kinds,
        metadata: (start, len),
        row_groups: std::sync::Arc::new(d.row_groups),
        upload: None,
        version: String::new(),
    })
}

/// A Parquet probe with the columns `usecols` names (indices, negative from the end, or
/// names; `None`: all of them): its shape (one column: 1-D) and dtype (NumPy's promotion
/// of those columns' kinds). A column nums-cloud cannot read is an error only when kept.
fn select_parquet(
    p: Probe,
    usecols: Option<&[crate::job::ColumnRef]>,
) -> Result<Probe, (&'static str, String)> {
    let Probe::Parquet {
        path,
        source,
        key,
        shape,
        names,
        kinds,
        metadata,
        row_groups,
        upload,
        version,
        ..
    } = p
    else {
        return Ok(p);
    };
    let (columns, what) = match usecols {
        None => ((0..names.len() as u64).collect::<Vec<_>>(), "load"),
        Some(cols) => (
            cols.iter()
                .map(|c| resolve_column(c, names.len() as u64, &names, &path, "columns"))
                .collect::<Result<Vec<u64>, String>>()
                .map_err(|m| ("usecols", m))?,
            "usecols",
        ),
    };
    let picked: Vec<usize> = columns.iter().map(|&c| c as usize).collect();
    let d = nums_function::parquet::Described {
        rows: shape[0],
        columns: names.clone(),
        kinds: kinds.clone(),
        row_groups: Vec::new(),
    };
    let dtype = d.dtype(&picked).map_err(|m| {
        let hint = if what == "load" {
            " (usecols = [...] keeps the columns it names)"
        } else {
            ""
        };
        (what, format!("{m}{hint}"))
    })?;
    let shape = if columns.len() == 1 {
        vec![shape[0]]
    } else {
        vec![shape[0], columns.len() as u64]
    };
    Ok(Probe::Parquet {
        path,
        source,
        key,
        shape,
        dtype,
        columns,
        names,
        kinds,
        metadata,
        row_groups,
        upload,
        version,
    })
}

/// Lambda's functions cannot read this machine's files: with a bucket for the store, the
/// run uploads a local input file there first and they read it from there.
fn stage_upload(job: &Job, path: &str, p: &mut Probe) {
    if job.compute.backend != Backend::Lambda || !job.storage.url.starts_with("s3://") {
        return;
    }
    let name = std::path::Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (src, k, up) = match p {
        Probe::Npy {
            source,
            key,
            upload,
            ..
        }
        | Probe::Csv {
            source,
            key,
            upload,
            ..
        }
        | Probe::Parquet {
            source,
            key,
            upload,
            ..
        } => (source, key, upload),
        Probe::Zarr { .. } => return,
    };
    *up = Some(std::path::PathBuf::from(path));
    *src = job.storage.clone();
    *k = format!("{}/{}/{name}", job.name, crate::runs::INPUTS);
}

/// Pieces of the row index read and scanned at once (at most 4 x 4 MiB held).
const CSV_PIECES_AT_ONCE: usize = 4;

/// A CSV file's row index, the header's names and `usecols` resolved to the file's
/// columns: the file cut into pieces at line starts, each piece read (ranged reads, several
/// at once) and scanned as it comes, the pieces' indexes merged.
async fn probe_csv(
    s: &nums_layout::Store,
    path: &str,
    source: StoreSpec,
    key: String,
    size: u64,
    opts: &crate::job::CsvOptions,
    counted: Option<&Vec<(u64, nums_function::csv_index::CsvIndex)>>,
) -> Result<Probe, (&'static str, String)> {
    use futures::{StreamExt, TryStreamExt};
    let load = |m: String| ("load", m);
    let read = |e: nums_layout::Error| load(format!("cannot read {path}: {e}"));
    // Several reads at once pay on S3 (each waits on the network); a local file is read
    // at disk speed one piece at a time, and object_store's local reads run on blocking
    // threads whose allocator arenas would each keep pieces (the driver's RSS grew by
    // half on the 400 MiB test with 4 at once).
    let at_once = if s.spec().url.starts_with("file:") {
        1
    } else {
        CSV_PIECES_AT_ONCE
    };
    // Counted by the functions: the first piece only is scanned here (for the header).
    let last = match counted {
        Some(_) => 2.min(size.div_ceil(CSV_PIECE)),
        None => size.div_ceil(CSV_PIECE),
    };
    // Each nominal cut moved to the next line start (a line longer than a piece merges
    // pieces).
    let cuts: Vec<u64> = futures::stream::iter((1..last).map(|i| i * CSV_PIECE))
        .map(|b| nums_function::csv_index::next_line_start(s, &key, b, size))
        .buffered(at_once)
        .try_collect()
        .await
        .map_err(read)?;
    let mut starts = vec![0u64];
    for c in cuts {
        if c < size && c > *starts.last().expect("0") {
            starts.push(c);
        }
    }
    let ends: Vec<u64> = match counted {
        Some(_) => vec![starts.get(1).copied().unwrap_or(size)],
        None => starts.iter().skip(1).copied().chain([size]).collect(),
    };
    starts.truncate(ends.len());
    let (delimiter, header, k) = (opts.delimiter, opts.header, key.as_str());
    let mut pieces: Vec<(u64, nums_function::csv_index::CsvIndex)> =
        futures::stream::iter(starts.into_iter().zip(ends))
            .map(|(a, b)| async move {
                let bytes = s.get_range(k, a..b).await?;
                // Scanned here (memchr over 4 MiB: a few ms): on the blocking pool, each
                // thread's allocator arena kept its pieces and the driver's RSS grew.
                let mut scan =
                    nums_function::csv_index::CsvScanner::new(delimiter, header && a == 0);
                scan.feed(&bytes);
                Ok::<_, nums_layout::Error>((a, scan.finish()))
            })
            .buffered(at_once)
            .try_collect()
            .await
            .map_err(read)?;
    pieces.extend(counted.into_iter().flatten().cloned());
    let index = nums_function::csv_index::CsvIndex::merge(pieces, size);
    if header && index.names.is_empty() && index.rows > 0 {
        return Err(load(format!(
            "{path}: no header line in its first {} MiB (header = true takes the first line that is not a comment)",
            CSV_PIECE >> 20
        )));
    }
    if index.rows == 0 {
        return Err(("load", format!("{path}: no numbers")));
    }
    // Every row is checked against the header as the functions read it; the first one
    // here, so that a header of too few or too many names is check's error, not run's.
    if header && index.first_fields != index.columns {
        let line = index.marks.first().map_or(0, |m| m.2);
        let mut names = index.names[..index.names.len().min(8)].join(", ");
        if index.names.len() > 8 {
            names.push_str(", ...");
        }
        return Err(load(format!(
            "{path}:{line}: {} columns, but the header (line {}) names {}: {names}",
            index.first_fields, index.header_line, index.columns
        )));
    }
    let resolve =
        |c: &crate::job::ColumnRef| resolve_column(c, index.columns, &index.names, path, "header");
    let mut usecols = match &opts.usecols {
        None => (0..index.columns).collect(),
        Some(cols) => cols
            .iter()
            .map(resolve)
            .collect::<Result<Vec<u64>, String>>()
            .map_err(|m| ("usecols", m))?,
    };
    if opts.file_order {
        usecols.sort_unstable();
        usecols.dedup();
    }
    // A column named twice takes its last dtype, as a dict would.
    let mut by_column = HashMap::new();
    for (c, dt) in &opts.dtypes {
        by_column.insert(resolve(c).map_err(|m| ("dtype", m))?, *dt);
    }
    let dtypes: Vec<DType> = match by_column.is_empty() {
        true => Vec::new(),
        false => (usecols.iter())
            .map(|c| by_column.get(c).copied().unwrap_or(DType::Float64))
            .collect(),
    };
    let dtype = dtypes
        .iter()
        .copied()
        .reduce(DType::promote)
        .unwrap_or(DType::Float64);
    let shape = if usecols.len() == 1 {
        vec![index.rows]
    } else {
        vec![index.rows, usecols.len() as u64]
    };
    Ok(Probe::Csv {
        path: path.to_string(),
        source,
        key,
        shape,
        index: std::sync::Arc::new(index),
        delimiter: opts.delimiter,
        usecols,
        dtype,
        dtypes,
        upload: None,
        version: String::new(),
    })
}

/// The file column `usecols` names: an index (negative from the end) or a name among the
/// file's `names` (of its `header` line, or its Parquet `columns`).
fn resolve_column(
    c: &crate::job::ColumnRef,
    columns: u64,
    names: &[String],
    path: &str,
    what: &str,
) -> Result<u64, String> {
    use crate::job::ColumnRef;
    let n = columns as i64;
    match c {
        ColumnRef::Index(i) => {
            let at = if *i < 0 { n + i } else { *i };
            if (0..n).contains(&at) {
                Ok(at as u64)
            } else {
                Err(format!(
                    "column {i} is out of range: {path} has {n} columns (0 to {}, or -{n} to -1)",
                    n - 1
                ))
            }
        }
        ColumnRef::Name(name) => names
            .iter()
            .position(|h| h == name)
            .map(|p| p as u64)
            .ok_or_else(|| {
                format!(
                    "no column {name:?} in the {what} of {path}; it names {}",
                    names
                        .iter()
                        .map(|h| format!("{h:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }),
    }
}

/// Splits a Zarr location into its store and the array path in it.
pub fn split_zarr_location(loc: &str, storage: &StoreSpec) -> (StoreSpec, String) {
    if let Some(rest) = loc.strip_prefix("s3://") {
        let (bucket, path) = rest.split_once('/').unwrap_or((rest, ""));
        (
            StoreSpec {
                url: format!("s3://{bucket}"),
                endpoint: storage.endpoint.clone(),
            },
            path.trim_matches('/').to_string(),
        )
    } else {
        // A link the job file names (a data file linked from elsewhere) is followed: its
        // folder is then the store the input is read from (a store never follows links
        // out of its folder).
        let named = std::path::Path::new(loc);
        let linked = std::fs::symlink_metadata(named).is_ok_and(|m| m.is_symlink());
        let real = linked.then(|| std::fs::canonicalize(named).ok()).flatten();
        let p = real.as_deref().unwrap_or(named);
        let parent = p.parent().unwrap_or(std::path::Path::new("/"));
        let url = url::Url::from_directory_path(parent)
            .map(|u| u.to_string())
            .unwrap_or_default();
        (
            StoreSpec {
                url,
                endpoint: None,
            },
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        )
    }
}

/// The URL of array `path` of `store`.
fn zarr_url(store: &StoreSpec, path: &str) -> String {
    format!(
        "{}/{}",
        store.url.trim_end_matches('/'),
        path.trim_matches('/')
    )
}

/// The path of `path` in `store` relative to the job's store root, if it lies inside it.
pub fn relative_to(job_store: &StoreSpec, store: &StoreSpec, path: &str) -> Option<String> {
    if job_store.endpoint != store.endpoint {
        return None;
    }
    let full = format!(
        "{}/{}",
        store.url.trim_end_matches('/'),
        path.trim_matches('/')
    );
    let root = format!("{}/", job_store.url.trim_end_matches('/'));
    full.strip_prefix(&root)
        .map(str::to_string)
        .filter(|r| !r.is_empty())
}
