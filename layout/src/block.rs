//! The value of one block in memory.

use std::borrow::Cow;

use ndarray::{ArrayD, IxDyn};

use crate::meta::DType;
use crate::scalar::{Scalar, f64_to_i64};

/// One block's values, in the dtype of its array.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    F64(ArrayD<f64>),
    F32(ArrayD<f32>),
    I64(ArrayD<i64>),
    Bool(ArrayD<bool>),
}

/// Runs `$body` with `$a` bound to the block's array whatever its dtype, and wraps a
/// result array back into the same variant: `map_block!(b, a => a.t().to_owned())`.
#[macro_export]
macro_rules! map_block {
    ($b:expr, $a:ident => $body:expr) => {
        match $b {
            $crate::Block::F64($a) => $crate::Block::F64($body),
            $crate::Block::F32($a) => $crate::Block::F32($body),
            $crate::Block::I64($a) => $crate::Block::I64($body),
            $crate::Block::Bool($a) => $crate::Block::Bool($body),
        }
    };
}

/// Runs `$body` with `$a` bound to the block's array whatever its dtype (any result type).
#[macro_export]
macro_rules! with_block {
    ($b:expr, $a:ident => $body:expr) => {
        match $b {
            $crate::Block::F64($a) => $body,
            $crate::Block::F32($a) => $body,
            $crate::Block::I64($a) => $body,
            $crate::Block::Bool($a) => $body,
        }
    };
}

impl Block {
    pub fn dtype(&self) -> DType {
        match self {
            Block::F64(_) => DType::Float64,
            Block::F32(_) => DType::Float32,
            Block::I64(_) => DType::Int64,
            Block::Bool(_) => DType::Bool,
        }
    }

    pub fn shape(&self) -> &[usize] {
        with_block!(self, a => a.shape())
    }

    pub fn nbytes(&self) -> usize {
        self.shape().iter().product::<usize>() * self.dtype().size()
    }

    /// A block of `shape` with every element `value` (cast to `dtype` as NumPy casts it).
    pub fn full(dtype: DType, shape: &[usize], value: Scalar) -> Block {
        let dim = IxDyn(shape);
        match dtype {
            DType::Float64 => Block::F64(ArrayD::from_elem(dim, value.as_f64())),
            DType::Float32 => Block::F32(ArrayD::from_elem(dim, value.cast(dtype).as_f64() as f32)),
            DType::Int64 => Block::I64(ArrayD::from_elem(dim, value.as_i64())),
            DType::Bool => Block::Bool(ArrayD::from_elem(dim, value.as_bool())),
        }
    }

    /// A block of zeros (false for bool).
    pub fn zeros(dtype: DType, shape: &[usize]) -> Block {
        Block::full(dtype, shape, Scalar::Int(0))
    }

    /// A 0-d block holding `value` in its own kind's dtype: it broadcasts to any shape.
    pub fn scalar(value: Scalar) -> Block {
        Block::full(DType::of_kind(value.kind()), &[], value)
    }

    /// Whether the values are integers (int64 or bool): NumPy computes such operands in
    /// int64, exactly, where no float joins them.
    pub fn is_integer(&self) -> bool {
        matches!(self, Block::I64(_) | Block::Bool(_))
    }

    /// Values as float64 (bool becomes 0/1), as NumPy does when it mixes them in arithmetic.
    pub fn to_f64(&self) -> Cow<'_, ArrayD<f64>> {
        match self {
            Block::F64(a) => Cow::Borrowed(a),
            Block::F32(a) => Cow::Owned(a.mapv(f64::from)),
            Block::I64(a) => Cow::Owned(a.mapv(|v| v as f64)),
            Block::Bool(a) => Cow::Owned(a.mapv(|b| if b { 1.0 } else { 0.0 })),
        }
    }

    /// Values as int64 (bool becomes 0/1; floats as [`Block::cast`] converts them).
    pub fn to_i64(&self) -> Cow<'_, ArrayD<i64>> {
        match self {
            Block::I64(a) => Cow::Borrowed(a),
            Block::Bool(a) => Cow::Owned(a.mapv(i64::from)),
            Block::F64(a) => Cow::Owned(a.mapv(f64_to_i64)),
            Block::F32(a) => Cow::Owned(a.mapv(|v| f64_to_i64(v.into()))),
        }
    }

    /// Values as bool (non-zero is true), as NumPy's logical functions read them.
    pub fn to_bool(&self) -> Cow<'_, ArrayD<bool>> {
        match self {
            Block::Bool(a) => Cow::Borrowed(a),
            Block::F64(a) => Cow::Owned(a.mapv(|v| v != 0.0)),
            Block::F32(a) => Cow::Owned(a.mapv(|v| v != 0.0)),
            Block::I64(a) => Cow::Owned(a.mapv(|v| v != 0)),
        }
    }

    /// float64 values cast to `dtype` as NumPy's `astype` casts them (floats to int64
    /// truncate toward zero; NaN, infinities and out-of-range values become int64's
    /// minimum, as NumPy gives on x86-64).
    pub fn from_f64(dtype: DType, a: ArrayD<f64>) -> Block {
        match dtype {
            DType::Float64 => Block::F64(a),
            DType::Float32 => Block::F32(a.mapv(|v| v as f32)),
            DType::Int64 => Block::I64(a.mapv(f64_to_i64)),
            DType::Bool => Block::Bool(a.mapv(|v| v != 0.0)),
        }
    }

    /// This block in `dtype` (no copy where it already is), as NumPy's `astype` casts.
    pub fn cast(self, dtype: DType) -> Block {
        match (self, dtype) {
            (b, d) if b.dtype() == d => b,
            (Block::I64(a), DType::Bool) => Block::Bool(a.mapv(|v| v != 0)),
            (Block::F32(a), DType::Bool) => Block::Bool(a.mapv(|v| v != 0.0)),
            (Block::Bool(a), DType::Int64) => Block::I64(a.mapv(i64::from)),
            // Rounded once, straight from the int (via float64 it could round twice).
            (Block::I64(a), DType::Float32) => Block::F32(a.mapv(|v| v as f32)),
            (b, d) => Block::from_f64(d, b.to_f64().into_owned()),
        }
    }
}
