//! The element ops' meaning, as NumPy's loops compute them: elementwise functions of one
//! operand ([`UnaryOp`]) and of two ([`BinaryOp`]), reductions ([`ReduceOp`]) and where a
//! quantile lies ([`QuantileMethod`]), with the float and integer helpers they share, and
//! the dtype an op's loop computes in ([`compute_dtype`], [`unary_compute_dtype`]).
//! Kernels (`super::kernel`) name them; the function's loops apply them.

use serde::{Deserialize, Serialize};

use crate::block::C128;
use crate::meta::DType;
use crate::num::{self, Int};
use crate::scalar::Scalar;

/// An elementwise function of one array ([`Kernel::Unary`](super::Kernel::Unary)), as
/// NumPy computes it.
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
    /// `cbrt(x)`: the real cube root (negative for negative `x`).
    Cbrt,
    /// `exp2(x)`: `2 ** x`.
    Exp2,
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
            UnaryOp::Cbrt => "cbrt",
            UnaryOp::Exp2 => "exp2",
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
            UnaryOp::Cbrt => v.cbrt(),
            UnaryOp::Exp2 => v.exp2(),
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
            // NumPy's nc_exp2: exp(z * ln 2).
            UnaryOp::Exp2 => num::cexp(z * std::f64::consts::LN_2),
            UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Trunc
            | UnaryOp::Signbit
            | UnaryOp::Invert
            | UnaryOp::Cbrt
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

/// An elementwise function of two operands ([`Kernel::Binary`](super::Kernel::Binary),
/// [`Kernel::Scalar`](super::Kernel::Scalar)), as Python's operators and NumPy's
/// functions compute it.
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

/// The dtype `op` of operands of dtypes `a` and `b` computes in: their promoted dtype
/// (NumPy's loop), float64 for true division of bools and ints, int8 for the arithmetic
/// and comparisons of two bools.
pub fn compute_dtype(op: BinaryOp, a: DType, b: DType) -> DType {
    let c = a.promote(b);
    if op == BinaryOp::Div {
        c.to_float()
    } else if op.is_float_fn() {
        // NumPy's loop: the smallest float both operands cast to safely.
        a.to_float_fn().promote(b.to_float_fn())
    } else if c == DType::Bool {
        DType::Int8
    } else {
        c
    }
}

/// The dtype a unary op of a `dtype` block computes in before its result is cast to the
/// output's: its own for the ops that keep ints (bool as int8) and for complex; float64 or
/// float32 for the float functions.
pub fn unary_compute_dtype(op: UnaryOp, dtype: DType, out: DType) -> DType {
    if dtype.is_complex() {
        dtype
    } else if dtype.is_exact() && (op.keeps_ints() || op.rounds()) {
        if dtype == DType::Bool {
            DType::Int8
        } else {
            dtype
        }
    } else if op.is_predicate() {
        DType::Bool
    } else if out == DType::Float32 {
        DType::Float32
    } else {
        DType::Float64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
