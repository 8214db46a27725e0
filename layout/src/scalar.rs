//! One number a kernel carries (a fill value, a scalar operand, an arange start): a bool,
//! an exact int (over int64 and uint64), a float64 or a complex of two float64s, on the
//! wire exactly. JSON has no NaN or infinities, so non-finite floats travel as the strings
//! "NaN", "-NaN" (NumPy's `signbit` tells them apart), "Infinity" and "-Infinity"; finite floats are JSON numbers with a fraction or
//! exponent (-0.0 keeps its sign), ints are JSON integers (every digit kept), a complex is
//! the pair `[re, im]`.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::meta::ScalarKind;

/// A number as a kernel carries it: the kind of Python scalar it was written as, with its
/// exact value (see the module docs for its JSON form).
#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    /// A bool (`True`, `False`).
    Bool(bool),
    /// An int, exact over all of int64.
    Int(i64),
    /// An int above int64's range, up to uint64's largest (only such values: smaller ones
    /// are [`Scalar::Int`]; see [`Scalar::from_i128`]).
    UInt(u64),
    /// A float64, NaN, infinities and -0.0 included.
    Float(f64),
    /// A complex number (Python's `2 + 3j`): real and imaginary parts.
    Complex(f64, f64),
}

/// Equal when the same variant holds the same bits (NaN equals NaN, -0.0 is not 0.0):
/// two kernels are equal when they compute the same thing.
impl PartialEq for Scalar {
    fn eq(&self, other: &Scalar) -> bool {
        match (self, other) {
            (Scalar::Bool(a), Scalar::Bool(b)) => a == b,
            (Scalar::Int(a), Scalar::Int(b)) => a == b,
            (Scalar::UInt(a), Scalar::UInt(b)) => a == b,
            (Scalar::Float(a), Scalar::Float(b)) => a.to_bits() == b.to_bits(),
            (Scalar::Complex(a, b), Scalar::Complex(c, d)) => {
                a.to_bits() == c.to_bits() && b.to_bits() == d.to_bits()
            }
            _ => false,
        }
    }
}

impl Eq for Scalar {}

impl From<f64> for Scalar {
    fn from(v: f64) -> Scalar {
        Scalar::Float(v)
    }
}

impl From<i64> for Scalar {
    fn from(v: i64) -> Scalar {
        Scalar::Int(v)
    }
}

impl From<bool> for Scalar {
    fn from(v: bool) -> Scalar {
        Scalar::Bool(v)
    }
}

impl Scalar {
    /// The kind of Python scalar this is (for NumPy's promotion of weak scalars).
    pub fn kind(self) -> ScalarKind {
        match self {
            Scalar::Bool(_) => ScalarKind::Bool,
            Scalar::Int(_) | Scalar::UInt(_) => ScalarKind::Int,
            Scalar::Float(_) => ScalarKind::Float,
            Scalar::Complex(..) => ScalarKind::Complex,
        }
    }

    /// An exact int as a scalar: [`Scalar::Int`] over int64, [`Scalar::UInt`] above it up
    /// to uint64's largest; `None` outside both (NumPy has no dtype for it).
    pub fn from_i128(v: i128) -> Option<Scalar> {
        if let Ok(i) = i64::try_from(v) {
            Some(Scalar::Int(i))
        } else {
            u64::try_from(v).ok().map(Scalar::UInt)
        }
    }

    /// The exact value of a bool or an int; `None` for floats and complex.
    pub fn as_i128(self) -> Option<i128> {
        match self {
            Scalar::Bool(b) => Some(b.into()),
            Scalar::Int(i) => Some(i.into()),
            Scalar::UInt(u) => Some(u.into()),
            _ => None,
        }
    }

    /// As float64, as NumPy converts it (an int rounds to the nearest float64, a complex
    /// gives its real part).
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::UInt(u) => u as f64,
            Scalar::Float(f) | Scalar::Complex(f, _) => f,
        }
    }

    /// As a complex number (real and imaginary parts; the imaginary part of a real is 0).
    pub fn as_complex(self) -> (f64, f64) {
        match self {
            Scalar::Complex(re, im) => (re, im),
            s => (s.as_f64(), 0.0),
        }
    }

    /// As int64, as NumPy's `astype` converts it: a float truncates toward zero; NaN,
    /// infinities and floats outside int64's range become int64's minimum (what NumPy
    /// gives on x86-64); an int above int64's range wraps; a complex gives its real part's.
    pub fn as_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::UInt(u) => u as i64,
            Scalar::Float(f) | Scalar::Complex(f, _) => f64_to_i64(f),
        }
    }

    /// Non-zero is true (a complex is true where either part is non-zero).
    pub fn as_bool(self) -> bool {
        match self {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::UInt(_) => true,
            Scalar::Float(f) => f != 0.0,
            Scalar::Complex(re, im) => re != 0.0 || im != 0.0,
        }
    }

    /// An integer (a bool or an int, or a float with no fraction) as int64.
    pub fn integer(self) -> Option<i64> {
        match self {
            Scalar::Float(f) if f.fract() != 0.0 || !f.is_finite() => None,
            Scalar::UInt(_) | Scalar::Complex(..) => None,
            s => Some(s.as_i64()),
        }
    }
}

/// float64 to int64 as NumPy's cast does on x86-64: truncation toward zero; NaN,
/// infinities and values outside [-2^63, 2^63) give -2^63.
pub fn f64_to_i64(f: f64) -> i64 {
    // 2^63 as f64 is exact; every f64 in [-2^63, 2^63) truncates to an int64.
    const TWO_63: f64 = (1u64 << 63) as f64;
    if f.is_nan() || !(-TWO_63..TWO_63).contains(&f) {
        i64::MIN
    } else {
        f as i64
    }
}

/// As Python prints it: `True`, `7`, `2.5`, `-0.0`, `nan`, `inf`.
impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(true) => f.write_str("True"),
            Scalar::Bool(false) => f.write_str("False"),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::UInt(u) => write!(f, "{u}"),
            Scalar::Float(v) => f.write_str(&py_float(*v, true)),
            // Python's repr: `2j`, `(1+2j)`, `(1.5-0j)`, `(nan+infj)`.
            Scalar::Complex(re, im) => {
                let sign = if im.is_sign_negative() && !im.is_nan() {
                    "-"
                } else {
                    "+"
                };
                let im_txt = py_float(im.abs(), false);
                if *re == 0.0 && !re.is_sign_negative() {
                    write!(f, "{}{}j", if sign == "-" { "-" } else { "" }, im_txt)
                } else {
                    write!(f, "({}{sign}{im_txt}j)", py_float(*re, false))
                }
            }
        }
    }
}

/// A float as Python's `repr` writes it (`2.5`, `-0.0`, `1e+16`, `nan`, `inf`); without
/// `dot0`, a whole number has no `.0` (as in a complex's repr: `(1+2j)`).
fn py_float(v: f64, dot0: bool) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    // Rust's Debug switches to an exponent where Python's repr does (1e16, 1e-5);
    // Python writes its sign and at least two digits.
    let t = format!("{v:?}");
    let t = match t.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = e.strip_prefix('-').map_or(("+", e), |d| ("-", d));
            format!("{m}e{sign}{digits:0>2}")
        }
        None => t,
    };
    match t.strip_suffix(".0") {
        Some(whole) if !dot0 => whole.to_string(),
        _ => t,
    }
}

impl Serialize for Scalar {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Scalar::Bool(b) => s.serialize_bool(b),
            Scalar::Int(i) => s.serialize_i64(i),
            Scalar::UInt(u) => s.serialize_u64(u),
            Scalar::Float(v) => JsonFloat(v).serialize(s),
            Scalar::Complex(re, im) => (JsonFloat(re), JsonFloat(im)).serialize(s),
        }
    }
}

/// A float64 on the wire: a JSON number, or "NaN", "Infinity", "-Infinity".
struct JsonFloat(f64);

impl Serialize for JsonFloat {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            v if v.is_nan() && v.is_sign_negative() => s.serialize_str("-NaN"),
            v if v.is_nan() => s.serialize_str("NaN"),
            f64::INFINITY => s.serialize_str("Infinity"),
            f64::NEG_INFINITY => s.serialize_str("-Infinity"),
            // serde_json writes floats with a fraction or exponent ("1.0", "-0.0", "1e300"),
            // which read back as floats; its float_roundtrip feature reads them exactly.
            v => s.serialize_f64(v),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
        struct V;
        impl<'v> Visitor<'v> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a bool, an int, a float, \"NaN\", \"Infinity\", \"-Infinity\" or [re, im]",
                )
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::from_i128(v.into()).expect("a u64 fits"))
            }
            fn visit_seq<A: de::SeqAccess<'v>>(self, mut seq: A) -> Result<Scalar, A::Error> {
                let mut part = || -> Result<f64, A::Error> {
                    match seq.next_element::<Scalar>()? {
                        Some(Scalar::Float(v)) => Ok(v),
                        _ => Err(de::Error::custom("a complex is [re, im] of two floats")),
                    }
                };
                let (re, im) = (part()?, part()?);
                match seq.next_element::<Scalar>()? {
                    None => Ok(Scalar::Complex(re, im)),
                    Some(_) => Err(de::Error::custom("a complex is [re, im] of two floats")),
                }
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                match v {
                    "NaN" => Ok(Scalar::Float(f64::NAN)),
                    "-NaN" => Ok(Scalar::Float(-f64::NAN)),
                    "Infinity" => Ok(Scalar::Float(f64::INFINITY)),
                    "-Infinity" => Ok(Scalar::Float(f64::NEG_INFINITY)),
                    _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::DType;

    #[test]
    fn every_special_value_round_trips_through_json() {
        let values = [
            Scalar::Float(f64::NAN),
            Scalar::Float(f64::INFINITY),
            Scalar::Float(f64::NEG_INFINITY),
            Scalar::Float(-0.0),
            Scalar::Float(0.0),
            Scalar::Float(1.0),
            Scalar::Float(0.1),
            Scalar::Float(f64::MIN_POSITIVE),
            Scalar::Float(5e-324),
            Scalar::Float(f64::MAX),
            Scalar::Float(-f64::MAX),
            Scalar::Float(9007199254740993.0),
            Scalar::Int(i64::MIN),
            Scalar::Int(i64::MAX),
            Scalar::Int(9007199254740993),
            Scalar::Int(-1),
            Scalar::Int(0),
            Scalar::UInt(u64::MAX),
            Scalar::UInt(1 << 63),
            Scalar::Complex(1.5, -0.0),
            Scalar::Complex(f64::NAN, f64::NEG_INFINITY),
            Scalar::Bool(true),
            Scalar::Bool(false),
        ];
        for v in values {
            let json = serde_json::to_string(&v).unwrap();
            let back: Scalar = serde_json::from_str(&json).unwrap();
            assert_eq!(back, v, "{v:?} as {json}");
        }
        assert_eq!(
            serde_json::to_string(&Scalar::Float(f64::NAN)).unwrap(),
            "\"NaN\""
        );
        assert_eq!(serde_json::to_string(&Scalar::Float(-0.0)).unwrap(), "-0.0");
        assert_eq!(serde_json::to_string(&Scalar::Float(2.0)).unwrap(), "2.0");
        assert_eq!(
            serde_json::to_string(&Scalar::Int(i64::MIN)).unwrap(),
            "-9223372036854775808"
        );
        // A NaN's payload does not survive (JSON has one NaN), but it is still NaN.
        let nan = f64::from_bits(0x7ff8_0000_0000_0001);
        let back: Scalar =
            serde_json::from_str(&serde_json::to_string(&Scalar::Float(nan)).unwrap()).unwrap();
        assert!(matches!(back, Scalar::Float(f) if f.is_nan()));
        // Its sign does (`full(n, -np.nan)` gave NaNs whose signbit was False).
        for nan in [f64::NAN, -f64::NAN] {
            let json = serde_json::to_string(&Scalar::Float(nan)).unwrap();
            let back: Scalar = serde_json::from_str(&json).unwrap();
            let Scalar::Float(f) = back else {
                panic!("{json}")
            };
            assert!(
                f.is_nan() && f.is_sign_negative() == nan.is_sign_negative(),
                "{json}"
            );
        }
    }

    #[test]
    fn floats_round_trip_bit_for_bit() {
        // Pseudo-random bit patterns over the whole range of finite float64s.
        let mut z = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            z = z.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let v = f64::from_bits(z ^ (z >> 29));
            if !v.is_finite() {
                continue;
            }
            let json = serde_json::to_string(&Scalar::Float(v)).unwrap();
            let back: Scalar = serde_json::from_str(&json).unwrap();
            assert_eq!(back, Scalar::Float(v), "{json}");
        }
    }

    #[test]
    fn bad_values_are_refused() {
        for bad in ["\"nan\"", "null", "[1]", "[1.0, 2.0, 3.0]", "[1, 2]"] {
            assert!(serde_json::from_str::<Scalar>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn casts_follow_numpy() {
        assert_eq!(Scalar::Float(-2.7).as_i64(), -2);
        assert_eq!(Scalar::Float(f64::NAN).as_i64(), i64::MIN);
        assert_eq!(Scalar::Float(f64::INFINITY).as_i64(), i64::MIN);
        assert_eq!(Scalar::Float(9.3e18).as_i64(), i64::MIN);
        assert_eq!(Scalar::Float(i64::MIN as f64).as_i64(), i64::MIN);
        assert_eq!(Scalar::Int(9007199254740993).as_f64(), 9007199254740992.0);
        // 2^60 + 2^36 + 1 rounds up to float32 directly, but to 2^60 via float64.
        let i = (1i64 << 60) + (1 << 36) + 1;
        assert_eq!(
            Scalar::Int(i).cast(DType::Float32),
            Scalar::Float(((1i64 << 60) + (1 << 37)) as f64)
        );
        assert_eq!(Scalar::Float(0.5).integer(), None);
        assert_eq!(Scalar::Float(3.0).integer(), Some(3));
        assert_eq!(Scalar::Bool(true).integer(), Some(1));
        assert_eq!(Scalar::Float(-0.0).to_string(), "-0.0");
        assert_eq!(Scalar::Float(f64::NEG_INFINITY).to_string(), "-inf");
        // Python's repr of complex numbers and of floats with exponents.
        assert_eq!(Scalar::Complex(0.0, 2.0).to_string(), "2j");
        assert_eq!(Scalar::Complex(1.0, 2.0).to_string(), "(1+2j)");
        assert_eq!(Scalar::Complex(1.5, -0.0).to_string(), "(1.5-0j)");
        assert_eq!(Scalar::Complex(-0.0, f64::NAN).to_string(), "(-0+nanj)");
        assert_eq!(Scalar::Complex(0.0, f64::NEG_INFINITY).to_string(), "-infj");
        assert_eq!(Scalar::Float(1e16).to_string(), "1e+16");
        assert_eq!(Scalar::Float(1e-5).to_string(), "1e-05");
        assert_eq!(Scalar::Float(-2.5e300).to_string(), "-2.5e+300");
        assert_eq!(Scalar::UInt(u64::MAX).to_string(), "18446744073709551615");
        assert_eq!(Scalar::from_i128(1 << 64), None);
        assert_eq!(Scalar::from_i128(-1), Some(Scalar::Int(-1)));
    }
}
