//! Models: generalized linear models fitted to convergence, named and parameterised as
//! scikit-learn's estimators. The result is the coefficient vector with the intercept last
//! (when `fit_intercept`), computed by the driver's iteration engine (`crate::iterate`)
//! before the main stage and usable by later expressions (`X_test @ w[:-1] + w[-1]`).

use super::*;
use crate::models::{
    DEFAULT_ALPHA, DEFAULT_C, DEFAULT_MAX_ITER, DEFAULT_SOLVER, DEFAULT_TOL, Family, FitSpec,
    MAX_ITER_RANGE, SOLVER_NAMES, Solver,
};

pub(super) const DEFS: &[FuncDef] = &[
    FuncDef::new(
        "logistic_regression",
        &[
            "X",
            "y",
            "penalty",
            "C",
            "solver",
            "tol",
            "max_iter",
            "fit_intercept",
            "n_classes",
            "sample_weight",
        ],
        "sklearn `LogisticRegression(...).fit(X, y, sample_weight)`: `[coef..., intercept]`; `solver` 'lbfgs' (default; also 'bfgs') or Newton's ('newton', 'newton-cg', 'newton-cholesky', 'irls'); `n_classes` K >= 3: the multinomial model, y the class indices 0..K-1, K rows `[coef..., intercept]`",
        |s, b| fit(s, b, Family::Logistic),
    ),
    FuncDef::new(
        "linear_regression",
        &["X", "y", "fit_intercept", "sample_weight"],
        "sklearn `LinearRegression(...).fit(X, y, sample_weight)`: `[coef..., intercept]` (normal equations, one pass)",
        |s, b| fit(s, b, Family::Linear),
    ),
    FuncDef::new(
        "ridge",
        &["X", "y", "alpha", "fit_intercept", "sample_weight"],
        "sklearn `Ridge(...).fit(X, y, sample_weight)`: `[coef..., intercept]` (normal equations, one pass)",
        |s, b| fit(s, b, Family::Linear),
    ),
    FuncDef::new(
        "poisson_regression",
        &[
            "X",
            "y",
            "alpha",
            "solver",
            "tol",
            "max_iter",
            "fit_intercept",
            "sample_weight",
        ],
        "sklearn `PoissonRegressor(...).fit(X, y, sample_weight)`: `[coef..., intercept]`; `solver` as `logistic_regression`'s",
        |s, b| fit(s, b, Family::Poisson),
    ),
];

/// A string argument, or `default`.
fn string<'b>(b: &'b Bound, name: &str, default: &'b str) -> Result<&'b str, EvalError> {
    match b.get(name) {
        None => Ok(default),
        Some((Val::Str(v), _)) => Ok(v),
        Some((_, p)) => Err(b.err(*p, format!("{}(): {name} must be a string", b.f))),
    }
}

/// A number argument that must be finite and in a range (as scikit-learn validates it).
fn number(
    b: &Bound,
    name: &str,
    default: f64,
    ok: fn(f64) -> bool,
    what: &str,
) -> Result<f64, EvalError> {
    let v = b.num(name)?.map_or(default, Scalar::as_f64);
    if !ok(v) {
        let p = b.get(name).map_or(b.pos, |(_, p)| *p);
        return Err(b.err(p, format!("{}(): {name} must be {what}, not {v}", b.f)));
    }
    Ok(v)
}

/// The most classes a multinomial fit takes (its passes' sums grow with the classes).
const MAX_CLASSES: i64 = 1000;

fn fit(s: &mut Builder, b: &Bound, family: Family) -> Result<Val, EvalError> {
    let function: &'static str = match (family, b.f.as_str()) {
        (Family::Logistic | Family::Multinomial { .. }, _) => "logistic_regression",
        (Family::Poisson, _) => "poisson_regression",
        (Family::Linear, "ridge") => "ridge",
        (Family::Linear, _) => "linear_regression",
    };
    let x = b.array("X")?;
    let y = b.array("y")?;
    let (mx, my) = (s.meta(x).clone(), s.meta(y).clone());
    if mx.ndim() != 2 {
        return Err(b.err(
            b.pos,
            format!(
                "{function}(): X must be 2-D (samples x features), not of shape {}",
                shape_str(&mx.shape)
            ),
        ));
    }
    // scikit-learn's refusal of an empty X.
    for (n, what) in [(mx.shape[0], "sample"), (mx.shape[1], "feature")] {
        if n == 0 {
            return Err(b.err(
                b.pos,
                format!(
                    "{function}(): found X with 0 {what}(s) (shape {}) while a minimum of 1 is required",
                    shape_str(&mx.shape)
                ),
            ));
        }
    }
    if my.ndim() != 1 || my.shape[0] != mx.shape[0] {
        return Err(b.err(
            b.pos,
            format!(
                "{function}(): y must be 1-D with one value per row of X ({} rows), not of shape {}",
                mx.shape[0],
                shape_str(&my.shape)
            ),
        ));
    }
    // scikit-learn's `_check_sample_weight`: one weight per row.
    let sw = match b.get("sample_weight") {
        None => None,
        Some(_) => {
            let sw = b.array("sample_weight")?;
            let m = s.meta(sw);
            if m.shape != [mx.shape[0]] {
                return Err(b.err(
                    b.get("sample_weight").map_or(b.pos, |(_, p)| *p),
                    format!(
                        "{function}(): sample_weight.shape == {}, expected ({},)!",
                        shape_str(&m.shape),
                        mx.shape[0]
                    ),
                ));
            }
            if m.dtype.is_complex() {
                return Err(b.err(
                    b.pos,
                    format!(
                        "{function}(): sample_weight must be real numbers, not {}",
                        m.dtype
                    ),
                ));
            }
            Some(sw)
        }
    };
    if mx.dtype == DType::Bool || my.dtype == DType::Bool {
        return Err(b.err(
            b.pos,
            format!("{function}(): X and y must be numbers, not bool (use astype)"),
        ));
    }
    if let Some(d) = [mx.dtype, my.dtype].into_iter().find(|d| d.is_complex()) {
        return Err(b.err(
            b.pos,
            format!(
                "{function}(): X and y must be real numbers, not {d} (scikit-learn refuses complex data)"
            ),
        ));
    }
    let positive = |v: f64| v > 0.0 && !v.is_nan();
    let non_negative = |v: f64| (0.0..f64::INFINITY).contains(&v);
    let solver_of = |b: &Bound| -> Result<Solver, EvalError> {
        let name = string(b, "solver", DEFAULT_SOLVER.name())?;
        Solver::parse(name).ok_or_else(|| {
            let names: Vec<&str> = SOLVER_NAMES.iter().map(|(n, _)| *n).collect();
            b.err(
                b.get("solver").map_or(b.pos, |(_, p)| *p),
                format!(
                    "{function}(): solver '{name}' is not supported; use one of {}",
                    names.join(", ")
                ),
            )
        })
    };
    let max_iter = |b: &Bound| -> Result<u32, EvalError> {
        match b.int("max_iter")? {
            None => Ok(DEFAULT_MAX_ITER),
            Some(n) if MAX_ITER_RANGE.contains(&n) => Ok(n as u32),
            Some(n) => Err(b.err(
                b.get("max_iter").map_or(b.pos, |(_, p)| *p),
                format!(
                    "{function}(): max_iter must be between {} and {}, not {n}",
                    MAX_ITER_RANGE.start(),
                    MAX_ITER_RANGE.end()
                ),
            )),
        }
    };
    let fit_intercept = match b.get("fit_intercept") {
        None => true,
        Some(_) => b.flag("fit_intercept")?,
    };
    let spec = match family {
        Family::Logistic | Family::Multinomial { .. } => {
            let penalty = match b.given("penalty") {
                None => "l2",
                Some((Val::None, _)) => "none",
                Some(_) => string(b, "penalty", "l2")?,
            };
            let c = match penalty {
                "l2" => number(b, "C", DEFAULT_C, positive, "positive")?,
                "none" => f64::INFINITY,
                other => {
                    return Err(b.err(
                        b.pos,
                        format!(
                            "{function}(): penalty '{other}' is not supported; use 'l2' or None"
                        ),
                    ));
                }
            };
            // More than two classes: the multinomial model, y their indices.
            let family = match b.int("n_classes")? {
                None | Some(2) => Family::Logistic,
                Some(k @ 3..=MAX_CLASSES) => Family::Multinomial { classes: k as u32 },
                Some(k) => {
                    return Err(b.err(
                        b.get("n_classes").map_or(b.pos, |(_, p)| *p),
                        format!(
                            "{function}(): n_classes must be between 2 and {MAX_CLASSES}, not {k}"
                        ),
                    ));
                }
            };
            let solver = solver_of(b)?;
            FitSpec {
                function,
                family,
                solver,
                penalty: c,
                tol: number(b, "tol", DEFAULT_TOL, positive, "positive")?,
                max_iter: max_iter(b)?,
                fit_intercept,
            }
        }
        Family::Poisson => FitSpec {
            function,
            family,
            solver: solver_of(b)?,
            penalty: number(b, "alpha", DEFAULT_ALPHA, non_negative, "0 or more")?,
            tol: number(b, "tol", DEFAULT_TOL, positive, "positive")?,
            max_iter: max_iter(b)?,
            fit_intercept,
        },
        Family::Linear => FitSpec {
            function,
            family,
            solver: Solver::Direct,
            penalty: if function == "ridge" {
                number(b, "alpha", DEFAULT_ALPHA, non_negative, "0 or more")?
            } else {
                0.0
            },
            tol: 0.0,
            max_iter: 1,
            fit_intercept,
        },
    };
    // The weights travel with y, as its second column ([n, 2]): every stage that makes,
    // re-blocks or reads y (a fit's own stage, each pass's terms) carries them too.
    let y = match sw {
        None => y,
        Some(sw) => {
            let n = mx.shape[0];
            let col = |s: &mut Builder, v: NodeId| {
                let v = s.cast(v, DType::Float64);
                s.reshape(v, &[n, 1])
            };
            let (yc, wc) = (col(s, y), col(s, sw));
            s.concat(vec![yc, wc], 1, b.pos)?
        }
    };
    // y in X's row blocks, so that each pass reads the two side by side.
    let mut block = s.meta(y).shape.clone();
    block[0] = mx.block[0];
    let y = s.rechunk(y, block);
    let p = mx.shape[1] + fit_intercept as u64;
    // A multinomial fit's: a row [coef..., intercept] per class.
    let shape = match spec.family {
        Family::Multinomial { classes } => vec![u64::from(classes), p],
        _ => vec![p],
    };
    let meta = ArrayMeta::new(shape.clone(), shape, DType::Float64);
    Ok(Val::Arr(s.add(meta, NodeOp::Fit { x, y, spec })))
}

/// The node of a fit's gradient pass (`iterate`, [`crate::job::Source::GlmSums`]): the
/// loss and gradient sums of `loss` over `x` ([n, d]) and `y` ([n], or [n, 2] with the
/// sample weights; re-blocked to x's rows) at the candidates `w` ([d, k], one block) and
/// `b` ([k]): [1 + p + C, k] (p = d + b, C =
/// [`GLM_COUNTS`](nums_layout::batch::GLM_COUNTS)), one block (rows: the loss, the
/// gradient of w, then of b, then the counts of the data in column 0); with `hessian` (a
/// Newton pass, k = 1), [1 + p + C, 1 + p]: that column, then the p x p Hessian sums.
pub(in crate::graph) fn glm_sums(
    s: &mut Builder,
    loss: nums_layout::batch::GlmLoss,
    x: NodeId,
    y: NodeId,
    w: NodeId,
    b: Option<NodeId>,
    hessian: bool,
) -> Result<NodeId, String> {
    let (mx, my, mw) = (s.meta(x).clone(), s.meta(y).clone(), s.meta(w).clone());
    // W's columns: a multinomial candidate has one per class.
    let columns = mw.shape.get(1).copied().unwrap_or(0);
    let classes = loss.classes() as u64;
    let k = columns / classes;
    let fits = mx.ndim() == 2
        && (my.shape == [mx.shape[0]] || my.shape == [mx.shape[0], 2])
        && mw.shape == [mx.shape[1], columns]
        && columns.is_multiple_of(classes)
        && mw.num_blocks() == 1
        && (!hessian || k == 1)
        && b.is_none_or(|b| s.meta(b).shape == [columns] && s.meta(b).num_blocks() == 1);
    if !fits {
        return Err(format!(
            "a model's sums over X of shape {}, y of shape {} at W of shape {}: the shapes do not agree",
            shape_str(&mx.shape),
            shape_str(&my.shape),
            shape_str(&mw.shape)
        ));
    }
    let mut block = my.shape.clone();
    block[0] = mx.block[0];
    let y = s.rechunk(y, block);
    let p = classes * (mx.shape[1] + b.is_some() as u64);
    let rows = 1 + p + nums_layout::batch::GLM_COUNTS;
    let cols = if hessian { 1 + p } else { k };
    let meta = ArrayMeta::new(vec![rows, cols], vec![rows, cols], DType::Float64);
    Ok(s.add(
        meta,
        NodeOp::GlmSums {
            loss,
            x,
            y,
            w,
            b,
            hessian,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parameter table (`crate::models::MODELS`, what the bindings read) names each
    /// model's keywords as its definition binds them.
    #[test]
    fn the_parameter_table_is_the_definitions() {
        assert_eq!(DEFS.len(), crate::models::MODELS.len());
        for (d, m) in DEFS.iter().zip(crate::models::MODELS) {
            assert_eq!(d.name, m.function);
            let names: Vec<&str> = m.params.iter().map(|(n, _)| *n).collect();
            // X, y, the parameters, then the data's sample_weight (an array, not a
            // parameter with a default).
            let (last, params) = d.params.split_last().unwrap();
            assert_eq!(params[..2], ["X", "y"], "{}", d.name);
            assert_eq!(params[2..], names[..], "{}", d.name);
            assert_eq!(*last, "sample_weight", "{}", d.name);
        }
    }
}
