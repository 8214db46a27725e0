//! From API calls to expressions of the graph builder, without text: each operation is an
//! [`Expr`](crate::expr::Expr) tree built in memory whose operands are the names `$0`,
//! `$1`, ... bound to nodes already in the session's graph, and a label (NumPy's spelling
//! of the operation over its operands' labels) for messages and `Debug`.

use crate::expr::{Expr, ExprKind, Kwarg, Op, UnOp};

use super::handle::Array;

/// An argument of a call: what NumPy's functions take.
#[derive(Clone, Debug)]
pub enum Arg {
    /// An array of the session.
    Array(Array),
    /// A Python int.
    Int(i64),
    /// A Python float.
    Float(f64),
    /// `True` or `False`.
    Bool(bool),
    /// A Python int above int64's largest, up to uint64's (a uint64, as NumPy makes it).
    UInt(u64),
    /// A Python complex: its real and imaginary parts.
    Complex(f64, f64),
    /// A NumPy scalar (`np.int32(-1)`, `np.float32(0.1)`): its value, exact in its
    /// dtype, and the dtype, which it keeps in promotion as a 0-d array does (NEP 50).
    NumPy(nums_layout::Scalar, nums_layout::DType),
    /// A string (a dtype's name, einsum's subscripts, a solver's name).
    Str(String),
    /// `None`.
    None,
    /// A tuple (a shape, several axes, several operands).
    Tuple(Vec<Arg>),
    /// `start:stop:step` inside an index (`None` where Python leaves it out).
    Slice(Option<i64>, Option<i64>, Option<i64>),
    /// `...` inside an index.
    Ellipsis,
}

macro_rules! arg_from {
    ($($t:ty => $v:ident as $c:ty),*) => {$(
        impl From<$t> for Arg {
            fn from(x: $t) -> Arg {
                Arg::$v(x as $c)
            }
        }
    )*};
}
arg_from!(i64 => Int as i64, i32 => Int as i64, usize => Int as i64, u64 => Int as i64,
          f64 => Float as f64, f32 => Float as f64, bool => Bool as bool);

impl From<&str> for Arg {
    fn from(s: &str) -> Arg {
        Arg::Str(s.to_string())
    }
}

impl From<&Array> for Arg {
    fn from(a: &Array) -> Arg {
        Arg::Array(a.clone())
    }
}

impl From<Array> for Arg {
    fn from(a: Array) -> Arg {
        Arg::Array(a)
    }
}

impl<T: Into<Arg> + Clone> From<&[T]> for Arg {
    fn from(items: &[T]) -> Arg {
        Arg::Tuple(items.iter().cloned().map(Into::into).collect())
    }
}

impl<T: Into<Arg>> From<Vec<T>> for Arg {
    fn from(items: Vec<T>) -> Arg {
        Arg::Tuple(items.into_iter().map(Into::into).collect())
    }
}

impl<T: Into<Arg>> From<Option<T>> for Arg {
    fn from(x: Option<T>) -> Arg {
        x.map_or(Arg::None, Into::into)
    }
}

/// An expression being built: its operands (the arrays `$k` stands for) in order.
#[derive(Default)]
pub(crate) struct Operands(pub Vec<Array>);

fn e(kind: ExprKind) -> Expr {
    Expr { kind, pos: 0 }
}

impl Operands {
    /// `a` as an operand: `$k`, the same `k` for the same array.
    pub(crate) fn array(&mut self, a: &Array) -> Expr {
        let k = match self.0.iter().position(|x| x.same(a)) {
            Some(k) => k,
            None => {
                self.0.push(a.clone());
                self.0.len() - 1
            }
        };
        e(ExprKind::Name(format!("${k}")))
    }

    pub(crate) fn arg(&mut self, a: &Arg) -> Expr {
        match a {
            Arg::Array(x) => self.array(x),
            Arg::Int(i) => e(ExprKind::Int(*i)),
            Arg::Float(f) => e(ExprKind::Num(*f)),
            Arg::Bool(b) => e(ExprKind::Bool(*b)),
            Arg::UInt(u) => e(ExprKind::UInt(*u)),
            // `re + imj`, which the expression language folds into one complex number.
            Arg::Complex(re, im) => e(ExprKind::Binary(
                Op::Add,
                Box::new(e(ExprKind::Num(*re))),
                Box::new(e(ExprKind::Imag(*im))),
            )),
            // `astype(v, dtype)` of a number is the NumPy scalar of that dtype.
            Arg::NumPy(v, d) => {
                let v = match *v {
                    nums_layout::Scalar::Bool(b) => Arg::Bool(b),
                    nums_layout::Scalar::Int(i) => Arg::Int(i),
                    nums_layout::Scalar::UInt(u) => Arg::UInt(u),
                    nums_layout::Scalar::Float(f) => Arg::Float(f),
                    nums_layout::Scalar::Complex(re, im) => Arg::Complex(re, im),
                };
                self.call("astype", &[v, Arg::Str(d.name().into())], &[])
            }
            Arg::Str(s) => e(ExprKind::Str(s.clone())),
            Arg::None => e(ExprKind::None),
            Arg::Tuple(t) => e(ExprKind::Tuple(t.iter().map(|x| self.arg(x)).collect())),
            Arg::Slice(a, b, c) => {
                let bound = |x: &Option<i64>| x.map(|i| Box::new(e(ExprKind::Int(i))));
                e(ExprKind::Slice(bound(a), bound(b), bound(c)))
            }
            Arg::Ellipsis => e(ExprKind::Ellipsis),
        }
    }

    /// `f(args, kwargs)`.
    pub(crate) fn call(&mut self, f: &str, args: &[Arg], kwargs: &[(&str, Arg)]) -> Expr {
        let args = args.iter().map(|a| self.arg(a)).collect();
        let kwargs = kwargs
            .iter()
            .map(|(name, v)| Kwarg {
                name: name.to_string(),
                pos: 0,
                value: self.arg(v),
            })
            .collect();
        e(ExprKind::Call(f.to_string(), args, kwargs))
    }

    pub(crate) fn binary(&mut self, op: Op, a: &Arg, b: &Arg) -> Expr {
        let (a, b) = (self.arg(a), self.arg(b));
        e(ExprKind::Binary(op, Box::new(a), Box::new(b)))
    }

    pub(crate) fn unary(&mut self, op: UnOp, a: &Arg) -> Expr {
        let a = self.arg(a);
        e(ExprKind::Unary(op, Box::new(a)))
    }

    pub(crate) fn index(&mut self, a: &Array, items: &[Arg]) -> Expr {
        let x = self.array(a);
        let items = items.iter().map(|i| self.arg(i)).collect();
        e(ExprKind::Index(Box::new(x), items))
    }

    /// `a.at[items].set(value)`.
    pub(crate) fn at_set(&mut self, a: &Array, items: &[Arg], value: &Arg) -> Expr {
        let x = self.attr(a, "at");
        let items = items.iter().map(|i| self.arg(i)).collect();
        let target = e(ExprKind::Index(Box::new(x), items));
        let v = self.arg(value);
        e(ExprKind::Call("set".into(), vec![target, v], vec![]))
    }

    pub(crate) fn attr(&mut self, a: &Array, name: &str) -> Expr {
        let x = self.array(a);
        e(ExprKind::Attr(Box::new(x), name.to_string()))
    }
}

/// How NumPy users would write `e` (operands by their labels): for messages only, never
/// parsed.
pub(crate) fn label(e: &Expr, ops: &[Array]) -> String {
    let operand = |x: &Expr| match &x.kind {
        ExprKind::Binary(..) => format!("({})", label(x, ops)),
        _ => label(x, ops),
    };
    match &e.kind {
        ExprKind::Num(v) => python_float(*v),
        ExprKind::Int(i) => i.to_string(),
        ExprKind::UInt(u) => u.to_string(),
        ExprKind::Imag(v) => format!("{}j", python_float(*v).trim_end_matches(".0")),
        ExprKind::Bool(b) => if *b { "True" } else { "False" }.into(),
        ExprKind::Str(s) => format!("{s:?}"),
        ExprKind::None => "None".into(),
        ExprKind::Name(n) => match n.strip_prefix('$').and_then(|k| k.parse::<usize>().ok()) {
            Some(k) => ops.get(k).map_or_else(|| n.clone(), |a| short(a.label())),
            None => n.clone(),
        },
        ExprKind::Unary(op, x) => {
            let s = match op {
                UnOp::Neg => "-",
                UnOp::Pos => "+",
                UnOp::Invert => "~",
            };
            format!("{s}{}", operand(x))
        }
        ExprKind::Binary(op, a, b) => format!("{} {} {}", operand(a), op_str(*op), operand(b)),
        ExprKind::Attr(x, a) => format!("{}.{a}", operand(x)),
        ExprKind::Call(f, args, kwargs) => {
            let mut parts: Vec<String> = args.iter().map(|a| label(a, ops)).collect();
            parts.extend(
                kwargs
                    .iter()
                    .map(|k| format!("{}={}", k.name, label(&k.value, ops))),
            );
            format!("{f}({})", parts.join(", "))
        }
        ExprKind::Tuple(t) => match t.as_slice() {
            [one] => format!("({},)", label(one, ops)),
            t => format!(
                "({})",
                t.iter()
                    .map(|x| label(x, ops))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
        ExprKind::Index(x, items) => format!(
            "{}[{}]",
            operand(x),
            items
                .iter()
                .map(|i| label(i, ops))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ExprKind::Slice(a, b, c) => {
            let part = |x: &Option<Box<Expr>>| x.as_ref().map_or(String::new(), |x| label(x, ops));
            match c {
                Some(_) => format!("{}:{}:{}", part(a), part(b), part(c)),
                None => format!("{}:{}", part(a), part(b)),
            }
        }
        ExprKind::Ellipsis => "...".into(),
    }
}

/// An operand's label as it appears in another's: long ones cut (a chain of a thousand
/// operations would otherwise label each with all those before it).
fn short(l: String) -> String {
    const MAX: usize = 60;
    match l.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &l[..at]),
        None => l,
    }
}

fn op_str(op: Op) -> &'static str {
    match op {
        Op::Add => "+",
        Op::Sub => "-",
        Op::Mul => "*",
        Op::Div => "/",
        Op::FloorDiv => "//",
        Op::Mod => "%",
        Op::Pow => "**",
        Op::MatMul => "@",
        Op::Lt => "<",
        Op::Le => "<=",
        Op::Gt => ">",
        Op::Ge => ">=",
        Op::Eq => "==",
        Op::Ne => "!=",
        Op::And => "&",
        Op::Or => "|",
        Op::Xor => "^",
        Op::Shl => "<<",
        Op::Shr => ">>",
    }
}

/// A float as Python prints it (`2.0`, `inf`, `nan`).
pub(crate) fn python_float(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else if v == v.trunc() && v.abs() < 1e16 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}
