//! The pipeline spec: a TOML file that names the source, its schema, the operator
//! and the sink, and its validation.

mod schema;
mod spec;

pub use schema::{TYPE_NAMES, parse_schema};
pub use spec::{InitialStateSpec, OperatorSpec, Pipeline, SinkFormat, SinkSpec, SourceSpec};
