//! Ground utilities every room may use: atomic file writes and leftovers of
//! interrupted ones, the clock and ISO-8601 timestamps, random ids, cache hints, text
//! made safe for a terminal, fault injection for crash tests.

mod cache;
#[cfg(test)]
pub mod draws;
pub mod fault;
pub mod fs;
mod terminal;
mod time;
mod uuid;

pub use cache::prefetch;
pub use terminal::printable;
pub use time::{format_micros_iso, now_micros};
pub use uuid::{format_uuid_v4, new_uuid_v4};
