//! eddy: a stream processor whose per-key stateful logic runs as sandboxed
//! WebAssembly components.
//!
//! Data flows one way: [`source`] → [`decode`] → group by key → [`operator`] →
//! [`sink`], with [`state`] in RocksDB and the [`engine`] driving batches.

pub mod cli;
pub mod decode;
pub mod engine;
pub mod fsutil;
pub mod log;
pub mod operator;
pub mod pipeline;
pub mod progress;
pub mod sink;
pub mod source;
pub mod state;
pub mod wasm;
