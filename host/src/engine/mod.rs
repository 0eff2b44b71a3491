//! The engine: runs a query's batches under its trigger — the batch protocol (plan,
//! read input, run the stages, publish, commit), event time and watermarks, and the
//! measurements that become progress records. The files it writes belong to
//! [`crate::checkpoint`].

mod input;
mod metrics;
mod open;
mod query;
mod report;
mod run;
mod trigger;
mod watermark;

pub use metrics::{BatchMetrics, EventTimeStats, SourceMetrics};
pub use query::Query;
pub use run::{RunObserver, RunOptions, RunSummary, run_observed, run_pipeline};
pub use watermark::WatermarkTracker;
