//! The object store an array lives in: a local folder (`file://`, the embedded default) or
//! any S3-compatible bucket (`s3://bucket/prefix`, with an optional endpoint), seen through
//! one wrapper per concern: object_store's `PrefixStore` roots it at the URL's prefix,
//! [`CountingStore`] counts every request (so a function reports the traffic it really
//! made), and S3 requests retry with backoff for [`retry_budget`] (object_store's retry
//! client, and `again_if_cut` for requests whose connection broke in flight). [`Store`]
//! turns keys and errors into nums-cloud's.

mod confined;
mod counting;

pub use counting::{CountingStore, IoCounters};

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::{AmazonS3Builder, AwsCredential};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{CredentialProvider, ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::{Error, Result};

/// Where a store is: what a job file's `[storage]` says, with relative paths already resolved.
/// Travels in every batch; it never carries credentials.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StoreSpec {
    /// `file:///abs/dir` or `s3://bucket/prefix`.
    pub url: String,
    /// An S3-compatible endpoint, e.g. `http://127.0.0.1:3900`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

impl std::fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.endpoint {
            Some(e) => write!(f, "{} (endpoint {e})", self.url),
            None => f.write_str(&self.url),
        }
    }
}

/// The S3 object tag (key, value) of job intermediates: infra/'s lifecycle rule expires
/// objects that carry it.
pub const INTERMEDIATE_TAG: (&str, &str) = ("nums-cloud", "intermediate");

/// How long S3 requests are retried (with exponential backoff) before a store error
/// reaches the caller: `NUMS_STORE_RETRY_SECONDS`, default 120 s, so that a store outage of
/// a minute is absorbed. Local folders do not fail that way.
pub fn retry_budget() -> Duration {
    let secs = std::env::var("NUMS_STORE_RETRY_SECONDS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(120);
    Duration::from_secs(secs)
}

/// Runs a store request again when its connection broke while it was in flight (a server
/// restarting, a reset), until [`retry_budget`] from the first try. object_store repeats
/// such requests only where it knows them idempotent, which leaves out S3's batch delete
/// (every delete: `POST ?delete`) and breaks of unknown cause; every request passed here is
/// safe to repeat (whole-object writes, reads, deletes, copies).
async fn again_if_cut<T, F, Fut>(request: F) -> object_store::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = object_store::Result<T>>,
{
    again_if(cut_in_flight, request).await
}

/// `request`, repeated with growing pauses while it fails as `retry` says, within the
/// retry budget.
async fn again_if<T, F, Fut>(
    retry: fn(&object_store::Error) -> bool,
    mut request: F,
) -> object_store::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = object_store::Result<T>>,
{
    let start = std::time::Instant::now();
    let budget = retry_budget();
    let mut pause = Duration::from_millis(100);
    loop {
        match request().await {
            Err(e) if retry(&e) && start.elapsed() + pause < budget => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(4));
            }
            r => return r,
        }
    }
}

/// Whether a request failed because the disk is full or a quota is reached (ENOSPC,
/// EDQUOT): no retry helps.
fn disk_full(e: &object_store::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            )
        {
            return true;
        }
        source = s.source();
    }
    false
}

/// Whether a request failed in transport (no answer from the server), not by the server's
/// answer.
fn cut_in_flight(e: &object_store::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.downcast_ref::<object_store::client::HttpError>()
            .is_some()
        {
            return true;
        }
        source = s.source();
    }
    false
}

/// Whether one key of a batch delete failed because the server was busy (S3's per-key
/// `ServiceUnavailable`, `SlowDown` or `InternalError` in a 200 answer: Garage's
/// "database is locked" under load). object_store retries whole requests that fail, not
/// keys inside an answer, and gives these as generic errors whose text holds the code.
fn busy_key(e: &object_store::Error) -> bool {
    let text = e.to_string();
    ["ServiceUnavailable", "SlowDown", "InternalError"]
        .iter()
        .any(|c| text.contains(&format!("(code: {c})")))
}

/// An opened store, rooted at the URL's prefix.
#[derive(Clone, Debug)]
pub struct Store {
    /// The store rooted at the URL's prefix, uncounted.
    rooted: Arc<dyn ObjectStore>,
    /// `rooted`, counted into `counters`.
    inner: Arc<dyn ObjectStore>,
    spec: StoreSpec,
    /// The folder of a `file://` store (where empty folders are pruned after deletes).
    local_root: Option<std::path::PathBuf>,
    /// A `file://` store's own handle, for reading objects as mapped files.
    local_fs: Option<Arc<LocalFileSystem>>,
    /// An S3 store's client and root prefix, for multipart uploads whose parts several
    /// processes write (object_store's `MultipartStore`, which `PrefixStore` hides).
    s3: Option<(object_store::aws::AmazonS3, String)>,
    /// Requests and bytes through this store: its own from [`Store::open`], shared ones
    /// from [`Store::open_counted`]. Local files read by mapping and parts written with
    /// [`Store::put_part`] count here too.
    pub counters: Arc<IoCounters>,
}

impl Store {
    /// Opens the store a spec names. Credentials for S3 come from the standard AWS chain
    /// (environment, profile, container or instance role).
    pub fn open(spec: &StoreSpec) -> Result<Store> {
        let err = |message: String| Error::Store {
            url: spec.to_string(),
            message,
        };
        let url = url::Url::parse(&spec.url).map_err(|e| err(format!("not a URL: {e}")))?;
        let mut local_root = None;
        let mut local_fs = None;
        let mut s3_client = None;
        let rooted: Arc<dyn ObjectStore> = match url.scheme() {
            "file" => {
                let dir = url
                    .to_file_path()
                    .map_err(|_| err("a file:// URL must name an absolute folder".into()))?;
                std::fs::create_dir_all(&dir)
                    .map_err(|e| err(format!("cannot create folder {}: {e}", dir.display())))?;
                // Resolved, as `LocalFileSystem` resolves it: links inside the store are
                // judged against the folder they really are in.
                let dir = std::fs::canonicalize(&dir)
                    .map_err(|e| err(format!("cannot resolve folder {}: {e}", dir.display())))?;
                local_root = Some(dir.clone());
                let fs = Arc::new(
                    LocalFileSystem::new_with_prefix(&dir)
                        .map_err(|e| err(e.to_string()))?
                        .with_automatic_cleanup(true),
                );
                local_fs = Some(fs.clone());
                Arc::new(confined::ConfinedFs::new(fs, dir))
            }
            "s3" => {
                let bucket = url
                    .host_str()
                    .filter(|b| !b.is_empty())
                    .ok_or_else(|| err("an s3:// URL needs a bucket: s3://bucket/prefix".into()))?;
                let retry = object_store::RetryConfig {
                    backoff: object_store::BackoffConfig {
                        init_backoff: Duration::from_millis(100),
                        max_backoff: Duration::from_secs(4),
                        base: 2.0,
                    },
                    max_retries: usize::MAX,
                    retry_timeout: retry_budget(),
                };
                let mut b = AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .with_virtual_hosted_style_request(false)
                    .with_credentials(Arc::new(AwsChain::default()))
                    .with_retry(retry);
                if std::env::var_os("AWS_REGION").is_none()
                    && std::env::var_os("AWS_DEFAULT_REGION").is_none()
                {
                    b = b.with_region("us-east-1");
                }
                if let Some(endpoint) = &spec.endpoint {
                    let e = url::Url::parse(endpoint)
                        .map_err(|e| err(format!("endpoint is not a URL: {e}")))?;
                    let loopback = match e.host() {
                        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                        Some(url::Host::Domain(d)) => d == "localhost",
                        None => false,
                    };
                    if e.scheme() == "http" && !loopback {
                        return Err(err(
                            "plain http is allowed only on a loopback endpoint; use https".into(),
                        ));
                    }
                    b = b.with_endpoint(endpoint).with_allow_http(loopback);
                }
                let s3 = b.build().map_err(|e| err(e.to_string()))?;
                let root = url.path().trim_matches('/');
                s3_client = Some((s3.clone(), root.to_string()));
                if root.is_empty() {
                    Arc::new(s3)
                } else {
                    Arc::new(PrefixStore::new(s3, Path::from(root)))
                }
            }
            other => {
                return Err(err(format!(
                    "unsupported scheme {other}://; use file:// or s3://"
                )));
            }
        };
        let c = CountingStore::new(rooted.clone());
        Ok(Store {
            counters: c.counters.clone(),
            inner: Arc::new(c),
            rooted,
            spec: spec.clone(),
            local_root,
            local_fs,
            s3: s3_client,
        })
    }

    /// The spec it was opened from.
    pub fn spec(&self) -> &StoreSpec {
        &self.spec
    }

    /// Opens a store whose requests count into `counters` (the driver's traffic to every
    /// store it touches in a run is one figure).
    pub fn open_counted(spec: &StoreSpec, counters: &Arc<IoCounters>) -> Result<Store> {
        Ok(Store::open(spec)?.with_counters(counters.clone()))
    }

    /// The same store with fresh counters (one per invocation).
    pub fn with_fresh_counters(&self) -> Store {
        self.with_counters(Arc::default())
    }

    fn with_counters(&self, counters: Arc<IoCounters>) -> Store {
        let c = CountingStore::counted_into(self.rooted.clone(), counters);
        Store {
            counters: c.counters.clone(),
            inner: Arc::new(c),
            ..self.clone()
        }
    }

    fn path(&self, key: &str) -> Path {
        Path::from(key.trim_matches('/'))
    }

    /// The file of `key` in a `file://` store (`None` for another store), refused where it
    /// would leave the store's folder (a link out of it).
    fn local_file(&self, key: &str) -> Result<Option<std::path::PathBuf>> {
        let (Some(fs), Some(root)) = (&self.local_fs, &self.local_root) else {
            return Ok(None);
        };
        let file = fs
            .path_to_filesystem(&self.path(key))
            .map_err(|e| self.err(e, key))?;
        if let Some(why) = confined::escapes(root, &file) {
            return Err(Error::Store {
                url: self.spec.to_string(),
                message: format!("{key}: {why}"),
            });
        }
        Ok(Some(file))
    }

    fn err(&self, e: object_store::Error, key: &str) -> Error {
        match e {
            object_store::Error::NotFound { .. } => Error::NotFound {
                url: self.spec.to_string(),
                key: key.to_string(),
            },
            e if disk_full(&e) => Error::StoreFull {
                url: self.spec.to_string(),
                message: format!("{key}: {e}"),
            },
            e => Error::Store {
                url: self.spec.to_string(),
                message: format!("{key}: {e}"),
            },
        }
    }

    /// The folder of a `file://` store (resolved: symbolic links followed).
    pub fn local_folder(&self) -> Option<&std::path::Path> {
        self.local_root.as_deref()
    }

    /// Whether objects are files on this machine (a `file://` store): read at memory speed,
    /// so reading far ahead buys nothing.
    pub fn is_local(&self) -> bool {
        self.local_fs.is_some()
    }

    /// Reads a whole object. A large object of a `file://` store is its file mapped into
    /// memory, not copied (see `map_file`).
    pub async fn get(&self, key: &str) -> Result<Bytes> {
        Ok(self.get_stamped(key).await?.0)
    }

    /// [`Store::get`], with the object's version as [`Store::stamp`] names it (`None`
    /// where the store names none).
    pub async fn get_stamped(&self, key: &str) -> Result<(Bytes, Option<String>)> {
        if let Some(file) = self.local_file(key)? {
            let got = tokio::task::spawn_blocking(move || map_file(&file))
                .await
                .expect("reading a file panicked");
            return match got {
                Ok((bytes, meta)) => {
                    self.counters.count_get(bytes.len() as u64);
                    Ok((bytes, Some(file_etag(&meta))))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::NotFound {
                    url: self.spec.to_string(),
                    key: key.to_string(),
                }),
                Err(e) => Err(Error::Store {
                    url: self.spec.to_string(),
                    message: format!("{key}: {e}"),
                }),
            };
        }
        let path = self.path(key);
        again_if_cut(|| async {
            let got = self.inner.get(&path).await?;
            let stamp = got.meta.e_tag.clone();
            Ok((got.bytes().await?, stamp))
        })
        .await
        .map_err(|e| self.err(e, key))
    }

    /// The version of the object at `key` now (`None`: there is none, or the store names
    /// no versions), cheaply: on S3 its ETag (a HEAD), for a local file its inode,
    /// modification time and size (a `stat`, in object_store's ETag form: what a write
    /// returns). What the memory tier (`tier.rs`) checks a kept block against.
    pub async fn stamp(&self, key: &str) -> Result<Option<String>> {
        if let Some(file) = self.local_file(key)? {
            return match std::fs::metadata(&file) {
                Ok(m) if m.is_file() => Ok(Some(file_etag(&m))),
                Ok(_) => Ok(None),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Error::Store {
                    url: self.spec.to_string(),
                    message: format!("{key}: {e}"),
                }),
            };
        }
        let path = self.path(key);
        match again_if_cut(|| self.inner.head(&path)).await {
            Ok(m) => Ok(m.e_tag),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err(e, key)),
        }
    }

    /// Bytes `range` of an object.
    pub async fn get_range(&self, key: &str, range: std::ops::Range<u64>) -> Result<Bytes> {
        let path = self.path(key);
        again_if_cut(|| self.inner.get_range(&path, range.clone()))
            .await
            .map_err(|e| self.err(e, key))
    }

    /// Bytes `range` of an object given to `feed` in order, at most `chunk` bytes at a
    /// time, until the range ends or `feed` returns false: returns `state` and the bytes
    /// given (fewer than the range's when the object is shorter). No buffer of the range's
    /// size: a `file://` store reads the file into one buffer of `chunk` bytes, again and
    /// again (its pages stay in cache and are faulted in once); another streams one ranged
    /// GET, resumed where it stopped when the connection breaks.
    pub async fn read_range_with<S, F>(
        &self,
        key: &str,
        range: std::ops::Range<u64>,
        chunk: usize,
        state: S,
        mut feed: F,
    ) -> Result<(S, u64)>
    where
        S: Send + 'static,
        F: FnMut(&mut S, &[u8]) -> bool + Send + 'static,
    {
        let io = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::NotFound => Error::NotFound {
                url: self.spec.to_string(),
                key: key.to_string(),
            },
            _ => Error::Store {
                url: self.spec.to_string(),
                message: format!("{key}: {e}"),
            },
        };
        if let Some(file) = self.local_file(key)? {
            let got = tokio::task::spawn_blocking(move || {
                use std::os::unix::fs::FileExt;
                let mut state = state;
                let f = std::fs::File::open(&file)?;
                if f.metadata()?.is_dir() {
                    return Err(std::io::ErrorKind::NotFound.into());
                }
                let mut buf = vec![0u8; chunk.max(1)];
                let mut at = range.start;
                while at < range.end {
                    let want = ((range.end - at) as usize).min(buf.len());
                    let mut n = 0;
                    while n < want {
                        match f.read_at(&mut buf[n..want], at + n as u64) {
                            Ok(0) => break,
                            Ok(k) => n += k,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(e),
                        }
                    }
                    at += n as u64;
                    if n == 0 || !feed(&mut state, &buf[..n]) || n < want {
                        break;
                    }
                }
                Ok((state, at - range.start))
            })
            .await
            .expect("reading a file panicked");
            let (state, n) = got.map_err(io)?;
            self.counters.count_get(n);
            return Ok((state, n));
        }
        let path = self.path(key);
        let (start, budget) = (std::time::Instant::now(), retry_budget());
        let mut pause = Duration::from_millis(100);
        let (mut state, mut at) = (state, range.start);
        while at < range.end {
            let opts = object_store::GetOptions {
                range: Some((at..range.end).into()),
                ..Default::default()
            };
            let mut stream = match self.inner.get_opts(&path, opts).await {
                Ok(r) => r.into_stream(),
                Err(e) if cut_in_flight(&e) && start.elapsed() + pause < budget => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(4));
                    continue;
                }
                Err(e) => return Err(self.err(e, key)),
            };
            let mut ended = true;
            while let Some(part) = stream.next().await {
                match part {
                    Ok(b) => {
                        for c in b.chunks(chunk.max(1)) {
                            at += c.len() as u64;
                            if !feed(&mut state, c) {
                                return Ok((state, at - range.start));
                            }
                        }
                    }
                    Err(e) if cut_in_flight(&e) && start.elapsed() + pause < budget => {
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_secs(4));
                        ended = false;
                        break;
                    }
                    Err(e) => return Err(self.err(e, key)),
                }
            }
            if ended {
                break;
            }
        }
        Ok((state, at - range.start))
    }

    /// The size of an object, or `None` where there is none.
    pub async fn head(&self, key: &str) -> Result<Option<u64>> {
        let path = self.path(key);
        match again_if_cut(|| self.inner.head(&path)).await {
            Ok(m) => Ok(Some(m.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err(e, key)),
        }
    }

    /// An object's size, and what identifies its content now, to notice that it changed
    /// (`None` where there is no object): on S3 its ETag, size and time; for a local file
    /// its size, modification and change times, inode and a hash of its bytes (all of
    /// them up to [`HASHED_WHOLE`]; of a larger file, 64 evenly spaced pieces of 1 MiB).
    pub async fn version(&self, key: &str) -> Result<Option<(u64, String)>> {
        let path = self.path(key);
        let Some(file) = self.local_file(key)? else {
            return match again_if_cut(|| self.inner.head(&path)).await {
                Ok(m) => Ok(Some((
                    m.size,
                    format!(
                        "etag {}, {} bytes, {}",
                        m.e_tag.unwrap_or_default(),
                        m.size,
                        m.last_modified.to_rfc3339()
                    ),
                ))),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(self.err(e, key)),
            };
        };
        self.counters.count_get(0);
        let got = tokio::task::spawn_blocking(move || file_version(&file))
            .await
            .expect("hashing a file panicked");
        match got {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::Store {
                url: self.spec.to_string(),
                message: format!("{key}: {e}"),
            }),
        }
    }

    /// Reads an object, or `None` where there is none.
    pub async fn get_opt(&self, key: &str) -> Result<Option<Bytes>> {
        match self.get(key).await {
            Ok(b) => Ok(Some(b)),
            Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes a whole object with one atomic PUT.
    pub async fn put(&self, key: &str, bytes: Bytes) -> Result<()> {
        self.put_stamped(key, bytes, false).await.map(|_| ())
    }

    /// [`Store::put`] ([`Store::put_intermediate`] if `intermediate`), returning the
    /// version the store gave the object (as [`Store::stamp`] names it).
    pub async fn put_stamped(
        &self,
        key: &str,
        bytes: Bytes,
        intermediate: bool,
    ) -> Result<Option<String>> {
        let mut opts = object_store::PutOptions::default();
        if intermediate {
            opts.tags.push(INTERMEDIATE_TAG.0, INTERMEDIATE_TAG.1);
        }
        let path = self.path(key);
        let done = again_if_cut(|| {
            self.inner
                .put_opts(&path, PutPayload::from_bytes(bytes.clone()), opts.clone())
        })
        .await
        .map_err(|e| self.err(e, key))?;
        Ok(done.e_tag)
    }

    /// Uploads a local file as one object, a part at a time (a multipart upload: memory
    /// bounded by a few parts whatever the file's size); returns its bytes.
    pub async fn put_file(&self, key: &str, file: &std::path::Path) -> Result<u64> {
        use std::io::Read;
        const PART: usize = 8 << 20;
        let io = |e: std::io::Error| Error::Store {
            url: self.spec.to_string(),
            message: format!("{key}: cannot read {}: {e}", file.display()),
        };
        let mut f = std::fs::File::open(file).map_err(io)?;
        let upload = self
            .inner
            .put_multipart(&self.path(key))
            .await
            .map_err(|e| self.err(e, key))?;
        let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, PART);
        let mut buf = vec![0u8; PART];
        let mut total = 0u64;
        loop {
            let n = f.read(&mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            w.wait_for_capacity(2).await.map_err(|e| self.err(e, key))?;
            w.write(&buf[..n]);
            total += n as u64;
        }
        w.finish().await.map_err(|e| self.err(e, key))?;
        Ok(total)
    }

    /// The S3 client and the full path of `key` (the URL's prefix joined), for the
    /// multipart calls; an error on a local folder.
    fn s3_path(&self, key: &str) -> Result<(&object_store::aws::AmazonS3, Path)> {
        let (s3, root) = self.s3.as_ref().ok_or_else(|| Error::Store {
            url: self.spec.to_string(),
            message: format!("{key}: multipart uploads are for s3:// stores"),
        })?;
        let full = if root.is_empty() {
            key.trim_matches('/').to_string()
        } else {
            format!("{root}/{}", key.trim_matches('/'))
        };
        Ok((s3, Path::from(full)))
    }

    /// Starts a multipart upload of `key` whose parts other processes may write
    /// ([`Store::put_part`]); returns its id. Nothing is visible at `key` until
    /// [`Store::complete_multipart`] (an upload never completed is removed by the
    /// bucket's lifecycle rule, or [`Store::abort_multipart`]).
    pub async fn create_multipart(&self, key: &str) -> Result<String> {
        use object_store::multipart::MultipartStore;
        let (s3, path) = self.s3_path(key)?;
        s3.create_multipart(&path)
            .await
            .map_err(|e| self.err(e, key))
    }

    /// Writes part `part` (from 0; every part but the last at least 5 MiB) of upload
    /// `upload`; returns the part's ETag, which completing the upload names it by. A part
    /// written again replaces the earlier one.
    pub async fn put_part(
        &self,
        key: &str,
        upload: &str,
        part: usize,
        data: Bytes,
    ) -> Result<String> {
        use object_store::multipart::MultipartStore;
        let (s3, path) = self.s3_path(key)?;
        let n = data.len() as u64;
        let upload = upload.to_string();
        let id = again_if_cut(|| {
            s3.put_part(&path, &upload, part, PutPayload::from_bytes(data.clone()))
        })
        .await
        .map_err(|e| self.err(e, key))?;
        self.counters.count_put(n);
        Ok(id.content_id)
    }

    /// Completes upload `upload` from its parts' ETags in part order: `key` appears whole.
    pub async fn complete_multipart(
        &self,
        key: &str,
        upload: &str,
        etags: Vec<String>,
    ) -> Result<()> {
        use object_store::multipart::{MultipartStore, PartId};
        let (s3, path) = self.s3_path(key)?;
        let parts = etags
            .into_iter()
            .map(|content_id| PartId { content_id })
            .collect();
        s3.complete_multipart(&path, &upload.to_string(), parts)
            .await
            .map_err(|e| self.err(e, key))?;
        Ok(())
    }

    /// Abandons upload `upload` (its parts are deleted; `key` is untouched).
    pub async fn abort_multipart(&self, key: &str, upload: &str) -> Result<()> {
        use object_store::multipart::MultipartStore;
        let (s3, path) = self.s3_path(key)?;
        s3.abort_multipart(&path, &upload.to_string())
            .await
            .map_err(|e| self.err(e, key))
    }

    /// Whether [`Store::put_if_absent`] is known to be atomic here (a local folder: an
    /// exclusive create). S3 servers may or may not honour `If-None-Match` (Garage does not).
    pub fn create_if_absent_is_atomic(&self) -> bool {
        self.is_local()
    }

    /// Writes an object only if none is there; `false` if one was. Atomic on local folders
    /// and on S3 servers that honour `If-None-Match` (Garage does not: callers that need
    /// the guarantee read the object back).
    pub async fn put_if_absent(&self, key: &str, bytes: Bytes) -> Result<bool> {
        let opts = object_store::PutOptions {
            mode: object_store::PutMode::Create,
            ..Default::default()
        };
        match self
            .inner
            .put_opts(&self.path(key), PutPayload::from_bytes(bytes), opts)
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(self.err(e, key)),
        }
    }

    /// Moves an object: one atomic rename on a local folder; a server-side copy and a
    /// delete on S3 (the destination appears whole, never partly written).
    pub async fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (f, t) = (self.path(from), self.path(to));
        if self.is_local() {
            return self
                .inner
                .rename(&f, &t)
                .await
                .map_err(|e| self.err(e, from));
        }
        // Each half repeated on its own: a rename repeated whole after its delete went
        // through would find no source.
        again_if_cut(|| self.inner.copy(&f, &t))
            .await
            .map_err(|e| self.err(e, from))?;
        self.delete(from).await
    }

    /// Deletes one object (absent is fine).
    pub async fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key);
        match again_if_cut(|| self.inner.delete(&path)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.err(e, key)),
        }
    }

    /// [`Store::put`] for a job intermediate (a `_tmp` block or a staged batch): on S3 the
    /// object carries the tag [`INTERMEDIATE_TAG`], which the bucket's lifecycle rule
    /// (infra/) expires, so intermediates of a job that never finished do not stay
    /// forever. (S3 lifecycle filters take no wildcards, so the key alone cannot say it.)
    pub async fn put_intermediate(&self, key: &str, bytes: Bytes) -> Result<()> {
        self.put_stamped(key, bytes, true).await.map(|_| ())
    }

    /// Keys (relative to the store root) under `prefix`, recursively.
    pub async fn list(&self, prefix: &str) -> Result<Vec<String>> {
        Ok(self
            .list_sizes(prefix)
            .await?
            .into_iter()
            .map(|(k, _)| k)
            .collect())
    }

    /// Keys under `prefix`, recursively, with their sizes in bytes.
    pub async fn list_sizes(&self, prefix: &str) -> Result<Vec<(String, u64)>> {
        let base = self.path(prefix);
        let metas: Vec<_> = again_if_cut(|| self.inner.list(Some(&base)).try_collect())
            .await
            .map_err(|e| self.err(e, prefix))?;
        Ok(metas
            .into_iter()
            .map(|m| (m.location.as_ref().to_string(), m.size))
            .collect())
    }

    /// Keys under `prefix`, recursively, with their sizes and what identifies their
    /// content (ETag, or a local file's inode, time and size; and the time modified).
    pub async fn list_versions(&self, prefix: &str) -> Result<Vec<(String, u64, String)>> {
        let base = self.path(prefix);
        let metas: Vec<_> = again_if_cut(|| self.inner.list(Some(&base)).try_collect())
            .await
            .map_err(|e| self.err(e, prefix))?;
        Ok(metas
            .into_iter()
            .map(|m| {
                let v = format!(
                    "{} {}",
                    m.e_tag.unwrap_or_default(),
                    m.last_modified.to_rfc3339()
                );
                (m.location.as_ref().to_string(), m.size, v)
            })
            .collect())
    }

    /// The names directly under `prefix`: its objects', and its folders' (one LIST request
    /// on S3).
    pub async fn list_dir(&self, prefix: &str) -> Result<(Vec<String>, Vec<String>)> {
        let base = self.path(prefix);
        let r = again_if_cut(|| self.inner.list_with_delimiter(Some(&base)))
            .await
            .map_err(|e| self.err(e, prefix))?;
        let name = |p: &Path| p.filename().unwrap_or_default().to_string();
        Ok((
            r.objects.iter().map(|m| name(&m.location)).collect(),
            r.common_prefixes.iter().map(name).collect(),
        ))
    }

    /// Deletes every object under `prefix`.
    pub async fn delete_prefix(&self, prefix: &str) -> Result<usize> {
        let keys = self.list(prefix).await?;
        let n = keys.len();
        // S3 deletes up to 1,000 keys per request.
        let chunks: Vec<Vec<String>> = keys.chunks(1000).map(<[String]>::to_vec).collect();
        futures::stream::iter(chunks)
            .map(|chunk| async move { self.delete_keys(&chunk).await })
            .buffer_unordered(4)
            .try_collect::<Vec<()>>()
            .await?;
        // Objects moved away (renames) leave their folders behind on a local store.
        if let Some(root) = &self.local_root {
            let dir = root.join(prefix.trim_matches('/'));
            if !prefix.trim_matches('/').is_empty() && prune_empty_dirs(&dir) {
                // Folders left empty above it go too, as they would not exist on S3
                // (`<job>/_runs/` after a run's state is removed).
                let mut up = dir.parent();
                while let Some(d) = up.filter(|d| d.starts_with(root) && *d != root.as_path()) {
                    if std::fs::remove_dir(d).is_err() {
                        break;
                    }
                    up = d.parent();
                }
            }
        }
        Ok(n)
    }

    /// Deletes `keys` (absent ones are fine) with one batch request on S3.
    async fn delete_keys(&self, keys: &[String]) -> Result<()> {
        let paths: Vec<Path> = keys.iter().map(|k| self.path(k)).collect();
        let again = |e: &object_store::Error| cut_in_flight(e) || busy_key(e);
        let results = again_if(again, || async {
            let each = futures::stream::iter(paths.clone().into_iter().map(Ok)).boxed();
            let mut results: Vec<_> = self.inner.delete_stream(each).collect().await;
            // A batch cut short, or with a key the server was too busy for, is tried
            // again whole (deleting is idempotent: absent keys are fine).
            match results.iter().position(|r| r.as_ref().is_err_and(again)) {
                Some(i) => Err(results.swap_remove(i).unwrap_err()),
                None => Ok(results),
            }
        })
        .await;
        let results = results.map_err(|e| self.err(e, &keys[0]))?;
        for (r, key) in results.into_iter().zip(keys) {
            match r {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(self.err(e, key)),
            }
        }
        Ok(())
    }

    /// Proves the store answers (and, for S3, that the bucket exists and the credentials
    /// are accepted) without changing anything.
    pub async fn check(&self) -> Result<()> {
        let probe = self.path("");
        let listing = self.inner.list_with_delimiter(Some(&probe));
        match tokio::time::timeout(Duration::from_secs(20), listing).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(Error::Store {
                url: self.spec.to_string(),
                message: format!("unreachable: {e}"),
            }),
            Err(_) => Err(Error::Store {
                url: self.spec.to_string(),
                message: "unreachable: no answer within 20 s".into(),
            }),
        }
    }
}

use futures::StreamExt;

/// A local object's bytes: a file of 1 MiB or more is mapped into memory (its pages are the
/// page cache's, so a block decodes straight from them), a smaller one is read. Mapping is
/// safe here because the store never changes a file in place: object_store writes each
/// object to a new file and renames it over the old, so a mapped file keeps its bytes
/// (and a removed one its pages) until the mapping goes. Reading a 64 MiB chunk this way
/// costs no zeroed buffer and no copy (`cargo run --release -p nums-benches --bin
/// read_path`).
fn map_file(path: &std::path::Path) -> std::io::Result<(Bytes, std::fs::Metadata)> {
    const MAP_FROM: u64 = 1 << 20;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        // A folder is no object (as object_store has it).
        return Err(std::io::ErrorKind::NotFound.into());
    }
    let len = meta.len();
    if len < MAP_FROM {
        use std::io::Read;
        let mut buf = Vec::with_capacity(len as usize);
        (&file).read_to_end(&mut buf)?;
        return Ok((Bytes::from(buf), meta));
    }
    // SAFETY: the file is never written in place or truncated (see above).
    let map = unsafe { memmap2::Mmap::map(&file)? };
    Ok((Bytes::from_owner(map), meta))
}

/// A local file's version as object_store's `LocalFileSystem` names it in the ETag of a
/// write or a read (inode, modification time in microseconds, size): a write renames a
/// new file into place, so each write has its own.
fn file_etag(m: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .unwrap_or_default()
        .as_micros();
    format!("\"{:x}-{mtime:x}-{:x}\"", m.ino(), m.len())
}

/// A local file of up to this many bytes is hashed whole by [`Store::version`].
pub const HASHED_WHOLE: u64 = 64 << 20;

/// [`Store::version`] of a local file.
fn file_version(file: &std::path::Path) -> std::io::Result<(u64, String)> {
    use std::hash::Hasher;
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::MetadataExt;
    const PIECE: u64 = 1 << 20;
    let mut f = std::fs::File::open(file)?;
    let m = f.metadata()?;
    if m.is_dir() {
        return Err(std::io::ErrorKind::NotFound.into());
    }
    let len = m.len();
    let mut h = twox_hash::XxHash3_64::new();
    let mut buf = vec![0u8; PIECE as usize];
    let pieces: Vec<u64> = if len <= HASHED_WHOLE {
        (0..len.div_ceil(PIECE)).map(|i| i * PIECE).collect()
    } else {
        (0..64).map(|i| i * ((len - PIECE) / 63)).collect()
    };
    for at in pieces {
        f.seek(SeekFrom::Start(at))?;
        let n = (len - at).min(PIECE) as usize;
        f.read_exact(&mut buf[..n])?;
        h.write(&buf[..n]);
    }
    Ok((
        len,
        format!(
            "{len} bytes, modified {}.{:09}, changed {}.{:09}, inode {}, xxh3 {:016x}",
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
            m.ino(),
            h.finish()
        ),
    ))
}

/// Removes `dir` and the folders under it that hold no files but staged leftovers of
/// unfinished puts (bottom up).
fn prune_empty_dirs(dir: &std::path::Path) -> bool {
    // A link is not followed (what it leads to is not the store's), nor removed.
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut empty = true;
    for e in entries.flatten() {
        let p = e.path();
        // object_store stages a local put as `<name>#<n>` and renames it; a writer killed
        // mid-put leaves the staged file, which listings never show, so it goes here.
        let staged = e
            .file_name()
            .to_str()
            .and_then(|n| n.rsplit_once('#'))
            .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        let folder = e.file_type().is_ok_and(|t| t.is_dir());
        empty &= if staged && !folder {
            std::fs::remove_file(&p).is_ok()
        } else {
            folder && prune_empty_dirs(&p)
        };
    }
    empty && std::fs::remove_dir(dir).is_ok()
}

/// Credentials from the standard AWS chain (aws-config), refreshed before they expire.
#[derive(Debug, Default)]
struct AwsChain {
    cached: Mutex<Option<(Arc<AwsCredential>, Option<SystemTime>)>>,
}

#[async_trait::async_trait]
impl CredentialProvider for AwsChain {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        let mut cached = self.cached.lock().await;
        if let Some((c, expiry)) = cached.as_ref() {
            let fresh = expiry.is_none_or(|t| t > SystemTime::now() + Duration::from_secs(300));
            if fresh {
                return Ok(c.clone());
            }
        }
        use aws_credential_types::provider::ProvideCredentials;
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        let provider = config.credentials_provider().ok_or_else(|| {
            generic(
                "no AWS credentials: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile"
                    .into(),
            )
        })?;
        let creds = provider
            .provide_credentials()
            .await
            .map_err(|e| generic(format!("AWS credentials: {e}")))?;
        let c = Arc::new(AwsCredential {
            key_id: creds.access_key_id().to_string(),
            secret_key: creds.secret_access_key().to_string(),
            token: creds.session_token().map(str::to_string),
        });
        *cached = Some((c.clone(), creds.expiry()));
        Ok(c)
    }
}

fn generic(message: String) -> object_store::Error {
    object_store::Error::Generic {
        store: "S3",
        source: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn file_store_roundtrip_and_counters() {
        let dir = std::env::temp_dir().join(format!("nums-store-test-{}", std::process::id()));
        let spec = StoreSpec {
            url: url::Url::from_directory_path(&dir).unwrap().to_string(),
            endpoint: None,
        };
        let s = Store::open(&spec).unwrap();
        s.check().await.unwrap();
        s.put("a/b/c", Bytes::from_static(b"hello")).await.unwrap();
        assert_eq!(&s.get("a/b/c").await.unwrap()[..], b"hello");
        assert!(s.get_opt("a/missing").await.unwrap().is_none());
        assert_eq!(s.list("a").await.unwrap(), vec!["a/b/c".to_string()]);
        use std::sync::atomic::Ordering;
        assert_eq!(s.counters.bytes_written.load(Ordering::Relaxed), 5);
        assert_eq!(s.counters.bytes_read.load(Ordering::Relaxed), 5);
        assert!(
            s.put_if_absent("a/new", Bytes::from_static(b"1"))
                .await
                .unwrap()
        );
        assert!(
            !s.put_if_absent("a/new", Bytes::from_static(b"2"))
                .await
                .unwrap()
        );
        assert_eq!(&s.get("a/new").await.unwrap()[..], b"1");
        s.rename("a/new", "a/moved").await.unwrap();
        assert_eq!(s.head("a/new").await.unwrap(), None);
        assert_eq!(s.head("a/moved").await.unwrap(), Some(1));
        assert_eq!(&s.get_range("a/b/c", 1..3).await.unwrap()[..], b"el");
        // 5 + 1 + 2 bytes read: a HEAD reads none (object_store's `head` is a GET's options).
        assert_eq!(s.counters.bytes_read.load(Ordering::Relaxed), 8);
        // A multipart upload's parts count with their bytes.
        let written = s.counters.bytes_written.load(Ordering::Relaxed);
        let file = dir.join("upload-me");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(s.put_file("a/up", &file).await.unwrap(), 10);
        assert_eq!(
            s.counters.bytes_written.load(Ordering::Relaxed),
            written + 10
        );
        assert_eq!(&s.get("a/up").await.unwrap()[..], b"0123456789");
        std::fs::remove_file(&file).unwrap();
        // A put killed before its rename leaves a staged file no listing shows.
        std::fs::write(dir.join("a/b/c#7"), b"half").unwrap();
        assert_eq!(s.delete_prefix("a").await.unwrap(), 3);
        assert!(s.list("a").await.unwrap().is_empty());
        assert!(
            !dir.join("a").exists(),
            "the prefix's folder and staged leftovers are gone"
        );
        std::fs::remove_dir_all(dir).ok();
    }

    /// A large local object is its file mapped: the bytes read are the object's, counted as
    /// one GET, and stay what they were when the object is replaced or removed.
    #[tokio::test]
    async fn a_large_local_object_is_mapped_and_keeps_its_bytes() {
        let dir = std::env::temp_dir().join(format!("nums-store-map-{}", std::process::id()));
        let spec = StoreSpec {
            url: url::Url::from_directory_path(&dir).unwrap().to_string(),
            endpoint: None,
        };
        let s = Store::open(&spec).unwrap();
        let old: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
        s.put("big", Bytes::from(old.clone())).await.unwrap();
        let got = s.get("big").await.unwrap();
        assert_eq!(got, old);
        use std::sync::atomic::Ordering;
        assert_eq!(s.counters.get_requests.load(Ordering::Relaxed), 1);
        assert_eq!(s.counters.bytes_read.load(Ordering::Relaxed), 3 << 20);
        s.put("big", Bytes::from(vec![7u8; 3 << 20])).await.unwrap();
        assert_eq!(
            got, old,
            "a replaced object's mapped bytes are still the old ones"
        );
        s.delete("big").await.unwrap();
        assert_eq!(got, old, "and so are a removed one's");
        assert!(matches!(s.get("big").await, Err(Error::NotFound { .. })));
        std::fs::create_dir_all(dir.join("folder/x")).unwrap();
        assert!(matches!(s.get("folder").await, Err(Error::NotFound { .. })));
        std::fs::remove_dir_all(dir).ok();
    }

    /// A link inside a `file://` store to a folder or file outside it is never followed:
    /// listings do not see behind it, reads, writes and deletes through it are refused,
    /// and removing a prefix leaves what it leads to alone.
    #[tokio::test]
    async fn links_out_of_a_local_store_are_never_followed() {
        let base = std::env::temp_dir().join(format!("nums-store-links-{}", std::process::id()));
        let (dir, outside) = (base.join("store"), base.join("outside"));
        std::fs::create_dir_all(outside.join("sub")).unwrap();
        std::fs::write(outside.join("keep"), b"keep").unwrap();
        std::fs::write(outside.join("sub/x#1"), b"keep").unwrap();
        let s = Store::open(&StoreSpec {
            url: url::Url::from_directory_path(&dir).unwrap().to_string(),
            endpoint: None,
        })
        .unwrap();
        s.put("j/a", Bytes::from_static(b"a")).await.unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("j/link")).unwrap();
        std::os::unix::fs::symlink(outside.join("keep"), dir.join("j/file")).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("whole")).unwrap();
        assert_eq!(s.list("j").await.unwrap(), vec!["j/a".to_string()]);
        let refused = |r: Result<()>| {
            let e = r.unwrap_err().to_string();
            assert!(e.contains("symbolic link"), "{e}");
        };
        refused(s.get("j/link/keep").await.map(|_| ()));
        refused(s.get("j/file").await.map(|_| ()));
        refused(s.head("j/link/keep").await.map(|_| ()));
        refused(s.put("j/link/new", Bytes::from_static(b"n")).await);
        refused(s.delete("j/link/keep").await);
        refused(s.rename("j/a", "j/link/a").await);
        refused(s.list("whole").await.map(|_| ()));
        assert_eq!(s.delete_prefix("j").await.unwrap(), 1);
        assert!(s.delete_prefix("whole").await.is_err());
        assert_eq!(std::fs::read(outside.join("keep")).unwrap(), b"keep");
        assert_eq!(std::fs::read(outside.join("sub/x#1")).unwrap(), b"keep");
        assert!(!outside.join("new").exists());
        std::fs::remove_dir_all(base).ok();
    }

    #[tokio::test]
    async fn a_request_cut_in_flight_is_repeated_and_an_answer_is_not() {
        use object_store::client::{HttpError, HttpErrorKind};
        let cut = || object_store::Error::Generic {
            store: "S3",
            source: Box::new(HttpError::new(
                HttpErrorKind::Interrupted,
                std::io::Error::from(std::io::ErrorKind::ConnectionReset),
            )),
        };
        let tries = std::sync::atomic::AtomicUsize::new(0);
        let got = again_if_cut(|| async {
            match tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                0 | 1 => Err(cut()),
                n => Ok(n),
            }
        })
        .await;
        assert_eq!(got.unwrap(), 2, "two cut tries, then the answer");

        // The server's own answer (here: an error the server gave) is final.
        let tries = std::sync::atomic::AtomicUsize::new(0);
        let got: object_store::Result<()> = again_if_cut(|| async {
            tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(object_store::Error::Generic {
                store: "S3",
                source: "400 Bad Request".into(),
            })
        })
        .await;
        assert!(got.is_err());
        assert_eq!(tries.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn plain_http_refused_off_loopback() {
        let spec = StoreSpec {
            url: "s3://bucket/p".into(),
            endpoint: Some("http://example.com:9000".into()),
        };
        assert!(
            Store::open(&spec)
                .unwrap_err()
                .to_string()
                .contains("loopback")
        );
    }
}
