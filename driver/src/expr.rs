//! Expressions in NumPy's own syntax (a Python subset): numbers, names, `+ - * / ** @`,
//! comparisons, `& | ~`, unary `-`, `.T`, calls with keyword arguments, tuples.
//! Every node keeps its position so that errors can point into the expression.

/// A parse or check error at character `pos` of an expression.
#[derive(Debug, Clone, PartialEq)]
pub struct ExprError {
    pub pos: usize,
    pub message: String,
}

impl ExprError {
    pub fn new(pos: usize, message: impl Into<String>) -> Self {
        ExprError {
            pos,
            message: message.into(),
        }
    }

    /// The message with the expression and a caret under the position.
    pub fn render(&self, text: &str) -> String {
        let col = text.chars().take(self.pos).count();
        format!(
            "{} (at column {})\n    {}\n    {}^",
            self.message,
            col + 1,
            text,
            " ".repeat(col)
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
    MatMul,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
    Xor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Pos,
    Invert,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Num(f64),
    /// An integer literal (NumPy treats `2` and `2.0` differently with int arrays).
    Int(i64),
    Bool(bool),
    Str(String),
    None,
    Name(String),
    Unary(UnOp, Box<Expr>),
    Binary(Op, Box<Expr>, Box<Expr>),
    Attr(Box<Expr>, String),
    Call(String, Vec<Expr>, Vec<Kwarg>),
    Tuple(Vec<Expr>),
    Index(Box<Expr>, Vec<Expr>),
    /// `start:stop:step` inside an index.
    Slice(Option<Box<Expr>>, Option<Box<Expr>>, Option<Box<Expr>>),
    /// `...` inside an index: as many whole axes as the other items leave.
    Ellipsis,
}

/// A keyword argument `name=value`; `pos` is the name's position.
#[derive(Debug, Clone, PartialEq)]
pub struct Kwarg {
    pub name: String,
    pub pos: usize,
    pub value: Expr,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub pos: usize,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Int(i64),
    Str(String),
    Ident(String),
    Sym(&'static str),
    End,
}

const SYMS: &[&str] = &[
    "...", "**", "//", "<=", ">=", "==", "!=", "+", "-", "*", "/", "%", "@", "<", ">", "&", "|",
    "^", "~", "(", ")", "[", "]", ",", ".", ":", "=",
];

fn lex(s: &str) -> Result<Vec<(Tok, usize)>, ExprError> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric()
                    || chars[i] == '.'
                    || chars[i] == '_'
                    || ((chars[i] == '+' || chars[i] == '-') && matches!(chars[i - 1], 'e' | 'E')))
            {
                i += 1;
            }
            let text: String = chars[start..i].iter().filter(|&&c| c != '_').collect();
            if let Ok(i) = text.parse::<i64>() {
                out.push((Tok::Int(i), start));
            } else {
                let v: f64 = text
                    .parse()
                    .map_err(|_| ExprError::new(start, format!("{text:?} is not a number")))?;
                out.push((Tok::Num(v), start));
            }
        } else if c.is_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(chars[start..i].iter().collect()), start));
        } else if c == '"' || c == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += 1;
            }
            if i == chars.len() {
                return Err(ExprError::new(start, "unterminated string"));
            }
            out.push((Tok::Str(chars[start + 1..i].iter().collect()), start));
            i += 1;
        } else {
            let rest: String = chars[i..chars.len().min(i + 3)].iter().collect();
            let sym = SYMS
                .iter()
                .find(|s| rest.starts_with(**s))
                .ok_or_else(|| ExprError::new(start, format!("unexpected character {c:?}")))?;
            i += sym.chars().count();
            out.push((Tok::Sym(sym), start));
        }
    }
    out.push((Tok::End, chars.len()));
    Ok(out)
}

/// Parses one expression.
pub fn parse(s: &str) -> Result<Expr, ExprError> {
    let toks = lex(s)?;
    let mut p = Parser { toks, i: 0 };
    let e = p.expr(0)?;
    match p.peek() {
        Tok::End => Ok(e),
        t => Err(ExprError::new(
            p.pos(),
            format!("unexpected {}", describe(t)),
        )),
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Num(v) => format!("number {v}"),
        Tok::Int(v) => format!("number {v}"),
        Tok::Str(s) => format!("string {s:?}"),
        Tok::Ident(s) => format!("name {s}"),
        Tok::Sym(s) => format!("'{s}'"),
        Tok::End => "end of expression".into(),
    }
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    i: usize,
}

fn infix(t: &Tok) -> Option<(Op, u8)> {
    let Tok::Sym(s) = t else { return None };
    Some(match *s {
        "<" => (Op::Lt, 1),
        "<=" => (Op::Le, 1),
        ">" => (Op::Gt, 1),
        ">=" => (Op::Ge, 1),
        "==" => (Op::Eq, 1),
        "!=" => (Op::Ne, 1),
        "|" => (Op::Or, 2),
        "^" => (Op::Xor, 3),
        "&" => (Op::And, 4),
        "+" => (Op::Add, 6),
        "-" => (Op::Sub, 6),
        "*" => (Op::Mul, 7),
        "/" => (Op::Div, 7),
        "//" => (Op::FloorDiv, 7),
        "%" => (Op::Mod, 7),
        "@" => (Op::MatMul, 7),
        _ => return None,
    })
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.i].0
    }
    fn pos(&self) -> usize {
        self.toks[self.i].1
    }
    fn next(&mut self) -> (Tok, usize) {
        let t = self.toks[self.i].clone();
        if self.i + 1 < self.toks.len() {
            self.i += 1;
        }
        t
    }
    fn eat(&mut self, sym: &str) -> bool {
        if *self.peek() == Tok::Sym(leak(sym)) {
            self.next();
            true
        } else {
            false
        }
    }
    fn expect(&mut self, sym: &str) -> Result<(), ExprError> {
        if self.eat(sym) {
            Ok(())
        } else {
            Err(ExprError::new(
                self.pos(),
                format!("expected '{sym}', found {}", describe(self.peek())),
            ))
        }
    }

    /// Precedence climbing over binary operators with binding power above `min`.
    fn expr(&mut self, min: u8) -> Result<Expr, ExprError> {
        let mut lhs = self.unary()?;
        while let Some((op, bp)) = infix(self.peek()) {
            if bp <= min {
                break;
            }
            let pos = self.pos();
            self.next();
            let rhs = self.expr(bp)?;
            if bp == 1 && matches!(lhs.kind, ExprKind::Binary(o, ..) if infix_bp(o) == 1) {
                return Err(ExprError::new(
                    pos,
                    "chained comparisons are ambiguous for arrays; add parentheses",
                ));
            }
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                pos,
            };
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        let pos = self.pos();
        let op = match self.peek() {
            Tok::Sym("-") => Some(UnOp::Neg),
            Tok::Sym("+") => Some(UnOp::Pos),
            Tok::Sym("~") => Some(UnOp::Invert),
            _ => None,
        };
        if let Some(op) = op {
            self.next();
            let x = self.unary()?;
            return Ok(Expr {
                kind: ExprKind::Unary(op, Box::new(x)),
                pos,
            });
        }
        let base = self.postfix()?;
        if self.eat("**") {
            // Right-associative and tighter than unary minus on its left: -x**2 == -(x**2).
            let exp = self.unary()?;
            return Ok(Expr {
                kind: ExprKind::Binary(Op::Pow, Box::new(base), Box::new(exp)),
                pos,
            });
        }
        Ok(base)
    }

    fn postfix(&mut self) -> Result<Expr, ExprError> {
        let mut e = self.atom()?;
        loop {
            let pos = self.pos();
            if self.eat(".") {
                let (t, p) = self.next();
                let Tok::Ident(name) = t else {
                    return Err(ExprError::new(p, "expected an attribute name after '.'"));
                };
                if self.eat("(") {
                    // `np.f(a)` is `f(a)`; a method `x.f(a)` is `f(x, a)`.
                    let (mut args, kwargs) = self.call_args()?;
                    if !matches!(&e.kind, ExprKind::Name(n) if n == "np" || n == "numpy") {
                        args.insert(0, e);
                    }
                    e = Expr {
                        kind: ExprKind::Call(name, args, kwargs),
                        pos: p,
                    };
                    continue;
                }
                e = Expr {
                    kind: ExprKind::Attr(Box::new(e), name),
                    pos,
                };
            } else if self.eat("[") {
                let mut items = Vec::new();
                loop {
                    items.push(self.index_item()?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("]")?;
                e = Expr {
                    kind: ExprKind::Index(Box::new(e), items),
                    pos,
                };
            } else {
                return Ok(e);
            }
        }
    }

    fn index_item(&mut self) -> Result<Expr, ExprError> {
        let pos = self.pos();
        if self.eat("...") {
            return Ok(Expr {
                kind: ExprKind::Ellipsis,
                pos,
            });
        }
        let bound = |p: &mut Parser| -> Result<Option<Box<Expr>>, ExprError> {
            if matches!(p.peek(), Tok::Sym(":") | Tok::Sym(",") | Tok::Sym("]")) {
                Ok(None)
            } else {
                Ok(Some(Box::new(p.expr(0)?)))
            }
        };
        let start = bound(self)?;
        if !self.eat(":") {
            return start
                .map(|b| *b)
                .ok_or_else(|| ExprError::new(pos, "empty index"));
        }
        let stop = bound(self)?;
        let step = if self.eat(":") { bound(self)? } else { None };
        Ok(Expr {
            kind: ExprKind::Slice(start, stop, step),
            pos,
        })
    }

    fn atom(&mut self) -> Result<Expr, ExprError> {
        let (t, pos) = self.next();
        let kind = match t {
            Tok::Num(v) => ExprKind::Num(v),
            Tok::Int(v) => ExprKind::Int(v),
            Tok::Str(s) => ExprKind::Str(s),
            Tok::Ident(name) => match name.as_str() {
                "True" => ExprKind::Bool(true),
                "False" => ExprKind::Bool(false),
                "None" => ExprKind::None,
                _ if *self.peek() == Tok::Sym("(") => {
                    self.next();
                    let (args, kwargs) = self.call_args()?;
                    ExprKind::Call(name, args, kwargs)
                }
                _ => ExprKind::Name(name),
            },
            Tok::Sym("(") => {
                let first = self.expr(0)?;
                if self.eat(")") {
                    return Ok(first);
                }
                let mut items = vec![first];
                while self.eat(",") {
                    if *self.peek() == Tok::Sym(")") {
                        break;
                    }
                    items.push(self.expr(0)?);
                }
                self.expect(")")?;
                ExprKind::Tuple(items)
            }
            Tok::Sym("[") => {
                let mut items = Vec::new();
                while *self.peek() != Tok::Sym("]") {
                    items.push(self.expr(0)?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("]")?;
                ExprKind::Tuple(items)
            }
            t => return Err(ExprError::new(pos, format!("unexpected {}", describe(&t)))),
        };
        Ok(Expr { kind, pos })
    }

    fn call_args(&mut self) -> Result<(Vec<Expr>, Vec<Kwarg>), ExprError> {
        let mut args = Vec::new();
        let mut kwargs = Vec::new();
        while *self.peek() != Tok::Sym(")") {
            let pos = self.pos();
            if let (Tok::Ident(k), Tok::Sym("=")) =
                (self.peek().clone(), self.toks[self.i + 1].0.clone())
            {
                self.next();
                self.next();
                kwargs.push(Kwarg {
                    name: k,
                    pos,
                    value: self.expr(0)?,
                });
            } else {
                if !kwargs.is_empty() {
                    return Err(ExprError::new(
                        pos,
                        "positional argument after a keyword argument",
                    ));
                }
                args.push(self.expr(0)?);
            }
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")")?;
        Ok((args, kwargs))
    }
}

fn infix_bp(op: Op) -> u8 {
    match op {
        Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Eq | Op::Ne => 1,
        _ => 0,
    }
}

/// The static symbol equal to `s` (so tokens compare without allocating).
fn leak(s: &str) -> &'static str {
    SYMS.iter().find(|x| **x == s).copied().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Num(v) => format!("{v}"),
            ExprKind::Int(v) => format!("{v}"),
            ExprKind::Name(n) => n.clone(),
            ExprKind::Str(s) => format!("{s:?}"),
            ExprKind::Unary(op, x) => format!("({op:?} {})", show(x)),
            ExprKind::Binary(op, a, b) => format!("({op:?} {} {})", show(a), show(b)),
            ExprKind::Attr(x, a) => format!("{}.{a}", show(x)),
            ExprKind::Call(f, a, k) => format!(
                "{f}({}{})",
                a.iter().map(show).collect::<Vec<_>>().join(","),
                k.iter()
                    .map(|k| format!(",{}={}", k.name, show(&k.value)))
                    .collect::<String>()
            ),
            ExprKind::Tuple(t) => format!("({})", t.iter().map(show).collect::<Vec<_>>().join(",")),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn precedence_follows_python() {
        assert_eq!(
            show(&parse("X @ w > 0.5").unwrap()),
            "(Gt (MatMul X w) 0.5)"
        );
        assert_eq!(show(&parse("-x ** 2").unwrap()), "(Neg (Pow x 2))");
        assert_eq!(show(&parse("a - b - c").unwrap()), "(Sub (Sub a b) c)");
        assert_eq!(show(&parse("2 ** 3 ** 2").unwrap()), "(Pow 2 (Pow 3 2))");
        assert_eq!(
            show(&parse("sum(X.T, axis=(0, 1))").unwrap()),
            "sum(X.T,axis=(0,1))"
        );
        assert_eq!(show(&parse("1e-3 * x").unwrap()), "(Mul 0.001 x)");
    }

    #[test]
    fn errors_point_at_the_position() {
        let e = parse("a + * b").unwrap_err();
        assert_eq!(e.pos, 4);
        assert!(e.render("a + * b").contains("    a + * b\n        ^"));
        assert_eq!(parse("(a + b").unwrap_err().pos, 6);
        assert_eq!(parse("a < b < c").unwrap_err().pos, 6);
        assert_eq!(parse("a $ b").unwrap_err().pos, 2);
    }
}
