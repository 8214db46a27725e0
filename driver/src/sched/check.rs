//! The invariants every plan keeps, checked on the placed tasks and on the batches as they
//! go on the wire. `plan` runs this in debug builds; the property tests run it on
//! generated graphs. Written apart from the planner (its own walk over the wire format,
//! its own memory projection) so that a planner bug does not hide itself.

use std::collections::{HashMap, HashSet};

use nums_function::memory::{TaskBlocks, batch_memory, task_peak};
use nums_layout::batch::{Batch, BlockRef, kernel_workspace};

use super::*;
use crate::tasks::{BlockTask, is_intermediate};

/// A block on the wire: its array's path and its block index.
type Key<'a> = (&'a str, &'a [u64]);

fn key<'a>(b: &'a Batch, r: &'a BlockRef) -> Key<'a> {
    (b.arrays[r.array as usize].path.as_str(), r.index.as_slice())
}

fn nbytes(b: &Batch, r: &BlockRef) -> u64 {
    b.arrays[r.array as usize].meta.block_nbytes(&r.index)
}

/// Projected peak memory of one wire batch, computed from the wire alone with the model of
/// `batch::projected_peak` (see there). Blocks are told apart as the function does: by
/// array reference and index (two arrays may share a path, an input named twice).
fn wire_peak(b: &Batch) -> u64 {
    let mut uses: HashMap<&BlockRef, usize> = HashMap::new();
    for t in &b.tasks {
        for r in &t.inputs {
            *uses.entry(r).or_default() += 1;
        }
    }
    let mut live: HashMap<&BlockRef, u64> = HashMap::new();
    let mut held = 0u64;
    let mut peak = 0;
    for t in &b.tasks {
        let chunk = |r: &BlockRef| b.arrays[r.array as usize].meta.max_block_nbytes();
        let shape = |r: &BlockRef| {
            let m = &b.arrays[r.array as usize].meta;
            (m.block_shape(&r.index), m.dtype)
        };
        let ins: Vec<(Vec<usize>, DType)> = t.inputs.iter().map(shape).collect();
        let (o, dt) = shape(&t.output);
        let mut m = TaskBlocks {
            max_in: t.inputs.iter().map(|r| nbytes(b, r)).max().unwrap_or(0),
            out: nbytes(b, &t.output),
            out_chunk: chunk(&t.output),
            work: kernel_workspace(&t.kernel, &ins, (&o, dt)),
            ..Default::default()
        };
        let mut seen = HashSet::new();
        for r in &t.inputs {
            if !live.contains_key(&r) && seen.insert(r) {
                m.fetched += nbytes(b, r);
                m.reads += 1;
                m.fetched_chunks += chunk(r);
                m.largest_chunk = m.largest_chunk.max(chunk(r));
            }
        }
        peak = peak.max(held + task_peak(&m));
        for r in &t.inputs {
            let n = nbytes(b, r);
            if live.insert(r, n).is_none() {
                held += n;
            }
        }
        for r in &t.inputs {
            let u = uses.get_mut(&r).expect("counted");
            *u -= 1;
            if *u == 0
                && let Some(n) = live.remove(&r)
            {
                held -= n;
            }
        }
        if uses.get(&&t.output).copied().unwrap_or(0) > 0 && live.insert(&t.output, m.out).is_none()
        {
            held += m.out;
        }
    }
    let inputs = b.tasks.iter().map(|t| t.inputs.len() as u64).sum();
    peak + batch_memory(b.tasks.len() as u64, inputs, b.arrays.len() as u64)
}

/// Checks `plan`, made by `kind` from `work` under `cx`; `placed` are the block tasks the
/// scheduler placed, in the order batches were cut from. The first violation is returned.
pub(crate) fn check_plan(
    cx: &Ctx,
    kind: SchedulerKind,
    work: &BlockWork,
    placed: &[(BlockTask, usize)],
    plan: &Plan,
) -> Result<(), String> {
    let g = cx.g;
    let path = |b: &BlockId| array_path(cx.prefix, g, b);

    // The placed tasks: one producer per block, every input made earlier or in the store.
    let in_store = |b: &BlockId| g.nodes[b.node].op.in_store_before_run();
    let mut made: HashSet<&BlockId> = HashSet::new();
    for (t, s) in placed {
        if *s >= cx.workers {
            return Err(format!(
                "task for {:?} on slot {s} of {}",
                t.output, cx.workers
            ));
        }
        for x in &t.inputs {
            if !made.contains(x) && !in_store(x) {
                return Err(format!("{:?} reads {x:?} before it is made", t.output));
            }
        }
        if !made.insert(&t.output) {
            return Err(format!("{:?} is made twice", t.output));
        }
    }
    if plan.tasks != placed.len() {
        return Err(format!(
            "plan.tasks {} != {} placed",
            plan.tasks,
            placed.len()
        ));
    }
    // Every block's work is done once: a task for each output, and a reduction's terms
    // each read exactly once by the tasks that make the output and its partial sums.
    let mut by_output: HashMap<(usize, u64), Vec<&BlockTask>> = HashMap::new();
    for (t, _) in placed {
        by_output
            .entry((t.output.node, t.output.block))
            .or_default()
            .push(t);
    }
    let mut works = 0;
    let all: Vec<Work> = work.iter().collect();
    for w in &all {
        works += 1;
        let o = w.output();
        let Some(ts) = by_output.get(&(o.node, o.block)) else {
            return Err(format!("no task makes {o:?}"));
        };
        if !ts.iter().any(|t| t.output.part == 0) {
            return Err(format!("no task makes {o:?} itself (only partial sums)"));
        }
        let mut read: Vec<&BlockId> = ts
            .iter()
            .flat_map(|t| &t.inputs)
            .filter(|x| !(x.node == o.node && x.block == o.block))
            .collect();
        let mut want: Vec<&BlockId> = match w {
            Work::One(t) => {
                if ts.len() != 1 || ts[0].kernel != t.kernel || ts[0].inputs != t.inputs {
                    return Err(format!("{o:?} is not made by its one task"));
                }
                t.inputs.iter().collect()
            }
            Work::Reduce { terms, .. } => terms.iter().collect(),
        };
        read.sort_unstable();
        want.sort_unstable();
        if read != want {
            return Err(format!(
                "the tasks of {o:?} do not read its terms once each"
            ));
        }
    }
    if by_output.len() != works {
        return Err(format!(
            "{} output blocks have tasks, {works} have work",
            by_output.len()
        ));
    }

    // The batches, as sent.
    let limit = cx.memory_mb << 20;
    let store_paths: HashSet<String> = g
        .nodes
        .iter()
        .filter(|n| n.op.in_store_before_run())
        .map(|n| crate::tasks::node_path(cx.prefix, g, n.id))
        .collect();
    let wire: Vec<Batch> = plan.batches.iter().map(PlannedBatch::batch).collect();
    // Where each block is written, and which batches make each block.
    let mut writer: HashMap<Key, usize> = HashMap::new();
    let mut makers: HashMap<Key, Vec<(usize, bool, bool)>> = HashMap::new();
    for (i, b) in wire.iter().enumerate() {
        for t in &b.tasks {
            let k = key(b, &t.output);
            if store_paths.contains(k.0) {
                return Err(format!("batch {i} writes {k:?}, an input in the store"));
            }
            if t.write_output && writer.insert(k, i).is_some() {
                return Err(format!("{k:?} is written twice"));
            }
            makers
                .entry(k)
                .or_default()
                .push((i, t.write_output, t.inputs.is_empty()));
        }
    }
    if makers.len() != placed.len() {
        return Err(format!(
            "the batches make {} blocks, {} tasks were placed",
            makers.len(),
            placed.len()
        ));
    }
    for (t, _) in placed {
        let p = path(&t.output);
        let index = t.output.index(g);
        let k: Key = (p.as_str(), index.as_slice());
        let Some(m) = makers.get(&k) else {
            return Err(format!("no batch makes {:?}", t.output));
        };
        // A block made in several batches is a small new block made again where it is
        // needed (no inputs), and it is stored at most once.
        if m.len() > 1 && !m.iter().all(|&(_, _, fresh)| fresh) {
            return Err(format!(
                "{:?} (a task with inputs) runs in several batches",
                t.output
            ));
        }
        let persisted = t.output.part == 0 && g.nodes[t.output.node].persist;
        if persisted && !writer.contains_key(&k) {
            return Err(format!("{:?} of a kept array is never written", t.output));
        }
    }
    let intermediate: HashMap<String, bool> = placed
        .iter()
        .map(|(t, _)| (path(&t.output), is_intermediate(g, &t.output)))
        .collect();
    for (i, (pb, b)) in plan.batches.iter().zip(&wire).enumerate() {
        if pb.slot >= cx.workers {
            return Err(format!("batch {i} on slot {} of {}", pb.slot, cx.workers));
        }
        for a in &b.arrays {
            if intermediate
                .get(&a.path)
                .is_some_and(|&x| x != a.intermediate)
            {
                return Err(format!(
                    "batch {i}: {} has the wrong intermediate flag",
                    a.path
                ));
            }
        }
        if b.tasks.is_empty() {
            return Err(format!("batch {i} has no task"));
        }
        if kind == SchedulerKind::Naive && b.tasks.len() != 1 {
            return Err(format!("naive batch {i} has {} tasks", b.tasks.len()));
        }
        if pb.deps.windows(2).any(|w| w[0] >= w[1]) || pb.deps.iter().any(|&d| d >= i) {
            return Err(format!(
                "batch {i} depends on {:?}: not earlier batches",
                pb.deps
            ));
        }
        // Every block read is made earlier in the batch, in the store before the run, or
        // written by a batch this one waits for; every batch it waits for writes one.
        let mut local: HashSet<&BlockRef> = HashSet::new();
        let mut fetched: HashSet<&BlockRef> = HashSet::new();
        let mut from: HashSet<usize> = HashSet::new();
        let (mut bytes_in, mut bytes_out, mut puts, mut hits) = (0, 0, 0, 0);
        // A stored block the batch's slot's process holds is a memory hit, not a read.
        let held_here = |k: Key| {
            let key = || nums_layout::zarr::chunk_key(k.0, k.1);
            store_paths.contains(k.0)
                && cx.held.and_then(|h| h.holder(&key())) == Some(pb.slot)
                && pb.slot < cx.workers
        };
        for t in &b.tasks {
            for r in &t.inputs {
                let k = key(b, r);
                if local.contains(r) {
                    continue;
                }
                if fetched.insert(r) {
                    match held_here(k) {
                        true => hits += 1,
                        false => bytes_in += nbytes(b, r),
                    }
                }
                if !store_paths.contains(k.0) {
                    match writer.get(&k) {
                        Some(&w) if pb.deps.binary_search(&w).is_ok() => {
                            from.insert(w);
                        }
                        Some(&w) => {
                            return Err(format!(
                                "batch {i} reads {k:?} from batch {w} without waiting for it"
                            ));
                        }
                        None => {
                            return Err(format!(
                                "batch {i} reads {k:?}, which no batch writes to the store"
                            ));
                        }
                    }
                }
            }
            local.insert(&t.output);
            if t.write_output {
                bytes_out += nbytes(b, &t.output);
                puts += 1;
            }
        }
        if from.len() != pb.deps.len() {
            return Err(format!("batch {i} waits for batches it does not read from"));
        }
        if b.tasks.len() > MAX_BATCH_TASKS {
            return Err(format!(
                "batch {i} runs {} tasks, over {MAX_BATCH_TASKS}",
                b.tasks.len()
            ));
        }
        let peak = wire_peak(b);
        if peak != pb.projected_peak {
            return Err(format!(
                "batch {i}: projected peak {} but its tasks project {peak}",
                pb.projected_peak
            ));
        }
        if peak > limit {
            return Err(format!("batch {i} projects {peak} B, over {limit} B"));
        }
        if (bytes_in, bytes_out, fetched.len() as u64, puts, hits)
            != (pb.bytes_in, pb.bytes_out, pb.gets, pb.puts, pb.memory_hits)
        {
            return Err(format!(
                "batch {i}: bytes in/out, gets, puts, memory hits {:?} but its tasks give {:?}",
                (pb.bytes_in, pb.bytes_out, pb.gets, pb.puts, pb.memory_hits),
                (bytes_in, bytes_out, fetched.len(), puts, hits)
            ));
        }
    }
    Ok(())
}
