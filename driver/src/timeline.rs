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

/// A band of the run's time: stages of one kind run one after another (a fit's passes
/// make one band), with what a person calls them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Band {
    pub label: String,
    /// Its first stage's name, as `--stats` records it.
    pub stage: String,
    pub start: f64,
    pub end: f64,
}

/// The run's stages as bands in time: consecutive stages of one kind make one band
/// (`fit: 7 Newton passes`).
pub(crate) fn bands(inv: &[Invocation]) -> Vec<Band> {
    let mut order: Vec<&Invocation> = inv.iter().collect();
    order.sort_by(|a, b| a.start.total_cmp(&b.start));
    let fits: std::collections::BTreeSet<&str> = inv
        .iter()
        .filter_map(|i| i.stage.split_once('-').map(|(f, _)| f))
        .filter(|f| f.starts_with("fit"))
        .collect();
    // (kind, is a pass, band, its stages)
    let mut out: Vec<(String, bool, Band, Vec<&str>)> = Vec::new();
    for i in order {
        let (kind, pass) = crate::invocation::stage_kind(&i.stage, fits.len() > 1);
        match out.last_mut() {
            Some((k, _, b, stages)) if *k == kind => {
                b.end = b.end.max(i.end);
                if !stages.contains(&i.stage.as_str()) {
                    stages.push(&i.stage);
                }
            }
            _ => out.push((
                kind.clone(),
                pass,
                Band {
                    label: kind,
                    stage: i.stage.clone(),
                    start: i.start,
                    end: i.end,
                },
                vec![&i.stage],
            )),
        }
    }
    out.into_iter()
        .map(|(kind, pass, mut b, stages)| {
            if pass {
                let (fit, what) = kind.split_once(": ").unwrap_or(("fit", &kind));
                let n = stages.len() as u64;
                b.label = format!(
                    "{fit}: {}",
                    plural(n, &format!("{what} pass"), &format!("{what} passes"))
                );
            }
            b
        })
        .collect()
}

fn band_fill(label: &str) -> &'static str {
    if label == "main" {
        "#c6dbef"
    } else if label.starts_with("fit") {
        "#d9f0d3"
    } else if label.starts_with("export") {
        "#e5d8f0"
    } else {
        "#fde0c5"
    }
}

/// Lane height and gap for `lanes` lanes: full height for a few, thinner for many, so that
/// a run of a thousand workers still fits the page.
pub(crate) fn lane_size(lanes: usize) -> (f64, f64) {
    if lanes <= 12 {
        (24.0, 6.0)
    } else {
        let h = (360.0 / lanes as f64).max(1.0);
        (h * 0.8, h * 0.2)
    }
}

/// Draws lanes of invocations (one per slot, `slot k` left of each) from `top` over
/// `left`..`left + plot_w` at `scale` px per second; returns the bottom.
#[allow(clippy::too_many_arguments)]
pub(crate) fn draw_lanes(
    s: &mut Svg,
    inv: &[Invocation],
    lanes: usize,
    left: f64,
    top: f64,
    plot_w: f64,
    scale: f64,
    mark_moved: bool,
) -> f64 {
    let (lane_h, gap) = lane_size(lanes);
    // With thin lanes, every k-th one is named.
    let every = ((14.0 / (lane_h + gap)).ceil() as usize).max(1);
    for lane in 0..lanes {
        let y = top + lane as f64 * (lane_h + gap);
        s.raw(&format!("<g class='lane' data-slot='{lane}'>"));
        if lane % every == 0 {
            s.text(
                left - 8.0,
                y + lane_h / 2.0 + 4.0,
                &format!("slot {lane}"),
                "text-anchor='end'",
            );
        }
        s.rect(left, y, plot_w, lane_h, IDLE, "class='lane-bg'", "");
        for i in inv.iter().filter(|i| i.slot == lane) {
            draw_invocation(
                s,
                i,
                left + i.start * scale,
                y,
                ((i.end - i.start) * scale).max(1.0),
                lane_h,
            );
            if mark_moved && i.planned_slot != i.slot {
                // Sent to the slot free first, as the driver sends, not the planned one.
                s.rect(
                    left + i.start * scale,
                    y,
                    ((i.end - i.start) * scale).max(1.0),
                    2.5,
                    "black",
                    &format!(
                        "class='moved' data-batch='{}' data-planned-slot='{}'",
                        i.batch, i.planned_slot
                    ),
                    &format!(
                        "#{} planned for slot {}, projected in slot {} (free first)",
                        i.batch, i.planned_slot, i.slot
                    ),
                );
            }
        }
        s.raw("</g>");
    }
    top + lanes as f64 * (lane_h + gap)
}

/// Each invocation's peak memory as a line in its slot's colour over its time, against
/// `memory_mb`, on a `mem_h` high panel whose bottom is `bottom`; values written where
/// they overlap no other label. `label` names the panel.
#[allow(clippy::too_many_arguments)]
pub(crate) fn draw_memory(
    s: &mut Svg,
    inv: &[Invocation],
    left: f64,
    plot_w: f64,
    scale: f64,
    bottom: f64,
    mem_h: f64,
    limit_bytes: u64,
    label: &str,
) {
    let limit_mib = limit_bytes as f64 / (1u64 << 20) as f64;
    let peak = inv.iter().map(|i| i.peak_memory_bytes).max().unwrap_or(0);
    let mem_max = limit_mib.max(peak as f64 / (1u64 << 20) as f64);
    let my = s.y_axis(left, bottom, mem_h, mem_max, "", label, plot_w);
    s.line(left, bottom, left + plot_w, bottom, "stroke='black'");
    let ly = bottom - limit_mib * my;
    s.line(
        left,
        ly,
        left + plot_w,
        ly,
        &format!("stroke='{FAILED}' stroke-dasharray='6 3'"),
    );
    let mut placed = crate::svg::Placed::default();
    s.label(
        &mut placed,
        left + plot_w,
        ly - 4.0,
        &format!("memory_mb = {limit_mib:.0} MiB"),
        12.0,
        "end",
        &format!("fill='{FAILED}'"),
    );
    let x = |secs: f64| left + secs * scale;
    s.raw("<g class='memory'>");
    let mut order: Vec<&Invocation> = inv.iter().filter(|i| i.status != "failed").collect();
    // The largest first, so that the values written are the ones that matter.
    order.sort_by_key(|i| std::cmp::Reverse(i.peak_memory_bytes));
    for i in &order {
        let m = i.peak_memory_bytes as f64 / (1u64 << 20) as f64;
        let (x0, x1, y) = (x(i.start), x(i.end).max(x(i.start) + 2.0), bottom - m * my);
        s.raw(&format!(
            "<line class='peak' data-batch='{}' data-slot='{}' x1='{x0:.2}' y1='{y:.2}' x2='{x1:.2}' y2='{y:.2}' stroke='{}' stroke-width='3'><title>{}</title></line>",
            i.batch,
            i.slot,
            crate::svg::slot_colour(i.slot),
            crate::svg::escape(&format!("{} #{} in slot {}: peak {}", i.stage, i.batch, i.slot, mib(i.peak_memory_bytes)))
        ));
    }
    for i in &order {
        let m = i.peak_memory_bytes as f64 / (1u64 << 20) as f64;
        let (x0, x1, y) = (x(i.start), x(i.end).max(x(i.start) + 2.0), bottom - m * my);
        s.label(
            &mut placed,
            (x0 + x1) / 2.0,
            y - 5.0,
            &format!("{m:.0}"),
            10.0,
            "middle",
            "class='peak-label'",
        );
    }
    s.raw("</g>");
}

/// A legend of the slots' colours (the first ten; later slots repeat them).
pub(crate) fn slot_legend(s: &mut Svg, x: f64, y: f64, lanes: usize) {
    let names: Vec<String> = (0..lanes.min(10)).map(|k| format!("slot {k}")).collect();
    let items: Vec<(&str, &str)> = names
        .iter()
        .enumerate()
        .map(|(k, n)| (n.as_str(), crate::svg::slot_colour(k)))
        .collect();
    s.text(x, y, "peak memory by slot:", "");
    s.legend(x + 140.0, y, &items);
}

/// Stage bands over the lanes: a strip of coloured bands from `strip_y` (each labelled
/// inside when its label fits, else in one of the two rows above), and a thin line across
/// the lanes where each band starts.
#[allow(clippy::too_many_arguments)]
fn draw_bands(
    s: &mut Svg,
    bands: &[Band],
    left: f64,
    plot_w: f64,
    scale: f64,
    strip_y: f64,
    lanes_bottom: f64,
) {
    let strip_h = 16.0;
    let mut placed = crate::svg::Placed::default();
    for b in bands {
        let (x0, x1) = (left + b.start * scale, left + b.end * scale);
        let w = (x1 - x0).max(1.0);
        s.raw(&format!(
            "<g class='stage-band' data-stage='{}' data-label='{}'>",
            crate::svg::escape(&b.stage),
            crate::svg::escape(&b.label)
        ));
        s.rect(
            x0,
            strip_y,
            w,
            strip_h,
            band_fill(&b.label),
            "stroke='white' stroke-width='0.5'",
            &format!("{}: {:.3}-{:.3} s", b.label, b.start, b.end),
        );
        s.line(
            x0,
            strip_y,
            x0,
            lanes_bottom,
            "stroke='#777' stroke-width='0.6' stroke-dasharray='2 2'",
        );
        let cx = ((x0 + x1) / 2.0).clamp(left, left + plot_w);
        let inside = crate::svg::Placed::text_box(cx, strip_y + 12.0, &b.label, 11.0, "middle");
        let drawn = (inside[2] - inside[0] <= w
            && s.label(
                &mut placed,
                cx,
                strip_y + 12.0,
                &b.label,
                11.0,
                "middle",
                "class='band-label'",
            ))
            || [strip_y - 3.0, strip_y - 18.0, strip_y - 33.0]
                .iter()
                .any(|&y| {
                    let anchor = if cx - left < 60.0 {
                        "start"
                    } else if left + plot_w - cx < 60.0 {
                        "end"
                    } else {
                        "middle"
                    };
                    let x = match anchor {
                        "start" => x0.max(left),
                        "end" => x1.min(left + plot_w),
                        _ => cx,
                    };
                    s.label(
                        &mut placed,
                        x,
                        y,
                        &b.label,
                        11.0,
                        anchor,
                        "class='band-label'",
                    )
                });
        if !drawn {
            // No room: its tooltip and data-label say it.
            s.raw("<!-- label left out: no room -->");
        }
        s.raw("</g>");
    }
}

/// The timeline as an SVG document.
pub(crate) fn svg(t: &Timeline) -> String {
    let inv = &t.timeline;
    let lanes = inv.iter().map(|i| i.slot + 1).max().unwrap_or(0).max(1);
    let (left, plot_w) = (80.0, 880.0);
    let bands = bands(inv);
    let strip_y = 150.0;
    let lanes_top = strip_y + 22.0;
    let (lane_h, gap) = lane_size(lanes);
    let axis_y = lanes_top + lanes as f64 * (lane_h + gap);
    let mem_h = 150.0;
    let mem_bottom = axis_y + 90.0 + mem_h;
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
    s.text(
        left - 8.0,
        strip_y + 12.0,
        "stages",
        "text-anchor='end' font-size='11'",
    );

    // The time axis under the lanes, and its scale for every panel.
    let scale = s.x_axis(
        left,
        axis_y,
        plot_w,
        tmax,
        " s",
        "time since the run started (seconds)",
    );
    draw_bands(&mut s, &bands, left, plot_w, scale, strip_y, axis_y);
    draw_lanes(&mut s, inv, lanes, left, lanes_top, plot_w, scale, false);
    // Peak memory of each invocation against the limit, on the same time axis.
    slot_legend(&mut s, left, axis_y + 58.0, lanes);
    draw_memory(
        &mut s,
        inv,
        left,
        plot_w,
        scale,
        mem_bottom,
        mem_h,
        t.memory_limit_bytes,
        "peak memory of each invocation (MiB), against memory_mb",
    );
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
