//! Aggregation stages in native Rust: the window stage (Spark's
//! `groupBy(window(...), cols).agg(...)`), with the running aggregates it keeps per
//! window and the open windows it holds in memory.

mod open_windows;
mod running;
mod window;

pub use window::WindowStage;
