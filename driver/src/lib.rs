//! The nums-cloud driver: job file → array graph → block tasks → batches → dispatch
//! (aws-sdk-lambda Invoke, against Lambda or the local endpoint) → report.
//!
//! As a library: [`api`] (lazy arrays run by the same engine), its typed [`Error`], and
//! the values it returns ([`Block`] of a [`DType`]).

// Built without the command line, the few helpers only it reads (log set-up, the plan's
// CSV note) are unused: allowed there, not removed.
#![cfg_attr(not(feature = "cli"), allow(dead_code))]

pub mod api;
#[cfg(feature = "cli")]
pub mod cli;

// The engine's modules that the project's own benches (`benches/`) and integration tests
// drive directly: public for them, hidden from the docs, not a stable API.
#[doc(hidden)]
pub mod backend;
#[doc(hidden)]
pub mod dispatch;
#[doc(hidden)]
pub mod graph;
#[doc(hidden)]
pub mod job;
#[doc(hidden)]
#[cfg(feature = "local")]
pub mod local;
#[doc(hidden)]
pub mod plan;
#[doc(hidden)]
pub mod run;
#[doc(hidden)]
pub mod sched;

#[cfg(feature = "cli")]
pub(crate) mod arrays;
#[cfg(feature = "local")]
pub(crate) mod cgroup;
pub(crate) mod config;
pub(crate) mod cost;
pub(crate) mod csv_count;
pub(crate) mod engine;
pub(crate) mod error;
pub(crate) mod export;
pub(crate) mod expr;
pub(crate) mod human;
pub(crate) mod infra;
pub(crate) mod invocation;
pub(crate) mod iterate;
pub(crate) mod logs;
pub(crate) mod models;
pub(crate) mod npy;
#[cfg(feature = "cli")]
pub(crate) mod package;
#[cfg(feature = "cli")]
pub(crate) mod planview;
pub(crate) mod progress;
pub(crate) mod refusal;
pub(crate) mod report;
pub(crate) mod reports;
/// The driver's view of which function process holds which block in memory.
pub(crate) mod residency;
pub(crate) mod runs;
pub(crate) mod stage;
#[cfg(feature = "cli")]
pub(crate) mod svg;
pub(crate) mod tasks;
#[cfg(feature = "cli")]
pub(crate) mod timeline;

pub use error::{Error, PyException};
pub use nums_layout::{Block, DType};
