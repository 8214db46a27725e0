//! The stateless executor. One invocation takes one [`Batch`]: it reads the batch's input
//! blocks from the store, runs its block kernels, writes the output blocks that other
//! batches or the user need (one atomic PUT each, under deterministic keys), and returns
//! the [`Stats`] it measured. The `bootstrap` binary serves [`handle`] under Lambda's
//! runtime API; local function processes run the very same loop.

extern crate blas_src;

pub mod kernels;
pub mod memory;
pub mod runtime;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use nums_layout::batch::{Batch, BlockRef, Stats};
use nums_layout::{Block, Store, StoredArray};

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
    /// The errorType reported to Lambda; the driver retries only `StoreError`.
    pub fn error_type(&self) -> &'static str {
        use nums_layout::Error as E;
        match self {
            FnError::Layout(E::Store { .. }) => "StoreError",
            FnError::Layout(E::NotFound { .. }) => "MissingBlock",
            FnError::Layout(E::Corrupt { .. }) => "CorruptBlock",
            FnError::Layout(E::Meta { .. }) => "BadArray",
            FnError::Layout(E::OutsidePrefix { .. }) => "OutsideJobPrefix",
            FnError::Kernel { .. } => "KernelError",
            FnError::Payload(_) => "BadPayload",
        }
    }
}

/// How many block reads or writes one invocation keeps in flight.
const IO_CONCURRENCY: usize = 16;

/// Runs one batch against `store` and returns what it measured.
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

    // Blocks produced inside the batch never come from the store; count the uses of each
    // block so that it is dropped right after its last use.
    let produced: std::collections::HashSet<&BlockRef> =
        batch.tasks.iter().map(|t| &t.output).collect();
    let mut uses: HashMap<BlockRef, usize> = HashMap::new();
    for t in &batch.tasks {
        for i in &t.inputs {
            *uses.entry(i.clone()).or_default() += 1;
        }
    }
    let to_read: Vec<BlockRef> = uses
        .keys()
        .filter(|r| !produced.contains(r))
        .cloned()
        .collect();

    let t_read = Instant::now();
    let read: Vec<(BlockRef, Block)> = futures::stream::iter(to_read)
        .map(|r| {
            let arr = arrays[r.array as usize].clone();
            let store = store.clone();
            async move {
                let bytes = store.get(&arr.block_key(&r.index)).await?;
                let block = tokio::task::spawn_blocking(move || {
                    arr.decode(&r.index, Some(bytes)).map(|b| (r, b))
                })
                .await
                .expect("decode task panicked")?;
                Ok::<_, FnError>(block)
            }
        })
        .buffer_unordered(IO_CONCURRENCY)
        .try_collect()
        .await?;
    let mut io_seconds = t_read.elapsed().as_secs_f64();
    let mut live: HashMap<BlockRef, Arc<Block>> =
        read.into_iter().map(|(r, b)| (r, Arc::new(b))).collect();

    // Kernels run on a blocking thread: ndarray uses rayon and BLAS its own threads inside.
    let t_compute = Instant::now();
    let tasks = batch.tasks.clone();
    let arrays2 = arrays.clone();
    let (outputs, live_left) = tokio::task::spawn_blocking(move || {
        let mut outputs = Vec::new();
        for (n, t) in tasks.iter().enumerate() {
            let inputs: Vec<Arc<Block>> = t.inputs.iter().map(|r| live[r].clone()).collect();
            let refs: Vec<&Block> = inputs.iter().map(|b| b.as_ref()).collect();
            let out = &arrays2[t.output.array as usize];
            let block =
                kernels::run(&t.kernel, &refs, &out.meta, &t.output.index).map_err(|message| {
                    FnError::Kernel {
                        task: n,
                        block: out.block_key(&t.output.index),
                        message,
                    }
                })?;
            drop(inputs);
            for r in &t.inputs {
                let u = uses.get_mut(r).expect("counted");
                *u -= 1;
                if *u == 0 {
                    live.remove(r);
                }
            }
            let block = Arc::new(block);
            if t.store_output {
                outputs.push((t.output.clone(), block.clone()));
            }
            if uses.get(&t.output).copied().unwrap_or(0) > 0 {
                live.insert(t.output.clone(), block);
            }
        }
        Ok::<_, FnError>((outputs, live))
    })
    .await
    .expect("compute task panicked")?;
    drop(live_left);
    let compute_seconds = t_compute.elapsed().as_secs_f64();

    let t_write = Instant::now();
    futures::stream::iter(outputs)
        .map(|(r, block)| {
            let arr = arrays[r.array as usize].clone();
            let store = store.clone();
            async move {
                let idx = r.index.clone();
                let arr2 = arr.clone();
                let bytes = tokio::task::spawn_blocking(move || arr2.encode(&idx, &block))
                    .await
                    .expect("encode task panicked")?;
                store.put(&arr.block_key(&r.index), bytes).await?;
                Ok::<_, FnError>(())
            }
        })
        .buffer_unordered(IO_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    io_seconds += t_write.elapsed().as_secs_f64();

    use std::sync::atomic::Ordering::Relaxed;
    Ok(Stats {
        invocations: 1,
        tasks: batch.tasks.len() as u64,
        bytes_read: store.counters.bytes_read.load(Relaxed),
        bytes_written: store.counters.bytes_written.load(Relaxed),
        requests: store.counters.requests(),
        put_requests: store.counters.put_requests.load(Relaxed),
        wall_seconds: started.elapsed().as_secs_f64(),
        compute_seconds,
        io_seconds,
        peak_memory_bytes: memory::peak(),
    })
}
