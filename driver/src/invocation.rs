//! One invocation as `--stats` records it and the timeline draws it ([`Invocation`]), and
//! what invocations cost: AWS's list prices and the one formula that prices a run, measured
//! (`report`) or projected (`cost`). A leaf.

use serde::{Deserialize, Serialize};

/// AWS list prices (us-east-1, x86_64) used for `cost_usd`; docs/deploy.md explains them.
const USD_PER_GB_SECOND: f64 = 0.000_016_666_7;
const USD_PER_INVOCATION: f64 = 0.20 / 1e6;
const USD_PER_S3_PUT: f64 = 0.005 / 1000.0;
const USD_PER_S3_GET: f64 = 0.0004 / 1000.0;

/// Dollars at the list prices for `gb_seconds` of functions, `invocations`, and the store
/// requests (`gets`: every request but a PUT).
pub(crate) fn usd(gb_seconds: f64, invocations: u64, gets: u64, puts: u64) -> f64 {
    gb_seconds * USD_PER_GB_SECOND
        + invocations as f64 * USD_PER_INVOCATION
        + gets as f64 * USD_PER_S3_GET
        + puts as f64 * USD_PER_S3_PUT
}

/// One invocation of a run, as `--stats` lists it (`timeline`) and `nums-cloud timeline`
/// draws it. Times are seconds since the run started (on the driver's clock: from the
/// send to the answer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invocation {
    /// The stage it belongs to: `main`, `mask-N` for a boolean mask computed first,
    /// `export-NAME-TAG` for an output written to an s3:// `.npy` file, `csv-count` for
    /// the rows of large CSV inputs counted before the job is checked, or a model's fit
    /// (node N): `fitN-X` and `fitN-y` (its data made), `fitN-PASS-K` (its K-th pass:
    /// `newton`, `normal`, `gradJ` for J candidate steps; the first checks y too).
    pub stage: String,
    /// The batch's number in its stage's plan (as `nums-cloud plan` numbers them).
    pub batch: usize,
    /// The concurrency slot it ran in: the lowest-numbered one free when it was sent
    /// (0..workers, and more while backups run).
    pub slot: usize,
    /// The slot the scheduler planned it for.
    pub planned_slot: usize,
    pub start: f64,
    pub end: f64,
    pub tasks: u64,
    /// Store bytes the function read and wrote (0 when it failed).
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Inside the handler: all of it, in kernels, and waiting on the store.
    pub function_seconds: f64,
    pub compute_seconds: f64,
    pub io_seconds: f64,
    pub peak_memory_bytes: u64,
    /// What the plan projected for its batch: peak memory ([`crate::sched`]'s
    /// projection, which `memory_mb` bounds) and seconds (the cost model's, invoke
    /// included); 0 in records of runs before they were kept.
    #[serde(default)]
    pub projected_peak_memory_bytes: u64,
    #[serde(default)]
    pub projected_seconds: f64,
    /// Which send of its batch, from 1.
    pub attempt: u32,
    /// A backup sent for a straggler.
    pub backup: bool,
    /// `ok`; `late` (it answered after its batch was done by another copy: not used); or
    /// `failed`, with `error`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Gives each invocation the lowest-numbered slot free when it started (an invocation
/// ending at an instant frees its slot for one starting then), and sorts them by start.
pub(crate) fn assign_slots(inv: &mut [Invocation]) {
    inv.sort_by(|a, b| a.start.total_cmp(&b.start).then(a.end.total_cmp(&b.end)));
    let mut free_at: Vec<f64> = Vec::new();
    for i in inv.iter_mut() {
        i.slot = match free_at.iter().position(|&f| f <= i.start) {
            Some(k) => k,
            None => {
                free_at.push(0.0);
                free_at.len() - 1
            }
        };
        free_at[i.slot] = i.end;
    }
}

/// What a person calls a stage (the timeline's bands, the progress), and whether it is one
/// of a fit's passes, of which a band counts how many: `main`, `CSV
/// count`, `export NAME`, `mask`, `values`, a fit's `making X`, `making y` and its passes
/// (`Newton`, `normal equations`, `gradient`; the first checks y too). `fit` names the fit's node
/// when a run has more than one.
pub(crate) fn stage_kind(stage: &str, many_fits: bool) -> (String, bool) {
    let tail = |p: &str| {
        stage
            .strip_prefix(p)
            .map(|t| t.rsplit_once('-').map_or(t, |(n, _)| n))
    };
    if stage == "main" {
        return ("main".into(), false);
    }
    if stage == "projected" {
        return ("main (projected)".into(), false);
    }
    if stage == "csv-count" {
        return ("CSV count".into(), false);
    }
    if let Some(name) = tail("export-") {
        return (format!("export {name}"), false);
    }
    if stage.starts_with("mask-") {
        return ("mask".into(), false);
    }
    if stage.starts_with("values-") {
        return ("values".into(), false);
    }
    if let Some((fit, rest)) = stage.split_once('-')
        && fit.starts_with("fit")
    {
        let fit = if many_fits { fit } else { "fit" };
        let (what, pass) = match rest {
            "X" => ("making X".to_string(), false),
            "y" => ("making y".to_string(), false),
            // The stage of its own that checked y in runs before the first pass did.
            "check" => ("check of y".to_string(), false),
            _ => {
                let kind = rest.rsplit_once('-').map_or(rest, |(k, _)| k);
                let kind = match kind {
                    "newton" => "Newton",
                    "normal" => "normal equations",
                    k if k.starts_with("grad") => "gradient",
                    k => k,
                };
                (kind.to_string(), true)
            }
        };
        return (format!("{fit}: {what}"), pass);
    }
    (stage.to_string(), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(start: f64, end: f64) -> Invocation {
        Invocation {
            stage: "main".into(),
            batch: 0,
            slot: usize::MAX,
            planned_slot: 0,
            start,
            end,
            tasks: 1,
            bytes_read: 0,
            bytes_written: 0,
            function_seconds: 0.0,
            compute_seconds: 0.0,
            io_seconds: 0.0,
            peak_memory_bytes: 0,
            projected_peak_memory_bytes: 0,
            projected_seconds: 0.0,
            attempt: 1,
            backup: false,
            status: "ok".into(),
            error: None,
        }
    }

    /// Slots never hold two invocations at once, and a freed slot is reused first.
    #[test]
    fn slots_do_not_overlap_and_are_reused() {
        let mut v = vec![
            inv(0.5, 1.5),
            inv(0.0, 1.0),
            inv(1.0, 2.0),
            inv(0.2, 0.4),
            inv(1.6, 1.7),
        ];
        assign_slots(&mut v);
        let got: Vec<(f64, usize)> = v.iter().map(|i| (i.start, i.slot)).collect();
        assert_eq!(got, vec![(0.0, 0), (0.2, 1), (0.5, 1), (1.0, 0), (1.6, 1)]);
        for a in &v {
            for b in &v {
                if a != b && a.slot == b.slot {
                    assert!(a.end <= b.start || b.end <= a.start, "{a:?} {b:?}");
                }
            }
        }
    }
}
