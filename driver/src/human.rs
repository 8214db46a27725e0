//! Numbers and values for people: byte counts, memory, plurals, and small arrays as NumPy
//! prints them. A leaf: the summary, `plan`, `ls`/`show` and the timeline all print with it.

use nums_layout::{Block, DType, Elem, Scalar};

/// Bytes for people: B, kB, MB or GB (powers of 1000), three significant figures or so.
pub(crate) fn human(b: u64) -> String {
    let v = b as f64;
    match b {
        0..1_000 => format!("{b} B"),
        1_000..1_000_000 => format!("{:.1} kB", v / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", v / 1e6),
        _ => format!("{:.2} GB", v / 1e9),
    }
}

/// Memory for people, in MiB as Lambda's memory setting is.
pub(crate) fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
}

/// `n` and the noun, singular for one: `1 task`, `3 tasks`; `many` for irregular plurals
/// (`plural(2, "retry", "retries")`).
pub(crate) fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A small in-memory block's values as NumPy prints an array's (nested brackets, NumPy's
/// float format), without `array(...)` around them: the run summary's preview of an output.
pub(crate) fn format_block(b: &Block) -> String {
    let values: Vec<Printed> =
        nums_layout::with_block!(b, a => a.iter().map(|&v| printed(v)).collect());
    let shape = b.shape().to_vec();
    let values = format_values(values);
    let width = values.iter().map(String::len).max().unwrap_or(1);
    nest(&values, &shape, &vec![false; shape.len()], width, 1)
}

/// One printed element before formatting.
pub(crate) enum Printed {
    Float(f64),
    /// Real and imaginary parts, each formatted with the others of its kind (NumPy's
    /// `1.5+0.j`).
    Complex(f64, f64),
    Text(String),
}

/// An element of any dtype, as NumPy prints it: bools as `True`/`False`, ints exactly,
/// float32 parts by their own shortest digits (1.164899, not 1.16489899).
pub(crate) fn printed<T: Elem>(v: T) -> Printed {
    let narrow = matches!(T::DTYPE, DType::Float32 | DType::Complex64);
    let f = |x: f64| {
        if narrow {
            (x as f32).to_string().parse().unwrap_or(x)
        } else {
            x
        }
    };
    match v.to_scalar() {
        Scalar::Bool(b) => Printed::Text(if b { "True" } else { "False" }.into()),
        Scalar::Int(i) => Printed::Text(i.to_string()),
        Scalar::UInt(u) => Printed::Text(u.to_string()),
        Scalar::Float(x) => Printed::Float(f(x)),
        Scalar::Complex(re, im) => Printed::Complex(f(re), f(im)),
    }
}

/// NumPy's float format for an array: positional with as few decimals as the values need
/// (at most 8, dropped together), or scientific with 8 when the magnitudes span more than
/// 1e3 or reach 1e16 or fall under 1e-4.
pub(crate) fn format_values(values: Vec<Printed>) -> Vec<String> {
    if values.iter().any(|p| matches!(p, Printed::Complex(..))) {
        return format_complex(values);
    }
    let finite: Vec<f64> = values
        .iter()
        .filter_map(|p| match p {
            Printed::Float(v) if v.is_finite() && *v != 0.0 => Some(v.abs()),
            _ => None,
        })
        .collect();
    let (lo, hi) = finite
        .iter()
        .fold((f64::INFINITY, 0f64), |(l, h), &v| (l.min(v), h.max(v)));
    let sci = !finite.is_empty() && (hi >= 1e16 || lo < 1e-4 || hi / lo > 1e3);
    let special = |v: f64| {
        if v.is_nan() {
            Some("nan".to_string())
        } else if v.is_infinite() {
            Some(if v > 0.0 { "inf" } else { "-inf" }.to_string())
        } else {
            None
        }
    };
    let decimals = if sci {
        8
    } else {
        values
            .iter()
            .filter_map(|p| match p {
                Printed::Float(v) if v.is_finite() => Some(format!("{v:.8}")),
                _ => None,
            })
            .filter_map(|t| {
                t.split_once('.')
                    .map(|(_, f)| f.trim_end_matches('0').len())
            })
            .max()
            .unwrap_or(0)
    };
    values
        .into_iter()
        .map(|p| match p {
            Printed::Text(t) => t,
            Printed::Complex(..) => unreachable!("formatted by format_complex"),
            Printed::Float(v) => special(v).unwrap_or_else(|| {
                if sci {
                    let t = format!("{v:.8e}");
                    let (mant, exp) = t.split_once('e').expect("exponent");
                    let e: i32 = exp.parse().expect("exponent");
                    format!("{mant}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
                } else if decimals == 0 {
                    format!("{v:.0}.")
                } else {
                    format!("{v:.decimals$}")
                }
            }),
        })
        .collect()
}

/// Complex values as NumPy prints them: the real parts formatted together, the imaginary
/// parts together with their sign, then `re+imj` (`1.5+0.j`, `-0.-2.25j`, `nan+infj`).
fn format_complex(values: Vec<Printed>) -> Vec<String> {
    let parts: Vec<(f64, f64)> = values
        .iter()
        .map(|p| match p {
            Printed::Complex(re, im) => (*re, *im),
            Printed::Float(v) => (*v, 0.0),
            Printed::Text(_) => (f64::NAN, 0.0),
        })
        .collect();
    let re = format_values(parts.iter().map(|p| Printed::Float(p.0)).collect());
    let im = format_values(parts.iter().map(|p| Printed::Float(p.1)).collect());
    re.into_iter()
        .zip(im)
        .map(|(r, i)| {
            let sign = if i.starts_with('-') { "" } else { "+" };
            format!("{r}{sign}{i}j")
        })
        .collect()
}

/// Nested brackets as NumPy prints them, `...` where an axis is summarised.
pub(crate) fn nest(
    values: &[String],
    shape: &[usize],
    cut: &[bool],
    width: usize,
    indent: usize,
) -> String {
    if shape.is_empty() {
        return values.first().cloned().unwrap_or_default();
    }
    let n = shape[0];
    let inner: usize = shape[1..].iter().product();
    let mut parts: Vec<String> = (0..n)
        .map(|i| {
            let v = &values[i * inner..(i + 1) * inner];
            if shape.len() == 1 {
                format!("{:>width$}", v[0])
            } else {
                nest(v, &shape[1..], &cut[1..], width, indent + 1)
            }
        })
        .collect();
    if cut[0] {
        parts.insert(n / 2, "...".into());
    }
    let sep = if shape.len() == 1 {
        ", ".to_string()
    } else {
        format!(",{}{}", "\n".repeat(shape.len() - 1), " ".repeat(indent))
    };
    format!("[{}]", parts.join(&sep))
}
