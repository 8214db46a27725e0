//! Array metadata and the regular block grid (edge blocks may be ragged).

use serde::{Deserialize, Serialize};

/// Element types a stored array can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// NumPy's `bool`: one byte per element, 0 or 1.
    Bool,
    /// Signed 64-bit integers (NumPy's `int64`).
    Int64,
    /// IEEE 754 single precision (NumPy's `float32`).
    Float32,
    /// IEEE 754 double precision (NumPy's `float64`), the dtype most kernels compute in.
    Float64,
}

/// What kind of Python scalar a literal is: NumPy 2 (NEP 50) lets it take the array's
/// dtype where the kind fits, so `x32 * 2.0` stays float32 and `i64 + 1` stays int64.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ScalarKind {
    /// `True` or `False`; the lowest kind (kinds are ordered: bool < int < float, and a
    /// scalar keeps an array's dtype when its kind is at most the dtype's).
    Bool,
    /// A Python int: keeps an int64 or float array's dtype, makes a bool array int64.
    Int,
    /// A Python float: keeps a float array's dtype, makes others float64.
    Float,
}

impl DType {
    /// Bytes per element, in memory and in a chunk before compression (bool: 1).
    pub fn size(self) -> usize {
        match self {
            DType::Float64 | DType::Int64 => 8,
            DType::Float32 => 4,
            DType::Bool => 1,
        }
    }
    /// The Zarr v3 / NumPy name.
    pub fn name(self) -> &'static str {
        match self {
            DType::Float64 => "float64",
            DType::Float32 => "float32",
            DType::Int64 => "int64",
            DType::Bool => "bool",
        }
    }
    /// The dtype a name means: the NumPy / Zarr v3 name ([`DType::name`]), a `.npy`
    /// descr (`<f8`, `|b1`, ...), a short code (`f8`, `i8`) or `double`, `single`, `int`;
    /// `None` for any other (unsupported) type.
    pub fn parse(name: &str) -> Option<DType> {
        match name {
            "float64" | "f8" | "<f8" | "double" => Some(DType::Float64),
            "float32" | "f4" | "<f4" | "single" => Some(DType::Float32),
            "int64" | "i8" | "<i8" | "int" => Some(DType::Int64),
            "bool" | "|b1" | "b1" => Some(DType::Bool),
            _ => None,
        }
    }

    /// Float32 or float64.
    pub fn is_float(self) -> bool {
        matches!(self, DType::Float32 | DType::Float64)
    }

    /// The kind of Python scalar this dtype holds.
    pub fn kind(self) -> ScalarKind {
        match self {
            DType::Bool => ScalarKind::Bool,
            DType::Int64 => ScalarKind::Int,
            DType::Float32 | DType::Float64 => ScalarKind::Float,
        }
    }

    /// The dtype a Python scalar of kind `k` has as an array.
    pub fn of_kind(k: ScalarKind) -> DType {
        match k {
            ScalarKind::Bool => DType::Bool,
            ScalarKind::Int => DType::Int64,
            ScalarKind::Float => DType::Float64,
        }
    }

    /// NumPy's result type of two array dtypes (`np.result_type`).
    pub fn promote(self, other: DType) -> DType {
        use DType::*;
        match (self, other) {
            (a, b) if a == b => a,
            (Float64, _) | (_, Float64) => Float64,
            (Float32, Int64) | (Int64, Float32) => Float64,
            (Float32, _) | (_, Float32) => Float32,
            (Int64, _) | (_, Int64) => Int64,
            _ => Bool,
        }
    }

    /// NumPy's result type of an array of this dtype with a Python scalar (NEP 50).
    pub fn promote_scalar(self, k: ScalarKind) -> DType {
        if k <= self.kind() {
            self
        } else if k == ScalarKind::Int {
            DType::Int64
        } else {
            DType::Float64
        }
    }

    /// The dtype NumPy gives a float function (`exp`, `sqrt`, `/`) of this dtype; bool and
    /// int64 compute in float64 (NumPy gives float16 for bool, which nums-cloud does not store).
    pub fn to_float(self) -> DType {
        if self == DType::Float32 {
            DType::Float32
        } else {
            DType::Float64
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Shape, block shape and dtype of an array: everything needed to find and decode its blocks.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ArrayMeta {
    /// Elements along each axis (empty for a 0-d array).
    pub shape: Vec<u64>,
    /// Elements along each axis of a full block: the Zarr chunk shape, one entry per axis
    /// of `shape`. [`ArrayMeta::new`] clamps it to `1..=extent`; an array read from another
    /// writer's `zarr.json` keeps its chunk shape, which may exceed the extent.
    pub block: Vec<u64>,
    /// Element type of every block.
    pub dtype: DType,
}

impl ArrayMeta {
    /// A new array; a block dimension is clamped to 1..=extent so that tiny arrays get one block.
    pub fn new(shape: Vec<u64>, block: Vec<u64>, dtype: DType) -> Self {
        assert_eq!(shape.len(), block.len(), "block rank must equal array rank");
        let block = shape
            .iter()
            .zip(&block)
            .map(|(&s, &b)| b.min(s).max(1))
            .collect();
        ArrayMeta {
            shape,
            block,
            dtype,
        }
    }

    /// Number of axes (0 for a scalar).
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (1 for a 0-d array, 0 when an axis is empty).
    pub fn len(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Whether the array has no elements (some axis has extent 0).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of all elements in memory, uncompressed.
    pub fn nbytes(&self) -> u64 {
        self.len() * self.dtype.size() as u64
    }

    /// Number of blocks along each axis.
    pub fn grid(&self) -> Vec<u64> {
        self.shape
            .iter()
            .zip(&self.block)
            .map(|(&s, &b)| s.div_ceil(b))
            .collect()
    }

    /// Number of blocks in the grid (1 for a 0-d array, 0 for an empty one).
    pub fn num_blocks(&self) -> u64 {
        self.grid().iter().product()
    }

    /// First element of block `idx` along each axis.
    pub fn block_origin(&self, idx: &[u64]) -> Vec<u64> {
        idx.iter().zip(&self.block).map(|(&i, &b)| i * b).collect()
    }

    /// Shape of block `idx`; the last block along an axis holds the remainder.
    pub fn block_shape(&self, idx: &[u64]) -> Vec<usize> {
        idx.iter()
            .zip(&self.block)
            .zip(&self.shape)
            .map(|((&i, &b), &s)| (s.min((i + 1) * b) - i * b) as usize)
            .collect()
    }

    /// Bytes of block `idx` in memory, uncompressed (an edge block counts only its own
    /// elements).
    pub fn block_nbytes(&self, idx: &[u64]) -> u64 {
        self.block_shape(idx).iter().product::<usize>() as u64 * self.dtype.size() as u64
    }

    /// Largest block's size in bytes (the full, un-ragged block).
    pub fn max_block_nbytes(&self) -> u64 {
        self.block.iter().product::<u64>() * self.dtype.size() as u64
    }

    /// All block indices in C (row-major) order.
    pub fn blocks(&self) -> Vec<Vec<u64>> {
        let grid = self.grid();
        let n: u64 = grid.iter().product();
        (0..n).map(|lin| unravel(lin, &grid)).collect()
    }

    /// Row-major linear number of block `idx`.
    pub fn block_linear(&self, idx: &[u64]) -> u64 {
        ravel(idx, &self.grid())
    }
}

/// NumPy's broadcast of two shapes (trailing axes aligned), or None where they clash.
/// Used for array shapes by the driver and for block shapes by the kernels.
pub fn broadcast<T: Copy + PartialEq + From<u8>>(a: &[T], b: &[T]) -> Option<Vec<T>> {
    let n = a.len().max(b.len());
    let one = T::from(1);
    let at = |s: &[T], d: usize| {
        if d + s.len() >= n {
            s[d + s.len() - n]
        } else {
            one
        }
    };
    (0..n)
        .map(|d| match (at(a, d), at(b, d)) {
            (x, y) if x == y => Some(x),
            (x, y) if x == one => Some(y),
            (x, y) if y == one => Some(x),
            _ => None,
        })
        .collect()
}

/// Along one axis: the output positions `p` in `0..n` whose source coordinate `p * step`
/// lies in `o..o + len` (a source block at offset `o`), as an inclusive range; None if
/// there are none. Slicing with any non-zero step, re-blocking and concatenation use it.
pub fn strided_overlap(o: i64, len: i64, step: i64, n: i64) -> Option<(i64, i64)> {
    let (lo, hi) = (o, o + len - 1);
    let (p_lo, p_hi) = if step > 0 {
        (ceil_div(lo, step), hi.div_euclid(step))
    } else {
        // p * step in [lo, hi]  <=>  p in [-hi / |step|, -lo / |step|]
        (ceil_div(-hi, -step), (-lo).div_euclid(-step))
    };
    let (p_lo, p_hi) = (p_lo.max(0), p_hi.min(n - 1));
    (len > 0 && p_lo <= p_hi).then_some((p_lo, p_hi))
}

fn ceil_div(a: i64, b: i64) -> i64 {
    a.div_euclid(b) + (a.rem_euclid(b) != 0) as i64
}

/// Row-major multi-index of linear index `lin` in `shape`.
pub fn unravel(mut lin: u64, shape: &[u64]) -> Vec<u64> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = lin % shape[d];
        lin /= shape[d];
    }
    idx
}

/// Row-major linear index of multi-index `idx` in `shape`.
pub fn ravel(idx: &[u64], shape: &[u64]) -> u64 {
    idx.iter().zip(shape).fold(0, |acc, (&i, &s)| acc * s + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ragged_grid() {
        let m = ArrayMeta::new(vec![7, 5], vec![3, 4], DType::Float64);
        assert_eq!(m.grid(), vec![3, 2]);
        assert_eq!(m.block_shape(&[0, 0]), vec![3, 4]);
        assert_eq!(m.block_shape(&[2, 1]), vec![1, 1]);
        assert_eq!(m.block_origin(&[2, 1]), vec![6, 4]);
        assert_eq!(m.blocks().len(), 6);
        assert_eq!(m.blocks()[3], vec![1, 1]);
        assert_eq!(m.block_linear(&[1, 1]), 3);
        let total: u64 = m.blocks().iter().map(|b| m.block_nbytes(b)).sum();
        assert_eq!(total, m.nbytes());
    }

    #[test]
    fn scalar_has_one_block() {
        let m = ArrayMeta::new(vec![], vec![], DType::Float64);
        assert_eq!(m.num_blocks(), 1);
        assert_eq!(m.blocks(), vec![Vec::<u64>::new()]);
        assert_eq!(m.block_shape(&[]), Vec::<usize>::new());
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn block_clamped_to_extent() {
        let m = ArrayMeta::new(vec![2, 9], vec![100, 4], DType::Bool);
        assert_eq!(m.block, vec![2, 4]);
        assert_eq!(m.grid(), vec![1, 3]);
    }
}
