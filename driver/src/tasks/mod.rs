//! From the array graph to block work: for every output block either one task, or a
//! reduction (a sum of terms: matmul pairs or blocks summed over axes) that a scheduler
//! splits into partial sums and a combining task. Schedulers live in `sched`.
//!
//! The work is made lazily, block by block ([`BlockWork::iter`]), in time proportional to
//! the inputs each block reads: no step scans a whole grid per block. Each kind of node's
//! work is in the file of its family, as `graph/funcs/` groups the functions: `creation`,
//! `elementwise`, `contractions`, `reductions`, `cumulative`, `fft`, `sorting`, `shapes`, `linalg`, `models` (a
//! fit's pass in one sweep), and `io` (imports and the export to S3).

use nums_layout::ArrayMeta;
use nums_layout::batch::Kernel;
use nums_layout::meta::{ravel, strided_overlap, unravel};

use crate::graph::{Graph, Node, NodeId, NodeOp};

// The block work of each family of functions, as `graph/funcs/` defines them.
mod contractions;
mod creation;
mod cumulative;
mod elementwise;
mod fft;
mod indexing;
mod io;
mod linalg;
mod models;
mod reductions;
mod shapes;
mod sorting;

/// A block in the plan: block number `block` (row-major over its node's grid) of `node`, or
/// its partial sum number `part` (> 0). Ordered as (node, block index, part).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId {
    pub node: NodeId,
    pub block: u64,
    pub part: u32,
}

impl BlockId {
    pub fn new(node: NodeId, block: u64) -> BlockId {
        BlockId {
            node,
            block,
            part: 0,
        }
    }

    /// The block's index along each axis.
    pub fn index(&self, g: &Graph) -> Vec<u64> {
        unravel(self.block, &g.nodes[self.node].meta.grid())
    }

    /// Bytes of this block in memory (partial results have their node's dtype).
    pub fn nbytes(&self, g: &Graph) -> u64 {
        block_nbytes(&g.nodes[self.node].meta, self.block)
    }
}

/// Bytes of block number `lin` (row-major) of an array, without building its index.
pub(crate) fn block_nbytes(m: &ArrayMeta, mut lin: u64) -> u64 {
    let mut n = m.dtype.size() as u64;
    for d in (0..m.ndim()).rev() {
        let grid = m.shape[d].div_ceil(m.block[d]);
        let i = lin % grid;
        lin /= grid;
        n *= m.shape[d].min((i + 1) * m.block[d]) - i * m.block[d];
    }
    n
}

/// A kernel that makes one output block from input blocks.
#[derive(Debug, Clone)]
pub struct BlockTask {
    pub kernel: Kernel,
    pub inputs: Vec<BlockId>,
    pub output: BlockId,
}

/// What one output block needs.
#[derive(Debug, Clone)]
pub enum Work {
    One(BlockTask),
    /// `output` is the sum over the terms of `kernel(term)`; any grouping of the terms
    /// into partial sums gives the same value up to rounding. Term `i` is the `arity`
    /// blocks `terms[i * arity..(i + 1) * arity]`.
    Reduce {
        kernel: Kernel,
        arity: usize,
        terms: Vec<BlockId>,
        output: BlockId,
    },
}

/// Which kernel a task of a [`Work`] runs: the work's own, or the one that adds partial
/// results ([`Kernel::combiner`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Work,
    Combine,
}

impl Work {
    pub fn output(&self) -> BlockId {
        match self {
            Work::One(t) => t.output,
            Work::Reduce { output, .. } => *output,
        }
    }

    pub fn kernel(&self) -> &Kernel {
        match self {
            Work::One(t) => &t.kernel,
            Work::Reduce { kernel, .. } => kernel,
        }
    }

    /// The terms of a reduction (a one-task work: its inputs, as one term).
    pub fn terms(&self) -> impl Iterator<Item = &[BlockId]> {
        let (all, arity) = match self {
            Work::One(t) => (t.inputs.as_slice(), t.inputs.len().max(1)),
            Work::Reduce { terms, arity, .. } => (terms.as_slice(), (*arity).max(1)),
        };
        all.chunks(arity)
    }

    pub fn num_terms(&self) -> usize {
        match self {
            Work::One(_) => 1,
            Work::Reduce { terms, arity, .. } => terms.len() / (*arity).max(1),
        }
    }

    fn term(&self, i: usize) -> &[BlockId] {
        match self {
            Work::One(t) => &t.inputs,
            Work::Reduce { terms, arity, .. } => &terms[i * arity..(i + 1) * arity],
        }
    }

    /// The tasks for a grouping of a reduction's terms (groups in term order), given to
    /// `f(step, inputs, output)` in order; a single group is one task. Partial k of the
    /// output is `part = k + 1`; a last task adds them up in order.
    pub fn expand(&self, groups: &[Vec<usize>], mut f: impl FnMut(Step, &[BlockId], BlockId)) {
        let output = self.output();
        let Work::Reduce { .. } = self else {
            let Work::One(t) = self else { unreachable!() };
            return f(Step::Work, &t.inputs, t.output);
        };
        let mut ins = Vec::new();
        let gather = |g: &[usize], ins: &mut Vec<BlockId>| {
            ins.clear();
            for &i in g {
                ins.extend_from_slice(self.term(i));
            }
        };
        if groups.len() == 1 {
            gather(&groups[0], &mut ins);
            return f(Step::Work, &ins, output);
        }
        let mut partials = Vec::with_capacity(groups.len());
        for (k, g) in groups.iter().enumerate() {
            gather(g, &mut ins);
            let out = BlockId {
                part: k as u32 + 1,
                ..output
            };
            f(Step::Work, &ins, out);
            partials.push(out);
        }
        f(Step::Combine, &partials, output);
    }

    /// Like [`Work::expand`], but each group is a chain that adds one term at a time
    /// (term, then running sum), so a group holds one term's blocks at once and its terms
    /// can be computed as their operands appear. Each task comes with its group; the task
    /// that combines the groups' sums has none.
    pub fn expand_chained(
        &self,
        groups: &[Vec<usize>],
        mut f: impl FnMut(Step, &[BlockId], BlockId, Option<usize>),
    ) {
        let Work::Reduce { output, .. } = self else {
            return self.expand(groups, |s, i, o| f(s, i, o, Some(0)));
        };
        let output = *output;
        let mut part = 0;
        let mut next = || {
            part += 1;
            BlockId { part, ..output }
        };
        let mut sums = Vec::with_capacity(groups.len());
        for (k, g) in groups.iter().enumerate() {
            let mut acc: Option<BlockId> = None;
            for (n, &j) in g.iter().enumerate() {
                let final_step = groups.len() == 1 && n == g.len() - 1;
                let term_out = if final_step && g.len() == 1 {
                    output
                } else {
                    next()
                };
                f(Step::Work, self.term(j), term_out, Some(k));
                acc = Some(match acc {
                    None => term_out,
                    Some(a) => {
                        let sum_out = if final_step { output } else { next() };
                        f(Step::Combine, &[a, term_out], sum_out, Some(k));
                        sum_out
                    }
                });
            }
            sums.push(acc.expect("a group has terms"));
        }
        if groups.len() > 1 {
            f(Step::Combine, &sums, output, None);
        }
    }
}

/// Where a block's array lives under the store root while run `prefix` (`<job>/_runs/<run>`,
/// see `crate::runs`) makes it: the arrays the run keeps (outputs, imports) are staged
/// under `<prefix>/out/<name>` until the run commits them to `<job>/<name>`; intermediates
/// live under `<prefix>/tmp/`; inputs read in place stay where they are.
pub(crate) fn array_path(prefix: &str, g: &Graph, b: &BlockId) -> String {
    let n = &g.nodes[b.node];
    if let NodeOp::InPlace { path, .. } = &n.op {
        return path.clone();
    }
    if let (Some(name), 0) = (n.persisted_name(), b.part) {
        return format!("{prefix}/out/{name}");
    }
    // An intermediate is named after the job-file array whose definition made it
    // (`tmp/Y-n12`), so the arrays `run --keep` leaves say where they come from.
    let owner = n.def.as_deref().or(n.name.as_deref());
    match (owner, b.part) {
        (Some(o), 0) => format!("{prefix}/tmp/{o}-n{}", b.node),
        (Some(o), p) => format!("{prefix}/tmp/{o}-n{}p{p}", b.node),
        (None, 0) => format!("{prefix}/tmp/n{}", b.node),
        (None, p) => format!("{prefix}/tmp/n{}p{p}", b.node),
    }
}

/// Whether a block's array is a job intermediate (written only where another invocation
/// needs it, removed when the job ends): not an output, an import or an input read in place.
pub(crate) fn is_intermediate(g: &Graph, b: &BlockId) -> bool {
    !matches!(g.nodes[b.node].op, NodeOp::InPlace { .. })
        && (b.part > 0 || g.nodes[b.node].persisted_name().is_none())
}

/// Where a node's array lives under the store root during run `prefix`.
pub(crate) fn node_path(prefix: &str, g: &Graph, id: NodeId) -> String {
    array_path(prefix, g, &BlockId::new(id, 0))
}

/// The output block whose work is made: block number `output.block` of node `id`, at
/// block index `idx`; what every family's `work` reads.
#[derive(Clone, Copy)]
struct Out<'a, 'g> {
    w: &'a BlockWork<'g>,
    g: &'g Graph,
    id: NodeId,
    n: &'g Node,
    idx: &'a [u64],
    output: BlockId,
}

impl Out<'_, '_> {
    /// One task making the output block from `inputs`.
    fn one(&self, kernel: Kernel, inputs: Vec<BlockId>) -> Option<Work> {
        Some(Work::One(BlockTask {
            kernel,
            inputs,
            output: self.output,
        }))
    }

    /// Block `i` of node `x`.
    fn b(&self, x: NodeId, i: &[u64]) -> BlockId {
        self.w.id(x, i)
    }

    /// The one block of single-block node `x` (through [`BlockWork::id`], as every read).
    fn only(&self, x: NodeId) -> BlockId {
        self.w.id(x, &vec![0; self.meta(x).ndim()])
    }

    /// Node `x`'s metadata.
    fn meta(&self, x: NodeId) -> &ArrayMeta {
        &self.g.nodes[x].meta
    }

    /// The block of node `x` an elementwise output block reads: block 0 along the axes
    /// `x` broadcasts (of length 1), the output's index along the others.
    fn bcast(&self, x: NodeId) -> BlockId {
        let m = self.meta(x);
        let off = self.idx.len() - m.ndim();
        let i: Vec<u64> = (0..m.ndim())
            .map(|d| {
                if m.shape[d] == 1 {
                    0
                } else {
                    self.idx[d + off]
                }
            })
            .collect();
        self.b(x, &i)
    }
}

/// The block work of a graph, made on demand in topological order ([`BlockWork::iter`]).
pub struct BlockWork<'g> {
    pub g: &'g Graph,
    /// Which blocks of each node have work: those the stored arrays read, and no other.
    demand: Vec<Demand>,
    /// Each node's block grid.
    grids: Vec<Vec<u64>>,
}

/// Which blocks of a node are made.
#[derive(Clone, Debug, PartialEq)]
enum Demand {
    None,
    All,
    /// One bit per block, row-major.
    Some(Vec<u64>),
}

impl Demand {
    fn has(&self, lin: u64) -> bool {
        match self {
            Demand::None => false,
            Demand::All => true,
            Demand::Some(bits) => bits[(lin / 64) as usize] >> (lin % 64) & 1 == 1,
        }
    }

    fn add(&mut self, lin: u64, count: u64) {
        match self {
            Demand::All => {}
            Demand::None => {
                *self = Demand::Some(vec![0; count.div_ceil(64) as usize]);
                self.add(lin, count)
            }
            Demand::Some(bits) => bits[(lin / 64) as usize] |= 1 << (lin % 64),
        }
    }
}

/// Whether making every block of a node `op` reads every block of each of its inputs, so
/// that the whole of a node asked for whole needs its inputs whole without looking at
/// each block's work (the common case, kept cheap for plans of a million blocks).
fn reads_whole_inputs(op: &NodeOp) -> bool {
    if let NodeOp::Einsum { subscripts, .. } = op {
        // Every block of an operand is read unless a letter repeats in it (a diagonal).
        let inputs = subscripts.split("->").next().unwrap_or("");
        return inputs.split(',').all(|s| {
            let letters: Vec<char> = s.chars().filter(char::is_ascii_alphabetic).collect();
            let set: std::collections::HashSet<&char> = letters.iter().collect();
            set.len() == letters.len()
        });
    }
    matches!(
        op,
        NodeOp::Unary { .. }
            | NodeOp::CheckBelow { .. }
            | NodeOp::Scalar { .. }
            | NodeOp::Binary { .. }
            | NodeOp::Where { .. }
            | NodeOp::Reduce { .. }
            | NodeOp::Transpose { .. }
            | NodeOp::Rechunk { .. }
            | NodeOp::Concat { .. }
            | NodeOp::Reshape { .. }
            | NodeOp::Fft { .. }
    )
}

/// The work of the blocks the graph's stored arrays need, in topological order (imports
/// have none: the driver writes their blocks). Only what they read is made: a named
/// array no output uses makes nothing, and a slice or an element of a large expression
/// makes only the blocks of each operand that reach it (a random block is made on its own).
pub(crate) fn block_work(g: &Graph) -> BlockWork<'_> {
    let mut w = BlockWork {
        g,
        demand: Vec::new(),
        grids: g.nodes.iter().map(|n| n.meta.grid()).collect(),
    };
    w.demand = w.demand();
    w
}

impl<'g> BlockWork<'g> {
    /// Walks the graph from its stored arrays back to what they read, block by block
    /// where a node is needed only in part or reads only part of its inputs.
    fn demand(&self) -> Vec<Demand> {
        let mut demand = vec![Demand::None; self.g.nodes.len()];
        let count = |id: NodeId| self.grids[id].iter().product::<u64>();
        for n in self.g.nodes.iter().rev() {
            if n.persist {
                demand[n.id] = Demand::All;
            }
            let whole = match &demand[n.id] {
                Demand::None => continue,
                Demand::All => true,
                Demand::Some(_) => false,
            };
            // (An assignment's untouched blocks, and a slice's whole blocks, are read
            // through it, from its operand.)
            let through = |i: &NodeId| {
                matches!(
                    self.g.nodes[*i].op,
                    NodeOp::Put { .. } | NodeOp::Slice { .. } | NodeOp::Rechunk { .. }
                )
            };
            if whole && reads_whole_inputs(&n.op) && !n.op.inputs().iter().any(through) {
                for i in n.op.inputs() {
                    demand[i] = Demand::All;
                }
                continue;
            }
            // A block may read blocks of its own node (a blocked factorization's panels):
            // those are walked too, once each.
            let mut mine = std::mem::replace(&mut demand[n.id], Demand::None);
            let mut todo: Vec<u64> = (0..count(n.id)).filter(|&lin| mine.has(lin)).collect();
            while let Some(lin) = todo.pop() {
                let Some(work) = self.work_for(n.id, lin) else {
                    continue;
                };
                for b in work.terms().flatten() {
                    if b.node != n.id {
                        demand[b.node].add(b.block, count(b.node));
                    } else if !mine.has(b.block) {
                        mine.add(b.block, count(n.id));
                        todo.push(b.block);
                    }
                }
            }
            demand[n.id] = mine;
        }
        demand
    }

    /// The work of every block, node after node, blocks in row-major order.
    pub fn iter(&self) -> impl Iterator<Item = Work> + '_ {
        self.g
            .nodes
            .iter()
            .filter(|n| self.needed(n.id))
            .flat_map(move |n| {
                let count: u64 = self.grids[n.id].iter().product();
                (0..count)
                    .filter(move |&lin| self.demand[n.id].has(lin))
                    .filter_map(move |lin| self.work_for(n.id, lin))
            })
    }

    /// Whether node `id` has work (the stored arrays need some of it).
    pub fn needed(&self, id: NodeId) -> bool {
        self.demand[id] != Demand::None
    }

    /// The bytes of node `id`'s blocks that are made (or read, for an input) and that
    /// `held` says this process holds (by the block's index).
    pub fn bytes_held(&self, id: NodeId, held: impl Fn(&[u64]) -> bool) -> u64 {
        let m = &self.g.nodes[id].meta;
        (0..m.num_blocks())
            .filter(|&lin| self.demand[id].has(lin) && held(&unravel(lin, &self.grids[id])))
            .map(|lin| block_nbytes(m, lin))
            .sum()
    }

    /// The bytes of node `id`'s blocks that are made (or read, for an input).
    pub fn bytes(&self, id: NodeId) -> u64 {
        let m = &self.g.nodes[id].meta;
        match &self.demand[id] {
            Demand::None => 0,
            Demand::All => m.nbytes(),
            d => (0..m.num_blocks())
                .filter(|&lin| d.has(lin))
                .map(|lin| block_nbytes(m, lin))
                .sum(),
        }
    }

    fn id(&self, x: NodeId, idx: &[u64]) -> BlockId {
        // A block an assignment leaves as it was, or a slice or re-blocking takes whole, is
        // read where it is (unless stored).
        let n = &self.g.nodes[x];
        if !n.persist {
            if let Some(src) = indexing::untouched(n, idx) {
                return self.id(src, idx);
            }
            if let Some((src, j)) = shapes::same_block(self.g, n, idx) {
                return self.id(src, &j);
            }
        }
        BlockId::new(x, ravel(idx, &self.grids[x]))
    }

    fn work_for(&self, id: NodeId, lin: u64) -> Option<Work> {
        let n = &self.g.nodes[id];
        let o = Out {
            w: self,
            g: self.g,
            id,
            n,
            idx: &unravel(lin, &self.grids[id]),
            output: BlockId::new(id, lin),
        };
        match &n.op {
            NodeOp::Fit { .. } | NodeOp::InPlace { .. } => None,
            NodeOp::ImportZarr { .. }
            | NodeOp::ImportNpy { .. }
            | NodeOp::ImportCsv { .. }
            | NodeOp::ImportParquet { .. }
            | NodeOp::ExportNpy { .. }
            | NodeOp::ExportNpyFile { .. }
            | NodeOp::ExportZarr { .. } => io::work(&o),
            NodeOp::Random { .. }
            | NodeOp::Fill { .. }
            | NodeOp::Ints { .. }
            | NodeOp::Iota { .. }
            | NodeOp::Eye { .. }
            | NodeOp::Param { .. } => creation::work(&o),
            NodeOp::Unary { .. }
            | NodeOp::CheckBelow { .. }
            | NodeOp::Scalar { .. }
            | NodeOp::Binary { .. }
            | NodeOp::Where { .. } => elementwise::work(&o),
            NodeOp::Einsum { .. } => contractions::work(&o),
            NodeOp::GlmSums { .. } => models::work(&o),
            NodeOp::Reduce { .. } => reductions::work(&o),
            NodeOp::Scan { .. } | NodeOp::ScanTotal { .. } => cumulative::work(&o),
            NodeOp::Fft { .. } => fft::work(&o),
            NodeOp::Sort { .. }
            | NodeOp::SortCount { .. }
            | NodeOp::SortMerge { .. }
            | NodeOp::SearchSorted { .. }
            | NodeOp::Compress { .. }
            | NodeOp::IndexHits { .. }
            | NodeOp::Gather { .. }
            | NodeOp::Quantile { .. }
            | NodeOp::Histogram { .. }
            | NodeOp::Bincount { .. }
            | NodeOp::DistinctCounts { .. } => sorting::work(&o),
            NodeOp::Transpose { .. }
            | NodeOp::Rechunk { .. }
            | NodeOp::Concat { .. }
            | NodeOp::Slice { .. }
            | NodeOp::Take { .. }
            | NodeOp::Reshape { .. } => shapes::work(&o),
            NodeOp::Put { .. } => indexing::work(&o),
            NodeOp::Tsqr { .. }
            | NodeOp::CholeskyBlocked { .. }
            | NodeOp::Lu { .. }
            | NodeOp::Dense { .. } => linalg::work(&o),
        }
    }

    /// The Assemble task of output block `idx`: the blocks of `sources` (each placed at its
    /// origin in one frame) that hold elements `first + p * step` (step empty: 1). Per axis
    /// only the source blocks between the first and last element are looked at.
    fn gather(
        &self,
        id: NodeId,
        idx: &[u64],
        sources: &[(NodeId, Vec<i64>)],
        first: &[i64],
        step: &[i64],
    ) -> Option<Work> {
        let shape = self.g.nodes[id].meta.block_shape(idx);
        let mut inputs = Vec::new();
        let mut offsets = Vec::new();
        for (x, at) in sources {
            let mx = &self.g.nodes[*x].meta;
            // Per axis, the source blocks that hold an element of the output block.
            let per_axis: Vec<Vec<u64>> = (0..mx.ndim())
                .map(|d| {
                    let s = step.get(d).copied().unwrap_or(1);
                    let (bl, n) = (mx.block[d] as i64, shape[d] as i64);
                    // Source coordinates of the first and last element, in block numbers.
                    let ends = [first[d] - at[d], first[d] - at[d] + (n - 1) * s];
                    let (lo, hi) = (ends[0].min(ends[1]), ends[0].max(ends[1]));
                    let (lo, hi) = (lo.max(0), hi.min(mx.shape[d] as i64 - 1));
                    if n <= 0 || lo > hi {
                        return vec![];
                    }
                    ((lo / bl) as u64..=(hi / bl) as u64)
                        .filter(|&k| {
                            let o = at[d] + (k * mx.block[d]) as i64 - first[d];
                            let len =
                                (mx.shape[d].min((k + 1) * mx.block[d]) - k * mx.block[d]) as i64;
                            strided_overlap(o, len, s, n).is_some()
                        })
                        .collect()
                })
                .collect();
            let counts: Vec<u64> = per_axis.iter().map(|v| v.len() as u64).collect();
            for lin in 0..counts.iter().product::<u64>() {
                let pick = unravel(lin, &counts);
                let bi: Vec<u64> = pick
                    .iter()
                    .enumerate()
                    .map(|(d, &i)| per_axis[d][i as usize])
                    .collect();
                offsets.push(
                    (0..mx.ndim())
                        .map(|d| at[d] + (bi[d] * mx.block[d]) as i64 - first[d])
                        .collect(),
                );
                inputs.push(self.id(*x, &bi));
            }
        }
        Some(Work::One(BlockTask {
            kernel: Kernel::Assemble {
                offsets,
                step: step.to_vec(),
            },
            inputs,
            output: BlockId::new(id, ravel(idx, &self.grids[id])),
        }))
    }
}
