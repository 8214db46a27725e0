//! The driver's side of a fit: from the sums a pass returns to the next parameters to
//! evaluate. Pure (no I/O), so it is tested on in-memory data; the iteration engine feeds
//! it passes run by the functions.

use ndarray::{Array1, Array2};

use super::{FitSpec, PassKind, Solver};

/// The parameters a pass is to evaluate: one vector (Newton, least squares) or several
/// candidates of a line search (L-BFGS), each `[w..., b]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pass {
    pub kind: PassKind,
    pub thetas: Vec<Vec<f64>>,
}

/// Least squares' sums: X^T X, X^T y, the column sums of X and the sum of y.
pub(crate) type Normal = (Array2<f64>, Array1<f64>, Array1<f64>, f64);

/// What a pass returned, as sums over the rows (not yet divided by n).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sums {
    /// Loss sum per candidate.
    pub loss: Vec<f64>,
    /// Gradient sums per candidate, `[w..., b]`.
    pub grad: Vec<Vec<f64>>,
    /// Hessian sums (Newton), p x p.
    pub hess: Option<Array2<f64>>,
    /// Least squares: X^T X, X^T y, column sums of X, sum of y.
    pub normal: Option<Normal>,
}

/// A fit that ended: its parameters and how it went.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Fitted {
    /// `[w..., b]` (b when fit_intercept).
    pub theta: Vec<f64>,
    pub n_iter: u32,
    pub converged: bool,
    /// The objective after each iteration.
    pub loss: Vec<f64>,
    /// The gradient's largest magnitude after each iteration.
    pub grad_max: Vec<f64>,
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
    #[error("the line search found no step that lowers the loss at iteration {iteration}")]
    LineSearch { iteration: u32 },
}

/// Newton's sufficient-decrease constant (Armijo).
const ARMIJO: f64 = 1e-4;
/// L-BFGS's curvature constant (strong Wolfe).
const WOLFE: f64 = 0.9;
/// L-BFGS corrections kept.
const HISTORY: usize = 10;
/// Step sizes an L-BFGS pass evaluates at once, as fractions of the first.
const CANDIDATES: [f64; 4] = [1.0, 0.5, 0.25, 0.1];
/// The parameter vectors an L-BFGS line-search pass evaluates.
pub(crate) const LINE_SEARCH_STEPS: usize = CANDIDATES.len();
/// scipy's relative-decrease stop for L-BFGS (`ftol`, as scikit-learn sets it).
const FTOL: f64 = 64.0 * f64::EPSILON;
/// The iterations whose iterates [`Fit::diverging`] reads.
const DIVERGE_ITERS: usize = 4;

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
    Lbfgs {
        theta: Vec<f64>,
        f: f64,
        g: Vec<f64>,
        dir: Vec<f64>,
        alphas: Vec<f64>,
        history: Vec<(Vec<f64>, Vec<f64>)>,
    },
}

/// One fit in progress.
#[derive(Debug, Clone)]
pub(crate) struct Fit {
    spec: FitSpec,
    n: u64,
    d: usize,
    state: State,
    n_iter: u32,
    loss: Vec<f64>,
    grad_max: Vec<f64>,
    /// The parameters' norm after each iteration (as `loss`), and the length of the step
    /// that led there (none for the start).
    norms: Vec<f64>,
    steps: Vec<f64>,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn max_abs(a: &[f64]) -> f64 {
    a.iter().fold(0.0, |m, v| m.max(v.abs()))
}

fn axpy(x: &[f64], alpha: f64, d: &[f64]) -> Vec<f64> {
    x.iter().zip(d).map(|(a, b)| a + alpha * b).collect()
}

impl Fit {
    /// A fit of `spec` on `n` rows of `d` features, and the first pass to run.
    pub(crate) fn start(spec: &FitSpec, n: u64, d: usize) -> (Fit, Pass) {
        let fit = Fit {
            spec: spec.clone(),
            n,
            d,
            state: State::Start,
            n_iter: 0,
            loss: Vec::new(),
            grad_max: Vec::new(),
            norms: Vec::new(),
            steps: Vec::new(),
        };
        let theta0 = vec![0.0; spec.params(d)];
        let kind = match spec.solver {
            Solver::Direct => PassKind::Normal,
            Solver::Newton => PassKind::Hessian,
            Solver::Lbfgs => PassKind::Gradient { k: 1 },
        };
        (
            fit,
            Pass {
                kind,
                thetas: vec![theta0],
            },
        )
    }

    /// The mean objective, its gradient (and Hessian) from the sums at `theta`.
    fn objective(&self, theta: &[f64], loss: f64, grad: &[f64]) -> (f64, Vec<f64>) {
        let n = self.n as f64;
        let l2 = self.spec.l2(self.n);
        let w = &theta[..self.d];
        let f = loss / n + 0.5 * l2 * dot(w, w);
        let g = grad
            .iter()
            .enumerate()
            .map(|(i, s)| s / n + if i < self.d { l2 * theta[i] } else { 0.0 })
            .collect();
        (f, g)
    }

    fn hessian(&self, h: &Array2<f64>) -> Array2<f64> {
        let l2 = self.spec.l2(self.n);
        let mut h = h / self.n as f64;
        for i in 0..self.d {
            h[[i, i]] += l2;
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
        let d: Vec<f64> = theta.iter().zip(from).map(|(a, b)| a - b).collect();
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
        let logistic = self.spec.family == super::Family::Logistic;
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

    fn done(&self, theta: Vec<f64>, converged: bool) -> Next {
        Next::Done(Fitted {
            theta,
            n_iter: self.n_iter,
            converged,
            loss: self.loss.clone(),
            grad_max: self.grad_max.clone(),
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
        // A Hessian that turns singular or a line search that stalls, on iterates that
        // run off, is the divergence (the curvature fades along the unbounded direction).
        let next = match next {
            Err(e @ (FitError::Singular { .. } | FitError::LineSearch { .. })) => {
                return Err(self.diverging().unwrap_or(e));
            }
            next => next?,
        };
        // Without a penalty, separable classes have no best fit: the loss goes to 0 while
        // the coefficients grow without bound, and any "converged" answer is arbitrary.
        // Proved as soon as the summed log-loss is below ln 2: then every row's is, so
        // every row is on its side of the boundary, strictly.
        if self.spec.family == super::Family::Logistic
            && self.spec.l2(self.n) == 0.0
            && self
                .loss
                .last()
                .is_some_and(|&l| l * (self.n as f64) < std::f64::consts::LN_2 * (1.0 - 1e-9))
        {
            return Err(FitError::Separable);
        }
        if let Next::Done(f) = &next
            && f.converged
            && let Some(e) = self.diverging()
        {
            return Err(e);
        }
        Ok(next)
    }

    /// Least squares from the normal equations: (A^T A + alpha D) theta = A^T y with
    /// A = [X, 1] and D the identity on w only (the intercept is not penalised).
    fn direct(&mut self, sums: Sums) -> Result<Next, FitError> {
        let (xtx, xty, sx, sy) = sums.normal.expect("a Normal pass");
        let (d, p) = (self.d, self.spec.params(self.d));
        let mut a = Array2::zeros((p, p));
        let mut rhs = Array1::zeros(p);
        a.slice_mut(ndarray::s![..d, ..d]).assign(&xtx);
        rhs.slice_mut(ndarray::s![..d]).assign(&xty);
        for i in 0..d {
            a[[i, i]] += self.spec.penalty;
        }
        if self.spec.fit_intercept {
            for i in 0..d {
                a[[i, d]] = sx[i];
                a[[d, i]] = sx[i];
            }
            a[[d, d]] = self.n as f64;
            rhs[d] = sy;
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
        Ok(self.done(theta.to_vec(), true))
    }

    fn newton(&mut self, pass: &Pass, sums: Sums) -> Result<Next, FitError> {
        let theta_new = pass.thetas[0].clone();
        let (f_new, g_new) = self.objective(&theta_new, sums.loss[0], &sums.grad[0]);
        let h_new = self.hessian(sums.hess.as_ref().expect("a Hessian pass"));
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
            let l1 = |g: &[f64]| g.iter().map(|v| v.abs()).sum::<f64>();
            let lowered = f_new.is_finite()
                && (f_new <= f + ARMIJO * alpha * slope
                    || ((f_new - f).abs() <= 4.0 * f64::EPSILON * f.abs() && l1(&g_new) < l1(g)));
            if !lowered {
                let alpha = alpha / 2.0;
                if alpha < 1e-10 {
                    if max_abs(g) <= self.spec.tol.max(1e-12) {
                        return Ok(self.done(theta.clone(), true));
                    }
                    return Err(FitError::LineSearch {
                        iteration: self.n_iter,
                    });
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
        }
        self.finite(f_new, &g_new, "at the start")?;
        if let State::Newton { theta, .. } = &self.state {
            self.n_iter += 1;
            let from = theta.clone();
            self.step_from(&from, &theta_new);
        }
        self.record(&theta_new, f_new, &g_new);
        if max_abs(&g_new) <= self.spec.tol {
            return Ok(self.done(theta_new, true));
        }
        if self.n_iter >= self.spec.max_iter {
            return Ok(self.done(theta_new, false));
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
            } => {
                let slope = dot(&g, &dir);
                // The largest step with sufficient decrease, preferring one that also meets
                // the curvature condition.
                let ok = |i: usize| {
                    let (fi, gi) = &evals[i];
                    fi.is_finite() && *fi <= f + ARMIJO * alphas[i] * slope && {
                        gi.iter().all(|v| v.is_finite())
                    }
                };
                let wolfe = |i: usize| dot(&evals[i].1, &dir).abs() <= WOLFE * slope.abs();
                let pick = (0..alphas.len())
                    .find(|&i| ok(i) && wolfe(i))
                    .or_else(|| (0..alphas.len()).find(|&i| ok(i)));
                let Some(i) = pick else {
                    // None lowered the loss: try ten times shorter steps.
                    let alphas: Vec<f64> = alphas.iter().map(|a| a * 0.1).collect();
                    if alphas[0] < 1e-20 {
                        if max_abs(&g) <= self.spec.tol.max(1e-12) {
                            return Ok(self.done(theta, true));
                        }
                        return Err(FitError::LineSearch {
                            iteration: self.n_iter,
                        });
                    }
                    let thetas = alphas.iter().map(|&a| axpy(&theta, a, &dir)).collect();
                    self.state = State::Lbfgs {
                        theta,
                        f,
                        g,
                        dir,
                        alphas: alphas.clone(),
                        history,
                    };
                    return Ok(Next::Pass(Pass {
                        kind: PassKind::Gradient { k: alphas.len() },
                        thetas,
                    }));
                };
                let theta_new = pass.thetas[i].clone();
                let (f_new, g_new) = evals[i].clone();
                let s: Vec<f64> = theta_new.iter().zip(&theta).map(|(a, b)| a - b).collect();
                let y: Vec<f64> = g_new.iter().zip(&g).map(|(a, b)| a - b).collect();
                if dot(&s, &y) > 1e-10 * dot(&y, &y).sqrt() * dot(&s, &s).sqrt() {
                    history.push((s, y));
                    if history.len() > HISTORY {
                        history.remove(0);
                    }
                }
                self.n_iter += 1;
                self.step_from(&theta, &theta_new);
                self.record(&theta_new, f_new, &g_new);
                let decrease = (f - f_new) / f.abs().max(f_new.abs()).max(1.0);
                if max_abs(&g_new) <= self.spec.tol || decrease <= FTOL {
                    return Ok(self.done(theta_new, true));
                }
                (theta_new, f_new, g_new, history)
            }
            State::Newton { .. } => unreachable!("an L-BFGS fit is never in a Newton state"),
        };
        if max_abs(&g) <= self.spec.tol {
            return Ok(self.done(theta, true));
        }
        if self.n_iter >= self.spec.max_iter {
            return Ok(self.done(theta, false));
        }
        // The two-loop recursion: dir = -H g, H the L-BFGS inverse-Hessian estimate.
        let mut q = g.clone();
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
        let dir: Vec<f64> = r.iter().map(|v| -v).collect();
        // The first step has no curvature yet: scale it to a unit move, as scipy does.
        let first = if history.is_empty() {
            (1.0 / dir.iter().map(|v| v * v).sum::<f64>().sqrt()).min(1.0)
        } else {
            1.0
        };
        let alphas: Vec<f64> = CANDIDATES.iter().map(|c| c * first).collect();
        let thetas = alphas.iter().map(|&a| axpy(&theta, a, &dir)).collect();
        self.state = State::Lbfgs {
            theta,
            f,
            g,
            dir,
            alphas: alphas.clone(),
            history,
        };
        Ok(Next::Pass(Pass {
            kind: PassKind::Gradient { k: alphas.len() },
            thetas,
        }))
    }
}

/// x with A x = b for a symmetric positive-definite A, by Cholesky (LAPACK through the
/// function crate's kernels); an error with NumPy's LinAlgError text otherwise.
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
    let a = Block::F64(a.clone().into_dyn());
    let scale = (0..p).map(|i| a.to_f64()[[i, i]].abs()).fold(0.0, f64::max);
    let l = run(&Kernel::Cholesky, &[&a], &[p, p])?;
    // A pivot lost to rounding (linearly dependent columns) would give huge coefficients
    // that look like an answer: refused as NumPy refuses an exactly singular matrix.
    let lf = l.to_f64();
    if (0..p).any(|i| lf[[i, i]] * lf[[i, i]] <= 1e-11 * scale) {
        return Err("Singular matrix".into());
    }
    let b = Block::F64(b.clone().insert_axis(ndarray::Axis(1)).into_dyn());
    let tri = |transpose| Kernel::TriangularSolve {
        left: true,
        lower: true,
        transpose,
        unit_diagonal: false,
    };
    let z = run(&tri(false), &[&l, &b], &[p, 1])?;
    let x = run(&tri(true), &[&l, &z], &[p, 1])?;
    Ok(x.to_f64().iter().copied().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::Family;

    /// The sums a pass would return, computed in memory.
    fn evaluate(spec: &FitSpec, x: &Array2<f64>, y: &Array1<f64>, pass: &Pass) -> Sums {
        let (n, d) = x.dim();
        if pass.kind == PassKind::Normal {
            return Sums {
                normal: Some((
                    x.t().dot(x),
                    x.t().dot(y),
                    x.sum_axis(ndarray::Axis(0)),
                    y.sum(),
                )),
                ..Default::default()
            };
        }
        let mut sums = Sums::default();
        for theta in &pass.thetas {
            let w = Array1::from(theta[..d].to_vec());
            let b = if spec.fit_intercept { theta[d] } else { 0.0 };
            let z = x.dot(&w) + b;
            let (p, loss, s): (Array1<f64>, f64, Array1<f64>) = match spec.family {
                Family::Logistic => {
                    let p = z.mapv(|v| 1.0 / (1.0 + (-v).exp()));
                    let loss = z
                        .iter()
                        .zip(y)
                        .map(|(z, y)| z.max(0.0) - z * y + (-z.abs()).exp().ln_1p())
                        .sum();
                    let s = p.mapv(|v| v * (1.0 - v));
                    (p, loss, s)
                }
                Family::Poisson => {
                    let p = z.mapv(f64::exp);
                    let loss = p.iter().zip(&z).zip(y).map(|((p, z), y)| p - z * y).sum();
                    (p.clone(), loss, p)
                }
                Family::Linear => unreachable!(),
            };
            let r = &p - y;
            let mut g = x.t().dot(&r).to_vec();
            if spec.fit_intercept {
                g.push(r.sum());
            }
            sums.loss.push(loss);
            sums.grad.push(g);
            if pass.kind == PassKind::Hessian {
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
        let _ = n;
        sums
    }

    fn fit(spec: &FitSpec, x: &Array2<f64>, y: &Array1<f64>) -> Result<Fitted, FitError> {
        let (mut f, mut pass) = Fit::start(spec, x.nrows() as u64, x.ncols());
        loop {
            let sums = evaluate(spec, x, y, &pass);
            match f.step(&pass, sums)? {
                Next::Pass(p) => pass = p,
                Next::Done(d) => return Ok(d),
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
