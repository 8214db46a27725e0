//! The driver's rooms (the top-level modules of `driver/src`) stand on floors, and a room
//! uses only rooms on the floors below it, so the import graph has no circle and the house
//! reads from the bottom up. `docs/architecture.md` draws the same floors.
//!
//! A new room goes on the lowest floor above everything it uses. An import from a lower
//! room to a higher one is an error unless listed in `UPWARD` with the reason; at most
//! one may be.
//!
//! Inside every folder of the library crates (`CRATES`: each `src`, and each module
//! folder such as `driver/src/graph/funcs`) the files import one another without a
//! circle either. A folder's nodes are its files (`ops.rs`), its sub-folders each as a
//! whole (`funcs/`), and its own file (`mod.rs`, `lib.rs`). Read from `src` as the
//! compiler resolves names, simply:
//!
//! - comments, string literals and `#[cfg(test)]` items are left out (tests may use
//!   anything), and so are the files `#[cfg(test)] mod x;` declares;
//! - a path in the code (`super::build::label`, `crate::graph::ops::f`, `Builder` after
//!   `use super::*`, `ops::f` after `mod ops;`) is looked up as rustc would: through
//!   child modules, items, `use` imports and glob imports (a glob brings all of an
//!   enclosing module's names, only the `pub` ones of any other), to the file that
//!   defines the name. So a name a `mod.rs` re-exports or glob-imports counts as the file
//!   that defines it, not as `mod.rs`;
//! - a file imports what its code names, and every name of its explicit imports besides
//!   (a trait imported for its methods), except a folder's own file's `pub use` of the
//!   folder's files: that is the folder's door, and counts only when the own file's code
//!   names it too;
//! - an import of the folder's own file is no edge of the folder: the own file is the
//!   ground its files stand on (the types they share), and it declares, re-exports and
//!   calls them. Its imports of its files are edges;
//! - an import between two files is an edge of the lowest folder holding both, between
//!   the nodes they are in (`graph/funcs/creation.rs` naming `graph/ops.rs` is
//!   `funcs/ -> ops.rs` in `graph`).
//!
//! What it cannot see: methods (a call `x.f()` of a method in another file's `impl`)
//! and names a macro makes. A circle is an error unless `CIRCLE_EXEMPT` lists it with
//! the reason; at most one may be listed. The Python package's modules are held to the
//! same rule by `tests/test_layers.py`.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors, bottom first.
const FLOORS: &[&[&str]] = &[
    // The exception classes a refusal names: the expression language raises them.
    &["refusal"],
    // Leaves: values and helpers that use no other room but the refusals.
    &[
        "cgroup",
        "config",
        "expr",
        "human",
        "invocation",
        "logs",
        "models",
        "npy",
        "package",
        "reports",
        "residency",
        "runs",
        "svg",
    ],
    // The job file (the public contract), and the local Lambda-compatible endpoint.
    &["job", "local"],
    // What a job means: the array graph, the cost model, a deployment's defaults.
    &["cost", "graph", "infra"],
    // The planning half: block work, then its placement into batches.
    &["tasks"],
    &["sched"],
    // The run half, bottom up: sending batches; the backend a run invokes and what a run
    // measured; the library's typed errors; checking and planning a job; the stage runner.
    &["dispatch"],
    &["backend", "report"],
    &["error"],
    &["plan"],
    &["stage"],
    // What goes through the stage runner: the CSV count, the fits, the exports; the bar;
    // the run timeline (its lanes and memory panel drawn for the plan chart too).
    &["csv_count", "export", "iterate", "progress", "timeline"],
    // The one executor: every front end's computation (masks settled, fits, the main
    // stage) runs here.
    &["engine"],
    // A run's orchestration; the plan's pictures; stored arrays' commands.
    &["arrays", "planview", "run"],
    // The front ends.
    &["api", "cli"],
];

/// Imports from a room to one on its floor or above, each `(from, to, why)`.
const UPWARD: &[(&str, &str, &str)] = &[];

/// The workspace's library crates whose folders are checked for circles (each `src`,
/// without `main.rs` and `bin/`: those are crates of their own that import the library
/// from outside).
const CRATES: &[&str] = &["layout", "function", "driver", "python"];

/// A file whose imports of some of its folder's nodes close a circle, `(folder, from,
/// to, why)`; at most one may be listed.
const CIRCLE_EXEMPT: &[(&str, &str, &[&str], &str)] = &[(
    "driver/src/graph",
    "build.rs",
    &["ops.rs", "funcs/"],
    "one recursive evaluator over three files: build.rs's Builder evaluates an expression \
     by lowering its operators (ops.rs, `impl Builder`) and calls (funcs/), which take the \
     Builder and its EvalError, and whose arguments the Builder evaluates again \
     (funcs/mod.rs's binding calls `eval`)",
)];

/// A token of Rust code: comments are gone and literals are `Lit`, so that neither a
/// path in a doc comment or a string nor a brace in a char literal counts.
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
    Lit,
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The index after a string literal's closing quote, from just inside its opening one:
/// `hashes` is the number of `#` of a raw string (`None` for a string with escapes).
fn string_end(c: &[char], mut i: usize, hashes: Option<usize>) -> usize {
    while i < c.len() {
        match (c[i], hashes) {
            ('\\', None) => i += 2,
            ('"', None) => return i + 1,
            ('"', Some(n)) if c[i + 1..].iter().take(n).filter(|h| **h == '#').count() == n => {
                return i + 1 + n;
            }
            _ => i += 1,
        }
    }
    i
}

/// The tokens of `text`.
fn lex(text: &str) -> Vec<Tok> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = string_end(&c, i + 1, None);
            out.push(Tok::Lit);
        } else if ch == '\'' {
            // A char literal ('a', '{', '\n', '\u{7f}') or a lifetime ('a, 'static).
            if next == Some('\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push(Tok::Lit);
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push(Tok::Lit);
            } else {
                i += 1;
                while i < c.len() && is_ident_char(c[i]) {
                    i += 1;
                }
            }
        } else if ch.is_ascii_digit() {
            while i < c.len()
                && (is_ident_char(c[i])
                    || (c[i] == '.' && c.get(i + 1).is_some_and(|d| d.is_ascii_digit())))
            {
                i += 1;
            }
            out.push(Tok::Lit);
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && is_ident_char(c[i]) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let raw = matches!(word.as_str(), "r" | "br" | "cr");
            if raw && matches!(c.get(i), Some('"' | '#')) {
                let hashes = c[i..].iter().take_while(|h| **h == '#').count();
                if c.get(i + hashes) == Some(&'"') {
                    i = string_end(&c, i + hashes + 1, Some(hashes));
                    out.push(Tok::Lit);
                    continue;
                }
                if word == "r" && hashes == 1 {
                    // A raw identifier, `r#type`.
                    let start = i + 1;
                    i = start;
                    while i < c.len() && is_ident_char(c[i]) {
                        i += 1;
                    }
                    out.push(Tok::Ident(c[start..i].iter().collect()));
                    continue;
                }
            }
            if matches!(word.as_str(), "b" | "c") && c.get(i) == Some(&'"') {
                i = string_end(&c, i + 1, None);
                out.push(Tok::Lit);
                continue;
            }
            // `b'x'` goes on as `b` and a char literal.
            out.push(Tok::Ident(word));
        } else if ch == ':' && next == Some(':') {
            out.push(Tok::Sep);
            i += 2;
        } else {
            out.push(Tok::Punct(ch));
            i += 1;
        }
    }
    out
}

fn ident(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

/// The index after the bracket that closes the one at `i` (`(`, `[` or `{`).
fn close(t: &[Tok], mut i: usize) -> usize {
    let mut depth = 0i64;
    while i < t.len() {
        match t[i] {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// The tokens without the `#[cfg(test)]` items (tests may import anything), and the names
/// of the files its `#[cfg(test)] mod NAME;` declarations make test-only.
fn without_tests(t: &[Tok]) -> (Vec<Tok>, Vec<String>) {
    let cfg_test = [
        Tok::Punct('#'),
        Tok::Punct('['),
        Tok::Ident("cfg".into()),
        Tok::Punct('('),
        Tok::Ident("test".into()),
        Tok::Punct(')'),
        Tok::Punct(']'),
    ];
    let (mut out, mut test_files) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < t.len() {
        if !t[i..].starts_with(&cfg_test) {
            out.push(t[i].clone());
            i += 1;
            continue;
        }
        i += cfg_test.len();
        // Further attributes, then the item: up to its `;` or its closing brace.
        while t.get(i) == Some(&Tok::Punct('#')) {
            i = close(t, i + 1);
        }
        if ident(t.get(i)) == Some("pub") {
            i += 1;
        }
        if let (Some("mod"), Some(name), Some(Tok::Punct(';'))) =
            (ident(t.get(i)), ident(t.get(i + 1)), t.get(i + 2))
        {
            test_files.push(name.to_string());
            i += 3;
            continue;
        }
        while i < t.len() {
            match t[i] {
                Tok::Punct(';') => {
                    i += 1;
                    break;
                }
                Tok::Punct('{') => {
                    i = close(t, i);
                    break;
                }
                Tok::Punct('(' | '[') => i = close(t, i),
                _ => i += 1,
            }
        }
    }
    (out, test_files)
}

/// A name a `use` brings into a module: `name` (`*` for a glob, the last segment or its
/// `as` alias otherwise) for the path as written; `public` for `pub use` and
/// `pub(..) use`.
#[derive(Clone, Debug, PartialEq)]
struct Import {
    name: String,
    path: Vec<String>,
    public: bool,
}

/// A module's namespace: a file's, or an inline `mod name { }` inside it.
#[derive(Clone, Debug, Default)]
struct Module {
    /// Its inline modules' names from the file's module (empty for the file's own).
    inline: Vec<String>,
    /// Child modules (`mod x;` and `mod x { }`), each with whether it is `pub`.
    children: BTreeMap<String, bool>,
    /// Items defined at its top level (fn, struct, enum, trait, type, const, static,
    /// union, macro_rules), each with whether it is `pub`.
    items: BTreeMap<String, bool>,
    imports: Vec<Import>,
    /// `#[macro_export]` macros: they are items of the crate's root.
    exported_macros: Vec<String>,
}

/// One file read: its modules (the file's own first) and the paths its code names, each
/// with the index of the module it is written in.
#[derive(Debug, Default)]
struct Parsed {
    modules: Vec<Module>,
    paths: Vec<(usize, Vec<String>)>,
    test_files: Vec<String>,
}

/// The leaves of the use tree at `t[*i]`, under `prefix`.
fn use_tree(t: &[Tok], i: &mut usize, prefix: &[String], out: &mut Vec<(String, Vec<String>)>) {
    let mut path = prefix.to_vec();
    while *i < t.len() {
        match &t[*i] {
            Tok::Sep => *i += 1,
            Tok::Ident(s) => {
                path.push(s.clone());
                *i += 1;
                if t.get(*i) == Some(&Tok::Sep) {
                    *i += 1;
                    continue;
                }
                if ident(t.get(*i)) == Some("as") {
                    let alias = ident(t.get(*i + 1)).unwrap_or("_").to_string();
                    *i += 2;
                    if path.last().is_some_and(|l| l == "self") {
                        path.pop();
                    }
                    out.push((alias, path));
                } else {
                    if s == "self" {
                        path.pop();
                    }
                    let name = path.last().cloned().unwrap_or_default();
                    out.push((name, path));
                }
                return;
            }
            Tok::Punct('*') => {
                *i += 1;
                out.push(("*".to_string(), path));
                return;
            }
            Tok::Punct('{') => {
                *i += 1;
                while *i < t.len() {
                    match t[*i] {
                        Tok::Punct('}') => {
                            *i += 1;
                            return;
                        }
                        Tok::Punct(',') => *i += 1,
                        _ => use_tree(t, i, &path, out),
                    }
                }
                return;
            }
            _ => {
                *i += 1;
                return;
            }
        }
    }
}

/// Whether the item whose keyword is at `t[i]` is `pub` (`pub`, `pub(crate)`, ... before
/// it, over `async`, `const`, `unsafe`, `extern "C"`).
fn is_pub(t: &[Tok], mut i: usize) -> bool {
    while i > 0 {
        i -= 1;
        match &t[i] {
            Tok::Ident(s) if s == "pub" => return true,
            Tok::Ident(s) if matches!(s.as_str(), "async" | "const" | "unsafe" | "extern") => {}
            Tok::Lit => {}
            Tok::Punct(')') => {
                // `pub(crate)`, `pub(super)`, `pub(in path)`.
                while i > 0 && t[i] != Tok::Punct('(') {
                    i -= 1;
                }
            }
            _ => return false,
        }
    }
    false
}

/// Rust's keywords (but `crate`, `self` and `super`, which start paths).
const KEYWORDS: &str = "as async await break const continue dyn else enum extern false fn for \
     if impl in let loop match mod move mut pub ref return static struct trait true type union \
     unsafe use where while Self macro_rules";

fn is_keyword(word: &str) -> bool {
    KEYWORDS.split_whitespace().any(|k| k == word)
}

/// The words after which a name is being defined or bound, not named.
const BINDERS: &[&str] = &[
    "let", "fn", "struct", "enum", "trait", "type", "const", "static", "mod", "ref", "union",
];

/// Reads a file: its modules, what they define and import, and the paths its code names
/// (comments, literals and `#[cfg(test)]` items left out).
fn parse(text: &str) -> Parsed {
    let (t, test_files) = without_tests(&lex(text));
    let mut p = Parsed {
        modules: vec![Module::default()],
        test_files,
        ..Parsed::default()
    };
    // The modules the code is in, innermost last, with the depth of braces of each body.
    let mut stack: Vec<(usize, i64)> = vec![(0, 0)];
    let mut depth = 0i64;
    let mut i = 0;
    while i < t.len() {
        let (cur, body) = *stack.last().expect("the file's module");
        let top = depth == body;
        let prev = i.checked_sub(1).map(|k| &t[k]);
        match &t[i] {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if depth < body {
                    stack.pop();
                }
            }
            Tok::Ident(kw) if kw == "use" && prev != Some(&Tok::Punct('.')) => {
                let public = is_pub(&t, i);
                i += 1;
                let mut leaves = Vec::new();
                use_tree(&t, &mut i, &[], &mut leaves);
                while i < t.len() && t[i] != Tok::Punct(';') {
                    i += 1;
                }
                for (name, path) in leaves {
                    p.modules[cur].imports.push(Import { name, path, public });
                }
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let Some(name) = ident(t.get(i + 1)) {
                    let public = is_pub(&t, i);
                    p.modules[cur].children.insert(name.to_string(), public);
                    if t.get(i + 2) == Some(&Tok::Punct('{')) {
                        let mut inline = p.modules[cur].inline.clone();
                        inline.push(name.to_string());
                        p.modules.push(Module {
                            inline,
                            ..Module::default()
                        });
                        depth += 1;
                        stack.push((p.modules.len() - 1, depth));
                        i += 3;
                        continue;
                    }
                }
            }
            Tok::Ident(kw) if kw == "macro_rules" && t.get(i + 1) == Some(&Tok::Punct('!')) => {
                if let (Some(name), true) = (ident(t.get(i + 2)), top) {
                    p.modules[cur].items.insert(name.to_string(), false);
                    let exported = i >= 4
                        && t[i - 4..i]
                            == [
                                Tok::Punct('#'),
                                Tok::Punct('['),
                                Tok::Ident("macro_export".into()),
                                Tok::Punct(']'),
                            ];
                    if exported {
                        p.modules[cur].exported_macros.push(name.to_string());
                    }
                }
                i += 3;
                continue;
            }
            Tok::Ident(word) => {
                if top
                    && matches!(
                        word.as_str(),
                        "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "union"
                    )
                {
                    let mut k = i + 1;
                    if ident(t.get(k)) == Some("mut") {
                        k += 1;
                    }
                    if let Some(name) = ident(t.get(k)).filter(|n| !is_keyword(n)) {
                        p.modules[cur].items.insert(name.to_string(), is_pub(&t, i));
                    }
                }
                let after_path = matches!(prev, Some(Tok::Punct('.') | Tok::Sep));
                let metavariable = prev == Some(&Tok::Punct('$')) && word != "crate";
                let bound = match prev {
                    Some(Tok::Ident(b)) if BINDERS.contains(&b.as_str()) => true,
                    // `let mut x`, `|mut x|`, but not `&mut T` or `*mut T`.
                    Some(Tok::Ident(b)) if b == "mut" => {
                        !matches!(t.get(i.wrapping_sub(2)), Some(Tok::Punct('&' | '*')))
                    }
                    _ => false,
                };
                let keyword = is_keyword(word);
                // `pub(crate)`, `pub(super)`: a visibility, not a path.
                let visibility = prev == Some(&Tok::Punct('('))
                    && ident(t.get(i.wrapping_sub(2))) == Some("pub");
                if !(after_path || metavariable || bound || keyword || visibility) {
                    let mut path = vec![word.clone()];
                    let mut k = i + 1;
                    while t.get(k) == Some(&Tok::Sep) {
                        let Some(next) = ident(t.get(k + 1)) else {
                            break;
                        };
                        path.push(next.to_string());
                        k += 2;
                    }
                    // A lone name before `:` is a field's or a binding's.
                    let field = path.len() == 1 && t.get(k) == Some(&Tok::Punct(':'));
                    if !field {
                        p.paths.push((cur, path));
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    p
}

/// A crate's modules, read from its `src`.
#[derive(Debug, Default)]
struct Crate {
    /// Each file's module path (`graph/funcs/mod.rs` is `["graph", "funcs"]`, `lib.rs`
    /// is `[]`) and what it reads as.
    files: BTreeMap<Vec<String>, Parsed>,
    /// Every module's path, with the module path of its file and its index in it.
    modules: BTreeMap<Vec<String>, (Vec<String>, usize)>,
    /// Lookups done: `within`'s and `visible`'s.
    memo: RefCell<Lookups>,
    seen: RefCell<Globbed>,
}

type Lookups = BTreeMap<(Vec<String>, Vec<String>, bool), Option<Vec<String>>>;
type Globbed = BTreeMap<(Vec<String>, Vec<String>, String), bool>;

impl Crate {
    /// A crate from its files' paths under `src` and their text (`main.rs`, `bin/` and
    /// the files that `#[cfg(test)] mod x;` declares left out).
    fn new(sources: &BTreeMap<String, String>) -> Crate {
        let mut files = BTreeMap::new();
        for (rel, text) in sources {
            if rel == "main.rs" || rel.starts_with("bin/") {
                continue;
            }
            let mut path: Vec<String> = rel
                .trim_end_matches(".rs")
                .split('/')
                .map(String::from)
                .collect();
            if matches!(path.last().map(String::as_str), Some("mod" | "lib")) {
                path.pop();
            }
            files.insert(path, parse(text));
        }
        let tests: Vec<Vec<String>> = files
            .iter()
            .flat_map(|(path, p)| {
                p.test_files.iter().map(move |t| {
                    let mut f = path.clone();
                    f.push(t.clone());
                    f
                })
            })
            .collect();
        for t in tests {
            files.remove(&t);
        }
        let mut modules = BTreeMap::new();
        let mut exported = Vec::new();
        for (path, p) in &files {
            for (k, m) in p.modules.iter().enumerate() {
                let mut full = path.clone();
                full.extend(m.inline.iter().cloned());
                for name in &m.exported_macros {
                    let mut at = vec!["crate".to_string()];
                    at.extend(full.iter().cloned());
                    at.push(name.clone());
                    exported.push(Import {
                        name: name.clone(),
                        path: at,
                        public: true,
                    });
                }
                modules.insert(full, (path.clone(), k));
            }
        }
        if let Some(root) = files.get_mut(&Vec::new()) {
            root.modules[0].imports.extend(exported);
        }
        Crate {
            files,
            modules,
            ..Crate::default()
        }
    }

    fn module(&self, path: &[String]) -> Option<&Module> {
        let (file, k) = self.modules.get(path)?;
        Some(&self.files[file].modules[*k])
    }

    /// The module that defines what `segs` names, written in module `at`: `None` for
    /// what is not the crate's (another crate's, a local variable).
    fn resolve(&self, at: &[String], segs: &[String]) -> Option<Vec<String>> {
        let first = segs.first()?;
        match first.as_str() {
            "crate" => self.within(&[], &segs[1..], true),
            "self" => self.within(at, &segs[1..], true),
            "super" => {
                let ups = segs.iter().take_while(|s| *s == "super").count();
                let up = at.len().checked_sub(ups)?;
                self.within(&at[..up], &segs[ups..], true)
            }
            _ => self.within(at, segs, false),
        }
    }

    /// `segs` looked up in module `at`'s namespace (its child modules, its items, its
    /// imports, then its glob imports); `qualified` when a path led to `at`, so that a
    /// name it does not know is still taken for one of its items. Remembered, and `None`
    /// while it is being looked up (glob imports may go round).
    fn within(&self, at: &[String], segs: &[String], qualified: bool) -> Option<Vec<String>> {
        let key = (at.to_vec(), segs.to_vec(), qualified);
        if let Some(known) = self.memo.borrow().get(&key) {
            return known.clone();
        }
        self.memo.borrow_mut().insert(key.clone(), None);
        let found = self.lookup(at, segs, qualified);
        self.memo.borrow_mut().insert(key, found.clone());
        found
    }

    fn lookup(&self, at: &[String], segs: &[String], qualified: bool) -> Option<Vec<String>> {
        let Some((first, rest)) = segs.split_first() else {
            return Some(at.to_vec());
        };
        let m = self.module(at)?;
        if m.children.contains_key(first) {
            let mut child = at.to_vec();
            child.push(first.clone());
            return self.within(&child, rest, true);
        }
        if m.items.contains_key(first) {
            return Some(at.to_vec());
        }
        if let Some(imp) = m.imports.iter().find(|x| x.name == *first) {
            if imp.path.first() == Some(first) {
                // `use anyhow;`, `use serde::{self}`: another crate.
                return None;
            }
            let mut path = imp.path.clone();
            path.extend(rest.iter().cloned());
            return self.resolve(at, &path);
        }
        for imp in m.imports.iter().filter(|x| x.name == "*") {
            let Some(from) = self.resolve(at, &imp.path) else {
                continue;
            };
            if from != at && self.visible(at, &from, first) {
                return self.within(&from, segs, true);
            }
        }
        qualified.then(|| at.to_vec())
    }

    /// Whether a glob import of module `from` into module `to` brings `name`: all of an
    /// enclosing module's names, only the `pub` ones of any other. Remembered, and
    /// `false` while it is being looked up.
    fn visible(&self, to: &[String], from: &[String], name: &str) -> bool {
        let key = (to.to_vec(), from.to_vec(), name.to_string());
        if let Some(known) = self.seen.borrow().get(&key) {
            return *known;
        }
        self.seen.borrow_mut().insert(key.clone(), false);
        let Some(m) = self.module(from) else {
            return false;
        };
        let all = to.starts_with(from);
        let found = m.children.get(name).is_some_and(|p| all || *p)
            || m.items.get(name).is_some_and(|p| all || *p)
            || m.imports
                .iter()
                .any(|x| x.name == name && (all || x.public))
            || m.imports
                .iter()
                .filter(|x| x.name == "*" && (all || x.public))
                .filter_map(|x| self.resolve(from, &x.path))
                .any(|g| g != from && self.visible(to, &g, name));
        self.seen.borrow_mut().insert(key, found);
        found
    }

    /// Whether the file at `path` is a folder's own file (`mod.rs`, `lib.rs`).
    fn is_folder(&self, path: &[String]) -> bool {
        self.files
            .keys()
            .any(|f| f.len() > path.len() && f.starts_with(path))
    }

    /// Every file's imports of the crate's other files, each with an example path:
    /// what its code names (through its imports and glob imports), and its explicit
    /// imports besides: all of them, but for a folder's own file's `pub use` of the
    /// folder's files, which only passes names on.
    fn file_imports(&self) -> BTreeMap<Vec<String>, BTreeMap<Vec<String>, String>> {
        let mut out: BTreeMap<Vec<String>, BTreeMap<Vec<String>, String>> = BTreeMap::new();
        for (file, p) in &self.files {
            let folder = self.is_folder(file);
            let mut add = |at: &[String], segs: &[String], imported: Option<&Import>| {
                let Some(target) = self.resolve(at, segs) else {
                    return;
                };
                let target_file = &self.modules[&target].0;
                if target_file == file {
                    return;
                }
                if let Some(imp) = imported
                    && imp.public
                    && folder
                    && target_file.starts_with(file)
                {
                    return;
                }
                out.entry(file.clone())
                    .or_default()
                    .entry(target_file.clone())
                    .or_insert_with(|| segs.join("::"));
            };
            for (k, m) in p.modules.iter().enumerate() {
                let mut at = file.clone();
                at.extend(m.inline.iter().cloned());
                for (_, segs) in p.paths.iter().filter(|(c, _)| *c == k) {
                    add(&at, segs, None);
                }
                for imp in m.imports.iter().filter(|x| x.name != "*") {
                    add(&at, &imp.path, Some(imp));
                }
            }
        }
        out
    }

    /// The file's place in each folder above it: `(folder, node)` from the crate's root
    /// down, a node being a file of the folder (`ops.rs`), one of its sub-folders as a
    /// whole (`funcs/`), or the folder's own file (`mod.rs`, `lib.rs`).
    fn places(&self, file: &[String]) -> Vec<(Vec<String>, String)> {
        let mut out = Vec::new();
        for k in 0..file.len() {
            let sub = self.is_folder(&file[..=k]);
            let node = format!("{}{}", file[k], if sub { "/" } else { ".rs" });
            out.push((file[..k].to_vec(), node));
        }
        if self.is_folder(file) {
            let own = if file.is_empty() { "lib.rs" } else { "mod.rs" };
            out.push((file.to_vec(), own.to_string()));
        }
        out
    }

    /// Each folder's import graph: `folder -> from -> to -> an example`, where two files'
    /// import is an edge of the lowest folder that holds both, between the nodes they
    /// are in (`graph/funcs/creation.rs` importing `graph/ops.rs` is `funcs/ -> ops.rs`
    /// in `graph`).
    fn folders(&self) -> Folders {
        let mut out = Folders::new();
        for (from, tos) in self.file_imports() {
            let a = self.places(&from);
            for (to, example) in tos {
                let b = self.places(&to);
                let Some((pa, pb)) = a.iter().zip(&b).find(|(x, y)| x != y) else {
                    continue;
                };
                if pb.0.len() + 1 == b.len() && b.last() == Some(pb) && self.is_folder(&to) {
                    // The folder's own file: the common ground of the files below it.
                    continue;
                }
                let (folder, example) = (pa.0.join("/"), format!("{}: {example}", from.join("/")));
                out.entry(folder)
                    .or_default()
                    .entry(pa.1.clone())
                    .or_default()
                    .entry(pb.1.clone())
                    .or_insert(example);
            }
        }
        out
    }
}

/// `folder -> from -> to -> an example of the import`.
type Folders = BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>;

/// The circles of a folder's graph: its strongly connected parts of two nodes or more.
fn circles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<BTreeSet<String>> {
    let nodes: BTreeSet<&String> = graph
        .iter()
        .flat_map(|(f, tos)| std::iter::once(f).chain(tos.keys()))
        .collect();
    let reach = |start: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start.clone()];
        while let Some(n) = todo.pop() {
            for to in graph.get(&n).into_iter().flat_map(|t| t.keys()) {
                if seen.insert(to.clone()) {
                    todo.push(to.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for n in &nodes {
        if !reached[n].contains(*n) || out.iter().any(|c| c.contains(*n)) {
            continue;
        }
        let part = nodes
            .iter()
            .filter(|m| reached[n].contains(**m) && reached[*m].contains(*n))
            .map(|m| (*m).clone())
            .collect();
        out.push(part);
    }
    out
}

/// A crate's `src` files: path under `src` -> text.
fn read_src(krate: &str) -> BTreeMap<String, String> {
    fn walk(dir: &Path, src: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(dir).expect("a source folder") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                walk(&p, src, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(src).expect("under src");
                let rel = rel.to_str().expect("a UTF-8 path").replace('\\', "/");
                out.insert(rel, std::fs::read_to_string(&p).expect("a source file"));
            }
        }
    }
    let src: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(krate)
        .join("src");
    let mut out = BTreeMap::new();
    walk(&src, &src, &mut out);
    out
}

/// Every room's imports of other rooms: the edges of the driver's `src` folder.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let graph = Crate::new(&read_src("driver"))
        .folders()
        .remove("")
        .unwrap_or_default();
    let room = |node: &str| {
        node.trim_end_matches('/')
            .trim_end_matches(".rs")
            .to_string()
    };
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for rel in read_src("driver").keys() {
        let first = rel.split('/').next().expect("a path");
        if !matches!(first, "lib.rs" | "main.rs") {
            out.entry(room(first)).or_default();
        }
    }
    for (from, tos) in graph {
        if from == "lib.rs" {
            continue;
        }
        let tos = tos.into_keys().filter(|t| t != "lib.rs").map(|t| room(&t));
        out.entry(room(&from)).or_default().extend(tos);
    }
    out
}

#[test]
fn rooms_import_only_the_floors_below() {
    let imports = imports();
    let floor: BTreeMap<&str, usize> = FLOORS
        .iter()
        .enumerate()
        .flat_map(|(i, f)| f.iter().map(move |r| (*r, i)))
        .collect();
    let unplaced: Vec<&String> = imports
        .keys()
        .filter(|r| !floor.contains_key(r.as_str()))
        .collect();
    assert!(
        unplaced.is_empty(),
        "rooms on no floor (add each to FLOORS, on the lowest floor above what it uses): {unplaced:?}"
    );
    let gone: Vec<&&str> = floor
        .keys()
        .filter(|r| !imports.contains_key(**r))
        .collect();
    assert!(
        gone.is_empty(),
        "FLOORS names rooms that do not exist: {gone:?}"
    );
    assert!(UPWARD.len() <= 1, "at most one import may go up a floor");
    let mut wrong = Vec::new();
    for (from, tos) in &imports {
        for to in tos {
            let (f, t) = (floor[from.as_str()], floor[to.as_str()]);
            let allowed = UPWARD.iter().any(|(a, b, _)| a == from && b == to);
            if t >= f && !allowed {
                wrong.push(format!("{from} (floor {f}) uses {to} (floor {t})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that do not go down a floor:\n  {}",
        wrong.join("\n  ")
    );
    for (from, to, why) in UPWARD {
        assert!(
            imports[*from].contains(*to),
            "UPWARD lists {from} -> {to}, which is no longer imported ({why}): remove it"
        );
    }
}

#[test]
fn no_folder_has_a_circle() {
    assert!(
        CIRCLE_EXEMPT.len() <= 1,
        "at most one import may close a circle"
    );
    let mut found = Vec::new();
    let mut exempt_used = BTreeSet::new();
    for krate in CRATES {
        for (folder, mut graph) in Crate::new(&read_src(krate)).folders() {
            let at = if folder.is_empty() {
                format!("{krate}/src")
            } else {
                format!("{krate}/src/{folder}")
            };
            for (f, from, tos, _) in CIRCLE_EXEMPT {
                for to in *tos {
                    if *f == at && graph.get_mut(*from).and_then(|t| t.remove(*to)).is_some() {
                        exempt_used.insert((*f, *from, *to));
                    }
                }
            }
            for circle in circles(&graph) {
                let edges: Vec<String> = circle
                    .iter()
                    .flat_map(|from| {
                        graph[from]
                            .iter()
                            .filter(|(to, _)| circle.contains(*to))
                            .map(move |(to, ex)| format!("{from} -> {to} ({ex})"))
                    })
                    .collect();
                found.push(format!("{at}:\n    {}", edges.join("\n    ")));
            }
        }
    }
    assert!(
        found.is_empty(),
        "circles of imports inside a folder (move the shared piece down):\n  {}",
        found.join("\n  ")
    );
    for (f, from, tos, why) in CIRCLE_EXEMPT {
        for to in *tos {
            assert!(
                exempt_used.contains(&(*f, *from, *to)),
                "CIRCLE_EXEMPT lists {f}: {from} -> {to}, which is no longer imported ({why}): remove it"
            );
        }
    }
}

/// The lexer leaves comments out and makes literals opaque.
#[test]
fn the_lexer_leaves_comments_and_literals_out() {
    let t = lex(
        "a::b // crate::c\n/* crate::d /* nested */ */ \"crate::e {\" '{' 'x: r#\"crate::f\"# r#type",
    );
    assert_eq!(
        t,
        vec![
            Tok::Ident("a".into()),
            Tok::Sep,
            Tok::Ident("b".into()),
            Tok::Lit,
            Tok::Lit,
            Tok::Punct(':'),
            Tok::Lit,
            Tok::Ident("type".into()),
        ]
    );
}

/// The parser finds what it must: grouped uses, aliases, items, the paths code names,
/// and test code left out.
#[test]
fn the_parser_reads_uses_and_leaves_tests_out() {
    let src = "use crate::{a::X, b::{self, Y as Z}};\npub(crate) use super::*;\n\
               // crate::c in a comment\npub fn f(v: u8) { crate::d::g(); let h = 1; v.k(); }\n\
               #[cfg(test)]\nmod tests {\n    use crate::c;\n    fn t() { crate::c::u(); }\n}\n\
               #[cfg(test)]\nmod more;\nstruct S { field: W }\nmod inner { fn i() {} }\n";
    let p = parse(src);
    assert_eq!(p.test_files, vec!["more".to_string()]);
    let imports: Vec<(&str, String, bool)> = p.modules[0]
        .imports
        .iter()
        .map(|i| (i.name.as_str(), i.path.join("::"), i.public))
        .collect();
    assert_eq!(
        imports,
        vec![
            ("X", "crate::a::X".to_string(), false),
            ("b", "crate::b".to_string(), false),
            ("Z", "crate::b::Y".to_string(), false),
            ("*", "super".to_string(), true),
        ]
    );
    let items: Vec<(&String, &bool)> = p.modules[0].items.iter().collect();
    assert_eq!(
        items,
        vec![(&"S".to_string(), &false), (&"f".to_string(), &true)]
    );
    assert_eq!(p.modules[1].inline, vec!["inner".to_string()]);
    assert!(p.modules[1].items.contains_key("i"));
    let paths: Vec<String> = p.paths.iter().map(|(_, s)| s.join("::")).collect();
    assert_eq!(paths, vec!["u8", "crate::d::g", "v", "W"]);
}

/// The folder graphs of a small crate: an import through `super::*` and a re-export of
/// the folder's own file counts where it leads, a `pub use` of the folder's file that the
/// own file does not name does not count, and a circle is found.
#[test]
fn the_check_finds_a_circle_through_globs_and_re_exports() {
    let krate = |x_rs: &str| -> BTreeMap<String, String> {
        [
            ("lib.rs", "mod a;\nmod c;\npub use c::Top;\n"),
            (
                "a/mod.rs",
                "mod x;\nmod y;\nuse y::*;\npub use x::Shown;\npub struct Root;\n",
            ),
            ("a/x.rs", x_rs),
            (
                "a/y.rs",
                "use super::Root;\npub fn helper() -> Root { Root }\n#[cfg(test)]\nmod t { use super::super::x::Shown; }\n",
            ),
            ("c.rs", "pub struct Top;\nfn f() { crate::a::Shown; }\n"),
            ("main.rs", "fn main() { nums::a::x::Shown; }\n"),
        ]
        .into_iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect()
    };
    let folders = Crate::new(&krate(
        "use super::*;\npub struct Shown;\nfn g() { helper(); }\n",
    ))
    .folders();
    let edges = |f: &str| -> Vec<(String, String)> {
        folders[f]
            .iter()
            .flat_map(|(from, tos)| tos.keys().map(move |to| (from.clone(), to.clone())))
            .collect()
    };
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    // `helper` comes through `mod.rs`'s glob import of `y`, which uses `mod.rs`'s Root.
    // y's use of `mod.rs`'s Root is no edge: the own file is the folder's common ground.
    assert_eq!(edges("a"), vec![pair("x.rs", "y.rs")]);
    // `crate::a::Shown` is x's, re-exported by `a`'s own file.
    assert_eq!(edges(""), vec![pair("c.rs", "a/")]);
    assert!(circles(&folders["a"]).is_empty());
    // y names Shown now: x -> y -> x.
    let mut files = krate("use super::*;\npub struct Shown;\nfn g() { helper(); }\n");
    files.insert(
        "a/y.rs".into(),
        "use super::Shown;\npub fn helper() { Shown; }\n".into(),
    );
    let folders = Crate::new(&files).folders();
    let want: BTreeSet<String> = ["x.rs", "y.rs"].map(String::from).into();
    assert_eq!(circles(&folders["a"]), vec![want]);
    // A folder's own file that names what it re-exports imports it, and the file may
    // still use the own file: no circle.
    files.insert(
        "a/mod.rs".into(),
        "mod x;\nmod y;\npub use x::Shown;\npub fn z() { Shown; }\n".into(),
    );
    files.insert(
        "a/x.rs".into(),
        "pub struct Shown;\nfn g() { super::z(); }\n".into(),
    );
    let folders = Crate::new(&files).folders();
    assert!(folders["a"]["mod.rs"].contains_key("x.rs"));
    assert!(circles(&folders["a"]).is_empty());
}

/// `docs/architecture.md` draws the floors as `FLOORS` has them (a line per floor, top
/// first: its number, its rooms, then three spaces or more and what the floor is for).
#[test]
fn the_architecture_page_draws_these_floors() {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md");
    let text = std::fs::read_to_string(&page).expect("docs/architecture.md");
    let mut drawn: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let head = line.trim_start();
        let Some(rooms) = head.split("   ").next() else {
            continue;
        };
        let mut words = rooms.split_whitespace();
        let Some(Ok(n)) = words.next().map(str::parse::<usize>) else {
            continue;
        };
        let rooms: Vec<String> = words.map(String::from).collect();
        if !rooms.is_empty() && line.starts_with(' ') {
            drawn.insert(n, rooms);
        }
    }
    let want: BTreeMap<usize, Vec<String>> = FLOORS
        .iter()
        .enumerate()
        .map(|(i, f)| (i, f.iter().map(|r| r.to_string()).collect()))
        .collect();
    assert_eq!(
        drawn, want,
        "docs/architecture.md's floors differ from FLOORS"
    );
}

/// A library user who builds without the default features compiles neither the command
/// line's clap nor the local endpoint's axum.
#[test]
fn the_library_alone_has_no_cli_or_local_endpoint_dependencies() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "nums-cloud",
            "--no-default-features",
            "-e",
            "normal",
            "--offline",
        ])
        .args(["--prefix", "none", "--format", "{p}"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.contains("nums-layout"), "{tree}");
    for name in ["clap ", "clap_complete ", "axum "] {
        assert!(
            !tree.lines().any(|l| l.starts_with(name)),
            "{name}in:\n{tree}"
        );
    }
}
