//! LSHS placement: NumS's load simulator (memory, bytes in, bytes out per slot) places
//! each task on the candidate slot that minimises the maximum loads after the move; then
//! each slot's tasks are ordered to stream.
//!
//! Both steps cost O(log W) per task input (W slots): the simulator keeps each load's
//! values as a multiset, so the maximum after a move that touches a few slots is read
//! from its top entries, and the least-loaded slot from an ordered set; the order keeps a
//! priority queue of ready tasks per slot whose scores are updated when they change.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use super::*;

/// One of the three loads of every slot, with its values as a multiset (value → slots).
struct Load {
    v: Vec<u64>,
    counts: BTreeMap<u64, u32>,
}

impl Load {
    fn new(slots: usize) -> Load {
        Load {
            v: vec![0; slots],
            counts: BTreeMap::from([(0, slots as u32)]),
        }
    }

    fn add(&mut self, s: usize, d: u64) {
        if d == 0 {
            return;
        }
        let old = self.v[s];
        match self.counts.get_mut(&old) {
            Some(c) if *c > 1 => *c -= 1,
            _ => {
                self.counts.remove(&old);
            }
        }
        self.v[s] = old + d;
        *self.counts.entry(old + d).or_default() += 1;
    }

    /// The two largest values (the second: after taking one slot with the largest away).
    fn top2(&self) -> (u64, u64) {
        let mut it = self.counts.iter().rev();
        match it.next() {
            Some((&v, &c)) if c > 1 => (v, v),
            Some((&v, _)) => (v, it.next().map_or(0, |(&w, _)| w)),
            None => (0, 0),
        }
    }

    /// The largest value among the slots other than slot `s`.
    fn max_without(&self, s: usize, top: (u64, u64)) -> u64 {
        if self.v[s] == top.0 { top.1 } else { top.0 }
    }

    /// The two largest values among the slots not in `out` (distinct slots).
    fn top2_without(&self, out: &[usize]) -> (u64, u64) {
        let mut gone: Vec<u64> = out.iter().map(|&s| self.v[s]).collect();
        gone.sort_unstable_by(|a, b| b.cmp(a));
        let mut g = gone.iter().peekable();
        let mut found = Vec::with_capacity(2);
        for (&v, &c) in self.counts.iter().rev() {
            let mut left = c;
            while left > 0 && g.peek() == Some(&&v) {
                g.next();
                left -= 1;
            }
            for _ in 0..left.min(2) {
                found.push(v);
            }
            if found.len() >= 2 {
                break;
            }
        }
        (
            found.first().copied().unwrap_or(0),
            found.get(1).copied().unwrap_or(0),
        )
    }
}

/// NumS's three loads per slot, and where each block is.
pub(super) struct Sim<'a> {
    cx: &'a Ctx<'a>,
    memory: Load,
    bytes_in: Load,
    bytes_out: Load,
    /// (memory + bytes in + bytes out, slot) of every slot: the least loaded first.
    totals: BTreeSet<(u64, usize)>,
    /// The slot that holds each block (`NONE`: none yet).
    at: Vec<u32>,
    /// Blocks in the store (inputs, named arrays, blocks moved between slots).
    written: Vec<bool>,
}

/// The distinct inputs of a task by where they are.
struct Inputs {
    total: u64,
    /// Per slot holding inputs, in slot order: (slot, bytes there, bytes there not yet
    /// in the store).
    by_slot: Vec<(usize, u64, u64)>,
}

impl Inputs {
    /// Bytes of the inputs on slot `s`.
    fn on(&self, s: usize) -> Option<u64> {
        self.by_slot
            .binary_search_by_key(&s, |x| x.0)
            .ok()
            .map(|k| self.by_slot[k].1)
    }
}

impl<'a> Sim<'a> {
    fn new(cx: &'a Ctx<'a>) -> Self {
        Sim {
            cx,
            memory: Load::new(cx.workers),
            bytes_in: Load::new(cx.workers),
            bytes_out: Load::new(cx.workers),
            totals: (0..cx.workers).map(|s| (0, s)).collect(),
            at: Vec::new(),
            written: Vec::new(),
        }
    }

    fn grow(&mut self, n: usize) {
        if self.at.len() < n {
            self.at.resize(n, NONE);
            self.written.resize(n, false);
        }
    }

    fn is_named(&self, b: &BlockId) -> bool {
        b.part == 0 && self.cx.g.nodes[b.node].persist
    }

    fn add(&mut self, s: usize, m: u64, i: u64, o: u64) {
        if m + i + o == 0 {
            return;
        }
        let total = self.memory.v[s] + self.bytes_in.v[s] + self.bytes_out.v[s];
        self.totals.remove(&(total, s));
        self.memory.add(s, m);
        self.bytes_in.add(s, i);
        self.bytes_out.add(s, o);
        self.totals.insert((total + m + i + o, s));
    }

    fn inputs(&self, ins: &[Bid], blocks: &Blocks) -> Inputs {
        let mut distinct: Vec<Bid> = ins.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let mut total = 0;
        let mut by_slot: Vec<(usize, u64, u64)> = Vec::new();
        for &b in &distinct {
            let n = blocks.nbytes[b as usize];
            total += n;
            let at = self.at[b as usize];
            if at != NONE {
                let unwritten = if self.written[b as usize] { 0 } else { n };
                by_slot.push((at as usize, n, unwritten));
            }
        }
        by_slot.sort_unstable_by_key(|x| x.0);
        by_slot.dedup_by(|x, y| {
            if x.0 == y.0 {
                y.1 += x.1;
                y.2 += x.2;
                true
            } else {
                false
            }
        });
        Inputs { total, by_slot }
    }

    /// The candidate slot with the least objective after the move (ties: lowest slot):
    /// max(memory) + max(bytes in) + max(bytes out) over all slots once the task with
    /// inputs `ins` and an output of `out` bytes (`named`: stored) runs there. Running on
    /// slot s adds the output to s's memory, the inputs held elsewhere or in the store to
    /// its bytes in, and each input not yet in the store to the bytes out of its slot.
    /// Each candidate costs O(1) once the loads' top values are known.
    fn best(&self, ins: &Inputs, out: u64, named: bool, candidates: &[usize]) -> usize {
        let mem_top = self.memory.top2();
        let in_top = self.bytes_in.top2();
        let sources: Vec<usize> = ins.by_slot.iter().map(|x| x.0).collect();
        // Bytes out: the slots without inputs keep theirs; each slot with inputs sends
        // what is not yet stored, unless it runs the task.
        let rest = self.bytes_out.top2_without(&sources);
        let mut first: Option<(u64, usize)> = None;
        let mut second = 0u64;
        for &(x, _, unwritten) in &ins.by_slot {
            let v = self.bytes_out.v[x] + unwritten;
            match first {
                Some((f, _)) if v <= f => second = second.max(v),
                Some((f, _)) => {
                    second = second.max(f);
                    first = Some((v, x));
                }
                None => first = Some((v, x)),
            }
        }
        let objective = |s: usize| {
            let here = ins.on(s);
            let memory = self
                .memory
                .max_without(s, mem_top)
                .max(self.memory.v[s] + out);
            let bytes_in = self
                .bytes_in
                .max_without(s, in_top)
                .max(self.bytes_in.v[s] + ins.total - here.unwrap_or(0));
            let others = if here.is_some() || self.bytes_out.v[s] != rest.0 {
                rest.0
            } else {
                rest.1
            };
            let senders = match first {
                Some((_, x)) if x == s => second,
                Some((f, _)) => f,
                None => 0,
            };
            let bytes_out = others
                .max(senders)
                .max(self.bytes_out.v[s] + if named { out } else { 0 });
            memory + bytes_in + bytes_out
        };
        *candidates
            .iter()
            .min_by_key(|&&s| (objective(s), s))
            .expect("a candidate")
    }

    fn apply(&mut self, ins: &[Bid], out: &BlockId, out_id: Bid, s: usize, blocks: &Blocks) {
        let i = self.inputs(ins, blocks);
        let n = blocks.nbytes[out_id as usize];
        let named = self.is_named(out);
        self.add(
            s,
            n,
            i.total - i.on(s).unwrap_or(0),
            if named { n } else { 0 },
        );
        for &(x, _, unwritten) in &i.by_slot {
            if x != s {
                self.add(x, 0, 0, unwritten);
            }
        }
        for &b in ins {
            let at = self.at[b as usize];
            if at != NONE && at as usize != s {
                self.written[b as usize] = true;
            }
        }
        if named {
            self.written[out_id as usize] = true;
        }
        self.at[out_id as usize] = s as u32;
    }

    fn least_loaded(&self) -> usize {
        self.totals.first().map_or(0, |&(_, s)| s)
    }

    /// Chooses among the slots holding an input and the least-loaded slot.
    fn choose(&self, ins: &[Bid], out: &BlockId, out_id: Bid, blocks: &Blocks) -> usize {
        let i = self.inputs(ins, blocks);
        let mut c: Vec<usize> = i.by_slot.iter().map(|x| x.0).collect();
        c.push(self.least_loaded());
        c.sort_unstable();
        c.dedup();
        self.best(&i, blocks.nbytes[out_id as usize], self.is_named(out), &c)
    }
}

pub(super) fn place(cx: &Ctx, work: &BlockWork, blocks: &mut Blocks, affinity: Affinity) -> Tasks {
    let mut sim = Sim::new(cx);
    sim.grow(blocks.len());
    // Blocks already in the store (inputs) belong to the slot whose process holds them in
    // memory, if one does and the placement follows memory (work over them goes there: a
    // memory hit, not a store read), else to their block-cyclic home slot, so that the
    // work on them is spread the same way as the blocks they line up with.
    for n in &cx.g.nodes {
        if n.op.inputs().is_empty() && n.op.in_store_before_run() {
            for lin in 0..n.meta.num_blocks() {
                let b = BlockId::new(n.id, lin);
                let id = blocks.id(&b, &[]) as usize;
                sim.written[id] = true;
                let held = (affinity != Affinity::Off)
                    .then(|| blocks.held_by(id as Bid))
                    .flatten();
                sim.at[id] = held.unwrap_or_else(|| home(cx, &b)) as u32;
            }
        }
    }
    // Whether `b` is one of the job's named blocks, placed at its home (see below).
    let at_home = |sim: &Sim, b: &BlockId| affinity != Affinity::Outputs && sim.is_named(b);
    let mut tasks = Tasks::default();
    let mut parts: Vec<Bid> = Vec::new();
    let mut ins: Vec<Bid> = Vec::new();
    for w in work.iter() {
        let mut k = Kernels::new(&mut tasks, &w);
        parts.clear();
        match &w {
            Work::One(t) => {
                let o = blocks.id(&t.output, &[]);
                ins.clear();
                ins.extend(t.inputs.iter().map(|b| blocks.id(b, &[])));
                // New blocks (no inputs) and the job's outputs go to their block-cyclic home,
                // so that arrays blocked alike line up on the same slots (the outputs follow
                // their inputs instead under `Affinity::Outputs`).
                let s = if at_home(&sim, &t.output)
                    || t.inputs.is_empty()
                    || panel_home(cx, &t.output).is_some()
                {
                    home(cx, &t.output)
                } else {
                    sim.choose(&ins, &t.output, o, blocks)
                };
                sim.apply(&ins, &t.output, o, s, blocks);
                let kernel = k.of(Step::Work, &mut tasks, &w);
                tasks.push(kernel, ins.iter().copied(), o, s);
            }
            Work::Reduce { output, .. } if whole_on_one_slot(cx, &w, blocks) => {
                // Enough output blocks to keep every slot busy, and a reduction small
                // enough for one invocation: all its terms on one slot (the output's home
                // if the job keeps it, else where its inputs and the loads say), as naive
                // does. Partials on several slots would only add a store round trip and
                // a wait between slots (the chains that made `A @ B` slower than naive).
                ins.clear();
                ins.extend(w.terms().flatten().map(|b| blocks.id(b, &[])));
                let o = blocks.id(output, &[]);
                let s = if at_home(&sim, output) {
                    home(cx, output)
                } else {
                    sim.choose(&ins, output, o, blocks)
                };
                // One task for all the terms: the kernel sums them itself (a blocked
                // `A @ B` adds each product into C by GEMM), where a chain of a task per
                // term and per partial sum made a new block of each.
                let kernel = k.of(Step::Work, &mut tasks, &w);
                sim.apply(&ins, output, o, s, blocks);
                tasks.push(kernel, ins.iter().copied(), o, s);
            }
            Work::Reduce { output, .. } => {
                // Sum each slot's own terms there first; then combine the partials.
                let mut by_slot: Vec<(usize, Vec<usize>)> = Vec::new();
                let mut group_of: HashMap<usize, usize> = HashMap::new();
                for (i, term) in w.terms().enumerate() {
                    let s = term
                        .iter()
                        .map(|b| sim.at[blocks.id(b, &[]) as usize])
                        .find(|&s| s != NONE)
                        .map_or_else(|| home(cx, &term[0]), |s| s as usize);
                    let g = *group_of.entry(s).or_insert_with(|| {
                        by_slot.push((s, Vec::new()));
                        by_slot.len() - 1
                    });
                    by_slot[g].1.push(i);
                }
                let groups: Vec<Vec<usize>> =
                    by_slot.iter_mut().map(|(_, v)| std::mem::take(v)).collect();
                let named_home = at_home(&sim, output).then(|| home(cx, output));
                w.expand_chained(&groups, |step, inputs, out, group| {
                    let o = blocks.made(&out, &mut parts, cx.g);
                    sim.grow(blocks.len());
                    ins.clear();
                    ins.extend(inputs.iter().map(|b| blocks.id(b, &parts)));
                    let s = match group {
                        Some(g) => by_slot[g].0,
                        None => match named_home {
                            Some(h) => h,
                            None => {
                                let i = sim.inputs(&ins, blocks);
                                let mut c: Vec<usize> = by_slot.iter().map(|(s, _)| *s).collect();
                                c.push(sim.least_loaded());
                                c.sort_unstable();
                                c.dedup();
                                sim.best(&i, blocks.nbytes[o as usize], sim.is_named(&out), &c)
                            }
                        },
                    };
                    sim.apply(&ins, &out, o, s, blocks);
                    let kernel = k.of(step, &mut tasks, &w);
                    tasks.push(kernel, ins.iter().copied(), o, s);
                });
            }
        }
    }
    tasks
}

/// Whether a reduction runs whole on one slot: its node has at least a block per worker
/// (parallel enough across output blocks) and all its terms' blocks together take at most
/// a quarter of an invocation's memory.
fn whole_on_one_slot(cx: &Ctx, w: &Work, blocks: &Blocks) -> bool {
    let out = w.output();
    if cx.g.nodes[out.node].meta.num_blocks() < cx.workers as u64 {
        return false;
    }
    let limit = (cx.memory_mb << 20) / 4;
    let mut bytes = 0u64;
    for b in w.terms().flatten() {
        bytes += blocks.nbytes[blocks.id(b, &[]) as usize];
        if bytes > limit {
            return false;
        }
    }
    true
}

/// A ready task's priority on its slot: what other slots wait for first ([`critical`],
/// then any task whose output another slot reads), then a task whose inputs are all made
/// on this slot or stored before the run (one made on another slot ends the invocation:
/// the slot's own stream goes first, so that it is not cut in two and its blocks read
/// twice), then shrink the slot's memory most: bytes its inputs free (last uses) less
/// the bytes it brings in (so that a task using up a block made here goes before one
/// that reads two blocks only to free them), then bring in as little new data as
/// possible (a block read or made), then use what the slot holds; then the smaller
/// output, then the task placed first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Score {
    critical: bool,
    feeds_other: bool,
    local: bool,
    shrinks: i64,
    new: Reverse<u64>,
    held: u32,
    out: Reverse<u64>,
    task: Reverse<u32>,
}

/// Each distinct block of `ins` with how often it appears.
fn counted(ins: &[Bid]) -> Vec<(Bid, u32)> {
    let mut v = ins.to_vec();
    v.sort_unstable();
    let mut out: Vec<(Bid, u32)> = Vec::with_capacity(v.len());
    for b in v {
        match out.last_mut() {
            Some((x, c)) if *x == b => *c += 1,
            _ => out.push((b, 1)),
        }
    }
    out
}

/// Orders the placed tasks so that each slot streams: among its ready tasks a slot runs
/// first the one that shrinks its memory most (last uses of its inputs, less what it reads
/// or makes from nothing), then the one that brings in the least new data (blocks to read
/// or make), then one whose inputs it holds.
/// Slots take turns, which gives one global topological order for cutting batches.
pub(super) fn reorder(cx: &Ctx, tasks: Tasks, blocks: &Blocks) -> Tasks {
    let n = tasks.len();
    let nb = blocks.len();
    let producer = tasks.producers(nb);
    // Per block: remaining uses (inputs counted with repeats), remaining consumer tasks,
    // and its consumers sorted by (slot, task).
    let mut uses = vec![0u32; nb];
    let mut remaining = vec![0u32; nb];
    let mut waiting = vec![0u32; n];
    let mut cstart = vec![0u32; nb + 1];
    for (i, w) in waiting.iter_mut().enumerate() {
        for (b, c) in counted(tasks.inputs(i)) {
            uses[b as usize] += c;
            remaining[b as usize] += 1;
            cstart[b as usize + 1] += 1;
            if producer[b as usize] != NONE {
                *w += 1;
            }
        }
    }
    for b in 0..nb {
        cstart[b + 1] += cstart[b];
    }
    let mut consumers = vec![0u32; cstart[nb] as usize];
    {
        let mut fill = cstart.clone();
        for i in 0..n {
            for (b, _) in counted(tasks.inputs(i)) {
                consumers[fill[b as usize] as usize] = i as u32;
                fill[b as usize] += 1;
            }
        }
    }
    for b in 0..nb {
        let c = &mut consumers[cstart[b] as usize..cstart[b + 1] as usize];
        c.sort_unstable_by_key(|&i| (tasks.slot[i as usize], i));
    }
    let consumers_of =
        |b: Bid| &consumers[cstart[b as usize] as usize..cstart[b as usize + 1] as usize];
    // What other slots wait for: a task whose block another slot reads, and a light task
    // (inputs of at most INLINE_MAX bytes) whose block such a task on its slot reads (a
    // fit's intercept `b_[0]`, read by every row block's work: made late, it cut the
    // other slot's batch in two, its row blocks read twice). Consumers come after their
    // producers in placement order.
    let mut feeds_other = vec![false; n];
    for i in (0..n).rev() {
        let s = tasks.slot[i];
        let light = || {
            distinct(tasks.inputs(i))
                .map(|b| blocks.nbytes[b as usize])
                .sum::<u64>()
                <= INLINE_MAX
        };
        let c = consumers_of(tasks.output[i]);
        // Consumers are sorted by slot: one on another slot is first or last.
        feeds_other[i] = c.first().is_some_and(|&f| tasks.slot[f as usize] != s)
            || c.last().is_some_and(|&l| tasks.slot[l as usize] != s)
            || (c.iter().any(|&c| c as usize > i && feeds_other[c as usize]) && light());
    }

    // Blocks live on each slot: read or made there and used again later (a block stays
    // live on a slot until its last use anywhere, so membership only grows while it
    // matters).
    let mut live: HashSet<(Bid, u32)> = HashSet::new();
    let score = |i: usize, live: &HashSet<(Bid, u32)>, uses: &[u32]| -> Score {
        let s = tasks.slot[i];
        let ins = tasks.inputs(i);
        let (mut freed, mut held, mut new) = (0u64, 0u32, 0u64);
        for (b, c) in counted(ins) {
            let nbytes = blocks.nbytes[b as usize];
            if uses[b as usize] == c {
                freed += nbytes;
            }
            if live.contains(&(b, s)) {
                held += 1;
            } else {
                new += nbytes;
            }
        }
        let out = blocks.nbytes[tasks.output[i] as usize];
        if ins.is_empty() {
            new += out;
        }
        let shrinks = freed as i64 - new as i64;
        let local = ins.iter().all(|&b| {
            let p = producer[b as usize];
            p == NONE || tasks.slot[p as usize] == s
        });
        Score {
            critical: critical(&tasks.kernels[tasks.kernel[i] as usize]),
            feeds_other: feeds_other[i],
            local,
            shrinks,
            new: Reverse(new),
            held,
            out: Reverse(out),
            task: Reverse(i as u32),
        }
    };
    // Ready tasks per slot, best first; an entry is stale once its task is taken or its
    // score has changed (a newer entry was pushed).
    let mut ready: Vec<BinaryHeap<(Score, u32)>> =
        (0..cx.workers).map(|_| BinaryHeap::new()).collect();
    let mut version = vec![0u32; n];
    let mut ready_count = vec![0usize; cx.workers];
    let mut active: BTreeSet<usize> = BTreeSet::new();
    let mut is_ready = vec![false; n];
    let push = |i: usize,
                live: &HashSet<(Bid, u32)>,
                uses: &[u32],
                version: &mut [u32],
                ready: &mut [BinaryHeap<(Score, u32)>]| {
        version[i] += 1;
        let s = tasks.slot[i] as usize;
        ready[s].push((score(i, live, uses), version[i]));
    };
    for i in 0..n {
        if waiting[i] == 0 {
            is_ready[i] = true;
            let s = tasks.slot[i] as usize;
            ready_count[s] += 1;
            active.insert(s);
            push(i, &live, &uses, &mut version, &mut ready);
        }
    }
    let mut order: Vec<u32> = Vec::with_capacity(n);
    let mut cursor = 0;
    let mut progressed = false;
    let mut touched: Vec<usize> = Vec::new();
    while order.len() < n {
        // Slots take turns in slot order; a slot that gets ready tasks after its turn
        // waits for the next round.
        let Some(&s) = active.range(cursor..).next() else {
            assert!(progressed, "the block task graph has a cycle");
            progressed = false;
            cursor = 0;
            continue;
        };
        cursor = s + 1;
        let i = loop {
            let (sc, v) = ready[s].pop().expect("a ready task");
            let i = sc.task.0 as usize;
            if is_ready[i] && v == version[i] {
                break i;
            }
        };
        is_ready[i] = false;
        ready_count[s] -= 1;
        if ready_count[s] == 0 {
            active.remove(&s);
        }
        progressed = true;
        order.push(i as u32);
        // Rescore what changes: a block's last remaining consumer (it now frees the
        // block), and the ready tasks on this slot that read a block it now holds.
        touched.clear();
        let ins = counted(tasks.inputs(i));
        for &(b, c) in &ins {
            uses[b as usize] -= c;
            remaining[b as usize] -= 1;
            if remaining[b as usize] == 1 {
                touched.extend(
                    consumers_of(b)
                        .iter()
                        .map(|&c| c as usize)
                        .filter(|&c| is_ready[c]),
                );
            }
        }
        for &(b, _) in &ins {
            if uses[b as usize] > 0 && live.insert((b, s as u32)) {
                touched.extend(
                    slot_consumers(consumers_of(b), &tasks.slot, s).filter(|&c| is_ready[c]),
                );
            }
        }
        let o = tasks.output[i];
        if uses[o as usize] > 0 {
            live.insert((o, s as u32));
        }
        touched.sort_unstable();
        touched.dedup();
        for &c in &touched {
            push(c, &live, &uses, &mut version, &mut ready);
        }
        for &c in consumers_of(o) {
            let c = c as usize;
            waiting[c] -= 1;
            if waiting[c] == 0 {
                is_ready[c] = true;
                let sc = tasks.slot[c] as usize;
                ready_count[sc] += 1;
                active.insert(sc);
                push(c, &live, &uses, &mut version, &mut ready);
            }
        }
    }
    tasks.permute(&order)
}

/// The consumers (sorted by slot, then task) that run on slot `s`.
fn slot_consumers<'c>(c: &'c [u32], slot: &'c [u32], s: usize) -> impl Iterator<Item = usize> + 'c {
    let lo = c.partition_point(|&i| (slot[i as usize] as usize) < s);
    c[lo..]
        .iter()
        .take_while(move |&&i| slot[i as usize] as usize == s)
        .map(|&i| i as usize)
}
