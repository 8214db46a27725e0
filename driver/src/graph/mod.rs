//! The array graph: every array of a job (named or an anonymous sub-expression) as a node
//! with its shape, block grid and dtype, checked before anything runs.

use std::collections::HashMap;
use std::sync::Arc;

use nums_layout::batch::{BinaryOp, Frame, RandomDist, ReduceOp, UnaryOp};
use nums_layout::meta::ScalarKind;
use nums_layout::{ArrayMeta, Block, DType, Scalar, StoreSpec};

use crate::expr::{self, Expr, ExprError, ExprKind, Op, UnOp};
use crate::job::{ArrayDef, Job, JobError, Source};
use crate::refusal::{PyException, Refusal};

mod build;
mod columns;
mod funcs;
mod indexing;
pub use indexing::AxisSel;
pub(crate) use indexing::positions;
mod ops;
mod pyint;
mod region;
mod shape;
mod sources;

use build::*;
pub use build::{
    Incremental, Known, MAX_BLOCKS_PER_JOB, MAX_SELECTION, Released, Value, block_for, build,
    build_known, build_staged, reserved_name,
};
pub use funcs::all_names as function_names;
pub use funcs::factorizations_text;
pub use funcs::{Signature, signatures};
pub use sources::{Counted, Probe, Probes, probe, probe_with, relative_to, split_zarr_location};
pub(crate) use sources::{foreign_changed, import_options, is_file, reuse_import};
// The helpers every file of the folder uses (through `use super::*`).
use pyint::{floor_div, out_of_range};
pub use shape::MAX_BLOCKS_PER_ARRAY;
use shape::{check_elements, shape_str};

pub type NodeId = usize;

/// A shape as NumPy prints it: `(3,)`, `(2, 4)`.
pub(crate) fn shape_text(s: &[u64]) -> String {
    shape_str(s)
}

/// How a node's blocks come to be.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeOp {
    /// Element at flat index `i` is a pure function of (`seed`, `i`); within `frame`, the
    /// region of a larger random array (a slice made without the rest, `graph/region.rs`).
    Random {
        dist: RandomDist,
        seed: u64,
        frame: Option<Arc<Frame>>,
    },
    Fill {
        value: Scalar,
    },
    /// Known int64 values, one per block of 1 (a selection's counts before each mask
    /// block, the starts of x's blocks a gather reads): each block a `Fill`.
    Ints {
        values: Arc<Vec<i64>>,
    },
    /// `start + step * index along axis` (arange, linspace, index arrays); `last`, if
    /// given, is the last element (linspace's endpoint). See `Kernel::Iota`.
    Iota {
        axis: usize,
        start: Scalar,
        step: Scalar,
        last: Option<Scalar>,
    },
    /// 1 on the `k`-th diagonal.
    Eye {
        k: i64,
    },
    /// A `.npy` file (`key` in the store `source`) the functions import into the store,
    /// each task reading its block's elements.
    ImportNpy {
        source: StoreSpec,
        key: String,
        header: crate::npy::NpyHeader,
    },
    /// A CSV file of numbers the functions import into the store, each task parsing its
    /// rows (found with `index`): fields separated by `delimiter`, the file's columns
    /// `usecols` kept in that order.
    ImportCsv {
        source: StoreSpec,
        key: String,
        index: std::sync::Arc<nums_function::csv_index::CsvIndex>,
        delimiter: u8,
        usecols: Vec<u64>,
        /// The dtype each kept column parses as before it takes the array's (empty: the
        /// array's).
        dtypes: Vec<DType>,
    },
    /// A Parquet file's numeric columns the functions import into the store, each task
    /// reading the column chunks of its rows (`metadata`: the footer's byte range;
    /// `row_groups`: rows and column chunk bytes per row group, for the memory projection).
    ImportParquet {
        source: StoreSpec,
        key: String,
        metadata: (u64, u64),
        /// The file's columns the array keeps, in order.
        columns: Vec<u64>,
        row_groups: std::sync::Arc<Vec<(u64, Vec<u64>)>>,
    },
    /// A Zarr array read in place by the functions, never copied or written: in the job's
    /// store and encoded as nums-cloud encodes, or `foreign` (any Zarr v2 or v3 array in
    /// any store, whose chunks are its blocks; `path` is relative to that store).
    /// `sparse`: not written by nums-cloud, so chunks never written are the fill value
    /// (otherwise a missing chunk is an error).
    InPlace {
        path: String,
        sparse: bool,
        foreign: Option<std::sync::Arc<nums_layout::Foreign>>,
    },
    /// A Zarr v3 array (other codecs, chunks or store) the functions import, re-blocked,
    /// into the job's prefix: each task reads the source chunks its block overlaps (`src`:
    /// the source's shape, chunks and dtype).
    ImportZarr {
        store: StoreSpec,
        path: String,
        src: ArrayMeta,
    },
    Unary {
        op: UnaryOp,
        x: NodeId,
    },
    /// `x` (int64) as it is, or an error where an element is `limit` or more
    /// ([`Kernel::CheckBelow`](nums_layout::batch::Kernel::CheckBelow)).
    CheckBelow {
        x: NodeId,
        limit: i64,
        error: String,
    },
    Binary {
        op: BinaryOp,
        a: NodeId,
        b: NodeId,
    },
    Scalar {
        op: BinaryOp,
        x: NodeId,
        value: Scalar,
        scalar_left: bool,
    },
    Where {
        c: NodeId,
        a: NodeId,
        b: NodeId,
    },
    /// An Einstein sum (explicit output) of the operands; every letter has one block size.
    Einsum {
        subscripts: String,
        xs: Vec<NodeId>,
    },
    /// Output axis i is input axis `perm[i]`.
    Transpose {
        x: NodeId,
        perm: Vec<usize>,
    },
    Reduce {
        x: NodeId,
        op: ReduceOp,
        axes: Vec<usize>,
    },
    /// The same values in another block grid or dtype.
    Rechunk {
        x: NodeId,
    },
    /// The same elements in C order under another shape. Either only axes of length 1
    /// differ (blocks map one to one), or both arrays are blocked along axis 0 only.
    Reshape {
        x: NodeId,
    },
    /// Output element `p` is input element `start + p * step` along every axis.
    Slice {
        x: NodeId,
        start: Vec<i64>,
        step: Vec<i64>,
    },
    /// The operands one after another along `axis`.
    Concat {
        xs: Vec<NodeId>,
        axis: usize,
    },
    /// A parameter of a model's pass (`iterate`): one block whose values the driver sends
    /// inline at each iteration.
    Param {
        name: String,
    },
    /// A model fitted to `x` ([n, d]) and `y` ([n]) by the driver's iteration engine before
    /// the main stage (`iterate::fit`); its coefficients are then in the store like an
    /// import's blocks. `x` and `y` are not inputs of the main stage's work.
    Fit {
        x: NodeId,
        y: NodeId,
        spec: crate::models::FitSpec,
    },
    /// The slices `indices` of `x` along `axis` (an integer list, or a boolean mask once
    /// its values are known).
    Take {
        x: NodeId,
        axis: usize,
        indices: Vec<u64>,
    },
    /// One level of a TSQR tree (`funcs/linalg.rs`). The operands' block rows, side by
    /// side (all blocked alike along axis 0), are taken in groups of `group`; output block
    /// `j` of an R level is the R (n x n, diag >= 0) of group `j` stacked; of a Q level,
    /// the rows of Q belonging to block row `j % group` of group `j / group`, times block
    /// `j / group` of `c` when given (direct TSQR: Q_i times the Q rows above it).
    Tsqr {
        xs: Vec<NodeId>,
        group: u64,
        q: Option<TsqrQ>,
    },
    /// L of a symmetric positive-definite `x` (square blocks, one grid both ways) by
    /// left-looking blocked Cholesky: block (i, j) on or below the diagonal is one
    /// [`Kernel::CholeskyBlock`](nums_layout::batch::Kernel::CholeskyBlock) task reading
    /// x's block (i, j) and this node's blocks left of it in rows i and j; blocks above
    /// the diagonal are zeros. Row-major block order is a topological order of its tasks.
    CholeskyBlocked {
        x: NodeId,
    },
    /// A part of a blocked LU with partial pivoting (`funcs/linalg.rs`) on column panels
    /// of all n rows and `w` columns (the panels' block width); see [`LuStep`].
    Lu {
        xs: Vec<NodeId>,
        step: LuStep,
    },
    /// The parts of a `.npy` file on S3 (an output's export stage, built by the run): block
    /// i of this [parts, ETAG_BYTES] node uploads `x`'s block row i (whole rows) as part i
    /// of multipart upload `upload` of `key` in `dest` (part 0 led by `header`), and holds
    /// the part's ETag.
    ExportNpy {
        x: NodeId,
        dest: StoreSpec,
        key: String,
        upload: String,
        header: Vec<u8>,
    },
    /// A local `.npy` output written by the functions (an output of the main stage, on the
    /// local backend): block i of this node (one int64 per block of `x`, in blocks of one)
    /// writes `x`'s block i into its place in the partial file `path`, whose values start at
    /// byte `offset`, and holds the bytes written.
    ExportNpyFile {
        x: NodeId,
        path: String,
        offset: u64,
    },
    /// Chunks of another tool's Zarr array written by the functions (a region write:
    /// xarray's `to_zarr` through `store`): block i of this node (one int64 per block of
    /// `x`, in blocks of one) encodes `x`'s block i as chunk `offset + i` of the array
    /// `path` in `dest` (x's blocks are the array's chunks) and holds the bytes put.
    ExportZarr {
        x: NodeId,
        dest: nums_layout::Foreign,
        path: String,
        offset: Vec<u64>,
    },
    /// The running sum or product (`op`) of `x` along `axis`, in this node's dtype
    /// (`exclusive`: each element leaves itself out); with `offsets` (this node's shape
    /// but one element per block along `axis`, one block along it), each block starts from
    /// its lane's offset: a scan across blocks ([`NodeOp::ScanTotal`] first).
    Scan {
        x: NodeId,
        op: ReduceOp,
        axis: usize,
        exclusive: bool,
        offsets: Option<NodeId>,
    },
    /// The total (`op`) of each block of `x` along `axis`: x's shape with one element per
    /// block along `axis`, in blocks of 1 along it (x's blocks along the others). With
    /// `chained`, block k is instead what the blocks before it add up to, folded in
    /// order (block k - 1 folded onto block k - 1 of this node; block 0 the identity): a
    /// float scan's exact starting values, as NumPy's one pass makes them (a sum or
    /// product of block totals rounds, overflows and underflows differently).
    ScanTotal {
        x: NodeId,
        op: ReduceOp,
        axis: usize,
        chained: bool,
    },
    /// The transform `kind` of `x`'s lanes along `axis` (one block along it, in `x` and
    /// here), times `scale`, then the four-step `twiddle` if given: block i of this node is
    /// [`Kernel::Fft`](nums_layout::batch::Kernel::Fft) of x's block i (`funcs/fft.rs`).
    Fft {
        x: NodeId,
        axis: usize,
        kind: nums_layout::batch::FftKind,
        scale: f64,
        twiddle: Option<nums_layout::batch::Twiddle>,
    },
    /// `x` sorted along `axis` block by block (each block holds whole lanes, or is one run
    /// of a sample sort), stably; with `arg` the int64 positions that sort it.
    Sort {
        x: NodeId,
        axis: usize,
        descending: bool,
        arg: bool,
    },
    /// A sample sort's partition sizes: row i ([1, splitters] int64) counts the elements
    /// of block i of the 1-D `x` that come before each splitter (value, position).
    SortCount {
        x: NodeId,
        splitters: Arc<Vec<(Scalar, u64)>>,
        descending: bool,
    },
    /// A sample sort's sorted array from its partitions: `runs` are 1-D sorted pieces
    /// (partition by partition, in key order), `positions` (argsort) their positions
    /// alike; partition k starts at `buckets[k].0` in the sorted array and holds runs
    /// `buckets[k].1`. Each block merges the partitions it overlaps.
    SortMerge {
        runs: Vec<NodeId>,
        positions: Vec<NodeId>,
        buckets: Arc<Vec<(u64, std::ops::Range<usize>)>>,
        descending: bool,
        arg: bool,
    },
    /// NumPy's `searchsorted` of `v` (any shape) in the sorted 1-D `a`: per block of `a`
    /// the elements before each value, summed.
    SearchSorted {
        a: NodeId,
        v: NodeId,
        right: bool,
    },
    /// The slices of `x` along `axis` where the 1-D bool `mask` (blocked as x along it)
    /// is true, in order: mask block i selects `before[i]..before[i] + counts[i]` of the
    /// output, `before` the [`NodeOp::Ints`] of those starts (`offsets` the same values,
    /// with the total last, as the planner reads them). Any length: the driver holds the
    /// counts per block, never the positions.
    Compress {
        x: NodeId,
        mask: NodeId,
        axis: usize,
        before: NodeId,
        offsets: Arc<Vec<u64>>,
    },
    /// How many of the indices in each block of the 1-D int `idx` fall in each block of
    /// an axis of `len` in blocks of `block`, with each index block's smallest and largest
    /// index: [idx blocks, x blocks + 2], a row per block of `idx` (see
    /// `Kernel::IndexHits`).
    IndexHits {
        idx: NodeId,
        len: u64,
        block: u64,
    },
    /// `x.take(idx, axis)` for the 1-D int `idx` of any length (the output blocked as idx
    /// along `axis`): output block j reads idx's block j and the blocks of x it hits
    /// (`hits[j]`, from [`NodeOp::IndexHits`]), each with its start (`starts`, an
    /// [`NodeOp::Ints`]).
    Gather {
        x: NodeId,
        idx: NodeId,
        axis: usize,
        starts: NodeId,
        hits: Arc<Vec<Vec<u32>>>,
    },
    /// Quantiles `qs` by `method` of each lane along `axis` of the sorted `x` (one block
    /// along `axis`), NaNs left out with `nan`: x's shape with `qs.len()` along `axis`.
    /// With `select`, x's lanes are not sorted: the order statistics are selected.
    Quantile {
        x: NodeId,
        axis: usize,
        qs: Vec<f64>,
        method: nums_layout::batch::QuantileMethod,
        nan: bool,
        select: bool,
    },
    /// NumPy's histogram counts (or weights' sums) of `x` in `bins` equal bins between the
    /// 0-d `lo` and `hi`: a sum over x's blocks.
    Histogram {
        x: NodeId,
        lo: NodeId,
        hi: NodeId,
        weights: Option<NodeId>,
        bins: u64,
    },
    /// The distinct values of `x` (flattened; not complex) and their counts, as an int64
    /// [cap + 1, 3] table in one block (see
    /// [`Kernel::DistinctCounts`](nums_layout::batch::Kernel::DistinctCounts)): a sum over
    /// x's blocks. `unique` reads it back and falls back to a sort past `cap` values.
    DistinctCounts {
        x: NodeId,
        cap: u64,
    },
    /// NumPy's bincount of the 1-D `x` (weighted by `weights`) into this node's length:
    /// a sum over x's blocks.
    Bincount {
        x: NodeId,
        weights: Option<NodeId>,
    },
    /// `x` with the elements `sel` picks (per axis, orthogonally) set from `v` (x's dtype;
    /// per axis the selection's length, or 1 to broadcast): `x.at[index].set(v)`. A block
    /// the selection does not touch is x's own: read in place where the node is an
    /// intermediate (`tasks::BlockWork`), copied where it is stored.
    Put {
        x: NodeId,
        v: NodeId,
        sel: Arc<Vec<AxisSel>>,
    },
    /// A fit's pass in one sweep: the sums of the model's `loss` over the rows of `x`
    /// ([n, d]) and `y` ([n], or [n, 2] with the sample weights; in x's row blocks) at the candidates `w` ([d, k], one block)
    /// and `b` ([k]): [1 + d + b, k] in one block, a sum over x's row blocks; with
    /// `hessian` (k = 1), [1 + p, 1 + p] with the Hessian sums
    /// ([`Kernel::GlmSums`](nums_layout::batch::Kernel::GlmSums)).
    GlmSums {
        loss: nums_layout::batch::GlmLoss,
        x: NodeId,
        y: NodeId,
        w: NodeId,
        b: Option<NodeId>,
        hessian: bool,
    },
    /// One task: `kernel` on the operands, each one block, making this node's one block
    /// (a factorization of a matrix that fits one invocation, or of a TSQR's R).
    Dense {
        kernel: nums_layout::batch::Kernel,
        xs: Vec<NodeId>,
    },
}

/// Which part of a blocked LU a [`NodeOp::Lu`] node is. Axis 0 of the panels and of the
/// right-hand side's versions counts steps, so that row-major block order is an order
/// its tasks can run in; blocks no task needs have no work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LuStep {
    /// `xs = [a, m]` (a in column panels, [r, w] blocks: a panel is its column of row
    /// blocks, one block when r = n; m its rows' largest magnitudes,
    /// [n] in one block, by which the steps equilibrate a's rows): [p, n + 2, n] in
    /// [1, n + 2, w] blocks; block (k, 0, j), j >= k, is panel j after steps 0..k,
    /// factored when j == k (F_k, row n the pivots), row n + 1 its columns' 1-norms in
    /// D A.
    Panels,
    /// `xs = [lu, b, m]` (b in [n, wb] blocks, or 1-D; m as the panels'): [p, n, c] in
    /// [1, n, wb] blocks; block (k, 0, i) is b's panel i after steps 0..=k (the last:
    /// L^-1 P D b). `xs = [lu, b]`: b's rows are not scaled (the last: L^-1 P b; the
    /// condition estimate's probe).
    Forward,
    /// `xs = [lu, forward]`: [p - 1, n, c]; block (i, 0, j) is after the back-substitution
    /// steps p - 1 down to p - 1 - i.
    Backward,
    /// `xs = [lu, forward]` (the forward versions of the condition estimate's probe, made
    /// without m): as `Backward`, each step's solved rows then scaled by their columns'
    /// 1-norms in D A ([`Kernel::LuBack`](nums_layout::batch::Kernel::LuBack)'s
    /// `estimate`).
    Probe,
    /// `xs = [lu, forward, backward, probe forward, probe backward, probe]` (no backward
    /// versions when p = 1): the solution, [n, c] in [n, wb] blocks (or [n]), the back
    /// substitution's step 0, after A's condition estimate (from the probe's step 0)
    /// refused a singular A.
    Solution,
    /// `xs = [lu, m]`: [p] in [1] blocks, each panel's share of the sign (a product) or
    /// of `logabsdet` (a sum); det is sign * exp(logabsdet), as NumPy makes it.
    Det(nums_layout::batch::DetOutput),
}

/// A Q level of a TSQR tree: the Q rows of each group's stacked blocks, times the
/// matching block of `c` (the Q rows from the level above, or at the root a matrix the
/// product goes on to, such as U of R's SVD) when given.
#[derive(Debug, Clone, PartialEq)]
pub struct TsqrQ {
    pub c: Option<NodeId>,
}

impl NodeOp {
    pub fn inputs(&self) -> Vec<NodeId> {
        match self {
            NodeOp::Random { .. }
            | NodeOp::Fill { .. }
            | NodeOp::Ints { .. }
            | NodeOp::Iota { .. }
            | NodeOp::Eye { .. }
            | NodeOp::Param { .. }
            | NodeOp::Fit { .. }
            | NodeOp::ImportNpy { .. }
            | NodeOp::ImportCsv { .. }
            | NodeOp::ImportParquet { .. }
            | NodeOp::ImportZarr { .. }
            | NodeOp::InPlace { .. } => vec![],
            NodeOp::Unary { x, .. }
            | NodeOp::CheckBelow { x, .. }
            | NodeOp::Scalar { x, .. }
            | NodeOp::Transpose { x, .. }
            | NodeOp::Reduce { x, .. }
            | NodeOp::Rechunk { x }
            | NodeOp::Reshape { x }
            | NodeOp::Slice { x, .. }
            | NodeOp::Take { x, .. }
            | NodeOp::ExportNpy { x, .. }
            | NodeOp::ExportNpyFile { x, .. }
            | NodeOp::ExportZarr { x, .. }
            | NodeOp::ScanTotal { x, .. }
            | NodeOp::Sort { x, .. }
            | NodeOp::SortCount { x, .. }
            | NodeOp::Quantile { x, .. }
            | NodeOp::Fft { x, .. }
            | NodeOp::DistinctCounts { x, .. }
            | NodeOp::CholeskyBlocked { x } => vec![*x],
            NodeOp::Histogram {
                x, lo, hi, weights, ..
            } => [*x, *lo, *hi].into_iter().chain(*weights).collect(),
            NodeOp::Bincount { x, weights } => std::iter::once(*x).chain(*weights).collect(),
            NodeOp::GlmSums { x, y, w, b, .. } => [*x, *y, *w].into_iter().chain(*b).collect(),
            NodeOp::SortMerge {
                runs, positions, ..
            } => runs.iter().chain(positions).copied().collect(),
            NodeOp::SearchSorted { a, v, .. } => vec![*a, *v],
            NodeOp::Put { x, v, .. } => vec![*x, *v],
            NodeOp::Compress {
                x, mask, before, ..
            } => vec![*x, *mask, *before],
            NodeOp::IndexHits { idx, .. } => vec![*idx],
            NodeOp::Gather { x, idx, starts, .. } => vec![*x, *idx, *starts],
            NodeOp::Scan { x, offsets, .. } => std::iter::once(*x).chain(*offsets).collect(),
            NodeOp::Binary { a, b, .. } => vec![*a, *b],
            NodeOp::Where { c, a, b } => vec![*c, *a, *b],
            NodeOp::Einsum { xs, .. }
            | NodeOp::Concat { xs, .. }
            | NodeOp::Dense { xs, .. }
            | NodeOp::Lu { xs, .. } => xs.clone(),
            NodeOp::Tsqr { xs, q, .. } => xs
                .iter()
                .copied()
                .chain(q.as_ref().and_then(|q| q.c))
                .collect(),
        }
    }

    /// What computing the node reads, in any stage: its inputs, and a fit's X and y (read
    /// by the fit's own stages, not by a task of the main stage).
    pub fn operands(&self) -> Vec<NodeId> {
        match self {
            NodeOp::Fit { x, y, .. } => vec![*x, *y],
            op => op.inputs(),
        }
    }

    /// Renames the inputs (for a sub-graph).
    fn map_inputs(&mut self, f: impl Fn(NodeId) -> NodeId) {
        match self {
            NodeOp::Unary { x, .. }
            | NodeOp::CheckBelow { x, .. }
            | NodeOp::Scalar { x, .. }
            | NodeOp::Transpose { x, .. }
            | NodeOp::Reduce { x, .. }
            | NodeOp::Rechunk { x }
            | NodeOp::Reshape { x }
            | NodeOp::Slice { x, .. }
            | NodeOp::Take { x, .. }
            | NodeOp::ExportNpy { x, .. }
            | NodeOp::ExportNpyFile { x, .. }
            | NodeOp::ExportZarr { x, .. }
            | NodeOp::ScanTotal { x, .. }
            | NodeOp::Sort { x, .. }
            | NodeOp::SortCount { x, .. }
            | NodeOp::Quantile { x, .. }
            | NodeOp::Fft { x, .. }
            | NodeOp::DistinctCounts { x, .. }
            | NodeOp::CholeskyBlocked { x } => *x = f(*x),
            NodeOp::Histogram {
                x, lo, hi, weights, ..
            } => {
                *x = f(*x);
                *lo = f(*lo);
                *hi = f(*hi);
                if let Some(w) = weights {
                    *w = f(*w);
                }
            }
            NodeOp::Bincount { x, weights } => {
                *x = f(*x);
                if let Some(w) = weights {
                    *w = f(*w);
                }
            }
            NodeOp::GlmSums { x, y, w, b, .. } => {
                *x = f(*x);
                *y = f(*y);
                *w = f(*w);
                if let Some(b) = b {
                    *b = f(*b);
                }
            }
            NodeOp::SortMerge {
                runs, positions, ..
            } => {
                for x in runs.iter_mut().chain(positions.iter_mut()) {
                    *x = f(*x);
                }
            }
            NodeOp::SearchSorted { a, v, .. } => {
                *a = f(*a);
                *v = f(*v);
            }
            NodeOp::Put { x, v, .. } => {
                *x = f(*x);
                *v = f(*v);
            }
            NodeOp::Compress {
                x, mask, before, ..
            } => {
                *x = f(*x);
                *mask = f(*mask);
                *before = f(*before);
            }
            NodeOp::IndexHits { idx, .. } => *idx = f(*idx),
            NodeOp::Gather { x, idx, starts, .. } => {
                *x = f(*x);
                *idx = f(*idx);
                *starts = f(*starts);
            }
            NodeOp::Scan { x, offsets, .. } => {
                *x = f(*x);
                if let Some(o) = offsets {
                    *o = f(*o);
                }
            }
            NodeOp::Binary { a, b, .. } => {
                *a = f(*a);
                *b = f(*b);
            }
            NodeOp::Where { c, a, b } => {
                *c = f(*c);
                *a = f(*a);
                *b = f(*b);
            }
            NodeOp::Einsum { xs, .. }
            | NodeOp::Concat { xs, .. }
            | NodeOp::Dense { xs, .. }
            | NodeOp::Lu { xs, .. } => {
                for x in xs {
                    *x = f(*x);
                }
            }
            NodeOp::Tsqr { xs, q, .. } => {
                for x in xs {
                    *x = f(*x);
                }
                if let Some(TsqrQ { c: Some(c) }) = q {
                    *c = f(*c);
                }
            }
            _ => {}
        }
    }

    /// Blocks that are in the store before any task runs (read in place, or a model's
    /// fitted parameters). Imports of every kind are tasks.
    pub fn in_store_before_run(&self) -> bool {
        matches!(self, NodeOp::InPlace { .. } | NodeOp::Fit { .. })
    }

    pub fn is_import(&self) -> bool {
        matches!(
            self,
            NodeOp::ImportNpy { .. }
                | NodeOp::ImportCsv { .. }
                | NodeOp::ImportParquet { .. }
                | NodeOp::ImportZarr { .. }
        )
    }
}

#[derive(Debug, Clone)]
pub struct Node {
    pub id: NodeId,
    pub meta: ArrayMeta,
    pub op: NodeOp,
    /// The job-file name of this node, if any.
    pub name: Option<String>,
    /// Kept in the store under `<job>/<name>` after the job: the job's outputs and imported
    /// inputs. Every other array is an intermediate, written only where another invocation
    /// needs it and removed when the job ends.
    pub persist: bool,
    /// The job-file array whose definition made this node (errors name it, never an
    /// internal node number).
    pub def: Option<String>,
}

impl Node {
    pub fn persisted_name(&self) -> Option<&str> {
        self.name.as_deref().filter(|_| self.persist)
    }
}

/// All arrays of a job, in an order where inputs come first.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub named: HashMap<String, NodeId>,
}

impl Graph {
    /// What a build asking for `target`'s values reads again once it has them: the mask
    /// whose per-block counts `target` is (a selection's), and the sorted arrays `target`
    /// is made from (not those only they are made from).
    pub fn reread_under(&self, target: NodeId) -> Vec<NodeId> {
        let mut need = vec![false; target + 1];
        need[target] = true;
        let mut reread = Vec::new();
        if let NodeOp::ScanTotal { x, .. } = self.nodes[target].op {
            reread.push(x);
            need[x] = false;
            need[target] = false;
            for i in self.nodes[x].op.inputs() {
                need[i] = true;
            }
        }
        for id in (0..=target).rev() {
            if !need[id] {
                continue;
            }
            let op = &self.nodes[id].op;
            if id != target && matches!(op, NodeOp::Sort { .. } | NodeOp::SortMerge { .. }) {
                reread.push(id);
                continue;
            }
            for i in op.inputs() {
                need[i] = true;
            }
        }
        reread.reverse();
        reread
    }

    /// The nodes `target` depends on (and it), renumbered, with only `target` and the
    /// imports kept in the store; `target` is stored under `<job>/<name>`.
    pub fn subgraph(&self, target: NodeId, name: &str) -> (Graph, NodeId) {
        let mut need = vec![false; self.nodes.len()];
        need[target] = true;
        for id in (0..=target).rev() {
            if need[id] {
                for i in self.nodes[id].op.inputs() {
                    need[i] = true;
                }
            }
        }
        let mut map = vec![usize::MAX; self.nodes.len()];
        let mut g = Graph::default();
        for n in self.nodes.iter().filter(|n| need[n.id]) {
            map[n.id] = g.nodes.len();
            let mut op = n.op.clone();
            op.map_inputs(|x| map[x]);
            let keep = n.id == target || op.is_import();
            let id = g.nodes.len();
            let name = if n.id == target {
                Some(name.to_string())
            } else {
                n.name.clone()
            };
            if let Some(nm) = &name {
                g.named.insert(nm.clone(), id);
            }
            g.nodes.push(Node {
                id,
                meta: n.meta.clone(),
                op,
                name,
                persist: keep,
                def: n.def.clone(),
            });
        }
        (g, map[target])
    }
}

impl Graph {
    /// The nodes `targets` depend on (and they), renumbered in order, each target kept in
    /// the store under the name given and no other node named or kept: the graph of one
    /// compute of the library, whose cost follows what it computes, not the session's
    /// graph. Slices are pushed toward the sources ([`region::push_slices`]): a peek at a
    /// large expression makes only the elements it shows. Returns it and, for each of its
    /// nodes, the node of `self` it is or stands for (in order).
    pub fn pruned(&self, targets: &[(NodeId, String)]) -> (Graph, Vec<NodeId>) {
        // From the targets through their operands only: a long session's graph is mostly
        // nodes this compute does not need, and its cost must not grow with them.
        let mut need: Vec<NodeId> = targets.iter().map(|(id, _)| *id).collect();
        let mut seen: std::collections::HashSet<NodeId> = need.iter().copied().collect();
        let mut i = 0;
        while i < need.len() {
            for x in self.nodes[need[i]].op.operands() {
                if seen.insert(x) {
                    need.push(x);
                }
            }
            i += 1;
        }
        need.sort_unstable(); // an operand's id is below its user's
        let mut map: HashMap<NodeId, NodeId> = HashMap::with_capacity(need.len());
        let mut back = Vec::new();
        let mut g = Graph::default();
        for n in need.iter().map(|&i| &self.nodes[i]) {
            let id = g.nodes.len();
            map.insert(n.id, id);
            back.push(n.id);
            let mut op = n.op.clone();
            op.map_inputs(|x| map[&x]);
            // A fit's X and y are in the compute too: its stages make them.
            if let NodeOp::Fit { x, y, .. } = &mut op {
                (*x, *y) = (map[&*x], map[&*y]);
            }
            g.nodes.push(Node {
                id,
                meta: n.meta.clone(),
                op,
                name: None,
                persist: false,
                def: n.def.clone(),
            });
        }
        for (id, name) in targets {
            let n = &mut g.nodes[map[id]];
            n.persist = true;
            n.name = Some(name.clone());
            g.named.insert(name.clone(), map[id]);
        }
        let (g, via) = region::push_slices(g);
        (g, via.into_iter().map(|i| back[i]).collect())
    }
}

/// What staged building found: the whole graph, or a boolean mask whose values the rest
/// depends on (computed first from `graph`, whose nodes up to `mask` are final).
pub enum Built {
    Done(Graph),
    NeedMask {
        graph: Graph,
        mask: NodeId,
    },
    /// The values of a small node (`graph`'s nodes up to it are final) that the rest's
    /// shapes or blocks depend on: a sample sort's samples or partition sizes, a
    /// selection's counts per block. Until they are known an assumption stands in.
    NeedValues {
        graph: Graph,
        node: NodeId,
    },
}

/// How big a default block may be: a block should be a small part of what one invocation
/// holds, and blocks should spread over the workers.
pub fn default_block(shape: &[u64], dtype: DType, workers: usize, memory_mb: u64) -> Vec<u64> {
    let target = (memory_mb << 20) / 16;
    let target = target.clamp(1 << 16, 64 << 20);
    let elems = (target / dtype.size() as u64).max(1);
    let mut block = shape.to_vec();
    if shape.is_empty() {
        return block;
    }
    // Saturating: shapes made by expressions may be past any limit until they are refused.
    let product = |xs: &mut dyn Iterator<Item = u64>| xs.fold(1u64, |a, x| a.saturating_mul(x));
    // Split rows so that every worker gets some, then further until a block fits the target.
    let per_row: u64 = product(&mut shape[1..].iter().copied()).max(1);
    let rows = shape[0].max(1);
    let mut r = rows.div_ceil(workers.max(1) as u64).max(1);
    if rows
        .saturating_mul(per_row)
        .saturating_mul(dtype.size() as u64)
        < (1 << 20)
    {
        r = rows; // small arrays: one block
    }
    r = r.min((elems / per_row).max(1));
    // As many row blocks on every worker: blocks capped by size come in a multiple of the
    // workers (3 on 2 slots keep one slot busy for two thirds of every pass). Only smaller,
    // by less than half: still within the size bound and above half of it.
    let (n, w) = (rows.div_ceil(r), workers.max(1) as u64);
    if n > w && !n.is_multiple_of(w) {
        r = rows.div_ceil(n.div_ceil(w) * w);
    }
    block[0] = r;
    // A single row larger than the target: split the trailing axes as well.
    let mut d = shape.len() - 1;
    while d > 0 && product(&mut block.iter().copied()) > elems {
        let others: u64 = product(
            &mut block
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != d)
                .map(|(_, b)| *b),
        );
        block[d] = (elems / others.max(1)).max(1).min(shape[d]);
        d -= 1;
    }
    block
        .iter()
        .zip(shape)
        .map(|(&b, &s)| b.min(s).max(1))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn graph(text: &str) -> Result<Graph, JobError> {
        build(
            &Job::parse(Path::new("/tmp/g/job.toml"), text).unwrap(),
            &Probes::default(),
        )
    }

    #[test]
    fn shapes_and_blocks_flow() {
        let g = graph(
            "[arrays]\nX = { random = \"normal\", shape = [7, 5], block = [3, 4] }\nw = { ones = [5] }\ny = \"X @ w > 0.5\"\ns = \"sum(X.T, axis=0)\"\n",
        )
        .unwrap();
        let y = &g.nodes[g.named["y"]];
        assert_eq!(
            (y.meta.shape.clone(), y.meta.block.clone(), y.meta.dtype),
            (vec![7], vec![3], DType::Bool)
        );
        let s = &g.nodes[g.named["s"]];
        assert_eq!(
            (s.meta.shape.clone(), s.meta.block.clone()),
            (vec![7], vec![3])
        );
    }

    #[test]
    fn errors_name_line_key_and_shapes() {
        let e = graph("[arrays]\nA = { zeros = [3, 4] }\nB = { zeros = [4, 3] }\nC = \"A + B\"\n")
            .unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (4, "arrays.C"));
        assert!(e.message.contains("(3, 4) and (4, 3)"), "{e}");
        let e = graph("[arrays]\na = \"b + 1\"\nb = \"a * 2\"\n").unwrap_err();
        assert!(e.message.contains("cyclic definition: a -> b -> a"), "{e}");
        let e = graph("[arrays]\na = \"c + 1\"\n").unwrap_err();
        assert!(e.message.contains("unknown array \"c\""), "{e}");
        let e = graph("[arrays]\na = { zeros = [2, 2] }\nb = \"sum(a, axis=2)\"\n").unwrap_err();
        assert!(e.message.contains("out of bounds"), "{e}");
        let e = graph("[arrays]\na = { zeros = [2, 2] }\nb = \"frobnicate(a)\"\n").unwrap_err();
        assert!(e.message.contains("unknown function frobnicate"), "{e}");
    }

    /// A weighted Gram matrix and a sum of a product are einsums of the factors: no node
    /// makes the product block (the function multiplies a piece of rows at a time).
    #[test]
    fn products_inside_a_contraction_or_a_sum_are_read_through() {
        let g = graph(
            "[arrays]\nX = { random = \"normal\", shape = [7, 5], block = [3, 5] }\ns = { ones = [7] }\nv = { ones = [7] }\nU = { ones = [7, 5] }\nH = \"X.T @ (X * s[:, None])\"\nK = \"(s[:, None] * X).T @ X\"\nm = \"sum(X * U, axis=0)\"\nr = \"sum(X * U, axis=1)\"\nn = \"X.T @ (X * U)\"\nq = \"sum(X * v[:, None], axis=0)\"\n",
        )
        .unwrap();
        let einsum = |name: &str| match &g.nodes[g.named[name]].op {
            NodeOp::Einsum { subscripts, xs } => Some((subscripts.clone(), xs.len())),
            _ => None,
        };
        assert_eq!(einsum("H"), Some(("zx,zy,z->xy".into(), 3)));
        assert_eq!(einsum("K").map(|e| e.1), Some(3));
        assert_eq!(einsum("m"), Some(("ab,ab->b".into(), 2)));
        assert_eq!(einsum("r"), Some(("ab,ab->a".into(), 2)));
        // A product of two matrices, or one that broadcasts, is computed as it is.
        assert_eq!(einsum("n"), Some(("zx,zy->xy".into(), 2)));
        assert_eq!(einsum("q"), None);
        let muls = g
            .nodes
            .iter()
            .filter(|n| {
                matches!(
                    n.op,
                    NodeOp::Binary {
                        op: BinaryOp::Mul,
                        ..
                    }
                )
            })
            .count();
        // The product nodes stay in the graph, but only `n`'s and `q`'s are read.
        assert!(muls >= 2, "{muls}");
    }

    /// `@` of stacks broadcasts their batch axes as NumPy's: one einsum whose batch
    /// letters are aligned at the end, an operand's missing or length-1 batch axes
    /// broadcast (nothing is copied); batch shapes that clash are refused. Equal batch
    /// shapes keep their einsum.
    #[test]
    fn matmul_broadcasts_the_stacks_batch_axes() {
        let g = graph(
            "[arrays]\nA = { ones = [4, 1, 2, 3] }\nB = { ones = [5, 3, 2] }\nM = { ones = [2, 3] }\nS = { ones = [4, 3, 5] }\nE = { ones = [4, 2, 3] }\nC = \"A @ B\"\nD = \"M @ S\"\nF = \"E @ S\"\n",
        )
        .unwrap();
        let node = |name: &str| &g.nodes[g.named[name]];
        assert_eq!(node("C").meta.shape, [4, 5, 2, 2]);
        assert_eq!(node("D").meta.shape, [4, 2, 5]);
        assert_eq!(node("F").meta.shape, [4, 2, 5]);
        let einsum = |name: &str| match &node(name).op {
            NodeOp::Einsum { subscripts, .. } => subscripts.clone(),
            op => panic!("{name}: {op:?}"),
        };
        // A's length-1 axis is dropped (the letter b broadcasts); M has no batch axes.
        assert_eq!(einsum("C"), "axz,bzy->abxy");
        assert_eq!(einsum("D"), "xz,azy->axy");
        assert_eq!(einsum("F"), "axz,azy->axy");
        let e =
            graph("[arrays]\nA = { ones = [2, 3, 4] }\nB = { ones = [3, 4, 5] }\nC = \"A @ B\"\n")
                .unwrap_err();
        assert!(
            e.message
                .contains("batch shapes (2,) and (3,) do not broadcast"),
            "{e}"
        );
    }

    #[test]
    fn default_blocks_split_rows_over_workers() {
        // 2048 MB / 16 = 128 MiB, capped at 64 MiB per block: 131072 rows of 64 float64.
        let blocks = |shape: &[u64], workers| default_block(shape, DType::Float64, workers, 2048);
        assert_eq!(blocks(&[1_000_000, 64], 4), [131_072, 64]);
        // 1M x 21 (a CSV of a label and 20 features) on 2 workers: 4 blocks, not 3.
        assert_eq!(blocks(&[1_000_000, 21], 2), [250_000, 21]);
        assert_eq!(blocks(&[1_000_000, 21], 3), [333_334, 21]);
        assert_eq!(blocks(&[1_000_000, 64], 16), [62_500, 64]);
        assert_eq!(blocks(&[7, 5], 4), [7, 5]);
        assert!(blocks(&[], 4).is_empty());
    }
}
