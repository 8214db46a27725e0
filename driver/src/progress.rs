//! The run's progress bar: one bar for every stage of a run (the CSV count, the masks, the
//! fits' passes, the main stage, the exports), fed by the stage runner as an
//! [`Observer`]; hidden when off (not a terminal, `-q`, `-v`).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::human::human;
use crate::stage::{BatchEnd, Observer, StageStart};

/// The bar, and what its message says.
pub(crate) struct Progress {
    bar: ProgressBar,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Invocations expected of stages not started yet, by what makes them (`main`, a
    /// fit's `fit<N>`): in the bar's total until they run.
    ahead: BTreeMap<String, u64>,
    /// Invocations of the running stage not finished yet.
    running: u64,
    /// Store bytes the functions moved so far.
    moved: u64,
    /// What a long stage is at (a fit's pass, iteration, loss and gradient): a second
    /// line under the bar.
    note: String,
}

/// The bar's line; a note goes on a line of its own under it.
const BAR: &str =
    "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} invocations, {msg} moved, ETA {eta}";

impl Progress {
    pub(crate) fn new(show: bool) -> Progress {
        let bar = if show {
            let bar = ProgressBar::new(0);
            bar.enable_steady_tick(Duration::from_millis(200));
            crate::logs::above(&bar);
            bar
        } else {
            ProgressBar::hidden()
        };
        let p = Progress {
            bar,
            state: Default::default(),
        };
        p.show(&State::default());
        p
    }

    /// Draws the bar as it ends (redraws are rate-limited: a quick last stage would not
    /// show), then takes it off the screen.
    pub(crate) fn finish(&self) {
        self.bar.abandon();
        self.bar.finish_and_clear();
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn show(&self, s: &State) {
        let template = match s.note.as_str() {
            "" => BAR.to_string(),
            _ => format!("{BAR}\n  {{prefix}}"),
        };
        self.bar
            .set_style(ProgressStyle::with_template(&template).expect("template"));
        self.bar.set_message(human(s.moved));
        self.bar.set_prefix(s.note.clone());
    }

    /// The total: what ran, what runs now, and what is expected after.
    fn set_total(&self, s: &State) {
        let total = self.bar.position() + s.running + s.ahead.values().sum::<u64>();
        self.bar.set_length(total);
    }
}

impl Observer for Progress {
    fn on_stage_start(&self, e: &StageStart<'_>) {
        let mut s = self.state();
        // Its invocations were expected: they run now (`main`, `fit2` for `fit2-grad4-3`).
        let key = e.stage.split('-').next().unwrap_or(e.stage);
        if let Some(n) = s.ahead.get_mut(key) {
            *n = n.saturating_sub(e.to_run);
        }
        s.running = e.to_run;
        self.set_total(&s);
    }

    fn on_batch_end(&self, e: &BatchEnd<'_>) {
        let mut s = self.state();
        s.moved += e.stats.bytes_read + e.stats.bytes_written;
        s.running = s.running.saturating_sub(1);
        self.bar.inc(1);
        self.show(&s);
    }

    fn on_note(&self, text: &str) {
        let mut s = self.state();
        s.note = text.to_string();
        self.show(&s);
    }

    fn on_expect(&self, what: &str, invocations: u64) {
        let mut s = self.state();
        s.ahead.insert(what.to_string(), invocations);
        self.set_total(&s);
    }
}
