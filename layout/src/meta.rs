//! Array metadata and the regular block grid (edge blocks may be ragged).

use serde::{Deserialize, Serialize};

/// Element types a stored array can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    Float64,
    Bool,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::Float64 => 8,
            DType::Bool => 1,
        }
    }
    /// The Zarr v3 / NumPy name.
    pub fn name(self) -> &'static str {
        match self {
            DType::Float64 => "float64",
            DType::Bool => "bool",
        }
    }
    pub fn parse(name: &str) -> Option<DType> {
        match name {
            "float64" | "f8" | "<f8" | "double" => Some(DType::Float64),
            "bool" | "|b1" | "b1" => Some(DType::Bool),
            _ => None,
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
    pub shape: Vec<u64>,
    pub block: Vec<u64>,
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

    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    pub fn len(&self) -> u64 {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

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
