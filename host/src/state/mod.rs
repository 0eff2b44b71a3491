//! State: the RocksDB store, its byte layout, and the typed state variables and
//! timers that processors use.

mod compatibility;
mod entry_json;
pub mod layout;
pub mod paths;
mod store;
mod ttl;
mod variables;

pub use compatibility::{OperatorStateSchema, check_and_record, stored_schema};
pub use store::{Cf, StateStore, StateTxn};
pub use ttl::evict_expired;
pub use variables::{DueTimer, KeyScope, StateKind, Timers, VariableDecl, live_list, value_get};
pub mod reader;

pub use reader::{EntryFilter, OperatorSchema, StateChange, StateEntry, StateReader, StoreMetadata, TimerEntry};
