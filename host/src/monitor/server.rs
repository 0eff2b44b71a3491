//! The monitoring endpoint, on one address: `/metrics` (Prometheus, OpenMetrics text),
//! `/healthz` (the process is up), `/readyz` (the query keeps up), `/` (the dashboard)
//! and `/api/progress?last=N` (the last progress records, which the dashboard draws).
//! `eddy run --metrics` serves a running query; `eddy ui` serves a checkpoint's
//! progress records, for a query that runs elsewhere or has stopped.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::http::{self, Request, Response};
use super::metrics::QueryMetrics;
use crate::checkpoint::{CheckpointDir, QueryProgress};
use crate::engine::BatchMetrics;

/// How many progress records a live endpoint keeps for the dashboard.
const KEPT_RECORDS: usize = 300;
/// How many records `/api/progress` returns unless `last` says otherwise.
const DEFAULT_LAST: usize = 60;
/// How recent the last batch must be for `/readyz` when the trigger has no interval.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// The dashboard page, served from the binary (no CDN: it works offline).
const DASHBOARD: &str = include_str!("dashboard.html");

/// Whether the query keeps up, for `/readyz`.
#[derive(Default)]
struct Health {
    last_batch_end: Option<Instant>,
    last_overrun: bool,
    caught_up: bool,
}

/// What the endpoint serves.
struct Shared {
    metrics: Option<QueryMetrics>,
    /// The last records; its lock also keeps `/metrics` to whole batches.
    records: Mutex<VecDeque<QueryProgress>>,
    checkpoint: Option<CheckpointDir>,
    health: Mutex<Health>,
    interval: Option<Duration>,
}

/// A running query's monitoring endpoint; the run feeds it every batch.
pub struct Monitor {
    shared: Arc<Shared>,
    /// The address it listens on (with the port the system chose for port 0).
    pub address: String,
}

impl Monitor {
    /// Serves the metrics of the query named `query` on `address` (e.g.
    /// `127.0.0.1:9464`); `interval` is the processing-time trigger's, if any.
    pub fn start(address: &str, query: &str, interval: Option<Duration>) -> Result<Self> {
        let shared = Shared {
            metrics: Some(QueryMetrics::new(query)),
            records: Mutex::default(),
            checkpoint: None,
            health: Mutex::default(),
            interval,
        };
        let (shared, address) = serve(address, shared)?;
        Ok(Self { shared, address })
    }

    /// Takes in a committed batch: its metrics and its record change under the
    /// records' lock, so a scrape never sees half a batch.
    pub fn batch(&self, metrics: &BatchMetrics, record: &QueryProgress) {
        let mut records = self.shared.records.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(query_metrics) = &self.shared.metrics {
            query_metrics.observe(metrics, record.input_rows_per_second, record.processed_rows_per_second);
        }
        records.push_back(record.clone());
        while records.len() > KEPT_RECORDS {
            records.pop_front();
        }
        let mut health = self.shared.health.lock().unwrap_or_else(PoisonError::into_inner);
        *health =
            Health { last_batch_end: Some(Instant::now()), last_overrun: metrics.trigger_overrun, caught_up: false };
    }

    /// Notes that the query looked for work and found none: it has caught up.
    pub fn idle(&self) {
        self.shared.health.lock().unwrap_or_else(PoisonError::into_inner).caught_up = true;
    }
}

/// Serves the dashboard of the progress records in `checkpoint` on `address` until
/// the process ends; `on_ready` gets the address it listens on.
pub fn serve_checkpoint(address: &str, checkpoint: CheckpointDir, on_ready: impl FnOnce(&str)) -> Result<()> {
    let shared = Shared {
        metrics: None,
        records: Mutex::default(),
        checkpoint: Some(checkpoint),
        health: Mutex::default(),
        interval: None,
    };
    let (_shared, address) = serve(address, shared)?;
    on_ready(&address);
    loop {
        std::thread::park();
    }
}

/// Starts the HTTP server (see [`http`]) on its own thread.
fn serve(address: &str, shared: Shared) -> Result<(Arc<Shared>, String)> {
    let shared = Arc::new(shared);
    let serving = shared.clone();
    let bound = http::serve(address, Arc::new(move |request: &Request| respond(&serving, request)))?;
    Ok((shared, bound.to_string()))
}

const TEXT: &str = "text/plain; charset=utf-8";

fn respond(shared: &Shared, request: &Request) -> Response {
    match request.path {
        "/" | "/index.html" => Response::text(200, DASHBOARD, "text/html; charset=utf-8"),
        "/healthz" => Response::text(200, "ok\n", TEXT),
        "/readyz" => match readiness(shared) {
            Ok(()) => Response::text(200, "ready\n", TEXT),
            Err(why) => Response::text(503, format!("not ready: {why}\n"), TEXT),
        },
        "/metrics" => match &shared.metrics {
            Some(metrics) => {
                let _whole_batches = shared.records.lock().unwrap_or_else(PoisonError::into_inner);
                Response::text(200, metrics.encode(), "application/openmetrics-text; version=1.0.0; charset=utf-8")
            }
            None => Response::text(404, "no metrics: `eddy ui` serves progress records only\n", TEXT),
        },
        "/api/progress" => match progress_json(shared, last_of(request.query)) {
            Ok(json) => Response::text(200, json, "application/json"),
            Err(error) => Response::text(500, format!("{error:#}\n"), TEXT),
        },
        _ => Response::text(404, "not found\n", TEXT),
    }
}

/// The `last=N` parameter of a query string.
fn last_of(query: &str) -> usize {
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("last="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_LAST)
        .clamp(1, 1_000)
}

/// The last `last` progress records as a JSON array.
fn progress_json(shared: &Shared, last: usize) -> Result<String> {
    let records: Vec<QueryProgress> = match &shared.checkpoint {
        Some(checkpoint) => checkpoint.progress().last(last)?,
        None => {
            let records = shared.records.lock().unwrap_or_else(PoisonError::into_inner);
            records.iter().skip(records.len().saturating_sub(last)).cloned().collect()
        }
    };
    Ok(serde_json::to_string(&records)?)
}

/// Whether the query keeps up: it has caught up with its input since its last batch,
/// or its last batch ended recently and did not overrun the trigger interval.
fn readiness(shared: &Shared) -> Result<(), String> {
    let health = shared.health.lock().unwrap_or_else(PoisonError::into_inner);
    if health.last_overrun {
        return Err("the last batch took longer than the trigger interval".into());
    }
    if health.caught_up {
        return Ok(());
    }
    let within = shared.interval.map_or(READY_WITHIN, |interval| (interval * 2).max(READY_WITHIN));
    match health.last_batch_end {
        Some(end) if end.elapsed() <= within => Ok(()),
        Some(end) => Err(format!("no batch for {} s and input is still pending", end.elapsed().as_secs())),
        None => Err("no batch has run yet".into()),
    }
}
