//! The naive scheduler: one task per invocation, every input read from and every output
//! written to the store; reductions become trees whose fan-in fits `memory_mb`.

use nums_function::memory::{BASE_MEMORY, INPUT_MEMORY, batch_memory};

use super::*;

pub(super) fn place(cx: &Ctx, work: &BlockWork, blocks: &mut Blocks) -> Tasks {
    let room = (cx.memory_mb << 20).saturating_sub(BASE_MEMORY);
    let mut tasks = Tasks::default();
    let mut parts: Vec<Bid> = Vec::new();
    for w in work.iter() {
        let groups = match &w {
            Work::One(_) => vec![vec![0]],
            Work::Reduce { .. } => {
                let size = |b: &BlockId| blocks.nbytes[blocks.id(b, &[]) as usize];
                let term_bytes = w
                    .terms()
                    .map(|t| t.iter().map(size).sum::<u64>())
                    .max()
                    .unwrap_or(1)
                    .max(1);
                // As many terms per invocation as fit (each read counts three times while it is
                // decoded, and its reference in the batch's description), at least one; the
                // partial sums are then added by one more task.
                let biggest = w.terms().flatten().map(size).max().unwrap_or(0);
                let mut arrays: Vec<(usize, u32)> = w
                    .terms()
                    .flatten()
                    .chain([&w.output()])
                    .map(|b| (b.node, b.part))
                    .collect();
                arrays.sort_unstable();
                arrays.dedup();
                let fixed =
                    biggest + 3 * size(&w.output()) + batch_memory(1, 0, arrays.len() as u64);
                let per_term =
                    3 * term_bytes + INPUT_MEMORY * w.terms().next().map_or(1, <[_]>::len) as u64;
                let fan_in = ((room.saturating_sub(fixed) / per_term) as usize).max(1);
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
