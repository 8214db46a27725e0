//! The stateless executor. One invocation takes one [`Batch`]: it reads the batch's input
//! blocks from the store, runs its block kernels, writes the output blocks that other
//! batches or the user need (one atomic PUT each, under deterministic keys), and returns
//! the [`Stats`] it measured. [`handle`] runs the batch as a pipeline ([`pipeline`]: reads
//! ahead and writes behind the kernels, within the batch's prefetch budget);
//! [`sequential`] keeps the one-step-after-the-other path it replaced, for comparison.
//! The `bootstrap` binary serves [`handle`] under Lambda's runtime API; local function
//! processes run the very same loop.

extern crate blas_src;

#[macro_use]
extern crate nums_layout;

pub mod compute;
pub mod csv_index;
pub mod distinct;
pub mod einsum;
pub mod export;
pub mod fft;
pub mod glm;
pub mod import;
pub mod kernels;
mod keysort;
pub mod linalg;
pub mod live;
pub mod memory;
pub mod order;
pub mod parquet;
pub mod pipeline;
mod random;
pub mod runtime;
pub mod sequential;
pub mod slices;
pub mod stats;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use nums_layout::batch::{Batch, BlockRef, Kernel, Stats, Task};
use nums_layout::{Block, ErrorKind, Store, StoredArray};

/// Why an invocation failed; the kind tells the driver whether a retry can help.
#[derive(Debug, thiserror::Error)]
pub enum FnError {
    /// A store or encoding error (a missing or corrupt block, a store that failed).
    #[error(transparent)]
    Layout(#[from] nums_layout::Error),
    /// A kernel refused its inputs (a LinAlgError, a malformed CSV field, ...).
    #[error("task {task} (block {block}): {message}")]
    Kernel {
        /// The task's number in its batch.
        task: usize,
        /// The key of the block it was making.
        block: String,
        /// What went wrong, for the user.
        message: String,
    },
    /// The invocation's payload is not a batch this function reads.
    #[error("bad payload: {0}")]
    Payload(String),
}

impl FnError {
    /// The kind reported to Lambda as `errorType`; the driver retries only what
    /// [`ErrorKind::retryable`] allows.
    pub fn kind(&self) -> ErrorKind {
        use nums_layout::Error as E;
        match self {
            FnError::Layout(E::Store { .. }) => ErrorKind::Store,
            FnError::Layout(E::StoreFull { .. }) => ErrorKind::StoreFull,
            FnError::Layout(E::NotFound { .. }) => ErrorKind::MissingBlock,
            FnError::Layout(E::Corrupt { .. }) => ErrorKind::CorruptBlock,
            FnError::Layout(E::Meta { .. }) => ErrorKind::BadArray,
            FnError::Layout(E::OutsidePrefix { .. }) => ErrorKind::OutsideJobPrefix,
            FnError::Kernel { message, .. } => ErrorKind::of_kernel_message(message),
            FnError::Payload(_) => ErrorKind::BadPayload,
        }
    }
}

/// How many block reads an invocation keeps in flight (GET and decode).
const IO_CONCURRENCY: usize = 16;

/// Runs one batch against `store` and returns what it measured: the pipeline of
/// [`pipeline::handle`], bounded by the batch's `prefetch_budget`.
pub async fn handle(batch: &Batch, store: &Store) -> Result<Stats, FnError> {
    pipeline::handle(batch, store, Outputs::Store, None).await
}

/// [`handle`], each finished task told to `live` (a local function process's progress
/// reports, [`live::report`]).
pub async fn handle_live(
    batch: &Batch,
    store: &Store,
    live: &live::Live,
) -> Result<Stats, FnError> {
    pipeline::handle(batch, store, Outputs::Store, Some(live)).await
}

/// [`handle`] for a batch run in the process of the driver that planned it: its outputs
/// stay in this process's memory tier unwritten where it has room
/// ([`Outputs::MemoryFirst`]).
pub async fn handle_here(batch: &Batch, store: &Store) -> Result<Stats, FnError> {
    pipeline::handle(batch, store, Outputs::MemoryFirst, None).await
}

/// Where an invocation's output blocks go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outputs {
    /// Written to the store (and kept in the memory tier when it is on): a function
    /// process's, whose blocks other processes read.
    Store,
    /// Kept in this process's memory tier, unwritten, where it has room (the driver's own
    /// work: the store is written only when another process is to read it, or for room,
    /// [`nums_layout::tier::Tier::write_back`]); else written as [`Outputs::Store`].
    MemoryFirst,
}

/// An output block, ready for [`Invocation::put`].
pub(crate) enum Encoded {
    /// Its bytes to write, and the block itself when the memory tier is to keep it.
    Bytes(Bytes, Option<Arc<Block>>),
    /// Kept in memory, unwritten: nothing to write.
    Kept,
}

impl Encoded {
    /// Bytes it holds until written.
    pub(crate) fn len(&self) -> u64 {
        match self {
            Encoded::Bytes(b, _) => b.len() as u64,
            Encoded::Kept => 0,
        }
    }
}

/// A kernel over at most this many bytes (inputs and output) runs on the task that asks
/// for it: handing it to the blocking pool takes longer than the kernel (tens of µs).
const INLINE_KERNEL_BYTES: usize = 64 << 10;

/// How blocks are turned into bytes and back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// zstd called directly, decompressing into the block's own buffer (what runs).
    Direct,
    /// zarrs' codec chain, with its intermediate buffers (nums-cloud before; benchmarks).
    ZarrsChain,
}

/// What every way of running a batch shares: the batch's arrays, the store with this
/// invocation's own counters, and the block-level steps (read, kernel, encode, put). The
/// steps return `'static` futures, so that the pipeline can run them as tasks.
pub(crate) struct Invocation<'a> {
    batch: &'a Batch,
    started: Instant,
    store: Store,
    arrays: Vec<Arc<StoredArray>>,
    /// The store each array is read from: the job's, or a foreign array's own.
    sources: Vec<Store>,
    outputs: Outputs,
    /// The memory tier's counts when it started: a function process runs one invocation
    /// at a time, so what they gained since is this invocation's (the driver's own runs
    /// share its tier, and are not counted).
    tier_at_start: Option<nums_layout::tier::TierStats>,
}

impl<'a> Invocation<'a> {
    /// Checks the batch and starts measuring (time, store traffic, peak memory).
    fn start(
        batch: &'a Batch,
        store: &Store,
        codec: Codec,
        outputs: Outputs,
    ) -> Result<Self, FnError> {
        let started = Instant::now();
        // The driver's own work shares its process (the caller's): its peak is not the
        // batch's, and resetting it walks the whole process's pages.
        if outputs == Outputs::Store {
            memory::reset_peak();
        }
        batch.check_confined()?;
        let store = store.with_fresh_counters();
        let arrays = batch
            .arrays
            .iter()
            .map(|a| {
                let arr = match &a.foreign {
                    Some(f) => StoredArray::foreign(&a.path, f, &a.meta)?,
                    None => StoredArray::new(&a.path, a.meta.clone())?,
                };
                Ok(Arc::new(match codec {
                    Codec::Direct => arr,
                    Codec::ZarrsChain => arr.with_codec_chain(),
                }))
            })
            .collect::<Result<_, FnError>>()?;
        // A foreign array in another store is read from there, counted as this
        // invocation's reads.
        let sources = batch
            .arrays
            .iter()
            .map(|a| match &a.foreign {
                Some(f) if f.store != batch.store => Store::open_counted(&f.store, &store.counters),
                _ => Ok(store.clone()),
            })
            .collect::<Result<Vec<Store>, _>>()?;
        Ok(Invocation {
            batch,
            started,
            store,
            arrays,
            sources,
            outputs,
            tier_at_start: (outputs == Outputs::Store).then(|| nums_layout::tier::tier().stats()),
        })
    }

    fn array(&self, r: &BlockRef) -> &Arc<StoredArray> {
        &self.arrays[r.array as usize]
    }

    /// Reads block `r`: from this process's memory tier when it holds the store's current
    /// version, else from the store, decoded on the blocking pool
    /// ([`StoredArray::read_shared_on_pool`]).
    fn read(
        &self,
        r: &BlockRef,
    ) -> impl Future<Output = Result<Arc<Block>, FnError>> + Send + 'static {
        let arr = self.array(r).clone();
        let store = self.sources[r.array as usize].clone();
        let idx = r.index.clone();
        // An array nums-cloud did not write may leave chunks out (the fill value), as
        // Zarr allows; in any other a missing block is an error.
        let sparse = self.batch.arrays[r.array as usize].sparse;
        async move { Ok(arr.read_shared_on_pool(&store, &idx, sparse).await?) }
    }

    /// Runs task `n`'s kernel on the blocking pool (ndarray uses rayon and BLAS its own
    /// threads); returns its output and the seconds it took.
    fn kernel(
        &self,
        n: usize,
        t: &Task,
        inputs: Vec<Arc<Block>>,
    ) -> impl Future<Output = Result<(Block, f64), FnError>> + Send + 'static {
        let out = self.array(&t.output).clone();
        let key = out.block_key(&t.output.index);
        let (kernel, index) = (t.kernel.clone(), t.output.index.clone());
        let counters = self.store.counters.clone();
        async move {
            // An export's part is uploaded by the kernel itself (its output: the ETag).
            if let Kernel::ExportNpyPart { .. } = &kernel {
                let t0 = Instant::now();
                let input = inputs.into_iter().next().ok_or_else(|| FnError::Kernel {
                    task: n,
                    message: "an export part needs its rows".into(),
                    block: key.clone(),
                })?;
                let block =
                    export::put_part(&kernel, input, &counters)
                        .await
                        .map_err(|message| FnError::Kernel {
                            task: n,
                            message,
                            block: key,
                        })?;
                return Ok((block, t0.elapsed().as_secs_f64()));
            }
            // A chunk of another tool's Zarr array is encoded and put by the kernel itself.
            if let Kernel::ExportZarrChunk { .. } = &kernel {
                let t0 = Instant::now();
                let input = inputs.into_iter().next().ok_or_else(|| FnError::Kernel {
                    task: n,
                    message: "a Zarr chunk's export needs its block".into(),
                    block: key.clone(),
                })?;
                let block = export::put_zarr_chunk(&kernel, input, &counters)
                    .await
                    .map_err(|message| FnError::Kernel {
                        task: n,
                        message,
                        block: key,
                    })?;
                return Ok((block, t0.elapsed().as_secs_f64()));
            }
            // A block of a local `.npy` output is written into its place in the file.
            if let Kernel::ExportNpyBlock { .. } = &kernel {
                let t0 = Instant::now();
                let input = inputs.into_iter().next().ok_or_else(|| FnError::Kernel {
                    task: n,
                    message: "an export block needs its block".into(),
                    block: key.clone(),
                })?;
                let block =
                    tokio::task::spawn_blocking(move || export::write_block(&kernel, &input))
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(|r| r)
                        .map_err(|message| FnError::Kernel {
                            task: n,
                            message,
                            block: key,
                        })?;
                return Ok((block, t0.elapsed().as_secs_f64()));
            }
            // A CSV count reads its file through one small buffer, counting as it reads.
            if let Kernel::CsvCount { .. } = &kernel {
                let t0 = Instant::now();
                let block = import::count_csv(&kernel, &out.meta, &index, &counters)
                    .await
                    .map_err(|message| FnError::Kernel {
                        task: n,
                        message,
                        block: key,
                    })?;
                return Ok((block, t0.elapsed().as_secs_f64()));
            }
            // An import reads its file first (ranged reads, counted as this invocation's).
            let reads_file = import::is_import(&kernel);
            let fetched = if reads_file {
                let f = import::fetch(&kernel, &out.meta, &index, &counters)
                    .await
                    .map_err(|message| FnError::Kernel {
                        task: n,
                        message: match import::array_of(true, &key) {
                            Some(name) => format!("array {name}: {message}"),
                            None => message,
                        },
                        block: key.clone(),
                    })?;
                Some(f)
            } else {
                None
            };
            let small = fetched.is_none()
                && inputs.iter().map(|b| b.nbytes()).sum::<usize>()
                    + out.meta.block_nbytes(&index) as usize
                    <= INLINE_KERNEL_BYTES;
            let run = move || {
                let t0 = Instant::now();
                let r = match &fetched {
                    Some(f) => import::decode(&kernel, f, &out.meta, &index),
                    None => {
                        let refs: Vec<&Block> = inputs.iter().map(|b| b.as_ref()).collect();
                        kernels::run(&kernel, &refs, &out.meta, &index)
                    }
                };
                (r, t0.elapsed().as_secs_f64())
            };
            let (result, seconds) = match small {
                true => run(),
                false => (tokio::task::spawn_blocking(run).await).expect("kernel panicked"),
            };
            let block = result.map_err(|message| FnError::Kernel {
                task: n,
                message: match import::array_of(reads_file, &key) {
                    Some(name) => format!("array {name}: {message}"),
                    None => message,
                },
                block: key,
            })?;
            Ok((block, seconds))
        }
    }

    /// Encodes output block `r` on the blocking pool; the block is released once encoded,
    /// unless this process's memory tier is on (it keeps it once written: [`Self::put`]).
    /// A driver's own run keeps it in the tier unwritten instead, where there is room.
    fn encode(
        &self,
        r: &BlockRef,
        block: Arc<Block>,
    ) -> impl Future<Output = Result<Encoded, FnError>> + Send + 'static {
        let arr = self.array(r).clone();
        let idx = r.index.clone();
        let unwritten = (self.outputs == Outputs::MemoryFirst).then(|| {
            let intermediate = self.batch.arrays[r.array as usize].intermediate;
            (self.store.clone(), intermediate)
        });
        async move {
            let tier = nums_layout::tier::tier();
            if let Some((store, intermediate)) = unwritten {
                let key = arr.block_key(&idx);
                let enc = arr.encoder(&idx);
                let dtype = arr.meta.dtype;
                if tier.keep_unwritten(&store, &key, intermediate, dtype, block.clone(), enc) {
                    return Ok(Encoded::Kept);
                }
            }
            let keep = tier.on().then(|| block.clone());
            let bytes = tokio::task::spawn_blocking(move || arr.encode(&idx, &block))
                .await
                .expect("encode task panicked")?;
            Ok(Encoded::Bytes(bytes, keep))
        }
    }

    /// Writes output block `r`'s bytes with one PUT (and keeps `block`, its values, in the
    /// memory tier at the version the store gave it); returns the bytes written if the
    /// block is an intermediate, else 0.
    fn put(
        &self,
        r: &BlockRef,
        encoded: Encoded,
    ) -> impl Future<Output = Result<u64, FnError>> + Send + 'static {
        let key = self.array(r).block_key(&r.index);
        let dtype = self.array(r).meta.dtype;
        let store = self.store.clone();
        let intermediate = self.batch.arrays[r.array as usize].intermediate;
        async move {
            let Encoded::Bytes(bytes, block) = encoded else {
                return Ok(0);
            };
            let n = bytes.len() as u64;
            let stamp = store.put_stamped(&key, bytes, intermediate).await?;
            if let (Some(stamp), Some(block)) = (stamp, block) {
                nums_layout::tier::tier().keep(&store, &key, stamp, dtype, block);
            }
            Ok(if intermediate { n } else { 0 })
        }
    }

    /// What the invocation measured.
    fn finish(
        self,
        compute_seconds: f64,
        io_seconds: f64,
        intermediate_bytes_written: u64,
    ) -> Stats {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.store.counters;
        let tier = self.tier_at_start.map(|t0| {
            let t = nums_layout::tier::tier().stats();
            (t.hits - t0.hits, t.hit_bytes - t0.hit_bytes)
        });
        Stats {
            invocations: 1,
            tasks: self.batch.tasks.len() as u64,
            bytes_read: c.bytes_read.load(Relaxed),
            bytes_written: c.bytes_written.load(Relaxed),
            requests: c.requests(),
            put_requests: c.put_requests.load(Relaxed),
            intermediate_bytes_written,
            wall_seconds: self.started.elapsed().as_secs_f64(),
            compute_seconds,
            io_seconds,
            peak_memory_bytes: match self.outputs {
                Outputs::Store => memory::peak(),
                Outputs::MemoryFirst => 0,
            },
            memory_hits: tier.map_or(0, |t| t.0),
            memory_bytes_read: tier.map_or(0, |t| t.1),
            process: None,
            process_generation: None,
        }
    }
}

/// How many tasks of the batch read each block: a block is dropped after its last use.
fn uses(batch: &Batch) -> HashMap<BlockRef, usize> {
    let mut uses: HashMap<BlockRef, usize> = HashMap::new();
    for t in &batch.tasks {
        for i in &t.inputs {
            *uses.entry(i.clone()).or_default() += 1;
        }
    }
    uses
}
