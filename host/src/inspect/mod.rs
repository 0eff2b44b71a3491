//! The state inspector behind `eddy state`: reads a query's store from outside the
//! query, read-only (so also while it runs), and shows entries, timers, the change
//! feed and a summary as JSON. It uses the store's own column-family names, key
//! layout and stored schema, never copies of them.

mod entry_json;
mod reader;

pub use entry_json::StateEntry;
pub use reader::{
    EntryFilter, OperatorMetadata, StateChange, StateReader, StoreMetadata, TimerEntry, VariableMetadata,
};
