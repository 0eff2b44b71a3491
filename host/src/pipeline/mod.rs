//! The pipeline spec: a TOML file that names the sources, their schema and
//! watermark, the operator, the sink and the trigger, and its validation.

mod aggregate_spec;
mod duration;
mod kafka;
mod limits;
mod located;
mod model;
mod overlap;
mod processor_spec;
mod schema;
mod sink_spec;
mod source_spec;
mod spec;
mod spec_errors;
mod stage_spec;

pub use aggregate_spec::{DEFAULT_MAX_COMPLETE_ROWS, parse_aggregate};
pub use duration::parse_duration;
pub use kafka::{
    DEFAULT_MAX_OFFSETS_PER_TRIGGER, KafkaProperties, KafkaSinkSpec, KafkaSourceSpec, METADATA_COLUMNS, PropertyValue,
    ResolvedProperty, StartingOffsets, Subscription, is_sensitive,
};
pub use limits::{CHANGE_OVERHEAD_BYTES, InstanceLimits, Limit, parse_size, show_bytes};
pub use model::*;
pub use processor_spec::{DEFAULT_KEY_GROUPS, DEFAULT_SPILL_STATE_BYTES};
pub use schema::{TYPE_NAMES, parse_schema};
