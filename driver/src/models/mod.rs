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
//!   for K >= 3 classes the multinomial loss, mean(logsumexp(z) - z_y) + ||W||_F² / (2 C
//!   n), W of K x d and an intercept per class (sklearn's full parametrisation);
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
    /// Multinomial logistic regression over `classes` (3 or more) classes: the
    /// parameters are each class's coefficients and intercept, class after class.
    Multinomial {
        classes: u32,
    },
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
    pub const fn name(self) -> &'static str {
        match self {
            Solver::Newton => "newton",
            Solver::Lbfgs => "lbfgs",
            Solver::Direct => "direct",
        }
    }
}

/// Every name a fit's `solver` may be, with the solver it means: scikit-learn's
/// (`lbfgs`, `newton-cg`, `newton-cholesky`), the job file's `newton`, and NumS's (`bfgs`,
/// `irls`), so that code written for either runs unchanged.
pub const SOLVER_NAMES: &[(&str, Solver)] = &[
    ("lbfgs", Solver::Lbfgs),
    ("bfgs", Solver::Lbfgs),
    ("newton", Solver::Newton),
    ("newton-cg", Solver::Newton),
    ("newton-cholesky", Solver::Newton),
    ("irls", Solver::Newton),
];

impl Solver {
    /// The solver a `solver` name means ([`SOLVER_NAMES`]).
    pub fn parse(name: &str) -> Option<Solver> {
        SOLVER_NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, s)| s)
    }
}

/// A model parameter's default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamDefault {
    /// A float (`C`, `alpha`, `tol`).
    Number(f64),
    /// An int (`max_iter`).
    Int(i64),
    /// A flag (`fit_intercept`).
    Bool(bool),
    /// A name (`solver`, `penalty`).
    Str(&'static str),
}

/// scikit-learn's defaults, the one place they are written (the job language, the Rust
/// API and the Python estimators take them from here).
pub(crate) const DEFAULT_C: f64 = 1.0;
pub(crate) const DEFAULT_ALPHA: f64 = 1.0;
pub(crate) const DEFAULT_TOL: f64 = 1e-4;
pub(crate) const DEFAULT_MAX_ITER: u32 = 100;
pub(crate) const DEFAULT_SOLVER: Solver = Solver::Lbfgs;
/// The iterations a fit may be given (`max_iter`).
pub(crate) const MAX_ITER_RANGE: std::ops::RangeInclusive<i64> = 1..=100_000;

/// A model of the function table: its name and the keywords past `X` and `y`, each with
/// its default.
#[derive(Debug, Clone, Copy)]
pub struct ModelDef {
    /// The function's name (`logistic_regression`).
    pub function: &'static str,
    /// Each keyword and its default.
    pub params: &'static [(&'static str, ParamDefault)],
}

const TOL: (&str, ParamDefault) = ("tol", ParamDefault::Number(DEFAULT_TOL));
const MAX_ITER: (&str, ParamDefault) = ("max_iter", ParamDefault::Int(DEFAULT_MAX_ITER as i64));
const SOLVER: (&str, ParamDefault) = ("solver", ParamDefault::Str(DEFAULT_SOLVER.name()));
const INTERCEPT: (&str, ParamDefault) = ("fit_intercept", ParamDefault::Bool(true));

/// Every model and its parameters' defaults.
pub const MODELS: &[ModelDef] = &[
    ModelDef {
        function: "logistic_regression",
        params: &[
            ("penalty", ParamDefault::Str("l2")),
            ("C", ParamDefault::Number(DEFAULT_C)),
            SOLVER,
            TOL,
            MAX_ITER,
            INTERCEPT,
            ("n_classes", ParamDefault::Int(2)),
        ],
    },
    ModelDef {
        function: "linear_regression",
        params: &[INTERCEPT],
    },
    ModelDef {
        function: "ridge",
        params: &[("alpha", ParamDefault::Number(DEFAULT_ALPHA)), INTERCEPT],
    },
    ModelDef {
        function: "poisson_regression",
        params: &[
            ("alpha", ParamDefault::Number(DEFAULT_ALPHA)),
            SOLVER,
            TOL,
            MAX_ITER,
            INTERCEPT,
        ],
    },
];

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
    /// The L2 strength on the mean objective for `n` rows (with sample weights, `n` is
    /// their sum: scikit-learn's `sw_sum`).
    pub fn l2(&self, n: f64) -> f64 {
        match self.family {
            Family::Logistic | Family::Multinomial { .. } if self.penalty.is_infinite() => 0.0,
            Family::Logistic | Family::Multinomial { .. } => 1.0 / (self.penalty * n),
            Family::Poisson => self.penalty,
            // Half the mean squared error: alpha on the sum of squares is alpha / n here.
            Family::Linear => self.penalty / n,
        }
    }

    /// Parameters of a fit on `d` features: the coefficients, then the intercept (a
    /// multinomial fit's: those of each class, class after class).
    pub fn params(&self, d: usize) -> usize {
        self.classes() * (d + self.fit_intercept as usize)
    }

    /// The classes of a multinomial fit, 1 for the other models (one vector of
    /// parameters).
    pub fn classes(&self) -> usize {
        match self.family {
            Family::Multinomial { classes } => classes as usize,
            _ => 1,
        }
    }

    /// Logistic regression, binary or multinomial.
    pub fn logistic(&self) -> bool {
        matches!(self.family, Family::Logistic | Family::Multinomial { .. })
    }
}

/// What a pass evaluates: the model at `k` parameter vectors (loss and gradient sums at
/// each), or at one with the Hessian sums (Newton), both in one sweep ([`names::SUMS`]);
/// or the normal equations (least squares: the squared loss's Hessian and gradient sums
/// at 0, [X, 1]^T V [X, 1] and -[X, 1]^T V y with V the sample weights).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PassKind {
    Gradient { k: usize },
    Hessian,
    Normal,
}

/// The names of a pass program's parameters and outputs.
pub(crate) mod names {
    /// Coefficients: `[d, k]` (a Newton pass: k = 1); of a multinomial fit of K classes,
    /// `[d, K k]`, candidate j's class c in column j K + c.
    pub(crate) const W: &str = "w_";
    /// Intercepts: `[k]` (multinomial: `[K k]`, as W's columns).
    pub(crate) const B: &str = "b_";
    /// A pass's sums, [1 + p + C, k] (p = d + intercept, C the counts of the data,
    /// [`GlmCount`](nums_layout::batch::GlmCount)): row 0 the loss of each candidate,
    /// rows 1..=d the gradient of w, then (with an intercept) of b; a Newton pass's are
    /// [1 + p + C, 1 + p], the Hessian sums in rows and columns 1..=p.
    pub(crate) const SUMS: &str = "sums_";
}

/// The loss a pass sums in one sweep (`Kernel::GlmSums`): the model's.
pub(crate) fn loss(spec: &FitSpec) -> nums_layout::batch::GlmLoss {
    use nums_layout::batch::GlmLoss;
    match spec.family {
        Family::Logistic => GlmLoss::Logistic,
        Family::Multinomial { classes } => GlmLoss::Multinomial { classes },
        Family::Poisson => GlmLoss::Poisson,
        Family::Linear => GlmLoss::Squared,
    }
}

/// A short description of a fit for messages: `logistic_regression(solver='newton', C=1)`.
pub(crate) fn describe(spec: &FitSpec) -> String {
    let mut s = format!("{}(solver='{}'", spec.function, spec.solver.name());
    let _ = match spec.family {
        Family::Logistic => write!(s, ", C={}", spec.penalty),
        Family::Multinomial { classes } => write!(s, ", C={}, n_classes={classes}", spec.penalty),
        _ if spec.penalty != 0.0 => write!(s, ", alpha={}", spec.penalty),
        _ => Ok(()),
    };
    s + ")"
}
