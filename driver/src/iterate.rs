//! The iteration engine: fits a model by passes over data read in place.
//!
//! X and y are in the store before the loop ([`fit_all`] makes them once, in a stage of
//! their own, when the job makes them). Each kind of pass (`models::PassKind`) is a small job over X and y — expressions
//! of the job language with the model's parameters as `Param` inputs — planned once by
//! LSHS; each iteration sends the same batches again with the parameters inline in the
//! payload (a `Param` task becomes a `Constant` one), so an iteration costs its pass and
//! its dispatch, never a plan. A pass's outputs are sums of the feature size (loss,
//! gradient, Hessian), read back by the driver, which takes the step (`models::solver`).
//! Every pass is a stage of the run's stage runner (`fit<N>-<pass>-<k>`): its invocations
//! are in `--stats`, the timeline and the progress bar like any other. The first pass
//! checks the data too (its sums count what the model refuses: [`refuse_data`]).

use std::collections::HashMap;
use std::time::Instant;

use anyhow::{Context, anyhow};
use ndarray::Array2;
use nums_layout::batch::{GlmCount, Kernel};
use nums_layout::{Scalar, Store, StoreSpec, StoredArray};

use crate::config::EngineConfig;
use crate::dispatch::Dispatched;
use crate::graph::{self, Graph, NodeOp};
use crate::job::{ArrayDef, Job, OutputDef, Source, Target};
use crate::models::solver::{Fit, FitError, Fitted, Next, Pass, Sums};
use crate::models::{FitSpec, PassKind, names};
use crate::refusal::{PyException, Refusal};
use crate::report::PassReport;
use crate::sched::PlannedBatch;
use crate::stage::{Resume, Stages};
use crate::tasks;

/// Where a fit's data is and what it runs on.
pub(crate) struct Data<'a> {
    pub cfg: &'a EngineConfig,
    pub x_path: &'a str,
    pub y_path: &'a str,
    pub n: u64,
    pub d: usize,
    /// y carries sample weights (its second column).
    pub weighted: bool,
    /// X's dtype, as scikit-learn names it in its message of infinite values.
    pub x_dtype: nums_layout::DType,
    /// Store prefix for the passes' own arrays (removed at the end).
    pub prefix: String,
    /// What the passes' stages are named after (`fit<N>`).
    pub stage: String,
    pub stages: &'a Stages<'a>,
    pub store: &'a Store,
    /// What remains of the fit's stages as planned, for the progress total.
    pub ahead: std::sync::Mutex<Ahead>,
}

/// A fit's passes as `plan` assumes them, and those started so far (for the notes; the
/// progress total counts the invocations `plan` expects of the fit's stages, each
/// leaving the expectation as it starts).
#[derive(Default)]
pub(crate) struct Ahead {
    pub assumed: u32,
    pub started: u32,
}

impl Ahead {
    pub(crate) fn of(f: &FitPlan) -> Ahead {
        Ahead {
            assumed: f.passes().0,
            started: 0,
        }
    }

    /// Stage `name` of the fit starts.
    pub(crate) fn start(&mut self, name: &str) {
        if !matches!(name, "X" | "y") {
            self.started += 1;
        }
    }
}

impl Data<'_> {
    /// Stage `name` of the fit starts: "pass K of N assumed", for the notes.
    fn starting(&self, name: &str) -> String {
        let mut a = self.ahead.lock().unwrap_or_else(|p| p.into_inner());
        a.start(name);
        format!("pass {} of {} assumed", a.started, a.assumed.max(a.started))
    }
}

impl Data<'_> {
    fn over(&self) -> Over<'_> {
        Over {
            cfg: self.cfg,
            x_path: self.x_path,
            y_path: self.y_path,
            d: self.d,
        }
    }
}

/// What a fit's small jobs are made over: the computation's configuration, where X and
/// y are stored, and the features.
struct Over<'a> {
    cfg: &'a EngineConfig,
    x_path: &'a str,
    y_path: &'a str,
    d: usize,
}

/// Where an array at `path` under `spec`'s root is, as a job file's `load` names it.
fn location(spec: &StoreSpec, path: &str) -> String {
    let root = spec.url.trim_end_matches('/');
    let root = root.strip_prefix("file://").unwrap_or(root);
    format!("{root}/{}", path.trim_matches('/'))
}

fn def(name: &str, source: Source) -> ArrayDef {
    ArrayDef {
        name: name.to_string(),
        line: 0,
        source,
        block: None,
        dtype: None,
    }
}

/// A job of `arrays` (after loads of X and y) whose `outputs` are stored, over the data.
fn small_job(data: &Over, arrays: Vec<(String, Source)>, outputs: &[&str]) -> Job {
    let mut defs = vec![
        def(
            "X",
            Source::Load {
                path: location(&data.cfg.storage, data.x_path),
                csv: Default::default(),
            },
        ),
        def(
            "y",
            Source::Load {
                path: location(&data.cfg.storage, data.y_path),
                csv: Default::default(),
            },
        ),
    ];
    defs.extend(arrays.into_iter().map(|(n, s)| def(&n, s)));
    let outputs = outputs
        .iter()
        .map(|o| OutputDef {
            name: o.to_string(),
            line: 0,
            target: Target::Zarr {
                store: data.cfg.storage.clone(),
                path: String::new(),
            },
            header: None,
        })
        .collect();
    Job {
        arrays: defs,
        outputs,
        ..Job::program(data.cfg.clone(), "a fit's pass", std::path::Path::new("."))
    }
}

/// A job planned once: its batches, and where its outputs land.
struct Planned {
    batches: Vec<PlannedBatch>,
    tasks: u64,
    outputs: HashMap<String, StoredArray>,
    /// What every array the plan writes lies under.
    prefix: String,
}

impl Planned {
    /// Where send `send` of the plan puts what the plan puts at `path`: each send of a
    /// pass writes keys of its own. An invocation can write after its stage has ended
    /// (the slower of a batch and its backup, or one given up on: Lambda runs an
    /// invocation to its end whatever its caller does); with one set of keys for every
    /// iteration, such a late write of iteration k's blocks replaced iteration k+1's, and
    /// the solver took a step from sums of two iterations (a fit whose coefficients
    /// differed in the 9th digit, in 6 iterations for 5, about one run in ten).
    fn moved(&self, path: &str, send: &str) -> String {
        match path.strip_prefix(&format!("{}/", self.prefix)) {
            Some(rest) => format!("{}/{send}/{rest}", self.prefix),
            None => path.to_string(),
        }
    }
}

async fn plan_small(job: &Job, prefix: &str) -> anyhow::Result<Planned> {
    let probes = graph::probe(job).await?;
    let g: Graph = graph::build(job, &probes)?;
    let plan = crate::plan::plan_job(job, &g, prefix, &probes)?;
    let mut outputs = HashMap::new();
    for o in &job.outputs {
        let id = g.named[&o.name];
        let path = crate::tasks::node_path(prefix, &g, id);
        outputs.insert(
            o.name.clone(),
            StoredArray::new(&path, g.nodes[id].meta.clone())?,
        );
    }
    Ok(Planned {
        batches: plan.batches,
        tasks: plan.tasks as u64,
        outputs,
        prefix: prefix.trim_matches('/').to_string(),
    })
}

/// Sends a planned job's batches once as stage `stage` ([`sends`]).
async fn dispatch(
    data: &Data<'_>,
    stage: &str,
    (p, send): (&Planned, &str),
    values: &HashMap<&str, Vec<f64>>,
) -> anyhow::Result<Dispatched> {
    let batches = sends(p, send, values)?;
    data.stages
        .run(stage, &batches, p.tasks, Resume::Never)
        .await
}

/// A planned job's batches as send `send` of it sends them: parameters filled in from
/// `values`, its arrays under keys of that send ([`Planned::moved`]).
fn sends(
    p: &Planned,
    send: &str,
    values: &HashMap<&str, Vec<f64>>,
) -> anyhow::Result<Vec<PlannedBatch>> {
    let mut batches = Vec::with_capacity(p.batches.len());
    for planned in &p.batches {
        let mut b = planned.batch();
        for a in &mut b.arrays {
            a.path = p.moved(&a.path, send);
        }
        for t in &mut b.tasks {
            if let Kernel::Param { name } = &t.kernel {
                let v = values
                    .get(name.as_str())
                    .ok_or_else(|| anyhow!("no values for parameter {name}"))?;
                t.kernel = Kernel::Constant {
                    values: v.iter().map(|&x| Scalar::Float(x)).collect(),
                };
            }
        }
        batches.push(planned.with_batch(b));
    }
    Ok(batches)
}

/// Output `name` of send `send` of a planned job.
async fn read(
    (p, send): (&Planned, &str),
    name: &str,
    store: &Store,
) -> anyhow::Result<ndarray::ArrayD<f64>> {
    let a = &p.outputs[name];
    let a = &StoredArray::new(&p.moved(&a.path, send), a.meta.clone())?;
    Ok(a.read_whole(store)
        .await
        .with_context(|| format!("reading the pass's {name}"))?
        .to_f64()
        .into_owned())
}

/// scikit-learn's ValueError for targets a model refuses (typed, for the bindings).
fn refused(message: String) -> anyhow::Error {
    anyhow::Error::new(crate::refusal::Refusal::from(message))
}

/// Refuses data the model cannot take, from the counts the fit's first pass made of it
/// ([`GlmCount`]: X's NaN and inf, y's values, the sample weights), before any step is
/// taken; in scikit-learn's order (X, y, then the weights) and words.
fn refuse_data(
    counts: &[f64],
    spec: &FitSpec,
    n: u64,
    x_dtype: nums_layout::DType,
) -> anyhow::Result<()> {
    use crate::models::Family;
    let c = |k: GlmCount| counts[k as usize];
    let finite = |nan: GlmCount, inf: GlmCount, name: &str, dtype: nums_layout::DType| {
        if c(nan) > 0.0 {
            Err(refused(format!("Input {name} contains NaN.")))
        } else if c(inf) > 0.0 {
            Err(refused(format!(
                "Input {name} contains infinity or a value too large for dtype('{dtype}')."
            )))
        } else {
            Ok(())
        }
    };
    finite(GlmCount::NanX, GlmCount::InfX, "X", x_dtype)?;
    finite(
        GlmCount::NanY,
        GlmCount::InfY,
        "y",
        nums_layout::DType::Float64,
    )?;
    let classes = spec.classes();
    let what = match spec.family {
        Family::Logistic => "labels other than 0 and 1 (binary classification)".to_string(),
        Family::Multinomial { classes } => format!(
            "labels other than the class indices 0 to {} (n_classes={classes})",
            classes - 1
        ),
        Family::Poisson => "negative values (Poisson targets are counts)".to_string(),
        Family::Linear => String::new(),
    };
    if c(GlmCount::RefusedY) > 0.0 && !what.is_empty() {
        return Err(refused(format!(
            "y has {} {what}",
            c(GlmCount::RefusedY) as u64
        )));
    }
    finite(
        GlmCount::NanWeight,
        GlmCount::InfWeight,
        "sample_weight",
        nums_layout::DType::Float64,
    )?;
    // scikit-learn's LinearRegression refuses negative weights; its other models take
    // them, but a negative weight makes the loss non-convex (and its Hessian sums, of
    // rows scaled by the root of each weight, undefined): refused for every model.
    if c(GlmCount::NegativeWeight) > 0.0 {
        return Err(refused(
            "Negative values in data passed to `sample_weight`.".into(),
        ));
    }
    if c(GlmCount::Weight) == 0.0 {
        return Err(refused(
            "Sample weights must contain at least one non-zero number.".into(),
        ));
    }
    // Poisson targets all 0, with an intercept (which is never penalised): the loss
    // falls for ever as the intercept goes to -inf (the fit stopped at an intercept of
    // -24 or -32, whatever tol asked, and called that converged).
    if spec.family == Family::Poisson && spec.fit_intercept && c(GlmCount::PositiveY) == 0.0 {
        return Err(refused(
            "y is 0 in every row: Poisson regression with an intercept has no minimum (the \
             intercept falls without bound as the predicted counts go to 0); fit without an \
             intercept (fit_intercept=False) or give y some counts"
                .into(),
        ));
    }
    // Labels of one class: no boundary to find (scikit-learn's words). (Multinomial:
    // every label 0, or every one the last class, K - 1, the count of ones counts.)
    let ones = c(GlmCount::OnesY);
    let one_class = match spec.family {
        Family::Logistic => ones == 0.0 || ones == n as f64,
        Family::Multinomial { .. } => c(GlmCount::PositiveY) == 0.0 || ones == n as f64,
        _ => false,
    };
    if n > 0 && one_class {
        let last = if classes > 1 { classes - 1 } else { 1 };
        return Err(refused(format!(
            "This solver needs samples of at least 2 classes in the data, but the data contains only one class: {}",
            if ones == 0.0 {
                "0.0".to_string()
            } else {
                format!("{last}.0")
            }
        )));
    }
    Ok(())
}

/// The job of one pass of `kind`: the sums of the model's loss over X and y (and its
/// weights) in one sweep, at the parameters `w_` and `b_` (none for the normal equations,
/// which are the squared loss's sums at 0).
fn pass_job(data: &Over, spec: &FitSpec, kind: PassKind) -> Job {
    let d = data.d as u64;
    // [d, k] in C order (a Newton pass, and the normal equations': k = 1); a multinomial
    // fit's candidates have a column per class.
    let k = spec.classes() as u64
        * match kind {
            PassKind::Gradient { k } => k as u64,
            _ => 1,
        };
    let mut arrays = vec![(names::W.to_string(), Source::Param { shape: vec![d, k] })];
    if spec.fit_intercept {
        arrays.push((names::B.to_string(), Source::Param { shape: vec![k] }));
    }
    arrays.push((
        names::SUMS.to_string(),
        Source::GlmSums {
            loss: crate::models::loss(spec),
            x: "X".into(),
            y: "y".into(),
            w: names::W.into(),
            b: spec.fit_intercept.then(|| names::B.into()),
            hessian: matches!(kind, PassKind::Hessian | PassKind::Normal),
        },
    ));
    small_job(data, arrays, &[names::SUMS])
}

/// What a fit's stages of pass `kind` are named after `fit<N>-`: `grad<k>`, `newton`,
/// `normal`, and `start` for L-BFGS's first evaluation with the Hessian (its scaling).
fn pass_name(spec: &FitSpec, kind: PassKind) -> String {
    match kind {
        PassKind::Gradient { k } => format!("grad{k}"),
        PassKind::Hessian if spec.solver == crate::models::Solver::Lbfgs => "start".into(),
        PassKind::Hessian => "newton".into(),
        PassKind::Normal => "normal".into(),
    }
}

/// The parameter arrays of a pass: `w_` ([d, k]) and `b_` ([k]); k = 1 for a Newton pass;
/// a multinomial fit's, a column per candidate and class ([`names::W`]).
fn params(spec: &FitSpec, pass: &Pass, d: usize) -> HashMap<&'static str, Vec<f64>> {
    let classes = spec.classes();
    if classes > 1 {
        // Class c's parameters are θ[c p..(c + 1) p] (p = d + intercept).
        let p = d + usize::from(spec.fit_intercept);
        let column = |i: usize| {
            (pass.thetas.iter()).flat_map(move |t| (0..classes).map(move |c| t[c * p + i]))
        };
        let mut out = HashMap::from([(names::W, (0..d).flat_map(column).collect())]);
        if spec.fit_intercept {
            out.insert(names::B, column(d).collect());
        }
        return out;
    }
    let mut w = Vec::with_capacity(d * pass.thetas.len());
    match pass.kind {
        // [d, k] in C order: row i holds feature i of every candidate.
        PassKind::Gradient { .. } => {
            for i in 0..d {
                w.extend(pass.thetas.iter().map(|t| t[i]));
            }
        }
        _ => w.extend_from_slice(&pass.thetas[0][..d]),
    }
    let mut out = HashMap::from([(names::W, w)]);
    if spec.fit_intercept {
        out.insert(names::B, pass.thetas.iter().map(|t| t[d]).collect());
    }
    out
}

/// The pass's outputs as the solver's sums, and the counts of the data a fit checks
/// ([`GlmCount`], [`refuse_data`]).
async fn read_sums(
    p: (&Planned, &str),
    spec: &FitSpec,
    pass: &Pass,
    d: usize,
    store: &Store,
) -> anyhow::Result<(Sums, Vec<f64>)> {
    // [1 + p + C, k]: the losses, then each candidate's gradient down its column, then the
    // counts of the data in column 0; a Newton pass's (and the normal equations')
    // [1 + p + C, 1 + p] has the Hessian sums in rows and columns 1..=p.
    let sums: Array2<f64> = read(p, names::SUMS, store).await?.into_dimensionality()?;
    let p_ = spec.params(d);
    let counted = nums_layout::batch::GLM_COUNTS as usize;
    let cols = match pass.kind {
        PassKind::Hessian | PassKind::Normal => 1 + p_,
        _ => pass.thetas.len(),
    };
    if sums.dim() != (1 + p_ + counted, cols) {
        return Err(anyhow!(
            "a pass's sums are {:?}, not for {} parameters",
            sums.dim(),
            p_
        ));
    }
    let counts = sums.slice(ndarray::s![1 + p_.., 0]).to_vec();
    let (cands, hess) = match pass.kind {
        PassKind::Hessian | PassKind::Normal => (
            sums.slice(ndarray::s![..1 + p_, ..1]),
            Some(sums.slice(ndarray::s![1..1 + p_, 1..]).to_owned()),
        ),
        _ => (sums.slice(ndarray::s![..1 + p_, ..]), None),
    };
    let sums = Sums {
        loss: cands.row(0).to_vec(),
        grad: cands
            .columns()
            .into_iter()
            .map(|c| c.slice(ndarray::s![1..]).to_vec())
            .collect(),
        hess,
    };
    Ok((sums, counts))
}

/// Fits `spec` to the data (`array`, the job's array it makes, for the progress notes):
/// returns the fit and what each pass measured.
pub(crate) async fn fit(
    data: &Data<'_>,
    spec: &FitSpec,
    array: &str,
) -> anyhow::Result<(Fitted, Vec<PassReport>)> {
    let mut planned: HashMap<PassKind, Planned> = HashMap::new();
    let mut reports = Vec::new();
    let (mut fit, mut pass) = Fit::start(spec, data.n, data.d);
    let fitted = loop {
        let name = pass_name(spec, pass.kind);
        if let std::collections::hash_map::Entry::Vacant(e) = planned.entry(pass.kind) {
            let job = pass_job(&data.over(), spec, pass.kind);
            e.insert(plan_small(&job, &format!("{}/{name}", data.prefix)).await?);
        }
        let p = &planned[&pass.kind];
        let at = data.starting(&name);
        data.stages.note(&match (fit.last_loss(), fit.last_grad_max()) {
            (Some(l), Some(gm)) => format!(
                "{array}: {at}, iteration {}: loss {l:.6e}, largest gradient {gm:.2e} (tol {:e})",
                fit.n_iter() + 1,
                spec.tol
            ),
            _ => format!("{array}: {at} (the first evaluation)"),
        });
        let started = Instant::now();
        let stage = format!("{}-{name}-{}", data.stage, reports.len() + 1);
        let send = format!("{}", reports.len() + 1);
        let dispatched = dispatch(data, &stage, (p, &send), &params(spec, &pass, data.d)).await?;
        let (sums, counts) = read_sums((p, &send), spec, &pass, data.d, data.store).await?;
        // The first pass checks the data: a fit of data it refuses stops before any
        // step; with sample weights, the means are over their sum.
        if reports.is_empty() {
            refuse_data(&counts, spec, data.n, data.x_dtype)?;
            if data.weighted {
                fit.weigh(counts[GlmCount::Weight as usize]);
            }
        }
        // Its arrays are of no use once read (a late write may leave some behind: the
        // fit's prefix goes at its end).
        let _ = data
            .store
            .delete_prefix(&format!("{}/{send}/", p.prefix))
            .await;
        reports.push(PassReport {
            kind: match pass.kind {
                PassKind::Gradient { k } => format!("gradient x{k}"),
                PassKind::Hessian => "hessian".into(),
                PassKind::Normal => "normal equations".into(),
            },
            wall_seconds: started.elapsed().as_secs_f64(),
            invocations: dispatched.stats.invocations,
            bytes_read: dispatched.stats.bytes_read,
        });
        let next = fit.step(&pass, sums).map_err(|e| match e {
            // NumPy's and scikit-learn's class for a matrix the step cannot solve with.
            FitError::Singular { .. } | FitError::Dependent { .. } => {
                anyhow::Error::new(Refusal::new(PyException::LinAlgError, e.to_string()))
            }
            e => anyhow!(e),
        })?;
        match next {
            Next::Pass(p) => pass = p,
            Next::Done(f) => break f,
        }
    };
    data.stages.note("");
    data.stages.expect(&data.stage, &Default::default());
    // The passes' arrays are of no use after the loop.
    let _ = data.store.delete_prefix(&data.prefix).await;
    Ok((fitted, reports))
}

/// A fit as `plan` projects it: each kind of stage it runs, planned once, with how many
/// times it is assumed to run and how many at most.
pub(crate) struct FitPlan {
    /// The job's array the fit makes.
    pub array: String,
    pub model: String,
    /// Its stages' names begin with this (`fit<N>`).
    pub stage: String,
    pub stages: Vec<FitStage>,
    /// The iterations assumed ([`crate::models::typical_iterations`], or `max_iter` when
    /// less) and the most it may take.
    pub iterations: u32,
    pub max_iter: u32,
}

/// One kind of stage of a fit: making X or y, a kind of pass.
pub(crate) struct FitStage {
    /// As the run names it after `fit<N>-` (`X`, `grad4`, `newton`, ...).
    pub name: String,
    /// What it is, in words.
    pub what: String,
    pub plan: crate::sched::Plan,
    /// Times it runs when the fit takes the assumed iterations, and at most.
    pub times: u32,
    pub at_most: u32,
}

impl FitPlan {
    /// The stages that are passes over X and y (not the making of X or y).
    fn pass_stages(&self) -> impl Iterator<Item = &FitStage> {
        self.stages
            .iter()
            .filter(|s| !matches!(s.name.as_str(), "X" | "y"))
    }

    /// Passes over X and y the fit is assumed to send, and at most.
    pub(crate) fn passes(&self) -> (u32, u32) {
        self.pass_stages()
            .fold((0, 0), |(a, m), s| (a + s.times, m + s.at_most))
    }

    /// How many passes it assumes, and why, in words.
    pub(crate) fn why(&self) -> String {
        let (assumed, most) = self.passes();
        let kinds: Vec<String> = self
            .pass_stages()
            .map(|s| {
                let many = match s.what.strip_suffix(" pass") {
                    Some(w) => format!("{w} passes"),
                    None => s.what.clone(),
                };
                crate::human::plural(u64::from(s.times), &s.what, &many)
            })
            .collect();
        let reason = if self.max_iter == 1 {
            "least squares is solved in one pass".to_string()
        } else if self.iterations >= self.max_iter {
            format!("max_iter = {} bounds the iterations", self.max_iter)
        } else {
            format!(
                "the solver's typical {} iterations on scaled data; at most {most} passes \
                 with max_iter = {}",
                self.iterations, self.max_iter
            )
        };
        format!(
            "{} assumed ({}): {reason}",
            crate::human::plural(u64::from(assumed), "pass", "passes"),
            kinds.join(", ")
        )
    }

    /// What the fit's stages add to a run, with each stage run as often as assumed (or,
    /// `at_most`, as often as it may be): projected by the job's cost model, its workers
    /// warm (the run's first stage pays their cold starts).
    pub(crate) fn totals(&self, job: &Job, at_most: bool) -> FitTotals {
        let mut t = FitTotals::default();
        for s in &self.stages {
            let k = u64::from(if at_most { s.at_most } else { s.times });
            let pr = crate::plan::projection_warm(job, &s.plan);
            t.invocations += k * s.plan.batches.len() as u64;
            t.tasks += k
                * (s.plan.batches.iter())
                    .map(|b| b.num_tasks() as u64)
                    .sum::<u64>();
            t.bytes_read += k * s.plan.bytes_read();
            t.bytes_written += k * s.plan.bytes_written();
            t.wall_seconds += k as f64 * pr.wall_seconds;
            t.gb_seconds += k as f64 * pr.gb_seconds;
            t.usd += k as f64 * pr.usd;
        }
        t
    }
}

/// What a fit (or a whole run) adds up to.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub(crate) struct FitTotals {
    pub invocations: u64,
    /// Their block tasks (the progress total's unit; not in `plan --json`).
    #[serde(skip)]
    pub tasks: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub wall_seconds: f64,
    pub gb_seconds: f64,
    pub usd: f64,
}

/// The fits of graph `g` as `plan` projects them under scheduler `kind`, in the order a
/// run makes them. Pure: X and y are taken as stored where the run would store them.
pub(crate) fn plan_fits(
    job: &Job,
    g: &Graph,
    probes: &graph::Probes,
    kind: crate::job::SchedulerKind,
    prefix: &str,
) -> anyhow::Result<Vec<FitPlan>> {
    use crate::models::{Solver, solver::LINE_SEARCH_STEPS, typical_iterations};
    let work = tasks::block_work(g);
    let mut out = Vec::new();
    // Imports an earlier stage made, as the run reads them: in place.
    let mut made = std::collections::HashSet::new();
    for n in &g.nodes {
        let NodeOp::Fit { x, y, spec } = &n.op else {
            continue;
        };
        if !(n.persist || work.needed(n.id)) {
            continue;
        }
        let array = n
            .name
            .clone()
            .or_else(|| n.def.clone())
            .unwrap_or_else(|| "a model".into());
        let stage = format!("fit{}", n.id);
        let plan =
            |j: &Job, g: &Graph, p: &graph::Probes| crate::plan::plan_with(j, g, kind, prefix, p);
        let mut stages = Vec::new();
        let mut paths = [String::new(), String::new()];
        let mut stored = graph::Probes::default();
        for (i, (v, what)) in [(*x, "X"), (*y, "y")].into_iter().enumerate() {
            paths[i] = match &g.nodes[v].op {
                NodeOp::InPlace { path, .. } => path.clone(),
                _ => {
                    let (sub, root) = g.subgraph(v, &format!("{stage}-{what}"));
                    let sub = crate::stage::read_made_imports(&sub, prefix, &made);
                    stages.push(FitStage {
                        name: what.into(),
                        what: format!("making {what}"),
                        plan: plan(job, &sub, probes)?,
                        times: 1,
                        at_most: 1,
                    });
                    made.extend(crate::stage::imports_of(&sub, prefix));
                    tasks::node_path(prefix, &sub, root)
                }
            };
            // Where the passes read it: stored, in place.
            stored.0.insert(
                what.to_string(),
                graph::Probe::Zarr {
                    store: job.storage.clone(),
                    path: paths[i].clone(),
                    meta: g.nodes[v].meta.clone(),
                    in_place: Some(paths[i].clone()),
                    sparse: false,
                    stamp: 0,
                    foreign: None,
                },
            );
        }
        let cfg = job.engine();
        let over = Over {
            cfg: &cfg,
            x_path: &paths[0],
            y_path: &paths[1],
            d: g.nodes[*x].meta.shape[1] as usize,
        };
        let planned = |j: Job| -> anyhow::Result<crate::sched::Plan> {
            let g = graph::build(&j, &stored)?;
            plan(&j, &g, &stored)
        };
        let iterations = typical_iterations(spec.solver).min(spec.max_iter.max(1));
        let max_iter = spec.max_iter.max(1);
        let passes: Vec<(PassKind, &str, &str, u32, u32)> = match spec.solver {
            Solver::Direct => vec![(PassKind::Normal, "normal", "normal-equations pass", 1, 1)],
            Solver::Newton => vec![(
                PassKind::Hessian,
                "newton",
                "Newton pass",
                1 + iterations,
                1 + max_iter,
            )],
            Solver::Lbfgs => vec![
                match crate::models::solver::first_pass(spec, over.d) {
                    PassKind::Hessian => (
                        PassKind::Hessian,
                        "start",
                        "first evaluation with the Hessian (the scaling)",
                        1,
                        1,
                    ),
                    kind => (kind, "grad1", "gradient pass", 1, 1),
                },
                (
                    PassKind::Gradient {
                        k: LINE_SEARCH_STEPS,
                    },
                    "grad4",
                    "line-search pass",
                    iterations,
                    max_iter,
                ),
            ],
        };
        for (kind, name, what, times, at_most) in passes {
            stages.push(FitStage {
                name: name.into(),
                what: what.into(),
                plan: planned(pass_job(&over, spec, kind))?,
                times,
                at_most,
            });
        }
        out.push(FitPlan {
            array,
            model: crate::models::describe(spec),
            stage,
            stages,
            iterations: if spec.solver == Solver::Direct {
                1
            } else {
                iterations
            },
            max_iter: if spec.solver == Solver::Direct {
                1
            } else {
                max_iter
            },
        });
    }
    Ok(out)
}

/// The imports the fits of `g` make (a CSV their X or y are taken from), as the run
/// leaves them for the main stage: written at their paths during run `prefix`.
pub(crate) fn main_graph(g: &Graph, prefix: &str) -> Graph {
    let work = tasks::block_work(g);
    let mut made = std::collections::HashSet::new();
    for n in &g.nodes {
        let NodeOp::Fit { x, y, .. } = &n.op else {
            continue;
        };
        if !(n.persist || work.needed(n.id)) {
            continue;
        }
        for (v, what) in [(*x, "X"), (*y, "y")] {
            if !matches!(g.nodes[v].op, NodeOp::InPlace { .. }) {
                let (sub, _) = g.subgraph(v, &format!("fit{}-{what}", n.id));
                made.extend(crate::stage::imports_of(&sub, prefix));
            }
        }
    }
    crate::stage::read_made_imports(g, prefix, &made)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::{Family, Solver};

    /// Poisson targets all 0 with an intercept have no best fit (the intercept falls
    /// without bound: fits stopped at -24 or -32 and said "converged"): refused from the
    /// first pass's count of y's values above 0, with or without a penalty (the intercept
    /// is never penalised); without an intercept, or with some counts, they are fitted.
    #[test]
    fn poisson_targets_all_zero_are_refused_with_an_intercept() {
        let spec = |fit_intercept, penalty| FitSpec {
            function: "poisson_regression",
            family: Family::Poisson,
            solver: Solver::Lbfgs,
            penalty,
            tol: 1e-4,
            max_iter: 100,
            fit_intercept,
        };
        // Clean data of 100 rows, none above 0.
        let mut zeros = [0.0; nums_layout::batch::GLM_COUNTS as usize];
        zeros[GlmCount::Weight as usize] = 100.0;
        fn refuse(c: &[f64], s: &FitSpec) -> anyhow::Result<()> {
            refuse_data(c, s, 100, nums_layout::DType::Float64)
        }
        for alpha in [0.0, 1.0] {
            let e = refuse(&zeros, &spec(true, alpha)).unwrap_err();
            assert!(e.to_string().contains("no minimum"), "{e}");
        }
        refuse(&zeros, &spec(false, 1.0)).unwrap();
        let mut some = zeros;
        some[GlmCount::PositiveY as usize] = 1.0;
        refuse(&some, &spec(true, 1.0)).unwrap();
    }

    /// The first pass's counts are refused in scikit-learn's words and order: X's NaN
    /// before its infinities, X before y, y before the weights.
    #[test]
    fn data_is_refused_in_scikit_learns_words() {
        let spec = FitSpec {
            function: "linear_regression",
            family: Family::Linear,
            solver: Solver::Direct,
            penalty: 0.0,
            tol: 0.0,
            max_iter: 1,
            fit_intercept: true,
        };
        let mut clean = [0.0; nums_layout::batch::GLM_COUNTS as usize];
        clean[GlmCount::Weight as usize] = 10.0;
        refuse_data(&clean, &spec, 10, nums_layout::DType::Float64).unwrap();
        for (set, want) in [
            (
                &[GlmCount::InfX, GlmCount::NanX, GlmCount::NanY][..],
                "Input X contains NaN.",
            ),
            (
                &[GlmCount::InfX, GlmCount::NanY],
                "Input X contains infinity or a value too large for dtype('float32').",
            ),
            (&[GlmCount::InfY, GlmCount::NanY], "Input y contains NaN."),
            (
                &[GlmCount::InfY, GlmCount::NanWeight],
                "Input y contains infinity or a value too large for dtype('float64').",
            ),
            (&[GlmCount::NanWeight], "Input sample_weight contains NaN."),
            (
                &[GlmCount::NegativeWeight],
                "Negative values in data passed to `sample_weight`.",
            ),
        ] {
            let mut c = clean;
            for k in set {
                c[*k as usize] = 1.0;
            }
            let e = refuse_data(&c, &spec, 10, nums_layout::DType::Float32).unwrap_err();
            assert_eq!(e.to_string(), want);
        }
        let mut c = clean;
        c[GlmCount::Weight as usize] = 0.0;
        let e = refuse_data(&c, &spec, 10, nums_layout::DType::Float64).unwrap_err();
        assert!(e.to_string().contains("at least one non-zero"), "{e}");
    }

    /// Each send of a pass writes keys of its own and reads its outputs there, so that a
    /// late write of one iteration (the slower of a batch and its backup) cannot land in
    /// the next iteration's arrays.
    #[tokio::test]
    async fn each_send_of_a_pass_writes_keys_of_its_own() {
        let dir = std::env::temp_dir().join(format!("nums-iterate-sends-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let url = url::Url::from_directory_path(&dir).unwrap().to_string();
        let spec = StoreSpec {
            url: url.clone(),
            endpoint: None,
        };
        let store = Store::open(&spec).unwrap();
        let (n, d) = (40u64, 3usize);
        for (path, shape, block) in [
            ("data/X", vec![n, 3], vec![10, 3]),
            ("data/y", vec![n], vec![10]),
        ] {
            let meta =
                nums_layout::ArrayMeta::new(shape.clone(), block, nums_layout::DType::Float64);
            let a = StoredArray::new(path, meta).unwrap();
            for i in 0..4u64 {
                let values = if shape.len() == 2 {
                    ndarray::Array2::<f64>::from_elem((10, 3), 0.5).into_dyn()
                } else {
                    ndarray::Array1::from_iter((0..10).map(|k| f64::from(k % 2))).into_dyn()
                };
                let idx: Vec<u64> = if shape.len() == 2 {
                    vec![i, 0]
                } else {
                    vec![i]
                };
                a.write_block(&store, &idx, &nums_layout::Block::F64(values))
                    .await
                    .unwrap();
            }
            a.write_metadata(&store).await.unwrap();
        }
        let text = format!(
            "name = \"t\"\n[storage]\nurl = \"{url}\"\n[compute]\nworkers = 2\n[arrays]\na = \"ones(2)\"\n[outputs]\na = \"{}/t/a\"\n",
            url.trim_end_matches('/')
        );
        let job = Job::parse(&dir.join("job.toml"), &text).unwrap();
        let cfg = job.engine();
        let over = Over {
            cfg: &cfg,
            x_path: "data/X",
            y_path: "data/y",
            d,
        };
        let fit = FitSpec {
            function: "logistic_regression",
            family: Family::Logistic,
            solver: Solver::Newton,
            penalty: 1.0,
            tol: 1e-4,
            max_iter: 10,
            fit_intercept: true,
        };
        let p = plan_small(
            &pass_job(&over, &fit, PassKind::Hessian),
            "t/run/fit/newton",
        )
        .await
        .unwrap();
        let values = HashMap::from([(names::W, vec![0.0; d]), (names::B, vec![0.0])]);
        let written = |send: &str| -> std::collections::BTreeSet<String> {
            sends(&p, send, &values)
                .unwrap()
                .iter()
                .flat_map(|b| {
                    let b = b.batch();
                    b.tasks
                        .iter()
                        .map(|t| b.arrays[t.output.array as usize].path.clone())
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        let (one, two) = (written("1"), written("2"));
        assert!(!one.is_empty());
        assert!(
            one.is_disjoint(&two),
            "sends 1 and 2 both write {:?}",
            one.intersection(&two)
        );
        assert!(
            one.iter().all(|k| k.starts_with("t/run/fit/newton/1/")),
            "{one:?}"
        );
        // The sums are read where their send wrote them.
        let loss = &p.outputs[names::SUMS];
        assert!(one.contains(&p.moved(&loss.path, "1")), "{one:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A gradient pass (one kernel over each block of rows, `Kernel::GlmSums`) returns each
    /// candidate's loss and gradient sums as the model defines them, computed here
    /// directly: X stored in blocks of rows and of columns, y in other row blocks than X's,
    /// for every loss, with and without an intercept; a Newton pass (the same kernel with
    /// the Hessian) returns the same loss and gradient and the Hessian sums. (A wrong sum,
    /// a candidate's column read for another's, or W laid out otherwise than the kernel
    /// reads it fails here.)
    #[tokio::test]
    async fn a_gradient_pass_returns_each_candidates_loss_and_gradient() {
        let dir = std::env::temp_dir().join(format!("nums-iterate-grad-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let url = url::Url::from_directory_path(&dir).unwrap().to_string();
        let spec = StoreSpec {
            url: url.clone(),
            endpoint: None,
        };
        let store = Store::open(&spec).unwrap();
        let (n, d) = (40usize, 3usize);
        let x = ndarray::Array2::from_shape_fn((n, d), |(i, j)| {
            ((i * 7 + j * 5) % 11) as f64 / 5.0 - 1.0
        });
        let y = ndarray::Array1::from_shape_fn(n, |i| ((i * 3) % 5 < 2) as u8 as f64);
        let put = async |path: &str, a: ndarray::ArrayD<f64>, block: Vec<u64>| {
            let shape: Vec<u64> = a.shape().iter().map(|&s| s as u64).collect();
            let meta = nums_layout::ArrayMeta::new(shape, block, nums_layout::DType::Float64);
            let grid = meta.grid();
            let s = StoredArray::new(path, meta.clone()).unwrap();
            for lin in 0..grid.iter().product::<u64>() {
                let idx = nums_layout::meta::unravel(lin, &grid);
                let o = meta.block_origin(&idx);
                let b = meta.block_shape(&idx);
                let part = a.slice_each_axis(|ax| {
                    let i = ax.axis.index();
                    let from = o[i] as usize;
                    ndarray::Slice::from(from..from + b[i])
                });
                s.write_block(&store, &idx, &nums_layout::Block::F64(part.to_owned()))
                    .await
                    .unwrap();
            }
            s.write_metadata(&store).await.unwrap();
        };
        put("data/X", x.clone().into_dyn(), vec![10, 2]).await;
        put("data/y", y.clone().into_dyn(), vec![20]).await;
        let text = format!(
            "name = \"t\"\n[storage]\nurl = \"{url}\"\n[compute]\nworkers = 2\n[arrays]\na = \"ones(2)\"\n[outputs]\na = \"{}/t/a\"\n",
            url.trim_end_matches('/')
        );
        let job = Job::parse(&dir.join("job.toml"), &text).unwrap();
        let cfg = job.engine();
        let over = Over {
            cfg: &cfg,
            x_path: "data/X",
            y_path: "data/y",
            d,
        };
        for family in [Family::Logistic, Family::Poisson] {
            for fit_intercept in [true, false] {
                let fit = FitSpec {
                    function: "test",
                    family,
                    solver: Solver::Lbfgs,
                    penalty: 1.0,
                    tol: 1e-4,
                    max_iter: 10,
                    fit_intercept,
                };
                let thetas: Vec<Vec<f64>> = (0..4)
                    .map(|c| {
                        (0..fit.params(d))
                            .map(|i| 0.3 * c as f64 - 0.2 * i as f64 + 0.1)
                            .collect()
                    })
                    .collect();
                let pass = Pass {
                    kind: PassKind::Gradient { k: 4 },
                    thetas: thetas.clone(),
                };
                let prefix = format!("t/run/fit-{family:?}-{fit_intercept}/grad4");
                let p = plan_small(&pass_job(&over, &fit, pass.kind), &prefix)
                    .await
                    .unwrap();
                let batches = sends(&p, "1", &params(&fit, &pass, d)).unwrap();
                for (i, b) in batches.iter().enumerate() {
                    assert!(
                        b.deps.iter().all(|&j| j < i),
                        "batch {i} waits for a later one"
                    );
                    nums_function::handle(&b.batch(), &store).await.unwrap();
                }
                let (sums, counts) = read_sums((&p, "1"), &fit, &pass, d, &store).await.unwrap();
                // y's values the fit refuses (none), NaN, inf, its ones and its values
                // above 0; X's NaN and inf; the rows; no weights refused.
                assert_eq!(
                    counts,
                    [
                        0.0,
                        0.0,
                        0.0,
                        y.sum(),
                        y.sum(),
                        0.0,
                        0.0,
                        n as f64,
                        0.0,
                        0.0,
                        0.0
                    ],
                    "{family:?}"
                );
                for (c, theta) in thetas.iter().enumerate() {
                    let w = ndarray::Array1::from(theta[..d].to_vec());
                    let z = x.dot(&w) + if fit_intercept { theta[d] } else { 0.0 };
                    let (loss, r): (f64, ndarray::Array1<f64>) = match family {
                        Family::Logistic => (
                            z.iter()
                                .zip(&y)
                                .map(|(z, y)| (1.0 + z.exp()).ln() - y * z)
                                .sum(),
                            z.mapv(|v| 1.0 / (1.0 + (-v).exp())) - &y,
                        ),
                        _ => (
                            z.iter().zip(&y).map(|(z, y)| z.exp() - y * z).sum(),
                            z.mapv(f64::exp) - &y,
                        ),
                    };
                    let mut grad = x.t().dot(&r).to_vec();
                    if fit_intercept {
                        grad.push(r.sum());
                    }
                    let near = |a: f64, b: f64| (a - b).abs() <= 1e-12 * (1.0 + b.abs());
                    assert!(
                        near(sums.loss[c], loss),
                        "{family:?} {c}: {} {loss}",
                        sums.loss[c]
                    );
                    assert_eq!(sums.grad[c].len(), grad.len());
                    for (g, want) in sums.grad[c].iter().zip(&grad) {
                        assert!(
                            near(*g, *want),
                            "{family:?} {c}: {:?} {grad:?}",
                            sums.grad[c]
                        );
                    }
                }
                // A Newton pass at candidate 1: the same loss and gradient, and the
                // Hessian sums X^T diag(s) X bordered by X^T s and sum s.
                let newton = Pass {
                    kind: PassKind::Hessian,
                    thetas: vec![thetas[1].clone()],
                };
                let prefix = format!("t/run/fit-{family:?}-{fit_intercept}/newton");
                let p = plan_small(&pass_job(&over, &fit, newton.kind), &prefix)
                    .await
                    .unwrap();
                for b in sends(&p, "1", &params(&fit, &newton, d)).unwrap() {
                    nums_function::handle(&b.batch(), &store).await.unwrap();
                }
                let (got, newton_counts) = read_sums((&p, "1"), &fit, &newton, d, &store)
                    .await
                    .unwrap();
                assert_eq!(newton_counts, counts, "{family:?}");
                let near = |a: f64, b: f64| (a - b).abs() <= 1e-12 * (1.0 + b.abs());
                assert!(near(got.loss[0], sums.loss[1]), "{family:?}");
                for (g, want) in got.grad[0].iter().zip(&sums.grad[1]) {
                    assert!(
                        near(*g, *want),
                        "{family:?}: {:?} {:?}",
                        got.grad[0],
                        sums.grad[1]
                    );
                }
                let theta = &thetas[1];
                let z = x.dot(&ndarray::Array1::from(theta[..d].to_vec()))
                    + if fit_intercept { theta[d] } else { 0.0 };
                let s = match family {
                    Family::Logistic => z.mapv(|v| {
                        let p = 1.0 / (1.0 + (-v).exp());
                        p * (1.0 - p)
                    }),
                    _ => z.mapv(f64::exp),
                };
                let mut xb = x.clone();
                if fit_intercept {
                    xb.push_column(ndarray::Array1::ones(n).view()).unwrap();
                }
                let want = xb.t().dot(&(&xb * &s.view().insert_axis(ndarray::Axis(1))));
                let h = got.hess.expect("a Newton pass's Hessian");
                assert_eq!(h.dim(), want.dim());
                for (g, w) in h.iter().zip(&want) {
                    assert!(near(*g, *w), "{family:?}:\n{h}\n{want}");
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
