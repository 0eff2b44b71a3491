//! `eddy ui CHECKPOINT`: serves the dashboard of a query — running or stopped — from
//! the progress records in its checkpoint, until interrupted.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::checkpoint::CheckpointDir;

/// Serves a checkpoint's dashboard.
#[derive(Args, Debug)]
pub struct UiArgs {
    /// The query's checkpoint directory.
    pub checkpoint: PathBuf,
    /// Where the dashboard listens.
    #[arg(long, value_name = "ADDRESS", default_value = "127.0.0.1:9464")]
    pub address: String,
}

/// Serves the dashboard of `args.checkpoint` until the process is stopped.
pub fn run(args: &UiArgs) -> Result<()> {
    // Refuses a directory the query never wrote progress to, saying so.
    CheckpointDir::new(&args.checkpoint).progress().open_existing()?;
    crate::monitor::serve_checkpoint(&args.address, CheckpointDir::new(&args.checkpoint), |address| {
        crate::log::info(&format!("dashboard of {} on http://{address}/", args.checkpoint.display()));
    })
}
