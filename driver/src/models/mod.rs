//! Generalized linear models fitted to convergence, as scikit-learn defines them:
//! logistic regression (Newton or L-BFGS), linear regression, ridge and Poisson regression.
//!
//! A fit is an iteration ([`crate::iterate`]): each iteration is one pass over X and y
//! that the functions run (an LSHS-planned job, planned once), evaluating the model at the
//! parameters the driver sends inline; the pass returns sums (loss, gradient, and for
//! Newton the Hessian) and the driver — which holds only vectors of the feature size —
//! takes the step. The objectives are scikit-learn's, so the coefficients are its:
//!
//! - logistic: mean log-loss + ||w||² / (2 C n) (sklearn's `LogisticRegression`, l2);
//! - Poisson (log link): mean(exp(z) - y z) + alpha/2 ||w||² (sklearn's `PoissonRegressor`);
//! - linear / ridge: ||y - X w - b||² + alpha ||w||², solved from X^T X and X^T y in one pass;
//!
//! with z = X w + b; the intercept b is never penalised.

pub(crate) mod solver;

use std::fmt::Write;

/// Which model: its loss and how it is solved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Family {
    Logistic,
    Poisson,
    /// Least squares (`linear_regression`, and `ridge` with `alpha` > 0).
    Linear,
}

/// How the minimum is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Solver {
    /// Newton's method with the exact Hessian and a backtracking line search.
    Newton,
    /// L-BFGS (10 corrections) with a line search that evaluates several step sizes in one
    /// pass.
    Lbfgs,
    /// Normal equations from one pass (least squares).
    Direct,
}

impl Solver {
    /// The solver's job-file name.
    pub fn name(self) -> &'static str {
        match self {
            Solver::Newton => "newton",
            Solver::Lbfgs => "lbfgs",
            Solver::Direct => "direct",
        }
    }
}

/// The iterations `plan` assumes a fit of this solver takes: what the fits of this
/// project's benchmarks and tests took to converge on scaled data at the default `tol`
/// (BENCHMARKS.md, "Fits: projected against measured"). A fit may take more (an
/// ill-conditioned X, a tight `tol`), never more than `max_iter`.
pub(crate) const fn typical_iterations(solver: Solver) -> u32 {
    match solver {
        Solver::Newton => 6,
        Solver::Lbfgs => 12,
        Solver::Direct => 1,
    }
}

/// A model to fit, as the job language's call gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct FitSpec {
    /// The function called (`logistic_regression`, ...), for messages.
    pub function: &'static str,
    pub family: Family,
    pub solver: Solver,
    /// The L2 penalty: `C` for logistic (weaker with larger C; `inf` for none), `alpha`
    /// for ridge and Poisson.
    pub penalty: f64,
    pub tol: f64,
    pub max_iter: u32,
    pub fit_intercept: bool,
}

impl FitSpec {
    /// The L2 strength on the mean objective for `n` rows.
    pub fn l2(&self, n: u64) -> f64 {
        match self.family {
            Family::Logistic if self.penalty.is_infinite() => 0.0,
            Family::Logistic => 1.0 / (self.penalty * n as f64),
            Family::Poisson => self.penalty,
            // Half the mean squared error: alpha on the sum of squares is alpha / n here.
            Family::Linear => self.penalty / n as f64,
        }
    }

    /// Parameters of a fit on `d` features: the coefficients, then the intercept.
    pub fn params(&self, d: usize) -> usize {
        d + self.fit_intercept as usize
    }
}

/// What a pass evaluates: the model at `k` parameter vectors (loss and gradient sums at
/// each, in one sweep: [`names::SUMS`]), with the Hessian sums (Newton, `k` = 1), or the
/// normal equations (least squares).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PassKind {
    Gradient { k: usize },
    Hessian,
    Normal,
}

/// The names of a pass program's parameters and outputs.
pub(crate) mod names {
    /// Coefficients: `[d]` (Hessian pass) or `[d, k]` (gradient pass).
    pub(crate) const W: &str = "w_";
    /// Intercepts: `[1]` or `[k]`.
    pub(crate) const B: &str = "b_";
    pub(crate) const LOSS: &str = "loss_";
    pub(crate) const GW: &str = "gw_";
    pub(crate) const GB: &str = "gb_";
    pub(crate) const HWW: &str = "hww_";
    pub(crate) const HWB: &str = "hwb_";
    pub(crate) const HBB: &str = "hbb_";
    /// A gradient pass's sums, [1 + d (+ 1), k]: row 0 the loss of each candidate, rows
    /// 1..=d the gradient of w, then (with an intercept) of b.
    pub(crate) const SUMS: &str = "sums_";
    /// Least squares: X^T X, X^T y, column sums of X, sum of y.
    pub(crate) const XTX: &str = "xtx_";
    pub(crate) const XTY: &str = "xty_";
    pub(crate) const SX: &str = "sx_";
    pub(crate) const SY: &str = "sy_";
}

/// The job-language program of one pass over `X` ([n, d]) and `y` ([n]): `(name,
/// expression)` in order, and which of them are outputs.
pub(crate) fn program(
    spec: &FitSpec,
    kind: PassKind,
) -> (Vec<(String, String)>, Vec<&'static str>) {
    use names::*;
    let mut a: Vec<(String, String)> = Vec::new();
    let mut add = |n: &str, e: String| a.push((n.to_string(), e));
    let outputs: Vec<&'static str> = match kind {
        PassKind::Normal => {
            add(XTX, "X.T @ X".into());
            add(XTY, "X.T @ y".into());
            add(SX, "sum(X, axis=0)".into());
            add(SY, "sum(y)".into());
            vec![XTX, XTY, SX, SY]
        }
        // One node in one sweep (`loss`, `iterate` makes it): no expressions.
        PassKind::Gradient { .. } => vec![SUMS],
        PassKind::Hessian => {
            let b = if spec.fit_intercept {
                format!(" + {B}[0]")
            } else {
                String::new()
            };
            add("z_", format!("X @ {W}{b}"));
            link(spec, &mut add);
            add(GW, "X.T @ r_".into());
            add(HWW, "X.T @ (X * s_[:, None])".into());
            if spec.fit_intercept {
                add(GB, "sum(r_)".into());
                add(HWB, "X.T @ s_".into());
                add(HBB, "sum(s_)".into());
                vec![LOSS, GW, HWW, GB, HWB, HBB]
            } else {
                vec![LOSS, GW, HWW]
            }
        }
    };
    (a, outputs)
}

/// The model's mean (p_), residual (r_), Hessian weights (s_) and summed loss for the
/// linear predictor z_.
fn link(spec: &FitSpec, add: &mut impl FnMut(&str, String)) {
    match spec.family {
        Family::Logistic => {
            add("p_", "sigmoid(z_)".into());
            // log(1 + exp(z)) - y z, without overflow.
            add(
                names::LOSS,
                "sum(maximum(z_, 0) - z_ * y + log1p(exp(-abs(z_))))".into(),
            );
            add("s_", "p_ * (1 - p_)".into());
        }
        Family::Poisson => {
            add("p_", "exp(z_)".into());
            add(names::LOSS, "sum(p_ - z_ * y)".into());
            add("s_", "p_".into());
        }
        Family::Linear => {
            // Identity link: half the squared error (least squares by Newton).
            add("p_", "z_ * 1".into());
            add(names::LOSS, "0.5 * sum((z_ - y) ** 2)".into());
            add("s_", "z_ * 0 + 1".into());
        }
    }
    add("r_", "p_ - y".into());
}

/// The loss a gradient pass sums in one sweep (`Kernel::GlmSums`): the model's, as
/// [`link`] writes it for the Hessian pass.
pub(crate) fn loss(spec: &FitSpec) -> nums_layout::batch::GlmLoss {
    use nums_layout::batch::GlmLoss;
    match spec.family {
        Family::Logistic => GlmLoss::Logistic,
        Family::Poisson => GlmLoss::Poisson,
        Family::Linear => GlmLoss::Squared,
    }
}

/// The validation program run once before fitting: counts of labels the model cannot take
/// and of NaN in y (NaN in X shows as a NaN loss, then is located), and for logistic
/// regression of the labels 1 (a single class is refused, as scikit-learn does).
pub(crate) fn checks(spec: &FitSpec) -> Vec<(String, String)> {
    let bad = match spec.family {
        Family::Logistic => "sum((y != 0) & (y != 1) & ~isnan(y))",
        Family::Poisson => "sum(y < 0)",
        Family::Linear => "sum(y != y)",
    };
    let mut checks = vec![
        ("bady_".into(), bad.into()),
        ("nany_".into(), "sum(isnan(y))".into()),
        ("infy_".into(), "sum(isinf(y))".into()),
    ];
    if spec.family == Family::Logistic {
        checks.push(("onesy_".into(), "sum(y == 1)".into()));
    }
    checks
}

/// A short description of a fit for messages: `logistic_regression(solver='newton', C=1)`.
pub(crate) fn describe(spec: &FitSpec) -> String {
    let mut s = format!("{}(solver='{}'", spec.function, spec.solver.name());
    let _ = match spec.family {
        Family::Logistic => write!(s, ", C={}", spec.penalty),
        _ if spec.penalty != 0.0 => write!(s, ", alpha={}", spec.penalty),
        _ => Ok(()),
    };
    s + ")"
}
