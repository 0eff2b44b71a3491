//! Watching a query: Prometheus metrics, health and readiness, and a live dashboard
//! page drawn from the progress records, all on one HTTP address.

mod http;
mod metrics;
mod server;

pub use metrics::QueryMetrics;
pub use server::{Monitor, serve_checkpoint};
