//! The job file (`job.toml`): the public contract. Parsing keeps every value's line so
//! that each error names the file, the line and the key.
//!
//! A job file is user input, so its size is bounded before anything else happens: at most
//! [`MAX_JOB_FILE_BYTES`], values nested at most [`MAX_TOML_DEPTH`] deep (checked before
//! the TOML parser, which recurses per level), at most [`MAX_ARRAYS`] arrays, and at most
//! 2^50 elements per array. Job and array names are folder and key names in the store: at
//! most [`MAX_NAME_CHARS`] characters, and never a name the store layout reserves
//! (`crate::runs::RESERVED`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::{self, MAX_ELEMENTS, Setting};
pub use crate::config::{Backend, Compute, SchedulerKind};
use nums_layout::{DType, StoreSpec};
use serde::Deserialize;
use toml::Spanned;

/// An error in a job file, located by file, line and key.
#[derive(Debug, Clone, PartialEq)]
pub struct JobError {
    pub file: PathBuf,
    pub line: usize,
    pub key: String,
    pub message: String,
}

impl std::fmt::Display for JobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Line 0: the error is about the file, or no file holds the job (`put`'s).
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}", self.line)?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for JobError {}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStorage {
    url: Option<Spanned<String>>,
    endpoint: Option<Spanned<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCompute {
    backend: Option<Backend>,
    workers: Option<Spanned<i64>>,
    memory_mb: Option<Spanned<i64>>,
    timeout_seconds: Option<Spanned<i64>>,
    scheduler: Option<SchedulerKind>,
    function: Option<String>,
    function_tier_percent: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    name: Option<Spanned<String>>,
    storage: Option<RawStorage>,
    compute: Option<RawCompute>,
    arrays: Option<Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
    outputs: Option<BTreeMap<String, Spanned<toml::Value>>>,
}

/// What a job file may leave out: nums-cloud's own defaults, or a deployment's (read from
/// `--infra terraform-output.json`). A key the job file sets always wins.
#[derive(Debug, Clone, PartialEq)]
pub struct Defaults {
    pub backend: Backend,
    pub function: String,
    pub storage_url: String,
    pub memory_mb: u64,
    /// `compute.workers` when the job file leaves it out: a deployment's reserved
    /// concurrency, capped at 1,000; else [`config::default_workers`].
    pub workers: Option<u64>,
}

impl Default for Defaults {
    fn default() -> Defaults {
        Defaults {
            backend: Backend::Local,
            function: "nums-cloud".into(),
            storage_url: "file://nums-data".into(),
            memory_mb: config::DEFAULT_MEMORY_MB,
            workers: None,
        }
    }
}

/// How an array is defined.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Random {
        dist: nums_layout::RandomDist,
        shape: Vec<u64>,
        seed: u64,
    },
    Full {
        shape: Vec<u64>,
        value: nums_layout::Scalar,
    },
    /// A `.npy`, `.csv` or `.parquet` file (absolute path or `s3://` URL) or a Zarr v3
    /// array (folder or `s3://` URL); `csv`: how a `.csv` is read.
    Load {
        path: String,
        csv: CsvOptions,
    },
    Expr {
        text: String,
    },
    /// A model's parameter in the job of one pass of a fit (`iterate`); never in a job file.
    Param {
        shape: Vec<u64>,
    },
    /// In the job of one pass of a fit (`iterate`), never in a job file: the sums of the
    /// model's `loss` over the rows of arrays `x` and `y` at the candidate parameters `w`
    /// ([d, k]) and `b` ([k]), in one sweep over each block of rows, with `hessian` (k = 1)
    /// the Hessian sums too
    /// ([`Kernel::GlmSums`](nums_layout::batch::Kernel::GlmSums)).
    GlmSums {
        loss: nums_layout::batch::GlmLoss,
        x: String,
        y: String,
        w: String,
        b: Option<String>,
        hessian: bool,
    },
}

impl Source {
    /// What makes the array, in the job file's words (recorded in the stored array's
    /// attributes).
    pub fn describe(&self) -> String {
        match self {
            Source::Random { dist, shape, seed } => {
                format!("random {} {shape:?} seed {seed}", dist.name())
            }
            Source::Full { shape, value } => format!("full {shape:?} value {value}"),
            Source::Load { path, .. } => format!("load {path}"),
            Source::Expr { text } => text.clone(),
            Source::Param { shape } => format!("parameter {shape:?}"),
            Source::GlmSums {
                loss,
                x,
                y,
                w,
                hessian,
                ..
            } => format!(
                "{loss:?} loss, gradient{} sums of {x} and {y} at {w}",
                if *hessian { " and Hessian" } else { "" }
            ),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ArrayDef {
    pub name: String,
    pub line: usize,
    pub source: Source,
    pub block: Option<Vec<u64>>,
    pub dtype: Option<DType>,
}

/// Where an output goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A local `.npy` file (absolute path).
    Npy(PathBuf),
    /// A local `.csv` file (absolute path) of a 1-D or 2-D array: comma-separated, every
    /// value in full precision (as `np.savetxt(f, a, delimiter=",")`), a header line of
    /// column names when the output asks (`OutputDef::header`).
    Csv(PathBuf),
    /// A local `.parquet` file (absolute path) of a 1-D or 2-D array: one named column per
    /// array column, one row group per block-row.
    Parquet(PathBuf),
    /// A `.npy` file in an S3 bucket (`s3://bucket/key.npy`), written by the functions as
    /// the parts of one multipart upload (it appears whole when the upload completes).
    NpyStore { store: StoreSpec, key: String },
    /// A Zarr v3 array in a store, at `path` under the store's root.
    Zarr { store: StoreSpec, path: String },
}

impl Target {
    /// The local file the driver writes, for the outputs that are one (`.npy`, `.csv`,
    /// `.parquet`).
    pub fn local_file(&self) -> Option<&Path> {
        match self {
            Target::Npy(p) | Target::Csv(p) | Target::Parquet(p) => Some(p),
            _ => None,
        }
    }

    /// Where the output lands, as one path to compare with other outputs': the file, the
    /// Zarr folder, or `s3://bucket/path` (lexically normalised: no `.` or `..`).
    pub fn place(&self) -> PathBuf {
        match self {
            Target::Npy(p) | Target::Csv(p) | Target::Parquet(p) => lexical(p),
            Target::NpyStore { store, key } => PathBuf::from(format!(
                "{}/{}",
                store.url.trim_end_matches('/'),
                lexical(Path::new(key)).display()
            )),
            Target::Zarr { store, path } => {
                match url::Url::parse(&store.url)
                    .ok()
                    .filter(|u| u.scheme() == "file")
                    .and_then(|u| u.to_file_path().ok())
                {
                    Some(root) => lexical(&root.join(path)),
                    None => PathBuf::from(format!(
                        "{}/{}",
                        store.url.trim_end_matches('/'),
                        path.trim_matches('/')
                    )),
                }
            }
        }
    }
}

/// `p` without `.` components and with each `..` taking off the component before it, as
/// the job file wrote the path (symbolic links are not followed).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// `p` with the part of it that exists resolved (symbolic links followed) and the rest
/// appended: where a path leads, even before the folders in it are made.
fn resolved(p: &Path) -> PathBuf {
    let p = lexical(p);
    let mut rest = Vec::new();
    let mut at = p.as_path();
    loop {
        if let Ok(mut real) = std::fs::canonicalize(at) {
            real.extend(rest.iter().rev());
            return real;
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return p,
        }
    }
}

/// Where a store or an output lies, to compare the two: a local path (resolved), or the
/// endpoint, bucket and key segments of an S3 location.
#[derive(Debug, PartialEq)]
enum Location {
    Local(PathBuf),
    S3 {
        endpoint: Option<String>,
        bucket: String,
        key: Vec<String>,
    },
}

impl Location {
    /// `path` under the root of `store`.
    fn of(store: &StoreSpec, path: &str) -> Location {
        if let Some(rest) = store.url.strip_prefix("s3://") {
            let mut segs = rest
                .split('/')
                .chain(path.split('/'))
                .filter(|s| !s.is_empty());
            return Location::S3 {
                endpoint: store.endpoint.clone(),
                bucket: segs.next().unwrap_or_default().to_string(),
                key: segs.map(str::to_string).collect(),
            };
        }
        let root = url::Url::parse(&store.url)
            .ok()
            .and_then(|u| u.to_file_path().ok())
            .unwrap_or_default();
        Location::Local(resolved(&root.join(path.trim_matches('/'))))
    }

    fn of_target(t: &Target) -> Location {
        match t {
            Target::Npy(p) | Target::Csv(p) | Target::Parquet(p) => Location::Local(resolved(p)),
            Target::NpyStore { store, key: path } | Target::Zarr { store, path } => {
                Location::of(store, path)
            }
        }
    }

    /// The segments of `inner` under `self`, when it lies there (empty: the same place).
    fn under(&self, inner: &Location) -> Option<Vec<String>> {
        match (self, inner) {
            (Location::Local(o), Location::Local(i)) => i.strip_prefix(o).ok().map(|r| {
                r.components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect()
            }),
            (
                Location::S3 {
                    endpoint: e1,
                    bucket: b1,
                    key: k1,
                },
                Location::S3 {
                    endpoint: e2,
                    bucket: b2,
                    key: k2,
                },
            ) if e1 == e2 && b1 == b2 && k2.starts_with(k1) => Some(k2[k1.len()..].to_vec()),
            _ => None,
        }
    }
}

/// Where an output may go, as it concerns the job's store: never a place that holds the
/// store, and inside the store only a Zarr array of the job's own (`<store>/<job>/<name>`,
/// `name` not reserved nor another of its arrays): the output replaces what is there, and
/// anything else (the store, another job's prefix or arrays, a run's state) would be
/// deleted with it.
fn check_output_place(
    storage: &StoreSpec,
    job: &str,
    arrays: &[ArrayDef],
    o: &OutputDef,
) -> Result<(), String> {
    let (store, out) = (Location::of(storage, ""), Location::of_target(&o.target));
    let place = o.target.place();
    if out.under(&store).is_some() {
        return Err(format!(
            "{} holds the job's store ({}): an output replaces one array, never a store or a folder of arrays",
            place.display(),
            storage.url
        ));
    }
    let Some(rel) = store.under(&out) else {
        return Ok(());
    };
    let why = match rel.as_slice() {
        _ if !matches!(o.target, Target::Zarr { .. }) => "a file".to_string(),
        [j, ..] if j != job => format!("in the prefix of job {j}"),
        [_] => "this job's prefix itself".into(),
        [_, n] if crate::runs::reserved(n) || n.starts_with('.') => {
            format!("a name the store layout reserves ({n})")
        }
        [_, n] if n != &o.name && arrays.iter().any(|a| &a.name == n) => {
            format!("where array {n} of this job is kept")
        }
        [_, _] => return Ok(()),
        _ => "a path below an array's".into(),
    };
    Err(format!(
        "{} is inside the job's store ({}) but is {why}: an output kept in the store is a Zarr array of the job's own, {}/{job}/{}",
        place.display(),
        storage.url.trim_end_matches('/'),
        storage.url.trim_end_matches('/'),
        o.name
    ))
}

/// The output suffixes nums-cloud writes, for errors: what each becomes.
const OUTPUT_SUFFIXES: &str = ".npy (a NumPy file, local or s3://), .csv (comma-separated text of a 1-D or 2-D array, local), .parquet (a Parquet file of a 1-D or 2-D array, local), .zarr or none (a Zarr v3 array folder, or an s3:// Zarr array)";

/// Refuses an output path whose suffix nums-cloud does not write (it would otherwise
/// become a Zarr folder named `x.h5`). `local`: a local path, where `.csv` and
/// `.parquet` are files too (`.npy` is a file anywhere).
fn check_output_suffix(dest: &str, path: &str, local: bool) -> Result<(), String> {
    let ext = Path::new(path)
        .extension()
        .map(|x| x.to_string_lossy().into_owned());
    match ext.as_deref() {
        None | Some("zarr") => Ok(()),
        Some("npy") => Ok(()),
        Some("csv" | "parquet") if local => Ok(()),
        Some(x @ ("csv" | "parquet")) => Err(format!(
            "{dest:?}: nums-cloud writes .{x} files on local paths only; write it to a local .{x} path, or to an s3:// .npy file or Zarr array (`nums-cloud get ARRAY FILE.{x}` writes a .{x} from it)"
        )),
        Some(x) => Err(format!(
            "{dest:?}: nums-cloud does not write .{x} files; an output's suffix is {OUTPUT_SUFFIXES}"
        )),
    }
}

#[derive(Debug, Clone)]
pub struct OutputDef {
    pub name: String,
    pub line: usize,
    pub target: Target,
    /// A `.csv` output's header line of column names: `Some` as the job file says
    /// (`header = true`), `None` when it does not (then: when the array is a loaded
    /// input whose columns have names).
    pub header: Option<bool>,
}

/// The keys of an output given as a table (`A = { path = "out/a.csv", header = true }`).
pub const OUTPUT_KEYS: &[&str] = &["path", "header"];

/// A parsed and resolved job file.
#[derive(Debug, Clone)]
pub struct Job {
    pub file: PathBuf,
    pub dir: PathBuf,
    pub name: String,
    pub name_line: usize,
    pub storage: StoreSpec,
    pub storage_line: usize,
    pub compute: Compute,
    pub arrays: Vec<ArrayDef>,
    pub outputs: Vec<OutputDef>,
}

impl Job {
    /// What the engine runs this job with: its `[compute]` and `[storage]`.
    pub fn engine(&self) -> config::EngineConfig {
        config::EngineConfig {
            compute: self.compute.clone(),
            storage: self.storage.clone(),
        }
    }

    /// A program of arrays with no job file (a session's, a fit's passes), run with `cfg`
    /// under the name `name` (its errors say it), its relative paths from `dir`.
    pub(crate) fn program(cfg: config::EngineConfig, name: &str, dir: &Path) -> Job {
        Job {
            file: PathBuf::from(name),
            dir: dir.to_path_buf(),
            name: name.to_string(),
            name_line: 0,
            storage: cfg.storage,
            storage_line: 0,
            compute: cfg.compute,
            arrays: Vec::new(),
            outputs: Vec::new(),
        }
    }

    pub fn err(&self, line: usize, key: impl Into<String>, message: impl Into<String>) -> JobError {
        JobError {
            file: self.file.clone(),
            line,
            key: key.into(),
            message: message.into(),
        }
    }

    /// Reads and checks a job file.
    pub fn load(path: &Path) -> Result<Job, JobError> {
        Job::load_with(path, &Defaults::default())
    }

    /// Reads and checks a job file; what it leaves out comes from `defaults`.
    pub fn load_with(path: &Path, defaults: &Defaults) -> Result<Job, JobError> {
        let fail = |message: String| JobError {
            file: path.to_path_buf(),
            line: 0,
            key: String::new(),
            message,
        };
        let file = std::fs::File::open(path)
            .map_err(|e| fail(format!("cannot read the job file: {e}")))?;
        // Read one byte past the limit, so that a huge file (or a device) is refused
        // without reading it all.
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut std::io::Read::take(file, MAX_JOB_FILE_BYTES as u64 + 1),
            &mut text,
        )
        .map_err(|e| fail(format!("cannot read the job file: {e}")))?;
        Job::parse_with(path, &text, defaults)
    }

    /// Parses job-file text; `path` names the file in errors and anchors relative paths.
    pub fn parse(path: &Path, text: &str) -> Result<Job, JobError> {
        Job::parse_with(path, text, &Defaults::default())
    }

    /// [`Job::parse`], with `defaults` for the keys the text leaves out.
    pub fn parse_with(path: &Path, text: &str, defaults: &Defaults) -> Result<Job, JobError> {
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let file = path.to_path_buf();
        if text.len() > MAX_JOB_FILE_BYTES {
            return Err(JobError {
                file,
                line: 0,
                key: String::new(),
                message: format!(
                    "the job file is larger than {} MiB; a job file describes arrays, it does not hold their data (use load = ...)",
                    MAX_JOB_FILE_BYTES >> 20
                ),
            });
        }
        if let Err(offset) = check_nesting(text) {
            return Err(JobError {
                file,
                line: line_of(offset),
                key: String::new(),
                message: format!("values are nested more than {MAX_TOML_DEPTH} levels deep"),
            });
        }
        let raw: RawJob = toml::from_str(text).map_err(|e| JobError {
            file: file.clone(),
            line: e.span().map(|s| line_of(s.start)).unwrap_or(0),
            key: String::new(),
            message: e.message().to_string(),
        })?;
        let dir = path
            .parent()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .unwrap_or(Path::new("."));
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        let e = |line: usize, key: &str, message: String| JobError {
            file: file.clone(),
            line,
            key: key.to_string(),
            message,
        };

        let (name, name_line) = match &raw.name {
            Some(n) => (n.get_ref().clone(), line_of(n.span().start)),
            None => (
                path.file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("job")
                    .to_string(),
                1,
            ),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            || name.starts_with('.')
        {
            return Err(e(
                name_line,
                "name",
                format!(
                    "job name {name:?} must be letters, digits, '-', '_' or '.' (it is the job's storage prefix)"
                ),
            ));
        }
        check_name(&name, "job name").map_err(|m| e(name_line, "name", m))?;

        let storage = raw.storage.clone().unwrap_or(RawStorage {
            url: None,
            endpoint: None,
        });
        let storage_line = storage
            .url
            .as_ref()
            .map(|u| line_of(u.span().start))
            .unwrap_or(1);
        let url = storage
            .url
            .as_ref()
            .map(|u| u.get_ref().as_str())
            .unwrap_or(&defaults.storage_url);
        let endpoint = storage.endpoint.as_ref().map(|e| e.get_ref().clone());
        let storage_spec = resolve_store_url(&dir, url, endpoint.clone())
            .map_err(|m| e(storage_line, "storage.url", m))?;

        let c = raw.compute.clone().unwrap_or(RawCompute {
            backend: None,
            workers: None,
            memory_mb: None,
            timeout_seconds: None,
            scheduler: None,
            function: None,
            function_tier_percent: None,
        });
        // Each limit is the engine's (crate::config), named by the key that set it.
        let setting =
            |v: &Option<Spanned<i64>>, s: Setting, default: u64| -> Result<u64, JobError> {
                match v {
                    None => Ok(default),
                    Some(v) => s.check(*v.get_ref()).map_err(|r| {
                        e(
                            line_of(v.span().start),
                            &format!("compute.{}", s.name()),
                            r.to_string(),
                        )
                    }),
                }
            };
        let backend = c.backend.unwrap_or(defaults.backend);
        let memory_mb = setting(&c.memory_mb, Setting::MemoryMb, defaults.memory_mb)?;
        let workers = defaults
            .workers
            .unwrap_or_else(|| config::default_workers(backend, memory_mb));
        let compute = Compute {
            backend,
            workers: setting(&c.workers, Setting::Workers, workers)? as usize,
            memory_mb,
            timeout_seconds: setting(
                &c.timeout_seconds,
                Setting::TimeoutSeconds,
                config::DEFAULT_TIMEOUT_SECONDS,
            )?,
            scheduler: c.scheduler.unwrap_or(SchedulerKind::Lshs),
            function: c
                .function
                .clone()
                .unwrap_or_else(|| defaults.function.clone()),
            function_tier_percent: setting(
                &c.function_tier_percent,
                Setting::FunctionTierPercent,
                nums_function::memory::DEFAULT_TIER_PERCENT.into(),
            )?,
        };

        let mut arrays = Vec::new();
        if let Some(a) = &raw.arrays {
            if a.get_ref().len() > MAX_ARRAYS {
                return Err(e(
                    line_of(a.span().start),
                    "arrays",
                    format!(
                        "the job defines {} arrays, more than the {MAX_ARRAYS} allowed; split it into several jobs (one job can load another's outputs)",
                        a.get_ref().len()
                    ),
                ));
            }
            for (aname, v) in a.get_ref() {
                let line = line_of(v.span().start);
                let key = format!("arrays.{aname}");
                if !is_identifier(aname) {
                    return Err(e(
                        line,
                        &key,
                        format!(
                            "array name {aname:?} must be an identifier (letters, digits, '_', not starting with a digit)"
                        ),
                    ));
                }
                check_name(aname, "array name").map_err(|m| e(line, &key, m))?;
                arrays.push(
                    parse_array(aname, line, v.get_ref(), &dir, &storage_spec).map_err(
                        |(k, m)| {
                            e(
                                line,
                                &if k.is_empty() {
                                    key.clone()
                                } else {
                                    format!("{key}.{k}")
                                },
                                m,
                            )
                        },
                    )?,
                );
            }
        }
        arrays.sort_by_key(|a| a.line);

        let names: std::collections::HashSet<&str> =
            arrays.iter().map(|a| a.name.as_str()).collect();
        let mut outputs = Vec::new();
        for (oname, v) in raw.outputs.iter().flatten() {
            let line = line_of(v.span().start);
            let key = format!("outputs.{oname}");
            let (dest, header) =
                output_value(v.get_ref()).map_err(|(k, m)| e(line, &format!("{key}{k}"), m))?;
            if !names.contains(oname.as_str()) {
                return Err(e(line, &key, format!("no array named {oname} in [arrays]")));
            }
            let target = resolve_target(&dir, dest, &storage_spec).map_err(|m| e(line, &key, m))?;
            if header.is_some() && !matches!(target, Target::Csv(_)) {
                return Err(e(
                    line,
                    &format!("{key}.header"),
                    "header applies to a .csv output (a .parquet file always names its columns)"
                        .into(),
                ));
            }
            outputs.push(OutputDef {
                name: oname.clone(),
                line,
                target,
                header,
            });
        }
        outputs.sort_by_key(|o| o.line);
        // Two outputs to one place would overwrite each other (the last commit wins, or
        // one deletes the other's folder): refused here, naming both.
        let places: Vec<PathBuf> = outputs.iter().map(|o| o.target.place()).collect();
        for (i, o) in outputs.iter().enumerate() {
            for (first, place) in outputs[..i].iter().zip(&places) {
                let how = if *place == places[i] {
                    "writes to the same path as"
                } else if places[i].starts_with(place) {
                    "writes inside the Zarr folder of"
                } else if place.starts_with(&places[i]) {
                    "is a Zarr folder that would hold"
                } else {
                    continue;
                };
                return Err(e(
                    o.line,
                    &format!("outputs.{}", o.name),
                    format!(
                        "{} {how} outputs.{} (line {}); give each output its own path",
                        places[i].display(),
                        first.name,
                        first.line
                    ),
                ));
            }
        }
        for o in &outputs {
            check_output_place(&storage_spec, &name, &arrays, o)
                .map_err(|m| e(o.line, &format!("outputs.{}", o.name), m))?;
        }

        Ok(Job {
            file,
            dir,
            name,
            name_line,
            storage: storage_spec,
            storage_line,
            compute,
            arrays,
            outputs,
        })
    }
}

/// The longest job or array name: each is a folder or key name in the store (a file
/// system takes 255 bytes per name; an intermediate's name adds a suffix to an array's).
pub const MAX_NAME_CHARS: usize = 128;

/// Refuses a job or array name (`what`) that is too long or reserved by the store layout.
fn check_name(name: &str, what: &str) -> Result<(), String> {
    if name.len() > MAX_NAME_CHARS {
        return Err(format!(
            "{what} {}... is {} characters long; names are at most {MAX_NAME_CHARS} characters (they are folder and key names in the store)",
            &name[..16],
            name.len()
        ));
    }
    if crate::runs::reserved(name) {
        return Err(format!("{what} {}", crate::runs::reserved_error(name)));
    }
    Ok(())
}

pub fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// Resolves a storage URL: `file://rel` is relative to the job file's folder.
pub fn resolve_store_url(
    dir: &Path,
    url: &str,
    endpoint: Option<String>,
) -> Result<StoreSpec, String> {
    if let Some(rest) = url.strip_prefix("file://") {
        let p = if Path::new(rest).is_absolute() {
            PathBuf::from(rest)
        } else {
            dir.join(rest)
        };
        let u = url::Url::from_directory_path(&p)
            .map_err(|_| format!("cannot make a file URL of {}", p.display()))?;
        if endpoint.is_some() {
            return Err("endpoint applies only to s3:// URLs".into());
        }
        Ok(StoreSpec {
            url: u.to_string(),
            endpoint: None,
        })
    } else if let Some(rest) = url.strip_prefix("s3://") {
        if rest.split('/').next().unwrap_or("").is_empty() {
            return Err(format!("{url:?} names no bucket: use s3://bucket/prefix"));
        }
        Ok(StoreSpec {
            url: url.trim_end_matches('/').to_string(),
            endpoint,
        })
    } else {
        Err(format!(
            "{url:?} is not a store URL: use file://folder or s3://bucket/prefix"
        ))
    }
}

/// An output's path, and its `header` when given as a table; an error names the key
/// under the output's (`.path`, `.header`, or none).
fn output_value(v: &toml::Value) -> Result<(&str, Option<bool>), FieldErr> {
    const WHAT: &str = "an output is a path (a .npy, .csv or .parquet file, a Zarr folder or an s3:// URL), or a table such as { path = \"out/a.csv\", header = true }";
    match v {
        toml::Value::String(dest) => Ok((dest, None)),
        toml::Value::Table(t) => {
            if let Some(k) = t.keys().find(|k| !OUTPUT_KEYS.contains(&k.as_str())) {
                return Err((
                    format!(".{k}"),
                    format!("unknown key; expected one of {}", OUTPUT_KEYS.join(", ")),
                ));
            }
            let Some(toml::Value::String(dest)) = t.get("path") else {
                return Err((".path".into(), WHAT.into()));
            };
            let header = match t.get("header") {
                None => None,
                Some(toml::Value::Boolean(b)) => Some(*b),
                Some(_) => return Err((".header".into(), "header is true or false".into())),
            };
            Ok((dest, header))
        }
        _ => Err((String::new(), WHAT.into())),
    }
}

pub(crate) fn resolve_target(
    dir: &Path,
    dest: &str,
    storage: &StoreSpec,
) -> Result<Target, String> {
    if dest.trim() == "-" {
        return Err(
            "\"-\": outputs are written to files, never to standard output; give a path (out/a.npy, \
             out/a.csv, ...). The run's summary prints outputs of up to 64 elements, and \
             `nums-cloud show JOB/ARRAY` prints a stored array"
                .into(),
        );
    }
    if let Some(rest) = dest.strip_prefix("s3://") {
        let (bucket, path) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() || path.trim_matches('/').is_empty() {
            return Err(format!(
                "{dest:?}: an s3:// output needs a bucket and a path"
            ));
        }
        check_output_suffix(dest, path.trim_matches('/'), false)?;
        if path.ends_with(".npy") {
            return Ok(Target::NpyStore {
                store: StoreSpec {
                    url: format!("s3://{bucket}"),
                    endpoint: storage.endpoint.clone(),
                },
                key: path.trim_matches('/').to_string(),
            });
        }
        return Ok(Target::Zarr {
            store: StoreSpec {
                url: format!("s3://{bucket}"),
                endpoint: storage.endpoint.clone(),
            },
            path: path.trim_matches('/').to_string(),
        });
    }
    let p = dest.strip_prefix("file://").unwrap_or(dest);
    let p = if Path::new(p).is_absolute() {
        PathBuf::from(p)
    } else {
        dir.join(p)
    };
    check_output_suffix(dest, &p.to_string_lossy(), true)?;
    if p.extension().is_some_and(|x| x == "npy") {
        Ok(Target::Npy(p))
    } else if p.extension().is_some_and(|x| x == "csv") {
        Ok(Target::Csv(p))
    } else if p.extension().is_some_and(|x| x == "parquet") {
        Ok(Target::Parquet(p))
    } else {
        // A Zarr array is a folder: its parent is the store, its name the array path.
        let parent = p
            .parent()
            .ok_or_else(|| format!("{dest:?} has no parent folder"))?;
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("{dest:?} has no name"))?;
        let url =
            url::Url::from_directory_path(parent).map_err(|_| format!("{dest:?}: bad path"))?;
        Ok(Target::Zarr {
            store: StoreSpec {
                url: url.to_string(),
                endpoint: None,
            },
            path: name.to_string(),
        })
    }
}

type FieldErr = (String, String);

fn parse_array(
    name: &str,
    line: usize,
    v: &toml::Value,
    dir: &Path,
    storage: &StoreSpec,
) -> Result<ArrayDef, FieldErr> {
    let def = |source, block, dtype| ArrayDef {
        name: name.to_string(),
        line,
        source,
        block,
        dtype,
    };
    let t = match v {
        toml::Value::String(s) => return Ok(def(Source::Expr { text: s.clone() }, None, None)),
        toml::Value::Table(t) => t,
        _ => {
            return Err((String::new(), "an array is an expression string or a table such as { random = \"normal\", shape = [10, 10] }".into()));
        }
    };
    const KEYS: &[&str] = &[
        "random",
        "zeros",
        "ones",
        "full",
        "value",
        "shape",
        "seed",
        "low",
        "high",
        "load",
        "expr",
        "block",
        "dtype",
        "header",
        "delimiter",
        "usecols",
    ];
    if let Some(k) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err((
            k.clone(),
            format!("unknown key; expected one of {}", KEYS.join(", ")),
        ));
    }
    let shape_of = |key: &str| -> Result<Vec<u64>, FieldErr> {
        let v = t
            .get(key)
            .ok_or_else(|| (key.to_string(), "missing".to_string()))?;
        dims(v).map_err(|m| (key.to_string(), m))
    };
    let block = t
        .get("block")
        .map(|b| dims(b).map_err(|m| ("block".to_string(), m)))
        .transpose()?;
    if block.as_ref().is_some_and(|b| b.contains(&0)) {
        return Err(("block".into(), "block sizes must be positive".into()));
    }
    let dtype = match t.get("dtype") {
        None => None,
        Some(toml::Value::String(s)) => {
            Some(DType::parse_named(s).map_err(|m| ("dtype".to_string(), m))?)
        }
        Some(_) => {
            return Err((
                "dtype".into(),
                "dtype is a string such as \"float64\"".into(),
            ));
        }
    };
    let sources: Vec<&str> = ["random", "zeros", "ones", "full", "load", "expr"]
        .into_iter()
        .filter(|k| t.contains_key(*k))
        .collect();
    let source = match sources.as_slice() {
        ["random"] => {
            let dist = match t.get("random") {
                Some(toml::Value::String(s)) if s == "normal" => nums_layout::RandomDist::Normal,
                Some(toml::Value::String(s)) if s == "uniform" => nums_layout::RandomDist::Uniform,
                Some(toml::Value::String(s)) if s == "integers" => {
                    let int = |k: &str| match t.get(k) {
                        Some(toml::Value::Integer(i)) => Ok(*i),
                        Some(_) => Err((k.to_string(), "must be an integer".to_string())),
                        None => Err((
                            k.to_string(),
                            "missing (random integers in [low, high))".to_string(),
                        )),
                    };
                    let (low, high) = (int("low")?, int("high")?);
                    if high <= low {
                        return Err((
                            "high".into(),
                            format!("high ({high}) must be above low ({low})"),
                        ));
                    }
                    nums_layout::RandomDist::Integers { low, high }
                }
                _ => {
                    return Err((
                        "random".into(),
                        "must be \"normal\", \"uniform\" or \"integers\"".into(),
                    ));
                }
            };
            let seed = match t.get("seed") {
                None => 0,
                Some(toml::Value::Integer(i)) if *i >= 0 => *i as u64,
                Some(_) => return Err(("seed".into(), "must be a non-negative integer".into())),
            };
            Source::Random {
                dist,
                shape: shape_of("shape")?,
                seed,
            }
        }
        ["zeros"] => Source::Full {
            shape: dims(&t["zeros"]).map_err(|m| ("zeros".to_string(), m))?,
            value: nums_layout::Scalar::Int(0),
        },
        ["ones"] => Source::Full {
            shape: dims(&t["ones"]).map_err(|m| ("ones".to_string(), m))?,
            value: nums_layout::Scalar::Int(1),
        },
        ["full"] => {
            let value = match t.get("value") {
                Some(toml::Value::Float(f)) => nums_layout::Scalar::Float(*f),
                Some(toml::Value::Integer(i)) => nums_layout::Scalar::Int(*i),
                Some(toml::Value::Boolean(b)) => nums_layout::Scalar::Bool(*b),
                _ => return Err(("value".into(), "full needs a numeric value = ...".into())),
            };
            Source::Full {
                shape: dims(&t["full"]).map_err(|m| ("full".to_string(), m))?,
                value,
            }
        }
        ["load"] => {
            let Some(toml::Value::String(p)) = t.get("load") else {
                return Err(("load".into(), "load is a path string".into()));
            };
            let path = if p.starts_with("s3://") {
                p.clone()
            } else {
                let rel = p.strip_prefix("file://").unwrap_or(p);
                let abs = if Path::new(rel).is_absolute() {
                    PathBuf::from(rel)
                } else {
                    dir.join(rel)
                };
                abs.to_string_lossy().into_owned()
            };
            let _ = storage;
            let csv = csv_options(t, &path)?;
            Source::Load { path, csv }
        }
        ["expr"] => match t.get("expr") {
            Some(toml::Value::String(s)) => Source::Expr { text: s.clone() },
            _ => return Err(("expr".into(), "expr is a string".into())),
        },
        [] => {
            return Err((
                String::new(),
                "says nothing to make: give random, zeros, ones, full, load or expr".into(),
            ));
        }
        many => {
            return Err((
                String::new(),
                format!(
                    "gives {} ways to make it; use exactly one",
                    many.join(" and ")
                ),
            ));
        }
    };
    let allowed: &[&str] = match &source {
        Source::Random { .. } => &["random", "shape", "seed", "low", "high", "block", "dtype"],
        Source::Full { .. } => &["zeros", "ones", "full", "value", "block", "dtype"],
        Source::Load { path, .. } if path.ends_with(".csv") => {
            &["load", "block", "dtype", "header", "delimiter", "usecols"]
        }
        Source::Load { path, .. } if path.ends_with(".parquet") => {
            &["load", "block", "dtype", "usecols"]
        }
        Source::Load { .. } => &["load", "block", "dtype"],
        Source::Expr { .. } => &["expr", "block", "dtype"],
        Source::Param { .. } | Source::GlmSums { .. } => &[],
    };
    if let Some(k) = t.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err((
            k.clone(),
            format!(
                "does not apply here; this array takes {}",
                allowed.join(", ")
            ),
        ));
    }
    Ok(def(source, block, dtype))
}

/// How a `.csv` input is read: NumPy's `loadtxt` options (`header`: the first data line
/// names the columns instead, as pandas' `header=0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvOptions {
    /// The first line (after comments and blank lines) names the columns.
    pub header: bool,
    /// The field separator, one ASCII character.
    pub delimiter: u8,
    /// The columns kept, in this order: indices (negative from the end) or, with a
    /// header, names. `None`: all of them.
    pub usecols: Option<Vec<ColumnRef>>,
    /// `usecols` kept in the file's order, each column once, as pandas' `read_csv` keeps
    /// them (loadtxt and a job file keep the order given).
    pub file_order: bool,
    /// Dtypes of some columns (pandas' `dtype={"label": "int64"}`): each column's fields
    /// parse as its dtype (float64 for a column not named here), and the array's dtype is
    /// NumPy's promotion of the kept columns' dtypes.
    pub dtypes: Vec<(ColumnRef, DType)>,
}

impl Default for CsvOptions {
    fn default() -> CsvOptions {
        CsvOptions {
            header: false,
            delimiter: b',',
            usecols: None,
            file_order: false,
            dtypes: Vec::new(),
        }
    }
}

/// A column of a `.csv` input, as `usecols` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnRef {
    /// Counted from 0; negative from the end.
    Index(i64),
    /// A name of the header line.
    Name(String),
}

/// The `.csv` options of a `load` table, and a `.parquet`'s `usecols` (keys other than an
/// input's own are refused later).
fn csv_options(t: &toml::Table, path: &str) -> Result<CsvOptions, FieldErr> {
    let mut o = CsvOptions::default();
    if path.ends_with(".parquet") {
        // A Parquet file's columns have names: no header line to ask for.
        o.header = true;
    } else if !path.ends_with(".csv") {
        return Ok(o);
    }
    if let Some(v) = t.get("header") {
        let toml::Value::Boolean(b) = v else {
            return Err(("header".into(), "header is true or false".into()));
        };
        o.header = *b;
    }
    if let Some(v) = t.get("delimiter") {
        o.delimiter = match v.as_str().map(|s| s.as_bytes()) {
            Some([c]) if c.is_ascii() && !matches!(c, b'\n' | b'\r' | b'#' | b'"') => *c,
            _ => {
                return Err((
                    "delimiter".into(),
                    "delimiter is one ASCII character such as \",\", \";\" or \"\\t\" (not a newline, '#' or '\"')"
                        .into(),
                ));
            }
        };
    }
    if let Some(v) = t.get("usecols") {
        let bad = || {
            (
                "usecols".to_string(),
                "usecols is a list of column numbers such as [0, 2, -1], or of header names such as [\"price\", \"qty\"]"
                    .to_string(),
            )
        };
        let toml::Value::Array(a) = v else {
            return Err(bad());
        };
        if a.is_empty() {
            return Err(("usecols".into(), "usecols names no column".into()));
        }
        let cols = a
            .iter()
            .map(|x| match x {
                toml::Value::Integer(i) => Ok(ColumnRef::Index(*i)),
                toml::Value::String(s) if o.header => Ok(ColumnRef::Name(s.clone())),
                toml::Value::String(_) => Err((
                    "usecols".to_string(),
                    "columns are named only with header = true (the header line holds the names)"
                        .to_string(),
                )),
                _ => Err(bad()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        o.usecols = Some(cols);
    }
    Ok(o)
}

fn dims(v: &toml::Value) -> Result<Vec<u64>, String> {
    let toml::Value::Array(a) = v else {
        return Err("must be a list of sizes such as [1000, 64]".into());
    };
    let sizes: Vec<u64> = a
        .iter()
        .map(|x| match x {
            toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
            _ => Err(format!(
                "{x} is not a size: sizes are non-negative integers"
            )),
        })
        .collect::<Result<_, _>>()?;
    // Element counts must stay exact in f64 and in byte offsets.
    let total = sizes.iter().try_fold(1u64, |acc, &s| acc.checked_mul(s));
    if total.is_none_or(|t| t > MAX_ELEMENTS) {
        return Err(format!("{sizes:?} has more than 2^50 elements"));
    }
    Ok(sizes)
}

/// The largest job file read: a job file names arrays and expressions (each at most
/// [`crate::expr::MAX_EXPR_CHARS`]); data goes in through `load`.
pub const MAX_JOB_FILE_BYTES: usize = 16 << 20;

/// The deepest nesting of TOML values (arrays and inline tables) accepted. A job file
/// needs 3 (`[arrays]`, an inline table, a shape); the TOML parser recurses once per level,
/// so tens of thousands would overflow its stack.
pub const MAX_TOML_DEPTH: usize = 32;

/// The most arrays one job may define. Every named array is at least one node and one
/// block to plan; beyond this a job is better split into several.
pub const MAX_ARRAYS: usize = 10_000;

/// Checks that brackets and braces outside strings and comments nest at most
/// [`MAX_TOML_DEPTH`] deep; Err(byte offset) of the first bracket too deep. A lexical scan
/// that never fails on other errors: what is not TOML is left to the TOML parser.
fn check_nesting(text: &str) -> Result<(), usize> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    // Skips a string opened at `i` by `quote` (one or three of them); basic strings (")
    // have backslash escapes, literal ones (') do not. Returns the offset after its end.
    let skip_string = |i: usize, quote: u8| -> usize {
        let triple = b[i..].starts_with(&[quote; 3]);
        let mut j = i + if triple { 3 } else { 1 };
        while j < b.len() {
            match b[j] {
                b'\\' if quote == b'"' => j += 2,
                b'\n' if !triple => return j,
                c if c == quote && (!triple || b[j..].starts_with(&[quote; 3])) => {
                    return j + if triple { 3 } else { 1 };
                }
                _ => j += 1,
            }
        }
        b.len()
    };
    while i < b.len() {
        match b[i] {
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            q @ (b'"' | b'\'') => i = skip_string(i, q),
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_TOML_DEPTH {
                    return Err(i);
                }
                i += 1;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Job, JobError> {
        Job::parse(Path::new("/tmp/j/job.toml"), text)
    }

    #[test]
    fn defaults_and_relative_paths() {
        let j = parse("[arrays]\nX = { random = \"normal\", shape = [7, 5], block = [3, 4] }\ny = \"X + 1\"\n[outputs]\ny = \"out/y.npy\"\n").unwrap();
        assert_eq!(j.name, "job");
        assert_eq!(j.storage.url, "file:///tmp/j/nums-data/");
        assert_eq!(j.compute.backend, Backend::Local);
        assert_eq!(j.arrays.len(), 2);
        assert_eq!(j.arrays[1].line, 3);
        assert_eq!(
            j.outputs[0].target,
            Target::Npy(PathBuf::from("/tmp/j/out/y.npy"))
        );
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let e = parse("[compute]\nworkers = 2\nwrokers = 3\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("wrokers"), "{e}");
        let e =
            parse("[arrays]\n\nX = { random = \"normal\", shape = [2], sed = 1 }\n").unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (3, "arrays.X.sed"), "{e}");
    }

    #[test]
    fn syntax_error_has_line() {
        let e = parse("name = \"a\"\n[arrays\nX = 1\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }

    #[test]
    fn absurd_shapes_are_refused() {
        let e = parse("[arrays]\nX = { zeros = [4294967296, 4294967296, 4] }\n").unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (2, "arrays.X.zeros"), "{e}");
        assert!(e.message.contains("2^50"), "{e}");
    }

    #[test]
    fn deep_nesting_is_refused_before_the_toml_parser() {
        for (open, close) in [("[", "]"), ("{a=", "}")] {
            let text = format!(
                "name = \"a\"\n[arrays]\nX = {}1{}\n",
                open.repeat(10_000),
                close.repeat(10_000)
            );
            let e = parse(&text).unwrap_err();
            assert_eq!(e.line, 3, "{e}");
            assert!(e.message.contains("nested more than 32 levels"), "{e}");
        }
        // Brackets in strings and comments are text, not nesting.
        let text = r#"# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[
name = "a" # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[
[arrays]
X = { zeros = [2] }
Y = "X + 0 # \" [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
Z = '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['
W = """
[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\""""
V = '''
[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['''
"#;
        assert_eq!(parse(text).unwrap().arrays.len(), 5);
    }

    #[test]
    fn too_many_arrays_and_too_big_a_file_are_refused() {
        let mut text = String::from("[arrays]\n");
        for i in 0..=MAX_ARRAYS {
            text += &format!("a{i} = {{ zeros = [1] }}\n");
        }
        let e = parse(&text).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (1, "arrays"), "{e}");
        assert!(e.message.contains("10001 arrays"), "{e}");
        let big = format!("name = \"a\"\n#{}\n", "x".repeat(MAX_JOB_FILE_BYTES));
        let e = parse(&big).unwrap_err();
        assert!(e.message.contains("larger than 16 MiB"), "{e}");
    }

    #[test]
    fn two_outputs_to_one_place_are_refused() {
        let e = parse("[arrays]\nX = { zeros = [2] }\nY = \"X\"\n[outputs]\nX = \"out/x.npy\"\nY = \"out/./sub/../x.npy\"\n").unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (6, "outputs.Y"), "{e}");
        assert!(
            e.message
                .contains("/tmp/j/out/x.npy writes to the same path as outputs.X (line 5)"),
            "{e}"
        );
        let e = parse("[arrays]\nX = { zeros = [2] }\nY = \"X\"\n[outputs]\nX = \"out/x.zarr\"\nY = \"out/x.zarr/y.npy\"\n").unwrap_err();
        assert!(
            e.message
                .contains("inside the Zarr folder of outputs.X (line 5)"),
            "{e}"
        );
        let e = parse("[arrays]\nX = { zeros = [2] }\nY = \"X\"\n[outputs]\nX = \"s3://b/p/x\"\nY = \"s3://b/p/x/\"\n").unwrap_err();
        assert!(
            e.message
                .contains("s3://b/p/x writes to the same path as outputs.X"),
            "{e}"
        );
        // Different places are fine, also when one name is the start of the other's.
        parse(
            "[arrays]\nX = { zeros = [2] }\nY = \"X\"\n[outputs]\nX = \"out/x\"\nY = \"out/xy\"\n",
        )
        .unwrap();
    }

    #[test]
    fn output_suffixes_nums_cloud_does_not_write_are_refused() {
        for (dest, words) in [
            ("s3://b/x.parquet", "nums-cloud get ARRAY FILE.parquet"),
            ("x.h5", "does not write .h5 files"),
            ("-", "never to standard output"),
            ("s3://b/x.csv", "nums-cloud get ARRAY FILE.csv"),
            ("s3://b/x.txt", "does not write .txt files"),
        ] {
            let e = parse(&format!(
                "[arrays]\nX = {{ zeros = [2] }}\n[outputs]\nX = \"{dest}\"\n"
            ))
            .unwrap_err();
            assert_eq!((e.line, e.key.as_str()), (4, "outputs.X"), "{e}");
            assert!(e.message.contains(dest) && e.message.contains(words), "{e}");
        }
        for dest in [
            "x.npy",
            "out/x.csv",
            "out/x.parquet",
            "x.zarr",
            "out/x",
            "s3://b/x.zarr",
            "s3://b/p/x",
            "s3://b/p/x.npy",
        ] {
            parse(&format!(
                "[arrays]\nX = {{ zeros = [2] }}\n[outputs]\nX = \"{dest}\"\n"
            ))
            .unwrap();
        }
    }

    #[test]
    fn output_of_unknown_array() {
        let e = parse("[arrays]\nX = { zeros = [2] }\n[outputs]\nY = \"y.npy\"\n").unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (4, "outputs.Y"));
    }
}
