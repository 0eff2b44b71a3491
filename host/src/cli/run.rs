//! `eddy run`: runs a pipeline, printing each batch's progress record on request and,
//! on a terminal, a bar of the files an available-now run works through.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

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
    let options = RunOptions { checkpoint: args.checkpoint.clone(), module_cache, max_batches: args.max_batches };
    let bar_wanted = pipeline.trigger == TriggerSpec::AvailableNow && std::io::stderr().is_terminal();
    let mut terminal = Terminal { print_progress: args.progress, bar_wanted, bar: None };
    let summary = run_observed(&pipeline, &options, &mut terminal)?;
    crate::log::info(&format!(
        "query '{}' done: {} batches, {} input rows, {} output rows",
        pipeline.name, summary.batches, summary.input_rows, summary.output_rows
    ));
    Ok(())
}
