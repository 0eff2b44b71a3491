//! State: the RocksDB store, its byte layout, the encoding of grouping keys, and the
//! typed state variables and timers that processors use.

mod ahead;
pub mod changelog;
mod compatibility;
mod gallop;
pub mod key;
pub mod layout;
mod overlay;
pub mod packed;
mod resident;
mod resident_feed;
mod resident_held;
mod shared_prefix;
mod store;
pub mod timer_buckets;
mod timers;
mod ttl;
mod tuning;
mod txn;
pub mod unwritten;
mod variables;

pub use ahead::copy_before;
pub use compatibility::{
    OperatorStateSchema, SchemaCheck, check, schema_entry, schema_key, stored_schema, write_schema_file,
};
pub use store::{CF_NAMES, CHANGELOG, COMMITTED_BATCH, Cf, StateStore, StateTxn};
pub use timers::{DueTimer, DueTimers, Timers};
pub use ttl::evict_expired;
pub use variables::{KeyScope, StateKind, VariableDecl, live_list, value_get};
