//! `eddy run`: runs a pipeline, printing each batch's progress record on request and,
//! on a terminal, a bar of the files an available-now run works through.
//!
//! Stopping: the first SIGINT (Ctrl-C) or SIGTERM lets the batch in flight finish and
//! commit, then the run ends with a one-line summary and exit code 0; a batch still
//! running after the grace period (`--stop-grace`) is abandoned — nothing of it is
//! committed and the next start runs it again. A second signal stops at once (exit
//! code 130 for SIGINT, 143 for SIGTERM).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use signal_hook::consts::{SIGINT, SIGTERM};

use super::bar::Bar;
use crate::checkpoint::QueryProgress;
use crate::engine::{BatchMetrics, RunObserver, RunOptions, run_observed};
use crate::pipeline::{Pipeline, TriggerSpec};
use crate::wasm::WasmRuntime;

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
}

/// What the terminal shows while the run goes on.
struct Terminal {
    print_progress: bool,
    /// Whether a files bar is wanted (available-now on a terminal).
    bar_wanted: bool,
    bar: Option<(Bar, u64)>,
}

impl RunObserver for Terminal {
    fn counts_files(&self) -> bool {
        self.bar_wanted
    }

    fn started(&mut self, files_left: Option<u64>) -> Result<()> {
        if let Some(total) = files_left.filter(|total| *total > 0) {
            self.bar = Some((Bar::new(total, "files"), total));
        }
        Ok(())
    }

    fn batch(&mut self, metrics: &BatchMetrics, record: &QueryProgress) -> Result<()> {
        if self.print_progress {
            eprintln!("{}", serde_json::to_string(record)?);
        }
        if let (Some((bar, total)), Some(left)) = (self.bar.as_mut(), metrics.files_left) {
            bar.set(total.saturating_sub(left));
        }
        Ok(())
    }

    fn finished(&mut self) {
        if let Some((bar, _)) = self.bar.as_mut() {
            bar.finish();
        }
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
    let bar_wanted = pipeline.trigger == TriggerSpec::AvailableNow && std::io::stderr().is_terminal();
    let mut terminal = Terminal { print_progress: args.progress, bar_wanted, bar: None };
    let summary = run_observed(&pipeline, &options, &mut terminal)?;
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
            crate::log::info("stopping: the batch in flight finishes first (a second signal stops at once)");
            std::thread::sleep(grace);
            crate::log::info(&format!(
                "stopped: the batch in flight ran past the {} s grace period and was abandoned; nothing of it was \
                 committed and the next start runs it again",
                grace.as_secs()
            ));
            std::process::exit(0);
        })
        .context("cannot start the stop watchdog")?;
    Ok(stop)
}
