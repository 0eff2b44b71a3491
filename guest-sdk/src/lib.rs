//! # eddy-guest: write eddy processors in Rust
//!
//! An eddy processor is per-key stateful logic, like a Spark `StatefulProcessor` in
//! `transformWithState`, compiled to a WebAssembly component (`wasm32-wasip2`). The
//! eddy host groups each micro-batch's rows by key and calls the processor once per
//! key with that key's new rows, its state variables and its timers.
//!
//! Implement [`StatefulProcessor`]:
//! - [`init`](StatefulProcessor::init) reads the config ([`InitContext::config`]),
//!   declares typed state ([`ValueState`], [`ListState`], [`MapState`], optionally with
//!   a [`Ttl`]), the output schema and the [`TimeMode`], and keeps the handles;
//! - [`handle_input_rows`](StatefulProcessor::handle_input_rows) reads the key's
//!   [`Rows`] by column or by row and appends result rows to the [`Output`];
//! - [`handle_expired_timer`](StatefulProcessor::handle_expired_timer) reacts to the
//!   [`Timers`] it registered.
//!
//! Then [`export_processor!`] makes it the component's processor, and
//! [`testing::Harness`] unit-tests it natively with `cargo test`.
//!
//! State values are serde types, stored as CBOR. Times are microseconds since the Unix
//! epoch (`i64`).
//!
//! ```
//! use eddy_guest::{
//!     export_processor, row, InitContext, Key, Output, Result, Rows, Schema,
//!     StatefulProcessor, TimerValues, Ttl, Value, ValueState,
//! };
//! use eddy_guest::testing::Harness;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Default, Serialize, Deserialize)]
//! struct Totals {
//!     count: i64,
//!     sum: i64,
//! }
//!
//! struct RunningCount {
//!     totals: ValueState<Totals>,
//! }
//!
//! impl StatefulProcessor for RunningCount {
//!     fn init(ctx: &mut InitContext) -> Result<Self> {
//!         ctx.set_output_schema(Schema::parse("user STRING, count BIGINT, sum BIGINT")?);
//!         Ok(RunningCount { totals: ctx.value_state("totals", Ttl::NONE)? })
//!     }
//!
//!     fn handle_input_rows(
//!         &mut self,
//!         key: &Key,
//!         rows: &Rows,
//!         _timer_values: &TimerValues,
//!         output: &mut Output,
//!     ) -> Result<()> {
//!         let mut totals = self.totals.get()?.unwrap_or_default();
//!         totals.count += rows.len() as i64;
//!         totals.sum += rows.i64s("amount")?.iter().sum::<i64>();
//!         self.totals.update(&totals)?;
//!         output.append_row(&row![key.str(0)?, totals.count, totals.sum])
//!     }
//! }
//!
//! // In the processor's cdylib crate, this generates the component's exports.
//! export_processor!(RunningCount);
//!
//! // And this is a unit test.
//! # fn main() -> Result<()> {
//! let mut harness = Harness::<RunningCount>::builder("user STRING, amount BIGINT", "user STRING")
//!     .build()?;
//! harness.feed(&row!["alice"], &[row!["alice", 5], row!["alice", 7]])?;
//! let out = harness.feed(&row!["alice"], &[row!["alice", 1]])?;
//! assert_eq!(out.to_values(), vec![vec![Value::from("alice"), Value::from(3), Value::from(13)]]);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod bindings;
mod cbor;
mod changes;
mod context;
mod convert;
mod error;
mod key;
pub mod log;
mod modes;
mod output;
mod processor;
mod rows;
#[doc(hidden)]
pub mod runtime;
mod schema;
mod state;
mod store;
pub mod testing;
mod timers;
mod value;

pub use context::{InitContext, QueryInfo};
pub use error::{Error, Result};
pub use key::Key;
pub use modes::{OutputMode, TimeMode};
pub use output::{Output, RowWriter};
pub use processor::StatefulProcessor;
pub use rows::{BinaryColumn, Column, Row, Rows, StrColumn};
pub use schema::{ColumnRef, DataType, Field, Schema};
pub use state::{ListState, MapState, Ttl, ValueState};
pub use timers::{ExpiredTimer, TimerValues, Timers};
pub use value::{Datum, Value};
