//! The `eddy` command line.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

mod progress;
mod state;

use crate::engine::{RunOptions, run_pipeline};
use crate::pipeline::Pipeline;
use crate::wasm::WasmRuntime;

/// eddy: stateful stream processing with WebAssembly processors.
#[derive(Parser, Debug)]
#[command(name = "eddy", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Prints a query's progress records from its checkpoint (JSON lines; --follow for new ones).
    Progress(progress::ProgressArgs),
    /// Reads a query's state (variables, timers, metadata) from its checkpoint, read-only.
    State(state::StateArgs),
    /// Runs a pipeline over its input, then stops.
    Run {
        /// The pipeline spec (TOML).
        pipeline: PathBuf,
        /// Keeps state in this directory instead of the spec's `checkpoint`.
        #[arg(long)]
        checkpoint: Option<PathBuf>,
        /// Compiles the module every time instead of using the on-disk cache.
        #[arg(long)]
        no_module_cache: bool,
        /// Stops after this many batches, whatever the trigger.
        #[arg(long)]
        max_batches: Option<u64>,
        /// Prints each batch's progress record (JSON) on stderr.
        #[arg(long)]
        progress: bool,
    },
}

impl Cli {
    /// Runs the command.
    pub fn execute(self) -> Result<()> {
        match self.command {
            Command::Progress(args) => progress::run(&args),
            Command::State(args) => state::run(&args),
            Command::Run { pipeline, checkpoint, no_module_cache, max_batches, progress } => {
                let pipeline = Pipeline::load(&pipeline)?;
                let module_cache = if no_module_cache { None } else { WasmRuntime::default_cache_dir() };
                let options = RunOptions { checkpoint, module_cache, max_batches };
                let summary = run_pipeline(&pipeline, &options, |_metrics, record| {
                    if progress {
                        eprintln!("{}", serde_json::to_string(record)?);
                    }
                    Ok(())
                })?;
                crate::log::info(&format!(
                    "query '{}' done: {} batches, {} input rows, {} output rows",
                    pipeline.name, summary.batches, summary.input_rows, summary.output_rows
                ));
                Ok(())
            }
        }
    }
}

/// Runs `print` on stdout; a closed stdout (e.g. `| head`) ends it quietly.
fn print_to_stdout(print: impl FnOnce(&mut std::io::StdoutLock<'static>) -> Result<()>) -> Result<()> {
    match print(&mut std::io::stdout().lock()) {
        Err(error) if is_broken_pipe(&error) => Ok(()),
        other => other,
    }
}

/// Whether `error` comes from writing to a closed pipe.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .chain()
        .any(|cause| cause.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
}
