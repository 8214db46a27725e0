//! Models as scikit-learn's estimators over the API's lazy arrays: builder-style options,
//! `fit(&X, &y)` computes the same `logistic_regression(...)` and friends as the job
//! language (so the same iteration engine) and returns the coefficients with how the fit
//! went; predictions are lazy arrays.
//!
//! ```
//! # use nums_cloud::api::{Session, models::{LogisticRegression, Solver}};
//! # fn main() -> Result<(), nums_cloud::Error> {
//! # let dir = std::env::temp_dir().join("nums-cloud-doc-models");
//! # let s = Session::new(&format!("file://{}", dir.display()))?
//! #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
//! let x = s.random_normal(&[4000, 3], 1);
//! let y = x.matmul(&s.from_ndarray(ndarray::array![1.0, -2.0, 0.5])).gt(0.0).astype(nums_cloud::DType::Float64);
//! let fit = LogisticRegression::new().solver(Solver::Newton).c(10.0).fit_blocking(&x, &y)?;
//! assert!(fit.converged && fit.coef.len() == 3 && fit.coef[1] < 0.0);
//! let p = fit.predict_proba(&x).mean(None).compute_blocking::<f64>()?; // a lazy array
//! assert!(p.sum() > 0.3 && p.sum() < 0.7);
//! # Ok(())
//! # }
//! ```

use super::{Arg, Array, Error, Session, blocking};
use crate::models::{DEFAULT_ALPHA, DEFAULT_C, DEFAULT_MAX_ITER, DEFAULT_SOLVER, DEFAULT_TOL};
pub use crate::models::{MODELS, ModelDef, ParamDefault, SOLVER_NAMES, Solver};

/// A fitted model: scikit-learn's `coef_` and `intercept_`, and how the fit went.
#[derive(Debug, Clone)]
pub struct FitResult {
    /// One coefficient per column of X; a multinomial fit's, a row of them per class,
    /// class after class (`classes` x d, row-major: scikit-learn's `coef_`).
    pub coef: Vec<f64>,
    /// 0 when fitted without an intercept; a multinomial fit's: its first class's.
    pub intercept: f64,
    /// One intercept per class (one for the models of one vector of coefficients; 0s
    /// without an intercept): scikit-learn's `intercept_`.
    pub intercepts: Vec<f64>,
    /// The classes of a multinomial fit (rows of `coef`); 1 for the other models.
    pub classes: usize,
    /// Iterations (1 for least squares).
    pub n_iter: u32,
    /// Whether the fit met its tolerance (scikit-learn's: the gradient's largest magnitude
    /// at most `tol`, and for Newton half the squared Newton decrement of the last step);
    /// a fit that did not is still returned, as scikit-learn's is (the Python estimators
    /// warn with its `ConvergenceWarning`), and `why_not` says why.
    pub converged: bool,
    /// Unless it converged, why not: stopped at `max_iter`, or stalled (no step lowers the
    /// loss) before the tolerance was met, with the gradient it stopped at.
    pub why_not: Option<String>,
    /// The gradient's largest magnitude where the fit stopped (least squares: 0).
    pub grad_max: f64,
    /// The objective after each iteration (least squares: not computed, NaN).
    pub loss: Vec<f64>,
    /// The link's inverse applied to `X @ coef + intercept` by `predict`.
    link: Link,
    session: Session,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Link {
    Logit,
    Log,
    Identity,
}

impl FitResult {
    /// `X @ coef + intercept`, lazy; a multinomial fit's, `X @ coef.T + intercepts`
    /// ([n, classes]).
    pub fn decision_function(&self, x: &Array) -> Array {
        if self.classes > 1 {
            let k = self.classes;
            let d = self.coef.len() / k;
            let w = ndarray::Array2::from_shape_vec((k, d), self.coef.clone())
                .expect("classes x d coefficients");
            let w = self.session.from_ndarray(w.t().to_owned());
            let b = self
                .session
                .from_ndarray(ndarray::Array1::from(self.intercepts.clone()));
            return x.matmul(&w) + &b;
        }
        let w = self
            .session
            .from_ndarray(ndarray::Array1::from(self.coef.clone()));
        x.matmul(&w) + self.intercept
    }

    /// The model's mean response: probabilities (logistic; multinomial: of each class),
    /// expected counts (Poisson), or values (least squares), lazy.
    pub fn predict(&self, x: &Array) -> Array {
        match self.link {
            Link::Logit => self.predict_proba(x),
            Link::Log => self.decision_function(x).exp(),
            Link::Identity => self.decision_function(x),
        }
    }

    /// Logistic regression's probability of class 1 for each row, lazy; a multinomial
    /// fit's of each class ([n, classes], the softmax of each row).
    pub fn predict_proba(&self, x: &Array) -> Array {
        let z = self.decision_function(x);
        if self.classes == 1 {
            return z.sigmoid();
        }
        let n = z.shape().map_or(0, |s| s[0]);
        let column = |a: Array| a.reshape(&[n, 1]);
        let e = (&z - column(z.max(Some(&[1])))).exp();
        &e / column(e.sum(Some(&[1])))
    }
}

/// The options every estimator shares.
#[derive(Debug, Clone)]
struct Options {
    solver: Solver,
    tol: f64,
    max_iter: u32,
    fit_intercept: bool,
    sample_weight: Option<Array>,
}

impl Options {
    /// The keywords of an iterative fit.
    fn iterative(&self) -> Vec<(&'static str, Arg)> {
        let mut kw = vec![
            ("solver", Arg::Str(self.solver.name().to_string())),
            ("tol", Arg::Float(self.tol)),
            ("max_iter", Arg::Int(self.max_iter as i64)),
        ];
        kw.extend(self.data());
        kw
    }

    /// The keywords every fit takes: `fit_intercept`, and the sample weights if given.
    fn data(&self) -> Vec<(&'static str, Arg)> {
        let mut kw = vec![("fit_intercept", Arg::Bool(self.fit_intercept))];
        if let Some(w) = &self.sample_weight {
            kw.push(("sample_weight", Arg::Array(w.clone())));
        }
        kw
    }
}

impl Default for Options {
    /// scikit-learn's defaults.
    fn default() -> Self {
        Options {
            solver: DEFAULT_SOLVER,
            tol: DEFAULT_TOL,
            max_iter: DEFAULT_MAX_ITER,
            fit_intercept: true,
            sample_weight: None,
        }
    }
}

/// Fits the table's model `function` ([`MODELS`]: `logistic_regression`, ...) to `x`
/// and `y` with keywords as the job language takes them, which decides their defaults,
/// ranges and solver names: how a binding fits, with no rules of its own.
pub async fn fit_model(
    function: &str,
    x: &Array,
    y: &Array,
    kwargs: &[(&str, Arg)],
) -> Result<FitResult, Error> {
    let link = match function {
        "logistic_regression" => Link::Logit,
        "poisson_regression" => Link::Log,
        "linear_regression" | "ridge" => Link::Identity,
        other => {
            let names: Vec<&str> = MODELS.iter().map(|m| m.function).collect();
            return Err(Error::Refused {
                raises: crate::PyException::ValueError,
                message: format!("{other:?} is not a model: one of {}", names.join(", ")),
            });
        }
    };
    fit(x, y, function, kwargs, link).await
}

/// Fits `f(x, y, kwargs)` and reads back what the fit did.
async fn fit(
    x: &Array,
    y: &Array,
    f: &str,
    kwargs: &[(&str, Arg)],
    link: Link,
) -> Result<FitResult, Error> {
    let s = x.session().clone();
    let w = s.call_array(f, &[x.into(), y.into()], kwargs);
    w.check()?;
    let theta = w.compute::<f64>().await?;
    let fitted = s.fitted(&w).ok_or_else(|| Error::Other {
        message: "the fit reported nothing".into(),
    })?;
    let d = x.shape()?[1];
    // [coef..., intercept], or a row of them per class (multinomial).
    let classes = if theta.ndim() == 2 {
        theta.shape()[0]
    } else {
        1
    };
    let theta: Vec<f64> = theta.iter().copied().collect();
    let p = theta.len() / classes;
    let (mut coef, mut intercepts) = (Vec::new(), Vec::new());
    for row in theta.chunks(p) {
        coef.extend_from_slice(&row[..d]);
        intercepts.push(row.get(d).copied().unwrap_or(0.0));
    }
    Ok(FitResult {
        coef,
        intercept: intercepts[0],
        intercepts,
        classes,
        n_iter: fitted.n_iter,
        converged: fitted.converged,
        why_not: fitted.why_not,
        grad_max: fitted.grad_max.last().copied().unwrap_or(f64::NAN),
        loss: fitted.loss,
        link,
        session: s,
    })
}

macro_rules! estimator_common {
    ($t:ident) => {
        impl Default for $t {
            fn default() -> Self {
                Self::new()
            }
        }

        impl $t {
            /// The tolerance on the gradient's largest magnitude.
            pub fn tol(mut self, tol: f64) -> Self {
                self.o.tol = tol;
                self
            }

            /// The most iterations the fit may take.
            pub fn max_iter(mut self, n: u32) -> Self {
                self.o.max_iter = n;
                self
            }

            /// Whether to fit an intercept (not penalised).
            pub fn fit_intercept(mut self, yes: bool) -> Self {
                self.o.fit_intercept = yes;
                self
            }

            /// Sample weights ([n], not negative): each row's loss counts that many
            /// times, as scikit-learn's `fit(X, y, sample_weight)`.
            pub fn sample_weight(mut self, w: &Array) -> Self {
                self.o.sample_weight = Some(w.clone());
                self
            }

            /// [`Self::fit`] for code that is not async.
            pub fn fit_blocking(&self, x: &Array, y: &Array) -> Result<FitResult, Error> {
                blocking::block_on(self.fit(x, y))?
            }
        }
    };
}

/// scikit-learn's `LogisticRegression` (L2 penalty; binary labels 0 and 1, or the
/// multinomial model of [`Self::n_classes`] classes).
#[derive(Debug, Clone)]
pub struct LogisticRegression {
    c: f64,
    classes: u32,
    o: Options,
}

impl LogisticRegression {
    /// scikit-learn's defaults: `C` 1, L-BFGS, `tol` 1e-4, `max_iter` 100, an intercept,
    /// two classes.
    pub fn new() -> Self {
        LogisticRegression {
            c: DEFAULT_C,
            classes: 2,
            o: Options::default(),
        }
    }

    /// The inverse penalty strength (`f64::INFINITY`: no penalty).
    pub fn c(mut self, c: f64) -> Self {
        self.c = c;
        self
    }

    /// Newton's method or L-BFGS.
    pub fn solver(mut self, solver: Solver) -> Self {
        self.o.solver = solver;
        self
    }

    /// `k` >= 3 classes: the multinomial model, labels the class indices 0..k.
    pub fn n_classes(mut self, k: u32) -> Self {
        self.classes = k;
        self
    }

    /// Fits the model to `x` ([n, d]) and labels `y` ([n], 0 and 1; or the class indices
    /// 0..k of [`Self::n_classes`]).
    pub async fn fit(&self, x: &Array, y: &Array) -> Result<FitResult, Error> {
        let mut kw = vec![
            ("C", Arg::Float(self.c)),
            ("n_classes", Arg::Int(i64::from(self.classes))),
        ];
        kw.extend(self.o.iterative());
        fit(x, y, "logistic_regression", &kw, Link::Logit).await
    }
}
estimator_common!(LogisticRegression);

/// scikit-learn's `PoissonRegressor` (log link, L2 penalty `alpha`).
#[derive(Debug, Clone)]
pub struct PoissonRegression {
    alpha: f64,
    o: Options,
}

impl PoissonRegression {
    /// scikit-learn's defaults: `alpha` 1, L-BFGS, `tol` 1e-4, `max_iter` 100, an intercept.
    pub fn new() -> Self {
        PoissonRegression {
            alpha: DEFAULT_ALPHA,
            o: Options::default(),
        }
    }

    /// The L2 penalty strength.
    pub fn alpha(mut self, alpha: f64) -> Self {
        self.alpha = alpha;
        self
    }

    /// Newton's method or L-BFGS.
    pub fn solver(mut self, solver: Solver) -> Self {
        self.o.solver = solver;
        self
    }

    /// Fits the model to `x` ([n, d]) and counts `y` ([n], not negative).
    pub async fn fit(&self, x: &Array, y: &Array) -> Result<FitResult, Error> {
        let mut kw = vec![("alpha", Arg::Float(self.alpha))];
        kw.extend(self.o.iterative());
        fit(x, y, "poisson_regression", &kw, Link::Log).await
    }
}
estimator_common!(PoissonRegression);

/// scikit-learn's `Ridge` (`alpha` 0: `LinearRegression`), from the normal equations in
/// one pass.
#[derive(Debug, Clone)]
pub struct Ridge {
    alpha: f64,
    o: Options,
}

/// scikit-learn's `LinearRegression`: a [`Ridge`] without a penalty.
pub type LinearRegression = Ridge;

impl Ridge {
    /// `alpha` 1, as scikit-learn's `Ridge`; `.alpha(0.0)` is `LinearRegression`.
    pub fn new() -> Self {
        Ridge {
            alpha: DEFAULT_ALPHA,
            o: Options::default(),
        }
    }

    /// The L2 penalty strength.
    pub fn alpha(mut self, alpha: f64) -> Self {
        self.alpha = alpha;
        self
    }

    /// Fits the model to `x` ([n, d]) and `y` ([n]).
    pub async fn fit(&self, x: &Array, y: &Array) -> Result<FitResult, Error> {
        let mut kw = vec![("alpha", Arg::Float(self.alpha))];
        kw.extend(self.o.data());
        fit(x, y, "ridge", &kw, Link::Identity).await
    }
}
estimator_common!(Ridge);
