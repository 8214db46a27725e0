//! A store wrapper that counts requests and bytes, so that a function reports the traffic it
//! really made (one concern, as object_store's own `PrefixStore` or `LimitStore` have one).

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// Requests and bytes that went through a store.
#[derive(Debug, Default)]
pub struct IoCounters {
    /// Bytes the GETs returned (a ranged read counts its range, a HEAD nothing), and
    /// those counted with [`IoCounters::count_get`].
    pub bytes_read: AtomicU64,
    /// Bytes the PUTs sent (whole-object writes and parts counted with
    /// [`IoCounters::count_put`]).
    pub bytes_written: AtomicU64,
    /// GET requests (each range of a multi-range read counts one).
    pub get_requests: AtomicU64,
    /// PUT requests, and the requests priced as PUTs: multipart creates, copies, renames.
    pub put_requests: AtomicU64,
    /// Every other request: HEADs, LISTs and one per key deleted.
    pub other_requests: AtomicU64,
}

impl IoCounters {
    /// All requests: GETs, PUTs and the others.
    pub fn requests(&self) -> u64 {
        self.get_requests.load(Ordering::Relaxed)
            + self.put_requests.load(Ordering::Relaxed)
            + self.other_requests.load(Ordering::Relaxed)
    }

    fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// A GET of `n` bytes made outside the counting store (a local file mapped).
    pub fn count_get(&self, n: u64) {
        IoCounters::add(&self.get_requests, 1);
        IoCounters::add(&self.bytes_read, n);
    }

    /// A PUT of `n` bytes made outside the counting store (a multipart upload's part).
    pub fn count_put(&self, n: u64) {
        IoCounters::add(&self.put_requests, 1);
        IoCounters::add(&self.bytes_written, n);
    }
}

/// Counts every request made through it (GETs with the bytes they return, PUTs with the
/// bytes they send, everything else as other requests).
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    /// Where its requests are counted (possibly shared with other stores).
    pub counters: Arc<IoCounters>,
}

impl CountingStore {
    /// Counts `inner`'s requests into counters of its own.
    pub fn new(inner: Arc<dyn ObjectStore>) -> CountingStore {
        CountingStore::counted_into(inner, Arc::default())
    }

    /// Counts into `counters`, which other stores may share (the driver's traffic to
    /// every store it touches in a run is one figure).
    pub fn counted_into(inner: Arc<dyn ObjectStore>, counters: Arc<IoCounters>) -> CountingStore {
        CountingStore { inner, counters }
    }
}

impl std::fmt::Display for CountingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let n = payload.content_length() as u64;
        IoCounters::add(&self.counters.put_requests, 1);
        let r = self.inner.put_opts(location, payload, opts).await?;
        IoCounters::add(&self.counters.bytes_written, n);
        Ok(r)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        IoCounters::add(&self.counters.other_requests, 1);
        let upload = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(CountedUpload {
            inner: upload,
            counters: self.counters.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        // A HEAD (object_store's `head` is a `get_opts`) says the object's whole range
        // but reads none of it.
        if options.head {
            IoCounters::add(&self.counters.other_requests, 1);
            return self.inner.get_opts(location, options).await;
        }
        IoCounters::add(&self.counters.get_requests, 1);
        let r = self.inner.get_opts(location, options).await?;
        IoCounters::add(&self.counters.bytes_read, r.range.end - r.range.start);
        Ok(r)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        IoCounters::add(&self.counters.get_requests, ranges.len() as u64);
        let r = self.inner.get_ranges(location, ranges).await?;
        let n: u64 = r.iter().map(|b| b.len() as u64).sum();
        IoCounters::add(&self.counters.bytes_read, n);
        Ok(r)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let c = self.counters.clone();
        let counted = locations
            .inspect(move |_| IoCounters::add(&c.other_requests, 1))
            .boxed();
        self.inner.delete_stream(counted)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        IoCounters::add(&self.counters.other_requests, 1);
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        IoCounters::add(&self.counters.other_requests, 1);
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        IoCounters::add(&self.counters.other_requests, 1);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        // A copy is priced as a PUT.
        IoCounters::add(&self.counters.put_requests, 1);
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        IoCounters::add(&self.counters.put_requests, 1);
        self.inner.rename_opts(from, to, options).await
    }
}

/// A multipart upload whose parts count as PUTs with their bytes (its start and
/// completion as other requests).
#[derive(Debug)]
struct CountedUpload {
    inner: Box<dyn MultipartUpload>,
    counters: Arc<IoCounters>,
}

#[async_trait::async_trait]
impl MultipartUpload for CountedUpload {
    fn put_part(&mut self, data: PutPayload) -> object_store::UploadPart {
        self.counters.count_put(data.content_length() as u64);
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        IoCounters::add(&self.counters.other_requests, 1);
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        IoCounters::add(&self.counters.other_requests, 1);
        self.inner.abort().await
    }
}
