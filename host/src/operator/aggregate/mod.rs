//! Aggregation stages in native Rust: the window stage (Spark's
//! `groupBy(window(...), cols).agg(...)`) with the open windows it holds in memory, and
//! the aggregate stage (`groupBy(cols).agg(...)`, no window); both keep the running
//! aggregates of [`running`].

mod cbor;
mod group_by;
mod group_key;
mod open_windows;
mod output_order;
mod running;
mod window;
mod window_value;

pub use group_by::AggregateStage;
pub use window::WindowStage;
pub use window_value::window_json;
