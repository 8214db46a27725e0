//! Computing a session's arrays: the nodes they need planned (LSHS or naive, as `run`
//! plans a job), run on the session's backend (started by the first compute and kept),
//! and the values read back in memory. A computed array stays in the store and becomes an
//! input read in place. Also the session's I/O: loads (probed when defined), values from
//! memory (written by the first compute that reads them), and closing.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use nums_layout::{Block, Store, StoredArray};

use super::{Array, Config, Error, Session, State, store_error};
use crate::graph::{NodeId, NodeOp};
use crate::job::{ArrayDef, Backend, CsvOptions, Job, Source};
use crate::stage::Observer;

/// The session's backend (the run half's [`crate::backend::Backend`]: the invoker and,
/// for the local backend, the endpoint and its function processes), kept between
/// computes while the settings that made it hold.
pub(crate) struct SessionBackend {
    made_with: Config,
    backend: crate::backend::Backend,
    /// What its function processes' log folder is named after.
    log_id: String,
}

impl SessionBackend {
    /// The stage runner of one compute on this backend (no run journal: a session's
    /// computes are not resumed), observed by `observer`.
    fn stages<'a>(
        &'a self,
        job: &'a Job,
        store: &'a Store,
        observer: &'a dyn crate::stage::Observer,
    ) -> crate::stage::Stages<'a> {
        let t0 = std::time::Instant::now();
        crate::stage::Stages::new(job, store, &self.backend, None, observer, t0, &self.log_id)
    }

    /// Stops its function processes (their logs removed).
    async fn stop(b: Arc<SessionBackend>) {
        if let Ok(b) = Arc::try_unwrap(b) {
            b.backend.stop(true).await;
        }
    }
}

/// The node a word of an engine message names: `n12` (a target's name), or the last part
/// of a store path (`.../n12`, `.../n12p3`, `.../c3/out/n12/c/0`).
fn named_node(word: &str) -> Option<NodeId> {
    word.split('/').find_map(|part| {
        let digits = part.strip_prefix('n')?;
        let end = digits
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(digits.len());
        let rest = &digits[end..];
        (end > 0 && (rest.is_empty() || rest.starts_with('p') || rest.starts_with(')')))
            .then(|| digits[..end].parse().ok())
            .flatten()
    })
}

impl Session {
    /// An engine error in the program's words: each node it names (by a target's name or
    /// a store path) is followed by the array that made it; the array of the first is the
    /// error's.
    fn engine_error(&self, e: anyhow::Error) -> Error {
        let human = |m: &str| -> (String, Option<String>) {
            let mut out = String::with_capacity(m.len());
            let mut first = None;
            for (i, word) in m.split(' ').enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(word);
                if let Some(label) = named_node(word).and_then(|id| self.owner(id)) {
                    out.push_str(&format!(" (`{label}`)"));
                    first.get_or_insert(label);
                }
            }
            (out, first)
        };
        // The job value a session plans with is no file: its place says nothing.
        let place = format!("{}:0: ", self.job(Vec::new()).file.display());
        let message = format!("{e:#}").replace(&place, "");
        let mut error = Error::classify(&e, &message, &human);
        // A block that does not fit: name the session's array it belongs to.
        if let Error::Plan {
            array: array @ None,
            message,
            ..
        } = &mut error
            && let Some(x) = e.downcast_ref::<crate::error::Explained<crate::sched::PlanError>>()
            && let Some(label) = self.owner(x.error.node)
        {
            *message = message.replace("a part of its expression", &format!("`{label}`"));
            *array = Some(label);
        }
        error
    }
}

impl Session {
    /// A job value with the session's settings and store (what the planner and the
    /// probes read; never written anywhere).
    fn job(&self, arrays: Vec<ArrayDef>) -> Job {
        Job {
            file: self.st.cwd.join(format!("{}.api", self.st.id)),
            dir: self.st.cwd.clone(),
            name: self.st.id.clone(),
            name_line: 0,
            storage: self.st.spec.clone(),
            storage_line: 0,
            compute: self.cfg.compute(),
            arrays,
            outputs: Vec::new(),
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

    fn store(&self) -> Result<Store, Error> {
        Store::open(&self.st.spec).map_err(store_error)
    }

    /// A `.npy`, `.csv`, `.parquet` file or Zarr v3 array (a folder, or an `s3://` URL),
    /// as a job file's `load` reads it; its metadata is read now (its shape and dtype are
    /// known, a missing file is an error here). A Zarr array in the session's store that
    /// nums-cloud wrote is read in place; any other input is imported by the first
    /// compute that needs it, and kept: later computes read the import, not the file. Relative paths resolve against the working directory when
    /// the session was made.
    pub async fn load(&self, path: &str) -> Result<Array, Error> {
        self.load_with(path, CsvOptions::default()).await
    }

    /// [`Session::load`] for code that is not async.
    pub fn load_blocking(&self, path: &str) -> Result<Array, Error> {
        super::blocking::block_on(self.load(path))?
    }

    /// A `.csv` file read with NumPy's `loadtxt` options: `header` (the first line names
    /// the columns and is not data), `delimiter` (one ASCII character) and `usecols` (the
    /// columns kept, in that order; negative from the end). As for [`Session::load`].
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
        let label = format!("load_csv({path:?})");
        let refuse = |message: String| Error::Job {
            array: Some(label.clone()),
            message: format!("`{label}`: {message}"),
        };
        if !delimiter.is_ascii() {
            return Err(refuse(format!(
                "the delimiter {delimiter:?} is not one ASCII character"
            )));
        }
        let csv = CsvOptions {
            header,
            delimiter: delimiter as u8,
            usecols: usecols.map(|c| c.iter().map(|&i| crate::job::ColumnRef::Index(i)).collect()),
        };
        self.load_with(path, csv).await
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

    async fn load_with(&self, path: &str, csv: CsvOptions) -> Result<Array, Error> {
        self.refuse_closed()?;
        let label = format!("load({path:?})");
        let path = match url::Url::parse(path) {
            Ok(_) => path.to_string(),
            Err(_) => self.st.cwd.join(path).display().to_string(),
        };
        let def = ArrayDef {
            name: format!("load{}", self.next()),
            line: 0,
            source: Source::Load { path, csv },
            block: None,
            dtype: None,
        };
        let job = self.job(vec![def.clone()]);
        let probes = crate::graph::probe(&job).await.map_err(|j| Error::Job {
            array: Some(label.clone()),
            message: format!("`{label}`: {}", j.message),
        })?;
        let r = {
            let mut g = self.graph();
            g.set_compute(self.cfg.compute());
            g.define(&def, &probes)
        };
        let a = Array::made(
            self,
            r.map_err(|message| Error::Job {
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
        check_region(&self.cfg)?;
        let mut ids = Vec::with_capacity(arrays.len());
        for a in arrays {
            a.check()?;
            if !a.session().same(self) {
                return Err(Error::Job {
                    array: Some(a.label()),
                    message: format!("array `{}` belongs to another session", a.label()),
                });
            }
            ids.push(a.id().map_err(Clone::clone)?);
        }
        self.make(&ids).await?;
        let store = self.store()?;
        let mut out = Vec::with_capacity(ids.len());
        for &id in &ids {
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
    /// stays there until the session is closed.
    pub async fn persist(&self, a: &Array) -> Result<(), Error> {
        self.refuse_closed()?;
        self.cfg.check()?;
        a.check()?;
        if !a.session().same(self) {
            return Err(Error::Job {
                array: Some(a.label()),
                message: format!("array `{}` belongs to another session", a.label()),
            });
        }
        self.make(&[a.id().map_err(Clone::clone)?]).await
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
    /// in place.
    async fn make(&self, ids: &[NodeId]) -> Result<(), Error> {
        let todo: Vec<NodeId> = ids
            .iter()
            .copied()
            .filter(|&id| self.stored_at(id).is_none())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if todo.is_empty() {
            return self.write_pending(ids).await;
        }
        let k = self.next();
        let prefix = format!("{}/c{k}", self.st.id);
        let mut targets: Vec<(NodeId, String)> =
            todo.iter().map(|&id| (id, format!("n{id}"))).collect();
        let g = self.graph().for_compute(&targets);
        let work = crate::tasks::block_work(&g);
        let needed: Vec<NodeId> = (0..g.nodes.len()).filter(|&i| work.needed(i)).collect();
        drop(work);
        // The inputs this compute imports are kept as well: later computes read them in
        // place instead of importing them again.
        targets.extend(
            needed
                .iter()
                .filter(|&&i| g.nodes[i].op.is_import() && !todo.contains(&i))
                .map(|&i| (i, format!("n{i}"))),
        );
        // Models first: a fit is a stage of its own over its X and y, made first.
        let fits: Vec<NodeId> = needed
            .iter()
            .copied()
            .filter(|&i| matches!(g.nodes[i].op, NodeOp::Fit { .. }) && !todo.contains(&i))
            .chain(
                todo.iter()
                    .copied()
                    .filter(|&i| matches!(g.nodes[i].op, NodeOp::Fit { .. })),
            )
            .collect();
        for f in fits {
            Box::pin(self.fit(f)).await?;
        }
        if todo.iter().all(|&id| self.stored_at(id).is_some()) {
            return Ok(());
        }
        let g = self.graph().for_compute(&targets);
        self.write_pending(&needed).await?;
        let job = self.job(Vec::new());
        let plan =
            crate::plan::plan_with(&job, &g, self.cfg.scheduler, &prefix, &Default::default())
                .map_err(|e| self.engine_error(e))?;
        let backend = self.started_backend().await?;
        let store = self.store()?;
        let progress = crate::progress::Progress::new(self.cfg.progress);
        progress.on_expect("main", plan.batches.len() as u64);
        let stages = backend.stages(&job, &store, &progress);
        let result = stages
            .run(
                "main",
                &plan.batches,
                plan.tasks as u64,
                crate::stage::Resume::Never,
            )
            .await;
        progress.finish();
        let cleanup = store.delete_prefix(&format!("{prefix}/tmp")).await;
        result.map_err(|e| self.engine_error(e))?;
        cleanup.map_err(store_error)?;
        // Described once complete, as a run describes its outputs: read in place by later
        // computes, and by a fit's passes, as any Zarr array.
        let mut paths = Vec::with_capacity(targets.len());
        for &(id, _) in &targets {
            let path = crate::tasks::node_path(&prefix, &g, id);
            let arr = StoredArray::new(&path, g.nodes[id].meta.clone())
                .map_err(|e| self.engine_error(anyhow::Error::new(e)))?;
            let attrs = serde_json::json!({
                "complete": true,
                "source": "nums-cloud API",
                "array": self.owner(id),
                "version": env!("CARGO_PKG_VERSION"),
            });
            arr.write_metadata_with(&store, Some(attrs))
                .await
                .map_err(store_error)?;
            paths.push((id, path));
        }
        let mut graph = self.graph();
        for (id, path) in paths {
            graph.stored(id, path);
        }
        Ok(())
    }

    /// Fits the model of node `f` (a stage of passes over its X and y, made first) and
    /// stores its coefficients.
    async fn fit(&self, f: NodeId) -> Result<(), Error> {
        let (x, y, spec, meta) = {
            let g = self.graph();
            match &g.graph().nodes[f].op {
                NodeOp::Fit { x, y, spec } => {
                    (*x, *y, spec.clone(), g.graph().nodes[f].meta.clone())
                }
                _ => return Ok(()),
            }
        };
        Box::pin(self.make(&[x, y])).await?;
        let (x_path, x_meta) = self.stored_at(x).expect("made");
        let (y_path, _) = self.stored_at(y).expect("made");
        let backend = self.started_backend().await?;
        let store = self.store()?;
        let job = self.job(Vec::new());
        let prefix = format!("{}/c{}", self.st.id, self.next());
        let progress = crate::progress::Progress::new(self.cfg.progress);
        let stages = backend.stages(&job, &store, &progress);
        let data = crate::iterate::Data {
            job: &job,
            x_path: &x_path,
            y_path: &y_path,
            n: x_meta.shape[0],
            d: x_meta.shape[1] as usize,
            prefix: format!("{prefix}/fit"),
            stage: format!("fit{f}"),
            stages: &stages,
            store: &store,
            ahead: Default::default(),
        };
        let label = self.owner(f).unwrap_or_else(|| "a model".into());
        let fitted = crate::iterate::fit(&data, &spec, &label).await;
        progress.finish();
        let (fitted, _passes) = fitted.map_err(|e| self.engine_error(e))?;
        let path = format!("{prefix}/out/n{f}");
        let out =
            StoredArray::new(&path, meta).map_err(|e| self.engine_error(anyhow::Error::new(e)))?;
        let coef = Block::F64(ndarray::Array1::from(fitted.theta.clone()).into_dyn());
        out.write_block(&store, &[0], &coef)
            .await
            .map_err(|e| self.engine_error(anyhow::Error::new(e)))?;
        out.write_metadata(&store)
            .await
            .map_err(|e| self.engine_error(anyhow::Error::new(e)))?;
        self.st
            .fits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(f, fitted);
        self.graph().stored(f, path);
        Ok(())
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
        let store = self.store()?;
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
        if let Some(b) = slot.as_ref().filter(|b| b.made_with == self.cfg) {
            return Ok(b.clone());
        }
        if let Some(old) = slot.take() {
            SessionBackend::stop(old).await;
        }
        let job = self.job(Vec::new());
        let b = Arc::new(SessionBackend {
            made_with: self.cfg.clone(),
            backend: crate::backend::Backend::new(&job, self.cfg.function_binary.clone()),
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

    /// Removes what the session keeps in the store (computed arrays, inputs from memory)
    /// and stops its function processes. Arrays of the session cannot be computed
    /// afterwards.
    pub async fn close(&self) -> Result<(), Error> {
        self.st.closed.store(true, Ordering::SeqCst);
        if let Some(b) = self.st.backend.lock().await.take() {
            SessionBackend::stop(b).await;
        }
        self.store()?
            .delete_prefix(&self.st.id)
            .await
            .map(|_| ())
            .map_err(store_error)
    }

    /// [`Session::close`] for code that is not async (see [`Array::compute_blocking`]).
    pub fn close_blocking(&self) -> Result<(), Error> {
        super::blocking::block_on(self.close())?
    }
}

/// The deployment's region must be the environment's (the AWS SDK reads it there).
fn check_region(cfg: &Config) -> Result<(), Error> {
    let Some(want) = cfg
        .region
        .as_deref()
        .filter(|_| cfg.backend == Backend::Lambda)
    else {
        return Ok(());
    };
    let have = std::env::var("AWS_REGION").or_else(|_| std::env::var("AWS_DEFAULT_REGION"));
    match have {
        Ok(r) if r == want => Ok(()),
        have => Err(Error::Config {
            setting: "from_infra".into(),
            message: format!(
                "the deployment is in region {want}, but AWS_REGION is {}: set AWS_REGION={want} in the \
                 program's environment (the AWS SDK reads the region there)",
                have.map(|r| format!("{r:?}"))
                    .unwrap_or_else(|_| "not set".into())
            ),
        }),
    }
}

impl State {
    /// The session's runtime (one worker thread; started the first time).
    fn runtime_handle(&self) -> Result<tokio::runtime::Handle, Error> {
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
        let closed = *self.closed.get_mut();
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
                    store.delete_prefix(&prefix),
                )
                .await;
            });
        });
        let _ = cleanup.join();
    }
}

/// What the session's fits measured, by node (for the models' `n_iter_` and convergence).
pub(crate) type Fits = HashMap<NodeId, crate::models::solver::Fitted>;
