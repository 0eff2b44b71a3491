//! `eddy run`: runs a pipeline, printing each batch's progress record on request and,
//! on a terminal, a bar of the files an available-now run works through.
//!
//! Stopping: the first SIGINT (Ctrl-C) or SIGTERM lets the batch in flight finish and
//! commit, then the run ends with a one-line summary and exit code 0; a batch still
//! running after the grace period (`--stop-grace`) is abandoned — nothing of it is
//! committed, the next start runs it again, and the exit code is
//! [`ABANDONED_EXIT_CODE`], so that a service manager or script sees that the stop
//! was not clean. A second signal stops at once (exit code 130 for SIGINT, 143 for
//! SIGTERM).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use signal_hook::consts::{SIGINT, SIGTERM};

use super::status::StatusLine;
use crate::checkpoint::QueryProgress;
use crate::engine::{BatchMetrics, RunObserver, RunOptions, run_observed};
use crate::monitor::Monitor;
use crate::pipeline::{Pipeline, TriggerSpec};
use crate::wasm::WasmRuntime;

/// The exit code of a run whose batch in flight was abandoned after `--stop-grace`:
/// 75, `EX_TEMPFAIL` of sysexits.h (a temporary failure; running again completes it).
pub const ABANDONED_EXIT_CODE: i32 = 75;

/// Runs a pipeline over its input.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The pipeline spec (TOML).
    pub pipeline: PathBuf,
    /// Keeps state in this directory instead of the spec's `checkpoint`.
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    /// Compiles the module every time instead of using the on-disk cache.
    #[arg(long)]
    pub no_module_cache: bool,
    /// Stops after this many batches, whatever the trigger.
    #[arg(long)]
    pub max_batches: Option<u64>,
    /// Prints each batch's progress record (JSON) on stderr.
    #[arg(long)]
    pub progress: bool,
    /// After a stop signal, how many seconds the batch in flight may still run before
    /// it is abandoned (and runs again at the next start).
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub stop_grace: u64,
    /// Serves Prometheus metrics (`/metrics`), `/healthz`, `/readyz` and the live
    /// dashboard (`/`) on this address, e.g. 127.0.0.1:9464 (overrides `[monitoring]`).
    #[arg(long, value_name = "ADDRESS")]
    pub metrics: Option<String>,
    /// Draws no status line on the terminal.
    #[arg(long)]
    pub quiet: bool,
}

/// What the run shows: the terminal's status line, progress records on request, and
/// the monitoring endpoint when one is asked for.
struct Watchers {
    print_progress: bool,
    /// Whether the status line shows a files bar (available-now runs).
    count_files: bool,
    files_total: Option<u64>,
    status: StatusLine,
    monitor: Option<Monitor>,
}

impl RunObserver for Watchers {
    fn counts_files(&self) -> bool {
        self.count_files
    }

    fn started(&mut self, files_left: Option<u64>) -> Result<()> {
        self.files_total = files_left.filter(|total| *total > 0);
        if let Some(total) = self.files_total {
            self.status.set_files(0, total);
            self.status.draw(true);
        }
        Ok(())
    }

    fn attempt_starting(&mut self) {
        self.status.clear();
    }

    fn batch(&mut self, metrics: &BatchMetrics, record: &QueryProgress) -> Result<()> {
        if self.print_progress {
            eprintln!("{}", serde_json::to_string(record)?);
        }
        if let (Some(total), Some(left)) = (self.files_total, metrics.files_left) {
            self.status.set_files(total.saturating_sub(left), total);
        }
        if let Some(monitor) = &self.monitor {
            monitor.batch(metrics, record);
        }
        self.status.set_batch(record, metrics.watermark);
        self.status.draw(true);
        Ok(())
    }

    fn idle(&mut self) {
        if let Some(monitor) = &self.monitor {
            monitor.idle();
        }
        self.status.draw(false);
    }

    fn finished(&mut self) {
        self.status.finish();
    }
}

/// Runs the pipeline of `args`.
pub fn run(args: &RunArgs) -> Result<()> {
    let pipeline = Pipeline::load(&args.pipeline)?;
    let module_cache = if args.no_module_cache { None } else { WasmRuntime::default_cache_dir() };
    let stop = stop_on_signals(Duration::from_secs(args.stop_grace))?;
    let options = RunOptions {
        checkpoint: args.checkpoint.clone(),
        module_cache,
        max_batches: args.max_batches,
        stop: Some(stop),
    };
    let status = StatusLine::new(!args.quiet);
    let count_files = pipeline.trigger == TriggerSpec::AvailableNow && status.is_visible();
    let monitor = match args.metrics.as_ref().or(pipeline.metrics_address.as_ref()) {
        Some(address) => {
            let interval = match pipeline.trigger {
                TriggerSpec::ProcessingTime(interval) => Some(interval),
                _ => None,
            };
            let monitor = Monitor::start(address, &pipeline.name, interval)?;
            crate::log::info(&format!(
                "metrics on http://{}/metrics, dashboard on http://{}/",
                monitor.address, monitor.address
            ));
            Some(monitor)
        }
        None => None,
    };
    let mut watchers = Watchers { print_progress: args.progress, count_files, files_total: None, status, monitor };
    let summary = run_observed(&pipeline, &options, &mut watchers)?;
    if summary.stopped {
        // Before the summary, whether or not the watchdog has noticed the signal yet.
        announce_stop();
    }
    let last = summary.last_committed_batch.map_or_else(|| "none".to_string(), |id| id.to_string());
    crate::log::info(&format!(
        "query '{}' {}: {} batches, {} input rows, {} output rows; last committed batch {last}",
        pipeline.name,
        if summary.stopped { "stopped" } else { "done" },
        summary.batches,
        summary.input_rows,
        summary.output_rows
    ));
    Ok(())
}

/// Says, once, that a stop signal was received.
fn announce_stop() {
    static ANNOUNCED: AtomicBool = AtomicBool::new(false);
    if !ANNOUNCED.swap(true, Ordering::SeqCst) {
        crate::log::info("stopping: the batch in flight finishes first (a second signal stops at once)");
    }
}

/// A flag that the first SIGINT or SIGTERM sets; a second one exits at once. Once the
/// flag is set, a watchdog ends the process after `grace` if the run has not ended.
fn stop_on_signals(grace: Duration) -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for (signal, code) in [(SIGINT, 130), (SIGTERM, 143)] {
        // Registered first: when the flag is already set, the signal exits at once.
        signal_hook::flag::register_conditional_shutdown(signal, code, stop.clone())
            .context("cannot install the stop signal handlers")?;
        signal_hook::flag::register(signal, stop.clone()).context("cannot install the stop signal handlers")?;
    }
    let watched = stop.clone();
    std::thread::Builder::new()
        .name("eddy-stop".into())
        .spawn(move || {
            while !watched.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
            announce_stop();
            std::thread::sleep(grace);
            crate::log::info(&format!(
                "stopped: the batch in flight ran past the {} s grace period and was abandoned; nothing of it was \
                 committed and the next start runs it again (exit code {ABANDONED_EXIT_CODE})",
                grace.as_secs()
            ));
            std::process::exit(ABANDONED_EXIT_CODE);
        })
        .context("cannot start the stop watchdog")?;
    Ok(stop)
}
