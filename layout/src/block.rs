//! The value of one block in memory, and the element types of the thirteen dtypes
//! ([`Elem`]) with NumPy's casts between them.

use std::borrow::Cow;

use ndarray::{ArrayD, IxDyn};
pub use num_complex::Complex;

use crate::meta::DType;
use crate::scalar::{Scalar, f64_to_i64};

/// A complex64 element: two float32s.
pub type C64 = Complex<f32>;
/// A complex128 element: two float64s.
pub type C128 = Complex<f64>;

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
    /// An int8 block ([`DType::Int8`]).
    I8(ArrayD<i8>),
    /// An int16 block ([`DType::Int16`]).
    I16(ArrayD<i16>),
    /// An int32 block ([`DType::Int32`]).
    I32(ArrayD<i32>),
    /// A uint8 block ([`DType::UInt8`]).
    U8(ArrayD<u8>),
    /// A uint16 block ([`DType::UInt16`]).
    U16(ArrayD<u16>),
    /// A uint32 block ([`DType::UInt32`]).
    U32(ArrayD<u32>),
    /// A uint64 block ([`DType::UInt64`]).
    U64(ArrayD<u64>),
    /// A complex64 block ([`DType::Complex64`]).
    C64(ArrayD<C64>),
    /// A complex128 block ([`DType::Complex128`]).
    C128(ArrayD<C128>),
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
            $crate::Block::I8($a) => $crate::Block::I8($body),
            $crate::Block::I16($a) => $crate::Block::I16($body),
            $crate::Block::I32($a) => $crate::Block::I32($body),
            $crate::Block::U8($a) => $crate::Block::U8($body),
            $crate::Block::U16($a) => $crate::Block::U16($body),
            $crate::Block::U32($a) => $crate::Block::U32($body),
            $crate::Block::U64($a) => $crate::Block::U64($body),
            $crate::Block::C64($a) => $crate::Block::C64($body),
            $crate::Block::C128($a) => $crate::Block::C128($body),
        }
    };
}

/// Runs `$body` with `$a` bound to the block's array whatever its dtype (any result type);
/// `Bool(b) => ...` after it gives bool blocks their own body (where `$body` needs a
/// number type).
#[macro_export]
macro_rules! with_block {
    ($b:expr, $a:ident => $body:expr) => {
        $crate::with_block!($b, $a => $body, Bool($a) => $body)
    };
    ($b:expr, $a:ident => $body:expr, Bool($c:ident) => $bool:expr) => {
        match $b {
            $crate::Block::Bool($c) => $bool,
            $crate::Block::F64($a) => $body,
            $crate::Block::F32($a) => $body,
            $crate::Block::I64($a) => $body,
            $crate::Block::I8($a) => $body,
            $crate::Block::I16($a) => $body,
            $crate::Block::I32($a) => $body,
            $crate::Block::U8($a) => $body,
            $crate::Block::U16($a) => $body,
            $crate::Block::U32($a) => $body,
            $crate::Block::U64($a) => $body,
            $crate::Block::C64($a) => $body,
            $crate::Block::C128($a) => $body,
        }
    };
}

/// Runs `$body` with the type name `$t` standing for the element type of dtype `$d`:
/// `for_dtype!(d, T => T::wrap(ArrayD::from_elem(dim, T::default())))`; `bool => ...`
/// after it gives bool its own body (where `$body` needs a number type).
#[macro_export]
macro_rules! for_dtype {
    ($d:expr, $t:ident => $body:expr) => {
        $crate::for_dtype!($d, $t => $body, bool => {
            #[allow(dead_code)]
            type $t = bool;
            $body
        })
    };
    ($d:expr, $t:ident => $body:expr, bool => $bool:expr) => {
        match $d {
            $crate::DType::Bool => $bool,
            $crate::DType::Int8 => {
                type $t = i8;
                $body
            }
            $crate::DType::Int16 => {
                type $t = i16;
                $body
            }
            $crate::DType::Int32 => {
                type $t = i32;
                $body
            }
            $crate::DType::Int64 => {
                type $t = i64;
                $body
            }
            $crate::DType::UInt8 => {
                type $t = u8;
                $body
            }
            $crate::DType::UInt16 => {
                type $t = u16;
                $body
            }
            $crate::DType::UInt32 => {
                type $t = u32;
                $body
            }
            $crate::DType::UInt64 => {
                type $t = u64;
                $body
            }
            $crate::DType::Float32 => {
                type $t = f32;
                $body
            }
            $crate::DType::Float64 => {
                type $t = f64;
                $body
            }
            $crate::DType::Complex64 => {
                type $t = $crate::block::C64;
                $body
            }
            $crate::DType::Complex128 => {
                type $t = $crate::block::C128;
                $body
            }
        }
    };
}

/// The element type of one dtype, with NumPy's casts from every other element type
/// ([`Elem::from_elem`]): ints wrap (`300` as uint8 is 44), floats truncate toward zero
/// (NaN, infinities and values out of range give what NumPy gives on x86-64: int64's and
/// int32's minimum, that minimum's low bytes for 8- and 16-bit ints), a complex gives its
/// real part to a real dtype and is true where either part is non-zero.
pub trait Elem: Copy + Send + Sync + PartialEq + std::fmt::Debug + 'static {
    /// Its dtype.
    const DTYPE: DType;
    /// Zero (false).
    const ZERO: Self;
    /// An array of it as a block.
    fn wrap(a: ArrayD<Self>) -> Block;
    /// The block's array, where the block is of this dtype.
    fn view(b: &Block) -> Option<&ArrayD<Self>>;
    /// As float64 (a complex: its real part; an int rounds to the nearest).
    fn to_f64(self) -> f64;
    /// As float32, rounded once (a complex: its real part).
    fn to_f32(self) -> f32;
    /// As int64: ints exactly or wrapped (uint64 above int64's range), floats as NumPy
    /// casts them ([`f64_to_i64`]).
    fn to_i64(self) -> i64;
    /// Non-zero is true.
    fn to_bool(self) -> bool;
    /// As complex128 (a real: imaginary part 0).
    fn to_c128(self) -> C128;
    /// As complex64, each part rounded once.
    fn to_c64(self) -> C64;
    /// As a Python scalar of its kind.
    fn to_scalar(self) -> Scalar;
    /// `s` cast to this type as NumPy's `astype` casts it.
    fn from_elem<S: Elem>(s: S) -> Self;
    /// A Python scalar as an element of this type (NumPy's cast).
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Bool(b) => Self::from_elem(b),
            Scalar::Int(i) => Self::from_elem(i),
            Scalar::UInt(u) => Self::from_elem(u),
            Scalar::Float(f) => Self::from_elem(f),
            Scalar::Complex(re, im) => Self::from_elem(C128::new(re, im)),
        }
    }
}

/// float64 to int32 as NumPy's cast does on x86-64 (`cvttsd2si`): truncation toward
/// zero; NaN, infinities and values outside int32's range give int32's minimum. NumPy's
/// casts to int8, int16, uint8 and uint16 go through it and keep the low bytes.
pub fn f64_to_i32(f: f64) -> i32 {
    if f.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&f) {
        i32::MIN
    } else {
        f as i32
    }
}

/// float64 to uint64 as NumPy's cast does on x86-64: values in `[0, 2^64)` truncate,
/// negative ones above -2^63 wrap (as int64's bits), +inf and values from 2^64 give 0,
/// NaN, -inf and values from -2^63 down give 2^63.
pub fn f64_to_u64(f: f64) -> u64 {
    const TWO_63: f64 = (1u64 << 63) as f64;
    if f.is_nan() || f <= -TWO_63 {
        1 << 63
    } else if f >= 2.0 * TWO_63 {
        0
    } else if f >= 0.0 {
        f as u64
    } else {
        f as i64 as u64
    }
}

macro_rules! elem_common {
    ($t:ty, $variant:ident, $dtype:ident) => {
        const DTYPE: DType = DType::$dtype;
        fn wrap(a: ArrayD<$t>) -> Block {
            Block::$variant(a)
        }
        fn view(b: &Block) -> Option<&ArrayD<$t>> {
            match b {
                Block::$variant(a) => Some(a),
                _ => None,
            }
        }
    };
}

macro_rules! elem_int {
    ($t:ty, $variant:ident, $dtype:ident, $from_float:expr) => {
        impl Elem for $t {
            elem_common!($t, $variant, $dtype);
            const ZERO: $t = 0;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn to_f32(self) -> f32 {
                self as f32
            }
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn to_bool(self) -> bool {
                self != 0
            }
            fn to_c128(self) -> C128 {
                C128::new(self as f64, 0.0)
            }
            fn to_c64(self) -> C64 {
                C64::new(self as f32, 0.0)
            }
            fn to_scalar(self) -> Scalar {
                Scalar::from_i128(self as i128).expect("an int of at most 64 bits")
            }
            fn from_elem<S: Elem>(s: S) -> $t {
                if S::DTYPE.is_exact() {
                    s.to_i64() as $t
                } else {
                    let f: fn(f64) -> $t = $from_float;
                    f(s.to_f64())
                }
            }
        }
    };
}

elem_int!(i8, I8, Int8, |f| f64_to_i32(f) as i8);
elem_int!(i16, I16, Int16, |f| f64_to_i32(f) as i16);
elem_int!(i32, I32, Int32, f64_to_i32);
elem_int!(i64, I64, Int64, f64_to_i64);
elem_int!(u8, U8, UInt8, |f| f64_to_i32(f) as u8);
elem_int!(u16, U16, UInt16, |f| f64_to_i32(f) as u16);
elem_int!(u32, U32, UInt32, |f| f64_to_i64(f) as u32);
elem_int!(u64, U64, UInt64, f64_to_u64);

impl Elem for bool {
    elem_common!(bool, Bool, Bool);
    const ZERO: bool = false;
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn to_f32(self) -> f32 {
        self as u8 as f32
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn to_bool(self) -> bool {
        self
    }
    fn to_c128(self) -> C128 {
        C128::new(self.to_f64(), 0.0)
    }
    fn to_c64(self) -> C64 {
        C64::new(self.to_f32(), 0.0)
    }
    fn to_scalar(self) -> Scalar {
        Scalar::Bool(self)
    }
    fn from_elem<S: Elem>(s: S) -> bool {
        s.to_bool()
    }
}

macro_rules! elem_float {
    ($t:ty, $variant:ident, $dtype:ident) => {
        impl Elem for $t {
            elem_common!($t, $variant, $dtype);
            const ZERO: $t = 0.0;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn to_f32(self) -> f32 {
                self as f32
            }
            fn to_i64(self) -> i64 {
                f64_to_i64(self as f64)
            }
            fn to_bool(self) -> bool {
                self != 0.0
            }
            fn to_c128(self) -> C128 {
                C128::new(self as f64, 0.0)
            }
            fn to_c64(self) -> C64 {
                C64::new(self as f32, 0.0)
            }
            fn to_scalar(self) -> Scalar {
                Scalar::Float(self as f64)
            }
            fn from_elem<S: Elem>(s: S) -> $t {
                if Self::DTYPE == DType::Float32 {
                    s.to_f32() as $t
                } else {
                    s.to_f64() as $t
                }
            }
        }
    };
}

elem_float!(f32, F32, Float32);
elem_float!(f64, F64, Float64);

macro_rules! elem_complex {
    ($t:ty, $variant:ident, $dtype:ident, $to:ident) => {
        impl Elem for $t {
            elem_common!($t, $variant, $dtype);
            const ZERO: $t = Complex { re: 0.0, im: 0.0 };
            fn to_f64(self) -> f64 {
                self.re as f64
            }
            fn to_f32(self) -> f32 {
                self.re as f32
            }
            fn to_i64(self) -> i64 {
                f64_to_i64(self.re as f64)
            }
            fn to_bool(self) -> bool {
                self.re != 0.0 || self.im != 0.0
            }
            fn to_c128(self) -> C128 {
                C128::new(self.re as f64, self.im as f64)
            }
            fn to_c64(self) -> C64 {
                C64::new(self.re as f32, self.im as f32)
            }
            fn to_scalar(self) -> Scalar {
                Scalar::Complex(self.re as f64, self.im as f64)
            }
            fn from_elem<S: Elem>(s: S) -> $t {
                s.$to()
            }
        }
    };
}

elem_complex!(C64, C64, Complex64, to_c64);
elem_complex!(C128, C128, Complex128, to_c128);

impl Block {
    /// The dtype its variant holds.
    pub fn dtype(&self) -> DType {
        fn of<T: Elem>(_: &ArrayD<T>) -> DType {
            T::DTYPE
        }
        with_block!(self, a => of(a))
    }

    /// Elements along each axis.
    pub fn shape(&self) -> &[usize] {
        with_block!(self, a => a.shape())
    }

    /// Bytes of its values: elements times [`DType::size`].
    pub fn nbytes(&self) -> usize {
        self.shape().iter().product::<usize>() * self.dtype().size()
    }

    /// Writes `src` into the part `info` of this block (of the same dtype, and of
    /// `src`'s shape there); `false`, and nothing written, where the dtypes differ.
    pub fn assign(&mut self, info: &[ndarray::SliceInfoElem], src: &Block) -> bool {
        macro_rules! same_dtype {
            ($($v:ident),*) => {
                match (self, src) {
                    $((Block::$v(d), Block::$v(s)) => d.slice_mut(info).assign(s),)*
                    _ => return false,
                }
            };
        }
        same_dtype!(
            F64, F32, I64, Bool, I8, I16, I32, U8, U16, U32, U64, C64, C128
        );
        true
    }

    /// Blocks of whole rows (every axis but the first whole), in order along the first,
    /// as one block of `shape`: their values one after another, with no zeroed array
    /// first (a fetched array of row blocks: its zeroing and a second pass were a third
    /// of a 500 MB row filter's time), copied on rayon's threads (one thread's copy was a
    /// tenth of it). None where a block is not of `dtype` or the lengths differ.
    pub fn concat_rows(dtype: DType, shape: &[usize], parts: &[&Block]) -> Option<Block> {
        for_dtype!(dtype, T => {
            let views = parts.iter().map(|p| T::view(p).map(|a| a.view())).collect::<Option<Vec<_>>>()?;
            concat_views(shape, &views).map(T::wrap)
        })
    }

    /// The array of element type `T`, where the block is of `T`'s dtype.
    pub fn view<T: Elem>(&self) -> Option<&ArrayD<T>> {
        T::view(self)
    }

    /// The values in C order as little-endian bytes (a chunk's raw bytes, a `.npy` file's
    /// data): borrowed, not copied, where the block is in standard layout on a
    /// little-endian host.
    pub fn le_bytes(&self) -> Cow<'_, [u8]> {
        with_block!(self, a => le_bytes(Cow::Borrowed(a)),
            Bool(a) => Cow::Owned(a.iter().map(|&b| b as u8).collect()))
    }

    /// A block of `dtype` and `shape` from its values in C order as little-endian bytes
    /// (bool: one byte each, non-zero is true); `None` where the bytes are not exactly
    /// the block's.
    pub fn from_le_bytes(dtype: DType, shape: &[usize], raw: &[u8]) -> Option<Block> {
        let n: usize = shape.iter().product();
        if raw.len() != n * dtype.size() {
            return None;
        }
        let dim = IxDyn(shape);
        Some(for_dtype!(dtype, T => T::wrap(from_le::<T>(dim, raw)),
            bool => Block::Bool(ArrayD::from_shape_vec(dim, raw.iter().map(|&b| b != 0).collect()).ok()?)))
    }

    /// A block of `shape` with every element `value` (cast to `dtype` as NumPy casts it).
    pub fn full(dtype: DType, shape: &[usize], value: Scalar) -> Block {
        let dim = IxDyn(shape);
        for_dtype!(dtype, T => T::wrap(ArrayD::from_elem(dim, T::from_scalar(value))))
    }

    /// A block of zeros (false for bool).
    pub fn zeros(dtype: DType, shape: &[usize]) -> Block {
        Block::full(dtype, shape, Scalar::Int(0))
    }

    /// A 0-d block holding `value` in its own dtype ([`Scalar::dtype`]): it broadcasts to
    /// any shape.
    pub fn scalar(value: Scalar) -> Block {
        Block::full(value.dtype(), &[], value)
    }

    /// The first element in C order as a Python scalar of the block's kind (a 0-d block's
    /// value); 0 of the block's dtype where it has no elements.
    pub fn first(&self) -> Scalar {
        with_block!(self, a => a.iter().next().copied().unwrap_or(Elem::ZERO).to_scalar())
    }

    /// Whether the values are bool or ints: NumPy computes such operands exactly, in an
    /// int dtype, where no float joins them.
    pub fn is_integer(&self) -> bool {
        self.dtype().is_exact()
    }

    /// Values as float64 (bool becomes 0/1, a complex its real part), as NumPy does when it
    /// mixes them in arithmetic.
    pub fn to_f64(&self) -> Cow<'_, ArrayD<f64>> {
        match self {
            Block::F64(a) => Cow::Borrowed(a),
            b => with_block!(b, a => Cow::Owned(a.mapv(Elem::to_f64))),
        }
    }

    /// Values as int64 (bool becomes 0/1; floats as [`Block::cast`] converts them).
    pub fn to_i64(&self) -> Cow<'_, ArrayD<i64>> {
        match self {
            Block::I64(a) => Cow::Borrowed(a),
            b => with_block!(b, a => Cow::Owned(a.mapv(Elem::to_i64))),
        }
    }

    /// Values as bool (non-zero is true), as NumPy's logical functions read them.
    pub fn to_bool(&self) -> Cow<'_, ArrayD<bool>> {
        match self {
            Block::Bool(a) => Cow::Borrowed(a),
            b => with_block!(b, a => Cow::Owned(a.mapv(Elem::to_bool))),
        }
    }

    /// The values as an array of `T` (NumPy's cast), borrowed where the block is of `T`'s
    /// dtype.
    pub fn to_elem<T: Elem>(&self) -> Cow<'_, ArrayD<T>> {
        match T::view(self) {
            Some(a) => Cow::Borrowed(a),
            None => with_block!(self, a => Cow::Owned(a.mapv(T::from_elem))),
        }
    }

    /// float64 values cast to `dtype` as NumPy's `astype` casts them (see [`Elem`]).
    pub fn from_f64(dtype: DType, a: ArrayD<f64>) -> Block {
        Block::F64(a).cast(dtype)
    }

    /// This block in `dtype` (no copy where it already is), as NumPy's `astype` casts (see
    /// [`Elem`]).
    pub fn cast(self, dtype: DType) -> Block {
        if self.dtype() == dtype {
            return self;
        }
        for_dtype!(dtype, T => T::wrap(with_block!(&self, a => a.mapv(T::from_elem))))
    }
}

impl Scalar {
    /// The dtype NumPy gives this Python scalar as an array (`np.asarray(v).dtype`):
    /// bool, int64 (uint64 above int64's range), float64 or complex128.
    pub fn dtype(self) -> DType {
        match self {
            Scalar::UInt(_) => DType::UInt64,
            s => DType::of_kind(s.kind()),
        }
    }

    /// This value as an element of `dtype` would hold it (NumPy's cast: ints wrap, float32
    /// rounds once, a complex keeps its real part in a real dtype), in that dtype's kind.
    /// (Here, not in `scalar.rs`: it is a 0-d block's element, and blocks hold scalars.)
    pub fn cast(self, dtype: DType) -> Scalar {
        Block::full(dtype, &[], self).first()
    }
}

/// A number type stored little-endian (chunks, `.npy` files).
pub(crate) trait LeNum: bytemuck::Pod + Elem {
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
le_num!(f64, f32, i64, i32, i16, i8, u64, u32, u16, u8);

macro_rules! le_complex {
    ($($t:ty),*) => {$(
        impl LeNum for Complex<$t> {
            fn from_le(b: &[u8]) -> Self {
                let (re, im) = b.split_at(b.len() / 2);
                Complex::new(<$t>::from_le(re), <$t>::from_le(im))
            }
            fn to_le(self) -> Vec<u8> {
                let mut v = self.re.to_le();
                v.extend(self.im.to_le());
                v
            }
        }
    )*};
}
le_complex!(f32, f64);

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

/// An array of `dim` from its values' little-endian bytes (exactly as many as it holds).
pub(crate) fn from_le<T: LeNum>(dim: IxDyn, raw: &[u8]) -> ArrayD<T> {
    let v: Vec<T> = if cfg!(target_endian = "little") {
        bytemuck::pod_collect_to_vec(raw)
    } else {
        raw.chunks_exact(std::mem::size_of::<T>())
            .map(T::from_le)
            .collect()
    };
    ArrayD::from_shape_vec(dim, v).expect("shape")
}

/// Views of whole rows (every axis but the first whole), in order along the first, as one
/// array of `shape` ([`Block::concat_rows`], the `Assemble` kernel's re-blocking into
/// longer blocks): their values one after another, with no zeroed array first, copied on
/// rayon's threads in pieces. None where the lengths differ.
pub fn concat_views<T: Copy + Send + Sync>(
    shape: &[usize],
    views: &[ndarray::ArrayViewD<'_, T>],
) -> Option<ArrayD<T>> {
    use rayon::prelude::*;
    /// Values a thread copies at a time.
    const PIECE: usize = 1 << 18;
    let total: usize = shape.iter().product();
    if views.iter().map(|a| a.len()).sum::<usize>() != total {
        return None;
    }
    let mut v: Vec<T> = Vec::with_capacity(total);
    let mut rest = &mut v.spare_capacity_mut()[..total];
    let mut jobs = Vec::new();
    for a in views {
        let (out, tail) = std::mem::take(&mut rest).split_at_mut(a.len());
        rest = tail;
        match a.as_slice() {
            Some(s) => jobs.extend(
                out.chunks_mut(PIECE)
                    .zip(s.chunks(PIECE))
                    .map(|(o, s)| (o, Ok(s))),
            ),
            // In its logical (C) order, whatever its memory order.
            None => jobs.push((out, Err(a))),
        }
    }
    jobs.into_par_iter().for_each(|(out, from)| match from {
        Ok(s) => {
            out.write_copy_of_slice(s);
        }
        Err(a) => {
            for (o, x) in out.iter_mut().zip(a.iter()) {
                o.write(*x);
            }
        }
    });
    // SAFETY: the views' lengths sum to `total` (checked above) and each wrote its own
    // range of the first `total` values.
    unsafe { v.set_len(total) };
    ArrayD::from_shape_vec(IxDyn(shape), v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_concatenate_in_c_order_whatever_their_layout() {
        let a = ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        // A transposed (F-order) block of the next rows: read in its logical order.
        let b = ArrayD::from_shape_vec(IxDyn(&[3, 1]), vec![6.0, 7.0, 8.0])
            .unwrap()
            .reversed_axes();
        let (a, b) = (Block::F64(a), Block::F64(b));
        let whole = Block::concat_rows(DType::Float64, &[3, 3], &[&a, &b]).unwrap();
        assert_eq!(
            whole
                .view::<f64>()
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            (0..9).map(f64::from).collect::<Vec<_>>()
        );
        assert!(Block::concat_rows(DType::Int64, &[3, 3], &[&a, &b]).is_none());
        assert!(Block::concat_rows(DType::Float64, &[4, 3], &[&a, &b]).is_none());
        // Parts longer than a thread's piece, and uneven.
        let (n, m) = (700_001, 300_003);
        let a = Block::I64(ArrayD::from_shape_fn(IxDyn(&[n]), |i| i[0] as i64));
        let b = Block::I64(ArrayD::from_shape_fn(IxDyn(&[m]), |i| (n + i[0]) as i64));
        let whole = Block::concat_rows(DType::Int64, &[n + m], &[&a, &b]).unwrap();
        let whole = whole.view::<i64>().unwrap();
        assert!(whole.iter().enumerate().all(|(i, &v)| v == i as i64));
    }

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
        let c = Block::C64(ndarray::arr1(&[C64::new(1.0, -2.0)]).into_dyn());
        let mut w = 1.0f32.to_le_bytes().to_vec();
        w.extend((-2.0f32).to_le_bytes());
        assert_eq!(c.le_bytes(), w);
        // Every dtype back from its bytes.
        for d in DType::ALL {
            let b = Block::from_f64(d, ndarray::arr1(&[1.0, 0.0, 3.0]).into_dyn());
            assert_eq!(b.dtype(), d);
            assert_eq!(b.nbytes(), 3 * d.size());
            assert_eq!(
                Block::from_le_bytes(d, &[3], &b.le_bytes()),
                Some(b.clone())
            );
            assert_eq!(Block::from_le_bytes(d, &[2], &b.le_bytes()), None);
        }
    }

    /// NumPy 2's `astype` on x86-64 (values from NumPy 2.4): ints wrap, floats truncate,
    /// NaN and out-of-range floats give what NumPy gives, complex gives its real part.
    #[test]
    fn casts_follow_numpy() {
        let f = ndarray::arr1(&[
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            300.7,
            -300.7,
            1e10,
            -1.5,
            70000.5,
            -40000.2,
        ])
        .into_dyn();
        let cast = |d: DType| {
            Block::F64(f.clone())
                .cast(d)
                .to_i64()
                .iter()
                .copied()
                .collect::<Vec<_>>()
        };
        assert_eq!(cast(DType::Int8), [0, 0, 0, 44, -44, 0, -1, 112, -64]);
        assert_eq!(cast(DType::Int16), [0, 0, 0, 300, -300, 0, -1, 4464, 25536]);
        assert_eq!(cast(DType::UInt8), [0, 0, 0, 44, 212, 0, 255, 112, 192]);
        let m = i32::MIN as i64;
        assert_eq!(
            cast(DType::Int32),
            [m, m, m, 300, -300, m, -1, 70000, -40000]
        );
        let Block::U64(u) = Block::F64(f.clone()).cast(DType::UInt64) else {
            panic!()
        };
        assert_eq!(
            u.iter().copied().collect::<Vec<_>>(),
            [
                1 << 63,
                0,
                1 << 63,
                300,
                18446744073709551316,
                10_000_000_000,
                u64::MAX,
                70000,
                18446744073709511616
            ]
        );
        let i = Block::I64(ndarray::arr1(&[-1i64, 300, 70000]).into_dyn());
        assert_eq!(
            i.clone()
                .cast(DType::UInt8)
                .to_i64()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [255, 44, 112]
        );
        assert_eq!(
            i.cast(DType::UInt64)
                .to_f64()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [u64::MAX as f64, 300.0, 70000.0]
        );
        let z = Block::C128(ndarray::arr1(&[C128::new(1.7, 2.0), C128::new(0.0, 1.0)]).into_dyn());
        assert_eq!(
            z.clone()
                .cast(DType::Int8)
                .to_i64()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [1, 0]
        );
        assert_eq!(
            z.clone()
                .cast(DType::Bool)
                .to_bool()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [true, true]
        );
        assert_eq!(
            z.clone()
                .cast(DType::Float64)
                .to_f64()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [1.7, 0.0]
        );
        let Block::C64(c) = z.cast(DType::Complex64) else {
            panic!()
        };
        assert_eq!(c[1], C64::new(0.0, 1.0));
        assert_eq!(Scalar::Int(300).cast(DType::UInt8), Scalar::Int(44));
        assert_eq!(Scalar::Int(-1).cast(DType::UInt64), Scalar::UInt(u64::MAX));
        assert_eq!(
            Scalar::Float(2.5).cast(DType::Complex64),
            Scalar::Complex(2.5, 0.0)
        );
        assert_eq!(
            Scalar::Complex(0.0, 2.0).cast(DType::Bool),
            Scalar::Bool(true)
        );
    }
}
