//! A run of a job in the store. Each run has its own id and prefix, `<job>/_runs/<run>/`,
//! holding everything it makes: intermediates (`tmp/`), the arrays it keeps, staged
//! (`out/<name>`), payloads that travel by key (`batches/`), its record (`run.json`) and
//! the journal of finished batches (`done.json`, for `--resume`).
//!
//! A lease (`<job>/_lease.json`, renewed while the run lives, expiring when its driver is
//! gone) keeps two drivers from running one job at once: the second is refused, naming the
//! first. When every batch has finished, [`Run::commit`] moves the staged arrays to
//! `<job>/<name>` so that a reader sees the old complete array or the new one, never a mix:
//! the old array (its `zarr.json` first) is removed, the new chunks move in, and the new
//! `zarr.json` comes last. A redo record (`<job>/_commit.json`) lets the next run of the job
//! finish a commit that was cut short.
//!
//! An output written elsewhere (a file, another Zarr path) has a lease of its own beside
//! it ([`OutputLease`]), so that two jobs never write one path at once. [`RESERVED`] lists
//! every name this layout gives a job's own keys.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use nums_layout::Store;
use serde::{Deserialize, Serialize};
use std::sync::Mutex;

/// How long a lease lasts without renewal: a killed driver's job is free again after it.
pub(crate) const LEASE_TTL: Duration = Duration::from_secs(60);
/// How often a live run renews its lease.
const LEASE_RENEW: Duration = Duration::from_secs(15);
/// How often the journal of finished batches is written.
const JOURNAL_EVERY: Duration = Duration::from_millis(500);

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".into())
}

/// Whether process `pid` of this host is alive.
fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid != 0 && unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
}

/// A new run id: sortable by start time, unique enough for one job's runs.
pub(crate) fn new_run_id() -> String {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}-{:04x}",
        t.as_millis(),
        fastrand::u16(..) ^ (std::process::id() as u16)
    )
}

/// Who holds a job's lease, or an output's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Lease {
    /// A fresh token per driver: the lease is ours while it carries our token.
    pub owner: String,
    pub run: String,
    /// Who writes: `job NAME`, or the command (`nums-cloud get`).
    #[serde(default)]
    pub writer: String,
    pub host: String,
    pub pid: u32,
    /// Unix seconds.
    pub started: u64,
    pub expires: u64,
}

impl Lease {
    /// Held by a live driver: not expired, and on this host, its process alive.
    fn live(&self) -> bool {
        self.expires > now() && (self.host != hostname() || alive(self.pid))
    }
}

/// What a run resumes only if it is unchanged: the job (its file, and what its inputs
/// hold) as one hash, and each input file's version (`Store::version`, by the file's
/// path) to say which one changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Fingerprint {
    pub hash: String,
    pub inputs: BTreeMap<String, String>,
}

impl Fingerprint {
    /// Why a run of `earlier` (run `id`) is not one of this: the input files that changed
    /// since, or else the job.
    fn differs(&self, id: &str, earlier: &RunRecord) -> String {
        let changed: Vec<&str> = (self.inputs.iter())
            .filter(|(p, v)| earlier.inputs.get(*p).is_some_and(|old| old != *v))
            .map(|(p, _)| p.as_str())
            .collect();
        if changed.is_empty() {
            format!("the job changed since run {id} (its file, or what its stored inputs hold)")
        } else {
            format!(
                "input {} changed since run {id} read it (its size, times or content)",
                changed.join(", ")
            )
        }
    }
}

/// What a run records about itself (`run.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RunRecord {
    run: String,
    job: String,
    /// The job's fingerprint (its hash): a run resumes only the same job.
    fingerprint: String,
    /// Its input files' versions ([`Fingerprint::inputs`]).
    #[serde(default)]
    inputs: BTreeMap<String, String>,
    started: u64,
    host: String,
    pid: u32,
}

/// The batches a run has finished, by stage (a dispatch of one plan).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Journal {
    pub done: BTreeMap<String, BTreeSet<usize>>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Phase {
    /// The old arrays are being removed.
    Clearing,
    /// The staged arrays are moving in.
    Moving,
}

/// The redo record of a commit (`<job>/_commit.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct CommitRecord {
    run: String,
    arrays: Vec<String>,
    phase: Phase,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    #[error(
        "job {job} is being run by another driver (run {run}, pid {pid} on {host}, started {ago} s ago); \
         wait for it to finish, or, if that driver is gone, its lease expires within {ttl} s"
    )]
    Busy {
        job: String,
        run: String,
        pid: u32,
        host: String,
        ago: u64,
        ttl: u64,
    },
    #[error(
        "output {output} is being written by {writer} (run {run}, pid {pid} on {host}, started {ago} s ago); \
         one writer at a time keeps it one answer whole: wait for it to finish, or, if that driver is gone, \
         its lease expires within {ttl} s"
    )]
    OutputBusy {
        output: String,
        writer: String,
        run: String,
        pid: u32,
        host: String,
        ago: u64,
        ttl: u64,
    },
    #[error(
        "job {job}: another driver took this job over (run {run}); this run's results were not committed"
    )]
    LeaseLost { job: String, run: String },
    #[error("output {output}: another writer took it over ({writer}); this run did not write it")]
    OutputLost { output: String, writer: String },
    #[error(transparent)]
    Store(#[from] nums_layout::Error),
    #[error("{0}")]
    Record(String),
}

/// A run in progress: its lease is renewed and its journal written in the background.
pub(crate) struct Run {
    pub job: String,
    pub id: String,
    store: Store,
    owner: String,
    /// The journal a resumed run starts from (verified by the caller), or empty.
    pub resumed: Option<Journal>,
    /// Runs of this job that were abandoned (killed, failed, interrupted) and removed.
    pub removed: Vec<String>,
    /// Why the latest earlier run was not resumed, when `--resume` asked for it: the job,
    /// or an input file, changed since.
    pub not_resumed: Option<String>,
    journal: Arc<Mutex<(Journal, bool)>>,
    lost: Arc<AtomicBool>,
    /// Set while [`Run::commit`] moves arrays: Ctrl-C waits for it rather than cut it short.
    committing: AtomicBool,
    /// The lease's confirmation where the store could not make it atomic: awaited by
    /// [`Run::confirm_lease`] before the run touches anything outside its own prefix.
    confirm: tokio::sync::Mutex<Confirm>,
    /// The leases of the outputs it writes outside the job's own arrays (held until
    /// [`Run::finish`], checked before the run commits).
    outputs: Vec<OutputLease>,
    background: Vec<tokio::task::JoinHandle<()>>,
}

/// Whether a run's hold on its lease is confirmed.
enum Confirm {
    Held,
    /// The read-back after the race pause, running while the run starts its work.
    Pending(tokio::task::JoinHandle<Result<(), RunError>>),
    /// The read-back found another driver's lease (why, as it was said first): this run
    /// never commits.
    Lost(String),
}

/// Runs' state: `<job>/_runs/<run>/`.
pub(crate) const RUNS: &str = "_runs";
/// The job's lease: `<job>/_lease.json`.
const LEASE: &str = "_lease";
/// A commit's redo record: `<job>/_commit.json`.
const COMMIT: &str = "_commit";
/// Local inputs uploaded for Lambda's functions: `<job>/_inputs/<file>`; and at the
/// store's root, the index of imported inputs ([`IMPORTS`]).
pub(crate) const INPUTS: &str = "_inputs";
/// The index of imported inputs: `_inputs/imports/<key>.json` at the store's root, one
/// [`Imported`] per file and the way it is read.
pub(crate) const IMPORTS: &str = "_inputs/imports";
/// Payloads that travel by key: `<run prefix>/_batches/<n>.json`.
pub(crate) const BATCHES: &str = "_batches";

/// Every name the store layout gives keys of a job's own, in one list: an array, an
/// output path or a path given to `put`/`get`/`show`/`rm` never uses one (an array named
/// `_runs` would be committed over the job's runs, wiping them).
pub(crate) const RESERVED: [&str; 5] = [RUNS, LEASE, COMMIT, INPUTS, BATCHES];

/// Whether a path segment (or a name) is reserved: one of [`RESERVED`], with or without a
/// suffix (`_lease.json`).
pub(crate) fn reserved(segment: &str) -> bool {
    let stem = segment.split('.').next().unwrap_or(segment);
    RESERVED.contains(&stem)
}

/// The error for a reserved name.
pub(crate) fn reserved_error(name: &str) -> String {
    format!(
        "{name:?} is reserved: the store layout names a job's own records {} (with or without a suffix); choose another name",
        RESERVED.join(", ")
    )
}

/// An input file imported into the store by a run: a later run of any job that loads the
/// same file the same way reads this array in place while the file holds what it held
/// (the same [`Store::version`]: size, modification and change times, inode and content
/// hash of a local file; size and ETag of an S3 object), instead of importing it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Imported {
    /// The file as the job named it (an absolute path or an `s3://` URL).
    pub file: String,
    /// How it is read (dtype and CSV or Parquet options), as the key hashes it.
    pub options: String,
    /// What the file held when it was imported (`Store::version`).
    pub version: String,
    /// The array it was imported to (its path under the store's root) and the stamp of
    /// that array's `zarr.json` then: an array written since is not the import.
    pub array: String,
    pub stamp: u64,
}

/// The folder of the index that lists the imports of the file `file` read with
/// `options` (one entry per array it was imported to).
pub(crate) fn import_folder(file: &str, options: &str) -> String {
    format!(
        "{IMPORTS}/{:016x}",
        fnv(format!("{file}\0{options}").as_bytes())
    )
}

/// The index key of the import of `file` (read with `options`) to `array`.
pub(crate) fn import_key(file: &str, options: &str, array: &str) -> String {
    format!(
        "{}/{:016x}.json",
        import_folder(file, options),
        fnv(array.as_bytes())
    )
}

/// FNV-1a of some bytes (a short stable tag).
pub(crate) fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The imports the store's index lists under `folder` (default: all), each with its key.
pub(crate) async fn imports_under(
    store: &Store,
    folder: &str,
) -> Result<Vec<(String, Imported)>, nums_layout::Error> {
    let keys = store.list(folder).await?;
    let mut out = Vec::new();
    for k in keys.into_iter().filter(|k| k.ends_with(".json")) {
        if let Some(bytes) = store.get_opt(&k).await?
            && let Ok(i) = serde_json::from_slice::<Imported>(&bytes)
        {
            out.push((k, i));
        }
    }
    Ok(out)
}

/// Every import the store's index lists, each with its key.
pub(crate) async fn imports(store: &Store) -> Result<Vec<(String, Imported)>, nums_layout::Error> {
    imports_under(store, IMPORTS).await
}

pub(crate) fn lease_key(job: &str) -> String {
    format!("{job}/{LEASE}.json")
}

/// The key of a job's commit record (`job` empty: its name in the job's folder).
pub(crate) fn commit_key(job: &str) -> String {
    match job {
        "" => format!("{COMMIT}.json"),
        _ => format!("{job}/{COMMIT}.json"),
    }
}

/// The prefix of run `run` of `job`.
pub(crate) fn run_prefix(job: &str, run: &str) -> String {
    format!("{job}/{RUNS}/{run}")
}

async fn get_json<T: for<'de> Deserialize<'de>>(
    store: &Store,
    key: &str,
) -> Result<Option<T>, RunError> {
    match store.get_opt(key).await? {
        None => Ok(None),
        Some(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| RunError::Record(format!("{key}: {e}"))),
    }
}

fn to_json<T: Serialize>(v: &T) -> Bytes {
    Bytes::from(serde_json::to_vec_pretty(v).expect("serialisable"))
}

impl Run {
    /// Starts a run of `job`: takes the job's lease (refused while another driver holds
    /// it), finishes a commit an earlier run left half done, takes the leases of the
    /// `outputs` it writes outside the job's own arrays (each `(store, key, output)`:
    /// refused, naming the writer, while another job or a `get` writes one), then either
    /// resumes the latest earlier run with the same `fingerprint` (`resume`) or removes the
    /// state of earlier runs (nothing else can be using it while we hold the lease). A run
    /// refused changes nothing.
    pub(crate) async fn start(
        store: &Store,
        job: &str,
        fingerprint: &Fingerprint,
        resume: bool,
        outputs: Vec<(Store, String, String)>,
    ) -> Result<Run, RunError> {
        let atomic = store.create_if_absent_is_atomic();
        Run::start_with(store, job, fingerprint, resume, atomic, outputs).await
    }

    /// [`Run::start`], told whether the store's create-if-absent is atomic (tests make a
    /// local folder behave like Garage).
    async fn start_with(
        store: &Store,
        job: &str,
        fingerprint: &Fingerprint,
        resume: bool,
        atomic: bool,
        outputs: Vec<(Store, String, String)>,
    ) -> Result<Run, RunError> {
        let owner = new_run_id();
        let mut lease = Lease {
            owner: owner.clone(),
            run: owner.clone(),
            writer: format!("job {job}"),
            host: hostname(),
            pid: std::process::id(),
            started: now(),
            expires: now() + LEASE_TTL.as_secs(),
        };
        let what = Leased::Job(job.to_string());
        let mut confirm = match acquire(store, &lease_key(job), &what, &lease, atomic).await? {
            None => Confirm::Held,
            Some(check) => Confirm::Pending(tokio::spawn(check)),
        };
        // Anything shared (a commit to finish, earlier runs' state) waits for the lease to
        // be confirmed; a run with nothing of the kind starts at once, in its own prefix,
        // and confirms before it commits.
        if let Some(rec) = get_json::<CommitRecord>(store, &commit_key(job)).await? {
            confirm_now(&mut confirm).await?;
            roll_forward(store, job, rec).await?;
        }
        // Earlier runs of this job, oldest first.
        let mut earlier: Vec<(String, Option<RunRecord>)> = Vec::new();
        let runs_prefix = format!("{job}/{RUNS}/");
        let mut ids: Vec<String> = store
            .list(&runs_prefix)
            .await?
            .into_iter()
            .filter_map(|k| {
                k.strip_prefix(&runs_prefix)
                    .and_then(|r| r.split('/').next())
                    .map(str::to_string)
            })
            .collect();
        ids.sort();
        ids.dedup();
        for id in ids {
            let rec = get_json::<RunRecord>(store, &format!("{}/run.json", run_prefix(job, &id)))
                .await
                .ok()
                .flatten();
            earlier.push((id, rec));
        }
        let resumable = resume
            .then(|| {
                earlier.iter().rev().find(|(_, r)| {
                    r.as_ref()
                        .is_some_and(|r| r.fingerprint == fingerprint.hash)
                })
            })
            .flatten()
            .map(|(id, _)| id.clone());
        let not_resumed = earlier
            .iter()
            .rev()
            .find_map(|(id, r)| Some((id, r.as_ref()?)))
            .filter(|_| resume && resumable.is_none())
            .map(|(id, r)| fingerprint.differs(id, r));
        let id = resumable.clone().unwrap_or_else(|| owner.clone());
        let mut held = Vec::new();
        for (s, key, output) in outputs {
            match OutputLease::take(&s, &key, &output, &lease.writer, &id).await {
                Ok(l) => held.push(l),
                Err(e) => {
                    for l in held {
                        let _ = l.release().await;
                    }
                    if let Confirm::Pending(h) = &confirm {
                        h.abort();
                    }
                    if let Ok(Some(l)) = get_json::<Lease>(store, &lease_key(job)).await
                        && l.owner == owner
                    {
                        let _ = store.delete(&lease_key(job)).await;
                    }
                    return Err(e);
                }
            }
        }
        if !earlier.is_empty() || resume {
            confirm_now(&mut confirm).await?;
        }
        let mut removed = Vec::new();
        for (old, _) in &earlier {
            if Some(old) != resumable.as_ref() {
                store.delete_prefix(&run_prefix(job, old)).await?;
                removed.push(old.clone());
            }
        }
        let resumed = match &resumable {
            Some(r) => Some(
                get_json::<Journal>(store, &format!("{}/done.json", run_prefix(job, r)))
                    .await?
                    .unwrap_or_default(),
            ),
            None => None,
        };
        if lease.run != id {
            lease.run = id.clone();
            store.put(&lease_key(job), to_json(&lease)).await?;
        }
        let record = RunRecord {
            run: id.clone(),
            job: job.to_string(),
            fingerprint: fingerprint.hash.clone(),
            inputs: fingerprint.inputs.clone(),
            started: now(),
            host: lease.host.clone(),
            pid: lease.pid,
        };
        store
            .put(
                &format!("{}/run.json", run_prefix(job, &id)),
                to_json(&record),
            )
            .await?;

        let journal = Arc::new(Mutex::new((resumed.clone().unwrap_or_default(), false)));
        let lost = Arc::new(AtomicBool::new(false));
        let background = vec![
            tokio::spawn(renew(store.clone(), lease_key(job), lease, lost.clone())),
            tokio::spawn(write_journal(
                store.clone(),
                format!("{}/done.json", run_prefix(job, &id)),
                journal.clone(),
            )),
        ];
        Ok(Run {
            job: job.to_string(),
            id,
            store: store.clone(),
            owner,
            resumed,
            removed,
            not_resumed,
            journal,
            lost,
            committing: AtomicBool::new(false),
            confirm: tokio::sync::Mutex::new(confirm),
            outputs: held,
            background,
        })
    }

    /// The run's prefix under the store root.
    pub(crate) fn prefix(&self) -> String {
        run_prefix(&self.job, &self.id)
    }

    /// Records that batch `batch` of `stage` finished (written to the journal soon).
    pub(crate) fn done(&self, stage: &str, batch: usize) {
        let mut j = self.journal.lock().expect("journal");
        j.0.done.entry(stage.to_string()).or_default().insert(batch);
        j.1 = true;
    }

    /// Writes the journal now.
    pub(crate) async fn flush(&self) -> Result<(), RunError> {
        write_journal_once(
            &self.store,
            &format!("{}/done.json", self.prefix()),
            &self.journal,
        )
        .await
    }

    /// Makes the staged arrays `names` (under `<prefix>/out/`) the job's arrays
    /// `<job>/<name>`, replacing what was there: readers see the old array or the new one,
    /// never a mix.
    pub(crate) async fn commit(&self, names: &[String]) -> Result<(), RunError> {
        self.check_lease().await?;
        if names.is_empty() {
            return Ok(()); // no record to write and remove (three S3 requests)
        }
        let rec = CommitRecord {
            run: self.id.clone(),
            arrays: names.to_vec(),
            phase: Phase::Clearing,
        };
        self.committing.store(true, Ordering::SeqCst);
        let done = async {
            self.store
                .put(&commit_key(&self.job), to_json(&rec))
                .await?;
            roll_forward(&self.store, &self.job, rec).await
        }
        .await;
        self.committing.store(false, Ordering::SeqCst);
        done
    }

    /// Whether the run is committing its arrays now.
    pub(crate) fn committing(&self) -> bool {
        self.committing.load(Ordering::SeqCst)
    }

    /// Waits until the run's lease is confirmed ([`acquire`]): before the run writes
    /// anything outside its own prefix. An error if another driver holds it.
    pub(crate) async fn confirm_lease(&self) -> Result<(), RunError> {
        confirm_now(&mut *self.confirm.lock().await).await?;
        for o in &self.outputs {
            confirm_now(&mut *o.confirm.lock().await).await?;
        }
        Ok(())
    }

    async fn check_lease(&self) -> Result<(), RunError> {
        self.confirm_lease().await?;
        let held = get_json::<Lease>(&self.store, &lease_key(&self.job)).await?;
        match held {
            Some(l) if l.owner == self.owner && !self.lost.load(Ordering::SeqCst) => {}
            other => {
                return Err(RunError::LeaseLost {
                    job: self.job.clone(),
                    run: other.map(|l| l.run).unwrap_or_else(|| "unknown".into()),
                });
            }
        }
        for o in &self.outputs {
            o.check().await?;
        }
        Ok(())
    }

    /// Ends the run: its state is removed (unless `keep`, or unless it is kept for
    /// `--resume` after a failure) and the lease released.
    pub(crate) async fn finish(mut self, remove_state: bool) -> Result<(), RunError> {
        for t in self.background.drain(..) {
            t.abort();
        }
        // The journal is only for a run whose state is kept.
        let flushed = if remove_state {
            self.store.delete_prefix(&self.prefix()).await?;
            Ok(())
        } else {
            self.flush().await
        };
        for o in self.outputs.drain(..) {
            o.release().await?;
        }
        if let Ok(Some(l)) = get_json::<Lease>(&self.store, &lease_key(&self.job)).await
            && l.owner == self.owner
        {
            self.store.delete(&lease_key(&self.job)).await?;
        }
        flushed
    }
}

/// The lease of one output path (a key beside the output, in the output's own store):
/// two writers of one path (two jobs, or a job and a `get`) never write it at once, so it
/// holds one writer's whole answer. Taken as the job's lease is ([`acquire`]), renewed
/// while held, given back by [`OutputLease::release`].
pub(crate) struct OutputLease {
    store: Store,
    key: String,
    output: String,
    owner: String,
    confirm: tokio::sync::Mutex<Confirm>,
    lost: Arc<AtomicBool>,
    renew: tokio::task::JoinHandle<()>,
}

impl OutputLease {
    /// Takes the lease `key` of `store` of output `output` for `writer` (`job NAME`) and its
    /// run `run`; refused while another writer holds it.
    pub(crate) async fn take(
        store: &Store,
        key: &str,
        output: &str,
        writer: &str,
        run: &str,
    ) -> Result<OutputLease, RunError> {
        let owner = new_run_id();
        let lease = Lease {
            owner: owner.clone(),
            run: run.to_string(),
            writer: writer.to_string(),
            host: hostname(),
            pid: std::process::id(),
            started: now(),
            expires: now() + LEASE_TTL.as_secs(),
        };
        let what = Leased::Output(output.to_string());
        let atomic = store.create_if_absent_is_atomic();
        let confirm = match acquire(store, key, &what, &lease, atomic).await? {
            None => Confirm::Held,
            Some(check) => Confirm::Pending(tokio::spawn(check)),
        };
        let lost = Arc::new(AtomicBool::new(false));
        let renew = tokio::spawn(renew(store.clone(), key.to_string(), lease, lost.clone()));
        Ok(OutputLease {
            store: store.clone(),
            key: key.to_string(),
            output: output.to_string(),
            owner,
            confirm: tokio::sync::Mutex::new(confirm),
            lost,
            renew,
        })
    }

    /// Confirms that the lease is ours (and still is): before the output is written.
    pub(crate) async fn check(&self) -> Result<(), RunError> {
        confirm_now(&mut *self.confirm.lock().await).await?;
        match get_json::<Lease>(&self.store, &self.key).await? {
            Some(l) if l.owner == self.owner && !self.lost.load(Ordering::SeqCst) => Ok(()),
            other => Err(RunError::OutputLost {
                output: self.output.clone(),
                writer: other.map_or_else(|| "unknown".into(), |l| l.writer),
            }),
        }
    }

    /// Gives the lease back, if it is still ours.
    pub(crate) async fn release(self) -> Result<(), RunError> {
        self.renew.abort();
        if let Ok(Some(l)) = get_json::<Lease>(&self.store, &self.key).await
            && l.owner == self.owner
        {
            self.store.delete(&self.key).await?;
        }
        Ok(())
    }
}

impl Drop for OutputLease {
    fn drop(&mut self) {
        self.renew.abort();
        if let Confirm::Pending(h) = self.confirm.get_mut() {
            h.abort();
        }
    }
}

/// What a lease is for, to name its holder when it is refused.
#[derive(Debug, Clone)]
enum Leased {
    Job(String),
    /// An output path, as the job file gives it.
    Output(String),
}

impl Leased {
    /// The error of a lease `h` holds.
    fn busy(&self, h: Lease) -> RunError {
        let (ago, ttl) = (
            now().saturating_sub(h.started),
            h.expires.saturating_sub(now()),
        );
        match self {
            Leased::Job(job) => RunError::Busy {
                job: job.clone(),
                run: h.run,
                pid: h.pid,
                host: h.host,
                ago,
                ttl,
            },
            Leased::Output(output) => RunError::OutputBusy {
                output: output.clone(),
                writer: h.writer,
                run: h.run,
                pid: h.pid,
                host: h.host,
                ago,
                ttl,
            },
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        for t in &self.background {
            t.abort();
        }
        if let Confirm::Pending(h) = self.confirm.get_mut() {
            h.abort();
        }
    }
}

/// Takes the lease, or says who holds it. On a store whose create-if-absent is atomic the
/// lease is then ours. On one that ignores conditional writes (Garage), and where a stale
/// lease is overwritten, two drivers may both write it: the last writer wins, and each
/// learns which by reading the lease back after a pause longer than a read and a write.
/// That check is returned, to run while the run starts its own work (it was most of a
/// small job's fixed cost on S3, 0.3 s a run).
async fn acquire(
    store: &Store,
    key: &str,
    what: &Leased,
    lease: &Lease,
    atomic: bool,
) -> Result<Option<impl Future<Output = Result<(), RunError>> + Send + 'static>, RunError> {
    for _ in 0..3 {
        match get_json::<Lease>(store, key).await.unwrap_or(None) {
            Some(h) if h.owner != lease.owner && h.live() => return Err(what.busy(h)),
            Some(_) => store.put(key, to_json(lease)).await?,
            None if !store.put_if_absent(key, to_json(lease)).await? => {
                continue; // another driver was first: look again
            }
            None if atomic => return Ok(None),
            None => {}
        }
        let (store, key, what) = (store.clone(), key.to_string(), what.clone());
        let owner = lease.owner.clone();
        return Ok(Some(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            match get_json::<Lease>(&store, &key).await? {
                Some(l) if l.owner == owner => Ok(()),
                Some(l) => Err(what.busy(l)),
                None => Err(RunError::Record(format!(
                    "{key}: another driver took and released this lease as this run started"
                ))),
            }
        }));
    }
    match get_json::<Lease>(store, key).await? {
        Some(h) => Err(what.busy(h)),
        None => Err(RunError::Record(format!("{key}: cannot take this lease"))),
    }
}

/// Waits for a pending confirmation of the lease; an error once it is known lost.
async fn confirm_now(c: &mut Confirm) -> Result<(), RunError> {
    match std::mem::replace(c, Confirm::Lost("this run lost its lease".into())) {
        Confirm::Held => {}
        Confirm::Lost(why) => {
            *c = Confirm::Lost(why.clone());
            return Err(RunError::Record(why));
        }
        Confirm::Pending(h) => {
            let confirmed = h
                .await
                .map_err(|e| RunError::Record(format!("confirming a lease: {e}")))
                .and_then(|r| r);
            if let Err(e) = confirmed {
                *c = Confirm::Lost(e.to_string());
                return Err(e);
            }
        }
    }
    *c = Confirm::Held;
    Ok(())
}

/// Renews lease `key` until the run ends; flags `lost` when another driver took it.
async fn renew(store: Store, key: String, mut lease: Lease, lost: Arc<AtomicBool>) {
    loop {
        tokio::time::sleep(LEASE_RENEW).await;
        match get_json::<Lease>(&store, &key).await {
            Ok(Some(l)) if l.owner != lease.owner => {
                lost.store(true, Ordering::SeqCst);
                return;
            }
            Err(_) => continue, // the store is down for now: try again later
            _ => {}
        }
        lease.expires = now() + LEASE_TTL.as_secs();
        let _ = store.put(&key, to_json(&lease)).await;
    }
}

async fn write_journal(store: Store, key: String, journal: Arc<Mutex<(Journal, bool)>>) {
    loop {
        tokio::time::sleep(JOURNAL_EVERY).await;
        let _ = write_journal_once(&store, &key, &journal).await;
    }
}

/// Writes the journal if it changed since it was last written.
async fn write_journal_once(
    store: &Store,
    key: &str,
    journal: &Mutex<(Journal, bool)>,
) -> Result<(), RunError> {
    let snapshot = {
        let mut j = journal.lock().expect("journal");
        if !j.1 {
            return Ok(());
        }
        j.1 = false;
        j.0.clone()
    };
    if let Err(e) = store.put(key, to_json(&snapshot)).await {
        journal.lock().expect("journal").1 = true; // try again next time
        return Err(e.into());
    }
    fault_after_journal(snapshot.done.values().map(BTreeSet::len).sum());
    Ok(())
}

/// Fault injection for the integrity tests: `NUMS_FAULT_SIGNAL_AFTER_BATCHES=SIG:K` makes
/// the driver send itself signal SIG (9 kills it, 2 is Ctrl-C) once the journal it stored
/// records K finished batches. A signal sent from outside when the journal shows K races
/// the rest of a fast run (the journal's last write comes just before the commit).
fn fault_after_journal(done: usize) {
    static SPEC: std::sync::OnceLock<Option<(i32, usize)>> = std::sync::OnceLock::new();
    static SENT: AtomicBool = AtomicBool::new(false);
    let spec = SPEC.get_or_init(|| {
        let v = std::env::var("NUMS_FAULT_SIGNAL_AFTER_BATCHES").ok()?;
        let (sig, k) = v.split_once(':')?;
        Some((sig.trim().parse().ok()?, k.trim().parse().ok()?))
    });
    if let Some((sig, k)) = *spec
        && done >= k
        && !SENT.swap(true, Ordering::SeqCst)
    {
        // SAFETY: kill(2) on our own pid with a plain signal number has no memory effects.
        unsafe {
            libc::kill(libc::getpid(), sig);
        }
    }
}

/// Carries a commit through from its record (again, if it was cut short: each step can
/// be repeated).
async fn roll_forward(store: &Store, job: &str, mut rec: CommitRecord) -> Result<(), RunError> {
    if rec.phase == Phase::Clearing {
        for name in &rec.arrays {
            let fin = format!("{job}/{name}");
            store.delete(&format!("{fin}/zarr.json")).await?;
            store.delete_prefix(&fin).await?;
        }
        rec.phase = Phase::Moving;
        store.put(&commit_key(job), to_json(&rec)).await?;
    }
    let staged_root = format!("{}/out", run_prefix(job, &rec.run));
    for name in &rec.arrays {
        let staged = format!("{staged_root}/{name}");
        let fin = format!("{job}/{name}");
        let keys: Vec<String> = store
            .list(&staged)
            .await?
            .into_iter()
            .filter(|k| !k.ends_with("/zarr.json"))
            .collect();
        let moves: HashMap<String, String> = keys
            .into_iter()
            .map(|k| {
                let to = format!("{fin}{}", &k[staged.len()..]);
                (k, to)
            })
            .collect();
        futures::stream::iter(moves)
            .map(|(from, to)| async move { store.rename(&from, &to).await })
            .buffer_unordered(32)
            .try_collect::<Vec<()>>()
            .await?;
        // The metadata last: the array is visible only once all of it is there.
        let meta = format!("{staged}/zarr.json");
        if store.head(&meta).await?.is_some() {
            store.rename(&meta, &format!("{fin}/zarr.json")).await?;
        }
        store.delete_prefix(&staged).await?; // what renames leave (empty folders)
    }
    store.delete(&commit_key(job)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nums_layout::StoreSpec;

    fn fp(hash: &str) -> Fingerprint {
        Fingerprint {
            hash: hash.into(),
            inputs: BTreeMap::new(),
        }
    }

    fn temp_store(tag: &str) -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("nums-runs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let spec = StoreSpec {
            url: url::Url::from_directory_path(&dir).unwrap().to_string(),
            endpoint: None,
        };
        (Store::open(&spec).unwrap(), dir)
    }

    #[tokio::test]
    async fn a_second_driver_is_refused_and_a_dead_ones_lease_is_taken_over() {
        let (store, dir) = temp_store("lease");
        let a = Run::start(&store, "j", &fp("f"), false, vec![])
            .await
            .unwrap();
        let e = Run::start(&store, "j", &fp("f"), false, vec![])
            .await
            .err()
            .expect("refused");
        assert!(matches!(e, RunError::Busy { .. }), "{e}");
        assert!(e.to_string().contains(&a.id), "{e}");
        a.finish(true).await.unwrap();
        // A lease left by a process that no longer exists is taken over at once.
        let dead = Lease {
            owner: "x".into(),
            run: "old".into(),
            writer: "job j".into(),
            host: hostname(),
            pid: 999_999_999,
            started: now(),
            expires: now() + 60,
        };
        store.put(&lease_key("j"), to_json(&dead)).await.unwrap();
        let b = Run::start(&store, "j", &fp("f"), false, vec![])
            .await
            .unwrap();
        b.finish(true).await.unwrap();
        std::fs::remove_dir_all(dir).ok();
    }

    /// A store that ignores conditional writes (Garage): the run starts before its lease is
    /// confirmed, and a driver that lost the race learns so before it commits anything.
    #[tokio::test]
    async fn a_run_that_lost_the_race_for_its_lease_commits_nothing() {
        let (store, dir) = temp_store("race");
        store
            .put("j/X/zarr.json", Bytes::from_static(b"old"))
            .await
            .unwrap();
        let a = Run::start_with(&store, "j", &fp("f"), false, false, vec![])
            .await
            .unwrap();
        assert!(matches!(*a.confirm.lock().await, Confirm::Pending(_)));
        // Another driver's write of the lease lands last, as both saw none.
        let b = Lease {
            owner: "b".into(),
            run: "rb".into(),
            writer: "job j".into(),
            host: hostname(),
            pid: std::process::id(),
            started: now(),
            expires: now() + 60,
        };
        store.put(&lease_key("j"), to_json(&b)).await.unwrap();
        let e = a.commit(&["X".to_string()]).await.expect_err("lost");
        assert!(
            matches!(&e, RunError::Busy { run, .. } if run == "rb"),
            "{e}"
        );
        assert!(a.confirm_lease().await.is_err(), "still lost");
        a.finish(false).await.unwrap(); // its state kept: an earlier run for the next one
        assert_eq!(&store.get("j/X/zarr.json").await.unwrap()[..], b"old");
        assert!(store.get_opt(&commit_key("j")).await.unwrap().is_none());
        let held: Lease = get_json(&store, &lease_key("j")).await.unwrap().unwrap();
        assert_eq!(held, b, "the winner's lease stays");

        // Unraced, the confirmation comes back and the run commits. A run with earlier
        // runs' state to remove waits for it first.
        store.delete(&lease_key("j")).await.unwrap();
        let c = Run::start_with(&store, "j", &fp("f"), false, false, vec![])
            .await
            .unwrap();
        assert!(matches!(*c.confirm.lock().await, Confirm::Held), "waited");
        assert_eq!(c.removed.len(), 1, "a's state");
        c.commit(&[]).await.unwrap();
        c.finish(true).await.unwrap();
        let d = Run::start_with(&store, "j", &fp("f"), false, false, vec![])
            .await
            .unwrap();
        d.confirm_lease().await.unwrap();
        d.finish(true).await.unwrap();
        assert!(store.get_opt(&lease_key("j")).await.unwrap().is_none());
        std::fs::remove_dir_all(dir).ok();
    }

    /// A run refused because another writer holds one of its outputs changes nothing: the
    /// state of an earlier run stays, and the job's lease goes back.
    #[tokio::test]
    async fn a_run_refused_for_a_busy_output_changes_nothing() {
        let (store, dir) = temp_store("outputs");
        let a = Run::start(&store, "j", &fp("f1"), false, vec![])
            .await
            .unwrap();
        a.done("main", 1);
        let id = a.id.clone();
        a.finish(false).await.unwrap();
        let key = "out/.Y.nums-cloud-lease.json";
        let outputs = || vec![(store.clone(), key.to_string(), "out/Y".to_string())];
        let other = OutputLease::take(&store, key, "out/Y", "job k", "rk")
            .await
            .unwrap();
        let e = Run::start(&store, "j", &fp("f2"), false, outputs())
            .await
            .err()
            .expect("refused");
        assert!(
            matches!(&e, RunError::OutputBusy { writer, run, .. } if writer == "job k" && run == "rk"),
            "{e}"
        );
        assert!(
            e.to_string().contains("out/Y is being written by job k"),
            "{e}"
        );
        let kept = format!("{}/run.json", run_prefix("j", &id));
        assert!(store.head(&kept).await.unwrap().is_some(), "state kept");
        assert!(store.get_opt(&lease_key("j")).await.unwrap().is_none());
        other.release().await.unwrap();
        let b = Run::start(&store, "j", &fp("f2"), false, outputs())
            .await
            .unwrap();
        assert_eq!(b.removed, vec![id]);
        b.check_lease().await.unwrap();
        b.finish(true).await.unwrap();
        assert!(store.head(key).await.unwrap().is_none(), "given back");
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn a_changed_input_file_is_named() {
        let now = Fingerprint {
            hash: "2".into(),
            inputs: BTreeMap::from([("x.npy".into(), "v2".into()), ("y.npy".into(), "v".into())]),
        };
        let mut earlier = RunRecord {
            run: "r".into(),
            job: "j".into(),
            fingerprint: "1".into(),
            inputs: BTreeMap::from([("x.npy".into(), "v1".into()), ("y.npy".into(), "v".into())]),
            started: 0,
            host: "h".into(),
            pid: 1,
        };
        let why = now.differs("r", &earlier);
        assert!(why.starts_with("input x.npy changed since run r"), "{why}");
        earlier.inputs = now.inputs.clone();
        assert!(now.differs("r", &earlier).starts_with("the job changed"));
    }

    #[tokio::test]
    async fn resume_finds_the_run_with_the_same_fingerprint() {
        let (store, dir) = temp_store("resume");
        let a = Run::start(&store, "j", &fp("f1"), false, vec![])
            .await
            .unwrap();
        a.done("main", 3);
        let id = a.id.clone();
        a.finish(false).await.unwrap(); // kept, as after a failure
        let b = Run::start(&store, "j", &fp("f2"), true, vec![])
            .await
            .unwrap();
        assert_ne!(b.id, id, "another job: a fresh run");
        assert!(b.removed.contains(&id));
        b.finish(false).await.unwrap();
        let c = Run::start(&store, "j", &fp("f2"), true, vec![])
            .await
            .unwrap();
        c.done("main", 1);
        let cid = c.id.clone();
        c.finish(false).await.unwrap();
        let d = Run::start(&store, "j", &fp("f2"), true, vec![])
            .await
            .unwrap();
        assert_eq!(d.id, cid);
        assert_eq!(
            d.resumed.as_ref().unwrap().done["main"],
            BTreeSet::from([1])
        );
        d.finish(true).await.unwrap();
        std::fs::remove_dir_all(dir).ok();
    }

    #[tokio::test]
    async fn commit_replaces_an_array_whole_and_an_interrupted_commit_is_finished() {
        let (store, dir) = temp_store("commit");
        let put = |k: &str, v: &'static str| {
            let store = store.clone();
            let k = k.to_string();
            async move {
                store
                    .put(&k, Bytes::from_static(v.as_bytes()))
                    .await
                    .unwrap()
            }
        };
        // The old array has a chunk the new one lacks (another shape).
        put("j/X/zarr.json", "old").await;
        put("j/X/c/0", "old0").await;
        put("j/X/c/1", "old1").await;
        let a = Run::start(&store, "j", &fp("f"), false, vec![])
            .await
            .unwrap();
        let p = a.prefix();
        put(&format!("{p}/out/X/zarr.json"), "new").await;
        put(&format!("{p}/out/X/c/0/0"), "new00").await;
        a.commit(&["X".to_string()]).await.unwrap();
        let mut keys = store.list("j/X").await.unwrap();
        keys.sort();
        assert_eq!(keys, vec!["j/X/c/0/0", "j/X/zarr.json"]);
        assert_eq!(&store.get("j/X/zarr.json").await.unwrap()[..], b"new");
        assert!(store.head("j/_commit.json").await.unwrap().is_none());

        // A commit cut short while moving: the next run finishes it before anything else.
        let p = a.prefix();
        put(&format!("{p}/out/Y/zarr.json"), "y").await;
        put(&format!("{p}/out/Y/c/0"), "y0").await;
        put(&format!("{p}/out/Y/c/1"), "y1").await;
        let rec = CommitRecord {
            run: a.id.clone(),
            arrays: vec!["Y".into()],
            phase: Phase::Moving,
        };
        store.put(&commit_key("j"), to_json(&rec)).await.unwrap();
        store
            .rename(&format!("{p}/out/Y/c/0"), "j/Y/c/0")
            .await
            .unwrap();
        a.finish(false).await.unwrap();
        let b = Run::start(&store, "j", &fp("f"), false, vec![])
            .await
            .unwrap();
        let mut keys = store.list("j/Y").await.unwrap();
        keys.sort();
        assert_eq!(keys, vec!["j/Y/c/0", "j/Y/c/1", "j/Y/zarr.json"]);
        b.finish(true).await.unwrap();
        std::fs::remove_dir_all(dir).ok();
    }
}
