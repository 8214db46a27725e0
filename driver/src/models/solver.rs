//! The driver's side of a fit: from the sums a pass returns to the next parameters to
//! evaluate. Pure (no I/O), so it is tested on in-memory data; the iteration engine feeds
//! it passes run by the functions.
//!
//! When a fit has converged is scikit-learn's rule, so that its `tol` means what it means
//! there and the defaults give its answers: the gradient's largest magnitude at most
//! `tol` (L-BFGS: scipy's `pgtol`, which scikit-learn sets to `tol`), and for Newton also
//! half the squared Newton decrement of the last step at most `tol` (scikit-learn's
//! `newton-cholesky`; the gradient alone stops Newton early on data whose Hessian is
//! small, 1.6% from the optimum at the defaults on nearly separable classes). A fit that
//! stops otherwise — at `max_iter`, or where no step lowers the loss — has not converged
//! and says why ([`Fitted::why_not`]); scipy's other stop, a relative decrease of the loss
//! below 64 eps, is not taken (it ended fits on badly scaled X far from the optimum,
//! "converged" with the gradient 0.038 against `tol` 1e-10).
//!
//! L-BFGS works in standardized coordinates: its first pass evaluates the Hessian at 0
//! (for logistic and Poisson regression a multiple of the Gram matrix of [X, 1]), from
//! which each column's mean and spread ([`Scaling`]); the quasi-Newton steps are taken in
//! the coordinates where every column is centred and of unit curvature, mapped back to
//! X's for each pass, so columns of scales from 1e-4 to 1e6 converge as evenly as
//! standardized data. Newton's method is invariant to scale; its Cholesky factorization
//! is of the Hessian equilibrated to a unit diagonal ([`solve_spd`]), so that only
//! linearly dependent columns are called singular, not columns of different scales.

use ndarray::{Array1, Array2};

use super::{FitSpec, PassKind, Solver};

/// The parameters a pass is to evaluate: one vector (Newton, least squares) or several
/// candidates of a line search (L-BFGS), each `[w..., b]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pass {
    pub kind: PassKind,
    pub thetas: Vec<Vec<f64>>,
}

/// What a pass returned, as sums over the rows (not yet divided by n).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sums {
    /// Loss sum per candidate.
    pub loss: Vec<f64>,
    /// Gradient sums per candidate, `[w..., b]`.
    pub grad: Vec<Vec<f64>>,
    /// Hessian sums (Newton, L-BFGS's first pass, and least squares: [X, 1]^T V [X, 1]),
    /// p x p.
    pub hess: Option<Array2<f64>>,
}

/// Why a fit stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The tolerance was met (converged).
    Tol,
    /// `max_iter` iterations without meeting the tolerance.
    MaxIter,
    /// Before the tolerance was met, no step lowered the loss (nor, where the loss no
    /// longer resolves a change, the gradient), or the loss stayed within its rounding
    /// for 20 iterations while the gradient wandered.
    Stalled,
}

/// A fit that ended: its parameters and how it went.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Fitted {
    /// `[w..., b]` (b when fit_intercept).
    pub theta: Vec<f64>,
    pub n_iter: u32,
    /// The tolerance was met: `stop` is [`Stop::Tol`].
    pub converged: bool,
    pub stop: Stop,
    /// The objective after each iteration.
    pub loss: Vec<f64>,
    /// The gradient's largest magnitude after each iteration.
    pub grad_max: Vec<f64>,
    /// Newton: half the squared Newton decrement of the last step (scikit-learn's second
    /// criterion); none for the other solvers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decrement: Option<f64>,
    /// Unless it converged, why not, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why_not: Option<String>,
}

/// The next thing to do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Next {
    Pass(Pass),
    Done(Fitted),
}

/// Why a fit cannot go on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum FitError {
    #[error(
        "the loss is not finite at iteration {iteration} ({what}): the data holds NaN or inf, or the fit diverged"
    )]
    NotFinite { iteration: u32, what: String },
    #[error(
        "LinAlgError: {message} at iteration {iteration} (the Hessian; X may have linearly dependent columns: add a penalty or drop them)"
    )]
    Singular { iteration: u32, message: String },
    #[error(
        "LinAlgError: {message}: X has linearly dependent columns (or a constant column beside the intercept), so without a penalty the minimum is not unique; add a penalty or drop them"
    )]
    Dependent { message: String },
    #[error(
        "the classes are linearly separable: without a penalty the coefficients grow without bound; give C a finite value"
    )]
    Separable,
    #[error(
        "the fit diverges: without a penalty {what}, so the loss has no minimum (the coefficients grew over the last {iterations} iterations while {how}); {hint}"
    )]
    Diverged {
        what: &'static str,
        iterations: usize,
        how: &'static str,
        hint: &'static str,
    },
}

/// L-BFGS's sufficient-decrease constant (Armijo).
const ARMIJO: f64 = 1e-4;
/// Newton's (scikit-learn's `sigma`, 2^-11): with the same halving and the same rule for
/// changes within the loss's rounding, its iterates are scikit-learn's `newton-cholesky`'s.
const NEWTON_ARMIJO: f64 = 1.0 / 2048.0;
/// L-BFGS's curvature constant (strong Wolfe).
const WOLFE: f64 = 0.9;
/// L-BFGS corrections kept.
const HISTORY: usize = 10;
/// Step sizes an L-BFGS pass evaluates at once, as fractions of the first.
const CANDIDATES: [f64; 4] = [1.0, 0.5, 0.25, 0.1];
/// The parameter vectors an L-BFGS line-search pass evaluates.
pub(crate) const LINE_SEARCH_STEPS: usize = CANDIDATES.len();
/// L-BFGS: passes of ten times shorter steps tried when none of a pass lowered the loss
/// (then once more from the gradient alone, the corrections dropped, as scipy does).
const LBFGS_RETRIES: u32 = 5;
/// Newton: the smallest fraction of the Newton step its line search tries (scikit-learn's
/// 21 halvings).
const NEWTON_MIN_STEP: f64 = 1.0 / (1u32 << 20) as f64;
/// A change of the loss within this many ulps of it is rounding (scikit-learn's Newton
/// line search): a step that makes no more is taken when it lowers the gradient.
const LOSS_ULPS: f64 = 16.0;
/// A fit whose loss has not changed beyond its rounding over this many iterations, while
/// its gradient did not halve, has stalled: a `tol` below what float64 resolves (steps
/// that lower the gradient are taken where the loss no longer shows a change, and the
/// gradient's rounding then wanders; a fit that converges needs at most 9 such steps to
/// go from there to tol = 1e-12, measured on badly scaled data).
const STALL_ITERS: usize = 20;
/// The iterations whose iterates [`Fit::diverging`] reads.
const DIVERGE_ITERS: usize = 4;
/// L-BFGS's first pass evaluates the Hessian (p x p sums, a syrk per block) for its
/// scaling when the parameters are at most this many; beyond, it works in X's own
/// coordinates (scale X first).
pub(crate) const SCALED_LBFGS_MAX_PARAMS: usize = 1024;

/// L-BFGS's standardized coordinates v of the parameters θ = T v: w_j = v_j / s_j and
/// b = v_b - Σ μ_j w_j, so that in v each column of X is centred (with an intercept) and
/// the objective's curvature at 0 along each coordinate is 1. T is triangular, so v, the
/// gradient T^T g and directions map back and forth exactly, and the fit is the same
/// problem: only the steps taken toward its minimum differ.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Scaling {
    /// Column means (0 where not centred, and without an intercept).
    mu: Vec<f64>,
    /// Column spreads, sqrt of the centred Hessian's diagonal (1 where it is 0).
    s: Vec<f64>,
    intercept: bool,
}

impl Scaling {
    /// From the mean Hessian (penalty included) at 0, where every row's weight is the
    /// same (logistic 1/4, Poisson 1): rows and columns `..d` X^T X c / n + l2 I, with an
    /// intercept bordered by X^T 1 c / n and c.
    pub(crate) fn from_hessian(h: &Array2<f64>, d: usize, intercept: bool) -> Scaling {
        let mut mu = vec![0.0; d];
        let mut s = vec![1.0; d];
        let hbb = if intercept { h[[d, d]] } else { 0.0 };
        for j in 0..d {
            let hjj = h[[j, j]];
            if !(hjj.is_finite() && hjj > 0.0) {
                continue;
            }
            s[j] = hjj.sqrt();
            if hbb > 0.0 && hbb.is_finite() {
                let m = h[[j, d]] / hbb;
                let centred = hjj - h[[j, d]] * m;
                // Centred only where the variance is well above the rounding of the
                // subtraction (a constant column, or a mean many orders above the
                // spread, keeps its raw scale).
                if m.is_finite() && centred > 1e-8 * hjj {
                    mu[j] = m;
                    s[j] = centred.sqrt();
                }
            }
        }
        Scaling { mu, s, intercept }
    }

    fn d(&self) -> usize {
        self.mu.len()
    }

    /// `f` applied to each class's parameters (one class but for multinomial fits, whose
    /// classes share X's coordinates).
    fn per_class(&self, x: &[f64], f: impl Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
        let p = self.d() + usize::from(self.intercept);
        if x.len() == p {
            return f(x);
        }
        x.chunks(p).flat_map(f).collect()
    }

    /// θ = T v, class by class.
    fn theta(&self, v: &[f64]) -> Vec<f64> {
        self.per_class(v, |v| self.theta1(v))
    }

    /// v = T^{-1} θ, class by class.
    fn v(&self, theta: &[f64]) -> Vec<f64> {
        self.per_class(theta, |t| self.v1(t))
    }

    /// T^T g, class by class.
    fn grad(&self, g: &[f64]) -> Vec<f64> {
        self.per_class(g, |g| self.grad1(g))
    }

    /// θ = T v (also a direction from a direction).
    fn theta1(&self, v: &[f64]) -> Vec<f64> {
        let d = self.d();
        let mut t: Vec<f64> = (0..d).map(|j| v[j] / self.s[j]).collect();
        if self.intercept {
            t.push(v[d] - (0..d).map(|j| self.mu[j] * t[j]).sum::<f64>());
        }
        t
    }

    /// v = T^{-1} θ (also a step from a step).
    fn v1(&self, theta: &[f64]) -> Vec<f64> {
        let d = self.d();
        let mut v: Vec<f64> = (0..d).map(|j| theta[j] * self.s[j]).collect();
        if self.intercept {
            v.push(theta[d] + (0..d).map(|j| self.mu[j] * theta[j]).sum::<f64>());
        }
        v
    }

    /// The gradient in v: T^T g.
    fn grad1(&self, g: &[f64]) -> Vec<f64> {
        let d = self.d();
        let gb = if self.intercept { g[d] } else { 0.0 };
        let mut out: Vec<f64> = (0..d)
            .map(|j| (g[j] - self.mu[j] * gb) / self.s[j])
            .collect();
        if self.intercept {
            out.push(gb);
        }
        out
    }
}

#[derive(Debug, Clone)]
enum State {
    /// Waiting for the first evaluation.
    Start,
    /// At `theta` (objective `f`, gradient `g`): trying `theta + alpha * dir`.
    Newton {
        theta: Vec<f64>,
        f: f64,
        g: Vec<f64>,
        dir: Vec<f64>,
        alpha: f64,
    },
    /// At `theta`: trying `theta + alpha * dir` for each of `alphas` (θ's coordinates);
    /// the corrections in `history` are in the scaled coordinates.
    Lbfgs {
        theta: Vec<f64>,
        f: f64,
        g: Vec<f64>,
        dir: Vec<f64>,
        alphas: Vec<f64>,
        history: Vec<(Vec<f64>, Vec<f64>)>,
        /// Passes of shorter steps tried so far from `theta`.
        retries: u32,
    },
}

/// One fit in progress.
#[derive(Debug, Clone)]
pub(crate) struct Fit {
    spec: FitSpec,
    /// The rows, or the sum of their sample weights ([`Fit::weigh`]): what the means
    /// divide by.
    n: f64,
    /// Sample weights weigh the rows.
    weighted: bool,
    d: usize,
    state: State,
    n_iter: u32,
    loss: Vec<f64>,
    grad_max: Vec<f64>,
    /// The parameters' norm after each iteration (as `loss`), and the length of the step
    /// that led there (none for the start).
    norms: Vec<f64>,
    steps: Vec<f64>,
    /// Newton: half the squared decrement g^T H^-1 g of the last step, at its start.
    decrement: Option<f64>,
    /// L-BFGS: the standardized coordinates (the identity without a first Hessian).
    scaling: Option<Scaling>,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn max_abs(a: &[f64]) -> f64 {
    a.iter().fold(0.0, |m, v| m.max(v.abs()))
}

fn l1(a: &[f64]) -> f64 {
    a.iter().map(|v| v.abs()).sum()
}

fn axpy(x: &[f64], alpha: f64, d: &[f64]) -> Vec<f64> {
    x.iter().zip(d).map(|(a, b)| a + alpha * b).collect()
}

fn sub(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x - y).collect()
}

/// The loss at a trial point changed by no more than its rounding: `f_new` within
/// [`LOSS_ULPS`] ulps of `f`.
fn within_rounding(f: f64, f_new: f64) -> bool {
    (f_new - f).abs() <= LOSS_ULPS * f64::EPSILON * f.abs()
}

impl Fit {
    /// A fit of `spec` on `n` rows of `d` features, and the first pass to run.
    pub(crate) fn start(spec: &FitSpec, n: u64, d: usize) -> (Fit, Pass) {
        let fit = Fit {
            spec: spec.clone(),
            n: n as f64,
            weighted: false,
            d,
            state: State::Start,
            n_iter: 0,
            loss: Vec::new(),
            grad_max: Vec::new(),
            norms: Vec::new(),
            steps: Vec::new(),
            decrement: None,
            scaling: None,
        };
        let theta0 = vec![0.0; spec.params(d)];
        (
            fit,
            Pass {
                kind: first_pass(spec, d),
                thetas: vec![theta0],
            },
        )
    }

    /// The rows are weighted by sample weights summing to `total` (read from the first
    /// pass, before its step): the means are weighted means, scikit-learn's objective.
    pub(crate) fn weigh(&mut self, total: f64) {
        self.n = total;
        self.weighted = true;
    }

    /// Parameter `i` is a coefficient (penalised), not an intercept: each class's
    /// parameters are its d coefficients, then its intercept.
    fn penalised(&self, i: usize) -> bool {
        i % (self.d + usize::from(self.spec.fit_intercept)) < self.d
    }

    /// The mean objective, its gradient (and Hessian) from the sums at `theta`.
    fn objective(&self, theta: &[f64], loss: f64, grad: &[f64]) -> (f64, Vec<f64>) {
        let n = self.n;
        let l2 = self.spec.l2(self.n);
        let ww: f64 = (theta.iter().enumerate())
            .filter(|&(i, _)| self.penalised(i))
            .map(|(_, w)| w * w)
            .sum();
        let f = loss / n + 0.5 * l2 * ww;
        let g = grad
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s / n
                    + if self.penalised(i) {
                        l2 * theta[i]
                    } else {
                        0.0
                    }
            })
            .collect();
        (f, g)
    }

    fn hessian(&self, h: &Array2<f64>) -> Array2<f64> {
        let l2 = self.spec.l2(self.n);
        let mut h = h / self.n;
        for i in (0..h.nrows()).filter(|&i| self.penalised(i)) {
            h[[i, i]] += l2;
        }
        h
    }

    /// A multinomial loss is flat along a vector added to every class's parameter j (the
    /// softmax is unchanged): for an intercept, or any parameter without a penalty, the
    /// Hessian is singular along u_j = (e_j, ..., e_j). The gradient is orthogonal to
    /// u_j (each row's residuals sum to 0 over the classes), so adding c u_j u_j^T (c
    /// the class's diagonal entry, of the Hessian's scale) changes no step but along
    /// u_j, where it is 0: Newton's steps keep the classes' sum where it started (0),
    /// as L-BFGS's do, and only other dependence (X's columns) is singular.
    fn without_flat_directions(&self, mut h: Array2<f64>) -> Array2<f64> {
        let classes = self.spec.classes();
        if classes == 1 {
            return h;
        }
        let p = self.d + usize::from(self.spec.fit_intercept);
        let penalised = self.spec.l2(self.n) != 0.0;
        for j in (0..p).filter(|&j| !(penalised && self.penalised(j))) {
            let c = h[[j, j]];
            for a in 0..classes {
                for b in 0..classes {
                    h[[a * p + j, b * p + j]] += c;
                }
            }
        }
        h
    }

    fn finite(&self, f: f64, g: &[f64], what: &str) -> Result<(), FitError> {
        if f.is_finite() && g.iter().all(|v| v.is_finite()) {
            Ok(())
        } else {
            Err(FitError::NotFinite {
                iteration: self.n_iter,
                what: what.to_string(),
            })
        }
    }

    /// Records an iterate: its objective, gradient, norm and the step from the last one.
    fn record(&mut self, theta: &[f64], f: f64, g: &[f64]) {
        self.loss.push(f);
        self.grad_max.push(max_abs(g));
        self.norms.push(dot(theta, theta).sqrt());
    }

    /// Records the length of the step from the last iterate, `from`, to `theta`.
    fn step_from(&mut self, from: &[f64], theta: &[f64]) {
        let d = sub(theta, from);
        self.steps.push(dot(&d, &d).sqrt());
    }

    /// Without a penalty, the loss of logistic or Poisson regression may have no minimum
    /// (separable classes; Poisson targets that are 0 wherever a direction of X is
    /// positive, or all 0): the iterates then run off while the gradient fades, and a
    /// "converged" answer is arbitrary. Read from the iterates: over the last
    /// [`DIVERGE_ITERS`] iterations the parameters' norm grew every time, and either the
    /// loss fell toward 0 by a steady fraction (the logistic loss of separable classes,
    /// the Poisson loss of all-zero targets) or they travelled at least half as far as
    /// over the iterations before (a steady pace, as when the loss levels off at a
    /// positive value along an unbounded direction). A fit that converges settles: its
    /// steps shrink geometrically (Newton's quadratically) and its loss stops falling.
    fn diverging(&self) -> Option<FitError> {
        let k = DIVERGE_ITERS;
        if self.spec.l2(self.n) != 0.0
            || self.spec.family == super::Family::Linear
            || self.norms.len() < k + 1
            || self.steps.len() < k
        {
            return None;
        }
        let norms = &self.norms[self.norms.len() - k - 1..];
        let loss = &self.loss[self.loss.len() - k - 1..];
        let growing = norms.windows(2).all(|w| w[1] > w[0]);
        let to_zero = loss.windows(2).all(|w| w[1] > 0.0 && w[1] <= 0.9 * w[0]);
        // The distance travelled over the last k iterations against the k before (a
        // fit that settles covers a geometrically shrinking one; L-BFGS's steps vary
        // from one iteration to the next, their sums less).
        let steps = &self.steps;
        let steady = steps.len() >= 2 * k && {
            let sum = |s: &[f64]| s.iter().sum::<f64>();
            let (before, last) = steps[steps.len() - 2 * k..].split_at(k);
            sum(last) >= 0.5 * sum(before)
        };
        if !(growing && (to_zero || steady)) {
            return None;
        }
        let logistic = self.spec.logistic();
        Some(FitError::Diverged {
            what: if logistic {
                "the classes are separable (or nearly: some rows lie on a separating hyperplane)"
            } else {
                "the targets are 0 wherever some direction of X (or the intercept) can be pushed down"
            },
            iterations: k,
            how: if to_zero {
                "the loss fell toward 0"
            } else {
                "they kept moving at a steady pace"
            },
            hint: if logistic {
                "give C a finite value"
            } else {
                "give alpha a positive value"
            },
        })
    }

    /// The loss has not changed beyond its rounding over the last [`STALL_ITERS`]
    /// iterations, nor has the gradient halved.
    fn stalled(&self) -> bool {
        let k = STALL_ITERS;
        let (loss, grad) = (&self.loss, &self.grad_max);
        loss.len() > k
            && loss[loss.len() - k - 1..]
                .windows(2)
                .all(|w| within_rounding(w[0], w[1]))
            && grad[grad.len() - 1] > 0.5 * grad[grad.len() - k - 1]
    }

    fn done(&self, theta: Vec<f64>, stop: Stop) -> Next {
        let grad = self.grad_max.last().copied().unwrap_or(f64::NAN);
        let tol = self.spec.tol;
        let gradient = if grad <= tol {
            format!("the largest gradient {grad:.3e} met tol = {tol:e}")
        } else {
            format!("the largest gradient is {grad:.3e} > tol = {tol:e}")
        };
        let decrement = match self.decrement {
            Some(d) if grad <= tol && d > tol => format!(
                ", but half the squared Newton decrement of the last step, {d:.3e}, did not"
            ),
            _ => String::new(),
        };
        let why_not = match stop {
            Stop::Tol => None,
            Stop::MaxIter => Some(format!(
                "it stopped at max_iter = {} iterations: {gradient}{decrement}",
                self.spec.max_iter
            )),
            Stop::Stalled => Some(format!(
                "it stalled at iteration {}: the loss no longer changes beyond its rounding \
                 and no step lowers the gradient further; {gradient}{decrement} (tol may be \
                 below what float64 resolves for this X)",
                self.n_iter
            )),
        };
        Next::Done(Fitted {
            theta,
            n_iter: self.n_iter,
            converged: stop == Stop::Tol,
            stop,
            loss: self.loss.clone(),
            grad_max: self.grad_max.clone(),
            decrement: self.decrement,
            why_not,
        })
    }

    /// Iterations done so far.
    pub(crate) fn n_iter(&self) -> u32 {
        self.n_iter
    }

    /// The objective after the last iteration.
    pub(crate) fn last_loss(&self) -> Option<f64> {
        self.loss.last().copied()
    }

    /// The largest gradient magnitude after the last iteration.
    pub(crate) fn last_grad_max(&self) -> Option<f64> {
        self.grad_max.last().copied()
    }

    /// Takes a pass's sums for the pass asked last; says what to do next.
    pub(crate) fn step(&mut self, pass: &Pass, sums: Sums) -> Result<Next, FitError> {
        let next = match self.spec.solver {
            Solver::Direct => self.direct(sums),
            Solver::Newton => self.newton(pass, sums),
            Solver::Lbfgs => self.lbfgs(pass, sums),
        };
        // A Hessian that turns singular, on iterates that run off, is the divergence (the
        // curvature fades along the unbounded direction).
        let next = match next {
            Err(e @ FitError::Singular { .. }) => {
                return Err(self.diverging().unwrap_or(e));
            }
            next => next?,
        };
        // Without a penalty, separable classes have no best fit: the loss goes to 0 while
        // the coefficients grow without bound, and any "converged" answer is arbitrary.
        // Proved as soon as the summed log-loss is below ln 2: then every row's is, so
        // every row is on its side of the boundary, strictly.
        // (Not with sample weights: a summed loss below ln 2 then bounds no single row's;
        // such a fit's iterates show the divergence, [`Fit::diverging`].)
        // (Multinomial too: every row's loss below ln 2 is its class's probability above
        // 1/2, the largest: every row classified right, and W scaled up lowers them all.)
        if self.spec.logistic()
            && !self.weighted
            && self.spec.l2(self.n) == 0.0
            && self
                .loss
                .last()
                .is_some_and(|&l| l * self.n < std::f64::consts::LN_2 * (1.0 - 1e-9))
        {
            return Err(FitError::Separable);
        }
        // A fit that settled, or stalled (a line search that finds nothing on iterates
        // that run off: the loss levels off along the unbounded direction), may be one
        // whose loss has no minimum.
        if let Next::Done(f) = &next
            && f.stop != Stop::MaxIter
            && let Some(e) = self.diverging()
        {
            return Err(e);
        }
        Ok(next)
    }

    /// Least squares from the normal equations: (A^T V A + alpha D) theta = A^T V y with
    /// A = [X, 1] (without an intercept, X), V the sample weights and D the identity on w
    /// only (the intercept is not penalised): the squared loss's Hessian sums and, negated,
    /// its gradient sums at theta = 0.
    fn direct(&mut self, sums: Sums) -> Result<Next, FitError> {
        let mut a = sums.hess.expect("a Normal pass's Hessian");
        let rhs = Array1::from_iter(sums.grad[0].iter().map(|g| -g));
        for i in 0..self.d {
            a[[i, i]] += self.spec.penalty;
        }
        self.n_iter = 1;
        let theta = solve_spd(&a, &rhs).map_err(|message| FitError::Singular {
            iteration: 1,
            message,
        })?;
        if theta.iter().any(|v| !v.is_finite()) {
            return Err(FitError::NotFinite {
                iteration: 1,
                what: "the coefficients".into(),
            });
        }
        // The loss of least squares is not needed for the fit; record the gradient's norm 0.
        self.loss.push(f64::NAN);
        self.grad_max.push(0.0);
        Ok(self.done(theta.to_vec(), Stop::Tol))
    }

    /// Newton's method with a backtracking line search (scikit-learn's `newton-cholesky`):
    /// each pass evaluates the loss, gradient and Hessian at one point; converged when
    /// the gradient's largest magnitude and half the squared Newton decrement of the step
    /// that led there are both at most `tol`.
    fn newton(&mut self, pass: &Pass, sums: Sums) -> Result<Next, FitError> {
        let theta_new = pass.thetas[0].clone();
        let (f_new, g_new) = self.objective(&theta_new, sums.loss[0], &sums.grad[0]);
        let h_new =
            self.without_flat_directions(self.hessian(sums.hess.as_ref().expect("a Hessian pass")));
        // Where the line search stands: accept the trial or shrink the step.
        if let State::Newton {
            theta,
            f,
            g,
            dir,
            alpha,
        } = &self.state
        {
            let slope = dot(g, dir);
            // Sufficient decrease, or (as scikit-learn's Newton solver) a change within the
            // loss's rounding with a smaller gradient: near the optimum the decrease
            // Armijo asks for is below what the loss can show.
            let lowered = f_new.is_finite()
                && g_new.iter().all(|v| v.is_finite())
                && (f_new <= f + NEWTON_ARMIJO * alpha * slope
                    || (within_rounding(*f, f_new) && l1(&g_new) < l1(g)));
            if !lowered {
                let alpha = alpha / 2.0;
                if alpha < NEWTON_MIN_STEP {
                    let theta = theta.clone();
                    return Ok(self.done(theta, Stop::Stalled));
                }
                let trial = axpy(theta, alpha, dir);
                let (theta, f, g, dir) = (theta.clone(), *f, g.clone(), dir.clone());
                self.state = State::Newton {
                    theta,
                    f,
                    g,
                    dir,
                    alpha,
                };
                return Ok(Next::Pass(Pass {
                    kind: PassKind::Hessian,
                    thetas: vec![trial],
                }));
            }
            // The decrement of the step just taken: d² = g^T H^-1 g = -g^T dir at its
            // start (dir the full Newton step, whatever fraction the line search took).
            self.decrement = Some(-0.5 * slope);
        }
        self.finite(f_new, &g_new, "at the start")?;
        if let State::Newton { theta, .. } = &self.state {
            self.n_iter += 1;
            let from = theta.clone();
            self.step_from(&from, &theta_new);
        }
        self.record(&theta_new, f_new, &g_new);
        // The start has no step behind it: as scikit-learn's, Newton takes at least one.
        if max_abs(&g_new) <= self.spec.tol && self.decrement.is_some_and(|d| d <= self.spec.tol) {
            return Ok(self.done(theta_new, Stop::Tol));
        }
        if self.stalled() {
            return Ok(self.done(theta_new, Stop::Stalled));
        }
        if self.n_iter >= self.spec.max_iter {
            return Ok(self.done(theta_new, Stop::MaxIter));
        }
        let step = solve_spd(&h_new, &Array1::from(g_new.clone())).map_err(|message| {
            FitError::Singular {
                iteration: self.n_iter,
                message,
            }
        })?;
        let dir: Vec<f64> = step.iter().map(|v| -v).collect();
        let trial = axpy(&theta_new, 1.0, &dir);
        self.state = State::Newton {
            theta: theta_new,
            f: f_new,
            g: g_new,
            dir,
            alpha: 1.0,
        };
        Ok(Next::Pass(Pass {
            kind: PassKind::Hessian,
            thetas: vec![trial],
        }))
    }

    /// The scaled coordinates' map, or the identity.
    fn to_v(&self, theta: &[f64]) -> Vec<f64> {
        match &self.scaling {
            Some(s) => s.v(theta),
            None => theta.to_vec(),
        }
    }

    fn to_theta(&self, v: &[f64]) -> Vec<f64> {
        match &self.scaling {
            Some(s) => s.theta(v),
            None => v.to_vec(),
        }
    }

    fn grad_v(&self, g: &[f64]) -> Vec<f64> {
        match &self.scaling {
            Some(s) => s.grad(g),
            None => g.to_vec(),
        }
    }

    /// L-BFGS's next direction from `g` (θ's coordinates) and the corrections (scaled
    /// coordinates): the two-loop recursion dir = -H g in the scaled coordinates, mapped
    /// back; and the first step's size (a unit move in the scaled coordinates when there
    /// is no curvature yet, as scipy's first step).
    fn lbfgs_direction(&self, g: &[f64], history: &[(Vec<f64>, Vec<f64>)]) -> (Vec<f64>, f64) {
        let mut q = self.grad_v(g);
        let mut a = Vec::with_capacity(history.len());
        for (s, y) in history.iter().rev() {
            let rho = 1.0 / dot(y, s);
            let ai = rho * dot(s, &q);
            q = axpy(&q, -ai, y);
            a.push((rho, ai));
        }
        let gamma = history.last().map_or(1.0, |(s, y)| dot(s, y) / dot(y, y));
        let mut r: Vec<f64> = q.iter().map(|v| gamma * v).collect();
        for ((s, y), (rho, ai)) in history.iter().zip(a.iter().rev()) {
            let b = rho * dot(y, &r);
            r = axpy(&r, ai - b, s);
        }
        let dir_v: Vec<f64> = r.iter().map(|v| -v).collect();
        let first = if history.is_empty() {
            (1.0 / dot(&dir_v, &dir_v).sqrt()).min(1.0)
        } else {
            1.0
        };
        (self.to_theta(&dir_v), first)
    }

    /// The line-search pass from `theta` along `dir`, steps `alphas`.
    fn lbfgs_pass(&mut self, state: State) -> Next {
        let State::Lbfgs {
            theta, dir, alphas, ..
        } = &state
        else {
            unreachable!("an L-BFGS state")
        };
        let thetas = alphas.iter().map(|&a| axpy(theta, a, dir)).collect();
        let k = alphas.len();
        self.state = state;
        Next::Pass(Pass {
            kind: PassKind::Gradient { k },
            thetas,
        })
    }

    fn lbfgs(&mut self, pass: &Pass, sums: Sums) -> Result<Next, FitError> {
        let evals: Vec<(f64, Vec<f64>)> = pass
            .thetas
            .iter()
            .zip(sums.loss.iter().zip(&sums.grad))
            .map(|(t, (l, g))| self.objective(t, *l, g))
            .collect();
        let (theta, f, g, history) = match std::mem::replace(&mut self.state, State::Start) {
            State::Start => {
                let (f, g) = evals[0].clone();
                self.finite(f, &g, "at the start")?;
                if let Some(h) = &sums.hess {
                    let h = self.hessian(h);
                    // Without a penalty, linearly dependent columns leave a line of minima
                    // (any point of which L-BFGS might stop at): refused, as by Newton.
                    // (A multinomial loss is flat along a vector added to every class: its
                    // first class's block, [X, 1]^T [X, 1] (K - 1) / K^2 at 0, tells.)
                    if self.spec.l2(self.n) == 0.0 {
                        let p = h.nrows() / self.spec.classes();
                        let block = h.slice(ndarray::s![..p, ..p]).to_owned();
                        solve_spd(&block, &Array1::zeros(p))
                            .map_err(|message| FitError::Dependent { message })?;
                    }
                    self.scaling = Some(Scaling::from_hessian(&h, self.d, self.spec.fit_intercept));
                }
                self.record(&pass.thetas[0], f, &g);
                (pass.thetas[0].clone(), f, g, Vec::new())
            }
            State::Lbfgs {
                theta,
                f,
                g,
                dir,
                alphas,
                mut history,
                retries,
            } => {
                let slope = dot(&g, &dir);
                // The largest step with sufficient decrease (or, where the loss no longer
                // resolves a change, a smaller gradient), preferring one that also meets
                // the curvature condition.
                let ok = |i: usize| {
                    let (fi, gi) = &evals[i];
                    fi.is_finite()
                        && gi.iter().all(|v| v.is_finite())
                        && (*fi <= f + ARMIJO * alphas[i] * slope
                            || (within_rounding(f, *fi) && l1(gi) < l1(&g)))
                };
                let wolfe = |i: usize| dot(&evals[i].1, &dir).abs() <= WOLFE * slope.abs();
                let pick = (0..alphas.len())
                    .find(|&i| ok(i) && wolfe(i))
                    .or_else(|| (0..alphas.len()).find(|&i| ok(i)));
                let Some(i) = pick else {
                    // None lowered the loss: try ten times shorter steps; then once from
                    // the gradient alone (the corrections may mislead); then give up.
                    if retries < LBFGS_RETRIES {
                        let alphas = alphas.iter().map(|a| a * 0.1).collect();
                        return Ok(self.lbfgs_pass(State::Lbfgs {
                            theta,
                            f,
                            g,
                            dir,
                            alphas,
                            history,
                            retries: retries + 1,
                        }));
                    }
                    if !history.is_empty() {
                        let (dir, first) = self.lbfgs_direction(&g, &[]);
                        let alphas = CANDIDATES.iter().map(|c| c * first).collect();
                        return Ok(self.lbfgs_pass(State::Lbfgs {
                            theta,
                            f,
                            g,
                            dir,
                            alphas,
                            history: Vec::new(),
                            retries: 0,
                        }));
                    }
                    return Ok(self.done(theta, Stop::Stalled));
                };
                let theta_new = pass.thetas[i].clone();
                let (f_new, g_new) = evals[i].clone();
                // The correction pair in the scaled coordinates.
                let s = self.to_v(&sub(&theta_new, &theta));
                let y = self.grad_v(&sub(&g_new, &g));
                if dot(&s, &y) > 1e-10 * dot(&y, &y).sqrt() * dot(&s, &s).sqrt() {
                    history.push((s, y));
                    if history.len() > HISTORY {
                        history.remove(0);
                    }
                }
                self.n_iter += 1;
                self.step_from(&theta, &theta_new);
                self.record(&theta_new, f_new, &g_new);
                (theta_new, f_new, g_new, history)
            }
            State::Newton { .. } => unreachable!("an L-BFGS fit is never in a Newton state"),
        };
        if max_abs(&g) <= self.spec.tol {
            return Ok(self.done(theta, Stop::Tol));
        }
        if self.stalled() {
            return Ok(self.done(theta, Stop::Stalled));
        }
        if self.n_iter >= self.spec.max_iter {
            return Ok(self.done(theta, Stop::MaxIter));
        }
        let (dir, first) = self.lbfgs_direction(&g, &history);
        let alphas = CANDIDATES.iter().map(|c| c * first).collect();
        Ok(self.lbfgs_pass(State::Lbfgs {
            theta,
            f,
            g,
            dir,
            alphas,
            history,
            retries: 0,
        }))
    }
}

/// The first pass of a fit of `spec` on `d` features: Newton's and (for its scaling, when
/// the parameters are few enough) L-BFGS's evaluate the Hessian too.
pub(crate) fn first_pass(spec: &FitSpec, d: usize) -> PassKind {
    match spec.solver {
        Solver::Direct => PassKind::Normal,
        Solver::Newton => PassKind::Hessian,
        Solver::Lbfgs if spec.params(d) <= SCALED_LBFGS_MAX_PARAMS => PassKind::Hessian,
        Solver::Lbfgs => PassKind::Gradient { k: 1 },
    }
}

/// x with A x = b for a symmetric positive-definite A, by Cholesky (LAPACK through the
/// function crate's kernels); an error with NumPy's LinAlgError text otherwise. A is
/// equilibrated first (D A D x' = D b, x = D x', D = diag(A)^-1/2), so that a pivot is
/// judged against the others on the scale of a correlation: columns of X of very
/// different scales are no reason to call A singular, linearly dependent ones are.
pub(crate) fn solve_spd(a: &Array2<f64>, b: &Array1<f64>) -> Result<Array1<f64>, String> {
    use nums_layout::Block;
    use nums_layout::batch::Kernel;
    let p = a.nrows();
    let run = |k: &Kernel, inputs: &[&Block], shape: &[usize]| {
        nums_function::linalg::run(k, inputs, shape).map_err(|e| {
            nums_function::linalg::linalg_error(&e)
                .map(str::to_string)
                .unwrap_or(e)
        })
    };
    // A zero (or negative, or NaN) diagonal: a column of zeros, singular.
    let scale: Vec<f64> = (0..p).map(|i| a[[i, i]]).collect();
    if scale.iter().any(|&v| !(v > 0.0 && v.is_finite())) {
        return Err("Singular matrix".into());
    }
    let r: Vec<f64> = scale.iter().map(|v| 1.0 / v.sqrt()).collect();
    let eq = Array2::from_shape_fn((p, p), |(i, j)| a[[i, j]] * r[i] * r[j]);
    let l = run(&Kernel::Cholesky, &[&Block::F64(eq.into_dyn())], &[p, p])?;
    // A pivot lost to rounding (linearly dependent columns) would give huge coefficients
    // that look like an answer: refused as NumPy refuses an exactly singular matrix.
    let lf = l.to_f64();
    if (0..p).any(|i| lf[[i, i]] * lf[[i, i]] <= 1e-11) {
        return Err("Singular matrix".into());
    }
    let rb = Array1::from_shape_fn(p, |i| b[i] * r[i]);
    let b = Block::F64(rb.insert_axis(ndarray::Axis(1)).into_dyn());
    let tri = |transpose| Kernel::TriangularSolve {
        left: true,
        lower: true,
        transpose,
        unit_diagonal: false,
    };
    let z = run(&tri(false), &[&l, &b], &[p, 1])?;
    let x = run(&tri(true), &[&l, &z], &[p, 1])?;
    Ok(x.to_f64().iter().zip(&r).map(|(v, r)| v * r).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::Family;

    /// The sums a pass would return, computed in memory, with sample weights `v`: each
    /// row's loss, residual and Hessian weight times its weight.
    fn evaluate(
        spec: &FitSpec,
        x: &Array2<f64>,
        y: &Array1<f64>,
        v: &Array1<f64>,
        pass: &Pass,
    ) -> Sums {
        let d = x.ncols();
        let mut sums = Sums::default();
        for theta in &pass.thetas {
            let w = Array1::from(theta[..d].to_vec());
            let b = if spec.fit_intercept { theta[d] } else { 0.0 };
            let z = x.dot(&w) + b;
            // Each row's mean response p, loss and Hessian weight s.
            let (p, loss, s): (Array1<f64>, Array1<f64>, Array1<f64>) = match spec.family {
                Family::Logistic => {
                    let p = z.mapv(|v| 1.0 / (1.0 + (-v).exp()));
                    let loss = Array1::from_iter(
                        z.iter()
                            .zip(y)
                            .map(|(z, y)| z.max(0.0) - z * y + (-z.abs()).exp().ln_1p()),
                    );
                    let s = p.mapv(|v| v * (1.0 - v));
                    (p, loss, s)
                }
                Family::Poisson => {
                    let p = z.mapv(f64::exp);
                    let loss = &p - &z * y;
                    (p.clone(), loss, p)
                }
                Family::Linear => {
                    let loss = (&z - y).mapv(|r| 0.5 * r * r);
                    (z.clone(), loss, Array1::ones(z.len()))
                }
                Family::Multinomial { .. } => unreachable!("not of one vector of parameters"),
            };
            let loss = (loss * v).sum();
            let r = (&p - y) * v;
            let s = s * v;
            let mut g = x.t().dot(&r).to_vec();
            if spec.fit_intercept {
                g.push(r.sum());
            }
            sums.loss.push(loss);
            sums.grad.push(g);
            if matches!(pass.kind, PassKind::Hessian | PassKind::Normal) {
                let p_ = spec.params(d);
                let mut h = Array2::zeros((p_, p_));
                let xs = x * &s.view().insert_axis(ndarray::Axis(1));
                h.slice_mut(ndarray::s![..d, ..d]).assign(&x.t().dot(&xs));
                if spec.fit_intercept {
                    let xts = x.t().dot(&s);
                    for i in 0..d {
                        h[[i, d]] = xts[i];
                        h[[d, i]] = xts[i];
                    }
                    h[[d, d]] = s.sum();
                }
                sums.hess = Some(h);
            }
        }
        sums
    }

    fn fit(spec: &FitSpec, x: &Array2<f64>, y: &Array1<f64>) -> Result<Fitted, FitError> {
        fit_weighted(spec, x, y, None)
    }

    /// A fit as `iterate` runs it: with sample weights, their sum (the first pass's
    /// count) is given before the first step.
    fn fit_weighted(
        spec: &FitSpec,
        x: &Array2<f64>,
        y: &Array1<f64>,
        v: Option<&Array1<f64>>,
    ) -> Result<Fitted, FitError> {
        let (mut f, mut pass) = Fit::start(spec, x.nrows() as u64, x.ncols());
        let ones = Array1::ones(y.len());
        if let Some(v) = v {
            f.weigh(v.sum());
        }
        loop {
            let sums = evaluate(spec, x, y, v.unwrap_or(&ones), &pass);
            match f.step(&pass, sums)? {
                Next::Pass(p) => pass = p,
                Next::Done(d) => return Ok(d),
            }
        }
    }

    /// Sample weights are scikit-learn's: a fit with weights 0, 1 and 2 is the fit of the
    /// rows repeated that many times, for every model and solver, with and without an
    /// intercept or a penalty (the penalty on the sum scale, so weight 2 is a duplicate
    /// row, not a weaker penalty).
    #[test]
    fn weights_are_repeated_rows() {
        let (x, y) = data(300, 3, 17);
        let v = Array1::from_iter((0..300).map(|i| (i % 3) as f64));
        let rows: Vec<usize> = (0..300)
            .flat_map(|i| std::iter::repeat_n(i, i % 3))
            .collect();
        let counts = y.mapv(|v| 2.0 * v + 1.0);
        let ylin = x.dot(&Array1::from(vec![0.5, -1.0, 2.0])) + &y;
        for (family, solver, penalty, y) in [
            (Family::Logistic, Solver::Newton, 1.0, &y),
            (Family::Logistic, Solver::Lbfgs, 1.0, &y),
            (Family::Logistic, Solver::Newton, f64::INFINITY, &y),
            (Family::Poisson, Solver::Newton, 0.5, &counts),
            (Family::Poisson, Solver::Lbfgs, 0.0, &counts),
            (Family::Linear, Solver::Direct, 2.0, &ylin),
            (Family::Linear, Solver::Direct, 0.0, &ylin),
        ] {
            for fi in [true, false] {
                let s = spec(family, solver, penalty, fi);
                let xr = x.select(ndarray::Axis(0), &rows);
                let yr = y.select(ndarray::Axis(0), &rows);
                let want = fit(&s, &xr, &yr).unwrap();
                let got = fit_weighted(&s, &x, y, Some(&v)).unwrap();
                assert!(got.converged, "{family:?} {solver:?} {got:?}");
                let dist = distance(&got.theta, &want.theta, &[]);
                assert!(
                    dist <= 1e-8,
                    "{family:?} {solver:?} {penalty} {fi}: {dist:e}"
                );
            }
        }
    }

    fn data(n: usize, d: usize, seed: u64) -> (Array2<f64>, Array1<f64>) {
        let mut s = seed;
        let mut next = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        };
        let x = Array2::from_shape_fn((n, d), |_| next());
        let w: Vec<f64> = (0..d)
            .map(|i| (i as f64 - d as f64 / 2.0) / d as f64)
            .collect();
        let z = x.dot(&Array1::from(w)) + 0.3;
        let y = z.mapv(|v| if v + 0.5 * next() > 0.0 { 1.0 } else { 0.0 });
        (x, y)
    }

    fn spec(family: Family, solver: Solver, penalty: f64, fit_intercept: bool) -> FitSpec {
        FitSpec {
            function: "test",
            family,
            solver,
            penalty,
            tol: 1e-10,
            max_iter: 200,
            fit_intercept,
        }
    }

    #[test]
    fn newton_and_lbfgs_find_the_same_logistic_optimum() {
        let (x, y) = data(500, 5, 7);
        for fi in [true, false] {
            let a = fit(&spec(Family::Logistic, Solver::Newton, 1.0, fi), &x, &y).unwrap();
            let b = fit(&spec(Family::Logistic, Solver::Lbfgs, 1.0, fi), &x, &y).unwrap();
            assert!(a.converged && b.converged);
            for (u, v) in a.theta.iter().zip(&b.theta) {
                assert!((u - v).abs() <= 1e-7 * (1.0 + u.abs()), "{a:?} {b:?}");
            }
            assert!(a.n_iter < 15, "Newton took {}", a.n_iter);
            // The losses go down.
            assert!(b.loss.windows(2).all(|w| w[1] <= w[0] + 1e-15));
        }
    }

    #[test]
    fn poisson_newton_matches_lbfgs() {
        let (x, y) = data(400, 4, 3);
        let y = y.mapv(|v| v * 2.0 + 1.0);
        let a = fit(&spec(Family::Poisson, Solver::Newton, 0.5, true), &x, &y).unwrap();
        let b = fit(&spec(Family::Poisson, Solver::Lbfgs, 0.5, true), &x, &y).unwrap();
        for (u, v) in a.theta.iter().zip(&b.theta) {
            assert!((u - v).abs() <= 1e-7 * (1.0 + u.abs()));
        }
    }

    #[test]
    fn least_squares_solves_the_normal_equations() {
        let (x, _) = data(300, 3, 5);
        let y = x.dot(&Array1::from(vec![1.0, -2.0, 0.5])) + 4.0;
        let f = fit(&spec(Family::Linear, Solver::Direct, 0.0, true), &x, &y).unwrap();
        for (u, v) in f.theta.iter().zip([1.0, -2.0, 0.5, 4.0]) {
            assert!((u - v).abs() < 1e-10, "{f:?}");
        }
    }

    #[test]
    fn max_iter_is_reported_not_hidden() {
        let (x, y) = data(300, 4, 9);
        let mut s = spec(Family::Logistic, Solver::Lbfgs, 1.0, true);
        s.max_iter = 2;
        let f = fit(&s, &x, &y).unwrap();
        assert!(!f.converged && f.n_iter == 2, "{f:?}");
        assert_eq!(f.stop, Stop::MaxIter);
        let why = f.why_not.unwrap();
        assert!(
            why.contains("max_iter = 2") && why.contains("> tol"),
            "{why}"
        );
    }

    fn scaled(x: &Array2<f64>, scales: &[f64]) -> Array2<f64> {
        x * &Array1::from(scales.to_vec())
    }

    /// max |a - b| / scale over the coefficients, each compared in the units of its
    /// column's scale (a coefficient of a column scaled by 1e6 is 1e-6 of the unscaled
    /// one), the intercept as it is.
    fn distance(a: &[f64], b: &[f64], scales: &[f64]) -> f64 {
        a.iter()
            .zip(b)
            .enumerate()
            .map(|(j, (u, v))| (u - v).abs() * scales.get(j).copied().unwrap_or(1.0))
            .fold(0.0, f64::max)
    }

    /// Columns of scales 1e6, 1e-4, 1 and 1: L-BFGS said "converged" in 7 iterations with
    /// the gradient at 0.038 against tol 1e-10 (it stopped where the loss decreased by
    /// less than 64 eps, scipy's ftol), the N(0, 1) column's coefficient 1e-12 instead of
    /// 0.17, and Newton called the Hessian singular. Without a penalty the scaled problem
    /// is the unscaled one reparametrized, so its optimum is known exactly from a fit of
    /// the unscaled X (coefficients divided by the scales); with one, both solvers agree.
    /// Each coefficient is compared in its column's units, within what tol allows: the
    /// gradient's size over the curvature, 1e-10 / 0.1 (tight enough that the old stop is
    /// 1e-2 away).
    #[test]
    fn badly_scaled_columns_converge_to_the_optimum() {
        let (x, _) = data(2000, 4, 11);
        let (_, y) = data(2000, 4, 12);
        // Labels that depend on every column.
        let z = x.dot(&Array1::from(vec![1.5, -1.0, 0.6, 0.8])) + 0.2;
        let y = Array1::from_shape_fn(2000, |i| {
            let u = (y[i] - 0.5) * 1.2;
            ((z[i] + u) > 0.0) as u8 as f64
        });
        let scales = [1e6, 1e-4, 1.0, 1.0];
        let xs = scaled(&x, &scales);
        let plain = fit(
            &spec(Family::Logistic, Solver::Newton, f64::INFINITY, true),
            &x,
            &y,
        )
        .unwrap()
        .theta;
        let want: Vec<f64> = plain
            .iter()
            .enumerate()
            .map(|(j, v)| v / scales.get(j).copied().unwrap_or(1.0))
            .collect();
        for solver in [Solver::Lbfgs, Solver::Newton] {
            let s = spec(Family::Logistic, solver, f64::INFINITY, true);
            let f = fit(&s, &xs, &y).unwrap_or_else(|e| panic!("{solver:?}: {e}"));
            assert!(f.converged && *f.grad_max.last().unwrap() <= 1e-10, "{f:?}");
            let dist = distance(&f.theta, &want, &scales);
            assert!(dist <= 1e-9, "{solver:?}: {dist:e} {:?} {want:?}", f.theta);
        }
        // With the penalty (C = 1), Newton (invariant to scale) and L-BFGS agree.
        let fits: Vec<Vec<f64>> = [Solver::Newton, Solver::Lbfgs]
            .into_iter()
            .map(|solver| {
                let f = fit(&spec(Family::Logistic, solver, 1.0, true), &xs, &y)
                    .unwrap_or_else(|e| panic!("{solver:?}: {e}"));
                assert!(f.converged, "{f:?}");
                f.theta
            })
            .collect();
        let dist = distance(&fits[0], &fits[1], &scales);
        assert!(dist <= 1e-9, "{dist:e} {fits:?}");
    }

    /// Newton's stop is scikit-learn's: the gradient at most tol and half the squared
    /// Newton decrement of the last step too. The gradient alone stopped it early where
    /// the Hessian is small (nearly separable classes: 1.6% from the optimum at the
    /// defaults on 400,000 rows); the extra step brings it 10 times closer at least
    /// (Newton's quadratic convergence: measured 16 and 30 times here).
    #[test]
    fn newton_stops_as_scikit_learn_does() {
        let (x, _) = data(2000, 4, 21);
        let (_, noise) = data(2000, 4, 22);
        let z = x.dot(&Array1::from(vec![12.0, -8.0, 6.0, 10.0])) + 1.0;
        let y = Array1::from_shape_fn(2000, |i| {
            ((z[i] + 4.0 * (noise[i] - 0.5)) > 0.0) as u8 as f64
        });
        for c in [100.0, 1e6] {
            let mut s = spec(Family::Logistic, Solver::Newton, c, true);
            let best = fit(&s, &x, &y).unwrap().theta;
            s.tol = 1e-4;
            let f = fit(&s, &x, &y).unwrap();
            assert!(f.converged && f.decrement.unwrap() <= 1e-4, "{f:?}");
            // Where the gradient alone would have stopped: the first iterate whose
            // gradient met tol.
            let early = f.grad_max.iter().position(|&g| g <= 1e-4).unwrap() as u32;
            assert!(early < f.n_iter, "C = {c}: {f:?}");
            s.max_iter = early;
            let e = fit(&s, &x, &y).unwrap();
            let err = |t: &[f64]| distance(t, &best, &[]);
            assert!(
                err(&f.theta) * 10.0 <= err(&e.theta),
                "C = {c}: {} against {} at iteration {early}",
                err(&f.theta),
                err(&e.theta)
            );
        }
    }

    /// A tol below what float64 resolves: the fit stalls (no step lowers the loss, nor
    /// the gradient where the loss no longer changes) and says so, not "converged".
    #[test]
    fn a_fit_that_cannot_meet_tol_is_not_converged() {
        let (x, y) = data(500, 3, 5);
        for solver in [Solver::Lbfgs, Solver::Newton] {
            let mut s = spec(Family::Logistic, solver, 1.0, true);
            s.tol = 1e-30;
            s.max_iter = 1000;
            let f = fit(&s, &x, &y).unwrap();
            assert!(!f.converged && f.stop == Stop::Stalled, "{solver:?} {f:?}");
            assert!(f.why_not.as_deref().unwrap().contains("stalled"), "{f:?}");
            // It got as far as float64 goes.
            assert!(*f.grad_max.last().unwrap() < 1e-12, "{f:?}");
        }
    }

    /// Without a penalty, linearly dependent columns (a duplicate, a constant column
    /// beside the intercept) have a line of minima: L-BFGS refuses them as Newton does
    /// (it returned one of the minima, as "converged"); with a penalty, the minimum is
    /// unique and both solvers find it.
    #[test]
    fn dependent_columns_need_a_penalty() {
        let (x, y) = data(400, 3, 8);
        let dup = ndarray::concatenate![ndarray::Axis(1), x, x.slice(ndarray::s![.., ..1])];
        let constant = ndarray::concatenate![ndarray::Axis(1), x, Array2::from_elem((400, 1), 3.0)];
        for x in [&dup, &constant] {
            for solver in [Solver::Lbfgs, Solver::Newton] {
                let e = refused(&spec(Family::Logistic, solver, f64::INFINITY, true), x, &y);
                assert!(
                    matches!(e, FitError::Dependent { .. } | FitError::Singular { .. }),
                    "{e}"
                );
                assert!(e.to_string().contains("linearly dependent columns"), "{e}");
            }
            let a = fit(&spec(Family::Logistic, Solver::Newton, 1.0, true), x, &y).unwrap();
            let b = fit(&spec(Family::Logistic, Solver::Lbfgs, 1.0, true), x, &y).unwrap();
            assert!(a.converged && b.converged);
            let dist = distance(&a.theta, &b.theta, &[]);
            assert!(dist <= 1e-8, "{dist:e}: {a:?} {b:?}");
        }
    }

    /// The Cholesky solve judges pivots on the equilibrated matrix: diagonal entries 12
    /// orders apart are solved (as NumPy's solve does), dependent columns refused.
    #[test]
    fn solve_spd_is_blind_to_scale_not_to_dependence() {
        let base = ndarray::array![[2.0, 0.5, 0.3], [0.5, 1.0, 0.2], [0.3, 0.2, 1.5]];
        let d = [1e6, 1e-4, 1.0];
        // A = D B D with B well conditioned: A x = D B u has x = D^-1 u (b is formed
        // without cancellation, so x is known to B's conditioning).
        let a = Array2::from_shape_fn((3, 3), |(i, j)| base[[i, j]] * d[i] * d[j]);
        let u = Array1::from(vec![1.0, -2.0, 0.5]);
        let b = base.dot(&u) * &Array1::from(d.to_vec());
        let x = solve_spd(&a, &b).unwrap();
        for ((x, u), d) in x.iter().zip(&u).zip(d) {
            assert!((x * d - u).abs() <= 1e-12 * u.abs(), "{x}");
        }
        let dep = ndarray::array![[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 1.0]];
        // (LAPACK's factorization stops at the zero pivot.)
        let e = solve_spd(&dep, &u).unwrap_err();
        assert!(
            e == "Singular matrix" || e.contains("not positive definite"),
            "{e}"
        );
        let near = ndarray::array![[1.0, 1.0 - 1e-13], [1.0 - 1e-13, 1.0]];
        assert_eq!(
            solve_spd(&near, &Array1::ones(2)).unwrap_err(),
            "Singular matrix"
        );
        let zero = ndarray::array![[1.0, 0.0], [0.0, 0.0]];
        assert_eq!(
            solve_spd(&zero, &Array1::ones(2)).unwrap_err(),
            "Singular matrix"
        );
    }

    fn refused(spec: &FitSpec, x: &Array2<f64>, y: &Array1<f64>) -> FitError {
        match fit(spec, x, y) {
            Ok(f) => panic!(
                "{:?} {:?} tol {} fitted: {f:?}",
                spec.family, spec.solver, spec.tol
            ),
            Err(e) => e,
        }
    }

    /// Without a penalty, data that have no best fit are refused, by every solver, with
    /// or without an intercept, at a loose or a tight tol: separable classes (the loss
    /// falls to 0 while the coefficients grow; these gave "converged" coefficients of 93
    /// and 288), classes separable but for rows on the boundary (the loss levels off at
    /// ln 2 per such row while the coefficients run off), Poisson targets all 0 or 0
    /// wherever a column is positive.
    #[test]
    fn fits_without_a_minimum_are_refused_by_their_iterates() {
        let (x, _) = data(400, 3, 4);
        let separable = x.map_axis(ndarray::Axis(1), |r| (r[0] + 0.5 * r[1] > 0.0) as u8 as f64);
        let mut xq = x.clone();
        let mut quasi = x.column(0).mapv(|v| (v > 0.0) as u8 as f64);
        for i in (0..400).step_by(10) {
            xq[[i, 0]] = 0.0;
            quasi[i] = (i % 20 == 0) as u8 as f64;
        }
        for solver in [Solver::Newton, Solver::Lbfgs] {
            for tol in [1e-4, 1e-10] {
                for fi in [true, false] {
                    let mut s = spec(Family::Logistic, solver, f64::INFINITY, fi);
                    s.tol = tol;
                    let e = refused(&s, &x, &separable);
                    assert!(
                        matches!(e, FitError::Separable | FitError::Diverged { .. }),
                        "{e}"
                    );
                    // The loss of quasi-separable classes levels off, and its gradient
                    // fades as the coefficients grow: at a loose tol the fit may stop
                    // first, as scikit-learn's does.
                    if tol < 1e-6 {
                        let e = refused(&s, &xq, &quasi);
                        assert!(
                            matches!(e, FitError::Diverged { .. }),
                            "{solver:?} {fi}: {e}"
                        );
                    }
                }
                let mut s = spec(Family::Poisson, solver, 0.0, true);
                s.tol = tol;
                let zeros = Array1::zeros(400);
                assert!(matches!(refused(&s, &x, &zeros), FitError::Diverged { .. }));
                // Counts where column 0 is 0, none where it is positive: pushing its
                // coefficient down lowers the loss for ever (as for quasi-separable
                // classes, a loose tol may stop first).
                if tol < 1e-6 {
                    let mut xz = x.clone();
                    let y = Array1::from_shape_fn(400, |i| {
                        if i % 2 == 0 {
                            1.0 + (i % 3) as f64
                        } else {
                            0.0
                        }
                    });
                    for i in 0..400 {
                        xz[[i, 0]] = if i % 2 == 0 {
                            0.0
                        } else {
                            x[[i, 0]].abs() + 0.1
                        };
                    }
                    let e = refused(&s, &xz, &y);
                    assert!(matches!(e, FitError::Diverged { .. }), "{e}");
                }
            }
        }
    }

    /// Data that have a best fit are fitted without a penalty, the solvers agreeing:
    /// overlapping classes, classes separable but for a few rows near the boundary (large
    /// coefficients, finite), Poisson counts.
    #[test]
    fn fits_with_a_minimum_converge_without_a_penalty() {
        let (x, overlapping) = data(400, 3, 6);
        // Separable but for 4 rows repeated with the other label: 4 points in general
        // position, each of both classes, that no hyperplane (even through them) puts on
        // its sides; the optimum is finite, its coefficients large.
        let xn = ndarray::concatenate![ndarray::Axis(0), x, x.slice(ndarray::s![..4, ..])];
        let mut near = xn.column(0).mapv(|v| (v > 0.0) as u8 as f64);
        for i in 400..404 {
            near[i] = 1.0 - near[i - 400];
        }
        let counts = x.map_axis(ndarray::Axis(1), |r| (2.0 + r[0] - r[1]).floor().max(0.0));
        for (family, x, y) in [
            (Family::Logistic, &x, &overlapping),
            (Family::Logistic, &xn, &near),
            (Family::Poisson, &x, &counts),
        ] {
            for tol in [1e-4, 1e-10] {
                let penalty = if family == Family::Logistic {
                    f64::INFINITY
                } else {
                    0.0
                };
                let mut fits = vec![];
                for solver in [Solver::Newton, Solver::Lbfgs] {
                    let mut s = spec(family, solver, penalty, true);
                    s.tol = tol;
                    let f = fit(&s, x, y)
                        .unwrap_or_else(|e| panic!("{family:?} {solver:?} {tol}: {e}"));
                    assert!(f.converged, "{f:?}");
                    fits.push(f.theta);
                }
                let scale = fits[0].iter().fold(1.0, |m: f64, v| m.max(v.abs()));
                for (u, v) in fits[0].iter().zip(&fits[1]) {
                    let rtol = if tol < 1e-6 { 1e-6 } else { 1e-1 };
                    assert!((u - v).abs() <= rtol * scale, "{family:?} {tol}: {fits:?}");
                }
            }
        }
    }
}
