//! The nums-cloud driver: job file → array graph → block tasks → batches → dispatch
//! (aws-sdk-lambda Invoke, against Lambda or the local endpoint) → report.
//!
//! As a library: [`api`] (lazy arrays run by the same engine), its typed [`Error`], and
//! the values it returns ([`Block`] of a [`DType`]).

pub mod api;
pub mod arrays;
pub mod cgroup;
pub mod cost;
pub mod dispatch;
pub mod error;
pub mod expr;
pub mod graph;
pub mod infra;
pub mod iterate;
pub mod job;
pub mod local;
pub mod logs;
pub mod models;
pub mod npy;
pub mod package;
pub mod planview;
pub mod report;
pub mod run;
pub mod runs;
pub mod sched;
pub mod svg;
pub mod tasks;
pub mod timeline;

pub use error::Error;
pub use nums_layout::{Block, DType};
