//! Numbers and values for people: byte counts, memory, plurals, and small arrays as NumPy
//! prints them. A leaf: the summary, `plan`, `ls`/`show` and the timeline all print with it.

use nums_layout::{Block, Elem, Scalar};

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
/// float format), without `array(...)` around them, in lines of at most `line_width`
/// columns: the run summary's preview of an output.
pub(crate) fn format_block(b: &Block, line_width: usize) -> String {
    let values: Vec<Printed> =
        nums_layout::with_block!(b, a => a.iter().map(|&v| printed(v)).collect());
    let shape = b.shape().to_vec();
    let values = format_values(values);
    let width = values.iter().map(String::len).max().unwrap_or(1);
    nest(
        &values,
        &shape,
        &vec![false; shape.len()],
        width,
        0,
        line_width,
    )
}

/// One printed element before formatting.
#[derive(Clone, Copy)]
pub(crate) enum Printed {
    Float(f64),
    /// Printed with a float32's own shortest digits, as NumPy prints them.
    Float32(f32),
    /// An int of any width (uint64's largest included).
    Int(i128),
    Bool(bool),
    /// Real and imaginary parts (each a `Float` or a `Float32`), formatted as NumPy's
    /// `ComplexFloatingFormat` does: the real parts together, the imaginary parts together
    /// with their signs, then `re+imj`.
    Complex(f64, f64),
    /// A complex64's parts, with float32's own digits.
    Complex64(f32, f32),
}

/// An element of any dtype as NumPy prints it.
pub(crate) fn printed<T: Elem>(v: T) -> Printed {
    match (T::DTYPE, v.to_scalar()) {
        (_, Scalar::Bool(b)) => Printed::Bool(b),
        (_, Scalar::Int(i)) => Printed::Int(i.into()),
        (_, Scalar::UInt(u)) => Printed::Int(u.into()),
        (nums_layout::DType::Float32, Scalar::Float(x)) => Printed::Float32(x as f32),
        (_, Scalar::Float(x)) => Printed::Float(x),
        (nums_layout::DType::Complex64, Scalar::Complex(re, im)) => {
            Printed::Complex64(re as f32, im as f32)
        }
        (_, Scalar::Complex(re, im)) => Printed::Complex(re, im),
    }
}

/// NumPy's most fractional digits (`precision`).
const PRECISION: usize = 8;

/// `text` without trailing zeros after its decimal point (the point kept: `3.`).
fn trim_zeros(text: &str) -> String {
    match text.split_once('.') {
        Some((int, frac)) => format!("{int}.{}", frac.trim_end_matches('0')),
        None => format!("{text}."),
    }
}

/// A float as NumPy's `maxprec` mode writes it before padding: the shortest digits that
/// read back to the value (of its own type), at most [`PRECISION`] after the point
/// (rounded), trailing zeros dropped; positional (`-0.25`, `3.`) or scientific
/// (mantissa and exponent apart: `("-2.5", -7)`).
fn digits(p: &Printed, sci: bool, plus: bool) -> (String, i32) {
    let (t, e) = unsigned_digits(p, sci);
    // NumPy's `sign='+'` (a complex's imaginary parts): `+` before a non-negative value.
    if plus && !t.starts_with('-') {
        (format!("+{t}"), e)
    } else {
        (t, e)
    }
}

/// [`digits`] without a `+`.
fn unsigned_digits(p: &Printed, sci: bool) -> (String, i32) {
    macro_rules! of {
        ($v:expr) => {{
            let v = $v;
            if sci {
                let short = format!("{v:e}");
                let (mant, exp) = short.split_once('e').expect("an exponent");
                let mant = match mant.split_once('.') {
                    Some((_, f)) if f.len() > PRECISION => {
                        let t = format!("{v:.PRECISION$e}");
                        let (m, e) = t.split_once('e').expect("an exponent");
                        return (trim_zeros(m), e.parse().expect("an exponent"));
                    }
                    _ => trim_zeros(mant),
                };
                (mant, exp.parse().expect("an exponent"))
            } else {
                let short = format!("{v}");
                match short.split_once('.') {
                    Some((_, f)) if f.len() > PRECISION => {
                        (trim_zeros(&format!("{v:.PRECISION$}")), 0)
                    }
                    _ => (trim_zeros(&short), 0),
                }
            }
        }};
    }
    match p {
        Printed::Float(v) => of!(*v),
        Printed::Float32(v) => of!(*v),
        _ => (String::new(), 0),
    }
}

/// NumPy's default print format for an array's elements (`FloatingFormat` in `maxprec`
/// mode, `IntegerFormat`, `BoolFormat`), each string as wide as the others: floats
/// positional with at most 8 decimals, the integer parts right-aligned and the decimals
/// left-aligned (`0.5 `, `0.25`), or scientific with as many digits as the most exact
/// needs when the magnitudes span more than 1e3, reach 1e8 or fall under 1e-4; `nan` and
/// `inf` right-aligned in the same width; ints right-aligned; bools ` True` and `False`.
pub(crate) fn format_values(values: Vec<Printed>) -> Vec<String> {
    let parts = |p: &Printed| match *p {
        Printed::Complex(re, im) => Some((Printed::Float(re), Printed::Float(im))),
        Printed::Complex64(re, im) => Some((Printed::Float32(re), Printed::Float32(im))),
        _ => None,
    };
    if values.iter().any(|p| parts(p).is_some()) {
        let (re, im): (Vec<Printed>, Vec<Printed>) = values.iter().filter_map(parts).unzip();
        let (re, im) = (format_floats(&re, false), format_floats(&im, true));
        // The `j` goes before the imaginary part's padding: `1.5+2.j  `.
        return re
            .into_iter()
            .zip(im)
            .map(|(r, i)| {
                let end = i.trim_end().len();
                format!("{r}{}j{}", &i[..end], &i[end..])
            })
            .collect();
    }
    if values
        .iter()
        .any(|p| matches!(p, Printed::Float(_) | Printed::Float32(_)))
    {
        return format_floats(&values, false);
    }
    let texts: Vec<String> = values
        .iter()
        .map(|p| match p {
            Printed::Int(v) => v.to_string(),
            Printed::Bool(true) => " True".into(),
            Printed::Bool(false) => "False".into(),
            _ => unreachable!("not a number of these kinds"),
        })
        .collect();
    let w = texts.iter().map(String::len).max().unwrap_or(0);
    texts.into_iter().map(|t| format!("{t:>w$}")).collect()
}

/// NumPy's `FloatingFormat` of floats (`plus`: its `sign='+'`, a `+` before non-negative
/// values and infinities, as a complex's imaginary parts have).
fn format_floats(values: &[Printed], plus: bool) -> Vec<String> {
    let float = |p: &Printed| match p {
        Printed::Float(v) => Some(*v),
        Printed::Float32(v) => Some(*v as f64),
        _ => None,
    };
    let finite: Vec<&Printed> = values
        .iter()
        .filter(|p| float(p).is_some_and(f64::is_finite))
        .collect();
    let magnitudes: Vec<f64> = finite
        .iter()
        .filter_map(|p| float(p))
        .filter(|v| *v != 0.0)
        .map(f64::abs)
        .collect();
    let (lo, hi) = magnitudes
        .iter()
        .fold((f64::INFINITY, 0f64), |(l, h), &v| (l.min(v), h.max(v)));
    let sci = !magnitudes.is_empty() && (hi >= 1e8 || lo < 1e-4 || hi / lo > 1e3);
    let split = |t: &str| -> (String, String) {
        let (i, f) = t.split_once('.').unwrap_or((t, ""));
        (i.to_string(), f.to_string())
    };
    // The widths of the integer part, the decimals and (scientific) the exponent.
    let parts: Vec<(String, i32)> = finite.iter().map(|p| digits(p, sci, plus)).collect();
    let pad_left = parts
        .iter()
        .map(|(t, _)| split(t).0.len())
        .max()
        .unwrap_or(0);
    let precision = parts
        .iter()
        .map(|(t, _)| split(t).1.len())
        .max()
        .unwrap_or(0);
    let exp_size = parts
        .iter()
        .map(|(_, e)| e.unsigned_abs().to_string().len().max(2))
        .max()
        .unwrap_or(0);
    let pad_right = if sci {
        exp_size + 2 + precision
    } else {
        precision
    };
    // Room for `nan`, `inf` and `-inf` in the integer part's place.
    let neginf = plus
        || values
            .iter()
            .any(|p| float(p).is_some_and(|v| v == f64::NEG_INFINITY));
    let pad_left = if finite.len() == values.len() {
        pad_left
    } else {
        let offset = pad_right + 1;
        pad_left
            .max(3usize.saturating_sub(offset))
            .max((3 + neginf as usize).saturating_sub(offset))
    };
    let width = pad_left + 1 + pad_right;
    values
        .iter()
        .map(|p| {
            let v = float(p).expect("a float");
            let sign = if plus { "+" } else { "" };
            if v.is_nan() {
                return format!("{:>width$}", format!("{sign}nan"));
            }
            if v.is_infinite() {
                return format!(
                    "{:>width$}",
                    if v > 0.0 {
                        format!("{sign}inf")
                    } else {
                        "-inf".into()
                    }
                );
            }
            if sci {
                // Every value with the most decimals any needs (zeros kept).
                let t = match p {
                    Printed::Float32(x) => format!("{x:.precision$e}"),
                    _ => format!("{v:.precision$e}"),
                };
                let (mant, exp) = t.split_once('e').expect("an exponent");
                let e: i32 = exp.parse().expect("an exponent");
                let (i, f) = split(mant);
                let i = if plus && !i.starts_with('-') {
                    format!("+{i}")
                } else {
                    i
                };
                format!(
                    "{i:>pad_left$}.{f}e{}{:0exp_size$}",
                    if e < 0 { '-' } else { '+' },
                    e.unsigned_abs()
                )
            } else {
                let (i, f) = split(&digits(p, false, plus).0);
                format!("{i:>pad_left$}.{f:<precision$}")
            }
        })
        .collect()
}

/// NumPy's line width (`np.get_printoptions()["linewidth"]`).
pub(crate) const LINE_WIDTH: usize = 75;

/// Nested brackets as NumPy's `_formatArray` prints them: `...` where an axis is
/// summarised (`cut`), each value padded to `width`, and the values of a row wrapped so
/// that no line is longer than `line_width` columns, counting the `prefix` columns before
/// the first bracket (6 for `array(`) and one for a closing bracket.
pub(crate) fn nest(
    values: &[String],
    shape: &[usize],
    cut: &[bool],
    width: usize,
    prefix: usize,
    line_width: usize,
) -> String {
    let padded: Vec<String> = values.iter().map(|v| format!("{v:>width$}")).collect();
    let hanging = " ".repeat(prefix + 1);
    recurse(&padded, shape, cut, &hanging, line_width)
}

/// One axis of [`nest`]: `hanging` the indent of its continuation lines, `room` the
/// columns it may fill.
fn recurse(values: &[String], shape: &[usize], cut: &[bool], hanging: &str, room: usize) -> String {
    if shape.is_empty() {
        return values.first().cloned().unwrap_or_default();
    }
    let n = shape[0];
    let inner: usize = shape[1..].iter().product();
    let next_hanging = format!("{hanging} ");
    let next_room = room.saturating_sub(1); // the `]` this axis adds
    let item = |i: usize| -> String {
        if shape.len() == 1 {
            values[i].clone()
        } else {
            recurse(
                &values[i * inner..(i + 1) * inner],
                &shape[1..],
                &cut[1..],
                &next_hanging,
                next_room,
            )
        }
    };
    // A summarised axis holds its first and last items, `...` between them.
    let leading = if cut[0] { n / 2 } else { 0 };
    let mut s = String::new();
    if shape.len() == 1 {
        // The last axis: values on a line until the next would pass the room (less the
        // `,` or `]` after it).
        let room = room.saturating_sub(1);
        let mut line = hanging.to_string();
        let mut words: Vec<String> = (0..leading).map(item).collect();
        if cut[0] {
            words.push("...".into());
        }
        words.extend((leading..n).map(item));
        let last = words.len().saturating_sub(1);
        for (k, word) in words.iter().enumerate() {
            // NumPy does not wrap where the line holds only its indent.
            if line.len() + word.len() > room && line.len() > hanging.len() {
                s += line.trim_end();
                s.push('\n');
                line = hanging.to_string();
            }
            line += word;
            if k < last {
                line += ", ";
            }
        }
        s += &line;
    } else {
        // Other axes: one item per line, a blank line between items of a higher axis.
        let sep = format!(",{}", "\n".repeat(shape.len() - 1));
        let mut parts: Vec<String> = (0..leading).map(item).collect();
        if cut[0] {
            parts.push("...".into());
        }
        parts.extend((leading..n).map(item));
        let last = parts.len().saturating_sub(1);
        for (k, part) in parts.iter().enumerate() {
            s += hanging;
            s += part;
            if k < last {
                s += &sep;
            }
        }
    }
    format!("[{}]", &s[hanging.len().min(s.len())..])
}
