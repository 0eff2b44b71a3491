//! `eddy build [DIR]`: builds a processor project (Rust, Python, JavaScript or
//! TypeScript) into a component and checks it against eddy's contract.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::project::{Language, Toolchains, build};

/// The arguments of `eddy build`.
#[derive(Args, Debug)]
pub struct BuildArgs {
    /// The project's directory.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Where to write the component (default: DIR/build/NAME.wasm).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// The project's language, when its files do not tell.
    #[arg(long, value_enum)]
    lang: Option<Language>,
    /// JavaScript/TypeScript: build on QuickJS (small, builds in seconds; int64 values
    /// beyond 2^53 are refused) instead of StarlingMonkey.
    #[arg(long)]
    quickjs: bool,
}

/// Runs `eddy build`.
pub fn run(args: &BuildArgs) -> Result<()> {
    let report = build(&args.dir, args.output.as_deref(), args.lang, args.quickjs, &Toolchains::from_env())?;
    println!(
        "built {} ({} processor, {:.1} MB) in {:.1} s; its imports and exports match eddy's contract",
        report.output.display(),
        report.language,
        report.bytes as f64 / 1e6,
        report.seconds
    );
    Ok(())
}
