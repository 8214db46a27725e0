//! Cutting each slot's ordered tasks into batches (one invocation each) whose projected
//! peak memory fits `memory_mb`, and writing them in the wire format.

use super::*;

/// Projected peak memory of running `tasks` in order as one invocation (see
/// `nums_function::handle`): the process's base, the blocks kept for later tasks, the
/// current task's fetched inputs three times (encoded, decompressed, decoded), one input-sized kernel
/// temporary, the output twice (result and accumulator), and its encoded copy.
pub(super) fn projected_peak(g: &Graph, tasks: &[&BlockTask]) -> u64 {
    let mut uses: HashMap<&BlockId, usize> = HashMap::new();
    for t in tasks {
        for b in &t.inputs {
            *uses.entry(b).or_default() += 1;
        }
    }
    let mut live: HashMap<&BlockId, u64> = HashMap::new();
    let mut peak = 0;
    for t in tasks {
        let held: u64 = live.values().sum();
        let mut fetched = 0;
        let mut seen = HashSet::new();
        for b in &t.inputs {
            if !live.contains_key(b) && seen.insert(b) {
                fetched += b.nbytes(g);
            }
        }
        let max_in = t.inputs.iter().map(|b| b.nbytes(g)).max().unwrap_or(0);
        let out = t.output.nbytes(g);
        peak = peak.max(BASE_MEMORY + held + 3 * fetched + max_in + 3 * out);
        for b in &t.inputs {
            live.insert(b, b.nbytes(g));
        }
        for b in &t.inputs {
            let u = uses.get_mut(b).expect("counted");
            *u -= 1;
            if *u == 0 {
                live.remove(b);
            }
        }
        if uses.get(&t.output).copied().unwrap_or(0) > 0 {
            live.insert(&t.output, out);
        }
    }
    peak
}

/// Cuts each slot's task sequence into batches that fit memory and keep the batch graph
/// acyclic: a batch reads from other batches only blocks produced before its first task.
pub(super) fn cut(
    cx: &Ctx,
    placed: &[(BlockTask, usize)],
    one_per_batch: bool,
) -> Result<Vec<PlannedBatch>, PlanError> {
    let g = cx.g;
    let limit = cx.memory_mb << 20;
    let producer: HashMap<&BlockId, usize> = placed
        .iter()
        .enumerate()
        .map(|(i, (t, _))| (&t.output, i))
        .collect();
    let mut batch_of = vec![usize::MAX; placed.len()];
    // Each batch's tasks in execution order; a small new block (a task without inputs)
    // that another slot made is made again where it is needed instead of waiting for it.
    let mut members: Vec<Vec<usize>> = Vec::new();
    let mut firsts: Vec<usize> = Vec::new();
    let mut slot_of: Vec<usize> = Vec::new();
    let cheap = |p: usize| {
        !one_per_batch
            && placed[p].0.inputs.is_empty()
            && placed[p].0.output.nbytes(g) <= INLINE_MAX
    };
    let mut open: Vec<Option<usize>> = vec![None; cx.workers];
    for (i, (t, s)) in placed.iter().enumerate() {
        let copies = |b: usize, members: &[Vec<usize>], batch_of: &[usize]| -> Vec<usize> {
            let mut c: Vec<usize> = t
                .inputs
                .iter()
                .filter_map(|x| producer.get(x).copied())
                .filter(|&p| batch_of[p] != b && cheap(p) && !members[b].contains(&p))
                .collect();
            c.sort_unstable();
            c.dedup();
            c
        };
        let fits = |b: usize, members: &[Vec<usize>], batch_of: &[usize]| -> bool {
            let first = firsts[b];
            let acyclic = t.inputs.iter().all(|x| match producer.get(x) {
                Some(&p) => batch_of[p] == b || p < first || cheap(p),
                None => true,
            });
            let mut ts: Vec<&BlockTask> = copies(b, members, batch_of)
                .iter()
                .map(|&j| &placed[j].0)
                .collect();
            ts.extend(members[b].iter().map(|&j| &placed[j].0));
            ts.push(t);
            acyclic && projected_peak(g, &ts) <= limit
        };
        let b = match open[*s] {
            Some(b) if !one_per_batch && fits(b, &members, &batch_of) => b,
            _ => {
                if projected_peak(g, &[t]) > limit {
                    let m = &g.nodes[t.output.node].meta;
                    return Err(PlanError {
                        node: t.output.node,
                        array: g.nodes[t.output.node]
                            .name
                            .clone()
                            .unwrap_or_else(|| format!("(expression n{})", t.output.node)),
                        block: format!("{:?}", t.output.index),
                        shape: m.block_shape(&t.output.index),
                        need_mib: projected_peak(g, &[t]).div_ceil(1 << 20),
                        limit_mb: cx.memory_mb,
                    });
                }
                members.push(Vec::new());
                firsts.push(i);
                slot_of.push(*s);
                open[*s] = Some(members.len() - 1);
                members.len() - 1
            }
        };
        let c = copies(b, &members, &batch_of);
        members[b].splice(0..0, c);
        members[b].push(i);
        batch_of[i] = b;
    }

    // Which outputs leave their batch: the job's outputs, and blocks another batch reads.
    let mut needed_outside: HashSet<usize> = HashSet::new();
    for ids in &members {
        let here: HashSet<usize> = ids.iter().copied().collect();
        for &i in ids {
            for x in &placed[i].0.inputs {
                if let Some(&p) = producer.get(x)
                    && !here.contains(&p)
                {
                    needed_outside.insert(p);
                }
            }
        }
    }
    let mut out = Vec::new();
    for (b, ids) in members.iter().enumerate() {
        let mut arrays: Vec<ArrayRef> = Vec::new();
        let mut slot: HashMap<(usize, u32), u32> = HashMap::new();
        let mut bref = |b: &BlockId| {
            let a = *slot.entry((b.node, b.part)).or_insert_with(|| {
                let meta = g.nodes[b.node].meta.clone();
                arrays.push(ArrayRef {
                    path: array_path(cx.prefix, g, b),
                    meta,
                    read_only: matches!(g.nodes[b.node].op, crate::graph::NodeOp::InPlace { .. }),
                    sparse: matches!(
                        g.nodes[b.node].op,
                        crate::graph::NodeOp::InPlace { sparse: true, .. }
                    ),
                    intermediate: crate::tasks::is_intermediate(g, b),
                });
                (arrays.len() - 1) as u32
            });
            BlockRef {
                array: a,
                index: b.index.clone(),
            }
        };
        let mine: HashSet<usize> = ids.iter().copied().collect();
        let mut tasks = Vec::new();
        let mut deps = Vec::new();
        let (mut bytes_in, mut bytes_out, mut puts) = (0, 0, 0);
        let mut fetched = HashSet::new();
        for &i in ids {
            let t = &placed[i].0;
            for x in &t.inputs {
                match producer.get(x) {
                    Some(&p) if mine.contains(&p) => {}
                    p => {
                        if let Some(&p) = p {
                            deps.push(batch_of[p]);
                        }
                        if fetched.insert(x.clone()) {
                            bytes_in += x.nbytes(g);
                        }
                    }
                }
            }
            let copy = batch_of[i] != b;
            let write_output = !copy
                && ((t.output.part == 0 && g.nodes[t.output.node].persist)
                    || needed_outside.contains(&i));
            if write_output {
                bytes_out += t.output.nbytes(g);
                puts += 1;
            }
            tasks.push(Task {
                kernel: t.kernel.clone(),
                inputs: t.inputs.iter().map(&mut bref).collect(),
                output: bref(&t.output),
                write_output,
            });
        }
        deps.sort_unstable();
        deps.dedup();
        let ts: Vec<&BlockTask> = ids.iter().map(|&i| &placed[i].0).collect();
        out.push(PlannedBatch {
            batch: Batch {
                store: cx.store.clone(),
                job_prefix: cx.prefix.to_string(),
                arrays,
                tasks,
                prefetch_budget: limit.saturating_sub(projected_peak(g, &ts)),
            },
            deps,
            slot: slot_of[b],
            projected_peak: projected_peak(g, &ts),
            bytes_in,
            bytes_out,
            gets: fetched.len() as u64,
            puts,
        });
    }
    Ok(out)
}
