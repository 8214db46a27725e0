//! The wire format between driver and function: a batch of block tasks, the invocation
//! payload that carries it, and the stats a function measures.

use serde::{Deserialize, Serialize};

use crate::block::C128;
use crate::meta::ArrayMeta;
use crate::num::{self, Int};
use crate::scalar::Scalar;
use crate::store::StoreSpec;

/// An array a batch touches: where it is stored and how it is blocked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArrayRef {
    /// Path of the Zarr array, relative to the store root.
    pub path: String,
    /// Shape, block shape and dtype. The function encodes and decodes the array's chunks
    /// as nums-cloud writes them for this metadata ([`crate::StoredArray::new`]), so an
    /// array read in place must be stored that way.
    pub meta: ArrayMeta,
    /// An input the job reads in place (outside its prefix): read only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// Chunks never written are the fill value, as Zarr allows (an array nums-cloud did not
    /// write). Otherwise a missing chunk is an error naming the array, block and key:
    /// nums-cloud writes every block of its arrays.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sparse: bool,
    /// A job intermediate (not an output or an import): written with the store's
    /// intermediate tag, counted apart, removed when the job ends.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub intermediate: bool,
}

/// One block of one of the batch's arrays.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BlockRef {
    /// Index into [`Batch::arrays`].
    pub array: u32,
    /// The block's position in its array's block grid, one entry per axis
    /// ([`ArrayMeta::grid`]).
    pub index: Vec<u64>,
}

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

/// An elementwise function of one array ([`Kernel::Unary`]), as NumPy computes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `~x` or `logical_not(x)` of a bool array: true where `x` is false (0).
    Not,
    /// `abs(x)`.
    Abs,
    /// `exp(x)`.
    Exp,
    /// `expm1(x)`: `exp(x) - 1`, accurate near 0.
    Expm1,
    /// `log(x)`: the natural logarithm.
    Log,
    /// `log1p(x)`: `log(1 + x)`, accurate near 0.
    Log1p,
    /// `sqrt(x)`.
    Sqrt,
    /// `square(x)`: `x * x`.
    Square,
    /// `sign(x)`: -1, 0 or 1 (NaN stays NaN).
    Sign,
    /// `sin(x)`, `x` in radians.
    Sin,
    /// `cos(x)`, `x` in radians.
    Cos,
    /// `tan(x)`, `x` in radians.
    Tan,
    /// `tanh(x)`.
    Tanh,
    /// `floor(x)`: rounded toward -inf.
    Floor,
    /// `ceil(x)`: rounded toward +inf.
    Ceil,
    /// The logistic function `1 / (1 + exp(-x))`.
    Sigmoid,
    /// `isnan(x)`, bool.
    IsNan,
    /// `isfinite(x)`, bool: neither NaN nor infinite.
    IsFinite,
    /// `isinf(x)`, bool: +inf or -inf.
    IsInf,
    /// `real(x)`: a complex's real part (a real value is its own).
    Real,
    /// `imag(x)`: a complex's imaginary part (0 for a real value).
    Imag,
    /// `conj(x)`: the complex conjugate (a real value is its own).
    Conj,
    /// `angle(x)`: a complex's argument in radians, `atan2(imag, real)` (a real value:
    /// 0, or pi where it is negative).
    Angle,
    /// `trunc(x)`: rounded toward 0.
    Trunc,
    /// `rint(x)`: rounded to the nearest integer, halves to even (`round`'s step).
    Rint,
    /// `log2(x)`.
    Log2,
    /// `log10(x)`.
    Log10,
    /// `signbit(x)`, bool: the sign bit is set (-0.0 and -NaN too).
    Signbit,
    /// `~x` of an integer array: its bits inverted.
    Invert,
    /// `sinh(x)`.
    Sinh,
    /// `cosh(x)`.
    Cosh,
    /// `arcsin(x)`.
    Asin,
    /// `arccos(x)`.
    Acos,
    /// `arctan(x)`.
    Atan,
    /// `arcsinh(x)`.
    Asinh,
    /// `arccosh(x)`.
    Acosh,
    /// `arctanh(x)`.
    Atanh,
}

impl UnaryOp {
    /// NumPy's name of the function, for messages.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "negative",
            UnaryOp::Not => "logical_not",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Expm1 => "expm1",
            UnaryOp::Log => "log",
            UnaryOp::Log1p => "log1p",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Square => "square",
            UnaryOp::Sign => "sign",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tan => "tan",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::IsNan => "isnan",
            UnaryOp::IsFinite => "isfinite",
            UnaryOp::IsInf => "isinf",
            UnaryOp::Real => "real",
            UnaryOp::Imag => "imag",
            UnaryOp::Conj => "conj",
            UnaryOp::Angle => "angle",
            UnaryOp::Trunc => "trunc",
            UnaryOp::Rint => "rint",
            UnaryOp::Log2 => "log2",
            UnaryOp::Log10 => "log10",
            UnaryOp::Signbit => "signbit",
            UnaryOp::Invert => "invert",
            UnaryOp::Sinh => "sinh",
            UnaryOp::Cosh => "cosh",
            UnaryOp::Asin => "arcsin",
            UnaryOp::Acos => "arccos",
            UnaryOp::Atan => "arctan",
            UnaryOp::Asinh => "arcsinh",
            UnaryOp::Acosh => "arccosh",
            UnaryOp::Atanh => "arctanh",
        }
    }

    /// The op on one float64, as NumPy computes it (`Not` gives 1.0 or 0.0).
    pub fn apply(self, v: f64) -> f64 {
        match self {
            UnaryOp::Neg => -v,
            UnaryOp::Not => (v == 0.0) as u8 as f64,
            UnaryOp::Abs => v.abs(),
            UnaryOp::Exp => v.exp(),
            UnaryOp::Expm1 => v.exp_m1(),
            UnaryOp::Log => v.ln(),
            UnaryOp::Log1p => v.ln_1p(),
            UnaryOp::Sqrt => v.sqrt(),
            UnaryOp::Square => v * v,
            UnaryOp::Sign if v.is_nan() => v,
            UnaryOp::Sign => (v > 0.0) as u8 as f64 - (v < 0.0) as u8 as f64,
            UnaryOp::Sin => v.sin(),
            UnaryOp::Cos => v.cos(),
            UnaryOp::Tan => v.tan(),
            UnaryOp::Tanh => v.tanh(),
            UnaryOp::Floor => v.floor(),
            UnaryOp::Ceil => v.ceil(),
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-v).exp()),
            UnaryOp::IsNan => v.is_nan() as u8 as f64,
            UnaryOp::IsFinite => v.is_finite() as u8 as f64,
            UnaryOp::IsInf => v.is_infinite() as u8 as f64,
            UnaryOp::Real | UnaryOp::Conj => v,
            UnaryOp::Imag => 0.0,
            UnaryOp::Angle => 0.0f64.atan2(v),
            UnaryOp::Trunc => v.trunc(),
            UnaryOp::Rint => v.round_ties_even(),
            UnaryOp::Log2 => v.log2(),
            UnaryOp::Log10 => v.log10(),
            UnaryOp::Signbit => v.is_sign_negative() as u8 as f64,
            UnaryOp::Invert => f64::NAN,
            UnaryOp::Sinh => v.sinh(),
            UnaryOp::Cosh => v.cosh(),
            UnaryOp::Asin => v.asin(),
            UnaryOp::Acos => v.acos(),
            UnaryOp::Atan => v.atan(),
            UnaryOp::Asinh => v.asinh(),
            UnaryOp::Acosh => v.acosh(),
            UnaryOp::Atanh => v.atanh(),
        }
    }

    /// The op on one int64 as NumPy computes it where it keeps ints (wrapping: `-x` and
    /// `abs(x)` of int64's minimum are that minimum) or gives bool (1 or 0); `None` for the
    /// float functions (`exp`, `sqrt`, ...), which compute in floats.
    pub fn apply_i64(self, v: i64) -> Option<i64> {
        self.apply_int(v)
    }

    /// The op on one integer of any width, as [`UnaryOp::apply_i64`] (see [`Int`]).
    #[inline]
    pub fn apply_int<T: Int>(self, v: T) -> Option<T> {
        let b = |x: bool| if x { T::ONE } else { T::ZERO };
        Some(match self {
            UnaryOp::Neg => v.wneg(),
            UnaryOp::Abs => v.wabs(),
            UnaryOp::Square => v.wmul(v),
            UnaryOp::Sign => v.sign(),
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Trunc | UnaryOp::Real | UnaryOp::Conj => v,
            UnaryOp::Invert => v.invert(),
            UnaryOp::Signbit => b(v.negative()),
            UnaryOp::Imag => T::ZERO,
            UnaryOp::Not => b(v == T::ZERO),
            UnaryOp::IsNan | UnaryOp::IsInf => T::ZERO,
            UnaryOp::IsFinite => T::ONE,
            _ => return None,
        })
    }

    /// The op on one complex128 as NumPy computes it. Ops with a real result (`abs`,
    /// `angle`, `real`, `imag`) give it as the real part, predicates give 1 or 0; `floor`,
    /// `ceil` and `~` (which NumPy refuses for complex) give NaN.
    pub fn apply_complex(self, z: C128) -> C128 {
        let real = |v: f64| C128::new(v, 0.0);
        let one = C128::new(1.0, 0.0);
        match self {
            UnaryOp::Neg => -z,
            UnaryOp::Abs => real(z.norm()),
            UnaryOp::Exp => num::cexp(z),
            UnaryOp::Expm1 => num::c_expm1(z),
            UnaryOp::Log => num::clog(z),
            UnaryOp::Log1p => num::c_log1p(z),
            UnaryOp::Sqrt => num::csqrt(z),
            UnaryOp::Square => z * z,
            UnaryOp::Sign => num::c_sign(z),
            UnaryOp::Sin => num::csin(z),
            UnaryOp::Cos => num::ccos(z),
            UnaryOp::Tan => num::ctan(z),
            UnaryOp::Tanh => num::ctanh(z),
            UnaryOp::Sigmoid => num::c_div(one, one + num::cexp(-z)),
            UnaryOp::IsNan => real(num::c_isnan(z) as u8 as f64),
            UnaryOp::IsFinite => real((z.re.is_finite() && z.im.is_finite()) as u8 as f64),
            UnaryOp::IsInf => real((z.re.is_infinite() || z.im.is_infinite()) as u8 as f64),
            UnaryOp::Real => real(z.re),
            UnaryOp::Imag => real(z.im),
            UnaryOp::Conj => z.conj(),
            UnaryOp::Angle => real(z.im.atan2(z.re)),
            UnaryOp::Rint => C128::new(z.re.round_ties_even(), z.im.round_ties_even()),
            UnaryOp::Log2 => num::c_log_base(z, std::f64::consts::LOG2_E),
            UnaryOp::Log10 => num::c_log_base(z, std::f64::consts::LOG10_E),
            UnaryOp::Sinh => num::csinh(z),
            UnaryOp::Cosh => num::ccosh(z),
            UnaryOp::Asin => num::casin(z),
            UnaryOp::Acos => num::cacos(z),
            UnaryOp::Atan => num::catan(z),
            UnaryOp::Asinh => num::casinh(z),
            UnaryOp::Acosh => num::cacosh(z),
            UnaryOp::Atanh => num::catanh(z),
            UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Trunc
            | UnaryOp::Signbit
            | UnaryOp::Invert
            | UnaryOp::Not => real(f64::NAN),
        }
    }

    /// Of a complex input, gives a real (float) result: `abs`, `angle`, `real`, `imag`.
    pub fn is_real_of_complex(self) -> bool {
        matches!(
            self,
            UnaryOp::Abs | UnaryOp::Angle | UnaryOp::Real | UnaryOp::Imag
        )
    }

    /// Gives bool whatever the input (`~`, `isnan`, ...).
    pub fn is_predicate(self) -> bool {
        matches!(
            self,
            UnaryOp::Not | UnaryOp::IsNan | UnaryOp::IsFinite | UnaryOp::IsInf | UnaryOp::Signbit
        )
    }

    /// Keeps an int64 (or bool, for `abs`) input's dtype instead of computing in floats,
    /// as NumPy does.
    pub fn keeps_ints(self) -> bool {
        matches!(
            self,
            UnaryOp::Neg
                | UnaryOp::Abs
                | UnaryOp::Square
                | UnaryOp::Sign
                | UnaryOp::Real
                | UnaryOp::Imag
                | UnaryOp::Conj
                | UnaryOp::Invert
        )
    }

    /// Keeps an integer input's dtype although it is no arithmetic: NumPy 2's rounding
    /// functions of ints are the ints.
    pub fn rounds(self) -> bool {
        matches!(self, UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Trunc)
    }
}

/// An elementwise function of two operands ([`Kernel::Binary`], [`Kernel::Scalar`]), as
/// Python's operators and NumPy's functions compute it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BinaryOp {
    /// `x + y`.
    Add,
    /// `x - y`.
    Sub,
    /// `x * y`.
    Mul,
    /// `x / y`: true division, a float even of ints.
    Div,
    /// `x ** y`.
    Pow,
    /// `x // y`: Python's floor division (rounds toward -inf).
    FloorDiv,
    /// `x % y`: Python's modulo (the remainder takes the divisor's sign).
    Mod,
    /// `maximum(x, y)`: the larger; NaN if either is NaN; `y` on a tie (so
    /// `maximum(-0.0, 0.0)` is 0.0, NumPy's bits).
    Maximum,
    /// `minimum(x, y)`: the smaller; NaN if either is NaN; `y` on a tie.
    Minimum,
    /// `clip`'s lower bound when both bounds are numbers: the larger, NaN if either is;
    /// `x` on a tie (NumPy's clip with scalar bounds keeps a -0.0 at a bound of 0).
    ClipLow,
    /// `clip`'s upper bound when both bounds are numbers: the smaller; `x` on a tie.
    ClipHigh,
    /// `x < y`.
    Lt,
    /// `x <= y`.
    Le,
    /// `x > y`.
    Gt,
    /// `x >= y`.
    Ge,
    /// `x == y`.
    Eq,
    /// `x != y`.
    Ne,
    /// `x & y`: logical and (bool operands).
    And,
    /// `x | y`: logical or (bool operands).
    Or,
    /// `x ^ y`: logical exclusive or (bool operands).
    Xor,
    /// `x & y` of integers: bitwise and.
    BitAnd,
    /// `x | y` of integers: bitwise or.
    BitOr,
    /// `x ^ y` of integers: bitwise exclusive or.
    BitXor,
    /// `x << y` of integers (NumPy's: 0 past the width).
    Shl,
    /// `x >> y` of integers (arithmetic for signed types).
    Shr,
    /// `arctan2(x, y)`: the angle of the point (y, x), in radians.
    Atan2,
    /// `hypot(x, y)`: `sqrt(x*x + y*y)` without overflow.
    Hypot,
    /// `copysign(x, y)`: `x`'s magnitude with `y`'s sign.
    Copysign,
    /// `logaddexp(x, y)`: `log(exp(x) + exp(y))` without overflow.
    LogAddExp,
    /// `nextafter(x, y)`: the next representable value after `x` toward `y`.
    NextAfter,
}

/// NumPy's float floor division and remainder (`npy_divmod`), bit for bit: the remainder
/// takes the divisor's sign (+0.0 or -0.0 when exact), an infinite dividend gives NaN, a
/// finite one over an infinite divisor of the other sign gives -1 and the divisor.
pub fn divmod(a: f64, b: f64) -> (f64, f64) {
    let mut m = a % b; // C's fmod
    if b == 0.0 {
        return (a / b, m);
    }
    let mut div = (a - m) / b;
    if m != 0.0 {
        if (b < 0.0) != (m < 0.0) {
            m += b;
            div -= 1.0;
        }
    } else {
        m = 0.0f64.copysign(b);
    }
    let floor = if div != 0.0 {
        let f = div.floor();
        if div - f > 0.5 { f + 1.0 } else { f }
    } else {
        0.0f64.copysign(a / b)
    };
    (floor, m)
}

impl BinaryOp {
    /// Comparisons and logic give bool (arithmetic keeps its operands' promoted dtype).
    pub fn is_predicate(self) -> bool {
        matches!(
            self,
            BinaryOp::Lt
                | BinaryOp::Le
                | BinaryOp::Gt
                | BinaryOp::Ge
                | BinaryOp::Eq
                | BinaryOp::Ne
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
        )
    }

    /// `& | ^` on bool (on integers they are [`BinaryOp::is_bitwise`]).
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor)
    }

    /// `& | ^` as they are for operands of this dtype: logical of bools, bitwise of
    /// integers (other ops are themselves).
    pub fn for_bools(self, bools: bool) -> BinaryOp {
        match (self, bools) {
            (BinaryOp::BitAnd, true) => BinaryOp::And,
            (BinaryOp::BitOr, true) => BinaryOp::Or,
            (BinaryOp::BitXor, true) => BinaryOp::Xor,
            (BinaryOp::And, false) => BinaryOp::BitAnd,
            (BinaryOp::Or, false) => BinaryOp::BitOr,
            (BinaryOp::Xor, false) => BinaryOp::BitXor,
            (op, _) => op,
        }
    }

    /// The integer-only ops: `& | ^ << >>` of integers.
    pub fn is_bitwise(self) -> bool {
        matches!(
            self,
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor | BinaryOp::Shl | BinaryOp::Shr
        )
    }

    /// The float functions of two operands (`arctan2`, `hypot`, ...): ints compute in
    /// floats, complex has no loop.
    pub fn is_float_fn(self) -> bool {
        matches!(
            self,
            BinaryOp::Atan2
                | BinaryOp::Hypot
                | BinaryOp::Copysign
                | BinaryOp::LogAddExp
                | BinaryOp::NextAfter
        )
    }

    /// The op on two float64s as NumPy computes it; predicates give 1.0 or 0.0.
    pub fn apply(self, x: f64, y: f64) -> f64 {
        let b = |v: bool| v as u8 as f64;
        match self {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
            BinaryOp::Pow => x.powf(y),
            BinaryOp::FloorDiv => divmod(x, y).0,
            BinaryOp::Mod => divmod(x, y).1,
            // NumPy's maximum and minimum propagate NaN (`x` where `x` is, else `y`).
            BinaryOp::Maximum => maximum(x, y),
            BinaryOp::Minimum => minimum(x, y),
            BinaryOp::ClipLow if y.is_nan() => y,
            BinaryOp::ClipLow => maximum(y, x),
            BinaryOp::ClipHigh if y.is_nan() => y,
            BinaryOp::ClipHigh => minimum(y, x),
            BinaryOp::Lt => b(x < y),
            BinaryOp::Le => b(x <= y),
            BinaryOp::Gt => b(x > y),
            BinaryOp::Ge => b(x >= y),
            BinaryOp::Eq => b(x == y),
            BinaryOp::Ne => b(x != y),
            BinaryOp::And => b(x != 0.0 && y != 0.0),
            BinaryOp::Or => b(x != 0.0 || y != 0.0),
            BinaryOp::Xor => b((x != 0.0) != (y != 0.0)),
            BinaryOp::Atan2 => x.atan2(y),
            BinaryOp::Hypot => x.hypot(y),
            BinaryOp::Copysign => x.copysign(y),
            BinaryOp::LogAddExp => logaddexp(x, y),
            BinaryOp::NextAfter => nextafter(x, y),
            // Integer-only ops (refused for floats when the graph is built).
            BinaryOp::BitAnd
            | BinaryOp::BitOr
            | BinaryOp::BitXor
            | BinaryOp::Shl
            | BinaryOp::Shr => f64::NAN,
        }
    }

    /// The op on two int64s as NumPy computes it: wrapping on overflow, `x // 0` and
    /// `x % 0` are 0 (NumPy warns), predicates give 1 or 0. `None` where NumPy gives no
    /// int: true division (a float) and a negative power (NumPy raises, see
    /// [`NEGATIVE_POWER`]).
    pub fn apply_i64(self, x: i64, y: i64) -> Option<i64> {
        match self.compare(x, y) {
            Some(b) => Some(b as i64),
            None => self.apply_int(x, y),
        }
    }

    /// The arithmetic op on two integers of one type as NumPy computes it (see [`Int`]);
    /// `None` for true division, a negative power and the predicates.
    #[inline]
    pub fn apply_int<T: Int>(self, x: T, y: T) -> Option<T> {
        Some(match self {
            BinaryOp::Add => x.wadd(y),
            BinaryOp::Sub => x.wsub(y),
            BinaryOp::Mul => x.wmul(y),
            BinaryOp::Pow if y.negative() => return None,
            BinaryOp::Pow => x.wpow(y),
            BinaryOp::FloorDiv => x.floor_div(y),
            BinaryOp::Mod => x.modulo(y),
            BinaryOp::Maximum | BinaryOp::ClipLow => x.max(y),
            BinaryOp::Minimum | BinaryOp::ClipHigh => x.min(y),
            BinaryOp::BitAnd => x.bits(y, 0),
            BinaryOp::BitOr => x.bits(y, 1),
            BinaryOp::BitXor => x.bits(y, 2),
            BinaryOp::Shl => x.shl(y),
            BinaryOp::Shr => x.shr(y),
            _ => return None,
        })
    }

    /// A predicate on two ordered values (comparisons; `& | ^` on their truth); `None`
    /// for the arithmetic ops.
    #[inline]
    pub fn compare<T: PartialOrd + Default>(self, x: T, y: T) -> Option<bool> {
        let t = |v: T| v != T::default();
        Some(match self {
            BinaryOp::Lt => x < y,
            BinaryOp::Le => x <= y,
            BinaryOp::Gt => x > y,
            BinaryOp::Ge => x >= y,
            BinaryOp::Eq => x == y,
            BinaryOp::Ne => x != y,
            BinaryOp::And => t(x) && t(y),
            BinaryOp::Or => t(x) || t(y),
            BinaryOp::Xor => t(x) != t(y),
            _ => return None,
        })
    }

    /// The arithmetic op on two complex128s as NumPy computes it (its complex division
    /// and power, lexicographic `maximum`/`minimum`); `//` and `%` (which NumPy refuses
    /// for complex) give NaN.
    #[inline]
    pub fn apply_complex(self, x: C128, y: C128) -> C128 {
        match self {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => num::c_div(x, y),
            BinaryOp::Pow => num::c_pow(x, y),
            BinaryOp::Maximum => num::c_maximum(x, y),
            BinaryOp::Minimum => num::c_minimum(x, y),
            // NumPy's complex clip keeps an element's own NaN, else takes a NaN bound.
            BinaryOp::ClipLow | BinaryOp::ClipHigh if num::c_isnan(x) => x,
            BinaryOp::ClipLow if num::c_isnan(y) => y,
            BinaryOp::ClipLow => num::c_maximum(y, x),
            BinaryOp::ClipHigh if num::c_isnan(y) => y,
            BinaryOp::ClipHigh => num::c_minimum(y, x),
            op => match op.compare_complex(x, y) {
                Some(b) => C128::new(b as u8 as f64, 0.0),
                None => C128::new(f64::NAN, f64::NAN),
            },
        }
    }

    /// A predicate on two complex128s: NumPy's lexicographic order (real parts first;
    /// false where a NaN takes part), equality of both parts.
    #[inline]
    pub fn compare_complex(self, x: C128, y: C128) -> Option<bool> {
        let t = |v: C128| v.re != 0.0 || v.im != 0.0;
        Some(match self {
            BinaryOp::Lt => num::c_lt(x, y),
            BinaryOp::Le => num::c_le(x, y),
            BinaryOp::Gt => num::c_lt(y, x),
            BinaryOp::Ge => num::c_le(y, x),
            BinaryOp::Eq => x == y,
            BinaryOp::Ne => x != y,
            BinaryOp::And => t(x) && t(y),
            BinaryOp::Or => t(x) || t(y),
            BinaryOp::Xor => t(x) != t(y),
            _ => return None,
        })
    }

    /// The operator as Python writes it (`+`, `//`, `**`, ...), or NumPy's function name
    /// for `maximum` and `minimum`: for messages.
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Pow => "**",
            BinaryOp::FloorDiv => "//",
            BinaryOp::Mod => "%",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::ClipLow | BinaryOp::ClipHigh => "clip",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::And => "&",
            BinaryOp::Or => "|",
            BinaryOp::Xor | BinaryOp::BitXor => "^",
            BinaryOp::BitAnd => "&",
            BinaryOp::BitOr => "|",
            BinaryOp::Shl => "<<",
            BinaryOp::Shr => ">>",
            BinaryOp::Atan2 => "arctan2",
            BinaryOp::Hypot => "hypot",
            BinaryOp::Copysign => "copysign",
            BinaryOp::LogAddExp => "logaddexp",
            BinaryOp::NextAfter => "nextafter",
        }
    }
}

/// NumPy's `logaddexp` (`npy_logaddexp`): `log(exp(x) + exp(y))` without overflow; equal
/// infinities give themselves.
pub fn logaddexp(x: f64, y: f64) -> f64 {
    if x == y {
        // Handles infinities of the same sign without NaN.
        return x + std::f64::consts::LN_2;
    }
    let d = x - y;
    if d > 0.0 {
        x + (-d).exp().ln_1p()
    } else if d <= 0.0 {
        y + d.exp().ln_1p()
    } else {
        d // NaN
    }
}

/// C's `nextafter` of float64.
pub fn nextafter(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        return x + y;
    }
    if x == y {
        return y;
    }
    if x == 0.0 {
        return f64::from_bits(1).copysign(y);
    }
    let up = (y > x) == (x > 0.0);
    let bits = x.to_bits();
    f64::from_bits(if up { bits + 1 } else { bits - 1 })
}

/// C's `nextafterf`: [`nextafter`] in float32's steps.
pub fn nextafter_f32(x: f32, y: f32) -> f32 {
    if x.is_nan() || y.is_nan() {
        return x + y;
    }
    if x == y {
        return y;
    }
    if x == 0.0 {
        return f32::from_bits(1).copysign(y);
    }
    let up = (y > x) == (x > 0.0);
    let bits = x.to_bits();
    f32::from_bits(if up { bits + 1 } else { bits - 1 })
}

/// NumPy's `maximum` of two floats, bit for bit: `x` if it is NaN or larger, else `y` (a
/// NaN `y`, or `y` on a tie of 0.0 and -0.0).
#[inline]
pub fn maximum(x: f64, y: f64) -> f64 {
    if x > y || x.is_nan() { x } else { y }
}

/// NumPy's `minimum` of two floats: `x` if it is NaN or smaller, else `y`.
#[inline]
pub fn minimum(x: f64, y: f64) -> f64 {
    if x < y || x.is_nan() { x } else { y }
}

/// NumPy's `fmax` (`nanmax`'s step): the larger, a NaN only if both are; `x` on a tie.
#[inline]
fn fmax(x: f64, y: f64) -> f64 {
    if x >= y || y.is_nan() { x } else { y }
}

/// NumPy's `fmin` (`nanmin`'s step): the smaller, a NaN only if both are; `x` on a tie.
#[inline]
fn fmin(x: f64, y: f64) -> f64 {
    if x <= y || y.is_nan() { x } else { y }
}

/// NumPy's error for an int64 raised to a negative int64 power.
pub const NEGATIVE_POWER: &str = "Integers to negative integer powers are not allowed";

/// Python's floor division of int64s as NumPy computes it: `x // 0` is 0, and
/// `MIN // -1` wraps to MIN.
#[inline]
pub fn floor_div_i64(x: i64, y: i64) -> i64 {
    x.floor_div(y)
}

/// Python's modulo of int64s (the remainder takes the divisor's sign) as NumPy computes
/// it: `x % 0` is 0.
#[inline]
pub fn mod_i64(x: i64, y: i64) -> i64 {
    x.modulo(y)
}

/// `x ** y` for `y >= 0`, wrapping on overflow (so modulo 2^64, whatever the order of the
/// products: NumPy's bits); by squaring.
#[inline]
pub fn pow_i64(x: i64, y: i64) -> i64 {
    x.wpow(y)
}

/// How a reduction combines values. Each is associative, so any grouping of blocks into
/// partial results gives the same value (up to float rounding, in a fixed order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReduceOp {
    /// `sum`.
    Sum,
    /// `prod`.
    Prod,
    /// `min`: NaN if any value is NaN.
    Min,
    /// `max`: NaN if any value is NaN.
    Max,
    /// `all`: true where every value is non-zero.
    All,
    /// `any`: true where some value is non-zero.
    Any,
    /// Like Sum, Prod, Min, Max but NaN values are skipped (NumPy's `nansum` etc.).
    NanSum,
    /// `nanprod`: the product of the values that are not NaN.
    NanProd,
    /// `nanmin`: the smallest value that is not NaN.
    NanMin,
    /// `nanmax`: the largest value that is not NaN.
    NanMax,
}

impl ReduceOp {
    /// The value of a reduction over nothing. For `nanmin`/`nanmax` it is NaN, which
    /// [`ReduceOp::apply`] skips: a slice with no value that is not NaN gives NaN, as
    /// NumPy's does, and its NaN stays skippable when partial results are combined.
    pub fn identity(self) -> f64 {
        match self {
            ReduceOp::Sum | ReduceOp::NanSum | ReduceOp::Any => 0.0,
            ReduceOp::Prod | ReduceOp::NanProd | ReduceOp::All => 1.0,
            ReduceOp::Min => f64::INFINITY,
            ReduceOp::Max => f64::NEG_INFINITY,
            ReduceOp::NanMin | ReduceOp::NanMax => f64::NAN,
        }
    }

    /// Combines an accumulated value with the next one, as NumPy does (Min and Max
    /// propagate NaN, the nan variants skip it).
    pub fn apply(self, acc: f64, v: f64) -> f64 {
        match self {
            ReduceOp::Sum => acc + v,
            ReduceOp::Prod => acc * v,
            // A fold of minimum/maximum (the later value on a tie of zeros, NumPy's bits).
            ReduceOp::Min => minimum(acc, v),
            ReduceOp::Max => maximum(acc, v),
            ReduceOp::All => (acc != 0.0 && v != 0.0) as u8 as f64,
            ReduceOp::Any => (acc != 0.0 || v != 0.0) as u8 as f64,
            // NumPy's nan variants add 0 or multiply by 1 for a NaN (`-0.0 + 0.0` is 0.0).
            ReduceOp::NanSum if v.is_nan() => acc + 0.0,
            ReduceOp::NanSum => acc + v,
            ReduceOp::NanProd if v.is_nan() => acc * 1.0,
            ReduceOp::NanProd => acc * v,
            // fmin/fmax skip a NaN: NumPy's nanmin/nanmax (the earlier value on a tie).
            ReduceOp::NanMin => fmin(acc, v),
            ReduceOp::NanMax => fmax(acc, v),
        }
    }

    /// The op that combines this reduction's partial results (and folds a block's second
    /// and later axes): the plain sum or product for `nansum`/`nanprod`. Only the input's
    /// own NaNs are missing values; a NaN in a partial result was made by the data
    /// (inf - inf, 0 * inf) and propagates, as NumPy's (which sums with NaNs made 0).
    /// `nanmin`/`nanmax` keep skipping: their partial is NaN only where every value was.
    pub fn partial(self) -> ReduceOp {
        match self {
            ReduceOp::NanSum => ReduceOp::Sum,
            ReduceOp::NanProd => ReduceOp::Prod,
            op => op,
        }
    }

    /// NumPy's value of this reduction over nothing (sum 0, prod 1, all true, any false);
    /// `min`/`max` have none (NumPy raises), for them this is [`ReduceOp::identity`].
    pub fn empty_value(self) -> Scalar {
        match self {
            ReduceOp::Sum | ReduceOp::NanSum => Scalar::Int(0),
            ReduceOp::Prod | ReduceOp::NanProd => Scalar::Int(1),
            ReduceOp::All => Scalar::Bool(true),
            ReduceOp::Any => Scalar::Bool(false),
            op => Scalar::Float(op.identity()),
        }
    }

    /// The value of a reduction of int64s over nothing.
    pub fn identity_i64(self) -> i64 {
        self.identity_int()
    }

    /// Combines int64s as NumPy does: sums and products wrap on overflow (so any grouping
    /// gives the same bits); ints have no NaN, so the nan variants are the plain ones.
    #[inline]
    pub fn apply_i64(self, acc: i64, v: i64) -> i64 {
        self.apply_int(acc, v)
    }

    /// The value of a reduction of integers of one type over nothing.
    pub fn identity_int<T: Int>(self) -> T {
        match self {
            ReduceOp::Sum | ReduceOp::NanSum | ReduceOp::Any => T::ZERO,
            ReduceOp::Prod | ReduceOp::NanProd | ReduceOp::All => T::ONE,
            ReduceOp::Min | ReduceOp::NanMin => T::MAX,
            ReduceOp::Max | ReduceOp::NanMax => T::MIN,
        }
    }

    /// Combines integers of one type as [`ReduceOp::apply_i64`] does.
    #[inline]
    pub fn apply_int<T: Int>(self, acc: T, v: T) -> T {
        let b = |x: bool| if x { T::ONE } else { T::ZERO };
        match self {
            ReduceOp::Sum | ReduceOp::NanSum => acc.wadd(v),
            ReduceOp::Prod | ReduceOp::NanProd => acc.wmul(v),
            ReduceOp::Min | ReduceOp::NanMin => acc.min(v),
            ReduceOp::Max | ReduceOp::NanMax => acc.max(v),
            ReduceOp::All => b(acc != T::ZERO && v != T::ZERO),
            ReduceOp::Any => b(acc != T::ZERO || v != T::ZERO),
        }
    }

    /// The value of a reduction of complex128s over nothing (for `min`/`max`, a value
    /// every other one replaces; NaN for the nan variants, as [`ReduceOp::identity`]).
    pub fn identity_complex(self) -> C128 {
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        match self {
            ReduceOp::Min => C128::new(inf, inf),
            ReduceOp::Max => C128::new(-inf, -inf),
            ReduceOp::NanMin | ReduceOp::NanMax => C128::new(nan, nan),
            op => C128::new(op.identity(), 0.0),
        }
    }

    /// Combines complex128s as NumPy does: sums and products of both parts, the
    /// lexicographic `minimum`/`maximum` (NaN propagates; the nan variants skip a value
    /// with a NaN part).
    #[inline]
    pub fn apply_complex(self, acc: C128, v: C128) -> C128 {
        let t = |z: C128| z.re != 0.0 || z.im != 0.0;
        let b = |x: bool| C128::new(x as u8 as f64, 0.0);
        match self {
            ReduceOp::Sum => acc + v,
            ReduceOp::Prod => acc * v,
            // As for reals: a NaN is 0 or 1 + 0j, added or multiplied (inf * (1 + 0j) has
            // a NaN part, as NumPy's).
            ReduceOp::NanSum if num::c_isnan(v) => acc + C128::new(0.0, 0.0),
            ReduceOp::NanProd if num::c_isnan(v) => acc * C128::new(1.0, 0.0),
            ReduceOp::NanSum => acc + v,
            ReduceOp::NanProd => acc * v,
            ReduceOp::Min => num::c_minimum(acc, v),
            ReduceOp::Max => num::c_maximum(acc, v),
            ReduceOp::NanMin => num::c_fmin(acc, v),
            ReduceOp::NanMax => num::c_fmax(acc, v),
            ReduceOp::All => b(t(acc) && t(v)),
            ReduceOp::Any => b(t(acc) || t(v)),
        }
    }

    /// NumPy's name for it (`sum`, `nanmax`, ...), for messages.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::All => "all",
            ReduceOp::Any => "any",
            ReduceOp::NanSum => "nansum",
            ReduceOp::NanProd => "nanprod",
            ReduceOp::NanMin => "nanmin",
            ReduceOp::NanMax => "nanmax",
        }
    }
}

/// Where a quantile between two order statistics of a sorted lane is (NumPy's `method=`
/// of `quantile` and `percentile`), or NumPy's `median` (the mean of the middle two).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuantileMethod {
    /// `inverted_cdf`.
    InvertedCdf,
    /// `averaged_inverted_cdf`.
    AveragedInvertedCdf,
    /// `closest_observation`.
    ClosestObservation,
    /// `interpolated_inverted_cdf`.
    InterpolatedInvertedCdf,
    /// `hazen`.
    Hazen,
    /// `weibull`.
    Weibull,
    /// `linear` (NumPy's default).
    Linear,
    /// `median_unbiased`.
    MedianUnbiased,
    /// `normal_unbiased`.
    NormalUnbiased,
    /// `lower`.
    Lower,
    /// `higher`.
    Higher,
    /// `midpoint`.
    Midpoint,
    /// `nearest`.
    Nearest,
    /// NumPy's median: the middle element, or the mean of the middle two.
    Median,
}

impl QuantileMethod {
    /// Every method NumPy names, as it names them.
    pub const NAMES: [&'static str; 13] = [
        "inverted_cdf",
        "averaged_inverted_cdf",
        "closest_observation",
        "interpolated_inverted_cdf",
        "hazen",
        "weibull",
        "linear",
        "median_unbiased",
        "normal_unbiased",
        "lower",
        "higher",
        "midpoint",
        "nearest",
    ];

    /// The method NumPy calls `name`.
    pub fn parse(name: &str) -> Option<QuantileMethod> {
        use QuantileMethod::*;
        let all = [
            InvertedCdf,
            AveragedInvertedCdf,
            ClosestObservation,
            InterpolatedInvertedCdf,
            Hazen,
            Weibull,
            Linear,
            MedianUnbiased,
            NormalUnbiased,
            Lower,
            Higher,
            Midpoint,
            Nearest,
        ];
        Self::NAMES.iter().position(|n| *n == name).map(|i| all[i])
    }

    /// It picks an element (the result keeps the input's dtype) rather than blending two.
    pub fn picks(self) -> bool {
        use QuantileMethod::*;
        matches!(
            self,
            InvertedCdf | ClosestObservation | Lower | Higher | Nearest
        )
    }
}

/// What a task computes. Inputs are listed in [`Task::inputs`] in the order each kernel
/// documents; the output block's shape comes from the output array's grid.
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
    /// (int64 exactly).
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
    /// Inputs: pairs (a block of values, the block of a bool mask beside it), 1-D, each
    /// with the range (skip, take) of its selected elements the output takes: the
    /// selected values of each pair in order (the elements of a 1-D array where the mask is
    /// true, across blocks: `x[mask]` with the counts per block known).
    Compress {
        /// Per pair: selected elements passed over, then taken.
        ranges: Vec<(u64, u64)>,
    },
    /// Terms, one per row block of a model's data: the `cols` blocks of X along its
    /// columns ([m, d_c] each, d = the sum of their widths), the block of y beside them
    /// ([m]), the parameters W ([d, k], one candidate per column) and, with `intercept`,
    /// b ([k]). With z = X W + b (b = 0 without it), per candidate j: the model's loss
    /// summed over the rows, then its gradient sums X^T r (d rows), then with `intercept`
    /// sum r (1 + p rows, p = d + intercept), then [`GLM_Y_COUNTS`] rows that count y's
    /// values in column 0 (zeros beside): values the loss cannot take (logistic: neither
    /// 0, 1 nor NaN; Poisson: negative; squared: NaN), NaN, infinite, equal to 1, above 0
    /// (so a fit's first pass checks y too); one [1 + p + 5, k] float64 block, summed over the
    /// terms: a pass of a fit ([`GlmLoss`] says loss and r) in one sweep over each block
    /// of rows, where the same expressions as separate kernels each make a block of m x
    /// k. With `hessian` (a Newton pass, k = 1) the block is [1 + p + 5, 1 + p]: column 0
    /// as without it, and rows and columns 1..=p the Hessian sums X^T diag(s) X
    /// (bordered by X^T s and sum s with an intercept; s = d²loss/dz²), row 0 beyond
    /// column 0 zero.
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

/// Rows of a [`Kernel::GlmSums`] block below its sums that count y's values (column 0):
/// refused by the loss, NaN, infinite, equal to 1, above 0.
pub const GLM_Y_COUNTS: u64 = 5;

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

impl Kernel {
    /// The kernel that combines partial results of this reduction kernel.
    pub fn combiner(&self) -> Kernel {
        match self {
            Kernel::Reduce { op, .. } => Kernel::Reduce {
                op: op.partial(),
                axes: vec![],
            },
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

    /// Bytes the kernel holds beyond its inputs and output (for memory projections): the
    /// text a CSV import parses, the metadata and column chunks a Parquet import decodes.
    /// A `.npy` import reads no more than its block's elements, at most as wide as the
    /// output's, which the output's own share covers.
    pub fn scratch_bytes(&self) -> u64 {
        match self {
            Kernel::ImportCsv { start, end, .. } => end.saturating_sub(*start),
            // Its file read 1 MiB at a time into one buffer, and a line carried from one
            // read to the next (a row of numbers is far shorter).
            Kernel::CsvCount { .. } => 2 << 20,
            Kernel::ImportParquet {
                metadata, fetch, ..
            } => metadata.1 + fetch,
            Kernel::ImportZarr { scratch, .. }
            | Kernel::Sort { scratch, .. }
            | Kernel::SortMerge { scratch, .. } => *scratch,
            Kernel::ExportNpyPart { header, bytes, .. } => header.len() as u64 + bytes,
            Kernel::ExportNpyBlock { bytes, .. } => *bytes,
            _ => 0,
        }
    }
}

/// Bytes of the pieces a CSV file's row index is made of (cut at line starts): the
/// driver's scan and the functions' count cut it the same way, so the index is the same.
pub const CSV_PIECE: u64 = 4 << 20;

/// One block task: a kernel, its input blocks, the block it produces.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// What the task computes; flattened into the task's JSON, so a kernel's fields must
    /// not be named like the task's own.
    #[serde(flatten)]
    pub kernel: Kernel,
    /// The blocks the kernel reads, in the order it documents.
    pub inputs: Vec<BlockRef>,
    /// The block it produces; its shape is that block's in the output array's grid.
    pub output: BlockRef,
    /// Write the output to the store (a block consumed only inside the batch stays in memory).
    #[serde(default = "yes")]
    pub write_output: bool,
}

fn yes() -> bool {
    true
}

/// One invocation's work: tasks in an order where every input is produced earlier in
/// the batch or already stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// The job's store: every array path is relative to its root.
    pub store: StoreSpec,
    /// The function refuses to read or write any array outside this prefix.
    pub job_prefix: String,
    /// The arrays the tasks read and write, indexed by [`BlockRef::array`].
    pub arrays: Vec<ArrayRef>,
    /// The tasks, run in this order.
    pub tasks: Vec<Task>,
    /// Bytes the function may hold beyond what the plan projects for running the tasks
    /// one after the other, to overlap store I/O with compute: blocks read ahead for later
    /// tasks and outputs still being encoded and written (`nums_function::pipeline` says
    /// exactly what counts). The planner sets it to the headroom between the batch's
    /// projected peak and the memory limit. 0: each task's reads start when it is due and
    /// its output is written before the next task runs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prefetch_budget: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Batch {
    /// Every array the batch writes lies under the job prefix, and every other array is
    /// either there too or a declared read-only input; checked before any I/O.
    pub fn check_confined(&self) -> crate::Result<()> {
        let prefix = format!("{}/", self.job_prefix.trim_matches('/'));
        let written: std::collections::HashSet<u32> =
            self.tasks.iter().map(|t| t.output.array).collect();
        for (i, a) in self.arrays.iter().enumerate() {
            let p = a.path.trim_matches('/');
            let inside = p.starts_with(&prefix) && !(a.read_only && written.contains(&(i as u32)));
            let readable = a.read_only && !written.contains(&(i as u32)) && !p.is_empty();
            if !(inside || readable) || p.split('/').any(|s| s == ".." || s == ".") {
                return Err(crate::Error::OutsidePrefix {
                    key: a.path.clone(),
                    prefix: self.job_prefix.clone(),
                });
            }
        }
        Ok(())
    }
}

/// The invocation payload. A batch whose JSON would exceed Lambda's 6 MB payload limit is
/// written to the store and travels by key.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Payload {
    /// The batch itself.
    Inline(Batch),
    /// The batch's JSON, written to the store by the driver as an intermediate.
    Stored {
        /// The store that holds it: the batch's own [`Batch::store`].
        store: StoreSpec,
        /// The batch's [`Batch::job_prefix`]; `key` must lie under it, and the batch read
        /// must name the same prefix and store.
        job_prefix: String,
        /// Key of the batch's JSON (`<job_prefix>/_batches/<n>.json`).
        key: String,
    },
}

/// What one invocation measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Invocations these figures add up (1 for one invocation's own).
    pub invocations: u64,
    /// Tasks run.
    pub tasks: u64,
    /// Bytes read from stores: input chunks and the bytes of files imports read.
    pub bytes_read: u64,
    /// Bytes written to stores: chunks and export parts.
    pub bytes_written: u64,
    /// Store requests of every kind the invocation counted
    /// ([`IoCounters::requests`](crate::IoCounters::requests)): GETs, PUTs and others.
    pub requests: u64,
    /// Of `bytes_written`, the bytes of intermediates ([`ArrayRef::intermediate`]).
    pub intermediate_bytes_written: u64,
    /// Of `requests`, the PUTs (priced higher than GETs).
    pub put_requests: u64,
    /// Seconds inside the handler (what Lambda bills).
    pub wall_seconds: f64,
    /// Seconds in block kernels (an invocation runs one kernel at a time).
    pub compute_seconds: f64,
    /// Seconds the kernels waited on the store: for a task's inputs to be read and
    /// decoded, for earlier outputs to be written when there was no room to write them
    /// behind, and for the last writes at the end. Reads and writes that overlap a kernel
    /// are not counted, so `wall_seconds` is about `compute_seconds + io_seconds`.
    pub io_seconds: f64,
    /// High-water mark of the process's resident memory during the invocation.
    pub peak_memory_bytes: u64,
}

impl Stats {
    /// Adds another invocation's figures (peak memory is the largest, not the sum).
    pub fn add(&mut self, o: &Stats) {
        self.invocations += o.invocations;
        self.tasks += o.tasks;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.requests += o.requests;
        self.put_requests += o.put_requests;
        self.intermediate_bytes_written += o.intermediate_bytes_written;
        self.wall_seconds += o.wall_seconds;
        self.compute_seconds += o.compute_seconds;
        self.io_seconds += o.io_seconds;
        self.peak_memory_bytes = self.peak_memory_bytes.max(o.peak_memory_bytes);
    }
}

/// The longest ETag a [`Kernel::ExportNpyPart`] output holds (S3's are 34 characters).
pub const ETAG_BYTES: usize = 256;

/// Lambda's synchronous payload limit, each way.
pub const PAYLOAD_LIMIT: usize = 6 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::DType;

    #[test]
    fn kernel_values_cross_the_wire_exactly() {
        let specials = [
            Scalar::Float(f64::NAN),
            Scalar::Float(f64::INFINITY),
            Scalar::Float(f64::NEG_INFINITY),
            Scalar::Float(-0.0),
            Scalar::Float(0.1),
            Scalar::Int(i64::MIN),
            Scalar::Int(9_007_199_254_740_993),
            Scalar::Bool(true),
        ];
        for &v in &specials {
            for kernel in [
                Kernel::Fill { value: v },
                Kernel::Scalar {
                    op: BinaryOp::Maximum,
                    value: v,
                    scalar_left: true,
                },
                Kernel::Iota {
                    axis: 0,
                    start: v,
                    step: Scalar::Int(3_000_000_000),
                    last: Some(v),
                },
            ] {
                // As a task (the kernel flattened into it), as batches carry it.
                let task = Task {
                    kernel,
                    inputs: vec![],
                    output: BlockRef {
                        array: 0,
                        index: vec![0],
                    },
                    write_output: true,
                };
                let json = serde_json::to_string(&task).unwrap();
                let back: Task = serde_json::from_str(&json).unwrap();
                assert_eq!(back, task, "{json}");
            }
        }
    }

    /// Kernels with a field of their own named like a task's: as a task, both survive.
    #[test]
    fn linalg_kernels_cross_the_wire_as_tasks() {
        for kernel in [
            Kernel::Qr {
                cols: 2,
                output: QrOutput::QProduct { part: 3 },
            },
            Kernel::Lstsq {
                n: 4,
                rcond: 1e-15,
                output: LstsqOutput::Residuals,
            },
            Kernel::Svd {
                output: SvdOutput::Vh,
            },
            Kernel::Det {
                output: DetOutput::Logabsdet,
            },
            Kernel::LuDet {
                w: 64,
                step: 2,
                output: DetOutput::Sign,
            },
            Kernel::LuPanel {
                w: 64,
                apply: Some(1),
                factor: true,
                scale: true,
            },
            Kernel::LuBack {
                w: 64,
                step: 0,
                estimate: true,
            },
        ] {
            let task = Task {
                kernel,
                inputs: vec![],
                output: BlockRef {
                    array: 1,
                    index: vec![2, 0],
                },
                write_output: true,
            };
            let json = serde_json::to_string(&task).unwrap();
            let back: Task = serde_json::from_str(&json).unwrap();
            assert_eq!(back, task, "{json}");
        }
    }

    #[test]
    fn float_divmod_is_numpys() {
        let bits = |(q, r): (f64, f64)| (q.to_bits(), r.to_bits());
        let nan = |(q, r): (f64, f64)| q.is_nan() && r.is_nan();
        assert!(nan(divmod(f64::INFINITY, 1.0)));
        assert_eq!(
            bits(divmod(-0.5, f64::INFINITY)),
            bits((-1.0, f64::INFINITY))
        );
        assert_eq!(bits(divmod(-1.0, 1.0)), bits((-1.0, 0.0)), "+0.0, not -0.0");
        assert_eq!(bits(divmod(1.0, -1.0)), bits((-1.0, -0.0)));
        assert_eq!(bits(divmod(-7.0, 2.0)), bits((-4.0, 1.0)));
        let (q, r) = divmod(1.0, 0.0);
        assert!(q == f64::INFINITY && r.is_nan());
    }

    #[test]
    fn int_ops_follow_numpy() {
        use BinaryOp::*;
        let f = |op: BinaryOp, x, y| op.apply_i64(x, y);
        assert_eq!(f(FloorDiv, -7, 2), Some(-4));
        assert_eq!(f(FloorDiv, 7, -2), Some(-4));
        assert_eq!(f(FloorDiv, -8, 2), Some(-4));
        assert_eq!(f(FloorDiv, 7, 0), Some(0));
        assert_eq!(f(FloorDiv, i64::MIN, -1), Some(i64::MIN));
        assert_eq!(f(Mod, -7, 3), Some(2));
        assert_eq!(f(Mod, 7, -3), Some(-2));
        assert_eq!(f(Mod, -6, 3), Some(0));
        assert_eq!(f(Mod, 7, 0), Some(0));
        assert_eq!(f(Mod, i64::MIN, -1), Some(0));
        assert_eq!(f(Pow, 2, 70), Some(0));
        assert_eq!(f(Pow, 3, 40), Some(-6_289_078_614_652_622_815));
        assert_eq!(f(Pow, 0, 0), Some(1));
        assert_eq!(f(Pow, -3, 3), Some(-27));
        assert_eq!(f(Pow, 2, -1), None);
        assert_eq!(f(Div, 1, 2), None);
        assert_eq!(f(Add, i64::MAX, 1), Some(i64::MIN));
        assert_eq!(
            f(Mul, 3_000_000_000, 3_000_000_000),
            Some(9_000_000_000_000_000_000)
        );
        assert_eq!(f(Lt, 9_007_199_254_740_993, 9_007_199_254_740_992), Some(0));
        assert_eq!(UnaryOp::Abs.apply_i64(i64::MIN), Some(i64::MIN));
        assert_eq!(UnaryOp::Neg.apply_i64(i64::MIN), Some(i64::MIN));
        assert_eq!(UnaryOp::Sign.apply_i64(-5), Some(-1));
        assert_eq!(UnaryOp::Exp.apply_i64(1), None);
        assert_eq!(ReduceOp::Sum.apply_i64(i64::MAX, 2), i64::MIN + 1);
    }

    #[test]
    fn arrays_outside_the_job_prefix_are_refused() {
        let meta = ArrayMeta::new(vec![2], vec![2], DType::Float64);
        let batch = |path: &str, read_only: bool, writes: bool| Batch {
            store: StoreSpec {
                url: "file:///tmp/x/".into(),
                endpoint: None,
            },
            job_prefix: "job".into(),
            arrays: vec![ArrayRef {
                path: path.into(),
                meta: meta.clone(),
                read_only,
                sparse: false,
                intermediate: false,
            }],
            tasks: if writes {
                vec![Task {
                    kernel: Kernel::Fill {
                        value: Scalar::Float(0.0),
                    },
                    inputs: vec![],
                    output: BlockRef {
                        array: 0,
                        index: vec![0],
                    },
                    write_output: true,
                }]
            } else {
                vec![]
            },
            prefetch_budget: 0,
        };
        assert!(batch("job/X", false, true).check_confined().is_ok());
        for bad in ["other/X", "job", "jobX/a", "job/../other/X", "/job/./X"] {
            assert!(batch(bad, false, false).check_confined().is_err(), "{bad}");
        }
        // A declared read-only input may lie elsewhere, but is never written.
        assert!(batch("data/X", true, false).check_confined().is_ok());
        assert!(batch("data/X", true, true).check_confined().is_err());
        assert!(batch("job/X", true, true).check_confined().is_err());
        assert!(batch("data/../etc", true, false).check_confined().is_err());
    }
}
