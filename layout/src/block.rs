//! The value of one block in memory.

use ndarray::{ArrayD, IxDyn};

use crate::meta::DType;

/// One block's values, in the dtype of its array.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    F64(ArrayD<f64>),
    Bool(ArrayD<bool>),
}

impl Block {
    pub fn dtype(&self) -> DType {
        match self {
            Block::F64(_) => DType::Float64,
            Block::Bool(_) => DType::Bool,
        }
    }

    pub fn shape(&self) -> &[usize] {
        match self {
            Block::F64(a) => a.shape(),
            Block::Bool(a) => a.shape(),
        }
    }

    pub fn nbytes(&self) -> usize {
        self.shape().iter().product::<usize>() * self.dtype().size()
    }

    /// A block of `shape` with every element `value` (cast to `dtype`).
    pub fn full(dtype: DType, shape: &[usize], value: f64) -> Block {
        match dtype {
            DType::Float64 => Block::F64(ArrayD::from_elem(IxDyn(shape), value)),
            DType::Bool => Block::Bool(ArrayD::from_elem(IxDyn(shape), value != 0.0)),
        }
    }

    /// Values as float64 (bool becomes 0/1), as NumPy does when it mixes them in arithmetic.
    pub fn to_f64(&self) -> std::borrow::Cow<'_, ArrayD<f64>> {
        match self {
            Block::F64(a) => std::borrow::Cow::Borrowed(a),
            Block::Bool(a) => std::borrow::Cow::Owned(a.mapv(|b| if b { 1.0 } else { 0.0 })),
        }
    }
}
