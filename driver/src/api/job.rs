//! The job a compute runs: the arrays it needs (the closure of what is asked, cut at
//! arrays already in the store), written as job-file text; and the way back from the
//! engine's words (a temporary job file, lines, internal names `_7`) to the user's
//! (the names given with `Array::named`, or the expressions that made the arrays).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use super::array::{Array, Def, Node};
use super::{Config, Session};
use crate::error::Error;

/// A job-file TOML string literal.
pub(crate) fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// `[a, b, c]`.
pub(crate) fn dims(shape: &[u64]) -> String {
    let items: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// A number as the expression language reads it: `2.0`, `(-1.5)`, `np.nan`, `np.inf`.
pub(crate) fn expr_f64(v: f64) -> String {
    if v.is_nan() {
        "np.nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "np.inf" } else { "(-np.inf)" }.into()
    } else if v < 0.0 || (v == 0.0 && v.is_sign_negative()) {
        format!("({v:?})")
    } else {
        format!("{v:?}")
    }
}

/// A number as TOML writes it: `2.0`, `-1.5`, `nan`, `inf`, `-inf`.
pub(crate) fn toml_f64(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{v:?}")
    }
}

/// `template` with each `{i}` replaced by `arg(i)`; an argument written `({i})` is
/// passed `true` (already in parentheses). Errors name a placeholder beyond `n` args.
pub(crate) fn substitute(
    template: &str,
    n: usize,
    mut arg: impl FnMut(usize, bool) -> String,
) -> Result<String, String> {
    let b = template.as_bytes();
    let mut out = String::with_capacity(template.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'{' {
            let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits > 0 && b.get(i + 1 + digits) == Some(&b'}') {
                let k: usize = template[i + 1..i + 1 + digits]
                    .parse()
                    .unwrap_or(usize::MAX);
                if k >= n {
                    return Err(format!(
                        "placeholder {{{}}} has no array: {n} given",
                        &template[i + 1..i + 1 + digits]
                    ));
                }
                let wrapped = out.ends_with('(') && b.get(i + 2 + digits) == Some(&b')');
                if wrapped {
                    out.pop();
                    let a = arg(k, true);
                    out.push_str(&a);
                    i += 3 + digits;
                } else {
                    out.push_str(&arg(k, false));
                    i += 2 + digits;
                }
                continue;
            }
        }
        let c = template[i..].chars().next().expect("in bounds");
        out.push(c);
        i += c.len_utf8();
    }
    Ok(out)
}

/// Whether a label reads as one operand without parentheses: a name, a number, a call
/// `f(...)` or an attribute chain like `X.T`.
fn atomic(s: &str) -> bool {
    let head = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(s.len());
    let rest = &s[head..];
    if rest.is_empty() {
        return head > 0;
    }
    if !(rest.starts_with('(') || rest.starts_with('[')) {
        return false;
    }
    // The bracket opened first must close at the very end.
    let mut depth = 0i32;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth -= 1;
                if depth == 0 {
                    return i == rest.len() - 1;
                }
            }
            _ => {}
        }
    }
    false
}

const LABEL_MAX: usize = 100;

/// How messages name an array: its name, or the expression that made it (nested up to a
/// few levels, cut at `LABEL_MAX` characters).
pub(crate) fn display(node: &Node) -> String {
    let s = display_at(node, 0);
    if s.chars().count() > LABEL_MAX {
        let cut: String = s.chars().take(LABEL_MAX - 1).collect();
        format!("{cut}…")
    } else {
        s
    }
}

fn display_at(node: &Node, depth: usize) -> String {
    if let Some(n) = node.name.get() {
        return n.clone();
    }
    if depth > 4 {
        return "…".into();
    }
    let template = match &node.def {
        Def::Expr(t) => t.as_str(),
        Def::Table { label, .. } => label.as_str(),
        Def::Data(b) => {
            let shape: Vec<u64> = b.shape().iter().map(|&s| s as u64).collect();
            return format!("from_ndarray({} {})", b.dtype().name(), dims(&shape));
        }
    };
    substitute(template, node.args.len(), |k, wrapped| {
        let a = display_at(&node.args[k].node, depth + 1);
        if wrapped && !atomic(&a) {
            format!("({a})")
        } else {
            a
        }
    })
    .unwrap_or_else(|_| template.to_string())
}

/// The name an array has in the jobs: its given name, or `_<id>` (a form `named` refuses).
pub(crate) fn job_name(node: &Node) -> String {
    match node.name.get() {
        Some(n) => n.clone(),
        None => format!("_{}", node.id),
    }
}

/// Whether `s` is of the form the session gives its unnamed arrays.
pub(crate) fn is_internal_name(s: &str) -> bool {
    s.len() > 1 && s.starts_with('_') && s[1..].bytes().all(|b| b.is_ascii_digit())
}

/// The arrays the compute of `targets` needs, inputs first: each array once, and none
/// behind an array already in the store (it is read in place).
pub(crate) fn closure(s: &Session, targets: &[&Array]) -> Result<Vec<Arc<Node>>, Error> {
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    // Iterative post-order: long chains of operations must not overflow the stack.
    let mut stack: Vec<(Arc<Node>, bool)> =
        targets.iter().map(|a| (a.node.clone(), false)).collect();
    stack.reverse();
    while let Some((n, expanded)) = stack.pop() {
        if expanded {
            order.push(n);
            continue;
        }
        if !seen.insert(n.id) {
            continue;
        }
        if !Arc::ptr_eq(&n.session.0, &s.0) {
            return Err(Error::Job {
                array: Some(display(&n)),
                message: format!(
                    "array `{}` belongs to another session: arrays of two sessions cannot be combined",
                    display(&n)
                ),
            });
        }
        stack.push((n.clone(), true));
        if n.stored.get().is_none() {
            for a in n.args.iter().rev() {
                if !seen.contains(&a.node.id) {
                    stack.push((a.node.clone(), false));
                }
            }
        }
    }
    Ok(order)
}

/// Where a compute's output goes.
pub(crate) enum Out {
    /// A local `.npy` file, read back after the run.
    Npy(PathBuf),
    /// A Zarr array in the session's store, at this location (a path or `s3://` URL).
    Store(String),
}

/// The text of a job and the way back from its words to the user's.
pub(crate) struct Rendered {
    pub name: String,
    pub file: PathBuf,
    pub text: String,
    /// Job-file line → the array defined there.
    lines: HashMap<usize, String>,
    /// Job name of an array → how messages name it.
    display: HashMap<String, String>,
}

impl Rendered {
    /// The job `name` that computes `nodes` (a closure, inputs first) with `outputs`.
    pub(super) fn new(
        name: &str,
        s: &Session,
        cfg: &Config,
        nodes: &[Arc<Node>],
        outputs: &[(&Node, Out)],
    ) -> Rendered {
        let mut text = format!(
            "name = {}\n[storage]\nurl = {}\n",
            toml_str(name),
            toml_str(&cfg.storage)
        );
        if let Some(e) = &cfg.endpoint {
            text += &format!("endpoint = {}\n", toml_str(e));
        }
        let clamp = |v: u64| v.min(i64::MAX as u64);
        text += &format!(
            "[compute]\nbackend = \"{}\"\nfunction = {}\nscheduler = \"{}\"\nworkers = {}\nmemory_mb = {}\ntimeout_seconds = {}\n[arrays]\n",
            format!("{:?}", cfg.backend).to_lowercase(),
            toml_str(&cfg.function),
            format!("{:?}", cfg.scheduler).to_lowercase(),
            clamp(cfg.workers as u64),
            clamp(cfg.memory_mb),
            clamp(cfg.timeout_seconds),
        );
        let mut lines = HashMap::new();
        let mut display_of = HashMap::new();
        for n in nodes {
            let jn = job_name(n);
            let value = match n.stored.get() {
                Some(location) => format!("{{ load = {} }}", toml_str(location)),
                None => n.def.job_value(&n.args),
            };
            lines.insert(text.matches('\n').count() + 1, jn.clone());
            text += &format!("{jn} = {value}\n");
            display_of.insert(jn, display(n));
        }
        text += "[outputs]\n";
        let mut done = HashSet::new();
        for (n, out) in outputs {
            if !done.insert(n.id) {
                continue;
            }
            let dest = match out {
                Out::Npy(p) => p.display().to_string(),
                Out::Store(location) => location.clone(),
            };
            lines.insert(text.matches('\n').count() + 1, job_name(n));
            text += &format!("{} = {}\n", job_name(n), toml_str(&dest));
        }
        Rendered {
            name: name.to_string(),
            file: s.0.cwd.join(format!("{name}.toml")),
            text,
            lines,
            display: display_of,
        }
    }

    /// Parses the job (what the engine runs).
    pub(super) fn parse(&self) -> Result<crate::job::Job, Error> {
        crate::job::Job::parse(&self.file, &self.text).map_err(|j| self.job_error(&j))
    }

    /// An error in the job (found before anything runs) in the user's words.
    pub(super) fn job_error(&self, j: &crate::job::JobError) -> Error {
        let (message, array) = self.humanize(&j.to_string());
        Error::job(j, array, message)
    }

    /// An engine error in the user's words, classified.
    pub(super) fn error(&self, e: &anyhow::Error) -> Error {
        let chain: &anyhow::Error = match e.downcast_ref::<crate::report::RunFailed>() {
            Some(f) => &f.error,
            None => e,
        };
        // The context a failed run adds is advice for the CLI (`--resume` a job file that
        // does not exist here): left out.
        let cli_advice = format!("job {}: the run's state is kept", self.name);
        let message = chain
            .chain()
            .map(|c| c.to_string())
            .filter(|m| !m.starts_with(&cli_advice))
            .collect::<Vec<_>>()
            .join(": ");
        Error::classify(e, &message, &|m| self.humanize(m))
    }

    /// `message` with the temporary job file, its lines and keys, the job's name and the
    /// internal array names replaced by the user's names; and the array it is about.
    pub(super) fn humanize(&self, message: &str) -> (String, Option<String>) {
        let mut m = message.replace(&format!("job {}: ", self.name), "");
        let mut array = None;
        // `<file>:<line>: <key>: ` → `array `X`: ` (or `X.load: `).
        let file = format!("{}:", self.file.display());
        while let Some(at) = m.find(&file) {
            let rest = &m[at + file.len()..];
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            let line: usize = rest[..digits].parse().unwrap_or(0);
            let mut end = at + file.len() + digits;
            if m[end..].starts_with(": ") {
                end += 2;
            }
            let mut replacement = String::new();
            if let Some(jn) = self.lines.get(&line) {
                let shown = self.display.get(jn).cloned().unwrap_or_else(|| jn.clone());
                array.get_or_insert(shown.clone());
                replacement = format!("array `{shown}`: ");
                for section in ["arrays.", "outputs."] {
                    let key = format!("{section}{jn}");
                    if m[end..].starts_with(&key) {
                        end += key.len();
                        if let Some(sub) = m[end..].strip_prefix('.') {
                            let n = sub.find(": ").unwrap_or(sub.len());
                            replacement = format!("array `{shown}`: {}: ", &sub[..n]);
                            end += 1 + n;
                        }
                        if m[end..].starts_with(": ") {
                            end += 2;
                        }
                        break;
                    }
                }
            }
            m.replace_range(at..end, &replacement);
        }
        (self.names(&m), array)
    }

    /// Internal names (`_7`) in running text become `` `the expression` ``; in an
    /// expression shown under a caret they become the expression itself, the caret moved
    /// with them.
    fn names(&self, m: &str) -> String {
        let lines: Vec<&str> = m.split('\n').collect();
        let mut out: Vec<String> = Vec::with_capacity(lines.len());
        let mut i = 0;
        while i < lines.len() {
            let caret_next = lines
                .get(i + 1)
                .is_some_and(|l| l.starts_with("    ") && l.trim() == "^");
            if caret_next && lines[i].starts_with("    ") {
                let expr = &lines[i][4..];
                let (new, edits) = self.rewrite(expr, false);
                let old_col = lines[i + 1].len() - 5;
                let col = map_col(old_col, &edits);
                if let Some(prev) = out.last_mut() {
                    let tag = format!("(at column {})", old_col + 1);
                    *prev = prev.replace(&tag, &format!("(at column {})", col + 1));
                }
                out.push(format!("    {new}"));
                out.push(format!("    {}^", " ".repeat(col)));
                i += 2;
            } else {
                out.push(self.rewrite(lines[i], true).0);
                i += 1;
            }
        }
        out.join("\n")
    }

    /// `text` with the job's internal names replaced (`(_7)` as one operand), and the
    /// edits made: (start, old length, new length) in characters.
    fn rewrite(&self, text: &str, quoted: bool) -> (String, Vec<(usize, usize, usize)>) {
        let chars: Vec<char> = text.chars().collect();
        let mut out = String::new();
        let mut edits = Vec::new();
        let mut i = 0;
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        while i < chars.len() {
            let starts_word =
                ident(chars[i]) && (i == 0 || !(ident(chars[i - 1]) || chars[i - 1] == '.'));
            if starts_word {
                let j = (i..chars.len())
                    .find(|&j| !ident(chars[j]))
                    .unwrap_or(chars.len());
                let word: String = chars[i..j].iter().collect();
                let wrapped = i > 0 && chars[i - 1] == '(' && chars.get(j) == Some(&')');
                // Internal names everywhere; in an expression, also the parentheses the
                // API puts around every operand (`(X) + (_7)`).
                let ours = is_internal_name(&word) || (wrapped && !quoted);
                if let (true, Some(shown)) = (ours, self.display.get(&word)) {
                    let (start, old_len) = if wrapped {
                        (i - 1, j - i + 2)
                    } else {
                        (i, j - i)
                    };
                    let new = if quoted {
                        format!("`{shown}`")
                    } else if wrapped && !atomic(shown) {
                        format!("({shown})")
                    } else {
                        shown.clone()
                    };
                    if wrapped {
                        out.pop();
                    }
                    edits.push((start, old_len, new.chars().count()));
                    out.push_str(&new);
                    i = if wrapped { j + 1 } else { j };
                    continue;
                }
                out.push_str(&word);
                i = j;
                continue;
            }
            out.push(chars[i]);
            i += 1;
        }
        (out, edits)
    }
}

/// A column of the text before `edits`, in the text after them.
fn map_col(col: usize, edits: &[(usize, usize, usize)]) -> usize {
    let mut shift = 0isize;
    for &(start, old, new) in edits {
        if col >= start + old {
            shift += new as isize - old as isize;
        } else if col >= start {
            return (start as isize + shift).max(0) as usize;
        }
    }
    (col as isize + shift).max(0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders() {
        let s = substitute("({0}) + ({1}) * {0}", 2, |k, w| {
            format!("{}{k}", if w { "w" } else { "" })
        })
        .unwrap();
        assert_eq!(s, "w0 + w1 * 0");
        assert!(
            substitute("{2}", 2, |_, _| String::new())
                .unwrap_err()
                .contains("{2}")
        );
    }

    #[test]
    fn atomic_labels() {
        assert!(atomic("X"));
        assert!(atomic("sum(X + W)"));
        assert!(atomic("X.T"));
        assert!(!atomic("X + W"));
        assert!(!atomic("(X) + (W)"));
        assert!(!atomic("sum(X) + sum(W)"));
    }

    #[test]
    fn numbers() {
        assert_eq!(expr_f64(2.0), "2.0");
        assert_eq!(expr_f64(-1.5), "(-1.5)");
        assert_eq!(expr_f64(f64::NAN), "np.nan");
        assert_eq!(expr_f64(f64::NEG_INFINITY), "(-np.inf)");
        assert_eq!(toml_f64(f64::INFINITY), "inf");
        assert_eq!(map_col(8, &[(0, 4, 1), (7, 4, 1)]), 4);
        assert_eq!(map_col(3, &[(0, 4, 1), (7, 4, 1)]), 0);
    }
}
