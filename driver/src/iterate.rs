//! The iteration engine: fits a model by passes over data read in place.
//!
//! X and y are in the store before the loop (`run` makes them once when the job makes
//! them). Each kind of pass (`models::PassKind`) is a small job over X and y — expressions
//! of the job language with the model's parameters as `Param` inputs — planned once by
//! LSHS; each iteration sends the same batches again with the parameters inline in the
//! payload (a `Param` task becomes a `Constant` one), so an iteration costs its pass and
//! its dispatch, never a plan. A pass's outputs are sums of the feature size (loss,
//! gradient, Hessian), read back by the driver, which takes the step (`models::solver`).

use std::collections::HashMap;
use std::time::Instant;

use anyhow::{Context, anyhow};
use ndarray::Array2;
use nums_layout::batch::{Batch, Kernel};
use nums_layout::{Scalar, Store, StoreSpec, StoredArray};
use serde::Serialize;

use crate::dispatch::{Dispatched, Invoker};
use crate::graph::{self, Graph};
use crate::job::{ArrayDef, Job, OutputDef, Source, Target};
use crate::models::solver::{Fit, Fitted, Next, Pass, Sums};
use crate::models::{FitSpec, PassKind, names};
use crate::sched::PlannedBatch;

/// What one fit measured, for `--stats`.
#[derive(Debug, Clone, Serialize)]
pub struct FitReport {
    /// The job's array the fit makes.
    pub array: String,
    pub model: String,
    #[serde(flatten)]
    pub fitted: Fitted,
    /// Per pass: its kind, wall seconds, invocations and store bytes read.
    pub passes: Vec<PassReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PassReport {
    pub kind: String,
    pub wall_seconds: f64,
    pub invocations: u64,
    pub bytes_read: u64,
}

/// Where a fit's data is and what it runs on.
pub(crate) struct Data<'a> {
    pub job: &'a Job,
    pub x_path: &'a str,
    pub y_path: &'a str,
    pub n: u64,
    pub d: usize,
    /// Store prefix for the passes' own arrays (removed at the end).
    pub prefix: String,
    pub invoker: &'a Invoker,
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
        })
        .collect();
    Job {
        arrays: defs,
        outputs,
        ..data.job.clone()
    }
}

/// A job planned once: its batches in the wire format, and where its outputs land.
struct Planned {
    batches: Vec<(Batch, Vec<usize>)>,
    outputs: HashMap<String, StoredArray>,
}

async fn plan_small(job: &Job, prefix: &str) -> anyhow::Result<Planned> {
    let probes = graph::probe(job).await?;
    let g: Graph = graph::build(job, &probes)?;
    let plan = crate::run::plan_job(job, &g, prefix, &probes)?;
    let batches = plan
        .batches
        .iter()
        .map(|b| (b.batch(), b.deps.clone()))
        .collect();
    let mut outputs = HashMap::new();
    for o in &job.outputs {
        let id = g.named[&o.name];
        let path = crate::tasks::node_path(prefix, &g, id);
        outputs.insert(
            o.name.clone(),
            StoredArray::new(&path, g.nodes[id].meta.clone())?,
        );
    }
    Ok(Planned { batches, outputs })
}

/// Sends a planned job's batches once, its parameters filled in from `values`.
async fn dispatch(
    data: &Data<'_>,
    p: &Planned,
    values: &HashMap<&str, Vec<f64>>,
) -> anyhow::Result<Dispatched> {
    let mut batches = Vec::with_capacity(p.batches.len());
    for (b, deps) in &p.batches {
        let mut b = b.clone();
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
        batches.push(PlannedBatch::from_batch(b, deps.clone()));
    }
    crate::dispatch::run_batches(
        data.invoker,
        &batches,
        data.store,
        data.job.compute.workers,
        |_, _| {},
    )
    .await
    .map_err(|e| anyhow!("{e}"))
}

async fn read(p: &Planned, name: &str, store: &Store) -> anyhow::Result<ndarray::ArrayD<f64>> {
    let a = &p.outputs[name];
    Ok(crate::arrays::read_small(a, store)
        .await
        .with_context(|| format!("reading the pass's {name}"))?
        .to_f64()
        .into_owned())
}

fn first(a: &ndarray::ArrayD<f64>) -> f64 {
    a.iter().next().copied().unwrap_or(f64::NAN)
}

/// Refuses labels the model cannot take, and NaN or inf in y, before the first pass.
pub(crate) async fn check_labels(data: &Data<'_>, spec: &FitSpec) -> anyhow::Result<Dispatched> {
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
    let dispatched = dispatch(data, &p, &HashMap::new()).await?;
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
    Ok(dispatched)
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

/// Fits `spec` to the data; `on_pass` sees each pass's dispatch totals and the fit's
/// progress (iteration, loss, largest gradient).
pub(crate) async fn fit(
    data: &Data<'_>,
    spec: &FitSpec,
    mut on_pass: impl FnMut(&Dispatched, u32, Option<f64>, Option<f64>),
) -> anyhow::Result<(Fitted, Vec<PassReport>)> {
    let checked = check_labels(data, spec).await?;
    on_pass(&checked, 0, None, None);
    let mut planned: HashMap<PassKind, Planned> = HashMap::new();
    let mut reports = Vec::new();
    let (mut fit, mut pass) = Fit::start(spec, data.n, data.d);
    let fitted = loop {
        if let std::collections::hash_map::Entry::Vacant(e) = planned.entry(pass.kind) {
            let name = match pass.kind {
                PassKind::Gradient { k } => format!("grad{k}"),
                PassKind::Hessian => "newton".into(),
                PassKind::Normal => "normal".into(),
            };
            let job = pass_job(data, spec, pass.kind);
            e.insert(plan_small(&job, &format!("{}/{name}", data.prefix)).await?);
        }
        let p = &planned[&pass.kind];
        let started = Instant::now();
        let dispatched = dispatch(data, p, &params(spec, &pass, data.d)).await?;
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
        on_pass(
            &dispatched,
            fit.n_iter(),
            fit.last_loss(),
            fit.last_grad_max(),
        );
        match next {
            Next::Pass(p) => pass = p,
            Next::Done(f) => break f,
        }
    };
    // The passes' arrays are of no use after the loop.
    let _ = data.store.delete_prefix(&data.prefix).await;
    Ok((fitted, reports))
}
