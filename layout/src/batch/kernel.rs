//! What a task computes: [`Kernel`], one variant a kernel, with the parameters it takes
//! on the wire, and the small facts about kernels that driver and function share.

use serde::{Deserialize, Serialize};

use super::ops::{BinaryOp, QuantileMethod, ReduceOp, UnaryOp};
use crate::DType;
use crate::scalar::Scalar;
use crate::store::StoreSpec;

/// A region of a larger array: element `p` of the region is element `start + p * step`
/// (per axis) of an array of `shape`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Frame {
    /// The larger array's shape.
    pub shape: Vec<u64>,
    /// Where the region starts in it, per axis.
    pub start: Vec<i64>,
    /// The region's step along each axis (negative: backwards).
    pub step: Vec<i64>,
}

impl Frame {
    /// The region `start + p * step` of this region: one region of the same array.
    pub fn then(&self, start: &[i64], step: &[i64]) -> Frame {
        Frame {
            shape: self.shape.clone(),
            start: (self.start.iter().zip(start).zip(&self.step))
                .map(|((a, s), b)| a + s * b)
                .collect(),
            step: self.step.iter().zip(step).map(|(a, b)| a * b).collect(),
        }
    }
}

/// The distribution of a [`Kernel::Random`] array's elements.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RandomDist {
    /// Standard normal (mean 0, standard deviation 1), float64.
    Normal,
    /// Uniform in `[0, 1)`, float64.
    Uniform,
    /// Integers in `[low, high)`, int64.
    Integers {
        /// The smallest value.
        low: i64,
        /// One past the largest value.
        high: i64,
    },
    /// Gamma of this shape and scale 1, float64.
    Gamma {
        /// The shape (k > 0).
        shape: f64,
    },
    /// Poisson of this mean, int64.
    Poisson {
        /// The mean (>= 0).
        lam: f64,
    },
    /// Binomial of `n` trials of probability `p`, int64.
    Binomial {
        /// Trials.
        n: u64,
        /// Each trial's probability of success.
        p: f64,
    },
}

impl RandomDist {
    /// Its name as a job file writes it: `normal`, `uniform` or `integers`.
    pub fn name(self) -> &'static str {
        match self {
            RandomDist::Normal => "normal",
            RandomDist::Uniform => "uniform",
            RandomDist::Integers { .. } => "integers",
            RandomDist::Gamma { .. } => "gamma",
            RandomDist::Poisson { .. } => "poisson",
            RandomDist::Binomial { .. } => "binomial",
        }
    }
}

/// What a task computes. Inputs are listed in [`Task::inputs`](super::Task::inputs) in
/// the order each kernel documents; the output block's shape comes from the output
/// array's grid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kernel", rename_all = "snake_case")]
pub enum Kernel {
    /// No inputs; every element `value` (cast to the output's dtype).
    Fill {
        /// The value of every element.
        value: Scalar,
    },
    /// No inputs; element at flat index `i` of the whole array is a pure function of
    /// (`seed`, `i`), so values do not depend on the block shape.
    Random {
        /// The distribution the values follow.
        dist: RandomDist,
        /// The generator's seed: the same seed gives the same array.
        seed: u64,
        /// The output is this region of a larger random array (a slice of it, made
        /// without making the rest).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        frame: Option<Frame>,
    },
    /// One input.
    Unary {
        /// The function applied to each element.
        op: UnaryOp,
    },
    /// One int64 input, passed through unchanged; the task fails with `error` (NumPy's
    /// exception and message: `ValueError: ...`) where an element is `limit` or more: a
    /// value NumPy raises for rather than returns (`nanargmin` of an all-NaN slice comes
    /// out as the axis' length, `average`'s weights adding up to zero).
    CheckBelow {
        /// The first value that fails.
        limit: i64,
        /// NumPy's message for it.
        error: String,
    },
    /// Two inputs whose block shapes broadcast (NumPy's rules) to the output block's.
    Binary {
        /// The function applied to each pair of elements, first input on the left.
        op: BinaryOp,
    },
    /// One input and a scalar; `scalar_left` puts the scalar on the left (`2 - x`). An
    /// int scalar with an int or bool input computes in int64, a float one in float64.
    Scalar {
        /// The function applied to each element and the scalar.
        op: BinaryOp,
        /// The scalar operand.
        value: Scalar,
        /// The scalar is the left operand (`value op x`), else the right (`x op value`).
        scalar_left: bool,
    },
    /// Three inputs (condition, then values where true and where false) whose block shapes
    /// broadcast to the output block's (`where`).
    Where,
    /// No inputs; element at global index `g` is `start + step * g[axis]` (arange,
    /// linspace, index arrays): in int64 (wrapping) where both are ints and the output is
    /// not float, else in float64, rounded toward -inf for an int64 output (NumPy's
    /// linspace). `last`, if given, is the last element along `axis` (linspace's endpoint).
    Iota {
        /// The axis the values step along; they are constant along the others.
        axis: usize,
        /// The element at index 0 along `axis`.
        start: Scalar,
        /// The difference between neighbours along `axis`.
        step: Scalar,
        /// The element at the last index along `axis`, exactly (instead of
        /// `start + step * (n - 1)`); `None`: that formula holds there too.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last: Option<Scalar>,
    },
    /// No inputs; 2-D, 1 where `column - row == k`, else 0 (eye, identity).
    Eye {
        /// The diagonal: 0 the main one, positive above it, negative below.
        k: i64,
    },
    /// No inputs; the whole (one-block) array's values in C order, sent inline: a model's
    /// parameters for one iteration of a fit.
    Constant {
        /// Every element of the array, in C order (as many as it has).
        values: Vec<Scalar>,
    },
    /// A parameter the driver fills in (as a [`Kernel::Constant`]) before each dispatch of
    /// a planned pass; a function never runs one.
    Param {
        /// The parameter's name, which the driver looks its values up by.
        name: String,
    },
    /// No inputs; the output block read from the `.npy` file `key` of the store `source`
    /// (a local folder or a bucket): its data of dtype `descr` (little-endian or
    /// byte-sized: `<f8`, `|b1`, ...) starts at byte `offset`, `shape` is the file's, and
    /// `fortran` says its elements are in Fortran order. Only the block's elements are
    /// read (ranged reads); they are converted to the output's dtype.
    ImportNpy {
        /// The store that holds the file.
        source: StoreSpec,
        /// The file's key in `source`.
        key: String,
        /// Byte at which the data starts (after the file's header).
        offset: u64,
        /// The shape of the array the file holds (its header's `shape`).
        shape: Vec<u64>,
        /// The file's element type, as its header's `descr` writes it.
        descr: String,
        /// The elements are in Fortran (column-major) order (the header's
        /// `fortran_order`).
        fortran: bool,
    },
    /// No inputs; the output block's rows parsed from the CSV file `key` of the store
    /// `source` (numbers separated by `delimiter`, `#` comments, blank lines skipped):
    /// from byte `start` (the start of line `line`, 1-based, of the file), `skip` data rows
    /// are passed over, then the block's rows are read; every data row has `columns`
    /// fields, of which the block's columns are fields `usecols` (0-based, in order). No
    /// row the block needs lies past byte `end`. Fields parse as the output's dtype
    /// (int64 exactly), or as their column's own in `dtypes`, then cast to it.
    ImportCsv {
        /// The store that holds the file.
        source: StoreSpec,
        /// The file's key in `source`.
        key: String,
        /// First byte the task reads: a line start.
        start: u64,
        /// Byte past the last one the task reads.
        end: u64,
        /// The line number (from 1) of byte `start`, for messages that name a line.
        line: u64,
        /// Data rows between `start` and the block's first row.
        skip: u64,
        /// Fields in every data row of the file.
        columns: u64,
        /// The fields (0-based) that are the block's columns, in order.
        usecols: Vec<u64>,
        /// The byte that separates fields.
        delimiter: u8,
        /// The dtype each of the block's columns parses as (pandas' `dtype={...}`);
        /// empty: all as the output's.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        dtypes: Vec<DType>,
    },
    /// No inputs; the first stage of importing a large CSV file `key` (`size` bytes) of the
    /// store `source`: the row index of pieces `pieces.0..pieces.1` of the file cut every
    /// `piece` bytes at line starts (`nums_function::csv_index::count_pieces`), one row of
    /// `PIECE_ROW` int64 per piece. The task reads from the byte before its first piece to
    /// the line start after its last, through one small buffer; no field is parsed.
    CsvCount {
        /// The store that holds the file.
        source: StoreSpec,
        /// The file's key in `source`.
        key: String,
        /// The file's size in bytes when the job was checked (a file that has shrunk since
        /// is an error).
        size: u64,
        /// Bytes per piece ([`CSV_PIECE`]).
        piece: u64,
        /// The pieces the task counts: indices `pieces.0..pieces.1`.
        pieces: (u64, u64),
        /// The byte that separates fields.
        delimiter: u8,
    },
    /// No inputs; the output block's rows and columns read from the Parquet file `key` of
    /// the store `source`: its metadata is bytes `metadata` (start, length) of the file,
    /// then the task fetches the column chunks of the row groups holding its rows (at most
    /// `fetch` bytes, for the memory projection). An array of one column is 1-D.
    ImportParquet {
        /// The store that holds the file.
        source: StoreSpec,
        /// The file's key in `source`.
        key: String,
        /// The file's footer metadata: (first byte, length in bytes).
        metadata: (u64, u64),
        /// The file's columns the array keeps, in order (its `usecols`).
        columns: Vec<u64>,
        /// Bytes of column chunks the task fetches at most (for the memory projection).
        fetch: u64,
    },
    /// No inputs; the output block cut from the Zarr v3 array at `path` of the store
    /// `source` (any codecs and chunks zarrs reads; chunks never written are its
    /// `fill_value`): the task reads its `zarr.json` and the chunks the block overlaps
    /// (`scratch` bytes decoded, for the memory projection).
    ImportZarr {
        /// The store that holds the array.
        source: StoreSpec,
        /// The array's path in `source` (the folder of its `zarr.json`).
        path: String,
        /// Bytes of chunks the task holds decoded at most (for the memory projection).
        scratch: u64,
    },
    /// Writes part `part` of the multipart upload `upload` of the `.npy` file `key` in the
    /// S3 store `dest`: `header` (the file's header, given to part 0 only), then the
    /// little-endian C-order bytes of the one input, `bytes` of them (rows of the array,
    /// all of each row). Output: the part's ETag, which completing the upload names it
    /// by, one byte per element of a [1, [`ETAG_BYTES`]] int64 block, zero-padded.
    ExportNpyPart {
        /// The S3 store the file is written to.
        dest: StoreSpec,
        /// The file's key in `dest`.
        key: String,
        /// The multipart upload's id ([`crate::Store::create_multipart`]).
        upload: String,
        /// The part's number, from 0.
        part: usize,
        /// Bytes written before the input's: the `.npy` header for part 0, else empty.
        header: Vec<u8>,
        /// Bytes of the input's values (its elements times the dtype's size): checked
        /// before the upload.
        bytes: u64,
    },
    /// Writes the one input, a block of an array of `shape` at `origin`, into its place in
    /// the local `.npy` file `path` whose values start at byte `offset`: the partial file
    /// of a run's output, made (header and full length) by the driver, which renames it
    /// into place at the end. Only for functions on the driver's machine (the local
    /// backend), which see its files; the file must exist and be named `*.partial`.
    /// Output: a one-element int64 block, the bytes written (the block's receipt, so that
    /// a resumed run knows it is done).
    ExportNpyBlock {
        /// The partial `.npy` file, an absolute path.
        path: String,
        /// Bytes of the file's header: where the values start.
        offset: u64,
        /// The whole array's shape.
        shape: Vec<u64>,
        /// The input block's origin in the array.
        origin: Vec<u64>,
        /// Bytes of the input's values: a block not in C order is copied into it first
        /// (kernels make C-order blocks; the memory projection counts the copy anyway).
        bytes: u64,
    },
    /// Writes the one input, a whole chunk of the Zarr array `path` (v2 or v3, written by
    /// any tool) in the store `dest.store`, as that array's chunk `chunk`: encoded with the
    /// codecs its metadata (`dest.metadata`) names, put at its chunk key (a region write,
    /// as xarray's `to_zarr` makes: the array and its metadata exist). Output: a
    /// one-element int64 block, the bytes put (the chunk's receipt).
    ExportZarrChunk {
        /// The target array's store and metadata.
        dest: crate::zarr::Foreign,
        /// The array's path in `dest.store`.
        path: String,
        /// The chunk the input is, in the array's chunk grid.
        chunk: Vec<u64>,
        /// Bytes of the input's values (the encoded chunk is at most about as large).
        bytes: u64,
    },
    /// Inputs: terms of `operands` blocks each; the sum over terms of the Einstein sum
    /// `subscripts` (like "ij,jk->ik") of each term's blocks, added in term order.
    Einsum {
        /// NumPy's einsum subscripts, explicit output included (`"ij,jk->ik"`).
        subscripts: String,
        /// Blocks per term: the number of operands `subscripts` names.
        operands: usize,
    },
    /// One input; its axes permuted: output axis i is input axis `perm[i]`.
    Transpose {
        /// The permutation: output axis `i` is input axis `perm[i]`.
        perm: Vec<usize>,
    },
    /// Inputs: blocks that reduce into this output block; each is reduced over `axes`,
    /// then the partial results are combined in input order with [`ReduceOp::partial`]
    /// (only an input's own NaNs are skipped by `nansum`/`nanprod`).
    Reduce {
        /// How values combine.
        op: ReduceOp,
        /// The input blocks' axes reduced away; empty: the inputs are only combined
        /// elementwise (a [`Kernel::combiner`]).
        axes: Vec<usize>,
    },
    /// Inputs: blocks of arrays in one frame of coordinates; `offsets[k]` is input k's
    /// origin minus the source coordinate of the output block's first element. Output
    /// element `p` takes the source element at `p * step` from there (`step` empty: all 1).
    /// Re-blocking, concatenation, slicing with steps.
    Assemble {
        /// Per input, per axis: its origin minus the source coordinate of the output
        /// block's first element.
        offsets: Vec<Vec<i64>>,
        /// Per axis, the source step between neighbouring output elements (non-zero;
        /// negative walks backwards); empty: 1 on every axis.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        step: Vec<i64>,
    },
    /// Inputs: source blocks along `axis`; output position `p` along `axis` is the slice
    /// `picks[p].1` of input `picks[p].0` (integer-list and boolean-mask indexing).
    Take {
        /// The axis picked along.
        axis: usize,
        /// Per output position along `axis`: (input, index along `axis` in that input).
        picks: Vec<(u32, u64)>,
    },
    /// Inputs: a block of x, then blocks of v (row-major over `grid`): x's block with some
    /// elements replaced by v's (assignment, `x.at[index].set(v)`). Per axis, `axes[d]`
    /// lists (position in the output block, v block number along d, index in that block);
    /// every combination over the axes is set, in order (the last of repeats wins).
    Put {
        /// Per axis: (output position, v block along the axis, index in that v block).
        axes: Vec<Vec<(u64, u32, u64)>>,
        /// How many v blocks along each axis the inputs hold.
        grid: Vec<u32>,
    },
    /// Inputs: blocks whose elements, in C order, from flat position `ranges[k].0` up to
    /// `ranges[k].1` of input k, concatenated, are the output block's in C order (reshape,
    /// expand_dims, squeeze).
    Reshape {
        /// Per input: the flat (C-order) element range `start..end` it contributes.
        ranges: Vec<(u64, u64)>,
    },

    /// One input block holding whole lanes along `axis`: the discrete Fourier transform
    /// of each lane (`function/src/fft.rs`), in the output's dtype (complex64 from float32
    /// or complex64, complex128 otherwise; a real inverse's float32 or float64), times
    /// `scale` (the norm's 1/n or 1/sqrt(n)). With `twiddle`, element k along `axis` is
    /// then multiplied by exp(-+2 pi i k m / twiddle.n), m the element's index in the whole
    /// array along `twiddle.axis`: the twiddle step of a four-step FFT across blocks.
    Fft {
        /// The axis transformed along (whole in the block).
        axis: usize,
        /// Which transform.
        kind: FftKind,
        /// Every result multiplied by this.
        scale: f64,
        /// The four-step twiddle, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        twiddle: Option<Twiddle>,
    },

    // Scans, sorting and searching (function/src/order.rs). Values are ordered as NumPy
    // sorts them: NaN last (a complex with a NaN part after every other, real NaN after
    // imaginary NaN), -0.0 equal to 0.0; `descending` reverses that order (NaN first) and
    // keeps equal values in their order.
    /// One input block, then (with `offset`) the block of its lane's offsets: the running
    /// sum or product (`op`: sum, prod, nansum, nanprod) along `axis`, in the output's
    /// dtype, each lane starting from the identity, or from element `offset` along `axis`
    /// of the offsets block (what the blocks before it along `axis` add up to); with
    /// `exclusive`, element k is what the elements before it add up to (a cumulative sum
    /// across blocks: each block's offset).
    Scan {
        /// How values accumulate (sum, prod, nansum or nanprod).
        op: ReduceOp,
        /// The axis accumulated along.
        axis: usize,
        /// Element k leaves out element k itself.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        exclusive: bool,
        /// The position along `axis` in the offsets block (the second input) of this
        /// block's starting values; `None`: no second input, lanes start at the identity.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        offset: Option<u64>,
    },
    /// One input block: its total (`op`: sum, prod, nansum or nanprod) along `axis`, in the
    /// output's dtype, kept as an axis of length 1: the block totals a scan across blocks
    /// starts from. With a second input (the block's shape with one element along `axis`)
    /// each lane is folded in order from that element rather than from the identity: the
    /// next block's starting values of a float scan, chained block by block.
    ScanTotal {
        /// How values accumulate.
        op: ReduceOp,
        /// The axis totalled along.
        axis: usize,
    },
    /// One input block: its values (or with `arg`, the indices along `axis` that sort
    /// them, as int64 counted from the array's start: the block's origin added) sorted
    /// along `axis`, stably.
    Sort {
        /// The axis sorted along.
        axis: usize,
        /// Largest first (equal values keep their order).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        descending: bool,
        /// Output the sorting indices (argsort), not the values.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        arg: bool,
        /// Bytes the sort holds beyond its input and output (for the memory projection).
        scratch: u64,
    },
    /// One 1-D input block, elements `first..` of its array: output row (1 x k, int64) j
    /// is how many of its elements come before splitter j in the sort order, an element
    /// being (value, global index) and a splitter (value, index) (so that equal values
    /// split between partitions by position): the partition sizes of a sample sort.
    SortCount {
        /// The array position of the block's first element.
        first: u64,
        /// The splitters, ascending in the sort order: (value, array position).
        splitters: Vec<(Scalar, u64)>,
        /// The sort order is descending.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        descending: bool,
    },
    /// Inputs: `parts` 1-D runs, each sorted, that hold between them the elements of one
    /// range of the sorted array, in the order their keys (value, array position) come
    /// (run by run); with `arg`, then as many runs of their array positions (int64). The
    /// runs merged stably; the output is elements `start..start + len` of that merge (the
    /// values, or with `arg` the positions): a sample sort's partitions become the sorted
    /// array's blocks.
    SortMerge {
        /// Runs of values (the first inputs).
        parts: usize,
        /// Merged position of the output block's first element.
        start: u64,
        /// Largest first.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        descending: bool,
        /// Output array positions (argsort), read from the second half of the inputs.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        arg: bool,
        /// Bytes the merge holds beyond its inputs and output (for the memory projection).
        scratch: u64,
    },
    /// Terms of two inputs: a block of a sorted 1-D array, then a block of values. Output:
    /// for each value, how many elements of the sorted block come before it (`right`: are
    /// at most it), as int64; summed over the terms (the blocks of the sorted array) that
    /// is NumPy's `searchsorted`.
    SearchCount {
        /// Count the elements equal to the value too (`side="right"`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        right: bool,
    },
    /// One input block holding whole lanes along `axis`, each sorted (NaN last): per lane,
    /// the quantiles `qs` (fractions in [0, 1]) by `method`, as NumPy's `quantile` (and
    /// `median`) compute them from the sorted lane; with `nan` the lane's NaNs are left out
    /// (`nanquantile`), else a lane holding a NaN gives NaN. The output has `qs.len()`
    /// elements along `axis`: in the input's dtype for the methods that pick an element,
    /// else in float64 (cast to the output's).
    Quantile {
        /// The axis of the lanes.
        axis: usize,
        /// The quantiles, fractions in [0, 1].
        qs: Vec<f64>,
        /// How a quantile between two elements is found.
        method: QuantileMethod,
        /// Leave NaNs out.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        nan: bool,
        /// The lanes are not sorted: the order statistics are selected (as NumPy's
        /// `partition` does: linear time), not read off.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        select: bool,
    },
    /// Terms (a block of values, a 0-d block of the histogram's lowest edge, a 0-d block of
    /// its highest; then with `weighted` a block of weights like the values): the count (or
    /// the weights' sum, float64) of the values in each of `bins` equal bins between the
    /// edges, as NumPy's `histogram` finds them (the last bin holds its upper edge, values
    /// outside are left out), summed over the terms.
    Histogram {
        /// Equal bins between the edges.
        bins: u64,
        /// A weights block follows each values block.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        weighted: bool,
    },
    /// Terms (a block of non-negative ints; then with `weighted` a block of weights like
    /// it): how often each of 0..`length` occurs (or the weights' sum, float64), summed
    /// over the terms: NumPy's `bincount`. A negative value or one of `length` or more
    /// fails the task.
    Bincount {
        /// Values counted: 0..length.
        length: u64,
        /// A weights block follows each values block.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        weighted: bool,
    },
    /// Terms (a block of bools, ints or floats: not complex): the distinct values and how
    /// often each occurs, as an int64 [cap + 1, 3] table. Row 0 is `[k, 0, 0]`, rows 1..=k
    /// `[key, count, bits]` in NumPy's sort order (a value's key is its place in that
    /// order, as the function's `order::Sortable::key` makes it: all NaNs one value, -0.0
    /// equal to 0.0; `bits` are the first such element's, in term order), the rest zeros;
    /// `k` is -1 when there are more than `cap` distinct values (the table is then
    /// empty). `unique` with few distinct values: a hash count, no sort. Partials combine
    /// by [`Kernel::DistinctMerge`].
    DistinctCounts {
        /// The most distinct values the table holds.
        cap: u64,
    },
    /// Terms (tables of [`Kernel::DistinctCounts`], in order): one table of them all (the
    /// counts of a value added, its first element the first table's).
    DistinctMerge {
        /// The most distinct values the table holds.
        cap: u64,
    },
    /// Terms (a block of values, the block of a 1-D bool mask along `axis` beside it,
    /// the 1-element int64 block holding how many elements the mask's blocks before it
    /// select): the selected slices along `axis` that fall in the output block, in place,
    /// the rest zeros: `x[mask]` along an axis of any length, the counts per block known
    /// and the positions never held by the driver. Partials combine by
    /// [`Kernel::Overlay`].
    Compress {
        /// The axis selected along.
        axis: usize,
    },
    /// Terms (a block of int indices, flattened; a block of x along `axis`; the
    /// 1-element int64 block holding where that block of x starts along `axis`): the
    /// slices of x the indices pick that the x block holds, in place (output position p
    /// along `axis` from index p of the output block's own indices block), the rest
    /// zeros: `x.take(idx, axis)` for index arrays of any length. A negative index counts
    /// from the end of an axis of `len`. Partials combine by [`Kernel::Overlay`].
    Gather {
        /// The axis picked along.
        axis: usize,
        /// The length of x along `axis`.
        len: u64,
    },
    /// Input: a block of int indices into an axis of `len` in blocks of `block`: an int64
    /// [1, blocks + 2] block of how many indices fall in each of the `blocks` blocks, then
    /// the smallest and largest index (where out-of-bounds ones show). What a [`Kernel::Gather`]
    /// reads is planned from these counts.
    IndexHits {
        /// The indexed axis' length.
        len: u64,
        /// Its block length.
        block: u64,
        /// Its number of blocks.
        blocks: u64,
    },
    /// Inputs of one dtype and shape, each zero except where the others are: their bits
    /// OR-ed, element by element (the partials of [`Kernel::Compress`] and
    /// [`Kernel::Gather`] put together exactly, -0.0 and NaN payloads kept).
    Overlay,
    /// Terms, one per row block of a model's data: the `cols` blocks of X along its
    /// columns ([m, d_c] each, d = the sum of their widths), the block of y beside them
    /// ([m]; or [m, 2], the targets and their sample weights), the parameters W ([d, k],
    /// one candidate per column) and, with `intercept`, b ([k]). With z = X W + b (b = 0
    /// without it) and weights v (1 without them), per candidate j: the model's loss
    /// summed over the rows (each times v), then its gradient sums X^T (v r) (d rows),
    /// then with `intercept` sum v r (1 + p rows, p = d + intercept), then
    /// [`GLM_COUNTS`] rows in column 0 (zeros beside), in [`GlmCount`]'s order: counts of
    /// y's values (values the loss cannot take: logistic neither 0, 1 nor NaN, Poisson
    /// negative, squared NaN; NaN; infinite; equal to 1; above 0), of X's NaN and
    /// infinite values, the weights' sum and counts of negative, NaN and infinite
    /// weights (so a fit's first pass checks its data too); one [1 + p + GLM_COUNTS, k]
    /// float64 block, summed over the terms: a pass of a fit ([`GlmLoss`] says loss and
    /// r) in one sweep over each block of rows, where the same expressions as separate
    /// kernels each make a block of m x k. With `hessian` (a Newton pass, k = 1) the block
    /// is [1 + p + GLM_COUNTS, 1 + p]: column 0 as without it, and rows and columns 1..=p
    /// the Hessian sums X^T diag(v s) X (bordered by X^T (v s) and sum v s with an
    /// intercept; s = d²loss/dz²), row 0 beyond column 0 zero. X's NaN and infinite
    /// values are counted in the rows whose z is not finite (every row that holds one,
    /// at finite parameters), so clean data pays nothing for the count. A
    /// [`GlmLoss::Multinomial`] loss of K classes takes W of [d, K k] and b of [K k]
    /// (candidate j's class c in column j K + c) and sums each candidate's parameters
    /// class by class: p = K (d + intercept), rows 1 + c (d + intercept) onward class c's
    /// gradient (its w, then its b), the loss in row 0; a Newton pass's Hessian is the
    /// whole p x p, class-major as the gradient; y's count of ones counts class K - 1,
    /// the values refused those that are not a class index.
    GlmSums {
        /// Which model's loss.
        loss: GlmLoss,
        /// X's blocks per term (its column blocks).
        cols: usize,
        /// A b block follows W in each term.
        intercept: bool,
        /// The Hessian sums too.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        hessian: bool,
    },

    // Linear algebra (function/src/linalg.rs, LAPACK and BLAS of the linked OpenBLAS).
    // Inputs are matrices: 2-D blocks, or 1-D blocks taken as one column; any dtype is
    // computed in float64. A singular matrix or one that is not positive definite fails
    // the task with a message containing `LinAlgError: ` and NumPy's wording.
    /// Inputs: a grid of blocks in row-major order, `cols` per grid row, that together form
    /// one M x N matrix A (blocks of one grid row have equal heights, of one grid column
    /// equal widths): a row block of a tall-skinny matrix (`[a | b]` for lstsq is
    /// `cols: 2`), or R factors stacked vertically (a TSQR combine, any fan-in). Its QR
    /// A = Q R with diag(R) >= 0, so the result is unique and a tree of combines gives the
    /// one-shot R. `output`: R, N x N (rows past min(M, N) zero; the output block may
    /// have min(M, N) rows instead), or the rows of Q of grid row `part`, height x N
    /// (columns past min(M, N) zero; or min(M, N) columns), or of Q C (see [`QrOutput`]).
    Qr {
        /// Blocks per grid row of the input grid.
        cols: usize,
        // Not `output`: a task's kernel is flattened into it beside its own `output`.
        /// Which block the task outputs.
        #[serde(rename = "result")]
        output: QrOutput,
    },
    /// One input: the R of `[a | b]` (a: M x `n`, b: M x p), (n+p) x (n+p) or fewer rows.
    /// `rcond`: singular values of a at most `rcond` times the largest count as zero
    /// (NumPy's default: machine epsilon times max(M, n)). `output`: the min-norm
    /// solution x (n x p, or (n,) for one column), the residual sums of squares (p,), the
    /// rank of a (0-d), or a's singular values (n,), as `numpy.linalg.lstsq` gives them.
    Lstsq {
        /// Columns of a (the rest of the R's columns are b's).
        n: usize,
        /// Relative cutoff for small singular values of a.
        rcond: f64,
        /// Which block the task outputs.
        #[serde(rename = "result")]
        output: LstsqOutput,
    },
    /// One input A (m x n, k = min(m, n)): its thin SVD A = U diag(S) Vh, S descending,
    /// each U column's entry of largest magnitude positive (Vh's row flipped with it).
    Svd {
        /// Which block the task outputs.
        #[serde(rename = "result")]
        output: SvdOutput,
    },
    /// One input: a symmetric positive-definite square block (only its lower triangle is
    /// read, as NumPy does). Output: L, lower triangular, A = L L^T (potrf).
    Cholesky,
    /// One block L_ij (i >= j) of a blocked Cholesky factorization, left-looking: S = A_ij
    /// minus the sum over k < j of L_ik L_jk^T; on the diagonal (`diagonal`) the output is
    /// the Cholesky factor of S, else the X with X L_jj^T = S. Inputs: A_ij, then (diagonal)
    /// L_jk for each k < j, or (not diagonal) the pairs L_ik, L_jk for each k < j and last
    /// L_jj. Only the lower triangle of a diagonal A_jj is read.
    CholeskyBlock {
        /// The block is on the diagonal (i = j).
        diagonal: bool,
    },
    /// Inputs: T (square, triangular: only the triangle `lower` names is read, so a packed
    /// LU works), B. Output X with op(T) X = B (`left`) or X op(T) = B; op transposes when
    /// `transpose`; `unit_diagonal` takes T's diagonal as ones (trsm).
    TriangularSolve {
        /// T is on the left (`op(T) X = B`), else on the right (`X op(T) = B`).
        left: bool,
        /// T is lower triangular, else upper.
        lower: bool,
        /// `op(T)` is T transposed, else T.
        transpose: bool,
        /// T's diagonal is taken as ones (not read).
        unit_diagonal: bool,
    },
    /// Inputs: C, then pairs (A_k, B_k). Output C - sum_k op(A_k) op(B_k), op transposing
    /// where asked (gemm, accumulated into one copy of C): the trailing update of blocked
    /// Cholesky (`transpose_b`) and LU, and the updates of blocked triangular solves.
    SubtractProducts {
        /// Each A_k is transposed.
        transpose_a: bool,
        /// Each B_k is transposed.
        transpose_b: bool,
    },
    /// Inputs: C (square, symmetric), then A_k. Output C - sum_k A_k A_k^T (A_k^T A_k when
    /// `transpose`), symmetric (syrk: half gemm's work): the diagonal update of Cholesky.
    SubtractGram {
        /// Subtract A_k^T A_k, else A_k A_k^T.
        transpose: bool,
    },
    /// Inputs: A (square), B. Output X = A^-1 B (LU with partial pivoting: getrf and
    /// getrs, as NumPy's solve). A is singular (NumPy's LinAlgError) when a pivot is
    /// numerically zero (at most n eps times the largest term of its row's elimination) or
    /// when the reciprocal condition number of A equilibrated (rows by powers of two to a
    /// largest magnitude in [1, 2), then columns to 1-norm 1), in the 1-norm as LAPACK's
    /// dgecon estimates it, is below n eps.
    LuSolve,
    /// One input A (square). Output A^-1 (getrf, getrs of the identity, as NumPy's inv);
    /// singular as for [`Kernel::LuSolve`].
    Inverse,
    /// One input A (square). Output (0-d) `det`, or slogdet's `sign` or `logabsdet`, from
    /// its LU factors (a singular A gives 0, 0 and -inf, as NumPy does).
    Det {
        /// Which value the task outputs.
        #[serde(rename = "result")]
        output: DetOutput,
    },
    /// A step of right-looking blocked LU with partial pivoting on column panels (all n
    /// rows, `w` columns; row block k is rows k w .. k w + w_k, w_k the width of panel k).
    /// A panel of the factorization has n + 2 rows: row n of a factored panel F_k holds,
    /// for each of its columns i, the row that row k w + i was swapped with (LAPACK's ipiv
    /// made global and 0-based); row n + 1 each column's 1-norm in D A (made by the
    /// panel's first version, carried through its later ones: the condition estimate's
    /// column scales, see [`Kernel::LuBack`]).
    /// The factorization is of D A, A's rows equilibrated by powers of two (D: each row's
    /// largest magnitude brought to [1, 2), exactly), so that a pivot's size says how
    /// singular A is whatever the scale of its rows.
    /// Inputs: F_k when `apply` is `Some(k)`, then a panel Q (n or n + 2 rows: of A, or of
    /// a right-hand side; or Q's row blocks, top to bottom: a panel of A read from A's own
    /// blocks), then with `scale` A's row magnitudes (n: each row's largest
    /// |a_ij|). With `scale`, Q is as given (a panel of A or of b) and its rows are first
    /// multiplied by D. With F_k, Q's rows are swapped as F_k's pivots say, its row
    /// block k solved with F_k's unit lower L_kk and the rows below updated (trsm, gemm).
    /// Then, when `factor`, Q's rows from row block k + 1 down (from row 0 without
    /// `apply`) are factored (getrf), and a pivot that is numerically zero (at most n eps
    /// times the largest magnitude above it in its column of U: rounding, as when the
    /// trailing updates of an exactly singular A leave a tiny pivot where an unblocked LU
    /// meets an exact zero) is made an exact zero, for the back substitution (an error)
    /// and the determinant (0) to find. The output has the rows of the output block:
    /// n + 2 for a panel of the factorization, n for a right-hand side.
    LuPanel {
        /// Columns per panel (the last panel may be narrower).
        w: usize,
        /// `Some(k)`: first apply factored panel F_k (the first input) to Q.
        apply: Option<usize>,
        /// Then factor Q's rows from row block k + 1 down (from row 0 without `apply`).
        factor: bool,
        /// Q is a panel of the input: scale its rows by D first (the last input).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        scale: bool,
    },
    /// Back substitution of blocked LU, step `step` (= k, from the last row block up).
    /// Inputs: F_k, Y (n x c, or n). Y's row block k is solved with U_kk (F_k's upper
    /// triangle there; a zero on its diagonal is a singular matrix) and the rows above
    /// updated with the part of U above it (Y_above -= U_above X_k).
    ///
    /// With `estimate`, a step of the condition probe G (solved with D A: its forward
    /// steps do not scale its rows): X_k's rows are then multiplied by their columns'
    /// 1-norms in D A (F_k's last row), so that the probe ends as M^-1 G, M = D A C with
    /// C = diag(1 / ||D A e_j||_1) (every column of M of 1-norm 1, ||M||_1 = 1). The last
    /// step (k = 0) of the solution takes two more inputs, the probe Z before its step 0
    /// and G (n x t): with X_G = M^-1 G, max_i ||X_G e_i||_1 / ||G e_i||_1 is a lower bound
    /// of ||M^-1||_1, its reciprocal at least M's reciprocal condition number; below n eps
    /// A is singular (NumPy's LinAlgError), else Y's step 0 is taken.
    LuBack {
        /// Columns per panel of the factorization.
        w: usize,
        /// k: the row block solved.
        step: usize,
        /// A step of the condition probe (see above).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        estimate: bool,
    },
    /// Panel k's share (one element) of the determinant of a blocked LU, from F_k and A's
    /// row magnitudes (as [`Kernel::LuPanel`]'s): (-1)^swaps prod diag(U_kk) / prod D_ii
    /// over row block k (`det`), its sign (0 when a diagonal entry is 0: `sign`), or the
    /// log of the magnitude (`logabsdet`); the product (or the sum) over the panels is
    /// the whole matrix's.
    LuDet {
        /// Columns per panel of the factorization.
        w: usize,
        /// k: the number of the panel whose F_k is the input.
        step: usize,
        /// Which value's share the task outputs.
        #[serde(rename = "result")]
        output: DetOutput,
    },
}

/// The rows of a [`Kernel::GlmSums`] block below its sums (column 0), in order: what a
/// fit's first pass checks of its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GlmCount {
    /// y's values the loss cannot take (logistic: neither 0, 1 nor NaN; Poisson:
    /// negative; squared: NaN).
    RefusedY,
    /// y's NaN values.
    NanY,
    /// y's infinite values.
    InfY,
    /// y's values equal to 1 (one class of labels is refused).
    OnesY,
    /// y's values above 0 (Poisson targets all 0 are refused).
    PositiveY,
    /// X's NaN values.
    NanX,
    /// X's infinite values.
    InfX,
    /// The sum of the sample weights (the rows' count without them).
    Weight,
    /// Negative sample weights.
    NegativeWeight,
    /// NaN sample weights.
    NanWeight,
    /// Infinite sample weights.
    InfWeight,
}

/// How many rows of counts [`GlmCount`] names.
pub const GLM_COUNTS: u64 = GlmCount::InfWeight as u64 + 1;

/// The loss of a generalized linear model at linear predictor z and target y, its
/// residual r = dloss/dz and Hessian weight s = d²loss/dz² ([`Kernel::GlmSums`]), as
/// scikit-learn defines them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GlmLoss {
    /// log(1 + exp(z)) - y z (without overflow); r = sigmoid(z) - y; s = p (1 - p).
    Logistic,
    /// exp(z) - y z; r = exp(z) - y; s = exp(z).
    Poisson,
    /// (z - y)^2 / 2; r = z - y; s = 1.
    Squared,
    /// Multinomial logistic regression over `classes` (3 or more) classes, scikit-learn's
    /// full parametrisation: each candidate is `classes` consecutive columns of W (and
    /// entries of b), y the class index 0..classes; per row logsumexp(z) - z_y, r = p -
    /// onehot(y) (p the softmax of the row's z), Hessian blocks diag(p) - p p^T.
    Multinomial {
        /// K, the number of classes.
        classes: u32,
    },
}

impl GlmLoss {
    /// The columns of W per candidate: the classes of a multinomial loss, else 1.
    pub fn classes(self) -> usize {
        match self {
            GlmLoss::Multinomial { classes } => classes as usize,
            _ => 1,
        }
    }
}

/// Which block a [`Kernel::Qr`] task outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QrOutput {
    /// The R factor: upper triangular, diagonal non-negative.
    R,
    /// The rows of Q belonging to grid row `part` of the input.
    Q {
        /// The input grid row, from 0.
        part: usize,
    },
    /// The rows of grid row `part` of Q C, C being the task's last input (K x c, K =
    /// min(M, N); rows past K are ignored, as they meet Q's zero columns): a direct-TSQR
    /// leaf's final Q rows, Q_i times its product of Q2 slices up the tree, without
    /// forming Q_i (the reflectors are applied to C; no more work than forming Q alone).
    QProduct {
        /// The input grid row, from 0.
        part: usize,
    },
}

/// Which block a [`Kernel::Lstsq`] task outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LstsqOutput {
    /// The minimum-norm solution x.
    X,
    /// The residual sum of squares of each column of b.
    Residuals,
    /// The rank of a (0-d): how many of its singular values exceed `rcond` times the
    /// largest.
    Rank,
    /// The singular values of a, descending.
    SingularValues,
}

/// Which block a [`Kernel::Svd`] task outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SvdOutput {
    /// The singular values alone (gesdd without vectors: `svdvals`, 2-norms).
    Values,
    /// The singular values of the decomposition that gives U and Vh (`svd(...).S`).
    S,
    /// U: m x k, orthonormal columns.
    U,
    /// Vh: k x n, orthonormal rows.
    Vh,
}

/// Which block a [`Kernel::Det`] task outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DetOutput {
    /// The determinant (`det`).
    Det,
    /// Its sign, -1, 0 or 1 (slogdet's `sign`).
    Sign,
    /// The natural log of its absolute value, -inf when singular (slogdet's `logabsdet`).
    Logabsdet,
}

/// Which discrete Fourier transform a [`Kernel::Fft`] computes along its lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FftKind {
    /// Complex to complex, exp(-2 pi i k n / N) (NumPy's `fft`).
    Forward,
    /// Complex to complex, exp(+2 pi i k n / N), unscaled (NumPy's `ifft` before its 1/N).
    Inverse,
    /// Real lanes of n to their n / 2 + 1 non-negative frequencies (`rfft`).
    Real,
    /// The n / 2 + 1 non-negative frequencies of a Hermitian spectrum to the real lanes of
    /// n (the output block's length along the axis), unscaled (`irfft` before its 1/n);
    /// the imaginary parts of the first (and, n even, the last) are ignored.
    RealInverse,
}

/// The twiddle factor of a four-step FFT ([`Kernel::Fft`]): the lane's length-`n` phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Twiddle {
    /// The axis whose index in the whole array (not the block) multiplies the frequency.
    pub axis: usize,
    /// The length of the whole transform.
    pub n: u64,
}

impl Kernel {
    /// The kernel that combines partial results of this reduction kernel.
    pub fn combiner(&self) -> Kernel {
        match self {
            Kernel::Reduce { op, .. } => Kernel::Reduce {
                op: op.partial(),
                axes: vec![],
            },
            Kernel::Compress { .. } | Kernel::Gather { .. } => Kernel::Overlay,
            Kernel::DistinctCounts { cap } | Kernel::DistinctMerge { cap } => {
                Kernel::DistinctMerge { cap: *cap }
            }
            _ => Kernel::Reduce {
                op: ReduceOp::Sum,
                axes: vec![],
            },
        }
    }

    /// Reads a file (an import): never worth making again in another batch.
    pub fn reads_file(&self) -> bool {
        matches!(
            self,
            Kernel::ImportNpy { .. }
                | Kernel::ImportCsv { .. }
                | Kernel::CsvCount { .. }
                | Kernel::ImportParquet { .. }
                | Kernel::ImportZarr { .. }
        )
    }
}

/// Whether `kernel` is a linear-algebra kernel (the variants from `Qr` on): the function
/// runs it in float64 through LAPACK (`nums_function::linalg`), and its workspace depends
/// on its blocks' shapes ([`workspace_bytes`](super::workspace_bytes)), not only on their
/// sizes.
pub fn is_linalg(kernel: &Kernel) -> bool {
    matches!(
        kernel,
        Kernel::Qr { .. }
            | Kernel::Lstsq { .. }
            | Kernel::Svd { .. }
            | Kernel::Cholesky
            | Kernel::CholeskyBlock { .. }
            | Kernel::TriangularSolve { .. }
            | Kernel::SubtractProducts { .. }
            | Kernel::SubtractGram { .. }
            | Kernel::LuSolve
            | Kernel::Inverse
            | Kernel::LuPanel { .. }
            | Kernel::LuBack { .. }
            | Kernel::LuDet { .. }
            | Kernel::Det { .. }
    )
}

/// Bytes of the pieces a CSV file's row index is made of (cut at line starts): the
/// driver's scan and the functions' count cut it the same way, so the index is the same.
pub const CSV_PIECE: u64 = 4 << 20;

/// The longest ETag a [`Kernel::ExportNpyPart`] output holds (S3's are 34 characters).
pub const ETAG_BYTES: usize = 256;
