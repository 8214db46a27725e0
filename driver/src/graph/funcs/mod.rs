//! The functions of the expression language as one table of definitions, one file per
//! family. A definition holds NumPy's name (and aliases), NumPy's parameters in positional
//! order, a line for README's table and the lowering to graph nodes; binding the
//! arguments, the "unknown function" error and README's function table all come from the
//! table, the way ripgrep defines each flag once and derives parsing and help from it.
//!
//! To add a function: add a [`FuncDef`] to its family's `DEFS`, then run
//! `cargo test -p nums-cloud function_table` and paste the table it prints into README.

use super::*;
use crate::expr::Kwarg;

mod contractions;
mod creation;
mod cumulative;
mod elementwise;
mod fft;
mod linalg;
mod models;
pub(super) use models::glm_sums;
mod random;
pub use linalg::factorizations_text;
pub(crate) use linalg::{LuNodes, TsqrTree};
pub(crate) use sorting::SortSamples;
mod reductions;
mod shapes;
mod sorting;
mod statistics;
mod unsupported;

/// Turns a call's bound arguments into graph nodes (or a number).
pub(super) type Lower = fn(&mut Builder<'_>, &Bound) -> Result<Val, EvalError>;

/// How positional arguments beyond the parameter list bind to the last parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rest {
    /// They are an error.
    None,
    /// Several positionals after the first are one tuple, the second parameter's:
    /// `x.reshape(2, 3)` as `x.reshape((2, 3))` (NumPy's method form; a string among them
    /// binds them as written: `reshape(x, (2, 3), "F")`).
    Spread,
    /// NumPy's `*name`: every positional from the last parameter on, each kept with its
    /// position (`einsum(subscripts, *operands)`); all parameters are positional only.
    Star,
    /// NumPy's `*name` first: every positional goes to the first parameter (as
    /// [`Rest::Star`]'s), the others are keywords only (`meshgrid(*xi, indexing)`).
    Leading,
}

/// One function of the expression language.
pub(super) struct FuncDef {
    pub(super) name: &'static str,
    /// Other names NumPy has for the same function (`absolute` for `abs`).
    pub(super) aliases: &'static [&'static str],
    /// NumPy's parameters in positional order (keywords take the same names).
    pub(super) params: &'static [&'static str],
    pub(super) rest: Rest,
    /// NumPy parameters nums-cloud refuses when given (`out=`).
    pub(super) refused: &'static [&'static str],
    /// What it is in NumPy, one line of Markdown for README's table.
    #[cfg_attr(not(test), expect(dead_code, reason = "read by README's table test"))]
    pub(super) numpy: &'static str,
    pub(super) lower: Lower,
}

impl FuncDef {
    const fn new(
        name: &'static str,
        params: &'static [&'static str],
        numpy: &'static str,
        lower: Lower,
    ) -> Self {
        FuncDef {
            name,
            aliases: &[],
            params,
            rest: Rest::None,
            refused: &[],
            numpy,
            lower,
        }
    }

    const fn aliases(mut self, aliases: &'static [&'static str]) -> Self {
        self.aliases = aliases;
        self
    }

    const fn rest(mut self, rest: Rest) -> Self {
        self.rest = rest;
        self
    }

    const fn refusing(mut self, refused: &'static [&'static str]) -> Self {
        self.refused = refused;
        self
    }

    /// NumPy's array_like parameters of the function ([`ARRAY_LIKE`]): a list given for
    /// one is an array of its values, as NumPy reads it (`exp([1, 2])`). A binding that
    /// holds lists as tuples makes the array (the Python package calls `asarray`).
    fn arrays(&self) -> Vec<&'static str> {
        if self.name.contains('.') {
            // A Generator's methods: their parameters are numbers or sizes here.
            return Vec::new();
        }
        self.params
            .iter()
            .copied()
            .filter(|p| ARRAY_LIKE.contains(p))
            .collect()
    }

    fn names(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.name).chain(self.aliases.iter().copied())
    }

    /// The parameter list as Python writes it (`subscripts, *operands`).
    fn signature(&self) -> String {
        let n = self.params.len();
        self.params
            .iter()
            .enumerate()
            .map(|(i, p)| match self.rest {
                Rest::Star if i + 1 == n => format!("*{p}"),
                Rest::Leading if i == 0 => format!("*{p}"),
                _ => p.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The parameter names that are NumPy's array_like operands wherever the table uses them
/// (`x`, `x1`, `a`, `condition`, ...), and which the engine takes as arrays or numbers:
/// [`FuncDef::arrays`]. Not here: sequences of arrays (`arrays`, `tup`), shapes, axes and
/// others a tuple of numbers means something for (`q`, `bins`, `shift`, `reps`, `indices`
/// and `repeats` of ints, `fill_value`, `pad_width`, `constant_values`); the test
/// `array_like_parameters_take_arrays` lowers every function with an array for each.
const ARRAY_LIKE: &[&str] = &[
    "a",
    "b",
    "x",
    "x1",
    "x2",
    "y",
    "m",
    "v",
    "A",
    "ar",
    "val",
    "z",
    "array",
    "condition",
    "element",
    "test_elements",
    "a_min",
    "a_max",
    "prepend",
    "append",
    "weights",
    "fweights",
    "aweights",
    "operands",
    "args",
    "arr",
    "ind",
    "mask",
    "vals",
    "values",
];

/// A family of functions: one file, one group of README's table.
pub(super) struct Family {
    pub(super) name: &'static str,
    pub(super) defs: &'static [FuncDef],
}

/// Every function of the expression language.
pub(super) const FAMILIES: &[Family] = &[
    Family {
        name: "creation",
        defs: creation::DEFS,
    },
    Family {
        name: "elementwise",
        defs: elementwise::DEFS,
    },
    Family {
        name: "reductions",
        defs: reductions::DEFS,
    },
    Family {
        name: "cumulative",
        defs: cumulative::DEFS,
    },
    Family {
        name: "sorting",
        defs: sorting::DEFS,
    },
    Family {
        name: "statistics",
        defs: statistics::DEFS,
    },
    Family {
        name: "contractions",
        defs: contractions::DEFS,
    },
    Family {
        name: "shapes",
        defs: shapes::DEFS,
    },
    Family {
        name: "linalg",
        defs: linalg::DEFS,
    },
    Family {
        name: "fft",
        defs: fft::DEFS,
    },
    Family {
        name: "models",
        defs: models::DEFS,
    },
    Family {
        name: "random",
        defs: random::DEFS,
    },
];

fn definitions() -> impl Iterator<Item = &'static FuncDef> {
    FAMILIES.iter().flat_map(|f| f.defs)
}

fn lookup(name: &str) -> Option<&'static FuncDef> {
    definitions().find(|d| d.names().any(|n| n == name))
}

/// Whether `name` is a function of the table (or an alias of one).
pub(crate) fn is_function(name: &str) -> bool {
    lookup(name).is_some()
}

/// One function of the table as a binding of the library sees it (the Python package
/// makes one Python function of each).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Signature {
    /// Its family: `creation`, `elementwise`, `reductions`, `contractions`, `shapes`,
    /// `linalg`, `fft` or `models`.
    pub family: &'static str,
    /// NumPy's name.
    pub name: &'static str,
    /// NumPy's other names for it.
    pub aliases: &'static [&'static str],
    /// NumPy's parameters in positional order (keywords take the same names).
    pub params: &'static [&'static str],
    /// The last parameter is NumPy's `*name` (every positional from there on).
    pub star: bool,
    /// NumPy's array_like parameters: a list given for one is an array of its values
    /// (a binding makes the array; `exp([1, 2])`).
    pub arrays: Vec<&'static str>,
}

/// Every function of the table, family by family.
pub fn signatures() -> Vec<Signature> {
    FAMILIES
        .iter()
        .flat_map(|f| {
            // A Generator's methods are called on one, not by name.
            f.defs
                .iter()
                .filter(|d| !d.name.contains('.'))
                .map(|d| Signature {
                    family: f.name,
                    name: d.name,
                    aliases: d.aliases,
                    params: d.params,
                    star: d.rest == Rest::Star,
                    arrays: d.arrays(),
                })
        })
        .collect()
}

/// Every name a call may use (aliases too), sorted; a Generator's methods are called on
/// one (`random.default_rng(seed).normal(...)`), not by name.
pub fn all_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = definitions()
        .flat_map(FuncDef::names)
        .filter(|n| !n.starts_with("Generator."))
        .collect();
    names.sort_unstable();
    names
}

/// The candidates within a few edits of `word`, closest first (at most three).
fn suggestions<'n>(word: &str, candidates: impl Iterator<Item = &'n str>) -> Vec<&'n str> {
    let limit = (word.chars().count() / 3).max(1);
    let mut near: Vec<(usize, &str)> = candidates
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|&(d, _)| d <= limit)
        .collect();
    near.sort_unstable();
    near.into_iter().take(3).map(|(_, c)| c).collect()
}

/// "did you mean a, b or c? " (empty when nothing is near).
fn did_you_mean(near: &[String]) -> String {
    match near {
        [] => String::new(),
        [one] => format!("did you mean {one}? "),
        [init @ .., last] => format!("did you mean {} or {last}? ", init.join(", ")),
    }
}

/// The error for a call of a name the table does not have: what to write instead of a
/// NumPy name nums-cloud lacks, or the closest names (three at most); short either way.
fn unknown_function(f: &str, pos: usize) -> EvalError {
    let message = match unsupported::instead(f) {
        Some(instead) => format!(
            "{f}() is not supported; instead: {} (docs/unsupported.md)",
            instead.replace('`', "")
        ),
        None => {
            let names = all_names();
            let near: Vec<String> = suggestions(f, names.iter().copied())
                .into_iter()
                .map(|n| format!("{n}()"))
                .collect();
            let also =
                "(README lists the functions; docs/unsupported.md what to write instead of others)";
            match did_you_mean(&near) {
                d if d.is_empty() => format!("unknown function {f}() {also}"),
                d => format!("unknown function {f}(); {d}{also}"),
            }
        }
    };
    EvalError::Expr(ExprError::new(pos, message))
}

/// README's function table, rendered from the definitions.
#[cfg(test)]
fn markdown_table() -> String {
    let mut out = String::from("| family | function | NumPy equivalent |\n|---|---|---|\n");
    for fam in FAMILIES {
        for (i, d) in fam.defs.iter().enumerate() {
            let also = match d.aliases {
                [] => String::new(),
                a => format!(
                    " (also {})",
                    a.iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            let refused = match d.refused {
                [] => String::new(),
                r => format!(
                    "; {} refused",
                    r.iter()
                        .map(|n| format!("`{n}=`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            out += &format!(
                "| {} | `{}({})`{also} | {}{refused} |\n",
                if i == 0 { fam.name } else { "" },
                d.name,
                d.signature(),
                d.numpy
            );
        }
    }
    out
}

/// A single axis given as a value (negatives count from the end).
fn axis_of(v: &Val, ndim: usize) -> Result<usize, Refusal> {
    match v {
        Val::Num(x) => match x.integer() {
            Some(i) if x.kind() != ScalarKind::Float => one_axis(i, ndim),
            _ => Err(Refusal::new(
                PyException::TypeError,
                format!("axis {x} is not an integer"),
            )),
        },
        _ => Err(Refusal::new(
            PyException::TypeError,
            "axis must be an integer",
        )),
    }
}

/// Evaluated arguments, bound to a function's parameters.
pub(super) struct Bound {
    /// The name as called (an alias, maybe), for messages.
    pub(super) f: String,
    /// Where the call is.
    pub(super) pos: usize,
    vals: Vec<Option<(Val, usize)>>,
    names: &'static [&'static str],
    /// The positionals a [`Rest::Star`] parameter took.
    rest: Vec<(Val, usize)>,
    /// A random function's seed (`funcs/random.rs`).
    pub(super) seed: Option<u64>,
}

impl Bound {
    pub(super) fn err(&self, pos: usize, m: impl Into<String>) -> EvalError {
        EvalError::Expr(ExprError::new(pos, m))
    }

    /// A refusal at `pos`, raised as its class.
    pub(super) fn refused(&self, pos: usize, r: Refusal) -> EvalError {
        EvalError::Expr(ExprError::refused(pos, r))
    }

    /// An error NumPy raises as `raises` (see [`crate::refusal::PyException`]).
    pub(super) fn raising(
        &self,
        raises: crate::refusal::PyException,
        pos: usize,
        m: impl Into<String>,
    ) -> EvalError {
        EvalError::Expr(ExprError::raising(raises, pos, m))
    }

    /// The argument as given, `None` included.
    pub(super) fn given(&self, name: &str) -> Option<&(Val, usize)> {
        let i = self.names.iter().position(|n| *n == name)?;
        self.vals.get(i)?.as_ref()
    }

    /// The argument, if given and not `None`.
    pub(super) fn get(&self, name: &str) -> Option<&(Val, usize)> {
        self.given(name).filter(|(v, _)| !matches!(v, Val::None))
    }

    pub(super) fn need(&self, name: &str) -> Result<&(Val, usize), EvalError> {
        self.get(name).ok_or_else(|| {
            self.err(
                self.pos,
                format!("{}() is missing the argument {name:?}", self.f),
            )
        })
    }

    /// The arguments of `names` that were given, for a function of the same parameter
    /// names ([`Builder::apply`]).
    pub(super) fn args_of<'n>(&self, names: &[&'n str]) -> Vec<(&'n str, Val)> {
        names
            .iter()
            .filter_map(|&n| self.get(n).map(|(v, _)| (n, v.clone())))
            .collect()
    }

    /// The positionals of a [`Rest::Star`] parameter.
    pub(super) fn rest(&self) -> &[(Val, usize)] {
        &self.rest
    }

    pub(super) fn array(&self, name: &str) -> Result<NodeId, EvalError> {
        match self.need(name)? {
            (Val::Arr(id), _) => Ok(*id),
            (_, p) => Err(self.err(*p, format!("{}(): {name} must be an array", self.f))),
        }
    }

    pub(super) fn int(&self, name: &str) -> Result<Option<i64>, EvalError> {
        match self.get(name) {
            None => Ok(None),
            Some((Val::Num(v), _)) if v.integer().is_some() => Ok(v.integer()),
            Some((_, p)) => Err(self.err(*p, format!("{}(): {name} must be an integer", self.f))),
        }
    }

    pub(super) fn num(&self, name: &str) -> Result<Option<Scalar>, EvalError> {
        match self.get(name) {
            None => Ok(None),
            Some((Val::Num(v), _)) => Ok(Some(*v)),
            Some((_, p)) => Err(self.err(*p, format!("{}(): {name} must be a number", self.f))),
        }
    }

    pub(super) fn flag(&self, name: &str) -> Result<bool, EvalError> {
        Ok(self.num(name)?.is_some_and(Scalar::as_bool))
    }

    pub(super) fn dtype(&self, name: &str) -> Result<Option<DType>, EvalError> {
        match self.get(name) {
            None => Ok(None),
            // NumPy raises TypeError for a dtype it does not know (nums-cloud: has).
            Some((Val::Str(s), p)) => DType::parse_named(s).map(Some).map_err(|m| {
                self.raising(PyException::TypeError, *p, format!("{}(): {m}", self.f))
            }),
            Some((_, p)) => Err(self.err(
                *p,
                format!("{}(): dtype is a string such as \"float32\"", self.f),
            )),
        }
    }

    /// A shape: an int or a tuple of ints, no size negative (an empty array has a 0), at
    /// most 2^50 elements.
    pub(super) fn shape(&self, name: &str) -> Result<Vec<u64>, EvalError> {
        let (v, p) = self.need(name)?;
        let items = match v {
            Val::Tuple(t) => t.clone(),
            v => vec![v.clone()],
        };
        let shape = items
            .iter()
            .map(|v| match v {
                Val::Num(x) if x.kind() != ScalarKind::Float && x.as_i64() >= 0 => {
                    Ok(x.as_i64() as u64)
                }
                Val::Num(x) if x.kind() != ScalarKind::Float => Err(self.err(
                    *p,
                    format!("{}(): negative dimensions are not allowed", self.f),
                )),
                _ => Err(self.err(
                    *p,
                    format!("{}(): {name} must be non-negative integers", self.f),
                )),
            })
            .collect::<Result<Vec<u64>, _>>()?;
        check_elements(&shape).map_err(|m| self.err(*p, format!("{}(): {m}", self.f)))?;
        Ok(shape)
    }

    /// The `axis` argument of a reduction: every axis when not given or None.
    pub(super) fn axes(&self, ndim: usize) -> Result<Vec<usize>, EvalError> {
        match self.get("axis") {
            None => Ok((0..ndim).collect()),
            Some((v, p)) => axes_of(v, ndim).map_err(|m| self.refused(*p, m)),
        }
    }
}

impl<'a> Builder<'a> {
    /// A call `f(args, kwargs)` at `pos`: bound by its definition's parameters, lowered by
    /// its definition.
    pub(super) fn call(
        &mut self,
        f: &str,
        args: &[Expr],
        kwargs: &[Kwarg],
        pos: usize,
    ) -> Result<Val, EvalError> {
        let def = match lookup(f) {
            Some(def) => def,
            None if self.defs.contains_key(f) => {
                return Err(EvalError::Expr(ExprError::new(
                    pos,
                    format!("{f} is an array of the job, not a function: {f}[...] indexes it"),
                )));
            }
            None => return Err(unknown_function(f, pos)),
        };
        let b = self.bind(def, f, args, kwargs, pos)?;
        (def.lower)(self, &b)
    }

    /// Evaluates the arguments and binds them to `def`'s parameters as Python does.
    fn bind(
        &mut self,
        def: &FuncDef,
        f: &str,
        args: &[Expr],
        kwargs: &[Kwarg],
        pos: usize,
    ) -> Result<Bound, EvalError> {
        let at = |p: usize, m: String| EvalError::Expr(ExprError::new(p, m));
        let names = def.params;
        // A NumPy scalar argument stays one where it promotes (the elementwise functions);
        // elsewhere it is a number (a size, an axis, a fill value).
        // (By name: a `const` table's items have no one address to compare.)
        let operands = elementwise::DEFS.iter().any(|d| d.name == def.name);
        let eval = |s: &mut Self, e: &Expr| {
            if operands {
                s.eval_operand(e)
            } else {
                s.eval(e)
            }
        };
        let mut vals: Vec<Option<(Val, usize)>> = vec![None; names.len()];
        let last = names.len().checked_sub(1);
        // From which positional on the arguments go to the last parameter together.
        let gather = match def.rest {
            Rest::None => None,
            Rest::Spread => (args.len() > 2
                && !args[2..].iter().any(|a| matches!(a.kind, ExprKind::Str(_))))
            .then_some(1),
            Rest::Star => last,
            Rest::Leading => Some(0),
        };
        let mut rest = Vec::new();
        for (i, a) in args.iter().enumerate() {
            if let Some(k) = gather.filter(|&k| i >= k) {
                let v = eval(self, a)?;
                match def.rest {
                    Rest::Star | Rest::Leading => rest.push((v, a.pos)),
                    _ => match &mut vals[k] {
                        Some((Val::Tuple(items), _)) => items.push(v),
                        slot => *slot = Some((Val::Tuple(vec![v]), a.pos)),
                    },
                }
                continue;
            }
            let Some(slot) = vals.get_mut(i) else {
                return Err(at(
                    a.pos,
                    format!(
                        "{f}() takes at most {} positional arguments ({}), got {}",
                        names.len(),
                        def.signature(),
                        args.len()
                    ),
                ));
            };
            *slot = Some((eval(self, a)?, a.pos));
        }
        for Kwarg {
            name: k,
            pos: kpos,
            value: v,
        } in kwargs
        {
            let slot = names
                .iter()
                .position(|n| n == k)
                .filter(|&i| def.rest != Rest::Star && (def.rest, i) != (Rest::Leading, 0));
            let Some(i) = slot else {
                let why = if def.rest == Rest::Star {
                    format!("its arguments are positional: {}", def.signature())
                } else {
                    let near: Vec<String> = suggestions(k, names.iter().copied())
                        .into_iter()
                        .map(|n| format!("{n:?}"))
                        .collect();
                    format!("{}it takes {}", did_you_mean(&near), def.signature())
                };
                return Err(at(
                    *kpos,
                    format!("{f}() got an unexpected keyword argument {k:?}; {why}"),
                ));
            };
            if vals[i].is_some() {
                return Err(at(*kpos, format!("{f}() got multiple values for {k:?}")));
            }
            vals[i] = Some((eval(self, v)?, v.pos));
        }
        let mut b = Bound {
            f: f.to_string(),
            pos,
            vals,
            names,
            rest,
            seed: None,
        };
        for n in def.refused {
            if let Some((_, p)) = b.get(n) {
                return Err(b.err(*p, format!("{f}(): the argument {n:?} is not supported")));
            }
        }
        // NumPy's array_like: a list given for an array operand is the array of its values
        // (`isin(K, [1, 3, 5])`), as an operator's list operand is.
        let arrays = def.arrays();
        for (i, n) in names.iter().enumerate() {
            if let Some((v @ Val::Tuple(_), p)) = &b.vals[i]
                && arrays.contains(n)
            {
                let arr = self.list_operand(v.clone(), *p)?;
                b.vals[i] = Some((arr, *p));
            }
        }
        if last.is_some_and(|l| arrays.contains(&names[l])) {
            for (v, p) in &mut b.rest {
                if matches!(v, Val::Tuple(_)) {
                    *v = self.list_operand(v.clone(), *p)?;
                }
            }
        }
        Ok(b)
    }

    /// `name(params...)` of the table with values already made: a function built from
    /// others (`digitize` from `searchsorted`) calls them as a job file would.
    pub(super) fn apply(
        &mut self,
        name: &str,
        args: &[(&str, Val)],
        pos: usize,
    ) -> Result<Val, EvalError> {
        let def = lookup(name).unwrap_or_else(|| panic!("{name} is not in the table"));
        let mut vals: Vec<Option<(Val, usize)>> = vec![None; def.params.len()];
        for (k, v) in args {
            let i = def
                .params
                .iter()
                .position(|p| p == k)
                .unwrap_or_else(|| panic!("{name}() has no parameter {k}"));
            vals[i] = Some((v.clone(), pos));
        }
        let b = Bound {
            f: name.to_string(),
            pos,
            vals,
            names: def.params,
            rest: Vec::new(),
            seed: None,
        };
        (def.lower)(self, &b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_defined_once_and_binds() {
        let names = all_names();
        let mut distinct = names.clone();
        distinct.dedup();
        assert_eq!(names, distinct, "a name is defined twice");
        for d in definitions() {
            assert!(!d.numpy.is_empty(), "{}: no NumPy equivalent", d.name);
            for r in d.refused {
                assert!(
                    d.params.contains(r),
                    "{}: refuses {r}, not a parameter",
                    d.name
                );
            }
            if d.rest != Rest::None {
                assert!(!d.params.is_empty(), "{}: rest without parameters", d.name);
            }
        }
    }

    /// Every array_like parameter ([`FuncDef::arrays`]) takes an array: a call of each
    /// function with an array for every one of them binds and lowers, or fails for
    /// another reason than an argument's kind (a missing argument, a shape).
    #[test]
    fn array_like_parameters_take_arrays() {
        use std::path::Path;
        let mut wrong = Vec::new();
        for fam in FAMILIES {
            for d in fam.defs {
                let arrays = d.arrays();
                if arrays.is_empty() {
                    continue;
                }
                let call = match (d.name, d.rest) {
                    ("einsum", _) => "einsum('ij,jk->ik', S, S)".to_string(),
                    (_, Rest::Star) => format!("{}(S, S)", d.name),
                    _ => format!(
                        "{}({})",
                        d.name,
                        arrays
                            .iter()
                            .map(|p| format!("{p}=S"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                let text = format!("[arrays]\nS = {{ ones = [4, 4] }}\nY = \"{call}\"\n");
                let job = crate::job::Job::parse(Path::new("/tmp/g/job.toml"), &text).unwrap();
                if let Err(e) = build(&job, &Probes::default()) {
                    let m = e.message;
                    let kind = [
                        "must be an array",
                        "must be a number",
                        "must be an integer",
                        "must be integers",
                        "needs an array or a number",
                    ]
                    .iter()
                    .any(|w| m.contains(w));
                    if kind {
                        wrong.push(format!("{call}: {m}"));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        let arrays = |f: &str| lookup(f).unwrap().arrays();
        assert_eq!(arrays("exp"), ["x"]);
        assert_eq!(arrays("add"), ["x1", "x2"]);
        assert_eq!(arrays("where"), ["condition", "x", "y"]);
        assert_eq!(arrays("flip"), ["m"]);
        assert_eq!(arrays("einsum"), ["operands"]);
        assert_eq!(arrays("reshape"), ["a"]);
        assert!(arrays("concatenate").is_empty() && arrays("zeros").is_empty());
        assert!(arrays("Generator.normal").is_empty());
    }

    #[test]
    fn near_names_are_suggested() {
        let names = all_names();
        let near = |w: &str| suggestions(w, names.iter().copied());
        assert_eq!(near("summ"), ["sum"]);
        assert_eq!(near("reshap"), ["reshape"]);
        assert_eq!(near("linspaec"), ["linspace"]);
        assert!(near("frobnicate").is_empty());
        let message = |f: &str| {
            let EvalError::Expr(e) = unknown_function(f, 0) else {
                panic!("an expression error")
            };
            e.message
        };
        // Short: the closest names (three at most) and the page of what is not supported.
        assert_eq!(
            message("meen"),
            "unknown function meen(); did you mean mean()? (README lists the functions; \
             docs/unsupported.md what to write instead of others)"
        );
        assert_eq!(
            message("frobnicate"),
            "unknown function frobnicate() (README lists the functions; docs/unsupported.md \
             what to write instead of others)"
        );
        // A NumPy name nums-cloud does not have: what to write instead.
        let m = message("apply_along_axis");
        assert!(
            m.starts_with("apply_along_axis() is not supported; instead: ") && m.len() < 300,
            "{m}"
        );
        for f in ["sort", "cumsum", "flip", "frobnicate", "polyfit"] {
            assert!(message(f).matches("()").count() <= 4, "{}", message(f));
        }
        assert_eq!(
            did_you_mean(&["a".into(), "b".into(), "c".into()]),
            "did you mean a, b or c? "
        );
    }

    /// docs/unsupported.md lists every name of the table of unsupported names (with what
    /// to write instead), and none of them is a function.
    #[test]
    fn unsupported_names_are_documented_and_not_functions() {
        let page = include_str!("../../../../docs/unsupported.md");
        for (name, instead) in unsupported::UNSUPPORTED {
            assert!(
                !is_function(name),
                "{name} is a function and listed as unsupported"
            );
            let row = format!("| `{name}` | {instead} |");
            assert!(
                page.contains(&row),
                "docs/unsupported.md lacks the row {row}"
            );
        }
    }

    /// README's function table is rendered from the definitions; on a difference this
    /// prints the table to paste between README's markers.
    #[test]
    fn function_table_in_readme_is_generated() {
        const BEGIN: &str = "<!-- function table: generated from driver/src/graph/funcs/ -->\n";
        const END: &str = "<!-- end of function table -->";
        let readme = include_str!("../../../../README.md");
        let table = readme
            .split_once(BEGIN)
            .and_then(|(_, rest)| rest.split_once(END))
            .map(|(t, _)| t);
        let want = markdown_table();
        assert!(
            table == Some(want.as_str()),
            "README's function table is not the one the definitions give; put this between \
             the lines {BEGIN:?} and {END:?} in README.md:\n\n{want}"
        );
    }
}
