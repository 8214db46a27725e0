//! The naive scheduler: one task per invocation, every input read from and every output
//! written to the store; reductions become trees whose fan-in fits `memory_mb`.

use nums_function::memory::{TaskBlocks, batch_memory, task_peak};

use super::*;

pub(super) fn place(cx: &Ctx, work: &BlockWork, blocks: &mut Blocks) -> Tasks {
    let limit = cx.memory_mb << 20;
    let mut tasks = Tasks::default();
    let mut parts: Vec<Bid> = Vec::new();
    for w in work.iter() {
        let groups = match &w {
            Work::One(_) => vec![vec![0]],
            Work::Reduce { .. } => {
                let size = |b: &BlockId| blocks.nbytes[blocks.id(b, &[]) as usize];
                let chunk = |b: &BlockId| cx.g.nodes[b.node].meta.max_block_nbytes();
                let most = |f: &dyn Fn(&BlockId) -> u64| {
                    w.terms()
                        .map(|t| t.iter().map(f).sum::<u64>())
                        .max()
                        .unwrap_or(1)
                        .max(1)
                };
                let (term_bytes, term_chunks) = (most(&size), most(&chunk));
                let largest_chunk = w.terms().flatten().map(chunk).max().unwrap_or(0);
                // As many terms per invocation as the task's projection fits in memory_mb
                // (with its references in the batch's description), at least one; the
                // partial sums are then added by one more task.
                let biggest = w.terms().flatten().map(size).max().unwrap_or(0);
                let term_blocks = w.terms().next().map_or(1, <[_]>::len) as u64;
                let mut arrays: Vec<(usize, u32)> = w
                    .terms()
                    .flatten()
                    .chain([&w.output()])
                    .map(|b| (b.node, b.part))
                    .collect();
                arrays.sort_unstable();
                arrays.dedup();
                let need = |k: u64| {
                    task_peak(&TaskBlocks {
                        fetched: k * term_bytes,
                        reads: k * term_blocks,
                        fetched_chunks: k * term_chunks,
                        largest_chunk,
                        max_in: biggest,
                        out: size(&w.output()),
                        out_chunk: chunk(&w.output()),
                        work: 0,
                    }) + batch_memory(1, k * term_blocks, arrays.len() as u64)
                };
                // The largest fan-in that fits: the projection grows with it.
                let (mut fan_in, mut hi) = (1, w.num_terms() as u64);
                while fan_in < hi {
                    let mid = (fan_in + hi).div_ceil(2);
                    if need(mid) <= limit {
                        fan_in = mid;
                    } else {
                        hi = mid - 1;
                    }
                }
                let fan_in = fan_in as usize;
                let ids: Vec<usize> = (0..w.num_terms()).collect();
                ids.chunks(fan_in).map(<[usize]>::to_vec).collect()
            }
        };
        let mut k = Kernels::new(&mut tasks, &w);
        parts.clear();
        w.expand(&groups, |step, ins, out| {
            let kernel = k.of(step, &mut tasks, &w);
            let o = blocks.made(&out, &mut parts, cx.g);
            let ins: Vec<Bid> = ins.iter().map(|b| blocks.id(b, &parts)).collect();
            tasks.push(kernel, ins, o, home(cx, &out));
        });
    }
    tasks
}
