//! Array metadata and the regular block grid (edge blocks may be ragged).

use serde::{Deserialize, Serialize};

/// Element types a stored array can have: the Array API's thirteen, named as NumPy and
/// Zarr v3 name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// NumPy's `bool`: one byte per element, 0 or 1.
    Bool,
    /// Signed 8-bit integers (NumPy's `int8`).
    Int8,
    /// Signed 16-bit integers (NumPy's `int16`).
    Int16,
    /// Signed 32-bit integers (NumPy's `int32`).
    Int32,
    /// Signed 64-bit integers (NumPy's `int64`).
    Int64,
    /// Unsigned 8-bit integers (NumPy's `uint8`).
    #[serde(rename = "uint8")]
    UInt8,
    /// Unsigned 16-bit integers (NumPy's `uint16`).
    #[serde(rename = "uint16")]
    UInt16,
    /// Unsigned 32-bit integers (NumPy's `uint32`).
    #[serde(rename = "uint32")]
    UInt32,
    /// Unsigned 64-bit integers (NumPy's `uint64`).
    #[serde(rename = "uint64")]
    UInt64,
    /// IEEE 754 single precision (NumPy's `float32`).
    Float32,
    /// IEEE 754 double precision (NumPy's `float64`), the dtype most kernels compute in.
    Float64,
    /// Complex numbers of two float32s, real part first (NumPy's `complex64`).
    Complex64,
    /// Complex numbers of two float64s, real part first (NumPy's `complex128`).
    Complex128,
}

/// What kind of Python scalar a literal is: NumPy 2 (NEP 50) lets it take the array's
/// dtype where the kind fits, so `x32 * 2.0` stays float32 and `i8 + 1` stays int8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ScalarKind {
    /// `True` or `False`; the lowest kind (kinds are ordered: bool < int < float <
    /// complex, and a scalar keeps an array's dtype when its kind is at most the dtype's).
    Bool,
    /// A Python int: keeps an int, float or complex array's dtype (NumPy raises where it
    /// does not fit an int dtype), makes a bool array int64.
    Int,
    /// A Python float: keeps a float or complex array's dtype, makes others float64.
    Float,
    /// A Python complex (`2j`): keeps a complex array's dtype, makes a float32 array
    /// complex64 and others complex128.
    Complex,
}

impl DType {
    /// Every dtype, in NumPy's order of kinds (bool, signed, unsigned, float, complex).
    pub const ALL: [DType; 13] = [
        DType::Bool,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Float32,
        DType::Float64,
        DType::Complex64,
        DType::Complex128,
    ];

    /// The names of every dtype, comma-separated: for error messages.
    pub fn supported() -> String {
        DType::ALL.map(DType::name).join(", ")
    }

    /// Bytes per element, in memory and in a chunk before compression (bool: 1).
    pub fn size(self) -> usize {
        use DType::*;
        match self {
            Bool | Int8 | UInt8 => 1,
            Int16 | UInt16 => 2,
            Int32 | UInt32 | Float32 => 4,
            Int64 | UInt64 | Float64 | Complex64 => 8,
            Complex128 => 16,
        }
    }

    /// The Zarr v3 / NumPy name.
    pub fn name(self) -> &'static str {
        use DType::*;
        match self {
            Bool => "bool",
            Int8 => "int8",
            Int16 => "int16",
            Int32 => "int32",
            Int64 => "int64",
            UInt8 => "uint8",
            UInt16 => "uint16",
            UInt32 => "uint32",
            UInt64 => "uint64",
            Float32 => "float32",
            Float64 => "float64",
            Complex64 => "complex64",
            Complex128 => "complex128",
        }
    }

    /// The `.npy` descr of this dtype (little-endian): `|b1`, `|i1`, `<u2`, `<f8`, `<c16`.
    pub fn descr(self) -> String {
        let (code, order) = match self.kind() {
            ScalarKind::Bool => ("b", '|'),
            ScalarKind::Int if self.is_unsigned() => ("u", '<'),
            ScalarKind::Int => ("i", '<'),
            ScalarKind::Float => ("f", '<'),
            ScalarKind::Complex => ("c", '<'),
        };
        let order = if self.size() == 1 { '|' } else { order };
        format!("{order}{code}{}", self.size())
    }

    /// The dtype a name means: the NumPy / Zarr v3 name ([`DType::name`]), NumPy's
    /// other names (`double`, `single`, `int`, `uint`, `byte`, `ubyte`, `short`, `intc`,
    /// `long`, `complex`, `cdouble`, ...), or a type code with or without its byte order
    /// (`f8`, `<f8`, `|b1`, `i1`, `<u2`, `c16`, `?`); `None` for any other (unsupported)
    /// type, a big-endian code included.
    pub fn parse(name: &str) -> Option<DType> {
        use DType::*;
        Some(match name {
            "bool" | "bool_" | "?" => Bool,
            "int8" | "byte" => Int8,
            "int16" | "short" => Int16,
            "int32" | "intc" => Int32,
            "int64" | "int" | "long" | "longlong" | "intp" => Int64,
            "uint8" | "ubyte" => UInt8,
            "uint16" | "ushort" => UInt16,
            "uint32" | "uintc" => UInt32,
            "uint64" | "uint" | "ulong" | "ulonglong" | "uintp" => UInt64,
            "float32" | "single" => Float32,
            "float64" | "double" | "float" => Float64,
            "complex64" | "csingle" => Complex64,
            "complex128" | "cdouble" | "complex" => Complex128,
            code => {
                let code = code.strip_prefix(['<', '|', '=']).unwrap_or(code);
                match code {
                    "b1" => Bool,
                    "i1" => Int8,
                    "i2" => Int16,
                    "i4" => Int32,
                    "i8" => Int64,
                    "u1" => UInt8,
                    "u2" => UInt16,
                    "u4" => UInt32,
                    "u8" => UInt64,
                    "f4" => Float32,
                    "f8" => Float64,
                    "c8" => Complex64,
                    "c16" => Complex128,
                    _ => return None,
                }
            }
        })
    }

    /// [`DType::parse`], or the error that names the name and every supported one.
    pub fn parse_named(name: &str) -> Result<DType, String> {
        DType::parse(name).ok_or_else(|| {
            format!(
                "nums-cloud has no dtype {name}: its dtypes are {}",
                DType::supported()
            )
        })
    }

    /// Float32 or float64.
    pub fn is_float(self) -> bool {
        matches!(self, DType::Float32 | DType::Float64)
    }

    /// Complex64 or complex128.
    pub fn is_complex(self) -> bool {
        matches!(self, DType::Complex64 | DType::Complex128)
    }

    /// A signed or unsigned integer dtype (not bool).
    pub fn is_int(self) -> bool {
        self.kind() == ScalarKind::Int
    }

    /// uint8, uint16, uint32 or uint64.
    pub fn is_unsigned(self) -> bool {
        matches!(
            self,
            DType::UInt8 | DType::UInt16 | DType::UInt32 | DType::UInt64
        )
    }

    /// Bool or an integer dtype: exact values, computed without rounding.
    pub fn is_exact(self) -> bool {
        self.kind() <= ScalarKind::Int
    }

    /// The smallest and largest value of an integer dtype (bool: 0 and 1; `None` for
    /// floats and complex).
    pub fn int_range(self) -> Option<(i128, i128)> {
        use DType::*;
        Some(match self {
            Bool => (0, 1),
            Int8 => (i8::MIN.into(), i8::MAX.into()),
            Int16 => (i16::MIN.into(), i16::MAX.into()),
            Int32 => (i32::MIN.into(), i32::MAX.into()),
            Int64 => (i64::MIN.into(), i64::MAX.into()),
            UInt8 => (0, u8::MAX.into()),
            UInt16 => (0, u16::MAX.into()),
            UInt32 => (0, u32::MAX.into()),
            UInt64 => (0, u64::MAX.into()),
            _ => return None,
        })
    }

    /// The kind of Python scalar this dtype holds.
    pub fn kind(self) -> ScalarKind {
        use DType::*;
        match self {
            Bool => ScalarKind::Bool,
            Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => ScalarKind::Int,
            Float32 | Float64 => ScalarKind::Float,
            Complex64 | Complex128 => ScalarKind::Complex,
        }
    }

    /// The dtype a Python scalar of kind `k` has as an array.
    pub fn of_kind(k: ScalarKind) -> DType {
        match k {
            ScalarKind::Bool => DType::Bool,
            ScalarKind::Int => DType::Int64,
            ScalarKind::Float => DType::Float64,
            ScalarKind::Complex => DType::Complex128,
        }
    }

    /// NumPy's result type of two array dtypes (`np.result_type`): the Array API's
    /// promotion table, and NumPy's rules where the table has none (a signed with an
    /// unsigned int: the next signed int that holds both, float64 for uint64; an int with
    /// a float or complex: float32/complex64 for 8- and 16-bit ints, else 64-bit).
    pub fn promote(self, other: DType) -> DType {
        use DType::*;
        use ScalarKind as K;
        let (a, b) = (self, other);
        if a == b || b == Bool {
            return a;
        }
        if a == Bool {
            return b;
        }
        let wider = |x: DType, y: DType| if x.size() >= y.size() { x } else { y };
        match (a.kind(), b.kind()) {
            (K::Int, K::Int) if a.is_unsigned() == b.is_unsigned() => wider(a, b),
            (K::Int, K::Int) => {
                let (s, u) = if a.is_unsigned() { (b, a) } else { (a, b) };
                if s.size() > u.size() {
                    s
                } else {
                    match u.size() {
                        1 => Int16,
                        2 => Int32,
                        4 => Int64,
                        _ => Float64,
                    }
                }
            }
            // An int joins a float or complex: 8- and 16-bit ints fit a float32's
            // mantissa, wider ones need float64's.
            (K::Int, _) | (_, K::Int) => {
                let (i, f) = if a.kind() == K::Int { (a, b) } else { (b, a) };
                if i.size() <= 2 {
                    f
                } else if f.is_complex() {
                    Complex128
                } else {
                    Float64
                }
            }
            (K::Float, K::Float) => Float64,
            (K::Complex, K::Complex) => Complex128,
            _ => {
                // A float with a complex: complex64 only for float32 with complex64.
                let (f, c) = if a.is_float() { (a, b) } else { (b, a) };
                if f == Float32 && c == Complex64 {
                    Complex64
                } else {
                    Complex128
                }
            }
        }
    }

    /// NumPy's "safe" cast (`np.can_cast(self, to)`): every value of `self` has one in
    /// `to` (an int64's float64 too, as NumPy counts it). That is exactly when promoting
    /// `self` with `to` gives `to`.
    pub fn can_cast(self, to: DType) -> bool {
        self.promote(to) == to
    }

    /// NumPy's `result_type` of arrays and dtypes (`dtypes`) with Python scalars
    /// (`scalars`, NEP 50's weak ones): the dtypes promoted, then each scalar's kind at
    /// their precision; scalars alone give the dtype of their widest kind. `None` when
    /// both are empty (NumPy raises).
    pub fn result_type(dtypes: &[DType], scalars: &[ScalarKind]) -> Option<DType> {
        let Some(d) = dtypes.iter().copied().reduce(DType::promote) else {
            return scalars.iter().max().map(|&k| DType::of_kind(k));
        };
        Some(scalars.iter().fold(d, |d, &k| d.promote_scalar(k)))
    }

    /// Whether this dtype is of the Array API's `kind` (`isdtype`): `bool`, `signed
    /// integer`, `unsigned integer`, `integral`, `real floating`, `complex floating` or
    /// `numeric`; `None` for another name.
    pub fn is_kind(self, kind: &str) -> Option<bool> {
        let k = self.kind();
        Some(match kind {
            "bool" => k == ScalarKind::Bool,
            "signed integer" => k == ScalarKind::Int && !self.is_unsigned(),
            "unsigned integer" => self.is_unsigned(),
            "integral" => k == ScalarKind::Int,
            "real floating" => k == ScalarKind::Float,
            "complex floating" => k == ScalarKind::Complex,
            "numeric" => k != ScalarKind::Bool,
            _ => return None,
        })
    }

    /// NumPy's result type of an array of this dtype with a Python scalar (NEP 50): the
    /// array's dtype where the scalar's kind is at most the array's (the value is then
    /// converted, and NumPy raises where a Python int does not fit an int dtype), else the
    /// scalar's kind at the array's precision (float32 with a complex is complex64).
    pub fn promote_scalar(self, k: ScalarKind) -> DType {
        if k <= self.kind() {
            return self;
        }
        match k {
            ScalarKind::Complex if self == DType::Float32 => DType::Complex64,
            k => DType::of_kind(k),
        }
    }

    /// The dtype NumPy gives true division and the float results of reductions and linear
    /// algebra (`/`, `mean`, `var`, `linalg.solve`): float64 for bool and ints; floats and
    /// complex keep theirs.
    pub fn to_float(self) -> DType {
        if self.is_exact() {
            DType::Float64
        } else {
            self
        }
    }

    /// The dtype NumPy gives a float ufunc (`exp`, `sqrt`, `sin`) of this dtype: float64
    /// for 32- and 64-bit ints, float32 for int16 and uint16, and float32 for bool, int8
    /// and uint8 where NumPy gives float16 (which nums-cloud does not store: float32 holds
    /// each of its values); floats and complex keep theirs.
    pub fn to_float_fn(self) -> DType {
        if self.is_exact() && self.size() <= 2 {
            DType::Float32
        } else {
            self.to_float()
        }
    }

    /// The real dtype of a complex one (complex64: float32); others are their own.
    pub fn real(self) -> DType {
        match self {
            DType::Complex64 => DType::Float32,
            DType::Complex128 => DType::Float64,
            d => d,
        }
    }

    /// The dtype NumPy's `sum` and `prod` accumulate and answer in: int64 for bool and
    /// signed ints, uint64 for unsigned ints; floats and complex keep theirs.
    pub fn sum_dtype(self) -> DType {
        match self.kind() {
            ScalarKind::Bool => DType::Int64,
            ScalarKind::Int if self.is_unsigned() => DType::UInt64,
            ScalarKind::Int => DType::Int64,
            _ => self,
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

#[cfg(test)]
mod dtype_tests {
    use super::*;
    use DType::*;

    /// NumPy 2.4's `np.result_type` (the pytest table checks every pair against NumPy).
    #[test]
    fn promotion_is_numpys() {
        for (a, b, want) in [
            (Int64, UInt64, Float64),
            (UInt8, Int8, Int16),
            (UInt16, Int8, Int32),
            (UInt32, Int32, Int64),
            (UInt8, Int16, Int16),
            (Bool, Int8, Int8),
            (Int8, Float32, Float32),
            (UInt16, Float32, Float32),
            (Int32, Float32, Float64),
            (Int16, Complex64, Complex64),
            (Int32, Complex64, Complex128),
            (Float64, Complex64, Complex128),
            (Float32, Complex64, Complex64),
            (UInt64, Complex64, Complex128),
        ] {
            assert_eq!(a.promote(b), want, "{a} {b}");
            assert_eq!(b.promote(a), want, "{b} {a}");
        }
        assert_eq!(Int8.promote_scalar(ScalarKind::Int), Int8);
        assert_eq!(Bool.promote_scalar(ScalarKind::Int), Int64);
        assert_eq!(UInt8.promote_scalar(ScalarKind::Float), Float64);
        assert_eq!(Float32.promote_scalar(ScalarKind::Complex), Complex64);
        assert_eq!(Int8.promote_scalar(ScalarKind::Complex), Complex128);
        assert_eq!(Complex64.promote_scalar(ScalarKind::Float), Complex64);
    }

    /// NumPy 2.4's `np.can_cast(a, b)` of every pair, a row per `a` in [`DType::ALL`]'s
    /// order (`1`: it can).
    #[test]
    fn safe_casts_are_numpys() {
        const TABLE: [&str; 13] = [
            "1111111111111", // bool
            ".1111....1111", // int8
            "..111....1111", // int16
            "...11.....1.1", // int32
            "....1.....1.1", // int64
            "..11111111111", // uint8
            "...11.1111111", // uint16
            "....1..11.1.1", // uint32
            "........1.1.1", // uint64
            ".........1111", // float32
            "..........1.1", // float64
            "...........11", // complex64
            "............1", // complex128
        ];
        for (a, row) in DType::ALL.iter().zip(TABLE) {
            for (b, c) in DType::ALL.iter().zip(row.chars()) {
                assert_eq!(a.can_cast(*b), c == '1', "can_cast({a}, {b})");
            }
        }
    }

    /// NumPy 2.4's `np.result_type` with Python scalars (NEP 50) and of scalars alone.
    #[test]
    fn result_types_are_numpys() {
        use ScalarKind as K;
        assert_eq!(DType::result_type(&[Int8], &[K::Int]), Some(Int8));
        assert_eq!(DType::result_type(&[Int8], &[K::Float]), Some(Float64));
        assert_eq!(
            DType::result_type(&[Float32, Int16], &[K::Complex]),
            Some(Complex64)
        );
        assert_eq!(DType::result_type(&[UInt8, Int8], &[]), Some(Int16));
        assert_eq!(DType::result_type(&[], &[K::Int, K::Float]), Some(Float64));
        assert_eq!(DType::result_type(&[], &[K::Bool]), Some(Bool));
        assert_eq!(DType::result_type(&[], &[]), None);
        assert_eq!(UInt16.is_kind("integral"), Some(true));
        assert_eq!(UInt16.is_kind("signed integer"), Some(false));
        assert_eq!(Bool.is_kind("numeric"), Some(false));
        assert_eq!(Complex64.is_kind("real floating"), Some(false));
        assert_eq!(Float32.is_kind("floating"), None);
    }

    #[test]
    fn names_and_descrs_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::parse(d.name()), Some(d));
            assert_eq!(DType::parse(&d.descr()), Some(d), "{}", d.descr());
        }
        assert_eq!(UInt8.descr(), "|u1");
        assert_eq!(Complex128.descr(), "<c16");
        assert_eq!(DType::parse(">f8"), None);
        assert_eq!(DType::parse("float16"), None);
    }
}
