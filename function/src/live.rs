//! An invocation's progress as it runs, told to the local endpoint that sent it, so that
//! the driver's progress moves with tasks and bytes before the invocation answers.
//!
//! The pipeline counts each finished task into a [`Live`]; a reporter beside it
//! ([`report`]) sends [`Progress`] to the endpoint at the batch's milestones (every
//! sixteenth of its tasks, the last left to the answer itself) and, while a long task
//! moves bytes, every [`BYTES_EVERY`]. Every milestone is sent, in order, before the
//! invocation answers: the driver sees them before the batch's end. Lambda's Runtime API
//! has no such route; there the answer is all the driver hears (its bar moves by the
//! plan's projection instead).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use nums_layout::IoCounters;
use nums_layout::batch::Progress;
use tokio::sync::mpsc;

/// How often a report goes out while bytes move and no task finishes.
pub const BYTES_EVERY: Duration = Duration::from_millis(250);

/// A report that the endpoint does not take within this is given up (the batch goes on).
const REPORT_TIMEOUT: Duration = Duration::from_secs(1);

/// What the running invocation has done: its store counters once it starts, and a signal
/// per finished task. Dropped when the invocation ends, which ends its reporter.
pub struct Live {
    io: Arc<OnceLock<Arc<IoCounters>>>,
    done: mpsc::UnboundedSender<()>,
}

impl Live {
    /// A `Live` and what its reporter reads.
    pub fn new() -> (Live, Heard) {
        let (tx, rx) = mpsc::unbounded_channel();
        let io: Arc<OnceLock<Arc<IoCounters>>> = Arc::default();
        let heard = Heard { rx, io: io.clone() };
        (Live { io, done: tx }, heard)
    }

    /// The invocation measures its store traffic with `io`.
    pub(crate) fn started(&self, io: &Arc<IoCounters>) {
        let _ = self.io.set(io.clone());
    }

    /// A task finished.
    pub(crate) fn task_done(&self) {
        let _ = self.done.send(());
    }
}

/// The reporter's end of a [`Live`].
pub struct Heard {
    rx: mpsc::UnboundedReceiver<()>,
    io: Arc<OnceLock<Arc<IoCounters>>>,
}

impl Heard {
    /// Store bytes read and written so far.
    fn bytes(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.io.get().map_or((0, 0), |c| {
            (c.bytes_read.load(Relaxed), c.bytes_written.load(Relaxed))
        })
    }
}

/// Where reports go: the invocation's progress route on the local endpoint.
pub trait Sink: Sync {
    /// Sends one report (awaited: reports arrive in order).
    fn send(&self, p: Progress) -> impl std::future::Future<Output = ()> + Send;
}

/// The tasks after which a batch of `total` tasks reports: every sixteenth of them, but
/// not the last (the answer says it).
pub fn milestone(done: u64, total: u64) -> bool {
    let step = total.div_ceil(16).max(1);
    done < total && done.is_multiple_of(step)
}

/// Sends what `heard` hears through `to` until its [`Live`] is dropped (the invocation
/// ended): at each milestone of the batch's `total` tasks, and every [`BYTES_EVERY`] while
/// bytes move. Returns once every report is sent.
pub async fn report(mut heard: Heard, job_prefix: &str, total: u64, to: &impl Sink) {
    let mut tasks = 0;
    let mut sent = (0, 0);
    let mut tick = tokio::time::interval(BYTES_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        let due = tokio::select! {
            biased;
            d = heard.rx.recv() => match d {
                Some(()) => {
                    tasks += 1;
                    milestone(tasks, total)
                }
                None => break,
            },
            _ = tick.tick() => heard.bytes() != sent,
        };
        if !due {
            continue;
        }
        sent = heard.bytes();
        let p = Progress {
            job_prefix: job_prefix.to_string(),
            tasks,
            bytes_read: sent.0,
            bytes_written: sent.1,
        };
        let _ = tokio::time::timeout(REPORT_TIMEOUT, to.send(p)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milestones_are_sixteenths_short_of_the_last() {
        let at = |total| {
            (1..=total)
                .filter(|&d| milestone(d, total))
                .collect::<Vec<_>>()
        };
        assert_eq!(at(4), vec![1, 2, 3]);
        assert_eq!(at(1), Vec::<u64>::new());
        assert_eq!(at(64).len(), 15);
        assert_eq!(at(64)[0], 4);
    }
}
