//! The `eddy` command line.

use anyhow::Result;
use clap::{Parser, Subcommand};

mod build;
mod compile;
mod kafka;
mod new;
mod progress;
mod run;
mod state;
mod status;
mod ui;

/// eddy: stateful stream processing with WebAssembly processors.
#[derive(Parser, Debug)]
#[command(name = "eddy", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Builds a processor project (Rust, Python, JavaScript, TypeScript) into a checked component.
    Build(build::BuildArgs),
    /// Compiles processor modules into the module cache ahead of their first run.
    Compile(compile::CompileArgs),
    /// Kafka tools: create a topic, load JSON lines into it, read it back.
    Kafka(kafka::KafkaArgs),
    /// Creates a processor project: `eddy new processor NAME --lang rust|python|js|ts`.
    New(new::NewArgs),
    /// Prints a query's progress records from its checkpoint (JSON lines; --follow for new ones).
    Progress(progress::ProgressArgs),
    /// Reads a query's state (variables, timers, metadata) from its checkpoint, read-only.
    State(state::StateArgs),
    /// Runs a pipeline over its input, then stops.
    Run(run::RunArgs),
    /// Serves the live dashboard of a query from its checkpoint's progress records.
    Ui(ui::UiArgs),
}

impl Cli {
    /// Runs the command.
    pub fn execute(self) -> Result<()> {
        match self.command {
            Command::Build(args) => build::run(&args),
            Command::Compile(args) => compile::run(&args),
            Command::Kafka(args) => kafka::run(&args),
            Command::New(args) => new::run(&args),
            Command::Progress(args) => progress::run(&args),
            Command::State(args) => state::run(&args),
            Command::Run(args) => run::run(&args),
            Command::Ui(args) => ui::run(&args),
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
