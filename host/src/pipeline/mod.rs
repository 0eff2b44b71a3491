//! The pipeline spec: a TOML file that names the sources, their schema and
//! watermark, the operator, the sink and the trigger, and its validation.

mod duration;
mod model;
mod schema;
mod spec;
mod spec_errors;

pub use duration::parse_duration;
pub use model::*;
pub use schema::{TYPE_NAMES, parse_schema};
