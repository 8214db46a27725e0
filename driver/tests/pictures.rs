//! The pictures read without hovering (issue 27): the run timeline of a fit and the plan
//! chart of the quick-start and of a fit, drawn by the built binary and parsed as XML.
//! Each has its axes with tick labels, the timeline its stage bands labelled and one lane
//! per slot with each invocation in its slot's lane, the memory panel one colour per slot,
//! the plan chart its slots numbered as `plan` numbers them, one byte unit per axis, LSHS
//! against naive side by side; and no label drawn over another.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh folder with the examples' jobs; removed on drop.
struct Workdir(PathBuf);

impl Workdir {
    fn new(test: &str) -> Workdir {
        let dir =
            std::env::temp_dir().join(format!("nums-cloud-pic-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        for job in ["quickstart.toml", "logreg.toml"] {
            std::fs::copy(examples.join(job), dir.join(job)).unwrap();
        }
        Workdir(dir)
    }

    fn nums(&self, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_nums-cloud"))
            .args(args)
            .current_dir(&self.0)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "nums-cloud {args:?}: {stderr}");
        String::from_utf8(out.stdout).unwrap()
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.0.join(name)).unwrap()
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn class<'a>(n: &roxmltree::Node<'a, '_>) -> &'a str {
    n.attribute("class").unwrap_or("")
}

fn text_of(n: &roxmltree::Node<'_, '_>) -> String {
    n.descendants()
        .filter(|d| d.is_text())
        .filter_map(|d| d.text())
        .collect()
}

fn num(n: &roxmltree::Node<'_, '_>, attr: &str) -> f64 {
    n.attribute(attr).unwrap_or("0").parse().unwrap()
}

/// Every text element's box, estimated as a sans-serif font's: 0.55 em per character.
fn text_boxes(doc: &roxmltree::Document<'_>) -> Vec<(String, [f64; 4])> {
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|t| {
            let size: f64 = t
                .attribute("font-size")
                .or_else(|| t.ancestors().find_map(|a| a.attribute("font-size")))
                .unwrap_or("12")
                .parse()
                .unwrap();
            let s = text_of(&t);
            let w = 0.55 * size * s.chars().count() as f64;
            let (x, y) = (num(&t, "x"), num(&t, "y"));
            let x0 = match t.attribute("text-anchor") {
                Some("middle") => x - w / 2.0,
                Some("end") => x - w,
                _ => x,
            };
            (s, [x0, y - 0.7 * size, x0 + w, y])
        })
        .collect()
}

/// No two labels overlap (a bar's own label inside its lane excepted: it is clipped by
/// nothing but the bar, and the bars never overlap).
fn assert_no_label_overlaps(doc: &roxmltree::Document<'_>, what: &str) {
    let boxes = text_boxes(doc);
    for (i, (a, ba)) in boxes.iter().enumerate() {
        for (b, bb) in &boxes[i + 1..] {
            let overlap = ba[0] < bb[2] - 1.0
                && bb[0] < ba[2] - 1.0
                && ba[1] < bb[3] - 1.0
                && bb[1] < ba[3] - 1.0;
            assert!(!overlap, "{what}: label {a:?} {ba:?} overlaps {b:?} {bb:?}");
        }
    }
}

/// The tick labels of each x axis: numbers with ` s` (or a unit), from 0, increasing.
fn x_axes(doc: &roxmltree::Document<'_>) -> Vec<(Vec<f64>, String)> {
    doc.descendants()
        .filter(|n| n.has_tag_name("g") && class(n).contains("x-axis"))
        .map(|g| {
            let texts: Vec<String> = g
                .children()
                .filter(|c| c.has_tag_name("text"))
                .map(|t| text_of(&t))
                .collect();
            let ticks: Vec<f64> = texts
                .iter()
                .filter_map(|t| t.trim_end_matches(" s").parse().ok())
                .collect();
            (ticks, texts.last().cloned().unwrap_or_default())
        })
        .collect()
}

fn assert_ticks(ticks: &[f64], what: &str) {
    assert!(ticks.len() >= 3, "{what}: ticks {ticks:?}");
    assert_eq!(ticks[0], 0.0, "{what}: {ticks:?}");
    assert!(ticks.windows(2).all(|w| w[0] < w[1]), "{what}: {ticks:?}");
}

#[test]
fn the_run_timeline_of_a_fit_has_stage_bands_axes_and_a_lane_per_slot() {
    let w = Workdir::new("run");
    w.nums(&[
        "run",
        "logreg.toml",
        "--quiet",
        "--stats",
        "stats.json",
        "--timeline",
        "run.svg",
    ]);
    let stats: serde_json::Value = serde_json::from_str(&w.read("stats.json")).unwrap();
    let tl = stats["timeline"].as_array().unwrap();
    let text = w.read("run.svg");
    let doc = roxmltree::Document::parse(&text).unwrap();

    // The time axis, twice (under the lanes and under the memory panel), with ticks.
    let axes = x_axes(&doc);
    assert_eq!(axes.len(), 2, "{axes:?}");
    assert_eq!(axes[0].1, "time since the run started (seconds)");
    for (ticks, _) in &axes {
        assert_ticks(ticks, "run timeline");
        assert!(*ticks.last().unwrap() >= stats["wall_seconds"].as_f64().unwrap());
    }

    // Stage bands: the fit's X, y, check and passes, then the main stage, each labelled.
    let newton: BTreeSet<&str> = tl
        .iter()
        .map(|i| i["stage"].as_str().unwrap())
        .filter(|s| s.contains("-newton-"))
        .collect();
    let bands: Vec<roxmltree::Node<'_, '_>> = doc
        .descendants()
        .filter(|n| class(n) == "stage-band")
        .collect();
    let labels: Vec<&str> = bands
        .iter()
        .map(|b| b.attribute("data-label").unwrap())
        .collect();
    let passes = format!("fit: {} Newton passes", newton.len());
    assert_eq!(
        labels,
        ["fit: making X", "fit: making y", passes.as_str(), "main"],
        "{labels:?}"
    );
    let drawn: BTreeSet<String> = doc
        .descendants()
        .filter(|n| class(n) == "band-label")
        .map(|n| text_of(&n))
        .collect();
    for l in &labels {
        assert!(drawn.contains(*l), "band {l} has no label drawn: {drawn:?}");
    }

    // One lane per slot, each invocation in its slot's lane.
    let slots: BTreeSet<u64> = tl.iter().map(|i| i["slot"].as_u64().unwrap()).collect();
    let lanes: Vec<roxmltree::Node<'_, '_>> =
        doc.descendants().filter(|n| class(n) == "lane").collect();
    assert_eq!(lanes.len(), slots.len());
    for g in &lanes {
        let slot: u64 = g.attribute("data-slot").unwrap().parse().unwrap();
        let mut got: Vec<(String, u64)> = g
            .descendants()
            .filter(|n| class(n).starts_with("invocation"))
            .map(|n| {
                (
                    n.attribute("data-stage").unwrap().to_string(),
                    n.attribute("data-batch").unwrap().parse().unwrap(),
                )
            })
            .collect();
        let mut want: Vec<(String, u64)> = tl
            .iter()
            .filter(|i| i["slot"].as_u64() == Some(slot))
            .map(|i| {
                (
                    i["stage"].as_str().unwrap().to_string(),
                    i["batch"].as_u64().unwrap(),
                )
            })
            .collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "lane {slot}");
    }

    // The memory panel: a line per invocation in its slot's colour, one colour per slot.
    let mut colour: BTreeMap<u64, BTreeSet<&str>> = BTreeMap::new();
    let peaks: Vec<_> = doc.descendants().filter(|n| class(n) == "peak").collect();
    assert_eq!(peaks.len(), tl.len());
    for p in &peaks {
        let slot = p.attribute("data-slot").unwrap().parse().unwrap();
        colour
            .entry(slot)
            .or_default()
            .insert(p.attribute("stroke").unwrap());
    }
    assert!(colour.values().all(|c| c.len() == 1), "{colour:?}");
    let all: BTreeSet<_> = colour.values().flatten().collect();
    assert_eq!(all.len(), colour.len(), "a colour per slot: {colour:?}");
    assert!(text.contains(">peak memory by slot:</text>"));
    assert_no_label_overlaps(&doc, "run timeline");
}

#[test]
fn the_plan_chart_numbers_slots_as_plan_does_and_compares_the_schedulers() {
    let w = Workdir::new("plan");
    for job in ["quickstart", "logreg"] {
        let toml = format!("{job}.toml");
        let svg = format!("{job}.svg");
        let plan: serde_json::Value =
            serde_json::from_str(&w.nums(&["plan", "--json", &toml])).unwrap();
        w.nums(&["plan", &toml, "--svg", &svg]);
        let text = w.read(&svg);
        let doc = roxmltree::Document::parse(&text).unwrap();

        // LSHS against naive: every measure, a bar of each.
        let bars: BTreeSet<(String, String)> = doc
            .descendants()
            .filter(|n| class(n) == "compare-bar")
            .map(|n| {
                (
                    n.attribute("data-scheduler").unwrap().to_string(),
                    n.attribute("data-measure").unwrap().to_string(),
                )
            })
            .collect();
        for s in ["lshs", "naive"] {
            for m in [
                "invocations",
                "projected wall time",
                "store bytes read",
                "store bytes written",
                "estimated cost",
            ] {
                assert!(
                    bars.contains(&(s.into(), m.into())),
                    "{job}: no {s} {m}: {bars:?}"
                );
            }
        }

        for sched in plan["schedulers"].as_array().unwrap() {
            let name = sched["scheduler"].as_str().unwrap();
            let g = doc
                .descendants()
                .find(|n| class(n) == "plan" && n.attribute("data-scheduler") == Some(name))
                .unwrap();
            // A projected time axis with ticks, and one under the memory panel.
            let doc_axes: Vec<_> = g
                .descendants()
                .filter(|n| n.has_tag_name("g") && class(n) == "axis x-axis")
                .map(|a| {
                    let t: Vec<String> = a
                        .children()
                        .filter(|c| c.has_tag_name("text"))
                        .map(|t| text_of(&t))
                        .collect();
                    t
                })
                .collect();
            assert_eq!(doc_axes.len(), 2, "{job} {name}");
            assert_eq!(
                doc_axes[0].last().unwrap(),
                "projected time of the main stage (seconds)"
            );
            for a in &doc_axes {
                let ticks: Vec<f64> = a
                    .iter()
                    .filter_map(|t| t.strip_suffix(" s")?.parse().ok())
                    .collect();
                assert_ticks(&ticks, &format!("{job} {name}"));
            }
            // Each batch in the lane of the slot the text plan gives it, or marked as sent
            // to the slot free first, with its planned slot (LSHS: never, here).
            let batches = sched["batches"].as_array().unwrap();
            let mut seen = 0;
            for lane in g.descendants().filter(|n| class(n) == "lane") {
                let slot: u64 = lane.attribute("data-slot").unwrap().parse().unwrap();
                let moved: BTreeMap<usize, u64> = lane
                    .descendants()
                    .filter(|n| class(n) == "moved")
                    .map(|n| {
                        (
                            n.attribute("data-batch").unwrap().parse().unwrap(),
                            n.attribute("data-planned-slot").unwrap().parse().unwrap(),
                        )
                    })
                    .collect();
                for r in lane
                    .descendants()
                    .filter(|n| class(n).starts_with("invocation"))
                {
                    let b: usize = r.attribute("data-batch").unwrap().parse().unwrap();
                    let planned = batches[b]["slot"].as_u64().unwrap();
                    // A batch ready while its planned slot is busy goes to the slot free
                    // first, as the driver sends it (naive's often, LSHS's where a batch
                    // reads from one projected to end before it starts); the chart marks it.
                    if !moved.contains_key(&b) {
                        assert_eq!(planned, slot, "{job} {name} batch {b}");
                    } else {
                        assert_eq!(moved[&b], planned, "{job} {name} batch {b}");
                    }
                    seen += 1;
                }
            }
            assert_eq!(seen, batches.len(), "{job} {name}");
            // The loads: one unit on the axis and on every value.
            let title = g
                .descendants()
                .filter(|n| n.has_tag_name("text"))
                .map(|t| text_of(&t))
                .find(|t| t.starts_with("store bytes per slot ("))
                .unwrap();
            let unit = title
                .trim_start_matches("store bytes per slot (")
                .trim_end_matches(')');
            let values: Vec<String> = g
                .descendants()
                .filter(|n| class(n) == "load")
                .map(|n| text_of(&n))
                .collect();
            assert_eq!(values.len(), 2 * sched["loads"].as_array().unwrap().len());
            for v in &values {
                assert!(
                    v.ends_with(&format!(" {unit}")),
                    "{job} {name}: {v} against ({unit})"
                );
            }
        }
        assert_no_label_overlaps(&doc, &format!("{job} plan chart"));
    }
}
