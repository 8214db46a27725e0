//! Expressions in NumPy's own syntax (a Python subset): numbers, names, `+ - * / ** @`,
//! comparisons, `& | ~`, unary `-`, `.T`, calls with keyword arguments, tuples.
//! Every node keeps its position so that errors can point into the expression.
//!
//! Expressions come from users, so the parser is bounded: at most [`MAX_EXPR_CHARS`]
//! characters and [`MAX_EXPR_DEPTH`] levels of nesting, both in the parser's own recursion
//! and in the tree it returns (whose evaluation recurses as deep), so that neither parsing
//! nor evaluating an expression can overflow the stack.

/// The longest expression accepted, in characters: far beyond a hand-written one, and
/// small enough that parsing and checking it take milliseconds.
pub(crate) const MAX_EXPR_CHARS: usize = 100_000;

/// The deepest expression accepted: parentheses, brackets, calls, operators and indexing
/// each add a level (a chain such as `a + b + c` adds one per operator). Python's own
/// parser stops at 200 nested parentheses; evaluating 256 levels needs well under the
/// 2 MiB stack of a Rust thread.
pub(crate) const MAX_EXPR_DEPTH: usize = 256;

/// A parse or check error at character `pos` of an expression, with the exception NumPy
/// raises for it (ValueError unless said otherwise).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExprError {
    pub pos: usize,
    pub message: String,
    pub raises: crate::refusal::PyException,
}

impl ExprError {
    pub(crate) fn new(pos: usize, message: impl Into<String>) -> Self {
        Self::raising(crate::refusal::PyException::ValueError, pos, message)
    }

    /// An error NumPy raises as `raises` (a TypeError for dtypes, an IndexError, ...).
    pub(crate) fn raising(
        raises: crate::refusal::PyException,
        pos: usize,
        message: impl Into<String>,
    ) -> Self {
        ExprError {
            pos,
            message: message.into(),
            raises,
        }
    }

    /// `r` at `pos`.
    pub(crate) fn refused(pos: usize, r: crate::refusal::Refusal) -> Self {
        Self::raising(r.raises, pos, r.message)
    }

    /// The message with the expression and a caret under the position.
    pub(crate) fn render(&self, text: &str) -> String {
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
pub(crate) enum Op {
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
    Shl,
    Shr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnOp {
    Neg,
    Pos,
    Invert,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ExprKind {
    Num(f64),
    /// An imaginary literal (`2j`): the complex number with this imaginary part.
    Imag(f64),
    /// An integer literal (NumPy treats `2` and `2.0` differently with int arrays).
    Int(i64),
    /// An integer literal above int64's range, up to uint64's largest.
    UInt(u64),
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
pub(crate) struct Kwarg {
    pub name: String,
    pub pos: usize,
    pub value: Expr,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expr {
    pub kind: ExprKind,
    pub pos: usize,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Imag(f64),
    Int(i64),
    UInt(u64),
    Str(String),
    Ident(String),
    Sym(&'static str),
    End,
}

const SYMS: &[&str] = &[
    "...", "**", "//", "<<", ">>", "<=", ">=", "==", "!=", "+", "-", "*", "/", "%", "@", "<", ">",
    "&", "|", "^", "~", "(", ")", "[", "]", ",", ".", ":", "=",
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
            } else if text.bytes().all(|b| b.is_ascii_digit()) {
                // A Python int outside int64: -2**63 (after a unary minus), or one up to
                // uint64's largest; NumPy raises OverflowError for larger ones.
                let operand_before = |t: Option<&(Tok, usize)>| {
                    matches!(
                        t,
                        Some((
                            Tok::Int(_)
                                | Tok::UInt(_)
                                | Tok::Num(_)
                                | Tok::Imag(_)
                                | Tok::Str(_)
                                | Tok::Ident(_),
                            _
                        )) | Some((Tok::Sym(")" | "]"), _))
                    )
                };
                let k = out.len();
                let unary_minus = k >= 1
                    && out[k - 1].0 == Tok::Sym("-")
                    && !operand_before(k.checked_sub(2).map(|j| &out[j]));
                // `-2**63 ** y` is `-(2**63 ** y)`: then 2**63 (a uint64) is the base.
                let next: String = chars[i..]
                    .iter()
                    .filter(|c| !c.is_whitespace())
                    .take(2)
                    .collect();
                if unary_minus && text == "9223372036854775808" && next != "**" {
                    let (_, at) = out.pop().expect("the minus");
                    out.push((Tok::Int(i64::MIN), at));
                } else if let Ok(u) = text.parse::<u64>() {
                    // Up to uint64's largest: a uint64 array takes it (others refuse it).
                    out.push((Tok::UInt(u), start));
                } else {
                    return Err(ExprError::new(
                        start,
                        format!(
                            "{text} is outside uint64's range (NumPy raises OverflowError for such an int); write {text}.0 for a float"
                        ),
                    ));
                }
            } else if let Some(im) = text.strip_suffix(['j', 'J']) {
                // Python's imaginary literal (`2j`, `1.5e-3J`): a complex number.
                let v: f64 = im
                    .parse()
                    .map_err(|_| ExprError::new(start, format!("{text:?} is not a number")))?;
                out.push((Tok::Imag(v), start));
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
pub(crate) fn parse(s: &str) -> Result<Expr, ExprError> {
    let chars = s.chars().count();
    if chars > MAX_EXPR_CHARS {
        return Err(ExprError::new(
            0,
            format!(
                "the expression is {chars} characters long, more than the {MAX_EXPR_CHARS} allowed; split it into several arrays"
            ),
        ));
    }
    let toks = lex(s)?;
    let mut p = Parser {
        toks,
        i: 0,
        nesting: 0,
        last: 0,
    };
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
        Tok::Imag(v) => format!("number {v}j"),
        Tok::Int(v) => format!("number {v}"),
        Tok::UInt(v) => format!("number {v}"),
        Tok::Str(s) => format!("string {s:?}"),
        Tok::Ident(s) => format!("name {s}"),
        Tok::Sym(s) => format!("'{s}'"),
        Tok::End => "end of expression".into(),
    }
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    i: usize,
    /// How deep the parser's own recursion is.
    nesting: usize,
    /// The depth of the tree the last parsing function returned (a leaf is 1).
    last: usize,
}

fn too_deep(pos: usize) -> ExprError {
    ExprError::new(
        pos,
        format!(
            "the expression is nested more than {MAX_EXPR_DEPTH} levels deep (parentheses, brackets, calls and each operator of a chain count); split it into several arrays"
        ),
    )
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
        "<<" => (Op::Shl, 5),
        ">>" => (Op::Shr, 5),
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
    /// A node over children at most `below` levels deep; refuses trees deeper than
    /// [`MAX_EXPR_DEPTH`] (evaluating them recurses as deep).
    fn node(&mut self, kind: ExprKind, pos: usize, below: usize) -> Result<Expr, ExprError> {
        if below + 1 > MAX_EXPR_DEPTH {
            return Err(too_deep(pos));
        }
        self.last = below + 1;
        Ok(Expr { kind, pos })
    }

    /// Runs `f` one level deeper in the parser's recursion, refusing too deep a nesting
    /// before the stack can overflow.
    fn descend<T>(
        &mut self,
        f: impl FnOnce(&mut Parser) -> Result<T, ExprError>,
    ) -> Result<T, ExprError> {
        if self.nesting >= MAX_EXPR_DEPTH {
            return Err(too_deep(self.pos()));
        }
        self.nesting += 1;
        let r = f(self);
        self.nesting -= 1;
        r
    }

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
        self.descend(|p| p.expr_inner(min))
    }

    fn expr_inner(&mut self, min: u8) -> Result<Expr, ExprError> {
        let mut lhs = self.unary()?;
        let mut depth = self.last;
        // Whether lhs is a comparison made in this loop (`a < b`), not one in parentheses.
        let mut compared = false;
        while let Some((op, bp)) = infix(self.peek()) {
            if bp <= min {
                break;
            }
            let pos = self.pos();
            self.next();
            let rhs = self.expr(bp)?;
            let below = depth.max(self.last);
            if bp == 1 && compared {
                return Err(ExprError::new(
                    pos,
                    "chained comparisons are ambiguous for arrays; add parentheses",
                ));
            }
            lhs = self.node(
                ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                pos,
                below,
            )?;
            compared = bp == 1;
            depth = self.last;
        }
        self.last = depth;
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
            let x = self.descend(Parser::unary)?;
            let below = self.last;
            return self.node(ExprKind::Unary(op, Box::new(x)), pos, below);
        }
        let base = self.postfix()?;
        if self.eat("**") {
            let below = self.last;
            // Right-associative and tighter than unary minus on its left: -x**2 == -(x**2).
            let exp = self.descend(Parser::unary)?;
            let below = below.max(self.last);
            return self.node(
                ExprKind::Binary(Op::Pow, Box::new(base), Box::new(exp)),
                pos,
                below,
            );
        }
        Ok(base)
    }

    fn postfix(&mut self) -> Result<Expr, ExprError> {
        let mut e = self.atom()?;
        let mut depth = self.last;
        loop {
            let pos = self.pos();
            if self.eat(".") {
                let (t, p) = self.next();
                let Tok::Ident(name) = t else {
                    return Err(ExprError::new(p, "expected an attribute name after '.'"));
                };
                if self.eat("(") {
                    // `np.f(a)`, `np.linalg.f(a)`, `linalg.f(a)` (and `fft.f(a)`) are `f(a)`; a method
                    // `x.f(a)` is `f(x, a)`.
                    let (mut args, kwargs, below) = self.call_args()?;
                    // `random.f(a)` and `np.random.f(a)` are the function `random.f`.
                    let name = if is_random_module(&e) {
                        format!("random.{name}")
                    } else {
                        if !is_module(&e) {
                            args.insert(0, e);
                        }
                        name
                    };
                    e = self.node(ExprKind::Call(name, args, kwargs), p, below.max(depth))?;
                    depth = self.last;
                    continue;
                }
                e = self.node(ExprKind::Attr(Box::new(e), name), pos, depth)?;
                depth = self.last;
            } else if self.eat("[") {
                let mut items = Vec::new();
                let mut below = depth;
                loop {
                    items.push(self.index_item()?);
                    below = below.max(self.last);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("]")?;
                e = self.node(ExprKind::Index(Box::new(e), items), pos, below)?;
                depth = self.last;
            } else {
                self.last = depth;
                return Ok(e);
            }
        }
    }

    fn index_item(&mut self) -> Result<Expr, ExprError> {
        let pos = self.pos();
        if self.eat("...") {
            return self.node(ExprKind::Ellipsis, pos, 0);
        }
        // Each bound with its depth (0 when absent).
        let bound = |p: &mut Parser| -> Result<(Option<Box<Expr>>, usize), ExprError> {
            if matches!(p.peek(), Tok::Sym(":") | Tok::Sym(",") | Tok::Sym("]")) {
                Ok((None, 0))
            } else {
                let e = p.expr(0)?;
                Ok((Some(Box::new(e)), p.last))
            }
        };
        let (start, d0) = bound(self)?;
        if !self.eat(":") {
            self.last = d0;
            return start
                .map(|b| *b)
                .ok_or_else(|| ExprError::new(pos, "empty index"));
        }
        let (stop, d1) = bound(self)?;
        let (step, d2) = if self.eat(":") {
            bound(self)?
        } else {
            (None, 0)
        };
        self.node(ExprKind::Slice(start, stop, step), pos, d0.max(d1).max(d2))
    }

    fn atom(&mut self) -> Result<Expr, ExprError> {
        let (t, pos) = self.next();
        let (kind, below) = match t {
            Tok::Num(v) => (ExprKind::Num(v), 0),
            Tok::Imag(v) => (ExprKind::Imag(v), 0),
            Tok::Int(v) => (ExprKind::Int(v), 0),
            Tok::UInt(v) => (ExprKind::UInt(v), 0),
            Tok::Str(s) => (ExprKind::Str(s), 0),
            Tok::Ident(name) => match name.as_str() {
                "True" => (ExprKind::Bool(true), 0),
                "False" => (ExprKind::Bool(false), 0),
                "None" => (ExprKind::None, 0),
                _ if *self.peek() == Tok::Sym("(") => {
                    self.next();
                    let (args, kwargs, below) = self.call_args()?;
                    (ExprKind::Call(name, args, kwargs), below)
                }
                _ => (ExprKind::Name(name), 0),
            },
            // `()`: the empty tuple, as in Python.
            Tok::Sym("(") if self.eat(")") => (ExprKind::Tuple(Vec::new()), 0),
            Tok::Sym("(") => {
                let first = self.expr(0)?;
                if self.eat(")") {
                    // Parentheses group without a node: `self.last` is the inside's depth.
                    return Ok(first);
                }
                let mut below = self.last;
                let mut items = vec![first];
                while self.eat(",") {
                    if *self.peek() == Tok::Sym(")") {
                        break;
                    }
                    items.push(self.expr(0)?);
                    below = below.max(self.last);
                }
                self.expect(")")?;
                (ExprKind::Tuple(items), below)
            }
            Tok::Sym("[") => {
                let mut items = Vec::new();
                let mut below = 0;
                while *self.peek() != Tok::Sym("]") {
                    items.push(self.expr(0)?);
                    below = below.max(self.last);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("]")?;
                (ExprKind::Tuple(items), below)
            }
            t => return Err(ExprError::new(pos, format!("unexpected {}", describe(&t)))),
        };
        self.node(kind, pos, below)
    }

    /// The arguments of a call after its `(`, through the `)`; with their depth.
    fn call_args(&mut self) -> Result<(Vec<Expr>, Vec<Kwarg>, usize), ExprError> {
        let mut args = Vec::new();
        let mut kwargs = Vec::new();
        let mut below = 0;
        while !matches!(self.peek(), Tok::Sym(")") | Tok::End) {
            let pos = self.pos();
            let keyword = match (self.peek(), self.toks.get(self.i + 1)) {
                (Tok::Ident(k), Some((Tok::Sym("="), _))) => Some(k.clone()),
                _ => None,
            };
            if let Some(k) = keyword {
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
            below = below.max(self.last);
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")")?;
        Ok((args, kwargs, below))
    }
}

/// The names an expression refers to (arrays, where the job defines them), each once, in
/// the order evaluation meets them; `np.pi` and the like are constants, not names. Walks
/// the tree with a stack of its own, so any depth is safe.
pub(crate) fn names(e: &Expr) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    let mut todo = vec![e];
    while let Some(e) = todo.pop() {
        let mut kids: Vec<&Expr> = Vec::new();
        match &e.kind {
            ExprKind::Name(n) => {
                if !out.contains(&n.as_str()) {
                    out.push(n);
                }
            }
            ExprKind::Num(_)
            | ExprKind::Imag(_)
            | ExprKind::Int(_)
            | ExprKind::UInt(_)
            | ExprKind::Bool(_)
            | ExprKind::Str(_)
            | ExprKind::None
            | ExprKind::Ellipsis => {}
            ExprKind::Attr(x, _) => {
                if !matches!(&x.kind, ExprKind::Name(n) if n == "np" || n == "numpy") {
                    kids.push(x);
                }
            }
            ExprKind::Unary(_, x) => kids.push(x),
            ExprKind::Binary(_, a, b) => kids.extend([&**a, &**b]),
            ExprKind::Call(_, args, kwargs) => {
                kids.extend(args);
                kids.extend(kwargs.iter().map(|k| &k.value));
            }
            ExprKind::Tuple(items) => kids.extend(items),
            ExprKind::Index(x, items) => {
                kids.push(x);
                kids.extend(items);
            }
            ExprKind::Slice(a, b, c) => kids.extend([a, b, c].into_iter().flatten().map(|b| &**b)),
        }
        // Reversed, so that the leftmost child comes off the stack first.
        todo.extend(kids.into_iter().rev());
    }
    out
}

/// Why `name` cannot name an array: the expression language gives it a meaning of its
/// own (a literal, a module, a constant NumPy users write bare, or a Python keyword), so
/// an array of that name would be shadowed or would shadow it. `None`: free to use.
pub(crate) fn reserved_word(name: &str) -> Option<&'static str> {
    const LITERALS: &[&str] = &["True", "False", "None"];
    const MODULES: &[&str] = &["np", "numpy", "linalg", "fft", "random"];
    const CONSTANTS: &[&str] = &["pi", "e", "inf", "nan", "newaxis", "euler_gamma"];
    // Python's keywords: the language is Python's expression syntax.
    const KEYWORDS: &[&str] = &[
        "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
        "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is",
        "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with",
        "yield",
    ];
    if LITERALS.contains(&name) {
        Some("a literal of the expression language")
    } else if MODULES.contains(&name) {
        Some("a module name of the expression language (np.f, linalg.f)")
    } else if CONSTANTS.contains(&name) {
        Some("a NumPy constant (np.pi, np.e, np.inf, np.nan, np.newaxis)")
    } else if KEYWORDS.contains(&name) {
        Some("a Python keyword")
    } else {
        None
    }
}

/// The static symbol equal to `s` (so tokens compare without allocating).
fn leak(s: &str) -> &'static str {
    SYMS.iter().find(|x| **x == s).copied().unwrap_or("")
}

/// Whether `e` is `random`, `np.random` or `numpy.random` (NumPy's random module).
fn is_random_module(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Name(n) => n == "random",
        ExprKind::Attr(x, a) => {
            a == "random" && matches!(&x.kind, ExprKind::Name(n) if n == "np" || n == "numpy")
        }
        _ => false,
    }
}

/// Whether `e` names a module whose functions are the table's: `np`, `numpy`, `linalg`,
/// `np.linalg`.
fn is_module(e: &Expr) -> bool {
    let module = |n: &str| n == "np" || n == "numpy";
    match &e.kind {
        ExprKind::Name(n) => module(n) || n == "linalg" || n == "fft",
        ExprKind::Attr(x, a) => {
            (a == "linalg" || a == "fft") && matches!(&x.kind, ExprKind::Name(n) if module(n))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Num(v) => format!("{v}"),
            ExprKind::Imag(v) => format!("{v}j"),
            ExprKind::Int(v) => format!("{v}"),
            ExprKind::UInt(v) => format!("{v}"),
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
    fn parenthesized_comparisons_compare_but_chains_are_refused() {
        assert!(parse("(a > 0) == (b > 1)").is_ok());
        assert!(parse("a == (b > 1)").is_ok());
        let e = parse("a < b < c").unwrap_err();
        assert!(e.message.contains("chained comparisons"), "{}", e.message);
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
        assert_eq!(show(&parse("f(x, axis=())").unwrap()), "f(x,axis=())");
        assert_eq!(show(&parse("(x,)").unwrap()), "(x)");
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

    #[test]
    fn a_call_left_open_is_an_error() {
        for text in ["sum(", "sum(X", "sum(X,", "sum(axis=0", "X.sum(", "np.f("] {
            let e = parse(text).unwrap_err();
            assert!(e.message.contains("expected ')'"), "{text}: {e:?}");
        }
        assert!(parse("sum(X, axis").unwrap_err().message.contains("')'"));
        let e = parse("sum(axis=").unwrap_err();
        assert_eq!(
            (e.pos, e.message.as_str()),
            (9, "unexpected end of expression")
        );
    }

    #[test]
    fn depth_and_length_are_bounded() {
        let deep =
            |open: &str, close: &str, n: usize| format!("{}x{}", open.repeat(n), close.repeat(n));
        let at_limit = MAX_EXPR_DEPTH - 1;
        assert!(parse(&deep("(", ")", at_limit)).is_ok());
        for (open, close) in [("(", ")"), ("[", "]"), ("f(", ")"), ("-", ""), ("x[", "]")] {
            for n in [MAX_EXPR_DEPTH + 1, 6_000, 30_000] {
                let text = deep(open, close, n);
                let e = parse(&text).unwrap_err();
                assert!(
                    e.message
                        .contains(&format!("nested more than {MAX_EXPR_DEPTH} levels")),
                    "{open}{close} x{n}: {e:?}"
                );
            }
        }
        // Chains deepen the tree without deepening the parser: refused as well.
        let chain = vec!["a"; MAX_EXPR_DEPTH + 2].join(" + ");
        assert!(
            parse(&chain)
                .unwrap_err()
                .message
                .contains("nested more than")
        );
        let pow = vec!["a"; 5_000].join(" ** ");
        assert!(
            parse(&pow)
                .unwrap_err()
                .message
                .contains("nested more than")
        );
        let chain = vec!["a"; MAX_EXPR_DEPTH / 2].join(" + ");
        assert!(parse(&chain).is_ok());
        let long = format!("{}1", " ".repeat(MAX_EXPR_CHARS));
        let e = parse(&long).unwrap_err();
        assert!(e.message.contains("characters long"), "{e:?}");
    }

    #[test]
    fn names_in_evaluation_order() {
        let e = parse("f(b, a[c:d], k=np.pi + e) @ b.T + np.sum(g)").unwrap();
        assert_eq!(names(&e), ["b", "a", "c", "d", "e", "g"]);
    }
}
