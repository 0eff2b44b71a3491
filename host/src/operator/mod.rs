//! Operators: the stages a batch's rows pass through between the sources and the
//! sink: a user's WebAssembly processor sharded by key group, SQL on DataFusion,
//! event-time windows and deduplication.

mod aggregate;
mod dedup;
mod grouping;
#[cfg(test)]
mod layout_tests;
mod processor_spec;
mod shards;
mod sql;
mod stage;
mod top_keys;
mod wasm_operator;

pub use aggregate::{AggregateStage, WindowStage, window_json};
pub use dedup::DedupStage;
pub use grouping::{Grouped, KeyRows, group_by_key};
pub use shards::ShardedOperator;
pub use sql::{INPUT_TABLE, SqlStage};
pub use stage::{BatchTime, HandlerStats, Stage, StageOutput, StageStats, StaticTable};
pub use top_keys::{TOP_KEYS, TopKeysCollector};
pub use wasm_operator::{CallStats, OperatorOptions, OperatorOutput, WasmOperator};
