//! One number a kernel carries (a fill value, a scalar operand, an arange start): a bool,
//! an exact int64 or a float64, on the wire exactly. JSON has no NaN or infinities, so
//! non-finite floats travel as the strings "NaN", "Infinity" and "-Infinity"; finite
//! floats are JSON numbers with a fraction or exponent (-0.0 keeps its sign), ints are
//! JSON integers (every digit of an int64 kept).

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::meta::{DType, ScalarKind};

/// A number as a kernel carries it: the kind of Python scalar it was written as, with its
/// exact value (see the module docs for its JSON form).
#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    /// A bool (`True`, `False`).
    Bool(bool),
    /// An int, exact over all of int64.
    Int(i64),
    /// A float64, NaN, infinities and -0.0 included.
    Float(f64),
}

/// Equal when the same variant holds the same bits (NaN equals NaN, -0.0 is not 0.0):
/// two kernels are equal when they compute the same thing.
impl PartialEq for Scalar {
    fn eq(&self, other: &Scalar) -> bool {
        match (self, other) {
            (Scalar::Bool(a), Scalar::Bool(b)) => a == b,
            (Scalar::Int(a), Scalar::Int(b)) => a == b,
            (Scalar::Float(a), Scalar::Float(b)) => a.to_bits() == b.to_bits(),
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
            Scalar::Int(_) => ScalarKind::Int,
            Scalar::Float(_) => ScalarKind::Float,
        }
    }

    /// As float64, as NumPy converts it (an int rounds to the nearest float64).
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }

    /// As int64, as NumPy's `astype` converts it: a float truncates toward zero; NaN,
    /// infinities and floats outside int64's range become int64's minimum (what NumPy
    /// gives on x86-64).
    pub fn as_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Float(f) => f64_to_i64(f),
        }
    }

    /// Non-zero is true.
    pub fn as_bool(self) -> bool {
        match self {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::Float(f) => f != 0.0,
        }
    }

    /// This value in the kind of `dtype` (float32 is a float64 rounded to float32).
    pub fn cast(self, dtype: DType) -> Scalar {
        match dtype {
            DType::Bool => Scalar::Bool(self.as_bool()),
            DType::Int64 => Scalar::Int(self.as_i64()),
            DType::Float64 => Scalar::Float(self.as_f64()),
            DType::Float32 => Scalar::Float(match self {
                // Rounded once, straight from the int (not via float64).
                Scalar::Int(i) => i as f32 as f64,
                s => s.as_f64() as f32 as f64,
            }),
        }
    }

    /// An integer (a bool or an int, or a float with no fraction) as int64.
    pub fn integer(self) -> Option<i64> {
        match self {
            Scalar::Float(f) if f.fract() != 0.0 || !f.is_finite() => None,
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
            Scalar::Float(v) if v.is_nan() => f.write_str("nan"),
            Scalar::Float(v) if v.is_infinite() => {
                f.write_str(if *v > 0.0 { "inf" } else { "-inf" })
            }
            Scalar::Float(v) => write!(f, "{v:?}"),
        }
    }
}

impl Serialize for Scalar {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Scalar::Bool(b) => s.serialize_bool(b),
            Scalar::Int(i) => s.serialize_i64(i),
            Scalar::Float(v) if v.is_nan() => s.serialize_str("NaN"),
            Scalar::Float(v) if v == f64::INFINITY => s.serialize_str("Infinity"),
            Scalar::Float(v) if v == f64::NEG_INFINITY => s.serialize_str("-Infinity"),
            // serde_json writes floats with a fraction or exponent ("1.0", "-0.0", "1e300"),
            // which read back as floats; its float_roundtrip feature reads them exactly.
            Scalar::Float(v) => s.serialize_f64(v),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a bool, an int64, a float or \"NaN\", \"Infinity\", \"-Infinity\"")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                i64::try_from(v)
                    .map(Scalar::Int)
                    .map_err(|_| E::custom(format!("integer {v} is out of int64's range")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                match v {
                    "NaN" => Ok(Scalar::Float(f64::NAN)),
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
        for bad in ["\"nan\"", "18446744073709551615", "null", "[1]"] {
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
    }
}
