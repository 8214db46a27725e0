//! From the array graph to block work: for every output block either one task, or a
//! reduction (a sum of terms: matmul pairs or blocks summed over axes) that a scheduler
//! splits into partial sums and a combining task. Schedulers live in `sched`.
//!
//! The work is made lazily, block by block ([`BlockWork::iter`]), in time proportional to
//! the inputs each block reads: no step scans a whole grid per block.

use std::collections::HashMap;

use nums_layout::batch::Kernel;
use nums_layout::meta::{ravel, strided_overlap, unravel};
use nums_layout::{ArrayMeta, Scalar};

use nums_layout::batch::QrOutput;

use crate::graph::{Graph, LuStep, NodeId, NodeOp, TsqrQ};

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

/// The block work of a graph, made on demand in topological order ([`BlockWork::iter`]).
pub struct BlockWork<'g> {
    pub g: &'g Graph,
    /// Which nodes have work: those the stored arrays need.
    needed: Vec<bool>,
    /// Each node's block grid.
    grids: Vec<Vec<u64>>,
}

/// The work of every block of the graph, in topological order (imports have none: the
/// driver writes their blocks).
pub(crate) fn block_work(g: &Graph) -> BlockWork<'_> {
    // Only what the stored arrays need is computed: a named array no output uses, or a
    // transpose that a contraction reads through, makes no tasks.
    let mut needed = vec![false; g.nodes.len()];
    for n in g.nodes.iter().rev() {
        if n.persist || needed[n.id] {
            needed[n.id] = true;
            for i in n.op.inputs() {
                needed[i] = true;
            }
        }
    }
    BlockWork {
        g,
        needed,
        grids: g.nodes.iter().map(|n| n.meta.grid()).collect(),
    }
}

impl<'g> BlockWork<'g> {
    /// The work of every block, node after node, blocks in row-major order.
    pub fn iter(&self) -> impl Iterator<Item = Work> + '_ {
        self.g
            .nodes
            .iter()
            .filter(|n| self.needed[n.id])
            .flat_map(move |n| {
                let count: u64 = self.grids[n.id].iter().product();
                (0..count).filter_map(move |lin| self.work_for(n.id, lin))
            })
    }

    /// Whether node `id` has work (the stored arrays need it).
    pub fn needed(&self, id: NodeId) -> bool {
        self.needed[id]
    }

    fn id(&self, x: NodeId, idx: &[u64]) -> BlockId {
        BlockId::new(x, ravel(idx, &self.grids[x]))
    }

    fn work_for(&self, id: NodeId, lin: u64) -> Option<Work> {
        let g = self.g;
        let n = &g.nodes[id];
        let idx = &unravel(lin, &self.grids[id])[..];
        let meta = |x: NodeId| &g.nodes[x].meta;
        let b = |x: NodeId, i: &[u64]| self.id(x, i);
        let output = BlockId::new(id, lin);
        let one = |kernel: Kernel, inputs: Vec<BlockId>| {
            Some(Work::One(BlockTask {
                kernel,
                inputs,
                output,
            }))
        };
        // A broadcast operand's block along an axis it does not span is its block 0.
        let bcast = |x: NodeId| {
            let m = meta(x);
            let off = idx.len() - m.ndim();
            let i: Vec<u64> = (0..m.ndim())
                .map(|d| if m.shape[d] == 1 { 0 } else { idx[d + off] })
                .collect();
            b(x, &i)
        };
        match &n.op {
            NodeOp::Fit { .. } | NodeOp::InPlace { .. } => None,
            NodeOp::ImportZarr { store, path, src } => {
                // The source chunks the block overlaps, decoded, for the projection.
                let (origin, shape) = (n.meta.block_origin(idx), n.meta.block_shape(idx));
                let chunks: u64 = (0..origin.len())
                    .map(|d| {
                        let c = src.block[d].max(1);
                        (origin[d] + shape[d] as u64 - 1) / c - origin[d] / c + 1
                    })
                    .product();
                let chunk: u64 = src.block.iter().product::<u64>() * src.dtype.size() as u64;
                one(
                    Kernel::ImportZarr {
                        source: store.clone(),
                        path: path.clone(),
                        scratch: chunks * chunk,
                    },
                    vec![],
                )
            }
            NodeOp::ImportNpy {
                source,
                key,
                header,
            } => one(
                Kernel::ImportNpy {
                    source: source.clone(),
                    key: key.clone(),
                    offset: header.offset,
                    shape: header.shape.clone(),
                    descr: header.descr.clone(),
                    fortran: header.fortran,
                },
                vec![],
            ),
            NodeOp::ImportCsv {
                source,
                key,
                index,
                delimiter,
                usecols,
            } => {
                // The block's rows, found from the index; a block splitting the columns
                // parses only its own.
                let cols = match n.meta.ndim() {
                    2 => {
                        let c0 = n.meta.block_origin(idx)[1] as usize;
                        usecols[c0..c0 + n.meta.block_shape(idx)[1]].to_vec()
                    }
                    _ => usecols.clone(),
                };
                let r0 = n.meta.block_origin(idx)[0];
                let r1 = r0 + n.meta.block_shape(idx)[0] as u64;
                let (start, end, line, skip) = index.span(r0, r1);
                one(
                    Kernel::ImportCsv {
                        source: source.clone(),
                        key: key.clone(),
                        start,
                        end,
                        line,
                        skip,
                        columns: index.columns,
                        usecols: cols,
                        delimiter: *delimiter,
                    },
                    vec![],
                )
            }
            NodeOp::ImportParquet {
                source,
                key,
                metadata,
                row_groups,
            } => {
                // The column chunks of the row groups the block's rows fall in.
                let (origin, shape) = (n.meta.block_origin(idx), n.meta.block_shape(idx));
                let (r0, r1) = (origin[0], origin[0] + shape[0] as u64);
                let (c0, c1) = match n.meta.ndim() {
                    2 => (origin[1] as usize, origin[1] as usize + shape[1]),
                    _ => (0, 1),
                };
                let mut first = 0;
                let mut fetch = 0;
                for (rows, sizes) in row_groups.iter() {
                    if first < r1 && first + rows > r0 {
                        fetch += sizes[c0..c1].iter().sum::<u64>();
                    }
                    first += rows;
                }
                one(
                    Kernel::ImportParquet {
                        source: source.clone(),
                        key: key.clone(),
                        metadata: *metadata,
                        fetch,
                    },
                    vec![],
                )
            }
            NodeOp::Random { dist, seed } => one(
                Kernel::Random {
                    dist: *dist,
                    seed: *seed,
                },
                vec![],
            ),
            NodeOp::Fill { value } => one(Kernel::Fill { value: *value }, vec![]),
            NodeOp::Iota {
                axis,
                start,
                step,
                last,
            } => one(
                Kernel::Iota {
                    axis: *axis,
                    start: *start,
                    step: *step,
                    last: *last,
                },
                vec![],
            ),
            NodeOp::Eye { k } => one(Kernel::Eye { k: *k }, vec![]),
            NodeOp::Param { name } => one(Kernel::Param { name: name.clone() }, vec![]),
            NodeOp::Unary { op, x } => one(Kernel::Unary { op: *op }, vec![b(*x, idx)]),
            NodeOp::CheckBelow { x, limit, error } => one(
                Kernel::CheckBelow {
                    limit: *limit,
                    error: error.clone(),
                },
                vec![b(*x, idx)],
            ),
            NodeOp::Scalar {
                op,
                x,
                value,
                scalar_left,
            } => one(
                Kernel::Scalar {
                    op: *op,
                    value: *value,
                    scalar_left: *scalar_left,
                },
                vec![b(*x, idx)],
            ),
            NodeOp::Binary { op, a, b: y } => {
                one(Kernel::Binary { op: *op }, vec![bcast(*a), bcast(*y)])
            }
            NodeOp::Where { c, a, b: y } => {
                one(Kernel::Where, vec![bcast(*c), bcast(*a), bcast(*y)])
            }
            NodeOp::Transpose { x, perm } => {
                let mut src = vec![0; perm.len()];
                for (i, &p) in perm.iter().enumerate() {
                    src[p] = idx[i];
                }
                one(Kernel::Transpose { perm: perm.clone() }, vec![b(*x, &src)])
            }
            NodeOp::Einsum { subscripts, xs } => {
                let (lhs, out) = subscripts.split_once("->").expect("explicit einsum");
                let ins: Vec<Vec<char>> = lhs.split(',').map(|t| t.chars().collect()).collect();
                let out: Vec<char> = out.chars().collect();
                // Block index of every letter: the output's from `idx`, the contracted ones
                // over their grids (all combinations, in C order).
                let mut grid: Vec<(char, u64)> = Vec::new();
                for (l, &x) in ins.iter().zip(xs) {
                    for (d, &c) in l.iter().enumerate() {
                        if !out.contains(&c) && !grid.iter().any(|(g, _)| *g == c) {
                            grid.push((c, self.grids[x][d]));
                        }
                    }
                }
                // Where each operand axis takes its index: output axis or contracted letter.
                let from: Vec<Vec<Result<usize, usize>>> = ins
                    .iter()
                    .map(|l| {
                        l.iter()
                            .map(|&c| match out.iter().position(|&o| o == c) {
                                Some(p) => Ok(p),
                                None => {
                                    Err(grid.iter().position(|(g, _)| *g == c).expect("letter"))
                                }
                            })
                            .collect()
                    })
                    .collect();
                let sizes: Vec<u64> = grid.iter().map(|(_, s)| *s).collect();
                let count: u64 = sizes.iter().product();
                if count == 0 {
                    // A contracted letter of length 0: a sum of nothing (NumPy's zeros).
                    return one(
                        Kernel::Fill {
                            value: Scalar::Int(0),
                        },
                        vec![],
                    );
                }
                let mut terms = Vec::with_capacity((count as usize).saturating_mul(xs.len()));
                let mut at = Vec::new();
                for t in 0..count {
                    let ci = unravel(t, &sizes);
                    for (f, &x) in from.iter().zip(xs) {
                        at.clear();
                        at.extend(f.iter().map(|w| match *w {
                            Ok(p) => idx[p],
                            Err(c) => ci[c],
                        }));
                        terms.push(b(x, &at));
                    }
                }
                Some(Work::Reduce {
                    kernel: Kernel::Einsum {
                        subscripts: subscripts.clone(),
                        operands: xs.len(),
                    },
                    arity: xs.len(),
                    terms,
                    output,
                })
            }
            NodeOp::Reduce { x, op, axes } => {
                // The input blocks whose kept indices are `idx`, in row-major order: every
                // combination of the reduced axes' indices.
                let gx = &self.grids[*x];
                let kept: Vec<usize> = (0..gx.len()).filter(|d| !axes.contains(d)).collect();
                let reduced: Vec<usize> = (0..gx.len()).filter(|d| axes.contains(d)).collect();
                let sizes: Vec<u64> = reduced.iter().map(|&d| gx[d]).collect();
                let mut bi = vec![0; gx.len()];
                for (&d, &i) in kept.iter().zip(idx) {
                    bi[d] = i;
                }
                let count: u64 = sizes.iter().product();
                if count == 0 {
                    // Reduced axes of length 0: the op's identity, as NumPy's (the ops
                    // with none, min and max, are refused when the graph is built).
                    return one(
                        Kernel::Fill {
                            value: op.empty_value(),
                        },
                        vec![],
                    );
                }
                let terms = (0..count)
                    .map(|t| {
                        for (&d, r) in reduced.iter().zip(unravel(t, &sizes)) {
                            bi[d] = r;
                        }
                        b(*x, &bi)
                    })
                    .collect();
                Some(Work::Reduce {
                    kernel: Kernel::Reduce {
                        op: *op,
                        axes: axes.clone(),
                    },
                    arity: 1,
                    terms,
                    output,
                })
            }
            NodeOp::Rechunk { x } => self.gather(
                id,
                idx,
                &[(*x, vec![0; n.meta.ndim()])],
                &n.meta
                    .block_origin(idx)
                    .iter()
                    .map(|&o| o as i64)
                    .collect::<Vec<_>>(),
                &[],
            ),
            NodeOp::Concat { xs, axis } => {
                let mut at = 0i64;
                let sources: Vec<(NodeId, Vec<i64>)> = xs
                    .iter()
                    .map(|&x| {
                        let mut o = vec![0; n.meta.ndim()];
                        o[*axis] = at;
                        at += meta(x).shape[*axis] as i64;
                        (x, o)
                    })
                    .collect();
                let first: Vec<i64> = n.meta.block_origin(idx).iter().map(|&o| o as i64).collect();
                self.gather(id, idx, &sources, &first, &[])
            }
            NodeOp::Slice { x, start, step } => {
                let first: Vec<i64> = n
                    .meta
                    .block_origin(idx)
                    .iter()
                    .zip(start.iter().zip(step))
                    .map(|(&o, (&s, &st))| s + o as i64 * st)
                    .collect();
                self.gather(id, idx, &[(*x, vec![0; n.meta.ndim()])], &first, step)
            }
            NodeOp::Take { x, axis, indices } => {
                let mx = meta(*x);
                let o = n.meta.block_origin(idx)[*axis] as usize;
                let l = n.meta.block_shape(idx)[*axis];
                let xb = mx.block[*axis];
                let mut inputs: Vec<BlockId> = Vec::new();
                // Input number of each source block along `axis`, in order of first use.
                let mut seen: HashMap<u64, u32> = HashMap::new();
                let mut picks = Vec::with_capacity(l);
                let mut bi = idx.to_vec();
                for &i in &indices[o..o + l] {
                    let k = *seen.entry(i / xb).or_insert_with(|| {
                        bi[*axis] = i / xb;
                        inputs.push(b(*x, &bi));
                        (inputs.len() - 1) as u32
                    });
                    picks.push((k, i % xb));
                }
                one(Kernel::Take { axis: *axis, picks }, inputs)
            }
            NodeOp::Tsqr { xs, group, q } => {
                // Group `g` of the operands' block rows, each row's blocks side by side.
                let j = idx[0];
                let (g, part) = match q {
                    None => (j, 0),
                    Some(_) => (j / group, j % group),
                };
                let rows = self.grids[xs[0]][0];
                let cols: u64 = xs.iter().map(|&x| self.grids[x][1]).sum();
                let mut inputs = Vec::new();
                for r in g * group..((g + 1) * group).min(rows) {
                    for &x in xs {
                        inputs.extend((0..self.grids[x][1]).map(|c| b(x, &[r, c])));
                    }
                }
                let output = match q {
                    None => QrOutput::R,
                    Some(TsqrQ { c: None }) => QrOutput::Q {
                        part: part as usize,
                    },
                    Some(TsqrQ { c: Some(c) }) => {
                        inputs.push(b(*c, &[g, 0]));
                        QrOutput::QProduct {
                            part: part as usize,
                        }
                    }
                };
                one(
                    Kernel::Qr {
                        cols: cols as usize,
                        output,
                    },
                    inputs,
                )
            }
            NodeOp::CholeskyBlocked { x } => {
                let (i, j) = (idx[0], idx[1]);
                if i < j {
                    return one(
                        Kernel::Fill {
                            value: nums_layout::Scalar::Float(0.0),
                        },
                        vec![],
                    );
                }
                let mut inputs = vec![b(*x, idx)];
                for k in 0..j {
                    if i != j {
                        inputs.push(b(id, &[i, k]));
                    }
                    inputs.push(b(id, &[j, k]));
                }
                if i != j {
                    inputs.push(b(id, &[j, j]));
                }
                one(Kernel::CholeskyBlock { diagonal: i == j }, inputs)
            }
            NodeOp::Lu { xs, step } => {
                // F_k: block (k, 0, k) of the panels.
                let lu = if *step == LuStep::Panels { id } else { xs[0] };
                let w = meta(lu).block[2] as usize;
                let p = self.grids[lu][0];
                let f = |k: u64| b(lu, &[k, 0, k]);
                // Panel i of a right-hand side as given (1-D: its one block).
                let rhs = |i: u64| {
                    let y = xs[1];
                    b(
                        y,
                        &if meta(y).ndim() == 1 {
                            vec![0]
                        } else {
                            vec![0, i]
                        },
                    )
                };
                let panel = |apply, factor, scale| Kernel::LuPanel {
                    w,
                    apply,
                    factor,
                    scale,
                };
                // A's row magnitudes (its rows' equilibration): the last operand of the
                // panels, the forward steps and the determinant's shares.
                let magnitudes = || b(*xs.last().expect("operands"), &[0]);
                match *step {
                    LuStep::Panels => {
                        let (k, j) = (idx[0], idx[2]);
                        if j < k || (k == 0 && j > 0) {
                            return None; // no task reads it
                        }
                        if k == 0 {
                            return one(
                                panel(None, true, true),
                                vec![b(xs[0], &[0, 0]), magnitudes()],
                            );
                        }
                        // A panel's first version reads A's panel, and scales its rows.
                        let mut inputs = vec![f(k - 1)];
                        if k == 1 {
                            inputs.extend([b(xs[0], &[0, j]), magnitudes()]);
                        } else {
                            inputs.push(b(id, &[k - 1, 0, j]));
                        }
                        one(panel(Some(k as usize - 1), j == k, k == 1), inputs)
                    }
                    LuStep::Forward => {
                        let (k, i) = (idx[0], idx[2]);
                        // Step 0 reads b as given, and scales its rows as A's.
                        let inputs = if k == 0 {
                            vec![f(k), rhs(i), magnitudes()]
                        } else {
                            vec![f(k), b(id, &[k - 1, 0, i])]
                        };
                        one(panel(Some(k as usize), false, k == 0), inputs)
                    }
                    LuStep::Backward => {
                        let (i, j) = (idx[0], idx[2]);
                        let k = p - 1 - i;
                        let src = if i == 0 {
                            b(xs[1], &[p - 1, 0, j])
                        } else {
                            b(id, &[i - 1, 0, j])
                        };
                        one(
                            Kernel::LuBack {
                                w,
                                step: k as usize,
                            },
                            vec![f(k), src],
                        )
                    }
                    LuStep::Solution => {
                        let j = idx.get(1).copied().unwrap_or(0);
                        let src = match xs.get(2) {
                            Some(&back) => b(back, &[p.saturating_sub(2), 0, j]),
                            None => b(xs[1], &[p - 1, 0, j]),
                        };
                        one(Kernel::LuBack { w, step: 0 }, vec![f(0), src])
                    }
                    LuStep::Det(output) => one(
                        Kernel::LuDet {
                            w,
                            step: idx[0] as usize,
                            output,
                        },
                        vec![f(idx[0]), magnitudes()],
                    ),
                }
            }
            NodeOp::ExportNpy {
                x,
                dest,
                key,
                upload,
                header,
            } => {
                let mut src = vec![0; meta(*x).ndim()];
                src[0] = idx[0];
                let input = b(*x, &src);
                one(
                    Kernel::ExportNpyPart {
                        dest: dest.clone(),
                        key: key.clone(),
                        upload: upload.clone(),
                        part: idx[0] as usize,
                        header: if idx[0] == 0 { header.clone() } else { vec![] },
                        bytes: input.nbytes(g),
                    },
                    vec![input],
                )
            }
            NodeOp::Dense { kernel, xs } => one(
                kernel.clone(),
                xs.iter().map(|&x| BlockId::new(x, 0)).collect(),
            ),
            NodeOp::Reshape { x } => {
                let (mx, mo) = (meta(*x), &n.meta);
                let non_unit = |m: &ArrayMeta| -> Vec<(u64, u64)> {
                    m.shape
                        .iter()
                        .zip(&m.block)
                        .filter(|(s, _)| **s != 1)
                        .map(|(s, b)| (*s, *b))
                        .collect()
                };
                if non_unit(mx) == non_unit(mo) {
                    // Length-1 axes come or go: the block with the same non-unit indices.
                    let mut ids = mo
                        .shape
                        .iter()
                        .zip(idx)
                        .filter(|(s, _)| **s != 1)
                        .map(|(_, i)| *i);
                    let src: Vec<u64> = mx
                        .shape
                        .iter()
                        .map(|&s| if s == 1 { 0 } else { ids.next().expect("same") })
                        .collect();
                    let len = mx.block_shape(&src).iter().product::<usize>() as u64;
                    return one(
                        Kernel::Reshape {
                            ranges: vec![(0, len)],
                        },
                        vec![b(*x, &src)],
                    );
                }
                // Both blocked along axis 0 only: blocks are runs of the flat C order.
                let row = |m: &ArrayMeta| m.shape.iter().skip(1).product::<u64>().max(1);
                let lo = mo.block_origin(idx).first().copied().unwrap_or(0) * row(mo);
                let hi = lo + mo.block_shape(idx).iter().product::<usize>() as u64;
                let per = mx.block.first().copied().unwrap_or(1) * row(mx);
                let mut inputs = Vec::new();
                let mut ranges = Vec::new();
                for k in lo / per..hi.div_ceil(per) {
                    let (a, z) = (k * per, ((k + 1) * per).min(mx.len()));
                    let (s, e) = (lo.max(a), hi.min(z));
                    if s < e {
                        let mut bi = vec![0; mx.ndim()];
                        if let Some(b0) = bi.first_mut() {
                            *b0 = k;
                        }
                        inputs.push(b(*x, &bi));
                        ranges.push((s - a, e - a));
                    }
                }
                one(Kernel::Reshape { ranges }, inputs)
            }
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
