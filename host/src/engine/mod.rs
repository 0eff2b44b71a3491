//! The engine: plans micro-batches under a trigger, tracks event time, runs the
//! sharded operator, writes the sink and commits state, and measures every batch.

mod checkpoint;
mod metrics;
mod query;
mod report;
mod run;
mod watermark;

pub use checkpoint::{BatchLog, Metadata, OffsetsRecord, Snapshots};
pub use metrics::{BatchMetrics, EventTimeStats, SourceMetrics};
pub use query::{Query, operator_id};
pub use run::{RunOptions, RunSummary, open_query, run_pipeline};
pub use watermark::WatermarkTracker;
