//! The engine: drives batches from the source through the operator to the sink,
//! committing state after each.

mod run;

pub use run::{RunOptions, RunSummary, run_pipeline};
