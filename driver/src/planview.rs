//! `nums-cloud plan`: LSHS and naive side by side (batches, simulated loads per slot,
//! projected memory against the limit, invocations, estimated cost), as text and SVG.

use std::fmt::Write;

use crate::cost::{CostModel, Projection};
use crate::graph::NodeOp;
use crate::human::{human as mb, mib, plural};
use crate::iterate::{FitPlan, FitTotals};
use crate::job::Job;
use crate::plan::projection;
use crate::sched::Plan;
use crate::svg::Svg;
use nums_layout::DType;
use serde::Serialize;

/// Seconds with two significant digits below 10 s (0.042 s, not 0.0 s), one decimal above.
fn seconds(s: f64) -> String {
    if s >= 10.0 || s == 0.0 {
        format!("{s:.1} s")
    } else {
        let decimals = (1 - s.log10().floor() as i32).max(1) as usize;
        format!("{s:.decimals$} s")
    }
}

/// `plan --json`: what `plan` prints, every batch included.
#[derive(Debug, Serialize)]
pub(crate) struct PlanJson {
    pub job: String,
    pub file: String,
    pub workers: usize,
    pub memory_mb: u64,
    /// Why the plan is provisional (a boolean mask whose values only the run knows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisional: Option<String>,
    pub schedulers: Vec<SchedulerJson>,
}

#[derive(Debug, Serialize)]
pub(crate) struct SchedulerJson {
    pub scheduler: String,
    /// Which of its plans the scheduler keeps (`crate::sched::Plan::kept`).
    pub plan: String,
    pub tasks: usize,
    pub invocations: usize,
    pub store_bytes_read: u64,
    pub store_bytes_written: u64,
    pub peak_intermediate_bytes: u64,
    pub projected_peak_memory_bytes: u64,
    pub memory_limit_bytes: u64,
    /// The cost model's projection (`cost_model` names its calibration).
    pub cost_model: String,
    pub projected_wall_seconds: f64,
    pub estimated_gb_seconds: f64,
    pub estimated_cost_usd: f64,
    /// Per slot: largest invocation memory, store bytes in and out.
    pub loads: Vec<LoadJson>,
    pub batches: Vec<BatchJson>,
    /// The model fits the run makes before the main stage, each pass planned once.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fits: Vec<FitJson>,
    /// The whole run: the main stage and the fits (their passes as assumed, and at most).
    pub run: RunJson,
}

#[derive(Debug, Serialize)]
pub(crate) struct FitJson {
    pub array: String,
    pub model: String,
    /// Its stages are named `<stage>-X`, `<stage>-y`, `<stage>-<pass>-<k>`, ...
    pub stage: String,
    pub iterations_assumed: u32,
    pub max_iter: u32,
    pub passes_assumed: u32,
    pub passes_at_most: u32,
    /// How many passes it assumes, and why.
    pub why: String,
    /// With the passes as assumed, and at most.
    pub assumed: crate::iterate::FitTotals,
    pub at_most: crate::iterate::FitTotals,
    pub stages: Vec<FitStageJson>,
}

#[derive(Debug, Serialize)]
pub(crate) struct FitStageJson {
    pub stage: String,
    pub what: String,
    /// Times it runs as assumed, and at most.
    pub times: u32,
    pub at_most: u32,
    /// One run of the stage.
    pub invocations: usize,
    pub store_bytes_read: u64,
    pub store_bytes_written: u64,
    pub projected_wall_seconds: f64,
    pub estimated_cost_usd: f64,
    /// Its planned invocations, as the main stage's.
    pub batches: Vec<BatchJson>,
}

#[derive(Debug, Serialize)]
pub(crate) struct RunJson {
    pub invocations: u64,
    /// Their block tasks (what a run's progress counts, the fits' passes as assumed).
    pub tasks: u64,
    pub projected_wall_seconds: f64,
    pub estimated_gb_seconds: f64,
    pub estimated_cost_usd: f64,
    /// With every fit at max_iter.
    pub at_most: crate::iterate::FitTotals,
}

#[derive(Debug, Serialize)]
pub(crate) struct LoadJson {
    pub slot: usize,
    pub memory_bytes: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

#[derive(Debug, Serialize)]
pub(crate) struct BatchJson {
    pub slot: usize,
    pub tasks: usize,
    pub bytes_in: u64,
    /// Of `bytes_in`, what its first task that reads fetches before any kernel runs.
    pub first_read_bytes: u64,
    pub bytes_out: u64,
    pub projected_peak_bytes: u64,
    /// Its kernels' work as the cost model counts it: BLAS/LAPACK operations and bytes
    /// streamed through every kernel.
    pub flops: f64,
    pub streamed_bytes: u64,
    /// Bytes of the blocks its tasks make.
    pub made_bytes: u64,
    /// Elements its tasks compute with costly element functions (exp, log, random, ...).
    pub evals: u64,
    /// Bytes of CSV text its tasks read and parse.
    pub parsed_bytes: u64,
    /// The batches it waits for.
    pub after: Vec<usize>,
}

/// One scheduler's plan of a job: its main stage, and the fits before it.
pub(crate) struct Planned<'a> {
    pub main: &'a Plan,
    pub fits: &'a [FitPlan],
}

impl Planned<'_> {
    /// The fits' totals, with their passes as assumed (or at most).
    fn fits_total(&self, job: &Job, at_most: bool) -> FitTotals {
        self.fits.iter().fold(FitTotals::default(), |mut t, f| {
            let f = f.totals(job, at_most);
            t.invocations += f.invocations;
            t.tasks += f.tasks;
            t.bytes_read += f.bytes_read;
            t.bytes_written += f.bytes_written;
            t.wall_seconds += f.wall_seconds;
            t.gb_seconds += f.gb_seconds;
            t.usd += f.usd;
            t
        })
    }

    /// The whole run: the main stage's projection and the fits' totals.
    fn run_total(&self, job: &Job, at_most: bool) -> FitTotals {
        let pr = projection(job, self.main);
        let f = self.fits_total(job, at_most);
        FitTotals {
            invocations: self.main.batches.len() as u64 + f.invocations,
            tasks: (self.main.batches.iter())
                .map(|b| b.num_tasks() as u64)
                .sum::<u64>()
                + f.tasks,
            bytes_read: self.main.bytes_read() + f.bytes_read,
            bytes_written: self.main.bytes_written() + f.bytes_written,
            wall_seconds: pr.wall_seconds + f.wall_seconds,
            gb_seconds: pr.gb_seconds + f.gb_seconds,
            usd: pr.usd + f.usd,
        }
    }
}

/// The plans as `plan --json` prints them.
pub(crate) fn json(job: &Job, planned: &[Planned<'_>], provisional: Option<String>) -> PlanJson {
    let c = &job.compute;
    PlanJson {
        job: job.name.clone(),
        file: job.file.display().to_string(),
        workers: c.workers,
        memory_mb: c.memory_mb,
        provisional,
        schedulers: planned
            .iter()
            .map(|pl| {
                let p = pl.main;
                let pr = projection(job, p);
                let total = pl.run_total(job, false);
                SchedulerJson {
                    scheduler: format!("{:?}", p.scheduler).to_lowercase(),
                    plan: p.kept().to_string(),
                    tasks: p.tasks,
                    invocations: p.batches.len(),
                    store_bytes_read: p.bytes_read(),
                    store_bytes_written: p.bytes_written(),
                    peak_intermediate_bytes: p.intermediate_bytes(),
                    projected_peak_memory_bytes: p.max_projected_peak(),
                    memory_limit_bytes: c.memory_mb << 20,
                    cost_model: pr.model.name.to_string(),
                    projected_wall_seconds: pr.wall_seconds,
                    estimated_gb_seconds: pr.gb_seconds,
                    estimated_cost_usd: pr.usd,
                    loads: p
                        .loads
                        .iter()
                        .enumerate()
                        .map(|(slot, l)| LoadJson {
                            slot,
                            memory_bytes: l.memory,
                            bytes_in: l.bytes_in,
                            bytes_out: l.bytes_out,
                        })
                        .collect(),
                    batches: batches_json(p),
                    fits: pl.fits.iter().map(|f| fit_json(job, f)).collect(),
                    run: RunJson {
                        invocations: total.invocations,
                        tasks: total.tasks,
                        projected_wall_seconds: total.wall_seconds,
                        estimated_gb_seconds: total.gb_seconds,
                        estimated_cost_usd: total.usd,
                        at_most: pl.run_total(job, true),
                    },
                }
            })
            .collect(),
    }
}

fn fit_json(job: &Job, f: &FitPlan) -> FitJson {
    let (passes_assumed, passes_at_most) = f.passes();
    FitJson {
        array: f.array.clone(),
        model: f.model.clone(),
        stage: f.stage.clone(),
        iterations_assumed: f.iterations,
        max_iter: f.max_iter,
        passes_assumed,
        passes_at_most,
        why: f.why(),
        assumed: f.totals(job, false),
        at_most: f.totals(job, true),
        stages: f
            .stages
            .iter()
            .map(|s| {
                let pr = crate::plan::projection_warm(job, &s.plan);
                FitStageJson {
                    stage: s.name.clone(),
                    what: s.what.clone(),
                    times: s.times,
                    at_most: s.at_most,
                    invocations: s.plan.batches.len(),
                    store_bytes_read: s.plan.bytes_read(),
                    store_bytes_written: s.plan.bytes_written(),
                    projected_wall_seconds: pr.wall_seconds,
                    estimated_cost_usd: pr.usd,
                    batches: batches_json(&s.plan),
                }
            })
            .collect(),
    }
}

/// A plan's invocations as `plan --json` lists them.
fn batches_json(p: &Plan) -> Vec<BatchJson> {
    p.batches
        .iter()
        .map(|b| BatchJson {
            slot: b.slot,
            tasks: b.num_tasks(),
            bytes_in: b.bytes_in,
            first_read_bytes: b.first_read,
            bytes_out: b.bytes_out,
            projected_peak_bytes: b.projected_peak,
            flops: b.flops,
            streamed_bytes: b.streamed,
            made_bytes: b.made,
            evals: b.evals,
            parsed_bytes: b.parsed,
            after: b.deps.clone(),
        })
        .collect()
}

/// Why a checked job's plan is provisional, if it is: a boolean mask's values are known
/// only once the run computes it.
pub(crate) fn provisional(c: &crate::plan::Checked) -> Option<String> {
    if let Some(v) = c.values {
        let n = &c.graph.nodes[v];
        let array = n
            .def
            .as_deref()
            .or(n.name.as_deref())
            .map(|a| format!("array {a}"))
            .unwrap_or_else(|| "an array".into());
        let what = match &n.op {
            NodeOp::ScanTotal { x, .. } if c.graph.nodes[*x].meta.dtype == DType::Bool => {
                "indexes with a boolean mask whose values only the run knows: this plan \
                 assumes the mask selects every element (the largest the job can be); the run \
                 counts what each of its blocks selects first"
            }
            NodeOp::IndexHits { .. } => {
                "indexes with an integer array whose values only the run knows: this plan \
                 assumes each block of it reads every block it indexes; the run counts where \
                 its indices fall first"
            }
            _ => {
                "sorts or selects by values only the run knows: this plan assumes even \
                 partitions (a sort) or every element selected (the largest the job can be); \
                 the run computes them first"
            }
        };
        return Some(format!(
            "{array} {what}, in stages of their own (values-N, not in this plan), then plans \
             the rest again with them known"
        ));
    }
    let m = &c.graph.nodes[c.mask?];
    let array = m
        .def
        .as_deref()
        .or(m.name.as_deref())
        .map(|a| format!("array {a}"))
        .unwrap_or_else(|| "an array".into());
    Some(format!(
        "{array} indexes with a boolean mask whose values only the run knows: this plan assumes \
         the mask selects every element (the largest the job can be); the run computes the mask \
         first, in a stage of its own (its invocations are not in this plan), then plans the rest \
         again with the selection known (no more than this plan)"
    ))
}

/// The stages a run adds around the plan's: CSV inputs counted by the functions first,
/// outputs exported after (by the functions to `s3://` `.npy` files, by the driver to
/// local files, block-row by block-row); and the large local `.npy` outputs the plan's
/// own functions write.
pub(crate) fn stages_text(c: &crate::plan::Checked) -> String {
    use crate::job::Target;
    let mut lines = Vec::new();
    let mut names: Vec<&String> = c.probes.0.keys().collect();
    names.sort();
    for name in names {
        if let crate::graph::Probe::Csv { path, index, .. } = &c.probes.0[name]
            && let Some(l) = crate::csv_count::planned(&c.job, path, index.size)
        {
            lines.push(format!("before this plan: {l}"));
        }
    }
    let fused: Vec<&str> = crate::export::by_functions(&c.job, &c.graph)
        .map(|(o, _)| o.name.as_str())
        .collect();
    for o in &c.job.outputs {
        match &o.target {
            Target::Npy(p) if fused.contains(&o.name.as_str()) => lines.push(format!(
                "in this plan: the functions write {} into {}, each block in its place as \
                 they make it",
                o.name,
                p.display()
            )),
            Target::NpyStore { store, key } => lines.push(format!(
                "after this plan: the functions write {} to {}/{key} as the parts of one \
                 multipart upload",
                o.name,
                store.url.trim_end_matches('/')
            )),
            Target::Npy(p) | Target::Csv(p) | Target::Parquet(p) => lines.push(format!(
                "after this plan: the driver writes {} to {} block-row by block-row",
                o.name,
                p.display()
            )),
            Target::Zarr { .. } => {}
        }
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

pub(crate) fn text(job: &Job, planned: &[Planned<'_>]) -> String {
    let plans: Vec<&Plan> = planned.iter().map(|p| p.main).collect();
    let mut s = String::new();
    let c = &job.compute;
    let _ = writeln!(
        s,
        "plan for {}: {}, memory_mb = {}, cost model {}",
        job.file.display(),
        plural(c.workers as u64, "worker", "workers"),
        c.memory_mb,
        CostModel::for_job(job).name
    );
    let _ = write!(s, "{:<28}", "");
    for p in &plans {
        let _ = write!(s, "{:>16}", format!("{:?}", p.scheduler).to_lowercase());
    }
    s.push('\n');
    let proj: Vec<Projection> = plans.iter().map(|p| projection(job, p)).collect();
    let row = |s: &mut String, name: &str, f: &dyn Fn(&Plan, &Projection) -> String| {
        let _ = write!(s, "{name:<28}");
        for (p, pr) in plans.iter().zip(&proj) {
            let _ = write!(s, "{:>16}", f(p, pr));
        }
        s.push('\n');
    };
    row(&mut s, "block tasks", &|p, _| p.tasks.to_string());
    row(&mut s, "invocations", &|p, _| p.batches.len().to_string());
    row(&mut s, "store bytes read", &|p, _| mb(p.bytes_read()));
    row(&mut s, "store bytes written", &|p, _| mb(p.bytes_written()));
    row(&mut s, "peak intermediate storage", &|p, _| {
        mb(p.intermediate_bytes())
    });
    row(&mut s, "projected peak memory", &|p, _| {
        mib(p.max_projected_peak())
    });
    row(&mut s, "memory limit", &|_, _| mib(c.memory_mb << 20));
    row(&mut s, "projected wall time", &|_, pr| {
        seconds(pr.wall_seconds)
    });
    row(&mut s, "estimated GB-seconds", &|_, pr| {
        format!("{:.3}", pr.gb_seconds)
    });
    row(&mut s, "estimated cost", &|_, pr| format!("${:.6}", pr.usd));
    if planned.iter().any(|p| !p.fits.is_empty()) {
        // The fits' stages, with their passes as assumed, then the whole run.
        let rows = |s: &mut String, title: &str, total: &dyn Fn(&Planned<'_>) -> FitTotals| {
            let _ = writeln!(s, "{title}");
            let cells: Vec<FitTotals> = planned.iter().map(total).collect();
            let line = |s: &mut String, name: &str, f: &dyn Fn(&FitTotals) -> String| {
                let _ = write!(s, "{:<28}", format!("  {name}"));
                for c in &cells {
                    let _ = write!(s, "{:>16}", f(c));
                }
                s.push('\n');
            };
            line(s, "invocations", &|c| c.invocations.to_string());
            line(s, "projected wall time", &|c| seconds(c.wall_seconds));
            line(s, "estimated GB-seconds", &|c| {
                format!("{:.3}", c.gb_seconds)
            });
            line(s, "estimated cost", &|c| format!("${:.6}", c.usd));
        };
        let (assumed, _) = planned[0].fits.iter().fold((0, 0), |(a, m), f| {
            let (x, y) = f.passes();
            (a + x, m + y)
        });
        rows(
            &mut s,
            &format!(
                "fits before it ({} assumed)",
                plural(u64::from(assumed), "pass", "passes")
            ),
            &|p| p.fits_total(job, false),
        );
        rows(&mut s, "whole run (fits and main stage)", &|p| {
            p.run_total(job, false)
        });
        rows(&mut s, "whole run, fits at max_iter", &|p| {
            p.run_total(job, true)
        });
    }
    let model = CostModel::for_job(job);
    let _ = writeln!(
        s,
        "(projected by the {} cost model: {}; see BENCHMARKS.md)",
        model.name, model.error_band
    );
    for p in &plans {
        let name = format!("{:?}", p.scheduler).to_lowercase();
        if p.kept() != name {
            // LSHS keeps the plan its cost model projects fastest (`sched::plan`).
            let _ = writeln!(s, "\n{name} keeps {}", p.kept());
        }
        let _ = writeln!(
            s,
            "\n{name}: load per slot (largest invocation memory / store bytes in / store bytes out)"
        );
        for (i, l) in p.loads.iter().enumerate() {
            let _ = writeln!(
                s,
                "  slot {i}: {} / {} / {}",
                mib(l.memory),
                mb(l.bytes_in),
                mb(l.bytes_out)
            );
        }
        let _ = writeln!(s, "{name}: batches");
        let shown = 12;
        for (i, b) in p.batches.iter().enumerate().take(shown) {
            let _ = writeln!(
                s,
                "  #{i:<4} slot {}  {:>10}  in {:>9}  out {:>9}  peak {:>8}  after {:?}",
                b.slot,
                plural(b.num_tasks() as u64, "task", "tasks"),
                mb(b.bytes_in),
                mb(b.bytes_out),
                mib(b.projected_peak),
                b.deps
            );
        }
        if p.batches.len() > shown {
            let _ = writeln!(s, "  ... {} more", p.batches.len() - shown);
        }
    }
    for (i, f) in planned[0].fits.iter().enumerate() {
        let _ = writeln!(
            s,
            "\nfit {} = {}, in stages {}-*, before the main stage:\n  {}",
            f.array,
            f.model,
            f.stage,
            f.why()
        );
        let _ = write!(s, "{:<28}", "  stage (times run)");
        for p in &plans {
            let _ = write!(s, "{:>16}", format!("{:?}", p.scheduler).to_lowercase());
        }
        s.push('\n');
        for (k, st) in f.stages.iter().enumerate() {
            let _ = write!(s, "{:<28}", format!("  {} ({})", st.what, st.times));
            for pl in planned {
                let other = &pl.fits[i].stages[k];
                let pr = crate::plan::projection_warm(job, &other.plan);
                let cell = format!(
                    "{} / {}",
                    other.plan.batches.len(),
                    seconds(pr.wall_seconds)
                );
                let _ = write!(s, "{cell:>16}");
            }
            s.push('\n');
        }
        let _ = writeln!(
            s,
            "  (each: invocations / projected wall time of one run of the stage)"
        );
    }
    s
}

/// Both plans as one SVG: LSHS against naive at a glance (invocations, projected wall
/// time, store bytes read and written, cost: the whole run, fits as assumed), then per
/// scheduler its projected main stage on a time axis, one lane per slot numbered as `plan`
/// numbers them, each slot's store bytes beside its lane, and each invocation's projected
/// peak memory against the limit; the fits' stages and the factorizations under them.
pub(crate) fn svg(job: &Job, planned: &[Planned<'_>], factorizations: &str) -> String {
    use crate::svg::{byte_unit, in_unit};
    let w = 1000.0;
    let (left, plot_w) = (80.0, 600.0);
    let (bars_x, bars_w) = (760.0, 170.0);
    let mem_h = 100.0;
    let mut notes = Vec::new();
    if let Some(first) = planned.first() {
        for (i, f) in first.fits.iter().enumerate() {
            notes.push(format!(
                "fit {} = {}, in stages {}-*, before the main stage: {}",
                f.array,
                f.model,
                f.stage,
                f.why()
            ));
            for (k, st) in f.stages.iter().enumerate() {
                let cells: Vec<String> = planned
                    .iter()
                    .map(|pl| {
                        let other = &pl.fits[i].stages[k];
                        let pr = crate::plan::projection_warm(job, &other.plan);
                        format!(
                            "{} {} / {}",
                            format!("{:?}", pl.main.scheduler).to_lowercase(),
                            plural(other.plan.batches.len() as u64, "invocation", "invocations"),
                            seconds(pr.wall_seconds)
                        )
                    })
                    .collect();
                notes.push(format!(
                    "  {} ({}): {}",
                    st.what,
                    st.times,
                    cells.join(", ")
                ));
            }
        }
    }
    notes.extend(wrap(factorizations, 130));
    let notes: Vec<String> = notes.iter().flat_map(|n| wrap(n, 130)).collect();
    let lanes_of = |p: &Plan| {
        p.batches
            .iter()
            .map(|b| b.slot + 1)
            .max()
            .unwrap_or(0)
            .max(p.loads.len())
            .max(1)
    };
    let panel_h = |p: &Plan| {
        let (lh, gap) = crate::timeline::lane_size(lanes_of(p));
        50.0 + lanes_of(p) as f64 * (lh + gap) + 80.0 + mem_h + 50.0
    };
    let compare_h = 60.0 + 24.0 * planned.len() as f64;
    let h = 76.0
        + compare_h
        + planned.iter().map(|p| panel_h(p.main)).sum::<f64>()
        + 18.0 * notes.len() as f64
        + 10.0;
    let model = CostModel::for_job(job);
    let mut s = Svg::new(
        w,
        h,
        &format!(
            "nums-cloud plan: {} ({}, memory_mb = {})",
            job.name,
            plural(job.compute.workers as u64, "worker", "workers"),
            job.compute.memory_mb
        ),
    );
    let about = format!(
        "projected by the {} cost model ({}); nothing ran",
        model.name, model.error_band
    );
    let about = wrap(&about, 150);
    for (k, line) in about.iter().take(2).enumerate() {
        s.text(
            20.0,
            46.0 + 14.0 * k as f64,
            line.trim(),
            "font-size='11' fill='#555'",
        );
    }

    // LSHS against naive: one row per scheduler, one column per measure.
    let totals: Vec<FitTotals> = planned.iter().map(|p| p.run_total(job, false)).collect();
    let any_fits = planned.iter().any(|p| !p.fits.is_empty());
    let y0 = 86.0;
    s.raw("<g class='compare'>");
    s.text(
        20.0,
        y0,
        &if any_fits {
            let (assumed, _) = planned[0].fits.iter().fold((0, 0), |(a, m), f| {
                let (x, y) = f.passes();
                (a + x, m + y)
            });
            format!(
                "{} at a glance: the whole run (main stage and fits, {} assumed)",
                names(planned),
                plural(u64::from(assumed), "pass", "passes")
            )
        } else {
            format!("{} at a glance: the whole run", names(planned))
        },
        "font-size='14' font-weight='bold'",
    );
    type Measure<'a> = (
        &'a str,
        &'a dyn Fn(&FitTotals) -> f64,
        &'a dyn Fn(&FitTotals) -> String,
    );
    let measures: [Measure<'_>; 5] = [
        ("invocations", &|t| t.invocations as f64, &|t| {
            t.invocations.to_string()
        }),
        ("projected wall time", &|t| t.wall_seconds, &|t| {
            seconds(t.wall_seconds)
        }),
        ("store bytes read", &|t| t.bytes_read as f64, &|t| {
            mb(t.bytes_read)
        }),
        ("store bytes written", &|t| t.bytes_written as f64, &|t| {
            mb(t.bytes_written)
        }),
        ("estimated cost", &|t| t.usd, &|t| format!("${:.6}", t.usd)),
    ];
    let col_w = (w - 70.0) / measures.len() as f64;
    for (k, (name, value, text)) in measures.iter().enumerate() {
        let x = 70.0 + col_w * k as f64;
        s.text(x, y0 + 24.0, name, "font-weight='bold'");
        let max = totals.iter().map(value).fold(0.0, f64::max);
        for (r, t) in totals.iter().enumerate() {
            let y = y0 + 32.0 + 24.0 * r as f64;
            let bw = if max > 0.0 {
                (col_w - 90.0) * value(t) / max
            } else {
                0.0
            };
            let sched = format!("{:?}", planned[r].main.scheduler).to_lowercase();
            s.rect(
                x,
                y,
                bw.max(1.0),
                16.0,
                scheduler_colour(r),
                &format!("class='compare-bar' data-scheduler='{sched}' data-measure='{name}'"),
                &format!("{sched}: {name} {}", text(t)),
            );
            s.text(x + bw.max(1.0) + 4.0, y + 12.5, &text(t), "font-size='11'");
        }
    }
    for (r, p) in planned.iter().enumerate() {
        s.text(
            62.0,
            y0 + 44.5 + 24.0 * r as f64,
            &format!("{:?}", p.main.scheduler).to_lowercase(),
            &format!(
                "text-anchor='end' fill='{}' font-weight='bold'",
                scheduler_colour(r)
            ),
        );
    }
    s.raw("</g>");

    let limit = job.compute.memory_mb << 20;
    let mut y0 = 76.0 + compare_h;
    for pl in planned {
        let p = pl.main;
        let name = format!("{:?}", p.scheduler).to_lowercase();
        let pr = projection(job, p);
        let lanes = lanes_of(p);
        s.raw(&format!("<g class='plan' data-scheduler='{name}'>"));
        s.text(
            20.0,
            y0 + 16.0,
            &format!(
                "{name}, main stage: {}, read {}, wrote {}, projected {}, {:.3} GB-s, ${:.6}",
                plural(p.batches.len() as u64, "invocation", "invocations"),
                mb(p.bytes_read()),
                mb(p.bytes_written()),
                seconds(pr.wall_seconds),
                pr.gb_seconds,
                pr.usd
            ),
            "font-size='14' font-weight='bold'",
        );
        // Left: the projected main stage, one lane per slot of the plan.
        let lanes_top = y0 + 46.0;
        let (lh, gap) = crate::timeline::lane_size(lanes);
        let axis_y = lanes_top + lanes as f64 * (lh + gap);
        let tmax = pr.wall_seconds.max(1e-3);
        let scale = s.x_axis(
            left,
            axis_y,
            plot_w,
            tmax,
            " s",
            "projected time of the main stage (seconds)",
        );
        s.text(
            left,
            lanes_top - 8.0,
            "projected invocations per slot (bars: compute, store I/O, sending)",
            "",
        );
        crate::timeline::draw_lanes(
            &mut s,
            &pr.timeline,
            lanes,
            left,
            lanes_top,
            plot_w,
            scale,
            true,
        );
        if pr.timeline.iter().any(|i| i.planned_slot != i.slot) {
            s.text(
                left,
                axis_y + 46.0,
                "black top edge: sent to the slot free first (as the driver sends), not the planned one",
                "font-size='11' fill='#555'",
            );
        }
        // Right: each slot's store bytes, beside its lane, in one unit for axis and values.
        let unit = byte_unit(
            p.loads
                .iter()
                .flat_map(|l| [l.bytes_in, l.bytes_out])
                .max()
                .unwrap_or(0),
        );
        let top = crate::svg::ticks(
            p.loads
                .iter()
                .flat_map(|l| [l.bytes_in, l.bytes_out])
                .max()
                .unwrap_or(0) as f64
                / unit.0,
            3,
        );
        let top_v = *top.last().unwrap_or(&1.0);
        s.text(
            bars_x,
            lanes_top - 8.0,
            &format!("store bytes per slot ({})", unit.1),
            "",
        );
        s.raw("<g class='loads'>");
        for (k, l) in p.loads.iter().enumerate() {
            let y = lanes_top + k as f64 * (lh + gap);
            for (j, (what, v, fill)) in [
                ("in", l.bytes_in, "#f58518"),
                ("out", l.bytes_out, "#54a24b"),
            ]
            .into_iter()
            .enumerate()
            {
                let bw = bars_w * v as f64 / unit.0 / top_v;
                let yy = y + j as f64 * lh / 2.0;
                s.rect(
                    bars_x,
                    yy,
                    bw,
                    lh / 2.0 - 0.5,
                    fill,
                    &format!("class='load' data-slot='{k}' data-dir='{what}'"),
                    &format!("slot {k}: store bytes {what} {}", in_unit(v, unit)),
                );
                if lh >= 20.0 {
                    s.text(
                        bars_x + bw + 3.0,
                        yy + lh / 2.0 - 2.0,
                        &format!("{what} {}", in_unit(v, unit)),
                        "font-size='9'",
                    );
                }
            }
        }
        s.raw("</g>");
        s.raw("<g class='axis x-axis loads-axis'>");
        s.line(bars_x, axis_y, bars_x + bars_w, axis_y, "stroke='black'");
        let step = top.get(1).copied().unwrap_or(top_v);
        for v in &top {
            let x = bars_x + bars_w * v / top_v;
            s.line(x, axis_y, x, axis_y + 4.0, "stroke='black'");
            s.text(
                x,
                axis_y + 16.0,
                &crate::svg::tick_label(*v, step),
                "text-anchor='middle'",
            );
        }
        s.text(
            bars_x + bars_w / 2.0,
            axis_y + 32.0,
            &format!("{} (in: orange, out: green)", unit.1),
            "text-anchor='middle'",
        );
        s.raw("</g>");
        // Under them: each invocation's projected peak memory, on the same time axis.
        let mem_bottom = axis_y + 80.0 + mem_h;
        crate::timeline::draw_memory(
            &mut s,
            &pr.timeline,
            left,
            plot_w,
            scale,
            mem_bottom,
            mem_h,
            limit,
            "projected peak memory of each invocation (MiB), by slot, against memory_mb",
        );
        s.x_axis(left, mem_bottom, plot_w, tmax, " s", "");
        crate::timeline::slot_legend(
            &mut s,
            bars_x - 40.0,
            mem_bottom - mem_h + 10.0,
            lanes.min(4),
        );
        s.raw("</g>");
        y0 += panel_h(p);
    }
    for (i, line) in notes.iter().enumerate() {
        // SVG collapses leading spaces: a detail line's indent is its x.
        let indent = line.len() - line.trim_start().len();
        let bold = if indent > 0 { "" } else { "font-weight='bold'" };
        s.text(
            20.0 + 7.0 * indent as f64,
            y0 + 18.0 * i as f64,
            line.trim_start(),
            bold,
        );
    }
    s.finish()
}

/// The schedulers' names as a title says them: `lshs and naive`.
fn names(planned: &[Planned<'_>]) -> String {
    let n: Vec<String> = planned
        .iter()
        .map(|p| format!("{:?}", p.main.scheduler).to_lowercase())
        .collect();
    n.join(" against ")
}

fn scheduler_colour(k: usize) -> &'static str {
    ["#4c78a8", "#e45756", "#54a24b"][k % 3]
}

/// `text`'s non-empty lines, each cut at spaces into lines of at most `width` characters
/// (a continuation indented like a detail line).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let indent = &line[..line.len() - line.trim_start().len()];
        let mut cur = indent.to_string();
        let mut fresh = true; // nothing after the indent yet
        for word in line.trim_start().split(' ') {
            if !fresh && cur.len() + 1 + word.len() > width {
                out.push(std::mem::take(&mut cur));
                cur = format!("{indent}    ");
                fresh = true;
            }
            if !fresh {
                cur.push(' ');
            }
            cur.push_str(word);
            fresh = false;
        }
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factorization_notes_wrap_at_spaces_and_keep_their_indent() {
        let text = "\nLU in X: one two three four\n  level 0: five six seven\n";
        assert_eq!(
            wrap(text, 16),
            [
                "LU in X: one two",
                "    three four",
                "  level 0: five",
                "      six seven"
            ]
        );
    }

    #[test]
    fn projected_seconds_keep_two_significant_digits() {
        let s = super::seconds;
        assert_eq!(
            [s(0.0), s(0.042), s(0.3), s(2.66), s(29.94)],
            ["0.0 s", "0.042 s", "0.30 s", "2.7 s", "29.9 s"]
        );
    }
}
