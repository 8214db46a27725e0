//! What local function processes report while an invocation runs
//! ([`nums_layout::batch::Progress`], sent to the local endpoint's runtime API), handed on
//! to the stage that listens for the batch's job prefix. The endpoint tells when each
//! reporting invocation ended (answered, failed or its process died), so that a listener
//! counts an invocation's reports only until its answer counts instead.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use nums_layout::batch::Progress;
use tokio::sync::{Notify, mpsc};

/// One thing heard of an invocation, by its request id.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Heard {
    /// What it has done so far.
    Progress(String, Progress),
    /// It ended: its reports no longer count.
    Ended(String),
}

/// The listeners, by job prefix, and the invocations that reported, with their prefix.
#[derive(Default)]
pub(crate) struct Reports {
    inner: Mutex<Inner>,
}

/// A listener: its number, its prefix, where what it hears goes, and its wake-up.
struct Listener {
    id: u64,
    prefix: String,
    tx: mpsc::UnboundedSender<Heard>,
    wake: Arc<Notify>,
}

impl Listener {
    fn hear(&self, h: Heard) {
        let _ = self.tx.send(h);
        self.wake.notify_one();
    }
}

#[derive(Default)]
struct Inner {
    next: u64,
    listeners: Vec<Listener>,
    reporting: HashMap<String, String>,
}

impl Reports {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Invocation `id` reports `p`: to every listener of its prefix.
    pub(crate) fn progress(&self, id: &str, p: Progress) {
        let mut g = self.inner();
        g.reporting.insert(id.to_string(), p.job_prefix.clone());
        for l in g.listeners.iter().filter(|l| l.prefix == p.job_prefix) {
            l.hear(Heard::Progress(id.to_string(), p.clone()));
        }
    }

    /// Invocation `id` ended (if it ever reported, its listeners hear it).
    pub(crate) fn ended(&self, id: &str) {
        let mut g = self.inner();
        let Some(prefix) = g.reporting.remove(id) else {
            return;
        };
        for l in g.listeners.iter().filter(|l| l.prefix == prefix) {
            l.hear(Heard::Ended(id.to_string()));
        }
    }

    /// Listens for the reports of batches under `job_prefix` until the result is dropped.
    pub(crate) fn listen(self: &Arc<Self>, job_prefix: &str) -> Listening {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut g = self.inner();
        g.next += 1;
        let id = g.next;
        let wake = Arc::new(Notify::new());
        g.listeners.push(Listener {
            id,
            prefix: job_prefix.to_string(),
            tx,
            wake: wake.clone(),
        });
        Listening {
            rx: Mutex::new(rx),
            wake,
            reports: self.clone(),
            id,
        }
    }
}

/// A listener's end: what was heard, in order.
pub(crate) struct Listening {
    rx: Mutex<mpsc::UnboundedReceiver<Heard>>,
    wake: Arc<Notify>,
    reports: Arc<Reports>,
    id: u64,
}

impl Listening {
    /// Everything heard since the last call.
    pub(crate) fn drain(&self) -> Vec<Heard> {
        let mut rx = self.rx.lock().unwrap_or_else(|p| p.into_inner());
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    /// Waits until something may have been heard since the last wait ([`Listening::drain`]
    /// takes it; the receiver is a plain lock, so that a caller drains it in passing).
    pub(crate) async fn heard(&self) {
        self.wake.notified().await
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.reports.inner().listeners.retain(|l| l.id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(prefix: &str, tasks: u64) -> Progress {
        Progress {
            job_prefix: prefix.into(),
            tasks,
            ..Default::default()
        }
    }

    #[test]
    fn a_listener_hears_its_prefix_only_and_ends_of_what_reported() {
        let r = Arc::new(Reports::default());
        let a = r.listen("job/a");
        let b = r.listen("job/b");
        r.progress("1", p("job/a", 2));
        r.progress("2", p("job/b", 1));
        r.ended("1");
        r.ended("3"); // never reported: nobody hears of it
        assert_eq!(
            a.drain(),
            vec![
                Heard::Progress("1".into(), p("job/a", 2)),
                Heard::Ended("1".into())
            ]
        );
        assert_eq!(b.drain(), vec![Heard::Progress("2".into(), p("job/b", 1))]);
        drop(a);
        r.progress("4", p("job/a", 1));
        assert!(r.inner().listeners.len() == 1);
    }
}
