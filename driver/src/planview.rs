//! `nums-cloud plan`: LSHS and naive side by side (batches, simulated loads per slot,
//! projected memory against the limit, invocations, estimated cost), as text and SVG.

use std::fmt::Write;

use crate::job::Job;
use crate::report::{
    USD_PER_GB_SECOND, USD_PER_INVOCATION, USD_PER_S3_GET, USD_PER_S3_PUT, human as mb, mib,
};
use crate::sched::Plan;
use serde::Serialize;

/// Store throughput assumed by the estimate (measured on Garage, BENCHMARKS.md) and the
/// fixed cost of an invocation.
const READ_BPS: f64 = 400e6;
const WRITE_BPS: f64 = 200e6;
const INVOKE_SECONDS: f64 = 0.02;

/// Estimated (GB-seconds, USD) of a plan.
pub fn estimate(plan: &Plan, memory_mb: u64) -> (f64, f64) {
    let secs: f64 = plan
        .batches
        .iter()
        .map(|b| INVOKE_SECONDS + b.bytes_in as f64 / READ_BPS + b.bytes_out as f64 / WRITE_BPS)
        .sum();
    let gbs = secs * memory_mb as f64 / 1024.0;
    let gets: u64 = plan.batches.iter().map(|b| b.gets).sum();
    let puts: u64 = plan.batches.iter().map(|b| b.puts).sum();
    let usd = gbs * USD_PER_GB_SECOND
        + plan.batches.len() as f64 * USD_PER_INVOCATION
        + gets as f64 * USD_PER_S3_GET
        + puts as f64 * USD_PER_S3_PUT;
    (gbs, usd)
}

/// `plan --json`: what `plan` prints, every batch included.
#[derive(Debug, Serialize)]
pub struct PlanJson {
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
pub struct SchedulerJson {
    pub scheduler: String,
    pub tasks: usize,
    pub invocations: usize,
    pub store_bytes_read: u64,
    pub store_bytes_written: u64,
    pub peak_intermediate_bytes: u64,
    pub projected_peak_memory_bytes: u64,
    pub memory_limit_bytes: u64,
    pub estimated_gb_seconds: f64,
    pub estimated_cost_usd: f64,
    /// Per slot: largest invocation memory, store bytes in and out.
    pub loads: Vec<LoadJson>,
    pub batches: Vec<BatchJson>,
}

#[derive(Debug, Serialize)]
pub struct LoadJson {
    pub slot: usize,
    pub memory_bytes: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

#[derive(Debug, Serialize)]
pub struct BatchJson {
    pub slot: usize,
    pub tasks: usize,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub projected_peak_bytes: u64,
    /// The batches it waits for.
    pub after: Vec<usize>,
}

/// The plans as `plan --json` prints them.
pub fn json(job: &Job, plans: &[&Plan], provisional: Option<String>) -> PlanJson {
    let c = &job.compute;
    PlanJson {
        job: job.name.clone(),
        file: job.file.display().to_string(),
        workers: c.workers,
        memory_mb: c.memory_mb,
        provisional,
        schedulers: plans
            .iter()
            .map(|p| {
                let (gbs, usd) = estimate(p, c.memory_mb);
                SchedulerJson {
                    scheduler: format!("{:?}", p.scheduler).to_lowercase(),
                    tasks: p.tasks,
                    invocations: p.batches.len(),
                    store_bytes_read: p.bytes_read(),
                    store_bytes_written: p.bytes_written(),
                    peak_intermediate_bytes: p.intermediate_bytes(),
                    projected_peak_memory_bytes: p.max_projected_peak(),
                    memory_limit_bytes: c.memory_mb << 20,
                    estimated_gb_seconds: gbs,
                    estimated_cost_usd: usd,
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
                    batches: p
                        .batches
                        .iter()
                        .map(|b| BatchJson {
                            slot: b.slot,
                            tasks: b.num_tasks(),
                            bytes_in: b.bytes_in,
                            bytes_out: b.bytes_out,
                            projected_peak_bytes: b.projected_peak,
                            after: b.deps.clone(),
                        })
                        .collect(),
                }
            })
            .collect(),
    }
}

/// Why a checked job's plan is provisional, if it is: a boolean mask's values are known
/// only once the run computes it.
pub fn provisional(c: &crate::run::Checked) -> Option<String> {
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

pub fn text(job: &Job, plans: &[&Plan]) -> String {
    let mut s = String::new();
    let c = &job.compute;
    let _ = writeln!(
        s,
        "plan for {}: {} workers, memory_mb = {}",
        job.file.display(),
        c.workers,
        c.memory_mb
    );
    let _ = write!(s, "{:<28}", "");
    for p in plans {
        let _ = write!(s, "{:>16}", format!("{:?}", p.scheduler).to_lowercase());
    }
    s.push('\n');
    let row = |s: &mut String, name: &str, f: &dyn Fn(&Plan) -> String| {
        let _ = write!(s, "{name:<28}");
        for p in plans {
            let _ = write!(s, "{:>16}", f(p));
        }
        s.push('\n');
    };
    row(&mut s, "block tasks", &|p| p.tasks.to_string());
    row(&mut s, "invocations", &|p| p.batches.len().to_string());
    row(&mut s, "store bytes read", &|p| mb(p.bytes_read()));
    row(&mut s, "store bytes written", &|p| mb(p.bytes_written()));
    row(&mut s, "peak intermediate storage", &|p| {
        mb(p.intermediate_bytes())
    });
    row(&mut s, "projected peak memory", &|p| {
        mib(p.max_projected_peak())
    });
    row(&mut s, "memory limit", &|_| mib(c.memory_mb << 20));
    row(&mut s, "estimated GB-seconds", &|p| {
        format!("{:.3}", estimate(p, c.memory_mb).0)
    });
    row(&mut s, "estimated cost", &|p| {
        format!("${:.6}", estimate(p, c.memory_mb).1)
    });
    for p in plans {
        let name = format!("{:?}", p.scheduler).to_lowercase();
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
                "  #{i:<4} slot {}  {:>4} tasks  in {:>9}  out {:>9}  peak {:>8}  after {:?}",
                b.slot,
                b.num_tasks(),
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
    s
}

/// Both plans as one SVG: per scheduler, bars of each slot's simulated loads and the
/// projected peak of every batch against the memory limit.
pub fn svg(job: &Job, plans: &[&Plan]) -> String {
    let (w, panel_h) = (900.0, 300.0);
    let h = 60.0 + panel_h * plans.len() as f64;
    let mut s = format!(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='12'>\n\
         <rect width='100%' height='100%' fill='white'/>\n\
         <text x='20' y='28' font-size='16' font-weight='bold'>nums-cloud plan: {} ({} workers, memory_mb = {})</text>\n",
        job.name, job.compute.workers, job.compute.memory_mb
    );
    let max_load = plans
        .iter()
        .flat_map(|p| p.loads.iter().flat_map(|l| [l.bytes_in, l.bytes_out]))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let colors = [
        ("store bytes in", "#f58518"),
        ("store bytes out", "#54a24b"),
    ];
    for (pi, p) in plans.iter().enumerate() {
        let y0 = 50.0 + panel_h * pi as f64;
        let name = format!("{:?}", p.scheduler).to_lowercase();
        let (gbs, usd) = estimate(p, job.compute.memory_mb);
        let _ = writeln!(
            s,
            "<text x='20' y='{}' font-size='14' font-weight='bold'>{name}: {} invocations, read {}, wrote {}, {:.3} GB-s, ${:.6}</text>",
            y0 + 16.0,
            p.batches.len(),
            mb(p.bytes_read()),
            mb(p.bytes_written()),
            gbs,
            usd
        );
        // Left: per-slot loads.
        let (bx, by, bh, bw) = (40.0, y0 + 40.0, 200.0, 420.0);
        let group = bw / p.loads.len().max(1) as f64;
        for (i, l) in p.loads.iter().enumerate() {
            for (k, v) in [l.bytes_in, l.bytes_out].iter().enumerate() {
                let bar_h = bh * *v as f64 / max_load;
                let x = bx + group * i as f64 + 4.0 + k as f64 * (group - 8.0) / 2.0;
                let _ = writeln!(
                    s,
                    "<rect x='{x:.1}' y='{:.1}' width='{:.1}' height='{bar_h:.1}' fill='{}'><title>slot {i} {}: {}</title></rect>",
                    by + bh - bar_h,
                    (group - 8.0) / 2.0 - 2.0,
                    colors[k].1,
                    colors[k].0,
                    mb(*v)
                );
            }
            let _ = writeln!(
                s,
                "<text x='{:.1}' y='{:.1}'>slot {i}</text>",
                bx + group * i as f64 + 4.0,
                by + bh + 14.0
            );
        }
        for (k, (label, color)) in colors.iter().enumerate() {
            let x = bx + 160.0 * k as f64;
            let _ = writeln!(
                s,
                "<rect x='{x}' y='{}' width='10' height='10' fill='{color}'/><text x='{}' y='{}'>{label}</text>",
                by + bh + 24.0,
                x + 14.0,
                by + bh + 33.0
            );
        }
        // Right: projected peak memory of each batch against the limit.
        let (rx, rw) = (520.0, 340.0);
        let limit = (job.compute.memory_mb << 20) as f64;
        let n = p.batches.len().max(1) as f64;
        for (i, b) in p.batches.iter().enumerate() {
            let bar_h = bh * b.projected_peak as f64 / limit;
            let _ = writeln!(
                s,
                "<rect x='{:.2}' y='{:.1}' width='{:.2}' height='{bar_h:.1}' fill='#9467bd'><title>batch {i}: {}</title></rect>",
                rx + rw * i as f64 / n,
                by + bh - bar_h,
                (rw / n - 1.0).max(0.5),
                mib(b.projected_peak)
            );
        }
        let _ = writeln!(
            s,
            "<line x1='{rx}' y1='{by}' x2='{}' y2='{by}' stroke='red' stroke-dasharray='4'/>\
             <text x='{rx}' y='{}' fill='red'>memory_mb = {}</text>\
             <text x='{rx}' y='{}'>projected peak memory of each invocation</text>",
            rx + rw,
            by - 4.0,
            job.compute.memory_mb,
            by + bh + 14.0
        );
    }
    s.push_str("</svg>\n");
    s
}
