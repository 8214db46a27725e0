//! The run timeline (`nums-cloud run --timeline FILE.svg`, `nums-cloud timeline
//! stats.json FILE.svg`): one lane per concurrency slot with every invocation in it —
//! compute, store I/O and the rest (sending, start-up) in different colours, idle time
//! (waiting for dependencies or a free worker) as the lane's background — and below it
//! each invocation's peak memory against `memory_mb`, on one time axis in seconds.

use std::path::Path;

use anyhow::Context;
use serde::Deserialize;

use crate::human::{human, mib, plural};
use crate::invocation::Invocation;
use crate::report::Report;
use crate::svg::Svg;

/// What the timeline needs of a `--stats` report.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Timeline {
    pub job: String,
    #[serde(default)]
    pub run: String,
    #[serde(default)]
    pub status: String,
    pub wall_seconds: f64,
    pub workers: usize,
    pub memory_limit_bytes: u64,
    pub timeline: Vec<Invocation>,
}

impl Timeline {
    pub(crate) fn from_report(r: &Report) -> Timeline {
        Timeline {
            job: r.job.clone(),
            run: r.run.clone(),
            status: r.status.clone(),
            wall_seconds: r.wall_seconds,
            workers: r.workers,
            memory_limit_bytes: r.memory_limit_bytes,
            timeline: r.timeline.clone(),
        }
    }

    /// A plan's projected run, by the cost model of the job's backend.
    pub(crate) fn projected(job: &crate::job::Job, plan: &crate::sched::Plan) -> Timeline {
        let p = crate::plan::projection(job, plan);
        Timeline {
            job: job.name.clone(),
            run: format!("projected by the {} cost model", p.model.name),
            status: "projected".into(),
            wall_seconds: p.wall_seconds,
            workers: job.compute.workers,
            memory_limit_bytes: job.compute.memory_mb << 20,
            timeline: p.timeline,
        }
    }

    /// Reads a `--stats` JSON file.
    pub(crate) fn load(path: &Path) -> anyhow::Result<Timeline> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: not a nums-cloud --stats file with a timeline: {e}",
                path.display()
            )
        })
    }
}

const COMPUTE: &str = "#4c78a8";
const IO: &str = "#f58518";
const OTHER: &str = "#b8b8b8";
const IDLE: &str = "#f0f0f0";
const FAILED: &str = "#d62728";
const MEMORY: &str = "#9467bd";

/// The timeline as an SVG document.
pub(crate) fn svg(t: &Timeline) -> String {
    let inv = &t.timeline;
    let lanes = inv.iter().map(|i| i.slot + 1).max().unwrap_or(0).max(1);
    let (left, plot_w) = (80.0, 880.0);
    let (lane_h, gap) = (24.0, 6.0);
    let lanes_top = 112.0;
    let lanes_h = lanes as f64 * (lane_h + gap);
    let axis_y = lanes_top + lanes_h;
    let mem_h = 150.0;
    let mem_bottom = axis_y + 70.0 + mem_h;
    let height = mem_bottom + 50.0;
    let limit_mib = t.memory_limit_bytes as f64 / (1u64 << 20) as f64;
    let tmax = inv
        .iter()
        .map(|i| i.end)
        .fold(t.wall_seconds, f64::max)
        .max(1e-3);

    let mut s = Svg::new(
        left + plot_w + 40.0,
        height,
        &format!("nums-cloud run timeline: job {} (run {})", t.job, t.run),
    );
    let failed = inv.iter().filter(|i| i.status == "failed").count();
    let backups = inv.iter().filter(|i| i.backup).count();
    let peak = inv.iter().map(|i| i.peak_memory_bytes).max().unwrap_or(0);
    s.text(
        20.0,
        50.0,
        &format!(
            "{}: {} ({failed} failed, {}) in {:.2} s on {} ({})",
            if t.status.is_empty() { "ok" } else { &t.status },
            plural(inv.len() as u64, "invocation", "invocations"),
            plural(backups as u64, "backup", "backups"),
            t.wall_seconds,
            plural(lanes as u64, "slot", "slots"),
            plural(t.workers as u64, "worker", "workers"),
        ),
        "",
    );
    s.text(
        20.0,
        66.0,
        &format!(
            "functions' store traffic: read {}, wrote {}; largest peak memory {} of memory_mb = {:.0} MiB",
            human(inv.iter().map(|i| i.bytes_read).sum()),
            human(inv.iter().map(|i| i.bytes_written).sum()),
            mib(peak),
            limit_mib
        ),
        "",
    );
    s.legend(
        20.0,
        90.0,
        &[
            ("compute", COMPUTE),
            ("store I/O", IO),
            ("other (sending, start-up)", OTHER),
            ("waiting (slot idle)", IDLE),
            ("failed", FAILED),
        ],
    );
    s.text(
        660.0,
        90.0,
        "dashed outline: backup; faded: late copy",
        "fill='#555'",
    );

    // The time axis under the lanes, and its scale for both panels.
    let scale = s.x_axis(
        left,
        axis_y,
        plot_w,
        tmax,
        " s",
        "time since the run started (seconds)",
    );
    let x = |secs: f64| left + secs * scale;
    for lane in 0..lanes {
        let y = lanes_top + lane as f64 * (lane_h + gap);
        s.raw(&format!("<g class='lane' data-slot='{lane}'>"));
        s.text(
            left - 8.0,
            y + lane_h / 2.0 + 4.0,
            &format!("slot {lane}"),
            "text-anchor='end'",
        );
        s.rect(left, y, plot_w, lane_h, IDLE, "class='lane-bg'", "");
        for i in inv.iter().filter(|i| i.slot == lane) {
            draw_invocation(
                &mut s,
                i,
                x(i.start),
                y,
                ((i.end - i.start) * scale).max(1.0),
                lane_h,
            );
        }
        s.raw("</g>");
    }

    // Peak memory of each invocation against the limit, on the same time axis.
    let mem_max = limit_mib.max(peak as f64 / (1u64 << 20) as f64);
    let my = s.y_axis(
        left,
        mem_bottom,
        mem_h,
        mem_max,
        "",
        "peak memory of each invocation (MiB), against memory_mb",
        plot_w,
    );
    s.line(
        left,
        mem_bottom,
        left + plot_w,
        mem_bottom,
        "stroke='black'",
    );
    let ly = mem_bottom - limit_mib * my;
    s.line(
        left,
        ly,
        left + plot_w,
        ly,
        &format!("stroke='{FAILED}' stroke-dasharray='6 3'"),
    );
    s.text(
        left + plot_w,
        ly - 4.0,
        &format!("memory_mb = {limit_mib:.0} MiB"),
        &format!("text-anchor='end' fill='{FAILED}'"),
    );
    s.raw("<g class='memory'>");
    for i in inv.iter().filter(|i| i.status != "failed") {
        let m = i.peak_memory_bytes as f64 / (1u64 << 20) as f64;
        let (x0, x1, y) = (
            x(i.start),
            x(i.end).max(x(i.start) + 2.0),
            mem_bottom - m * my,
        );
        s.raw(&format!(
            "<line class='peak' data-batch='{}' x1='{x0:.2}' y1='{y:.2}' x2='{x1:.2}' y2='{y:.2}' stroke='{MEMORY}' stroke-width='3'><title>{}</title></line>",
            i.batch,
            crate::svg::escape(&format!("{} #{}: peak {}", i.stage, i.batch, mib(i.peak_memory_bytes)))
        ));
        if x1 - x0 > 44.0 {
            s.text(
                (x0 + x1) / 2.0,
                y - 4.0,
                &format!("{m:.0}"),
                "text-anchor='middle' font-size='10'",
            );
        }
    }
    s.raw("</g>");
    s.x_axis(left, mem_bottom, plot_w, tmax, " s", "");
    s.finish()
}

/// One invocation's bar: its compute, store I/O and other time as shares of its length
/// (their order inside the invocation is not recorded), or red when it failed.
fn draw_invocation(s: &mut Svg, i: &Invocation, x: f64, y: f64, w: f64, h: f64) {
    let dur = (i.end - i.start).max(1e-9);
    let mut tip = format!(
        "{} #{} (attempt {}{}), {:.3}-{:.3} s ({:.3} s): {}, compute {:.3} s, store I/O {:.3} s, read {}, wrote {}, peak {}",
        i.stage,
        i.batch,
        i.attempt,
        if i.backup { ", backup" } else { "" },
        i.start,
        i.end,
        i.end - i.start,
        plural(i.tasks, "task", "tasks"),
        i.compute_seconds,
        i.io_seconds,
        human(i.bytes_read),
        human(i.bytes_written),
        mib(i.peak_memory_bytes)
    );
    if let Some(e) = &i.error {
        tip += &format!("; failed: {e}");
    }
    let mut attrs = format!(
        "class='invocation' data-stage='{}' data-batch='{}' data-attempt='{}' data-status='{}'",
        crate::svg::escape(&i.stage),
        i.batch,
        i.attempt,
        crate::svg::escape(&i.status)
    );
    if i.backup {
        attrs += " stroke='black' stroke-dasharray='3 2'";
    }
    if i.status == "late" {
        attrs += " opacity='0.5'";
    }
    let failed = i.status == "failed";
    s.rect(
        x,
        y,
        w,
        h,
        if failed { FAILED } else { OTHER },
        &attrs,
        &tip,
    );
    if !failed {
        let io = (i.io_seconds / dur).clamp(0.0, 1.0);
        let compute = (i.compute_seconds / dur).clamp(0.0, 1.0 - io);
        s.rect(x, y, w * io, h, IO, "class='io'", &tip);
        s.rect(
            x + w * io,
            y,
            w * compute,
            h,
            COMPUTE,
            "class='compute'",
            &tip,
        );
    }
    let label = if w > 90.0 {
        format!("#{} {:.2} s", i.batch, i.end - i.start)
    } else if w > 28.0 {
        format!("#{}", i.batch)
    } else {
        String::new()
    };
    if !label.is_empty() {
        s.text(
            x + 3.0,
            y + h / 2.0 + 4.0,
            &label,
            "font-size='10' stroke='white' stroke-width='2' paint-order='stroke'",
        );
    }
}
