//! LSHS placement: NumS's load simulator (memory, bytes in, bytes out per slot) places
//! each task on the candidate slot that minimises the maximum loads after the move; then
//! each slot's tasks are ordered to stream.

use super::*;

/// NumS's three loads per slot, and where each block is.
pub(super) struct Sim<'a> {
    cx: &'a Ctx<'a>,
    loads: Vec<SlotLoad>,
    at: HashMap<BlockId, usize>,
    written: HashSet<BlockId>,
}

impl<'a> Sim<'a> {
    fn new(cx: &'a Ctx<'a>) -> Self {
        Sim {
            cx,
            loads: vec![SlotLoad::default(); cx.workers],
            at: HashMap::new(),
            written: HashSet::new(),
        }
    }

    fn is_named(&self, b: &BlockId) -> bool {
        b.part == 0 && self.cx.g.nodes[b.node].persist
    }

    /// Load changes of running `t` on slot `s`: (slot, memory, in, out) deltas.
    fn deltas(&self, t: &BlockTask, s: usize) -> Vec<(usize, u64, u64, u64)> {
        let g = self.cx.g;
        let mut d = Vec::new();
        let mut seen = HashSet::new();
        for b in &t.inputs {
            if !seen.insert(b) {
                continue;
            }
            match self.at.get(b) {
                Some(&src) if src == s => {}
                Some(&src) => {
                    d.push((s, 0, b.nbytes(g), 0));
                    if !self.written.contains(b) {
                        d.push((src, 0, 0, b.nbytes(g)));
                    }
                }
                None => d.push((s, 0, b.nbytes(g), 0)),
            }
        }
        let out = t.output.nbytes(g);
        d.push((s, out, 0, if self.is_named(&t.output) { out } else { 0 }));
        d
    }

    fn objective_with(&self, d: &[(usize, u64, u64, u64)]) -> u64 {
        let mut l = self.loads.clone();
        for &(s, m, i, o) in d {
            l[s].memory += m;
            l[s].bytes_in += i;
            l[s].bytes_out += o;
        }
        l.iter().map(|x| x.memory).max().unwrap_or(0)
            + l.iter().map(|x| x.bytes_in).max().unwrap_or(0)
            + l.iter().map(|x| x.bytes_out).max().unwrap_or(0)
    }

    fn apply(&mut self, t: &BlockTask, s: usize) {
        for (slot, m, i, o) in self.deltas(t, s) {
            self.loads[slot].memory += m;
            self.loads[slot].bytes_in += i;
            self.loads[slot].bytes_out += o;
        }
        for b in &t.inputs {
            if self.at.get(b).is_some_and(|&src| src != s) {
                self.written.insert(b.clone());
            }
        }
        if self.is_named(&t.output) {
            self.written.insert(t.output.clone());
        }
        self.at.insert(t.output.clone(), s);
    }

    /// The candidate slot with the least objective after the move (ties: lowest slot).
    fn best(&self, t: &BlockTask, candidates: &[usize]) -> usize {
        *candidates
            .iter()
            .min_by_key(|&&s| (self.objective_with(&self.deltas(t, s)), s))
            .expect("a candidate")
    }

    fn least_loaded(&self) -> usize {
        (0..self.loads.len())
            .min_by_key(|&s| {
                (
                    self.loads[s].memory + self.loads[s].bytes_in + self.loads[s].bytes_out,
                    s,
                )
            })
            .unwrap_or(0)
    }
}

pub(super) fn place(cx: &Ctx, work: &[Work]) -> Vec<(BlockTask, usize)> {
    let mut sim = Sim::new(cx);
    // Blocks already in the store (inputs) belong to their block-cyclic home slot, so that
    // the work on them is spread the same way as the blocks they line up with.
    for n in &cx.g.nodes {
        if n.op.inputs().is_empty() && n.op.in_store_before_run() {
            for idx in n.meta.blocks() {
                let b = BlockId::new(n.id, idx);
                let h = home(cx, &b);
                sim.written.insert(b.clone());
                sim.at.insert(b, h);
            }
        }
    }
    let mut out = Vec::new();
    for w in work {
        match w {
            Work::One(t) => {
                // New blocks (no inputs) and the job's outputs go to their block-cyclic home, so
                // that arrays blocked alike line up on the same slots.
                let s = if sim.is_named(&t.output) || t.inputs.is_empty() {
                    home(cx, &t.output)
                } else {
                    let mut c: Vec<usize> = t
                        .inputs
                        .iter()
                        .filter_map(|b| sim.at.get(b).copied())
                        .collect();
                    c.push(sim.least_loaded());
                    c.sort_unstable();
                    c.dedup();
                    sim.best(t, &c)
                };
                sim.apply(t, s);
                out.push((t.clone(), s));
            }
            Work::Reduce { terms, output, .. } => {
                // Sum each slot's own terms there first; then combine the partials.
                let mut by_slot: Vec<(usize, Vec<usize>)> = Vec::new();
                for (i, term) in terms.iter().enumerate() {
                    let s = term
                        .iter()
                        .find_map(|b| sim.at.get(b).copied())
                        .unwrap_or_else(|| home(cx, &term[0]));
                    match by_slot.iter_mut().find(|(x, _)| *x == s) {
                        Some((_, v)) => v.push(i),
                        None => by_slot.push((s, vec![i])),
                    }
                }
                let groups: Vec<Vec<usize>> = by_slot.iter().map(|(_, v)| v.clone()).collect();
                let named_home = sim.is_named(output).then(|| home(cx, output));
                for (t, group) in w.expand_chained(&groups) {
                    let s = match group {
                        Some(k) => by_slot[k].0,
                        None => match named_home {
                            Some(h) => h,
                            None => {
                                let mut c: Vec<usize> = by_slot.iter().map(|(s, _)| *s).collect();
                                c.push(sim.least_loaded());
                                c.sort_unstable();
                                c.dedup();
                                sim.best(&t, &c)
                            }
                        },
                    };
                    sim.apply(&t, s);
                    out.push((t, s));
                }
            }
        }
    }
    out
}

/// Orders the placed tasks so that each slot streams: among its ready tasks a slot runs
/// first the one that frees the most memory (last uses of its inputs), then the one that
/// brings in the least new data (blocks to read or make), then one whose inputs it holds. Slots take turns, which gives
/// one global topological order for cutting batches.
pub(super) fn reorder(cx: &Ctx, placed: Vec<(BlockTask, usize)>) -> Vec<(BlockTask, usize)> {
    let g = cx.g;
    let n = placed.len();
    let producer: HashMap<&BlockId, usize> = placed
        .iter()
        .enumerate()
        .map(|(i, (t, _))| (&t.output, i))
        .collect();
    let mut uses: HashMap<&BlockId, usize> = HashMap::new();
    let mut waiting = vec![0usize; n];
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, (t, _)) in placed.iter().enumerate() {
        let mut seen = HashSet::new();
        for b in &t.inputs {
            *uses.entry(b).or_default() += 1;
            if let Some(&p) = producer.get(b)
                && seen.insert(p)
            {
                waiting[i] += 1;
                consumers[p].push(i);
            }
        }
    }
    let mut ready: Vec<std::collections::BTreeSet<usize>> = vec![Default::default(); cx.workers];
    for i in 0..n {
        if waiting[i] == 0 {
            ready[placed[i].1].insert(i);
        }
    }
    let mut live: Vec<HashSet<&BlockId>> = vec![HashSet::new(); cx.workers];
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        let mut progressed = false;
        for s in 0..cx.workers {
            let score = |i: usize| {
                let t = &placed[i].0;
                let (mut freed, mut held, mut new) = (0, 0, 0);
                let mut counts: HashMap<&BlockId, usize> = HashMap::new();
                for b in &t.inputs {
                    *counts.entry(b).or_default() += 1;
                }
                for (b, c) in counts {
                    if uses[b] == c {
                        freed += b.nbytes(g);
                    }
                    if live[s].contains(b) {
                        held += 1;
                    } else {
                        new += b.nbytes(g);
                    }
                }
                if t.inputs.is_empty() {
                    new += t.output.nbytes(g);
                }
                // Free memory first, then bring in as little new data as possible (a block
                // read or made), then use what is held.
                (
                    freed,
                    std::cmp::Reverse(new),
                    held,
                    std::cmp::Reverse(t.output.nbytes(g)),
                    std::cmp::Reverse(i),
                )
            };
            let Some(&i) = ready[s].iter().max_by_key(|&&i| score(i)) else {
                continue;
            };
            ready[s].remove(&i);
            progressed = true;
            order.push(i);
            let t = &placed[i].0;
            for b in &t.inputs {
                let u = uses.get_mut(b).expect("counted");
                *u -= 1;
                if *u == 0 {
                    live[s].remove(b);
                } else {
                    live[s].insert(b); // read or received here, kept for its next use
                }
            }
            if uses.get(&t.output).copied().unwrap_or(0) > 0 {
                live[s].insert(&t.output);
            }
            for &c in &consumers[i] {
                waiting[c] -= 1;
                if waiting[c] == 0 {
                    ready[placed[c].1].insert(c);
                }
            }
        }
        assert!(progressed, "the block task graph has a cycle");
    }
    let mut slots: Vec<Option<(BlockTask, usize)>> = placed.into_iter().map(Some).collect();
    order
        .into_iter()
        .map(|i| slots[i].take().expect("each once"))
        .collect()
}
