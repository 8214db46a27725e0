//! The one executor: whichever front end asks (a job file's run, a session of the Rust
//! API or of Python), a computation runs here, in one order, through the stage runner:
//!
//! 1. **settle** — what its shapes wait for (the positions a boolean mask selects, a
//!    sort's samples and partition sizes) computed from the part of the graph they
//!    depend on, each in a stage of its own, and the graph built again with them known;
//! 2. **fit** — each model it needs fitted (`iterate`): X and y made in a stage of their
//!    own unless stored, then the passes, the coefficients stored as a block;
//! 3. **main** — the rest planned (LSHS or naive) and run as one stage, the arrays it
//!    keeps described in their `zarr.json` first.
//!
//! What happens reaches the caller through the stages' [`Observer`](crate::stage::Observer)
//! (a run's `--stats` history and bar, a session's counts and bar). What a run adds
//! around it (the lease, the journal, the commit, the exports) stays in `run`; what a
//! session adds (which arrays it holds and where they are stored) stays in `api`.

use anyhow::anyhow;
use nums_layout::{Block, StoredArray};

use crate::graph::{self, Graph, NodeId, NodeOp};
use crate::models::solver::Fitted;
use crate::report::FitReport;
use crate::stage::Stages;
use crate::tasks;

/// What a fit that did not meet its tolerance does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unconverged {
    /// Fails the computation: a job's answer is only a converged fit.
    Fail,
    /// Keeps the coefficients and says so in [`Fitted::converged`] (scikit-learn's
    /// estimators warn instead of failing).
    Report,
}

/// Builds a graph again with what is known of its values so far.
pub(crate) type Rebuild<'a> =
    Box<dyn Fn(&graph::Known) -> anyhow::Result<graph::Built> + Send + Sync + 'a>;

/// What a graph's shapes wait for, and how it is built again once that is known.
pub(crate) struct Settle<'a> {
    /// The first node whose values the graph waits for, and whether it is a boolean mask
    /// (its selected positions are what is known) rather than a small node's values.
    pub first: (NodeId, bool),
    /// The graph built again with what is known so far.
    pub rebuild: Rebuild<'a>,
}

/// One computation: its graph (the arrays it keeps are its `persist` nodes).
pub(crate) struct Computation<'a> {
    pub graph: Graph,
    /// What its shapes wait for, if anything.
    pub settle: Option<Settle<'a>>,
    /// The main stage's graph from the settled one (a job's file outputs added).
    pub main: Option<Box<dyn FnOnce(Graph) -> anyhow::Result<Graph> + Send + 'a>>,
    pub unconverged: Unconverged,
}

/// What a computation made.
pub(crate) struct Executed {
    /// The graph settled (every shape known), as its main stage's arrays are numbered.
    pub graph: Graph,
    /// The main stage's graph (imports the earlier stages made read in place).
    pub main: Graph,
    /// The models fitted (their nodes in `graph`).
    pub fits: Vec<(NodeId, Fitted)>,
}

/// Runs computation `c` through `stages`; `probes` are what its inputs held when the
/// graph was built.
pub(crate) async fn execute(
    c: Computation<'_>,
    stages: &Stages<'_>,
    probes: &graph::Probes,
) -> anyhow::Result<Executed> {
    let g = settle(c.graph, c.settle, stages, probes).await?;
    let fits = fit_all(stages, &g, probes, c.unconverged).await?;
    // The imports the earlier stages made are read where they are.
    let main = stages.with_made_imports(&g)?;
    let main = match c.main {
        Some(f) => f(main)?,
        None => main,
    };
    let prefix = stages.prefix()?;
    let plan = stages.plan(&main, &prefix, probes)?;
    stages.planned("main", &plan);
    stages.expect("main", &crate::stage::Expected::of(&stages.cfg, &plan));
    stages.run_plan("main", &main, &plan).await?;
    Ok(Executed {
        graph: g,
        main,
        fits,
    })
}

/// Computes what the graph's shapes depend on — the boolean masks it indexes with, the
/// samples and partition sizes of its sorts — each from the part of the graph it depends
/// on, in its own stage, then builds the graph with the values known.
async fn settle(
    mut g: Graph,
    settle: Option<Settle<'_>>,
    stages: &Stages<'_>,
    probes: &graph::Probes,
) -> anyhow::Result<Graph> {
    let Some(settle) = settle else {
        return Ok(g);
    };
    let prefix = stages.prefix()?;
    let mut next = Some(settle.first);
    let mut known = graph::Known::default();
    let mut rounds = 0;
    while let Some((n, is_mask)) = next {
        // Each round learns the values of another node: more rounds than nodes would be
        // a graph that never settles.
        rounds += 1;
        if rounds > g.nodes.len() {
            return Err(anyhow!(
                "the graph's shapes still depend on values after {} stages",
                rounds - 1
            ));
        }
        // Not an identifier, so never the name of one of the job's arrays.
        let name = if is_mask {
            format!("mask-{n}")
        } else {
            format!("values-{n}")
        };
        let (sub, root) = g.subgraph(n, &name);
        stages.run_graph(&name, &sub, probes).await?;
        let arr = StoredArray::new(
            &tasks::node_path(&prefix, &sub, root),
            sub.nodes[root].meta.clone(),
        )?;
        let values = arr.read_whole(stages.store).await?;
        if is_mask {
            known
                .masks
                .insert(n, graph::positions(&values).map_err(|e| anyhow!(e))?);
        } else {
            known.values.insert(n, values);
        }
        next = match (settle.rebuild)(&known)? {
            graph::Built::Done(done) => {
                g = done;
                None
            }
            graph::Built::NeedMask { graph, mask } => {
                g = graph;
                Some((mask, true))
            }
            graph::Built::NeedValues { graph, node } => {
                g = graph;
                Some((node, false))
            }
        };
    }
    Ok(g)
}

/// Fits the models (`Fit` nodes of `g`) the computation needs before the main stage,
/// which reads their coefficients like stored blocks: X and y are made once in a stage
/// of their own when they are not stored (and removed after, unless an import, which
/// later stages read), then [`crate::iterate::fit`] runs the passes.
async fn fit_all(
    stages: &Stages<'_>,
    g: &Graph,
    probes: &graph::Probes,
    unconverged: Unconverged,
) -> anyhow::Result<Vec<(NodeId, Fitted)>> {
    let store = stages.store;
    let prefix = stages.prefix()?;
    let work = tasks::block_work(g);
    // As `plan` projects a job's fits: what the progress total expects of each.
    let planned = match stages.origin {
        Some(job) => {
            crate::iterate::plan_fits(job, g, probes, stages.cfg.compute.scheduler, &prefix)?
        }
        None => Vec::new(),
    };
    let mut fits = Vec::new();
    for n in &g.nodes {
        let NodeOp::Fit { x, y, spec } = &n.op else {
            continue;
        };
        if !(n.persist || work.needed(n.id)) {
            continue;
        }
        let stage = format!("fit{}", n.id);
        let mut ahead = match planned.iter().find(|f| f.stage == stage) {
            Some(f) => crate::iterate::Ahead::of(f),
            None => Default::default(),
        };
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
                    let name = format!("{stage}-{what}");
                    ahead.start(what);
                    let (sub, root) = g.subgraph(v, &name);
                    stages.run_graph(&name, &sub, probes).await?;
                    let path = tasks::node_path(&prefix, &sub, root);
                    // An import is the computation's to keep (and later stages read it).
                    if !g.nodes[v].op.is_import() {
                        made.push(path.clone());
                    }
                    path
                }
            };
        }
        for (v, path) in [(*x, &paths[0]), (*y, &paths[1])] {
            // (Another tool's array, read in place, is described where it is.)
            if !matches!(
                &g.nodes[v].op,
                NodeOp::InPlace {
                    foreign: Some(_),
                    ..
                }
            ) {
                stages
                    .describe(path, &g.nodes[v].meta)
                    .await
                    .map_err(about)?;
            }
        }
        let mx = &g.nodes[*x].meta;
        let data = crate::iterate::Data {
            cfg: &stages.cfg,
            x_path: &paths[0],
            y_path: &paths[1],
            n: mx.shape[0],
            d: mx.shape[1] as usize,
            weighted: g.nodes[*y].meta.ndim() == 2,
            x_dtype: mx.dtype,
            prefix: format!("{prefix}/fit{}", n.id),
            stage: stage.clone(),
            stages,
            store,
            ahead: std::sync::Mutex::new(ahead),
        };
        let (fitted, passes) = crate::iterate::fit(&data, spec, &array)
            .await
            .map_err(about)?;
        for p in made {
            let _ = store.delete_prefix(&p).await;
        }
        if !fitted.converged && unconverged == Unconverged::Fail {
            return Err(anyhow!(
                "array `{array}`: {} did not converge: {}; raise max_iter, loosen tol or scale X",
                crate::models::describe(spec),
                fitted
                    .why_not
                    .as_deref()
                    .unwrap_or("the tolerance was not met")
            ));
        }
        let out = StoredArray::new(&tasks::node_path(&prefix, g, n.id), n.meta.clone())?;
        // One block: [coef..., intercept], or a row of them per class (multinomial).
        let shape: Vec<usize> = n.meta.shape.iter().map(|&s| s as usize).collect();
        let coef = ndarray::ArrayD::from_shape_vec(shape.clone(), fitted.theta.clone())?;
        out.write_block(store, &vec![0; shape.len()], &Block::F64(coef))
            .await?;
        stages.fitted(
            n.id,
            &FitReport {
                array: array.clone(),
                model: crate::models::describe(spec),
                fitted: fitted.clone(),
                passes,
            },
        );
        fits.push((n.id, fitted));
    }
    Ok(fits)
}
