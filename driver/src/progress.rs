//! The run's progress bar: one bar for every stage of a run (the CSV count, the masks, the
//! fits' passes, the main stage, the exports), fed by the stage runner as an
//! [`Observer`]; hidden when off (not a terminal, `-q`, `-v`).

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
    /// The main stage's invocations as first planned: in the bar's total until it runs
    /// (a mask's stage runs before the main plan is known for good).
    main_estimate: u64,
    /// Store bytes the functions moved so far.
    moved: u64,
    /// What a long stage is at (a fit's iteration).
    note: String,
}

impl Progress {
    pub(crate) fn new(show: bool) -> Progress {
        let bar = if show {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} invocations, {msg} moved, ETA {eta}{prefix}",
                )
                .expect("template"),
            );
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

    /// Counts the main stage's `invocations` in the total until it starts.
    pub(crate) fn expect_main(&self, invocations: u64) {
        self.state().main_estimate = invocations;
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
        self.bar.set_message(human(s.moved));
        self.bar.set_prefix(match s.note.as_str() {
            "" => String::new(),
            note => format!("; {note}"),
        });
    }
}

impl Observer for Progress {
    fn on_stage_start(&self, e: &StageStart<'_>) {
        let mut s = self.state();
        if e.stage == "main" {
            s.main_estimate = 0; // running now: stages after it add only their own
        }
        // What ran, this stage, and the main stage as planned when it is still to come.
        self.bar
            .set_length(self.bar.position() + e.to_run + s.main_estimate);
    }

    fn on_batch_end(&self, e: &BatchEnd<'_>) {
        let mut s = self.state();
        s.moved += e.stats.bytes_read + e.stats.bytes_written;
        self.bar.inc(1);
        self.show(&s);
    }

    fn on_note(&self, text: &str) {
        let mut s = self.state();
        s.note = text.to_string();
        self.show(&s);
    }
}
