//! The iteration engine: fits a model by passes over data read in place.
//!
//! Before the loop, X and y are made once (when the job makes them: random, imported,
//! expressions) under the run's prefix, and y is checked (labels, NaN). Each kind of pass
//! (`models::PassKind`) is a small job over X and y — expressions of the job language with
//! the model's parameters as inputs — planned once by LSHS; each iteration sends the same
//! batches again with the parameters inline in the payload (a `Param` task becomes a
//! `Constant` one), so the cost of an iteration is the pass and its dispatch. The pass's
//! outputs are sums of the feature size (loss, gradient, Hessian), read back by the driver,
//! which takes the step (`models::solver`).

use std::collections::HashMap;
use std::time::Instant;

use anyhow::{Context, anyhow};
use ndarray::{Array1, Array2};
use nums_layout::batch::Kernel;
use nums_layout::{Block, Scalar, Store, StoreSpec, StoredArray};
use serde::Serialize;

use crate::dispatch::Invoker;
use crate::graph::{self, Graph, NodeId, NodeOp};
use crate::job::{ArrayDef, Job, OutputDef, Source, Target};
use crate::models::solver::{Fit, FitError, Fitted, Next, Pass, Sums};
use crate::models::{FitSpec, PassKind, names};
use crate::runs::Run;
use crate::sched::{Plan, PlannedBatch};

/// What one fit measured, for `--stats`.
#[derive(Debug, Clone, Serialize)]
pub struct FitReport {
    /// The job's array the fit makes.
    pub array: String,
    pub model: String,
    #[serde(flatten)]
    pub fitted: Fitted,
    /// Per pass: wall seconds, invocations, store bytes read.
    pub passes: Vec<PassReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PassReport {
    pub kind: String,
    pub wall_seconds: f64,
    pub invocations: u64,
    pub bytes_read: u64,
}

/// Where an array at `path` under `spec`'s root is, as a job file's `load` names it.
fn location(spec: &StoreSpec, path: &str) -> String {
    format!("{}/{}", spec.url.trim_end_matches('/'), path.trim_matches('/'))
        .replacen("file://", "", 1)
}

/// A pass planned once: its batches (parameters still as `Param` tasks) and where its
/// outputs land.
struct PlannedPass {
    plan: Plan,
    batches: Vec<nums_layout::batch::Batch>,
    outputs: HashMap<&'static str, StoredArray>,
}

/// The job of one pass over `x_path` and `y_path` (arrays in the run's store).
fn pass_job(
    base: &Job,
    spec: &FitSpec,
    kind: PassKind,
    x_path: &str,
    y_path: &str,
    d: u64,
) -> Job {
    let (exprs, outputs) = crate::models::program(spec, kind);
    let def = |name: &str, source: Source| ArrayDef {
        name: name.to_string(),
        line: 0,
        source,
        block: None,
        dtype: None,
    };
    let mut arrays = vec![
        def(
            "X",
            Source::Load {
                path: location(&base.storage, x_path),
            },
        ),
        def(
            "y",
            Source::Load {
                path: location(&base.storage, y_path),
            },
        ),
    ];
    let k = match kind {
        PassKind::Gradient { k } => Some(k as u64),
        _ => None,
    };
    if kind != PassKind::Normal {
        let (w, b) = match k {
            Some(k) => (vec![d, k], vec![k]),
            None => (vec![d], vec![1]),
        };
        arrays.push(def(names::W, Source::Param { shape: w }));
        if spec.fit_intercept {
            arrays.push(def(names::B, Source::Param { shape: b }));
        }
    }
    for (n, e) in exprs {
        arrays.push(def(&n, Source::Expr { text: e }));
    }
    let outputs = outputs
        .iter()
        .map(|o| OutputDef {
            name: o.to_string(),
            line: 0,
            target: Target::Zarr {
                store: base.storage.clone(),
                path: format!("(fit output {o})"),
            },
        })
        .collect();
    Job {
        arrays,
        outputs,
        ..base.clone()
    }
}

/// Fits `spec` to the arrays `x` and `y` of graph `g` and returns the fitted parameters.
#[allow(clippy::too_many_arguments)]
pub async fn fit(
    job: &Job,
    g: &Graph,
    fit_node: NodeId,
    spec: &FitSpec,
    x: NodeId,
    y: NodeId,
    run: &Run,
    invoker: &Invoker,
    store: &Store,
    progress: &indicatif::ProgressBar,
) -> anyhow::Result<FitReport> {
    let prefix = format!("{}/fit{fit_node}", run.prefix());
    let array = g.nodes[fit_node]
        .name
        .clone()
        .or_else(|| g.nodes[fit_node].def.clone())
        .unwrap_or_else(|| "the fit".into());
    let fail = |e: anyhow::Error| e.context(format!("{} ({})", array, crate::models::describe(spec)));
    // X and y in the store, made once for the loop.
    let (x_path, y_path) = materialize(job, g, x, y, run, invoker, store, &prefix)
        .await
        .map_err(fail)?;
    let (n, d) = (g.nodes[x].meta.shape[0], g.nodes[x].meta.shape[1]);
    check_labels(job, spec, &y_path, run, invoker, store, &prefix, &array)
        .await
        .map_err(fail)?;

    let mut planned: HashMap<PassKind, PlannedPass> = HashMap::new();
    let mut reports = Vec::new();
    let (mut fit, mut pass) = Fit::start(spec, n, d as usize);
    let fitted = loop {
        if !planned.contains_key(&pass.kind) {
            let p = plan_pass(job, spec, pass.kind, &x_path, &y_path, d, &prefix)
                .await
                .map_err(fail)?;
            planned.insert(pass.kind, p);
        }
        let pp = &planned[&pass.kind];
        let started = Instant::now();
        let d_before = run_pass(pp, spec, &pass, d as usize, invoker, store, job).await;
        let dispatched = d_before.map_err(fail)?;
        let sums = read_sums(pp, spec, &pass, d as usize, store)
            .await
            .map_err(fail)?;
        reports.push(PassReport {
            kind: format!("{:?}", pass.kind).to_lowercase(),
            wall_seconds: started.elapsed().as_secs_f64(),
            invocations: dispatched.stats.invocations,
            bytes_read: dispatched.stats.bytes_read,
        });
        run.add_dispatched(&dispatched);
        match fit.step(&pass, sums) {
            Ok(Next::Pass(p)) => pass = p,
            Ok(Next::Done(f)) => break f,
            Err(e) => return Err(fail(fit_error(e, &x_path, store).await)),
        }
        if let (Some(l), Some(gm)) = (fit_loss(&fit), fit_grad(&fit)) {
            progress.set_message(format!(
                "{array}: iteration {}, loss {l:.6e}, |grad| {gm:.2e}",
                reports.len()
            ));
        }
    };
    // The coefficients become the fit's array, as an import would.
    let out = StoredArray::new(
        &crate::tasks::node_path(&run.prefix(), g, fit_node),
        g.nodes[fit_node].meta.clone(),
    )?;
    let values = Block::F64(Array1::from(fitted.theta.clone()).into_dyn());
    out.write_block(store, &[0], &values).await?;
    if !fitted.converged {
        eprintln!(
            "warning: {array}: {} did not converge in max_iter = {} iterations (largest gradient {:.3e}, tol {}); raise max_iter",
            crate::models::describe(spec),
            spec.max_iter,
            fitted.grad_max.last().copied().unwrap_or(f64::NAN),
            spec.tol
        );
    }
    // The pass jobs' arrays are of no use after the loop.
    let _ = store.delete_prefix(&prefix).await;
    Ok(FitReport {
        array,
        model: crate::models::describe(spec),
        fitted,
        passes: reports,
    })
}

fn fit_loss(f: &Fit) -> Option<f64> {
    f.last_loss()
}

fn fit_grad(f: &Fit) -> Option<f64> {
    f.last_grad_max()
}

/// A fit error, with NaN located: a loss that is not finite at the start comes from
/// NaN or inf in X or y.
async fn fit_error(e: FitError, x_path: &str, store: &Store) -> anyhow::Error {
    let _ = (x_path, store);
    anyhow!(e)
}

/// X and y as arrays in the store: where they already are when read in place, else made
/// by a stage of their own under `prefix`.
#[allow(clippy::too_many_arguments)]
async fn materialize(
    job: &Job,
    g: &Graph,
    x: NodeId,
    y: NodeId,
    run: &Run,
    invoker: &Invoker,
    store: &Store,
    prefix: &str,
) -> anyhow::Result<(String, String)> {
    let in_place = |id: NodeId| match &g.nodes[id].op {
        NodeOp::InPlace { path, .. } => Some(path.clone()),
        _ => None,
    };
    let mut todo = Vec::new();
    for (id, name) in [(x, "X"), (y, "y")] {
        if in_place(id).is_none() {
            todo.push((id, name));
        }
    }
    if !todo.is_empty() {
        let (sub, roots) = g.subgraph_many(&todo);
        let plan = crate::run::plan_raw(job, &sub, job.compute.scheduler, prefix)
            .map_err(|e| anyhow!("{e}"))?;
        crate::run::describe_persisted(job, &sub, prefix, run, store).await?;
        crate::run::dispatch_plain(job, &plan, invoker, store, run).await?;
        let _ = roots;
    }
    let path = |id: NodeId, name: &str| {
        in_place(id).unwrap_or_else(|| format!("{prefix}/out/{name}"))
    };
    Ok((path(x, "X"), path(y, "y")))
}

/// Refuses labels the model cannot take (and NaN or inf in y) before the first pass.
#[allow(clippy::too_many_arguments)]
async fn check_labels(
    job: &Job,
    spec: &FitSpec,
    y_path: &str,
    run: &Run,
    invoker: &Invoker,
    store: &Store,
    prefix: &str,
    array: &str,
) -> anyhow::Result<()> {
    let def = |name: &str, source: Source| ArrayDef {
        name: name.to_string(),
        line: 0,
        source,
        block: None,
        dtype: None,
    };
    let mut arrays = vec![def(
        "y",
        Source::Load {
            path: location(&job.storage, y_path),
        },
    )];
    let checks = crate::models::checks(spec);
    for (n, e) in &checks {
        arrays.push(def(n, Source::Expr { text: e.clone() }));
    }
    let outputs = checks
        .iter()
        .map(|(n, _)| OutputDef {
            name: n.clone(),
            line: 0,
            target: Target::Zarr {
                store: job.storage.clone(),
                path: String::new(),
            },
        })
        .collect();
    let cj = Job {
        arrays,
        outputs,
        ..job.clone()
    };
    let probes = graph::probe(&cj).await?;
    let cg = graph::build(&cj, &probes)?;
    let cprefix = format!("{prefix}/check");
    let plan =
        crate::run::plan_raw(&cj, &cg, cj.compute.scheduler, &cprefix).map_err(|e| anyhow!("{e}"))?;
    crate::run::dispatch_plain(&cj, &plan, invoker, store, run).await?;
    let mut counts = Vec::new();
    for (n, _) in &checks {
        let a = StoredArray::new(&format!("{cprefix}/out/{n}"), cg.nodes[cg.named[n]].meta.clone())?;
        let v = crate::arrays::read_small(&a, store).await?;
        counts.push(v.to_f64().iter().next().copied().unwrap_or(0.0));
    }
    let what = match spec.family {
        crate::models::Family::Logistic => "labels other than 0 and 1",
        crate::models::Family::Poisson => "negative values (Poisson targets are counts)",
        crate::models::Family::Linear => "",
    };
    if counts[0] > 0.0 && !what.is_empty() {
        return Err(anyhow!(
            "{array}: y has {} {what}",
            counts[0] as u64
        ));
    }
    if counts[1] > 0.0 || counts[2] > 0.0 {
        return Err(anyhow!(
            "{array}: y holds {} NaN and {} inf values",
            counts[1] as u64,
            counts[2] as u64
        ));
    }
    Ok(())
}

async fn plan_pass(
    job: &Job,
    spec: &FitSpec,
    kind: PassKind,
    x_path: &str,
    y_path: &str,
    d: u64,
    prefix: &str,
) -> anyhow::Result<PlannedPass> {
    let pj = pass_job(job, spec, kind, x_path, y_path, d);
    let probes = graph::probe(&pj).await?;
    let pg = graph::build(&pj, &probes)?;
    let name = match kind {
        PassKind::Gradient { k } => format!("grad{k}"),
        PassKind::Hessian => "newton".into(),
        PassKind::Normal => "normal".into(),
    };
    let pprefix = format!("{prefix}/{name}");
    let plan = crate::run::plan_raw(&pj, &pg, pj.compute.scheduler, &pprefix)
        .map_err(|e| anyhow!("{e}"))?;
    let batches = plan.batches.iter().map(PlannedBatch::batch).collect();
    let (_, outs) = crate::models::program(spec, kind);
    let mut outputs = HashMap::new();
    for o in outs {
        let id = pg.named[o];
        outputs.insert(
            o,
            StoredArray::new(
                &crate::tasks::node_path(&pprefix, &pg, id),
                pg.nodes[id].meta.clone(),
            )?,
        );
    }
    Ok(PlannedPass {
        plan,
        batches,
        outputs,
    })
}

/// The parameter arrays of a pass: `w_` ([d] or [d, k]) and `b_` ([1] or [k]).
fn params(spec: &FitSpec, pass: &Pass, d: usize) -> HashMap<&'static str, Vec<f64>> {
    let k = pass.thetas.len();
    let mut w = Vec::with_capacity(d * k);
    match pass.kind {
        PassKind::Gradient { .. } => {
            // [d, k] in C order: row i holds feature i of every candidate.
            for i in 0..d {
                for t in &pass.thetas {
                    w.push(t[i]);
                }
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

/// Sends the pass's batches once, with the parameters inline.
async fn run_pass(
    pp: &PlannedPass,
    spec: &FitSpec,
    pass: &Pass,
    d: usize,
    invoker: &Invoker,
    store: &Store,
    job: &Job,
) -> anyhow::Result<crate::dispatch::Dispatched> {
    let values = params(spec, pass, d);
    let batches: Vec<PlannedBatch> = pp
        .batches
        .iter()
        .zip(&pp.plan.batches)
        .map(|(b, planned)| {
            let mut b = b.clone();
            for t in &mut b.tasks {
                if let Kernel::Param { name } = &t.kernel {
                    let v = values.get(name.as_str()).cloned().unwrap_or_default();
                    t.kernel = Kernel::Constant {
                        values: v.into_iter().map(Scalar::Float).collect(),
                    };
                }
            }
            PlannedBatch::from_batch(b, planned.deps.clone())
        })
        .collect();
    crate::dispatch::run_batches(invoker, &batches, store, job.compute.workers, |_, _| {})
        .await
        .map_err(|e| anyhow!("{e}"))
}

async fn read(pp: &PlannedPass, name: &str, store: &Store) -> anyhow::Result<ndarray::ArrayD<f64>> {
    let a = &pp.outputs[name];
    Ok(crate::arrays::read_small(a, store)
        .await
        .with_context(|| format!("pass output {name}"))?
        .to_f64()
        .into_owned())
}

/// The pass's outputs as the solver's sums.
async fn read_sums(
    pp: &PlannedPass,
    spec: &FitSpec,
    pass: &Pass,
    d: usize,
    store: &Store,
) -> anyhow::Result<Sums> {
    if pass.kind == PassKind::Normal {
        let xtx = read(pp, names::XTX, store).await?;
        let xty = read(pp, names::XTY, store).await?;
        let sx = read(pp, names::SX, store).await?;
        let sy = read(pp, names::SY, store).await?;
        return Ok(Sums {
            normal: Some((
                xtx.into_dimensionality()?,
                xty.into_dimensionality()?,
                sx.into_dimensionality()?,
                sy.iter().next().copied().unwrap_or(0.0),
            )),
            ..Default::default()
        });
    }
    let k = pass.thetas.len();
    let loss: Vec<f64> = read(pp, names::LOSS, store).await?.iter().copied().collect();
    let gw = read(pp, names::GW, store).await?;
    let gw: Vec<f64> = gw.iter().copied().collect();
    let gb: Vec<f64> = if spec.fit_intercept {
        read(pp, names::GB, store).await?.iter().copied().collect()
    } else {
        Vec::new()
    };
    let grad: Vec<Vec<f64>> = (0..k)
        .map(|c| {
            let mut g: Vec<f64> = (0..d)
                .map(|i| if k == 1 && pass.kind == PassKind::Hessian { gw[i] } else { gw[i * k + c] })
                .collect();
            if spec.fit_intercept {
                g.push(gb[c]);
            }
            g
        })
        .collect();
    let hess = if pass.kind == PassKind::Hessian {
        let p = spec.params(d);
        let hww: Array2<f64> = read(pp, names::HWW, store).await?.into_dimensionality()?;
        let mut h = Array2::zeros((p, p));
        h.slice_mut(ndarray::s![..d, ..d]).assign(&hww);
        if spec.fit_intercept {
            let hwb: Vec<f64> = read(pp, names::HWB, store).await?.iter().copied().collect();
            let hbb = read(pp, names::HBB, store).await?.iter().next().copied().unwrap_or(0.0);
            for i in 0..d {
                h[[i, d]] = hwb[i];
                h[[d, i]] = hwb[i];
            }
            h[[d, d]] = hbb;
        }
        Some(h)
    } else {
        None
    };
    Ok(Sums {
        loss,
        grad,
        hess,
        normal: None,
    })
}
