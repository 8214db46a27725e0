//! Element arithmetic as NumPy's loops do it, for the types a float64 does not cover:
//! every integer type with NumPy's wrapping ([`Int`]), and complex128 with NumPy's own
//! complex multiply, divide, power and (lexicographic) order.

use crate::block::{C128, Elem};

/// An integer element type (int8 ... uint64) with NumPy's integer semantics: `+ - *`,
/// negation and powers wrap on overflow, `x // 0` and `x % 0` are 0 (NumPy warns), floor
/// division rounds toward -inf and the remainder takes the divisor's sign.
pub trait Int: Elem + Ord + Default + std::hash::Hash {
    /// 1.
    const ONE: Self;
    /// The smallest value.
    const MIN: Self;
    /// The largest value.
    const MAX: Self;
    /// `self + y`, wrapping.
    fn wadd(self, y: Self) -> Self;
    /// `self - y`, wrapping.
    fn wsub(self, y: Self) -> Self;
    /// `self * y`, wrapping.
    fn wmul(self, y: Self) -> Self;
    /// `-self`, wrapping (the minimum of a signed type is its own negation, an unsigned
    /// value becomes `2^n - self`).
    fn wneg(self) -> Self;
    /// `abs(self)`, wrapping (an unsigned value is its own).
    fn wabs(self) -> Self;
    /// -1, 0 or 1 (an unsigned value: 0 or 1).
    fn sign(self) -> Self;
    /// Python's `self // y` as NumPy computes it: 0 for `y == 0`, `MIN // -1` wraps.
    fn floor_div(self, y: Self) -> Self;
    /// Python's `self % y` as NumPy computes it: 0 for `y == 0`.
    fn modulo(self, y: Self) -> Self;
    /// Whether it is below 0.
    fn negative(self) -> bool;
    /// `self & y`, `self | y`, `self ^ y` (`which` 0, 1, 2).
    fn bits(self, y: Self, which: u8) -> Self;
    /// `~self`.
    fn invert(self) -> Self;
    /// NumPy's `self << y`: 0 where `y` is negative or at least the width in bits.
    fn shl(self, y: Self) -> Self;
    /// NumPy's `self >> y` (arithmetic for signed types): where `y` is negative or at
    /// least the width, -1 for a negative `self`, else 0.
    fn shr(self, y: Self) -> Self;
    /// `self ** e` for `e >= 0`, wrapping (modulo 2^n whatever the order of the products:
    /// NumPy's bits); by squaring.
    fn wpow(self, e: Self) -> Self {
        let (mut x, mut e, mut r) = (self, e.to_i64() as u64, Self::ONE);
        // A uint64 exponent above int64's range still counts: its bits are its value.
        while e > 0 {
            if e & 1 == 1 {
                r = r.wmul(x);
            }
            x = x.wmul(x);
            e >>= 1;
        }
        r
    }
}

macro_rules! int_common {
    ($t:ty) => {
        const ONE: $t = 1;
        const MIN: $t = <$t>::MIN;
        const MAX: $t = <$t>::MAX;
        #[inline]
        fn wadd(self, y: $t) -> $t {
            self.wrapping_add(y)
        }
        #[inline]
        fn wsub(self, y: $t) -> $t {
            self.wrapping_sub(y)
        }
        #[inline]
        fn wmul(self, y: $t) -> $t {
            self.wrapping_mul(y)
        }
        #[inline]
        fn wneg(self) -> $t {
            self.wrapping_neg()
        }
        #[inline]
        fn floor_div(self, y: $t) -> $t {
            if y == 0 {
                return 0;
            }
            let (q, r) = (self.wrapping_div(y), self.wrapping_rem(y));
            if r != 0 && (r.negative() != y.negative()) {
                q.wrapping_sub(1)
            } else {
                q
            }
        }
        #[inline]
        fn bits(self, y: $t, which: u8) -> $t {
            match which {
                0 => self & y,
                1 => self | y,
                _ => self ^ y,
            }
        }
        #[inline]
        fn invert(self) -> $t {
            !self
        }
        #[inline]
        fn shl(self, y: $t) -> $t {
            // NumPy casts the shift to size_t: a negative one is past the width.
            match u32::try_from(y) {
                Ok(k) if k < <$t>::BITS => self << k,
                _ => 0,
            }
        }
        #[inline]
        fn shr(self, y: $t) -> $t {
            match u32::try_from(y) {
                Ok(k) if k < <$t>::BITS => self >> k,
                _ if self.negative() => (0 as $t).wrapping_sub(1),
                _ => 0,
            }
        }
        #[inline]
        fn modulo(self, y: $t) -> $t {
            if y == 0 {
                return 0;
            }
            let r = self.wrapping_rem(y);
            if r != 0 && (r.negative() != y.negative()) {
                r.wrapping_add(y)
            } else {
                r
            }
        }
    };
}

macro_rules! signed {
    ($($t:ty),*) => {$(
        impl Int for $t {
            int_common!($t);
            #[inline]
            fn wabs(self) -> $t {
                self.wrapping_abs()
            }
            #[inline]
            fn sign(self) -> $t {
                self.signum()
            }
            #[inline]
            fn negative(self) -> bool {
                self < 0
            }
        }
    )*};
}

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl Int for $t {
            int_common!($t);
            #[inline]
            fn wabs(self) -> $t {
                self
            }
            #[inline]
            fn sign(self) -> $t {
                (self != 0) as $t
            }
            #[inline]
            fn negative(self) -> bool {
                false
            }
        }
    )*};
}

signed!(i8, i16, i32, i64);
unsigned!(u8, u16, u32, u64);

/// A complex number with NaN in either part (NumPy's `isnan`).
#[inline]
pub fn c_isnan(z: C128) -> bool {
    z.re.is_nan() || z.im.is_nan()
}

/// NumPy's complex `x < y`: lexicographic (real parts, then imaginary), false where a
/// NaN takes part.
#[inline]
pub fn c_lt(x: C128, y: C128) -> bool {
    (x.re < y.re && !x.im.is_nan() && !y.im.is_nan()) || (x.re == y.re && x.im < y.im)
}

/// NumPy's complex `x <= y` (see [`c_lt`]).
#[inline]
pub fn c_le(x: C128, y: C128) -> bool {
    (x.re < y.re && !x.im.is_nan() && !y.im.is_nan()) || (x.re == y.re && x.im <= y.im)
}

/// NumPy's complex `maximum`: `x` if it has a NaN or is at least `y`, else `y`.
#[inline]
pub fn c_maximum(x: C128, y: C128) -> C128 {
    if c_isnan(x) || c_le(y, x) { x } else { y }
}

/// NumPy's complex `minimum`: `x` if it has a NaN or is at most `y`, else `y`.
#[inline]
pub fn c_minimum(x: C128, y: C128) -> C128 {
    if c_isnan(x) || c_le(x, y) { x } else { y }
}

/// NumPy's complex `fmax` (`nanmax`'s step): `x` unless `y` is the larger or `x` has a
/// NaN and `y` has none.
#[inline]
pub fn c_fmax(x: C128, y: C128) -> C128 {
    if c_isnan(y) || c_le(y, x) { x } else { y }
}

/// NumPy's complex `fmin` (`nanmin`'s step).
#[inline]
pub fn c_fmin(x: C128, y: C128) -> C128 {
    if c_isnan(y) || c_le(x, y) { x } else { y }
}

/// NumPy's complex division (Smith's method, as `npy_math`'s `cdiv`): a zero divisor
/// gives the parts divided by 0 (infinities or NaN).
#[inline]
pub fn c_div(a: C128, b: C128) -> C128 {
    let (ar, ai, br, bi) = (a.re, a.im, b.re, b.im);
    let (abs_br, abs_bi) = (br.abs(), bi.abs());
    if abs_br >= abs_bi {
        if abs_br == 0.0 && abs_bi == 0.0 {
            return C128::new(ar / abs_br, ai / abs_bi);
        }
        let rat = bi / br;
        let scl = 1.0 / (br + bi * rat);
        C128::new((ar + ai * rat) * scl, (ai - ar * rat) * scl)
    } else {
        let rat = br / bi;
        let scl = 1.0 / (bi + br * rat);
        C128::new((ar * rat + ai) * scl, (ai * rat - ar) * scl)
    }
}

/// NumPy's complex power (`npy_cpow`): `a ** 0` is 1, `0 ** b` is 0 for `b.re > 0` and
/// NaN otherwise, whole exponents below 100 in magnitude by repeated multiplication (so
/// `z ** 2` is `z * z`), others by the C library's `cpow` (C99's special values).
pub fn c_pow(a: C128, b: C128) -> C128 {
    let one = C128::new(1.0, 0.0);
    if b.re == 0.0 && b.im == 0.0 {
        return one;
    }
    if a.re == 0.0 && a.im == 0.0 {
        return if b.re > 0.0 {
            C128::new(0.0, 0.0)
        } else {
            C128::new(f64::NAN, f64::NAN)
        };
    }
    if b.im == 0.0 && b.re.fract() == 0.0 && b.re.abs() < 100.0 {
        let n = b.re as i64;
        match n {
            1 => return a,
            2 => return a * a,
            3 => return a * (a * a),
            _ => {}
        }
        let (mut m, mut p, mut r) = (n.unsigned_abs(), a, one);
        loop {
            if m & 1 == 1 {
                r *= p;
            }
            m >>= 1;
            if m == 0 {
                break;
            }
            p = p * p;
        }
        return if n < 0 { c_div(one, r) } else { r };
    }
    // SAFETY: a pure function of its arguments, by value, with C's ABI (see `c99`).
    unsafe { c99::cpow(a, b) }
}

/// NumPy's complex `sign` (NumPy 2): `z / |z|`, 0 for 0, NaN where a part is NaN.
pub fn c_sign(z: C128) -> C128 {
    if c_isnan(z) {
        return C128::new(f64::NAN, f64::NAN);
    }
    let r = z.norm();
    if r == 0.0 {
        C128::new(0.0, 0.0)
    } else if z.re.is_infinite() && z.im.is_infinite() {
        // No direction: NumPy's NaN.
        C128::new(f64::NAN, f64::NAN)
    } else if r.is_infinite() {
        // One infinite part: its direction (inf/inf would be NaN).
        let f = |v: f64| if v.is_infinite() { v.signum() } else { 0.0 };
        let u = C128::new(f(z.re), f(z.im));
        u / u.norm()
    } else {
        C128::new(z.re / r, z.im / r)
    }
}

/// `exp(z) - 1`, accurate near 0 (NumPy's `npy_cexpm1`).
pub fn c_expm1(z: C128) -> C128 {
    let (x, y) = (z.re, z.im);
    let s = (y / 2.0).sin();
    C128::new(x.exp_m1() * y.cos() - 2.0 * s * s, x.exp() * y.sin())
}

/// `log(1 + z)` (NumPy's `npy_clog1p`).
pub fn c_log1p(z: C128) -> C128 {
    let (x, y) = (z.re + 1.0, z.im);
    C128::new(x.hypot(y).ln(), y.atan2(x))
}

/// The C library's C99 complex functions (Annex G), which NumPy's complex loops call:
/// their values at every magnitude (no overflow in intermediate results), on both sides
/// of a branch cut (by the sign of a zero part), and C99's special values at infinities
/// and NaNs. A C `double _Complex` is passed and returned as a struct of two doubles on
/// x86_64 (System V: "as if `struct { double re, im; }`") and aarch64 (AAPCS64: a
/// homogeneous aggregate of two doubles), the two Lambda targets, and `C128` is
/// `#[repr(C)] { re, im }`. Each has had its symbol since glibc 2.1 (GLIBC_2.2.5 on
/// x86_64, GLIBC_2.17 on aarch64), so the bootstrap still asks for nothing newer than
/// Amazon Linux 2023's glibc 2.34.
mod c99 {
    use crate::block::C128;

    #[link(name = "m")]
    unsafe extern "C" {
        pub(super) fn csqrt(z: C128) -> C128;
        pub(super) fn cexp(z: C128) -> C128;
        pub(super) fn clog(z: C128) -> C128;
        pub(super) fn csin(z: C128) -> C128;
        pub(super) fn ccos(z: C128) -> C128;
        pub(super) fn ctan(z: C128) -> C128;
        pub(super) fn csinh(z: C128) -> C128;
        pub(super) fn ccosh(z: C128) -> C128;
        pub(super) fn ctanh(z: C128) -> C128;
        pub(super) fn casin(z: C128) -> C128;
        pub(super) fn cacos(z: C128) -> C128;
        pub(super) fn catan(z: C128) -> C128;
        pub(super) fn casinh(z: C128) -> C128;
        pub(super) fn cacosh(z: C128) -> C128;
        pub(super) fn catanh(z: C128) -> C128;
        pub(super) fn cpow(a: C128, b: C128) -> C128;
    }
}

macro_rules! c99_fns {
    ($($name:ident),*) => {$(
        #[doc = concat!("C99's `", stringify!($name), "` from the C library (see `c99`).")]
        #[inline]
        pub fn $name(z: C128) -> C128 {
            // SAFETY: a pure function of its argument, by value, with C's ABI (see `c99`).
            unsafe { c99::$name(z) }
        }
    )*};
}

c99_fns!(
    csqrt, cexp, clog, csin, ccos, ctan, csinh, ccosh, ctanh, casin, cacos, catan, casinh, cacosh,
    catanh
);

/// NumPy's complex `log2` and `log10`: `clog(z)` times `log2(e)` or `log10(e)` (`nc_log2`,
/// `nc_log10`), so `log2(0)` is `-inf` as `log`'s is.
pub fn c_log_base(z: C128, log_e: f64) -> C128 {
    let l = clog(z);
    C128::new(l.re * log_e, l.im * log_e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_wrap_and_divide_as_numpy() {
        assert_eq!(100i8.wmul(3), 44);
        assert_eq!(i8::MIN.wneg(), i8::MIN);
        assert_eq!(i8::MIN.wabs(), i8::MIN);
        assert_eq!(1u8.wneg(), 255);
        assert_eq!(1u8.wsub(2), 255);
        assert_eq!(i8::MIN.floor_div(-1), i8::MIN);
        assert_eq!((-7i16).floor_div(2), -4);
        assert_eq!((-7i16).modulo(2), 1);
        assert_eq!(7i32.modulo(-2), -1);
        assert_eq!(7u32.floor_div(0), 0);
        assert_eq!(7u64.modulo(0), 0);
        assert_eq!(3u8.wpow(5), 243);
        assert_eq!(3u8.wpow(6), 217); // 729 mod 256
        assert_eq!(2u64.wpow(64), 0);
        assert_eq!((-2i8).wpow(7), -128);
        assert_eq!(5u16.sign(), 1);
        assert_eq!((-5i16).sign(), -1);
    }

    #[test]
    fn complex_ops_match_numpy() {
        let z = |re, im| C128::new(re, im);
        // NumPy 2.4: (3-4j)**2, (1+2j)**-2, (1+2j)**0.5, 0j**-1.
        assert_eq!(c_pow(z(3.0, -4.0), z(2.0, 0.0)), z(-7.0, -24.0));
        let r = c_pow(z(1.0, 2.0), z(-2.0, 0.0));
        assert!((r - z(-0.12, -0.16)).norm() < 1e-15, "{r}");
        let r = c_pow(z(1.0, 2.0), z(0.5, 0.0));
        assert!((r - z(1.272_019_649_514_069, 0.786_151_377_757_423_3)).norm() < 1e-14);
        assert!(c_isnan(c_pow(z(0.0, 0.0), z(-1.0, 0.0))));
        assert_eq!(c_div(z(1.0, 0.0), z(0.0, 2.0)), z(0.0, -0.5));
        assert!(c_lt(z(1.0, 5.0), z(2.0, -1.0)) && c_lt(z(1.0, 1.0), z(1.0, 2.0)));
        assert!(!c_lt(z(1.0, f64::NAN), z(2.0, 0.0)));
        assert!(c_isnan(c_maximum(z(f64::NAN, 0.0), z(1.0, 0.0))));
        assert_eq!(c_fmax(z(f64::NAN, 0.0), z(1.0, 0.0)), z(1.0, 0.0));
        assert_eq!(c_maximum(z(1.0, 2.0), z(0.0, 1.0)), z(1.0, 2.0));
        assert_eq!(c_sign(z(3.0, -4.0)), z(0.6, -0.8));
        assert_eq!(c_sign(z(0.0, 0.0)), z(0.0, 0.0));
        // NumPy's: one infinite part gives its direction, two give NaN.
        assert_eq!(c_sign(z(f64::INFINITY, 2.0)), z(1.0, 0.0));
        assert_eq!(c_sign(z(0.0, f64::NEG_INFINITY)), z(0.0, -1.0));
        assert!(c_isnan(c_sign(z(f64::INFINITY, f64::NEG_INFINITY))));
    }
}
