//! The rules the dispatch loop (`super`) applies: how many times a failed batch is sent
//! again and after what pause ([`Policy`]), and when a straggler gets a backup
//! invocation ([`Backups`]).

use std::time::Duration;

use crate::sched::PlannedBatch;

/// How the dispatcher absorbs failures and stragglers. [`Policy::default`] is what `run`
/// uses; tests scale the durations down.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Sends of one batch that may fail with an error retried by count (a crashed
    /// process, an API error) before it fails for good.
    pub attempts: u32,
    /// Throttled sends of one batch waited out before giving up: with the default
    /// backoff, a batch waits up to about a minute for a concurrency slot.
    pub throttled_attempts: u32,
    /// The first pause before a resend, doubled each time up to `backoff_cap`.
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// How long a batch whose function reports store errors is sent again, counted from
    /// its first such failure: the store layer retries each request for
    /// [`nums_layout::store::retry_budget`] (`NUMS_STORE_RETRY_SECONDS`, 120 s), and the
    /// driver waits an outage out for as long.
    pub store_budget: Duration,
    /// Backup invocations for stragglers; `None`: never.
    pub backups: Option<Backups>,
}

/// When a straggler gets a backup invocation. Two rules; either suffices:
/// - Cubed's (`cubed/runtime/backup.py`): at least `min_done_fraction` of the invocations
///   started have finished, and this one is older than `slow_factor` × the median duration
///   of the finished ones. Cubed also waits for 10 invocations to start; here a backup
///   takes only a free worker (below), that is, one with nothing else to start, so a
///   backup never delays other work and waiting for more starts would only keep a worker
///   idle while the rest of the plan waits for the straggler (a frozen function stalled an
///   LSHS run of 12 invocations until its timeout).
/// - The projection's: older than `overdue_factor` × its batch's duration as `model`
///   projects it (and `min_overdue`), whatever the others did: for runs too small or too
///   stalled for the statistics (one batch, or every finished one waiting on this).
///
/// While the run is stalled (no batch ready to start and a worker free: the rest of the
/// plan waits for the sends in flight), both factors are multiplied by `stalled_relief`:
/// a backup then costs only an idle worker's time, and each second waited is a second of
/// the whole run.
///
/// Never before `min_age`: below a second, timing noise (a process scheduled late, a
/// cold start) is not a straggler, and a backup would only add load. Each batch gets at
/// most one backup; the first result wins and the other is ignored (a batch's outputs are
/// deterministic blocks under deterministic keys, so a duplicate write is harmless).
#[derive(Debug, Clone)]
pub struct Backups {
    pub min_done_fraction: f64,
    pub slow_factor: f64,
    pub min_age: Duration,
    /// The cost model of the projection rule; `None`: Cubed's rule only.
    pub model: Option<crate::cost::CostModel>,
    pub overdue_factor: f64,
    pub min_overdue: Duration,
    pub stalled_relief: f64,
}

impl Default for Backups {
    fn default() -> Backups {
        Backups {
            min_done_fraction: 0.5,
            slow_factor: 3.0,
            min_age: Duration::from_secs(1),
            model: None,
            // The local model is up to 50% under on small stages (BENCHMARKS.md): 4x is
            // well past any honest run, and the floor keeps tiny batches from noise.
            overdue_factor: 4.0,
            min_overdue: Duration::from_secs(5),
            stalled_relief: 0.5,
        }
    }
}

impl Backups {
    /// How long after it was sent a send of `b` is overdue by the projection rule, when
    /// the run flows and when it is stalled.
    pub(super) fn overdue_after(&self, b: &PlannedBatch) -> Option<[Duration; 2]> {
        let secs = self.model.as_ref()?.batch_seconds(&b.work());
        let after = Duration::try_from_secs_f64(secs * self.overdue_factor)
            .ok()?
            .max(self.min_overdue);
        Some([after, after.mul_f64(self.stalled_relief)].map(|d| d.max(self.min_age)))
    }
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            attempts: 3,
            throttled_attempts: 8,
            backoff_base: Duration::from_millis(200),
            backoff_cap: Duration::from_secs(20),
            store_budget: nums_layout::store::retry_budget(),
            backups: Some(Backups::default()),
        }
    }
}

impl Policy {
    /// The pause before the `n`th resend (n >= 1): exponential, capped, with "equal
    /// jitter" (half fixed, half random) so that workers throttled together do not return
    /// together; never under `floor` (Lambda's Retry-After), itself capped.
    pub fn backoff(&self, n: u32, floor: Option<Duration>) -> Duration {
        let exp = self
            .backoff_base
            .saturating_mul(1u32 << n.saturating_sub(1).min(16))
            .min(self.backoff_cap);
        let half = exp / 2;
        let d = half + half.mul_f64(fastrand::f64());
        d.max(floor.unwrap_or_default().min(self.backoff_cap))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Backoff doubles from 200 ms to a 20 s cap, half of it random, never under Retry-After.
    #[test]
    fn backoff_grows_with_jitter_and_a_cap() {
        let p = Policy::default();
        for n in 1..=12u32 {
            let exp = (200u64 << (n - 1).min(16)).min(20_000);
            for _ in 0..50 {
                let d = p.backoff(n, None).as_millis() as u64;
                assert!(d >= exp / 2 && d <= exp, "n={n}: {d} ms");
            }
        }
        let spread: std::collections::HashSet<_> = (0..20).map(|_| p.backoff(5, None)).collect();
        assert!(spread.len() > 1, "no jitter");
        assert!(p.backoff(1, Some(Duration::from_secs(3))) >= Duration::from_secs(3));
        assert!(p.backoff(1, Some(Duration::from_secs(3600))) <= p.backoff_cap);
    }
}
