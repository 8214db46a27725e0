//! The reference way of running a batch, as nums-cloud did before the pipeline: each
//! task's missing inputs are read (concurrently), then its kernel runs, then its output
//! is encoded and written, one step after the other. Kept to measure the pipeline against
//! (benches/src/pipeline.rs) and to check that both write the same bytes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use nums_layout::batch::{Batch, BlockRef, Stats};
use nums_layout::{Block, Store};

use crate::{Codec, FnError, IO_CONCURRENCY, Invocation};

/// Runs one batch with no overlap between store I/O and compute. `io_seconds` is all the
/// time spent reading, decoding, encoding and writing; `compute_seconds` the kernels'.
pub async fn handle(batch: &Batch, store: &Store, codec: Codec) -> Result<Stats, FnError> {
    let inv = Invocation::start(batch, store, codec, crate::Outputs::Store)?;
    let mut uses = crate::uses(batch);
    let mut live: HashMap<BlockRef, Arc<Block>> = HashMap::new();
    let (mut io_seconds, mut compute_seconds) = (0.0, 0.0);
    let mut intermediate_bytes_written = 0;
    for (n, t) in batch.tasks.iter().enumerate() {
        let t_read = Instant::now();
        let mut missing: Vec<&BlockRef> =
            t.inputs.iter().filter(|r| !live.contains_key(*r)).collect();
        missing.sort_by_key(|r| (r.array, r.index.clone()));
        missing.dedup();
        let read: Vec<(BlockRef, Arc<Block>)> = futures::stream::iter(missing)
            .map(|r| {
                let read = inv.read(r);
                async move { Ok::<_, FnError>((r.clone(), read.await?)) }
            })
            .buffer_unordered(IO_CONCURRENCY)
            .try_collect()
            .await?;
        live.extend(read);
        io_seconds += t_read.elapsed().as_secs_f64();

        let inputs: Vec<Arc<Block>> = t.inputs.iter().map(|r| live[r].clone()).collect();
        let (block, seconds) = inv.kernel(n, t, inputs).await?;
        compute_seconds += seconds;
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
            let bytes = inv.encode(&t.output, block.clone()).await?;
            intermediate_bytes_written += inv.put(&t.output, bytes).await?;
            io_seconds += t_write.elapsed().as_secs_f64();
        }
        if uses.get(&t.output).copied().unwrap_or(0) > 0 {
            live.insert(t.output.clone(), block);
        }
    }
    drop(live);
    Ok(inv.finish(compute_seconds, io_seconds, intermediate_bytes_written))
}
