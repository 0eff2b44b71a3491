//! eddy: a stream processor whose per-key stateful logic runs as sandboxed
//! WebAssembly components.
//!
//! Data flows one way: [`source`] → [`decode`] → the [`operator`] stages → [`sink`],
//! with [`state`] in RocksDB, the files of the [`checkpoint`], and the [`engine`]
//! driving batches. Rooms from the ground up (a room imports only rooms below it):
//!
//! `util`, `log`, `contract` → `pipeline` → `kafka` → `decode`, `checkpoint` → `sink` →
//! `state` → `wasm`, `source` → `operator` → `inspect`, `engine` → `monitor`, `project` → `cli`.

#![warn(missing_docs)]

pub mod checkpoint;
pub mod cli;
pub mod contract;
pub mod decode;
pub mod engine;
pub mod inspect;
pub mod kafka;
pub mod log;
pub mod monitor;
pub mod operator;
pub mod pipeline;
pub mod project;
pub mod sink;
pub mod source;
pub mod state;
pub mod util;
pub mod wasm;
