//! The naive scheduler: one task per invocation, every input read from and every output
//! written to the store; reductions become trees whose fan-in fits `memory_mb`.

use super::*;

pub(super) fn place(cx: &Ctx, work: &[Work]) -> Vec<(BlockTask, usize)> {
    let room = (cx.memory_mb << 20).saturating_sub(BASE_MEMORY);
    let mut out = Vec::new();
    for w in work {
        let groups = match w {
            Work::One(_) => vec![vec![0]],
            Work::Reduce { terms, .. } => {
                let term_bytes = terms
                    .iter()
                    .map(|t| t.iter().map(|b| b.nbytes(cx.g)).sum::<u64>())
                    .max()
                    .unwrap_or(1)
                    .max(1);
                // As many terms per invocation as fit (each read counts three times while it is
                // decoded), at least one; the partial sums are then added by one more task.
                let biggest = terms
                    .iter()
                    .flatten()
                    .map(|b| b.nbytes(cx.g))
                    .max()
                    .unwrap_or(0);
                let fan_in = ((room.saturating_sub(biggest + 3 * w.output().nbytes(cx.g))
                    / (3 * term_bytes)) as usize)
                    .max(1);
                let ids: Vec<usize> = (0..terms.len()).collect();
                ids.chunks(fan_in).map(<[usize]>::to_vec).collect()
            }
        };
        for t in w.expand(&groups) {
            let s = home(cx, &t.output);
            out.push((t, s));
        }
    }
    out
}
