//! Computing a session's arrays: the nodes they need (a fit's X and y with them) handed
//! to the one executor (`engine::execute`, as a job's run hands its graph), in this
//! process or on the session's backend (started by the first compute that needs it and
//! kept), and the values read back in memory. A computed array stays in the store and
//! becomes an input read in place while a handle to it lives (`keep`). Also the session's
//! I/O: loads (probed when defined), values from memory (written by the first compute
//! that reads them), and closing.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use nums_layout::{Block, Store, StoredArray};

use super::{Array, Config, Error, Session, State, store_error};
use crate::graph::{Graph, NodeId, NodeOp};
use crate::job::{ArrayDef, Backend, ColumnRef as Column, CsvOptions, Job, Source};

/// How [`Session::read_csv`] reads a CSV file of numbers.
#[derive(Debug, Clone)]
pub struct ReadCsv {
    /// The first line (after comments and blank lines) names the columns and is not data.
    pub header: bool,
    /// The field separator, one ASCII character.
    pub delimiter: char,
    /// The columns kept: numbers (negative from the end) or, with a header, names.
    /// `None`: all of them.
    pub usecols: Option<Vec<Column>>,
    /// `usecols` as pandas takes them: all names or all numbers, kept in the file's order,
    /// each once. Otherwise as NumPy's loadtxt: in the order given.
    pub pandas_usecols: bool,
    /// The array's dtype (`None`: float64, or the promotion of `dtypes`).
    pub dtype: Option<nums_layout::DType>,
    /// Dtypes of some columns, by number or name: each column's fields parse as its dtype
    /// (float64 for a column not named), and the array's dtype is NumPy's promotion of the
    /// kept columns' (one array, one dtype).
    pub dtypes: Vec<(Column, nums_layout::DType)>,
    /// The function the caller called, as messages name the array: `read_csv("f.csv")`.
    pub call: String,
}

impl Default for ReadCsv {
    fn default() -> ReadCsv {
        ReadCsv {
            header: false,
            delimiter: ',',
            usecols: None,
            pandas_usecols: false,
            dtype: None,
            dtypes: Vec::new(),
            call: "read_csv".into(),
        }
    }
}

/// The session's backend (the run half's [`crate::backend::Backend`]: the invoker and,
/// for the local backend, the endpoint and its function processes), kept between
/// computes while the settings that made it hold.
pub(crate) struct SessionBackend {
    made_with: Config,
    backend: crate::backend::Backend,
    /// Whether it runs the function in this process ([`Session::in_process_bytes`]).
    in_process: bool,
    /// What its function processes' log folder is named after.
    log_id: String,
}

impl SessionBackend {
    /// The stage runner of one compute on this backend, storing under `prefix` (no run
    /// journal: a session's computes are not resumed), observed by `watch`.
    fn stages<'a>(
        &'a self,
        s: &Session,
        store: &'a Store,
        prefix: &str,
        watch: &'a Watch<'a>,
    ) -> crate::stage::Stages<'a> {
        let t0 = std::time::Instant::now();
        let cfg = s.cfg.engine(&s.st.spec);
        crate::stage::Stages::new(cfg, None, store, &self.backend, watch, t0, &self.log_id)
            .under(prefix)
    }

    /// What watches a compute on this backend: the progress bar (when the session shows
    /// one and the compute is not in this process) and the session's counts.
    fn watch<'a>(&self, s: &'a Session) -> Watch<'a> {
        Watch {
            progress: crate::progress::Progress::new(match (s.cfg.progress, self.in_process) {
                (false, _) | (_, true) => crate::progress::Show::Off,
                (true, false) => match &s.cfg.progress_to {
                    Some(to) => crate::progress::Show::To(to.0.clone(), to.1),
                    // Asked for: a bar on a terminal, else lines.
                    None => crate::progress::Show::stderr(true, true),
                },
            }),
            counts: &s.st.counts,
            in_process: self.in_process,
        }
    }

    /// Stops its function processes (their logs removed).
    async fn stop(b: Arc<SessionBackend>) {
        if let Ok(b) = Arc::try_unwrap(b) {
            b.backend.stop(true).await;
        }
    }
}

/// The node a word of an engine message names: `n12` (a target's name: the session's
/// node), or the last part of a store path (`.../c3/out/n12/c/0`: a target; `.../tmp/n5p3`:
/// node 5 of the compute's graph, `local`).
fn named_node(word: &str) -> Option<(NodeId, bool)> {
    let local = word.contains("/tmp/");
    word.split('/').find_map(|part| {
        let digits = part.strip_prefix('n')?;
        let end = digits
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(digits.len());
        let rest = &digits[end..];
        (end > 0 && (rest.is_empty() || rest.starts_with(['p', ')', ':', ','])))
            .then(|| digits[..end].parse().ok().map(|id| (id, local)))
            .flatten()
    })
}

/// A word of an engine message that names a session node (`n12:`, a store key
/// `api-.../c3/out/n12/c/1/0),`) in the user's words: `` `label`: ``, or the block a key
/// names, `` (1, 0) of `label`), `` (the punctuation around the word kept).
fn in_user_words(word: &str, label: &str) -> String {
    let core = word.trim_start_matches(['(', '`']);
    let core = core.trim_end_matches([')', ',', ':', ';', '`']);
    let at = word.find(core).unwrap_or(0);
    let (lead, tail) = (&word[..at], &word[at + core.len()..]);
    let index: Option<Vec<u64>> = core
        .rsplit_once("/c/")
        .and_then(|(_, idx)| idx.split('/').map(|i| i.parse().ok()).collect());
    match index {
        Some(idx) if !idx.is_empty() => {
            let mut t: Vec<String> = idx.iter().map(u64::to_string).collect();
            if t.len() == 1 {
                t.push(String::new());
            }
            format!("{lead}({}) of `{label}`{tail}", t.join(", ").trim_end())
        }
        _ => format!("{lead}`{label}`{tail}"),
    }
}

/// The bytes of the blocks of an array of `meta` that `held` says this process holds.
fn work_all_held(meta: &nums_layout::ArrayMeta, held: impl Fn(&[u64]) -> bool) -> u64 {
    (meta.blocks().iter())
        .filter(|idx| held(idx))
        .map(|idx| meta.block_nbytes(idx))
        .sum()
}

/// One compute's graph ([`Incremental::for_compute`](crate::graph::Incremental)): the
/// nodes its targets need, renumbered; `back[i]` is the session's node of node `i`.
struct ComputeGraph {
    g: Graph,
    back: Vec<NodeId>,
    /// The nodes it computes or reads (its ids).
    needed: Vec<NodeId>,
    /// Whether it computes or reads every block of each of its nodes.
    whole: Vec<bool>,
    /// The bytes of the blocks it computes or reads (of a slice of a large expression,
    /// only the blocks that reach it).
    bytes: u64,
    /// Of those, the bytes of blocks it reads that this process's memory tier holds.
    warm: u64,
}

impl ComputeGraph {
    /// Its node of the session's node `id` (which it holds).
    fn local(&self, id: NodeId) -> NodeId {
        // The last of those standing for it: nodes made for a slice's region come before it.
        let at = self.back.partition_point(|&b| b <= id);
        assert!(at > 0 && self.back[at - 1] == id, "a node of the compute");
        at - 1
    }

    /// The session's nodes it computes or reads.
    fn needed_in_session(&self) -> Vec<NodeId> {
        self.needed.iter().map(|&i| self.back[i]).collect()
    }
}

impl Session {
    /// An engine error in the program's words: each node it names (by a target's name or
    /// a store path) is followed by the array that made it; the array of the first is the
    /// error's.
    fn engine_error(&self, e: anyhow::Error) -> Error {
        self.engine_error_in(e, &[])
    }

    /// [`Session::engine_error`] of a compute whose graph's node `i` is the session's
    /// `back[i]`.
    fn engine_error_in(&self, e: anyhow::Error, back: &[NodeId]) -> Error {
        let session_node = |(id, local): (NodeId, bool)| match local {
            true => back.get(id).copied(),
            false => Some(id),
        };
        let human = |m: &str| -> (String, Option<String>) {
            let mut out = String::with_capacity(m.len());
            let mut first = None;
            for (i, word) in m.split(' ').enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                match named_node(word)
                    .and_then(session_node)
                    .and_then(|id| self.owner(id))
                {
                    // The array the user wrote, never the session's node or store key.
                    Some(label) => {
                        out.push_str(&in_user_words(word, &label));
                        first.get_or_insert(label);
                    }
                    None => out.push_str(word),
                }
            }
            (out, first)
        };
        let message = format!("{e:#}");
        let mut error = Error::classify(&e, &message, &human);
        // A block that does not fit: name the session's array it belongs to.
        if let Error::Plan {
            array: array @ None,
            message,
            ..
        } = &mut error
            && let Some(x) = e.downcast_ref::<crate::error::Explained<crate::sched::PlanError>>()
            && let Some(label) = back
                .get(x.error.node)
                .or((back.is_empty()).then_some(&x.error.node))
                .and_then(|&id| self.owner(id))
        {
            *message = message.replace("a part of its expression", &format!("`{label}`"));
            *array = Some(label);
        }
        error
    }
}

impl Session {
    /// The session's program with `arrays` in it, as the probes read it (see
    /// [`Job::program`]).
    fn program(&self, arrays: Vec<ArrayDef>) -> Job {
        Job {
            arrays,
            ..Job::program(self.cfg.engine(&self.st.spec), &self.st.id, &self.st.cwd)
        }
    }

    fn refuse_closed(&self) -> Result<(), Error> {
        if self.st.closed.load(Ordering::SeqCst) {
            return Err(Error::Config {
                setting: "close".into(),
                message: "the session is closed: what it kept in the store is gone".into(),
            });
        }
        Ok(())
    }

    pub(super) fn store(&self) -> Result<Store, Error> {
        self.st.touched.store(true, Ordering::SeqCst);
        if let Some(s) = self.st.opened.get() {
            return Ok(s.with_fresh_counters());
        }
        let s = Store::open(&self.st.spec).map_err(store_error)?;
        Ok(self.st.opened.get_or_init(|| s).with_fresh_counters())
    }

    /// The store, to put something under the session's prefix: the session's claim on it
    /// is written first (once), and prefixes of this host's sessions that died without
    /// closing are removed ([`super::lease`]).
    pub(super) async fn claimed_store(&self) -> Result<Store, Error> {
        let store = self.store()?;
        self.st
            .claimed
            .get_or_try_init(|| async {
                let gone = super::lease::claim(&store, &self.st.id)
                    .await
                    .map_err(store_error)?;
                if !gone.is_empty() {
                    tracing::info!(
                        "removed what {} left in the store: {}",
                        if gone.len() == 1 {
                            "a session that died without closing"
                        } else {
                            "sessions that died without closing"
                        },
                        gone.join(", ")
                    );
                }
                Ok::<(), Error>(())
            })
            .await?;
        Ok(store)
    }

    /// A `.npy`, `.csv`, `.parquet` file or Zarr v2 or v3 array (a folder, or an `s3://`
    /// URL), as a job file's `load` reads it; its metadata is read now (its shape and dtype
    /// are known, a missing file is an error here). A Zarr array, nums-cloud's or another
    /// tool's, is read in place in its own chunks; a file is imported by the first
    /// compute that needs all of it, and kept while an array made from it is held: later
    /// computes read the import, not the file. A compute that needs a part of it (`x[:2]`)
    /// reads only the blocks that hold that part. Relative paths resolve against the
    /// working directory when the session was made.
    pub async fn load(&self, path: &str) -> Result<Array, Error> {
        let label = format!("load({path:?})");
        self.load_with(path, CsvOptions::default(), None, label)
            .await
    }

    /// [`Session::load`] for code that is not async.
    pub fn load_blocking(&self, path: &str) -> Result<Array, Error> {
        super::blocking::block_on(self.load(path))?
    }

    /// A `.csv` file read with NumPy's `loadtxt` options: `header` (the first line names
    /// the columns and is not data), `delimiter` (one ASCII character) and `usecols` (the
    /// columns kept, in that order; negative from the end). As for [`Session::load`];
    /// [`Session::read_csv`] takes names and pandas' options.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-csv");
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let s = Session::new(&format!("file://{}", dir.display()))?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let file = dir.join("prices.csv");
    /// std::fs::write(&file, "id;price;qty\n1;2.5;4\n2;0.5;10\n").unwrap();
    /// let x = s.load_csv_blocking(file.to_str().unwrap(), true, ';', Some(&[-1, 1]))?;
    /// assert_eq!(x.compute_blocking::<f64>()?.into_raw_vec_and_offset().0, vec![4.0, 2.5, 10.0, 0.5]);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn load_csv(
        &self,
        path: &str,
        header: bool,
        delimiter: char,
        usecols: Option<&[i64]>,
    ) -> Result<Array, Error> {
        let o = ReadCsv {
            header,
            delimiter,
            usecols: usecols.map(|c| c.iter().map(|&i| Column::Index(i)).collect()),
            call: "load_csv".into(),
            ..ReadCsv::default()
        };
        self.read_csv(path, &o).await
    }

    /// [`Session::load_csv`] for code that is not async.
    pub fn load_csv_blocking(
        &self,
        path: &str,
        header: bool,
        delimiter: char,
        usecols: Option<&[i64]>,
    ) -> Result<Array, Error> {
        super::blocking::block_on(self.load_csv(path, header, delimiter, usecols))?
    }

    /// A `.csv` file read as [`ReadCsv`] says (columns by index or header name, pandas'
    /// column order, dtypes per column). As for [`Session::load`].
    ///
    /// ```
    /// # use nums_cloud::api::{Column, ReadCsv, Session};
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-read-csv");
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let s = Session::new(&format!("file://{}", dir.display()))?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let file = dir.join("labels.csv");
    /// std::fs::write(&file, "f1,label,f2\n0.5,1,2\n1.5,0,4\n").unwrap();
    /// let o = ReadCsv {
    ///     header: true,
    ///     usecols: Some(vec![Column::Name("label".into()), Column::Name("f1".into())]),
    ///     pandas_usecols: true, // kept in the file's order: f1, label
    ///     ..ReadCsv::default()
    /// };
    /// let x = s.read_csv_blocking(file.to_str().unwrap(), &o)?;
    /// assert_eq!(x.compute_blocking::<f64>()?.into_raw_vec_and_offset().0, vec![0.5, 1.0, 1.5, 0.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn read_csv(&self, path: &str, o: &ReadCsv) -> Result<Array, Error> {
        let label = format!("{}({path:?})", o.call);
        let refuse = |message: String| Error::Job {
            raises: Default::default(),
            array: Some(label.clone()),
            message: format!("`{label}`: {message}"),
        };
        if !o.delimiter.is_ascii() {
            return Err(refuse(format!(
                "the delimiter {:?} is not one ASCII character",
                o.delimiter
            )));
        }
        if let Some(cols) = &o.usecols {
            let names = cols.iter().filter(|c| matches!(c, Column::Name(_))).count();
            if o.pandas_usecols && names > 0 && names < cols.len() {
                // pandas' rule: a list of names mixed with numbers is ambiguous.
                return Err(refuse(
                    "usecols must be all column names or all column numbers (as pandas takes them), not both"
                        .into(),
                ));
            }
            if names > 0 && !o.header {
                return Err(refuse(format!(
                    "usecols names columns ({}), but the file is read without a header line to name them",
                    cols.iter()
                        .filter_map(|c| match c {
                            Column::Name(n) => Some(format!("{n:?}")),
                            Column::Index(_) => None,
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        let csv = CsvOptions {
            header: o.header,
            delimiter: o.delimiter as u8,
            usecols: o.usecols.clone(),
            file_order: o.pandas_usecols,
            dtypes: o.dtypes.clone(),
        };
        self.load_with(path, csv, o.dtype, label).await
    }

    /// [`Session::read_csv`] for code that is not async.
    pub fn read_csv_blocking(&self, path: &str, o: &ReadCsv) -> Result<Array, Error> {
        super::blocking::block_on(self.read_csv(path, o))?
    }

    /// A load of `path` read with `csv` as `dtype` (`None`: the file's own), named `label`
    /// in messages.
    async fn load_with(
        &self,
        path: &str,
        csv: CsvOptions,
        dtype: Option<nums_layout::DType>,
        label: String,
    ) -> Result<Array, Error> {
        self.refuse_closed()?;
        // As a job file's `load` takes it: s3:// as it is, a file:// URL or a path (relative
        // to the working directory when the session was made) as an absolute path.
        let path = match path.strip_prefix("file://") {
            None if path.starts_with("s3://") => path.to_string(),
            local => self
                .st
                .cwd
                .join(local.unwrap_or(path))
                .display()
                .to_string(),
        };
        let def = ArrayDef {
            name: format!("load{}", self.next()),
            line: 0,
            source: Source::Load { path, csv },
            block: None,
            dtype,
        };
        let job = self.program(vec![def.clone()]);
        let probes = crate::graph::probe(&job).await.map_err(|j| Error::Job {
            raises: Default::default(),
            array: Some(label.clone()),
            message: format!("`{label}`: {}", j.message),
        })?;
        let r = {
            let mut g = self.graph();
            g.set_compute(self.cfg.compute());
            g.define(&def, &probes)
        };
        // The names its columns are read with, for a save that names them.
        let names = probes
            .0
            .get(&def.name)
            .and_then(crate::export::probe_columns);
        if let (Ok(id), Some(names)) = (&r, names) {
            let mut columns = self.st.columns.lock().unwrap_or_else(|p| p.into_inner());
            columns.insert(*id, names);
        }
        let a = Array::made(
            self,
            r.map_err(|message| Error::Job {
                raises: Default::default(),
                array: Some(label.clone()),
                message: format!("`{label}`: {message}"),
            }),
            label,
        );
        a.check()?;
        Ok(a)
    }

    /// An input made of values in memory (an `ndarray` array of `f64`, `f32`, `i64` or
    /// `bool`, or a [`Block`]), in the session's default blocks: written to the store
    /// once, by the first compute that reads it.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-ndarray");
    /// # let s = Session::new(&format!("file://{}", dir.display()))?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let w = s.from_ndarray(ndarray::array![1.0, -2.0, 0.5]).named("w")?;
    /// let x = s.ones(&[4, 3]);
    /// assert_eq!(x.matmul(&w).compute_blocking::<f64>()?.into_raw_vec_and_offset().0, vec![-0.5; 4]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_ndarray(&self, values: impl super::IntoBlock) -> Array {
        let values = values.into_block();
        let shape: Vec<u64> = values.shape().iter().map(|&d| d as u64).collect();
        let block = crate::graph::default_block(
            &shape,
            values.dtype(),
            self.cfg.workers.max(1),
            self.cfg.memory_mb,
        );
        let meta = nums_layout::ArrayMeta::new(shape, block, values.dtype());
        let label = format!("array({})", crate::graph::shape_text(&meta.shape));
        let path = format!("{}/in/{}", self.st.id, self.next());
        let id = self.graph().input(meta, path);
        self.st
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, values);
        Array::made(self, Ok(id), label)
    }

    /// Computes several arrays at once (one plan, one pass over the inputs they share)
    /// and returns their values in the order asked.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-many");
    /// # let s = Session::new(&format!("file://{}", dir.display()))?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let x = s.arange(10.0);
    /// let v = s.compute_many_blocking(&[&x.min(None), &x.max(None), &x.sum(None)])?;
    /// let v: Vec<f64> = v.iter().map(|b| b.to_f64().sum()).collect();
    /// assert_eq!(v, vec![0.0, 9.0, 45.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn compute_many(&self, arrays: &[&Array]) -> Result<Vec<Block>, Error> {
        self.refuse_closed()?;
        self.cfg.check()?;
        check_region(&self.cfg).await?;
        let mut ids = Vec::with_capacity(arrays.len());
        for a in arrays {
            a.check()?;
            if !a.session().same(self) {
                return Err(super::other_session(None, None, a));
            }
            ids.push(a.id().map_err(Clone::clone)?);
        }
        self.values_of(&ids).await
    }

    /// The values of the session's nodes `ids`, computed first where they are not stored.
    pub(crate) async fn values_of(&self, ids: &[NodeId]) -> Result<Vec<Block>, Error> {
        self.values_with(ids, &[]).await
    }

    /// [`Session::values_of`] `ids`, computed with `also` (stored, not read back).
    pub(crate) async fn values_with(
        &self,
        ids: &[NodeId],
        also: &[NodeId],
    ) -> Result<Vec<Block>, Error> {
        let _busy = self.busy().await;
        self.make(&[ids, also].concat()).await?;
        let store = self.store()?;
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            let (path, meta) = self.stored_at(id).expect("made");
            let arr = StoredArray::new(&path, meta)
                .map_err(|e| self.engine_error(anyhow::Error::new(e)))?;
            out.push(
                arr.read_whole(&store)
                    .await
                    .map_err(|e| self.engine_error(anyhow::Error::new(e)))?,
            );
        }
        Ok(out)
    }

    /// [`Session::compute_many`] for code that is not async (see
    /// [`Array::compute_blocking`]).
    pub fn compute_many_blocking(&self, arrays: &[&Array]) -> Result<Vec<Block>, Error> {
        super::blocking::block_on(self.compute_many(arrays))?
    }

    /// Computes `a` now and keeps it in the session's store (as every compute does):
    /// later computes of `a`, and of every array made from it, read it in place. It
    /// stays there while a handle to `a` (a clone of it, or an array that is the same
    /// node) lives, as Dask keeps a persisted array (see [`Session`]).
    pub async fn persist(&self, a: &Array) -> Result<(), Error> {
        self.refuse_closed()?;
        self.cfg.check()?;
        a.check()?;
        if !a.session().same(self) {
            return Err(super::other_session(None, None, a));
        }
        let _busy = self.busy().await;
        let id = a.id().map_err(Clone::clone)?;
        self.make(&[id]).await?;
        self.warm(id).await
    }

    /// Reads the blocks of stored node `id` into this process's memory tier, when it is
    /// on and the array takes at most half of it (what `persist` promises: kept in memory
    /// where possible). Blocks made here are there already.
    async fn warm(&self, id: NodeId) -> Result<(), Error> {
        use futures::{StreamExt, TryStreamExt};
        let tier = nums_layout::tier::tier();
        let Some((path, meta)) = self.stored_at(id) else {
            return Ok(());
        };
        if !tier.on() || meta.nbytes() > tier.budget() / 2 {
            return Ok(());
        }
        let store = self.store()?;
        let arr = StoredArray::new(&path, meta).map_err(|e| self.engine_error(e.into()))?;
        let cold: Vec<Vec<u64>> = (arr.meta.blocks().into_iter())
            .filter(|idx| !tier.holds(&self.st.spec, &arr.block_key(idx)))
            .collect();
        futures::stream::iter(cold)
            .map(|idx| {
                let (arr, store) = (&arr, &store);
                async move { arr.read_shared(store, &idx, false).await.map(drop) }
            })
            .buffer_unordered(8)
            .try_collect::<Vec<()>>()
            .await
            .map(drop)
            .map_err(|e| self.engine_error(e.into()))
    }

    /// Writes `a` (computed first, if it is not) to `path` as a job's output is written:
    /// a `.npy`, `.csv` or `.parquet` file (`.csv` and `.parquet`: 1-D or 2-D), a `.npy` file on S3
    /// (`s3://bucket/key.npy`), or a Zarr v3 array (a folder, or an `s3://bucket/path`).
    /// An existing Zarr array or file there is replaced; anything else is refused.
    /// Relative paths resolve against the working directory when the session was made.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-save");
    /// # let s = Session::new(&format!("file://{}", dir.join("store").display()))?;
    /// let file = dir.join("x.npy");
    /// s.save_blocking(&s.arange(6.0), file.to_str().unwrap())?;
    /// let back = s.load_blocking(file.to_str().unwrap())?;
    /// assert_eq!(back.sum(None).compute_blocking::<f64>()?.sum(), 15.0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn save(&self, a: &Array, path: &str) -> Result<(), Error> {
        // (Nothing is deleted until the output is written: it reads `a` in place.)
        let _busy = self.busy().await;
        self.persist(a).await?;
        let id = a.id().map_err(Clone::clone)?;
        let target =
            crate::job::resolve_target(&self.st.cwd, path, &self.st.spec).map_err(|m| {
                Error::Job {
                    raises: Default::default(),
                    array: Some(a.label()),
                    message: format!("saving `{}` to {path:?}: {m}", a.label()),
                }
            })?;
        let (at, meta) = self.stored_at(id).expect("made");
        // A copy to a Zarr target copies the encoded chunks as they are in the store.
        (nums_layout::tier::tier()
            .write_back(Some((&self.st.spec, &at)), 0)
            .await)
            .map_err(|e| self.engine_error(e.into()))?;
        let in_process = self.cfg.runs_here(meta.nbytes());
        // A file's columns are named as the array was read (a CSV's header, a Parquet
        // file's), through what keeps columns, else c0, c1, ...: never by the session's node.
        let width = meta.shape.get(1).copied().unwrap_or(1);
        let read_with = {
            let roots = (self.st.columns.lock()).unwrap_or_else(|p| p.into_inner());
            self.graph().column_names(id, &roots)
        };
        // (A CSV is written without a header line, as NumPy's savetxt writes one.)
        let parquet_names =
            read_with.unwrap_or_else(|| (0..width).map(|j| format!("c{j}")).collect());
        let arr = StoredArray::new(&at, meta).map_err(|e| self.engine_error(e.into()))?;
        let o = crate::job::OutputDef {
            name: a.label(),
            line: 0,
            target,
            header: None,
        };
        let prefix = format!("{}/c{}", self.st.id, self.next());
        let mut guard = Abandoned::new(self, &prefix);
        let written = async {
            let backend = self.backend_for(in_process, 0, &mut guard).await?;
            let store = self.claimed_store().await?;
            let watch = backend.watch(self);
            let stages = backend.stages(self, &store, &prefix, &watch);
            crate::export::write_output(
                &stages,
                &Default::default(),
                &o,
                arr,
                (None, false),
                Some(parquet_names),
            )
            .await
            .map_err(|e| self.engine_error(e))
        }
        .await;
        guard.disarm();
        written.map(|_| ())
    }

    /// [`Session::save`] for code that is not async.
    pub fn save_blocking(&self, a: &Array, path: &str) -> Result<(), Error> {
        super::blocking::block_on(self.save(a, path))?
    }

    /// Writes `a` into an existing Zarr array (v2 or v3, made by any tool: xarray's
    /// `to_zarr` makes its arrays, then hands their values over) at `location` (a folder,
    /// or `s3://bucket/path`), from element `offset` along each axis: a region write. The
    /// functions encode the chunks with the array's own codecs and put them where they go;
    /// nothing is written to the session's store, and this process never holds the
    /// values. `a` is re-blocked to the array's chunks and cast to its dtype (as NumPy's
    /// assignment casts) in the same plan. The region must start on a chunk boundary and
    /// end on one or at the array's end (a chunk written in part would be read, changed
    /// and written by two tasks at once); anything else is refused, naming the chunks.
    pub async fn write_zarr(&self, a: &Array, location: &str, offset: &[u64]) -> Result<(), Error> {
        self.refuse_closed()?;
        self.cfg.check()?;
        a.check()?;
        if !a.session().same(self) {
            return Err(super::other_session(None, None, a));
        }
        let _busy = self.busy().await;
        let label = a.label();
        let refuse = |m: String| Error::Job {
            raises: Default::default(),
            array: Some(label.clone()),
            message: format!("writing `{label}` into the Zarr array {location:?}: {m}"),
        };
        let loc = match location.starts_with("s3://") {
            true => location.to_string(),
            false => {
                let p = location.strip_prefix("file://").unwrap_or(location);
                self.st.cwd.join(p).to_string_lossy().into_owned()
            }
        };
        let (spec, path) = crate::graph::split_zarr_location(&loc, &self.st.spec);
        let dst = Store::open(&spec).map_err(|e| refuse(e.to_string()))?;
        let target = StoredArray::open(&dst, &path)
            .await
            .map_err(|e| refuse(e.to_string()))?;
        let metadata: serde_json::Value = match dst.get(&target.metadata_key()).await {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| refuse(e.to_string()))?,
            Err(e) => return Err(refuse(e.to_string())),
        };
        let t = target.meta.clone();
        let shape: Vec<u64> = a.shape()?.iter().map(|&n| n as u64).collect();
        if shape.len() != t.ndim() || offset.len() != t.ndim() {
            return Err(refuse(format!(
                "a {}-D array from {offset:?} into a {}-D array",
                shape.len(),
                t.ndim()
            )));
        }
        for d in 0..t.ndim() {
            let (o, n, c, len) = (offset[d], shape[d], t.block[d].max(1), t.shape[d]);
            if o + n > len {
                return Err(refuse(format!(
                    "a region of shape {shape:?} from {offset:?} is outside the array's shape {:?}",
                    t.shape
                )));
            }
            if o % c != 0 || ((o + n) % c != 0 && o + n != len) {
                return Err(refuse(format!(
                    "a region of shape {shape:?} from {offset:?} is not whole chunks of {:?}",
                    t.block
                )));
            }
        }
        let mut x = a.clone();
        if x.dtype()? != t.dtype {
            x = x.astype(t.dtype);
        }
        let chunks: Vec<usize> = (t.block.iter().zip(&shape))
            .map(|(&c, &n)| c.min(n).max(1) as usize)
            .collect();
        if x.blocks()? != chunks {
            x = x.block(&chunks);
        }
        let id = x.id().map_err(Clone::clone)?;
        let prefix = format!("{}/c{}", self.st.id, self.next());
        let mut guard = Abandoned::new(self, &prefix);
        let written = async {
            let mut cg = self.compute_graph(&[(id, format!("n{id}"))]);
            let local = cg.local(id);
            let g = &mut cg.g;
            let grid = g.nodes[local].meta.grid();
            // x itself stays out of the store unless it already is there.
            g.nodes[local].persist = false;
            let export = g.nodes.len();
            g.nodes.push(crate::graph::Node {
                id: export,
                meta: nums_layout::ArrayMeta::new(
                    grid.clone(),
                    vec![1; grid.len()],
                    nums_layout::DType::Int64,
                ),
                op: NodeOp::ExportZarr {
                    x: local,
                    dest: nums_layout::Foreign {
                        store: spec.clone(),
                        metadata,
                        chunks: None,
                    },
                    path: path.clone(),
                    offset: (offset.iter().zip(&t.block))
                        .map(|(&o, &c)| o / c.max(1))
                        .collect(),
                },
                name: Some("zarr-region".into()),
                persist: true,
                def: None,
            });
            self.execute(&cg, &prefix, &mut guard).await
        }
        .await;
        guard.disarm();
        // The receipts go with the compute's folder.
        let store = self.claimed_store().await?;
        super::keep::delete_prefix(&store, &prefix)
            .await
            .map_err(store_error)?;
        written.map(drop)
    }

    /// [`Session::write_zarr`] for code that is not async.
    pub fn write_zarr_blocking(
        &self,
        a: &Array,
        location: &str,
        offset: &[u64],
    ) -> Result<(), Error> {
        super::blocking::block_on(self.write_zarr(a, location, offset))?
    }

    /// [`Session::persist`] for code that is not async.
    pub fn persist_blocking(&self, a: &Array) -> Result<(), Error> {
        super::blocking::block_on(self.persist(a))?
    }

    /// Where node `id` is stored, if it is.
    fn stored_at(&self, id: NodeId) -> Option<(String, nums_layout::ArrayMeta)> {
        let g = self.graph();
        let n = &g.graph().nodes[id];
        match &n.op {
            NodeOp::InPlace { path, .. } => Some((path.clone(), n.meta.clone())),
            _ => None,
        }
    }

    /// Puts `ids` in the store: what is not there yet is computed in one plan (the models
    /// they need fitted first, each a stage of its own), and each becomes an input read
    /// in place. A compute dropped before its end (a future let go, Ctrl-C in Python)
    /// leaves nothing behind ([`Abandoned`]).
    async fn make(&self, ids: &[NodeId]) -> Result<(), Error> {
        let todo: Vec<NodeId> = ids
            .iter()
            .copied()
            .filter(|&id| self.stored_at(id).is_none())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        // Inputs from memory asked for themselves are written whatever else is computed.
        self.write_pending(ids).await?;
        if todo.is_empty() {
            return Ok(());
        }
        let prefix = format!("{}/c{}", self.st.id, self.next());
        let mut guard = Abandoned::new(self, &prefix);
        let made = self.make_at(&todo, &prefix, &mut guard).await;
        guard.disarm();
        made
    }

    async fn make_at(
        &self,
        todo: &[NodeId],
        prefix: &str,
        guard: &mut Abandoned<'_>,
    ) -> Result<(), Error> {
        let mut targets: Vec<(NodeId, String)> =
            todo.iter().map(|&id| (id, format!("n{id}"))).collect();
        let cg = self.compute_graph(&targets);
        // The inputs this compute imports whole are kept as well: later computes read
        // them in place instead of importing them again. One it needs a part of (`x[:2]`
        // of a large file) is read only there, block by block, and not kept.
        let imports: Vec<NodeId> = cg
            .needed
            .iter()
            .filter(|&&i| cg.g.nodes[i].op.is_import() && cg.whole[i])
            .map(|&i| cg.back[i])
            .filter(|id| !todo.contains(id))
            .collect();
        targets.extend(imports.into_iter().map(|id| (id, format!("n{id}"))));
        let cg = self.compute_graph(&targets);
        let executed = self.execute(&cg, prefix, guard).await?;
        let main = &executed.main;
        let mut fits = self.st.fits.lock().unwrap_or_else(|p| p.into_inner());
        fits.extend(executed.fits.into_iter().map(|(i, f)| (cg.back[i], f)));
        drop(fits);
        let mut graph = self.graph();
        for &(id, _) in &targets {
            let local = cg.local(id);
            let path = match &main.nodes[local].op {
                // An import a fit's stage made, read there.
                NodeOp::InPlace { path, .. } => path.clone(),
                _ => crate::tasks::node_path(prefix, main, local),
            };
            graph.stored(id, path);
        }
        Ok(())
    }

    /// Runs compute graph `cg` (its persisted nodes stored under `prefix`): in this
    /// process or on the session's backend, as its size says.
    async fn execute(
        &self,
        cg: &ComputeGraph,
        prefix: &str,
        guard: &mut Abandoned<'_>,
    ) -> Result<crate::engine::Executed, Error> {
        self.write_pending(&cg.needed_in_session()).await?;
        let in_process = self.cfg.runs_here_with(cg.bytes, cg.warm);
        let backend =
            (self.backend_for(in_process, cg.bytes - cg.warm.min(cg.bytes), guard)).await?;
        let store = self.claimed_store().await?;
        let watch = backend.watch(self);
        // Described as a run describes its outputs: read in place by later computes, and
        // by a fit's passes, as any Zarr array.
        let attrs = |n: &crate::graph::Node| {
            let id =
                (n.name.as_deref()).and_then(|name| name.strip_prefix('n')?.parse::<NodeId>().ok());
            serde_json::json!({
                "source": "nums-cloud API",
                "array": id.and_then(|id| self.owner(id)),
            })
        };
        let stages = backend.stages(self, &store, prefix, &watch);
        // Computed here, the arrays are read only by this process, which has their
        // metadata (a save to Zarr describes its copy).
        let stages = match in_process {
            true => stages.undescribed(),
            false => stages.describing(&attrs),
        };
        let c = crate::engine::Computation {
            graph: cg.g.clone(),
            settle: None,
            main: None,
            unconverged: crate::engine::Unconverged::Report,
        };
        let result = crate::engine::execute(c, &stages, &Default::default()).await;
        watch.progress.finish();
        let cleanup = super::keep::delete_prefix(&store, &format!("{prefix}/tmp")).await;
        let executed = result.map_err(|e| self.engine_error_in(e, &cg.back))?;
        cleanup.map_err(store_error)?;
        // As a job's run refuses to commit: another tool's Zarr array whose chunks were
        // written again may have been read part old, part new.
        let changed = crate::graph::foreign_changed(&cg.g, &store.counters)
            .await
            .map_err(|e| self.engine_error(e.into()))?;
        if let Some(url) = changed.first() {
            return Err(self.engine_error(anyhow::anyhow!(
                "input {url} changed while this compute read it (its chunks are not those it \
                 had when it was loaded); load it again"
            )));
        }
        Ok(executed)
    }

    /// The graph of a compute of `targets` (each a node of the session and the name it is
    /// stored under), with the nodes it needs.
    fn compute_graph(&self, targets: &[(NodeId, String)]) -> ComputeGraph {
        let (g, back) = self.graph().for_compute(targets);
        let work = crate::tasks::block_work(&g);
        // What the fits it makes read: their X and y, made in the fits' own stages.
        let mut fitting = vec![false; g.nodes.len()];
        for n in g.nodes.iter().rev() {
            let fit = matches!(n.op, NodeOp::Fit { .. }) && (n.persist || work.needed(n.id));
            if fit || fitting[n.id] {
                for i in n.op.operands() {
                    fitting[i] = true;
                }
            }
        }
        let needed: Vec<NodeId> = (0..g.nodes.len())
            .filter(|&i| work.needed(i) || fitting[i])
            .collect();
        let whole: Vec<bool> = (0..g.nodes.len())
            .map(|i| fitting[i] || work.bytes(i) == g.nodes[i].meta.nbytes())
            .collect();
        let bytes = (needed.iter())
            .map(|&i| match fitting[i] {
                true => g.nodes[i].meta.nbytes(),
                false => work.bytes(i),
            })
            .sum();
        // Inputs read in place whose blocks are in memory here (by key: whether they are
        // current is checked when they are read), and values this process holds (NumPy's,
        // which go to the tier unwritten before the compute: a 16 MB index array of
        // cross-validation's folds counted as cold sent the gather's counts to the
        // function processes, and all the session kept in memory to the store first).
        let tier = nums_layout::tier::tier();
        let pending = self.st.pending.lock().unwrap_or_else(|p| p.into_inner());
        let warm = match tier.on() {
            false => 0,
            true => (needed.iter())
                .filter_map(|&i| match &g.nodes[i].op {
                    NodeOp::InPlace {
                        path,
                        foreign: None,
                        ..
                    } => Some((i, path)),
                    _ => None,
                })
                .map(|(i, path)| {
                    let held = |idx: &[u64]| {
                        pending.contains_key(&back[i])
                            || tier.holds(&self.st.spec, &nums_layout::zarr::chunk_key(path, idx))
                    };
                    match fitting[i] {
                        true => work_all_held(&g.nodes[i].meta, held),
                        false => work.bytes_held(i, held),
                    }
                })
                .sum(),
        };
        drop((work, pending));
        ComputeGraph {
            g,
            back,
            needed,
            whole,
            bytes,
            warm,
        }
    }

    /// The backend a compute runs on: this process (a compute within
    /// `in_process_bytes`), or the session's (started by the first compute that needs
    /// it), which an abandoned compute then stops.
    async fn backend_for(
        &self,
        in_process: bool,
        makes: u64,
        guard: &mut Abandoned<'_>,
    ) -> Result<Arc<SessionBackend>, Error> {
        let tier = nums_layout::tier::tier();
        let written = if in_process {
            // Room for what this compute keeps in memory unwritten: the least recently
            // used of the rest go to the store (up to half the tier is unwritten).
            tier.write_back(None, (tier.budget() / 2).saturating_sub(makes))
                .await
        } else {
            // Another process reads the store: what this session made here and kept only
            // in memory is written first.
            tier.write_back(Some((&self.st.spec, &self.st.id)), 0).await
        };
        written.map_err(|e| self.engine_error(e.into()))?;
        if in_process {
            return Ok(Arc::new(SessionBackend {
                made_with: (*self.cfg).clone(),
                backend: crate::backend::Backend::in_process(&self.cfg.compute()),
                in_process: true,
                log_id: String::new(),
            }));
        }
        guard.stops_backend = true;
        self.started_backend().await
    }

    /// How a compute of `arrays` would run (where, over how many bytes, in how many
    /// invocations), without running it.
    ///
    /// ```
    /// # use nums_cloud::api::{Place, Session};
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-explain");
    /// let s = Session::new(&format!("file://{}", dir.display()))?;
    /// let small = s.ones(&[1000]).sum(None);
    /// assert_eq!(s.explain(&[&small])?.place, Place::InProcess);
    /// let large = s.ones(&[10_000_000]).sum(None); // 80 MB: over the threshold
    /// let e = s.explain(&[&large])?;
    /// assert!(matches!(e.place, Place::Backend(_)), "{e}");
    /// assert!(e.to_string().starts_with("on the local (function processes) backend"), "{e}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn explain(&self, arrays: &[&Array]) -> Result<super::Explain, Error> {
        let mut ids = Vec::with_capacity(arrays.len());
        for a in arrays {
            a.check()?;
            ids.push(a.id().map_err(Clone::clone)?);
        }
        let todo: Vec<NodeId> = ids
            .into_iter()
            .filter(|&id| self.stored_at(id).is_none())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let targets: Vec<(NodeId, String)> =
            todo.iter().map(|&id| (id, format!("n{id}"))).collect();
        let cg = self.compute_graph(&targets);
        let work = cg.bytes;
        let fits = (cg.needed.iter())
            .filter(|&&i| matches!(cg.g.nodes[i].op, NodeOp::Fit { .. }))
            .count();
        let place = if todo.is_empty() {
            super::Place::Stored
        } else if self.cfg.runs_here_with(work, cg.warm) {
            super::Place::InProcess
        } else {
            super::Place::Backend(self.cfg.backend)
        };
        let plan = (fits == 0 && !todo.is_empty())
            .then(|| {
                crate::plan::plan_for(
                    &self.cfg.engine(&self.st.spec),
                    &cg.g,
                    &format!("{}/explain", self.st.id),
                    &Default::default(),
                    None,
                    None,
                )
                .ok()
            })
            .flatten();
        Ok(super::Explain {
            place,
            work_bytes: work,
            warm_bytes: cg.warm,
            in_process_bytes: self.cfg.in_process_bytes,
            invocations: plan.as_ref().map(|p| p.batches.len()),
            tasks: plan.as_ref().map(|p| p.tasks),
            fits,
        })
    }

    /// What the fit that made `w` measured, once `w` is computed.
    pub(crate) fn fitted(&self, w: &Array) -> Option<crate::models::solver::Fitted> {
        let id = w.id().ok()?;
        self.st
            .fits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
    }

    /// Writes the values from memory that nodes `ids` are.
    async fn write_pending(&self, ids: &[NodeId]) -> Result<(), Error> {
        let todo: Vec<(NodeId, Block)> = {
            let mut p = self.st.pending.lock().unwrap_or_else(|p| p.into_inner());
            ids.iter()
                .filter_map(|id| p.remove(id).map(|b| (*id, b)))
                .collect()
        };
        if todo.is_empty() {
            return Ok(());
        }
        let store = self.claimed_store().await?;
        for (id, values) in todo {
            let (path, meta) = self.stored_at(id).expect("an input");
            let arr = StoredArray::new(&path, meta)
                .map_err(|e| self.engine_error(anyhow::Error::new(e)))?;
            arr.write_whole(&store, &values)
                .await
                .map_err(|e| self.engine_error(anyhow::Error::new(e)))?;
            arr.write_metadata(&store)
                .await
                .map_err(|e| self.engine_error(anyhow::Error::new(e)))?;
        }
        Ok(())
    }

    /// The backend for the session's settings: the one running, or a new one, started on
    /// the session's runtime.
    async fn started_backend(&self) -> Result<Arc<SessionBackend>, Error> {
        let mut slot = self.st.backend.lock().await;
        if let Some(b) = slot.as_ref().filter(|b| b.made_with == *self.cfg) {
            return Ok(b.clone());
        }
        if let Some(old) = slot.take() {
            SessionBackend::stop(old).await;
        }
        let b = Arc::new(SessionBackend {
            made_with: (*self.cfg).clone(),
            backend: crate::backend::Backend::new(
                &self.cfg.compute(),
                self.cfg.function_binary.clone(),
            ),
            in_process: false,
            log_id: format!("{}-{}", self.st.id, self.next()),
        });
        let rt = self.st.runtime_handle()?;
        let started = b.clone();
        rt.spawn(async move { started.backend.start(&started.log_id).await.map(|_| ()) })
            .await
            .map_err(|e| Error::Runtime {
                message: format!("starting the functions: {e}"),
            })?
            .map_err(|e| self.engine_error(e))?;
        *slot = Some(b.clone());
        Ok(b)
    }

    /// Removes what the session keeps in the store (computed arrays, inputs from memory,
    /// imports) and stops its function processes. Arrays of the session cannot be computed
    /// afterwards.
    pub async fn close(&self) -> Result<(), Error> {
        self.st.closed.store(true, Ordering::SeqCst);
        self.deleted().await;
        if let Some(b) = self.st.backend.lock().await.take() {
            SessionBackend::stop(b).await;
        }
        if !self.st.touched.load(Ordering::SeqCst) {
            return Ok(());
        }
        super::keep::delete_prefix(&self.store()?, &self.st.id)
            .await
            .map(|_| ())
            .map_err(store_error)
    }

    /// [`Session::close`] for code that is not async (see [`Array::compute_blocking`]).
    pub fn close_blocking(&self) -> Result<(), Error> {
        super::blocking::block_on(self.close())?
    }
}

/// What a session's computes sent ([`Session::counts`]).
#[derive(Default)]
pub(crate) struct Counters {
    invocations: AtomicU64,
    in_process: AtomicU64,
    tasks: AtomicU64,
    bytes_read: AtomicU64,
    memory_hits: AtomicU64,
    memory_bytes_read: AtomicU64,
}

/// A compute's observer: its progress bar, and the session's counts.
pub(crate) struct Watch<'a> {
    progress: crate::progress::Progress,
    counts: &'a Counters,
    in_process: bool,
}

impl crate::stage::Observer for Watch<'_> {
    fn on_stage_start(&self, e: &crate::stage::StageStart<'_>) {
        self.progress.on_stage_start(e)
    }
    fn on_invocation(&self, r: &crate::invocation::Invocation) {
        self.counts.invocations.fetch_add(1, Ordering::Relaxed);
        if self.in_process {
            self.counts.in_process.fetch_add(1, Ordering::Relaxed);
        }
        self.counts.tasks.fetch_add(r.tasks, Ordering::Relaxed);
        self.progress.on_invocation(r)
    }
    fn on_batch_end(&self, e: &crate::stage::BatchEnd<'_>) {
        let c = self.counts;
        c.bytes_read
            .fetch_add(e.stats.bytes_read, Ordering::Relaxed);
        c.memory_hits
            .fetch_add(e.stats.memory_hits, Ordering::Relaxed);
        (c.memory_bytes_read).fetch_add(e.stats.memory_bytes_read, Ordering::Relaxed);
        self.progress.on_batch_end(e)
    }
    fn on_stage_end(&self, stage: &str, counters: &crate::dispatch::Dispatched) {
        self.progress.on_stage_end(stage, counters)
    }
    fn on_note(&self, text: &str) {
        self.progress.on_note(text)
    }
    fn on_expect(&self, what: &str, e: &crate::stage::Expected) {
        self.progress.on_expect(what, e)
    }
    fn on_heard(&self, stage: &str, h: &crate::reports::Heard) {
        self.progress.on_heard(stage, h)
    }
}

impl Session {
    /// What the session's computes have sent so far: invocations (in this process or to
    /// its backend; retries and backups count) and their block tasks. An array computed
    /// once is read in place afterwards while it is held, so computing it again sends
    /// nothing.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-counts");
    /// let s = Session::new(&format!("file://{}", dir.display()))?;
    /// let x = s.arange(1000.0).sum(None);
    /// x.compute_blocking::<f64>()?;
    /// let once = s.counts();
    /// assert!(once.invocations >= 1 && once.in_process == once.invocations); // small: here
    /// x.compute_blocking::<f64>()?; // read, not computed again
    /// (&x * 2.0).compute_blocking::<f64>()?; // reads x in place: one more small task
    /// assert_eq!(s.counts().tasks, once.tasks + 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn counts(&self) -> super::Counts {
        let c = &self.st.counts;
        super::Counts {
            invocations: c.invocations.load(Ordering::Relaxed),
            in_process: c.in_process.load(Ordering::Relaxed),
            tasks: c.tasks.load(Ordering::Relaxed),
            bytes_read: c.bytes_read.load(Ordering::Relaxed),
            memory_hits: c.memory_hits.load(Ordering::Relaxed),
            memory_bytes_read: c.memory_bytes_read.load(Ordering::Relaxed),
        }
    }
}

/// Bytes of the arrays a compute reads or makes: what decides whether it runs in this
/// process.
/// A compute that may be dropped before its end: a future let go, or Ctrl-C in Python.
/// Dropped armed, it removes what the compute wrote (nothing of it was committed: only
/// a finished compute marks its arrays stored) and, when the compute ran on the
/// session's backend, stops its function processes (an invocation in flight dies with
/// its process; the next compute starts new ones). Disarmed when the compute returns.
pub(crate) struct Abandoned<'a> {
    s: &'a Session,
    prefix: String,
    stops_backend: bool,
    armed: bool,
}

impl<'a> Abandoned<'a> {
    fn new(s: &'a Session, prefix: &str) -> Abandoned<'a> {
        Abandoned {
            s,
            prefix: prefix.to_string(),
            stops_backend: false,
            armed: true,
        }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let st = &self.s.st;
        // Taken now, stopped on the session's runtime (a drop cannot wait): once the
        // abandoned compute's own handle to it is gone, it stops.
        let backend = self
            .stops_backend
            .then(|| st.backend.try_lock().ok().and_then(|mut b| b.take()))
            .flatten();
        let (spec, prefix) = (st.spec.clone(), self.prefix.clone());
        let Ok(rt) = st.runtime_handle() else {
            return;
        };
        rt.spawn(async move {
            if let Some(b) = backend {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
                while Arc::strong_count(&b) > 1 && std::time::Instant::now() < deadline {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                SessionBackend::stop(b).await;
            }
            if let Ok(store) = Store::open(&spec) {
                let _ = super::keep::delete_prefix(&store, &prefix).await;
            }
        });
    }
}

/// The deployment's region must be the one the AWS SDK will use: the environment's
/// (`AWS_REGION`, `AWS_DEFAULT_REGION`), else the profile's in the AWS config file
/// (`AWS_PROFILE`, `~/.aws/config`), the SDK's own providers in its order.
async fn check_region(cfg: &Config) -> Result<(), Error> {
    use aws_config::meta::region::RegionProviderChain;
    let Some(want) = cfg
        .region
        .as_deref()
        .filter(|_| cfg.backend == Backend::Lambda)
    else {
        return Ok(());
    };
    let chain = RegionProviderChain::first_try(
        aws_config::environment::region::EnvironmentVariableRegionProvider::new(),
    )
    .or_else(aws_config::profile::ProfileFileRegionProvider::new());
    let have = chain.region().await.map(|r| r.to_string());
    match have {
        Some(r) if r == want => Ok(()),
        have => Err(Error::Config {
            setting: "from_infra".into(),
            message: format!(
                "the deployment is in region {want}, but the AWS settings give {}: set \
                 AWS_REGION={want} in the program's environment, or the profile's region \
                 (the AWS SDK reads the region there)",
                have.map(|r| format!("region {r:?}"))
                    .unwrap_or_else(|| "none (AWS_REGION not set, no region in the profile)".into())
            ),
        }),
    }
}

impl State {
    /// The session's runtime (one worker thread; started the first time).
    pub(super) fn runtime_handle(&self) -> Result<tokio::runtime::Handle, Error> {
        let mut rt = self.runtime.lock().unwrap_or_else(|p| p.into_inner());
        if rt.is_none() {
            *rt = Some(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("nums-cloud-session")
                    .enable_all()
                    .build()
                    .map_err(|e| Error::Runtime {
                        message: format!("cannot start the session's runtime: {e}"),
                    })?,
            );
        }
        Ok(rt.as_ref().expect("just made").handle().clone())
    }
}

impl Drop for State {
    /// What the session kept goes with its last handle (best effort, at most 30 s; use
    /// [`Session::close`] to see errors), and its functions stop.
    fn drop(&mut self) {
        // A session that never opened its store has nothing there to remove.
        let closed = *self.closed.get_mut() || !*self.touched.get_mut();
        let backend = self.backend.get_mut().take();
        let runtime = self
            .runtime
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if closed && backend.is_none() {
            // Dropping a runtime blocks, which an async caller must not.
            if let Some(rt) = runtime {
                rt.shutdown_background();
            }
            return;
        }
        let spec = self.spec.clone();
        let prefix = self.id.clone();
        // On a thread of its own: this may run inside an async runtime, which must not
        // block on another.
        let cleanup = std::thread::spawn(move || {
            let rt = match runtime {
                Some(rt) => rt,
                None => match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(_) => return,
                },
            };
            rt.block_on(async {
                if let Some(b) = backend {
                    SessionBackend::stop(b).await;
                }
                if closed {
                    return;
                }
                let Ok(store) = Store::open(&spec) else {
                    return;
                };
                let _ = tokio::time::timeout(
                    std::time::Duration::from_secs(30),
                    super::keep::delete_prefix(&store, &prefix),
                )
                .await;
            });
        });
        let _ = cleanup.join();
    }
}

/// What the session's fits measured, by node (for the models' `n_iter_` and convergence).
pub(crate) type Fits = HashMap<NodeId, crate::models::solver::Fitted>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A session's node and store keys in an engine message become the array the user
    /// wrote, the punctuation around them kept.
    #[test]
    fn node_words_in_the_users_words() {
        let label = r#"read_csv("a.csv")"#;
        assert_eq!(named_node("n12:"), Some((12, false)));
        assert_eq!(in_user_words("n12:", label), r#"`read_csv("a.csv")`:"#);
        let key = "api-d57f/c1/out/n0/c/3/0),";
        assert_eq!(named_node(key), Some((0, false)));
        assert_eq!(
            in_user_words(key, label),
            r#"(3, 0) of `read_csv("a.csv")`),"#
        );
        assert_eq!(in_user_words("api-d57f/c1/out/n0/c/2", "x"), "(2,) of `x`");
    }
}
