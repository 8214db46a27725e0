//! The value of one block in memory.

use std::borrow::Cow;

use ndarray::{ArrayD, IxDyn};

use crate::meta::DType;
use crate::scalar::{Scalar, f64_to_i64};

/// One block's values, in the dtype of its array.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    /// A float64 block ([`DType::Float64`]).
    F64(ArrayD<f64>),
    /// A float32 block ([`DType::Float32`]).
    F32(ArrayD<f32>),
    /// An int64 block ([`DType::Int64`]).
    I64(ArrayD<i64>),
    /// A bool block ([`DType::Bool`]).
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
    /// The dtype its variant holds.
    pub fn dtype(&self) -> DType {
        match self {
            Block::F64(_) => DType::Float64,
            Block::F32(_) => DType::Float32,
            Block::I64(_) => DType::Int64,
            Block::Bool(_) => DType::Bool,
        }
    }

    /// Elements along each axis.
    pub fn shape(&self) -> &[usize] {
        with_block!(self, a => a.shape())
    }

    /// Bytes of its values: elements times [`DType::size`].
    pub fn nbytes(&self) -> usize {
        self.shape().iter().product::<usize>() * self.dtype().size()
    }

    /// The values in C order as little-endian bytes (a chunk's raw bytes, a `.npy` file's
    /// data): borrowed, not copied, where the block is in standard layout on a
    /// little-endian host.
    pub fn le_bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Block::F64(a) => le_bytes(Cow::Borrowed(a)),
            Block::F32(a) => le_bytes(Cow::Borrowed(a)),
            Block::I64(a) => le_bytes(Cow::Borrowed(a)),
            Block::Bool(a) => Cow::Owned(a.iter().map(|&b| b as u8).collect()),
        }
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

/// A number type stored little-endian (chunks, `.npy` files).
pub(crate) trait LeNum: bytemuck::Pod {
    fn from_le(b: &[u8]) -> Self;
    fn to_le(self) -> Vec<u8>;
}

macro_rules! le_num {
    ($($t:ty),*) => {$(
        impl LeNum for $t {
            fn from_le(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("element size"))
            }
            fn to_le(self) -> Vec<u8> {
                self.to_le_bytes().to_vec()
            }
        }
    )*};
}
le_num!(f64, f32, i64);

/// An array's values in C order as little-endian bytes; a view of its memory where it
/// is in standard layout on a little-endian host.
pub(crate) fn le_bytes<T: LeNum>(a: Cow<'_, ArrayD<T>>) -> Cow<'_, [u8]> {
    if !cfg!(target_endian = "little") {
        return Cow::Owned(a.iter().flat_map(|v| v.to_le()).collect());
    }
    match a {
        Cow::Borrowed(p) if p.is_standard_layout() => {
            Cow::Borrowed(bytemuck::cast_slice(p.as_slice().expect("standard layout")))
        }
        p => {
            let c = p.as_standard_layout();
            Cow::Owned(bytemuck::cast_slice(c.as_slice().expect("standard layout")).to_vec())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn le_bytes_are_c_order_little_endian_and_borrowed_when_they_can_be() {
        let a = ndarray::arr2(&[[1.5f64, -2.0], [3.0, 4.25]]).into_dyn();
        let want = |v: &[f64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let b = Block::F64(a.clone());
        assert!(matches!(b.le_bytes(), Cow::Borrowed(_)));
        assert_eq!(b.le_bytes(), want(&[1.5, -2.0, 3.0, 4.25]));
        // Fortran order in memory: still C order out.
        let t = Block::F64(a.t().to_owned());
        assert_eq!(t.le_bytes(), want(&[1.5, 3.0, -2.0, 4.25]));
        let i = Block::I64(ndarray::arr1(&[-1i64, 258]).into_dyn());
        let mut w = (-1i64).to_le_bytes().to_vec();
        w.extend(258i64.to_le_bytes());
        assert_eq!(i.le_bytes(), w);
        let f = Block::F32(ndarray::arr1(&[0.5f32]).into_dyn());
        assert_eq!(f.le_bytes(), 0.5f32.to_le_bytes().to_vec());
        let z = Block::Bool(ndarray::arr1(&[true, false]).into_dyn());
        assert_eq!(z.le_bytes(), vec![1u8, 0]);
    }
}
