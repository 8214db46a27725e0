//! The stateless executor. One invocation takes one [`Batch`]: it reads the batch's input
//! blocks from the store, runs its block kernels, writes the output blocks that other
//! batches or the user need (one atomic PUT each, under deterministic keys), and returns
//! the [`Stats`] it measured. The `bootstrap` binary serves [`handle`] under Lambda's
//! runtime API; local function processes run the very same loop.

extern crate blas_src;

pub mod einsum;
pub mod kernels;
pub mod linalg;
pub mod memory;
pub mod runtime;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use nums_layout::batch::{Batch, BlockRef, Stats};
use nums_layout::{Block, ErrorKind, Store, StoredArray};

/// Why an invocation failed; the kind tells the driver whether a retry can help.
#[derive(Debug, thiserror::Error)]
pub enum FnError {
    #[error(transparent)]
    Layout(#[from] nums_layout::Error),
    #[error("task {task} (block {block}): {message}")]
    Kernel {
        task: usize,
        block: String,
        message: String,
    },
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
            FnError::Layout(E::NotFound { .. }) => ErrorKind::MissingBlock,
            FnError::Layout(E::Corrupt { .. }) => ErrorKind::CorruptBlock,
            FnError::Layout(E::Meta { .. }) => ErrorKind::BadArray,
            FnError::Layout(E::OutsidePrefix { .. }) => ErrorKind::OutsideJobPrefix,
            FnError::Kernel { message, .. } if message.starts_with("LinAlgError: ") => {
                ErrorKind::LinAlg
            }
            FnError::Kernel { .. } => ErrorKind::Kernel,
            FnError::Payload(_) => ErrorKind::BadPayload,
        }
    }
}

/// How many block reads one task keeps in flight.
const IO_CONCURRENCY: usize = 16;

/// Runs one batch against `store` and returns what it measured.
///
/// Tasks run in the batch's order. Before a task, its inputs that are not in memory are
/// read (concurrently); after it, its output is written if other batches or the user need
/// it; every block is dropped right after its last use in the batch. So the memory held
/// at any moment is what the planner projects: the blocks kept for later tasks, plus the
/// current task's inputs and output.
pub async fn handle(batch: &Batch, store: &Store) -> Result<Stats, FnError> {
    let started = Instant::now();
    memory::reset_peak();
    batch.check_confined()?;
    let store = store.with_fresh_counters();
    let arrays: Vec<Arc<StoredArray>> = batch
        .arrays
        .iter()
        .map(|a| StoredArray::new(&a.path, a.meta.clone()).map(Arc::new))
        .collect::<Result<_, _>>()?;
    let sparse: Vec<bool> = batch.arrays.iter().map(|a| a.sparse).collect();
    let sparse = &sparse;
    let mut uses: HashMap<BlockRef, usize> = HashMap::new();
    for t in &batch.tasks {
        for i in &t.inputs {
            *uses.entry(i.clone()).or_default() += 1;
        }
    }
    let mut live: HashMap<BlockRef, Arc<Block>> = HashMap::new();
    let (mut io_seconds, mut compute_seconds) = (0.0, 0.0);
    let mut intermediate_bytes_written = 0;
    for (n, t) in batch.tasks.iter().enumerate() {
        let t_read = Instant::now();
        let mut missing: Vec<&BlockRef> =
            t.inputs.iter().filter(|r| !live.contains_key(*r)).collect();
        missing.sort_by_key(|r| (r.array, r.index.clone()));
        missing.dedup();
        let read: Vec<(BlockRef, Block)> = futures::stream::iter(missing)
            .map(|r| {
                let arr = arrays[r.array as usize].clone();
                let (store, r) = (store.clone(), r.clone());
                async move {
                    let key = arr.block_key(&r.index);
                    // An array nums-cloud did not write may leave chunks out (the fill
                    // value), as Zarr allows; in any other a missing block is an error.
                    let bytes = if sparse[r.array as usize] {
                        store.get_opt(&key).await?
                    } else {
                        Some(store.get(&key).await?)
                    };
                    let block = tokio::task::spawn_blocking(move || {
                        arr.decode(&r.index, bytes).map(|b| (r, b))
                    })
                    .await
                    .expect("decode task panicked")?;
                    Ok::<_, FnError>(block)
                }
            })
            .buffer_unordered(IO_CONCURRENCY)
            .try_collect()
            .await?;
        live.extend(read.into_iter().map(|(r, b)| (r, Arc::new(b))));
        io_seconds += t_read.elapsed().as_secs_f64();

        // Kernels run on a blocking thread: ndarray uses rayon and BLAS its own threads.
        let t_compute = Instant::now();
        let inputs: Vec<Arc<Block>> = t.inputs.iter().map(|r| live[r].clone()).collect();
        let out = arrays[t.output.array as usize].clone();
        let (kernel, index) = (t.kernel.clone(), t.output.index.clone());
        let out2 = out.clone();
        let block = tokio::task::spawn_blocking(move || {
            let refs: Vec<&Block> = inputs.iter().map(|b| b.as_ref()).collect();
            kernels::run(&kernel, &refs, &out2.meta, &index)
        })
        .await
        .expect("kernel panicked")
        .map_err(|message| FnError::Kernel {
            task: n,
            block: out.block_key(&t.output.index),
            message,
        })?;
        compute_seconds += t_compute.elapsed().as_secs_f64();
        for r in &t.inputs {
            let u = uses.get_mut(r).expect("counted");
            *u -= 1;
            if *u == 0 {
                live.remove(r);
            }
        }

        let block = Arc::new(block);
        if t.write_output {
            let t_write = Instant::now();
            let (b, idx, arr) = (block.clone(), t.output.index.clone(), out.clone());
            let bytes = tokio::task::spawn_blocking(move || arr.encode(&idx, &b))
                .await
                .expect("encode task panicked")?;
            let key = out.block_key(&t.output.index);
            if batch.arrays[t.output.array as usize].intermediate {
                intermediate_bytes_written += bytes.len() as u64;
                store.put_intermediate(&key, bytes).await?;
            } else {
                store.put(&key, bytes).await?;
            }
            io_seconds += t_write.elapsed().as_secs_f64();
        }
        if uses.get(&t.output).copied().unwrap_or(0) > 0 {
            live.insert(t.output.clone(), block);
        }
    }
    drop(live);

    use std::sync::atomic::Ordering::Relaxed;
    Ok(Stats {
        invocations: 1,
        tasks: batch.tasks.len() as u64,
        bytes_read: store.counters.bytes_read.load(Relaxed),
        bytes_written: store.counters.bytes_written.load(Relaxed),
        requests: store.counters.requests(),
        put_requests: store.counters.put_requests.load(Relaxed),
        intermediate_bytes_written,
        wall_seconds: started.elapsed().as_secs_f64(),
        compute_seconds,
        io_seconds,
        peak_memory_bytes: memory::peak(),
    })
}
