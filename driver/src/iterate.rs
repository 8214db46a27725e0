//! The iteration engine: fits a model by passes over data read in place.
//!
//! X and y are in the store before the loop ([`fit_all`] makes them once, in a stage of
//! their own, when the job makes them). Each kind of pass (`models::PassKind`) is a small job over X and y — expressions
//! of the job language with the model's parameters as `Param` inputs — planned once by
//! LSHS; each iteration sends the same batches again with the parameters inline in the
//! payload (a `Param` task becomes a `Constant` one), so an iteration costs its pass and
//! its dispatch, never a plan. A pass's outputs are sums of the feature size (loss,
//! gradient, Hessian), read back by the driver, which takes the step (`models::solver`).
//! Every pass is a stage of the run's stage runner (`fit<N>-check`, `fit<N>-<pass>-<k>`):
//! its invocations are in `--stats`, the timeline and the progress bar like any other.

use std::collections::HashMap;
use std::time::Instant;

use anyhow::{Context, anyhow};
use ndarray::Array2;
use nums_layout::batch::Kernel;
use nums_layout::{Block, Scalar, Store, StoreSpec, StoredArray};

use crate::dispatch::Dispatched;
use crate::graph::{self, Graph, NodeOp};
use crate::job::{ArrayDef, Job, OutputDef, Source, Target};
use crate::models::solver::{Fit, Fitted, Next, Pass, Sums};
use crate::models::{FitSpec, PassKind, names};
use crate::report::{FitReport, PassReport};
use crate::sched::PlannedBatch;
use crate::stage::{History, Resume, Stages};
use crate::tasks;

/// Where a fit's data is and what it runs on.
pub(crate) struct Data<'a> {
    pub job: &'a Job,
    pub x_path: &'a str,
    pub y_path: &'a str,
    pub n: u64,
    pub d: usize,
    /// Store prefix for the passes' own arrays (removed at the end).
    pub prefix: String,
    /// What the passes' stages are named after (`fit<N>`).
    pub stage: String,
    pub stages: &'a Stages<'a>,
    pub store: &'a Store,
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
fn small_job(data: &Data, arrays: Vec<(String, Source)>, outputs: &[&str]) -> Job {
    let mut defs = vec![
        def(
            "X",
            Source::Load {
                path: location(&data.job.storage, data.x_path),
                csv: Default::default(),
            },
        ),
        def(
            "y",
            Source::Load {
                path: location(&data.job.storage, data.y_path),
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
                store: data.job.storage.clone(),
                path: String::new(),
            },
            header: None,
        })
        .collect();
    Job {
        arrays: defs,
        outputs,
        ..data.job.clone()
    }
}

/// A job planned once: its batches, and where its outputs land.
struct Planned {
    batches: Vec<PlannedBatch>,
    tasks: u64,
    outputs: HashMap<String, StoredArray>,
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
    })
}

/// Sends a planned job's batches once as stage `stage`, its parameters filled in from
/// `values`.
async fn dispatch(
    data: &Data<'_>,
    stage: &str,
    p: &Planned,
    values: &HashMap<&str, Vec<f64>>,
) -> anyhow::Result<Dispatched> {
    let mut batches = Vec::with_capacity(p.batches.len());
    for planned in &p.batches {
        let mut b = planned.batch();
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
    data.stages
        .run(stage, &batches, p.tasks, Resume::Never)
        .await
}

async fn read(p: &Planned, name: &str, store: &Store) -> anyhow::Result<ndarray::ArrayD<f64>> {
    let a = &p.outputs[name];
    Ok(a.read_whole(store)
        .await
        .with_context(|| format!("reading the pass's {name}"))?
        .to_f64()
        .into_owned())
}

fn first(a: &ndarray::ArrayD<f64>) -> f64 {
    a.iter().next().copied().unwrap_or(f64::NAN)
}

/// Refuses labels the model cannot take, and NaN or inf in y, before the first pass.
async fn check_labels(data: &Data<'_>, spec: &FitSpec) -> anyhow::Result<()> {
    let checks = crate::models::checks(spec);
    let names: Vec<&str> = checks.iter().map(|(n, _)| n.as_str()).collect();
    let job = small_job(
        data,
        checks
            .iter()
            .map(|(n, e)| (n.clone(), Source::Expr { text: e.clone() }))
            .collect(),
        &names,
    );
    let p = plan_small(&job, &format!("{}/check", data.prefix)).await?;
    let stage = format!("{}-check", data.stage);
    dispatch(data, &stage, &p, &HashMap::new()).await?;
    let mut counts = Vec::new();
    for n in &names {
        counts.push(first(&read(&p, n, data.store).await?));
    }
    let what = match spec.family {
        crate::models::Family::Logistic => "labels other than 0 and 1 (binary classification)",
        crate::models::Family::Poisson => "negative values (Poisson targets are counts)",
        crate::models::Family::Linear => "",
    };
    if counts[0] > 0.0 && !what.is_empty() {
        return Err(anyhow!("y has {} {what}", counts[0] as u64));
    }
    if counts[1] > 0.0 || counts[2] > 0.0 {
        return Err(anyhow!(
            "y holds {} NaN and {} infinite values",
            counts[1] as u64,
            counts[2] as u64
        ));
    }
    // Labels of one class: no boundary to find (scikit-learn's words).
    if let Some(&ones) = counts.get(3)
        && data.n > 0
        && (ones == 0.0 || ones == data.n as f64)
    {
        return Err(anyhow!(
            "This solver needs samples of at least 2 classes in the data, but the data contains only one class: {}",
            if ones == 0.0 { "0.0" } else { "1.0" }
        ));
    }
    Ok(())
}

/// The job of one pass of `kind`.
fn pass_job(data: &Data, spec: &FitSpec, kind: PassKind) -> Job {
    let (exprs, outputs) = crate::models::program(spec, kind);
    let d = data.d as u64;
    let mut arrays = Vec::new();
    if kind != PassKind::Normal {
        let (w, b) = match kind {
            PassKind::Gradient { k } => (vec![d, k as u64], vec![k as u64]),
            _ => (vec![d], vec![1]),
        };
        arrays.push((names::W.to_string(), Source::Param { shape: w }));
        if spec.fit_intercept {
            arrays.push((names::B.to_string(), Source::Param { shape: b }));
        }
    }
    arrays.extend(
        exprs
            .into_iter()
            .map(|(n, e)| (n, Source::Expr { text: e })),
    );
    small_job(data, arrays, &outputs)
}

/// The parameter arrays of a pass: `w_` ([d] or [d, k]) and `b_` ([1] or [k]).
fn params(spec: &FitSpec, pass: &Pass, d: usize) -> HashMap<&'static str, Vec<f64>> {
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

/// The pass's outputs as the solver's sums.
async fn read_sums(
    p: &Planned,
    spec: &FitSpec,
    pass: &Pass,
    d: usize,
    store: &Store,
) -> anyhow::Result<Sums> {
    if pass.kind == PassKind::Normal {
        return Ok(Sums {
            normal: Some((
                read(p, names::XTX, store).await?.into_dimensionality()?,
                read(p, names::XTY, store).await?.into_dimensionality()?,
                read(p, names::SX, store).await?.into_dimensionality()?,
                first(&read(p, names::SY, store).await?),
            )),
            ..Default::default()
        });
    }
    let k = pass.thetas.len();
    let loss: Vec<f64> = read(p, names::LOSS, store).await?.iter().copied().collect();
    let gw: Vec<f64> = read(p, names::GW, store).await?.iter().copied().collect();
    let gb: Vec<f64> = if spec.fit_intercept {
        read(p, names::GB, store).await?.iter().copied().collect()
    } else {
        Vec::new()
    };
    // The Hessian pass's gradient is [d]; a gradient pass's is [d, k].
    let grad = (0..k)
        .map(|c| {
            let mut g: Vec<f64> = (0..d).map(|i| gw[i * k + c]).collect();
            if spec.fit_intercept {
                g.push(gb[c]);
            }
            g
        })
        .collect();
    let hess = if pass.kind == PassKind::Hessian {
        let hww: Array2<f64> = read(p, names::HWW, store).await?.into_dimensionality()?;
        let mut h = Array2::zeros((spec.params(d), spec.params(d)));
        h.slice_mut(ndarray::s![..d, ..d]).assign(&hww);
        if spec.fit_intercept {
            let hwb = read(p, names::HWB, store).await?;
            for (i, v) in hwb.iter().enumerate() {
                h[[i, d]] = *v;
                h[[d, i]] = *v;
            }
            h[[d, d]] = first(&read(p, names::HBB, store).await?);
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

/// Fits `spec` to the data (`array`, the job's array it makes, for the progress notes):
/// returns the fit and what each pass measured.
pub(crate) async fn fit(
    data: &Data<'_>,
    spec: &FitSpec,
    array: &str,
) -> anyhow::Result<(Fitted, Vec<PassReport>)> {
    check_labels(data, spec).await?;
    let mut planned: HashMap<PassKind, Planned> = HashMap::new();
    let mut reports = Vec::new();
    let (mut fit, mut pass) = Fit::start(spec, data.n, data.d);
    let fitted = loop {
        let name = match pass.kind {
            PassKind::Gradient { k } => format!("grad{k}"),
            PassKind::Hessian => "newton".into(),
            PassKind::Normal => "normal".into(),
        };
        if let std::collections::hash_map::Entry::Vacant(e) = planned.entry(pass.kind) {
            let job = pass_job(data, spec, pass.kind);
            e.insert(plan_small(&job, &format!("{}/{name}", data.prefix)).await?);
        }
        let p = &planned[&pass.kind];
        let started = Instant::now();
        let stage = format!("{}-{name}-{}", data.stage, reports.len() + 1);
        let dispatched = dispatch(data, &stage, p, &params(spec, &pass, data.d)).await?;
        let sums = read_sums(p, spec, &pass, data.d, data.store).await?;
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
        let next = fit.step(&pass, sums).map_err(|e| anyhow!(e))?;
        if let (Some(l), Some(gm)) = (fit.last_loss(), fit.last_grad_max()) {
            data.stages.note(&format!(
                "{array}: iteration {}, loss {l:.6e}, largest gradient {gm:.2e}",
                fit.n_iter()
            ));
        }
        match next {
            Next::Pass(p) => pass = p,
            Next::Done(f) => break f,
        }
    };
    data.stages.note("");
    // The passes' arrays are of no use after the loop.
    let _ = data.store.delete_prefix(&data.prefix).await;
    Ok((fitted, reports))
}

/// Fits the job's models (`Fit` nodes of `g`) before the main stage, which reads their
/// coefficients like stored blocks: X and y are made once in a stage of their own when
/// the job makes them (read in place when they are stored), then [`fit`] runs the
/// passes; what each fit measured goes to `history`.
pub(crate) async fn fit_all(
    stages: &Stages<'_>,
    g: &Graph,
    probes: &graph::Probes,
    history: &History,
) -> anyhow::Result<()> {
    let (job, store) = (stages.job, stages.store);
    let prefix = stages.prefix()?;
    let work = tasks::block_work(g);
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
        let about = |e: anyhow::Error| {
            e.context(format!(
                "array `{array}`: {}",
                crate::models::describe(spec)
            ))
        };
        let mut paths = [String::new(), String::new()];
        let mut made = Vec::new();
        for (i, (v, what)) in [(*x, "X"), (*y, "y")].into_iter().enumerate() {
            paths[i] = match &g.nodes[v].op {
                NodeOp::InPlace { path, .. } => path.clone(),
                _ => {
                    // Not an identifier, so never the name of one of the job's arrays.
                    let name = format!("fit{}-{what}", n.id);
                    let (sub, root) = g.subgraph(v, &name);
                    stages.run_graph(&name, &sub, probes).await?;
                    let path = tasks::node_path(&prefix, &sub, root);
                    made.push(path.clone());
                    path
                }
            };
        }
        let mx = &g.nodes[*x].meta;
        let data = Data {
            job,
            x_path: &paths[0],
            y_path: &paths[1],
            n: mx.shape[0],
            d: mx.shape[1] as usize,
            prefix: format!("{prefix}/fit{}", n.id),
            stage: format!("fit{}", n.id),
            stages,
            store,
        };
        let (fitted, passes) = fit(&data, spec, &array).await.map_err(about)?;
        for p in made {
            let _ = store.delete_prefix(&p).await;
        }
        if !fitted.converged {
            tracing::warn!(
                "array `{array}`: {} did not converge in max_iter = {} \
                 (largest gradient {:.3e} > tol {}); raise max_iter or scale X",
                crate::models::describe(spec),
                crate::human::plural(spec.max_iter as u64, "iteration", "iterations"),
                fitted.grad_max.last().copied().unwrap_or(f64::NAN),
                spec.tol
            );
        }
        let out = StoredArray::new(&tasks::node_path(&prefix, g, n.id), n.meta.clone())?;
        let coef = Block::F64(ndarray::Array1::from(fitted.theta.clone()).into_dyn());
        out.write_block(store, &[0], &coef).await?;
        history.fitted(FitReport {
            array: array.clone(),
            model: crate::models::describe(spec),
            fitted,
            passes,
        });
    }
    Ok(())
}
