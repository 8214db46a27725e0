//! A computation's progress: one count for every stage of a run (the CSV count, the masks,
//! the fits' passes, the main stage, the exports), fed by the stage runner as an
//! [`Observer`], in block tasks with the plan's totals, the store bytes moved, the stage
//! that runs and an ETA from the plan's projection. Shown as a bar on a terminal, as lines
//! on a pipe (forced on with `NUMS_CLOUD_PROGRESS=1`), or handed to a front end's own
//! display ([`Show::To`]: the Python package's notebook display).
//!
//! How it moves within an invocation: local function processes report tasks finished and
//! bytes moved as they go ([`crate::reports`]); a Lambda invocation answers once, so there
//! the count moves by finished batches and, between them, by the cost model's projection
//! of each batch's time (never past what the batches in flight hold). The ETA is the
//! projection of what is left (the running stage, then the stages expected after it),
//! and, once a tenth of a stage is done, that stage's measured pace.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::human::human;
use crate::reports::Heard;
use crate::stage::{BatchEnd, Expected, Observer, StageStart};

/// What the progress says at one moment: what a display draws.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Update {
    /// What a person calls the stage that runs (`main`, `CSV count`, `fit: Newton`,
    /// `export y`); empty before the first.
    pub stage: String,
    /// Block tasks done.
    pub tasks_done: u64,
    /// Block tasks of every stage: those run, the one running and those expected.
    pub tasks_total: u64,
    /// Invocations that answered (each batch's winning one).
    pub invocations_done: u64,
    /// Store bytes the functions read and wrote so far.
    pub bytes_moved: u64,
    /// Seconds left, as projected; `None` before anything is planned.
    pub eta_seconds: Option<f64>,
    /// Seconds since the computation started.
    pub elapsed_seconds: f64,
    /// What a long stage is at (a fit's pass, iteration, loss and gradient), or empty.
    pub note: String,
    /// The last update: the computation ended.
    pub finished: bool,
}

impl Update {
    /// The update in one line: `main: 3/8 tasks, 1.2 MB moved, ETA 4s`.
    pub fn line(&self) -> String {
        let stage = match self.stage.as_str() {
            "" => String::new(),
            s => format!("{s}: "),
        };
        let eta = match self.eta_seconds {
            Some(s) => format!(", ETA {}", eta_words(s)),
            None => String::new(),
        };
        format!(
            "{stage}{}/{} tasks, {} moved{eta}",
            self.tasks_done,
            self.tasks_total,
            human(self.bytes_moved)
        )
    }
}

/// Seconds as a person reads an ETA: `4s`, `2m 05s`, `1h 02m`.
pub(crate) fn eta_words(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
    }
}

/// Where the progress goes.
#[derive(Clone, Default)]
pub(crate) enum Show {
    /// Nowhere.
    #[default]
    Off,
    /// A bar on standard error (a terminal).
    Bar,
    /// A line on standard error now and then (a pipe, a log: `NUMS_CLOUD_PROGRESS=1`).
    Lines,
    /// To a front end's own display, at most every `every` (and at each stage's start and
    /// the end).
    To(Arc<dyn Fn(&Update) + Send + Sync>, Duration),
}

impl std::fmt::Debug for Show {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Show::Off => "Off",
            Show::Bar => "Bar",
            Show::Lines => "Lines",
            Show::To(..) => "To(..)",
        })
    }
}

/// The environment variable that forces the progress on (`1`: a bar on a terminal, lines
/// on a pipe) or off (`0`), for the command line and the Python package alike.
pub(crate) const PROGRESS_ENV: &str = "NUMS_CLOUD_PROGRESS";

impl Show {
    /// What standard error shows: a bar on a terminal when `default` (the front end's own
    /// choice), unless `NUMS_CLOUD_PROGRESS` says otherwise (`1`: a bar on a terminal,
    /// lines elsewhere; `0`: nothing).
    pub(crate) fn on_stderr(default: bool) -> Show {
        // As the Python package reads it: empty is unset.
        let forced = (std::env::var(PROGRESS_ENV).ok())
            .filter(|v| !v.trim().is_empty())
            .map(|v| {
                let v = v.trim().to_ascii_lowercase();
                !matches!(v.as_str(), "0" | "false" | "no" | "off")
            });
        Show::stderr(forced.unwrap_or(default), forced == Some(true))
    }

    /// A bar on a terminal when `show`; on a pipe, lines when `lines`, else nothing.
    pub(crate) fn stderr(show: bool, lines: bool) -> Show {
        use std::io::IsTerminal;
        match (show, std::io::stderr().is_terminal(), lines) {
            (false, ..) => Show::Off,
            (true, true, _) => Show::Bar,
            (true, false, true) => Show::Lines,
            (true, false, false) => Show::Off,
        }
    }
}

/// How often lines go to a pipe.
const LINES_EVERY: Duration = Duration::from_secs(1);
/// How often the count is looked at again between events (a Lambda stage moves by its
/// projection as time passes; the ETA counts down).
const TICK: Duration = Duration::from_millis(200);

/// The progress of one computation (see the module docs).
pub(crate) struct Progress {
    inner: Arc<Inner>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

struct Inner {
    show: Show,
    bar: Option<ProgressBar>,
    state: Mutex<State>,
    stop: AtomicBool,
    t0: Instant,
}

#[derive(Default)]
struct State {
    /// What stages not started yet are expected to add, by what makes them (`main`, a
    /// fit's `fit<N>`): in the total until they run.
    ahead: BTreeMap<String, Expected>,
    stage: Option<Running>,
    /// Tasks of the stages before the running one.
    before: u64,
    /// Bytes moved by finished invocations.
    moved: u64,
    /// What was shown last (the count never goes back).
    shown: u64,
    shown_bytes: u64,
    note: String,
    /// When an update last went out, and the stage it named.
    sent: Option<(Instant, String)>,
    invocations: u64,
    /// The last update went out: nothing follows it.
    closed: bool,
}

/// The running stage.
struct Running {
    label: String,
    started: Instant,
    tasks: u64,
    /// Tasks of its finished invocations.
    done: u64,
    /// Its invocations as projected: (start, end, tasks), seconds from its start.
    projected: Vec<(f64, f64, u64)>,
    wall: f64,
    reported: bool,
    /// What its running invocations reported: (tasks, bytes), by request id.
    running: HashMap<String, (u64, u64)>,
}

impl Running {
    /// Its tasks done by now: finished invocations', and the running ones' reports or
    /// (not reported) their projection, short of what is not finished.
    fn done_now(&self, now: Instant) -> u64 {
        let reported: u64 = self.running.values().map(|r| r.0).sum();
        let guess = if self.reported {
            self.done + reported
        } else {
            let t = now.saturating_duration_since(self.started).as_secs_f64();
            let projected: f64 = (self.projected.iter())
                .map(|&(s, e, n)| n as f64 * ((t - s) / (e - s).max(1e-9)).clamp(0.0, 1.0))
                .sum();
            // Never past nine tenths of what has not answered.
            let open = self.tasks.saturating_sub(self.done) as f64;
            self.done
                .max((projected.min(self.done as f64 + 0.9 * open)) as u64)
        };
        guess.min(self.tasks)
    }

    /// Seconds left in it.
    fn left(&self, done: u64, now: Instant) -> f64 {
        let f = match self.tasks {
            0 => 1.0,
            n => done as f64 / n as f64,
        };
        let e = now.saturating_duration_since(self.started).as_secs_f64();
        if f >= 0.1 && e > 0.0 {
            e * (1.0 - f) / f
        } else {
            self.wall * (1.0 - f)
        }
    }
}

impl State {
    fn update(&mut self, now: Instant, t0: Instant) -> Update {
        let (stage, done, left) = match &self.stage {
            Some(r) => {
                let d = r.done_now(now);
                (r.label.clone(), d, Some(r.left(d, now)))
            }
            None => (String::new(), 0, None),
        };
        let ahead_tasks: u64 = self.ahead.values().map(|e| e.tasks).sum();
        let ahead_s: f64 = self.ahead.values().map(|e| e.seconds).sum();
        let running = self.stage.as_ref().map_or(0, |r| r.tasks);
        let total = self.before + running + ahead_tasks;
        self.shown = self
            .shown
            .max(self.before + done)
            .min(total.max(self.shown));
        let in_flight: u64 = (self.stage.iter())
            .flat_map(|r| r.running.values())
            .map(|r| r.1)
            .sum();
        self.shown_bytes = self.shown_bytes.max(self.moved + in_flight);
        let eta = match (left, self.ahead.is_empty()) {
            (None, true) => None,
            (l, _) => Some(l.unwrap_or(0.0) + ahead_s),
        };
        Update {
            stage,
            tasks_done: self.shown,
            tasks_total: total,
            invocations_done: self.invocations,
            bytes_moved: self.shown_bytes,
            eta_seconds: eta,
            elapsed_seconds: now.saturating_duration_since(t0).as_secs_f64(),
            note: self.note.clone(),
            finished: false,
        }
    }
}

/// The bar's line; a note goes on a line of its own under it.
const BAR: &str = "{spinner} [{elapsed_precise}] {bar:40} {msg}";

impl Progress {
    pub(crate) fn new(show: Show) -> Progress {
        let bar = matches!(show, Show::Bar).then(|| {
            let bar = ProgressBar::new(0);
            bar.enable_steady_tick(Duration::from_millis(200));
            crate::logs::above(&bar);
            bar
        });
        let on = !matches!(show, Show::Off);
        let inner = Arc::new(Inner {
            show,
            bar,
            state: Default::default(),
            stop: AtomicBool::new(false),
            t0: Instant::now(),
        });
        let ticker = on.then(|| {
            let inner = inner.clone();
            std::thread::spawn(move || {
                while !inner.stop.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    inner.refresh(false);
                }
            })
        });
        Progress { inner, ticker }
    }

    /// The last update (with the counts at their end), then the bar taken off the screen.
    pub(crate) fn finish(&self) {
        self.inner.stop.store(true, Ordering::Relaxed);
        self.inner.refresh(true);
        if let Some(bar) = &self.inner.bar {
            // Drawn as it ends (redraws are rate-limited: the last would not show), then
            // taken off the screen.
            bar.abandon();
            bar.finish_and_clear();
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state()
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

impl Inner {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Shows the count as it is now: always when `must` (a stage starts, the end), else
    /// as often as the display takes.
    fn refresh(&self, must: bool) {
        if matches!(self.show, Show::Off) {
            return;
        }
        let now = Instant::now();
        let mut s = self.state();
        if s.closed {
            return;
        }
        let mut u = s.update(now, self.t0);
        u.finished = must && self.stop.load(Ordering::Relaxed);
        s.closed = u.finished;
        let new_stage = s.sent.as_ref().is_none_or(|(_, st)| *st != u.stage);
        let every = match &self.show {
            Show::Lines => LINES_EVERY,
            Show::To(_, every) => *every,
            _ => Duration::ZERO,
        };
        let due = must || new_stage || s.sent.as_ref().is_none_or(|(t, _)| now - *t >= every);
        if !due {
            return;
        }
        s.sent = Some((now, u.stage.clone()));
        // Under the lock: updates go out in the order they were made.
        match &self.show {
            Show::Off => {}
            Show::Bar => {
                let Some(bar) = &self.bar else { return };
                let template = match u.note.as_str() {
                    "" => BAR.to_string(),
                    _ => format!("{BAR}\n  {{prefix}}"),
                };
                bar.set_style(ProgressStyle::with_template(&template).expect("template"));
                bar.set_length(u.tasks_total);
                bar.set_position(u.tasks_done);
                bar.set_message(u.line());
                bar.set_prefix(u.note.clone());
            }
            Show::Lines => {
                let note = match u.note.as_str() {
                    "" => String::new(),
                    n => format!(" ({n})"),
                };
                eprintln!("progress: {}{note}", u.line());
            }
            Show::To(f, _) => f(&u),
        }
    }
}

impl Observer for Progress {
    fn on_stage_start(&self, e: &StageStart<'_>) {
        {
            let mut s = self.state();
            // Its work was expected: it runs now (`main`, `fit2` for `fit2-grad4-3`).
            let key = e.stage.split('-').next().unwrap_or(e.stage);
            if let Some(x) = s.ahead.get_mut(key) {
                let part = match x.tasks {
                    0 => 1.0,
                    n => (e.tasks as f64 / n as f64).min(1.0),
                };
                x.invocations = x.invocations.saturating_sub(e.to_run);
                x.tasks = x.tasks.saturating_sub(e.tasks);
                x.seconds *= 1.0 - part;
            }
            if let Some(r) = s.stage.take() {
                s.before += r.tasks;
            }
            s.stage = Some(Running {
                label: crate::invocation::stage_kind(e.stage, false).0,
                started: Instant::now(),
                tasks: e.tasks,
                done: 0,
                projected: (e.projected.iter())
                    .map(|i| (i.start, i.end, i.tasks))
                    .collect(),
                wall: e.projected.iter().map(|i| i.end).fold(0.0, f64::max),
                reported: e.reported,
                running: HashMap::new(),
            });
        }
        self.inner.refresh(true);
    }

    fn on_heard(&self, _stage: &str, h: &Heard) {
        {
            let mut s = self.state();
            let Some(r) = s.stage.as_mut() else { return };
            match h {
                Heard::Progress(id, p) => {
                    r.running
                        .insert(id.clone(), (p.tasks, p.bytes_read + p.bytes_written));
                }
                Heard::Ended(id) => {
                    r.running.remove(id);
                }
            }
        }
        self.inner.refresh(false);
    }

    fn on_batch_end(&self, e: &BatchEnd<'_>) {
        {
            let mut s = self.state();
            s.moved += e.stats.bytes_read + e.stats.bytes_written;
            s.invocations += 1;
            if let Some(r) = s.stage.as_mut() {
                r.done += e.stats.tasks;
            }
        }
        self.inner.refresh(false);
    }

    fn on_note(&self, text: &str) {
        self.state().note = text.to_string();
        self.inner.refresh(false);
    }

    fn on_expect(&self, what: &str, e: &Expected) {
        self.state().ahead.insert(what.to_string(), *e);
        self.inner.refresh(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_reads_as_a_line() {
        let u = Update {
            stage: "main".into(),
            tasks_done: 3,
            tasks_total: 8,
            bytes_moved: 1_200_000,
            eta_seconds: Some(125.2),
            ..Default::default()
        };
        assert_eq!(u.line(), "main: 3/8 tasks, 1.2 MB moved, ETA 2m 05s");
        assert_eq!(eta_words(3.4), "3s");
        assert_eq!(eta_words(3725.0), "1h 02m");
    }

    /// A Lambda stage (no reports) moves by the projection of each invocation's time,
    /// never past nine tenths of what has not answered.
    #[test]
    fn an_unreported_stage_moves_by_its_projection() {
        let t0 = Instant::now() - Duration::from_secs(5);
        let r = Running {
            label: "main".into(),
            started: t0,
            tasks: 20,
            done: 0,
            projected: vec![(0.0, 10.0, 10), (0.0, 10.0, 10)],
            wall: 10.0,
            reported: false,
            running: HashMap::new(),
        };
        let now = t0 + Duration::from_secs(5);
        assert_eq!(r.done_now(now), 10);
        assert_eq!(r.done_now(t0 + Duration::from_secs(60)), 18);
        // Half done after 5 s of a 10 s projection: its pace says 5 s more.
        assert!((r.left(10, now) - 5.0).abs() < 1e-6);
        assert!((r.left(0, now) - 10.0).abs() < 1e-6);
    }
}
