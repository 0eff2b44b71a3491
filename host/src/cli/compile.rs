//! `eddy compile MODULE…`: compiles processor modules into the module cache ahead of
//! their first run (a Python or JavaScript module takes minutes to compile; its first
//! `eddy run` then starts in about a second), checking each against eddy's contract.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::Args;

use crate::wasm::WasmRuntime;

/// The arguments of `eddy compile`.
#[derive(Args, Debug)]
pub struct CompileArgs {
    /// The processor components (`.wasm`).
    #[arg(required = true)]
    modules: Vec<PathBuf>,
}

/// Runs `eddy compile`.
pub fn run(args: &CompileArgs) -> Result<()> {
    let Some(cache) = WasmRuntime::default_cache_dir() else {
        bail!("no module cache directory: set EDDY_CACHE_DIR (or HOME) so compiled modules can be kept");
    };
    let runtime = WasmRuntime::new(Some(cache.clone()))?;
    for path in &args.modules {
        let started = Instant::now();
        let module = runtime.load(path)?;
        println!(
            "{}: ready in {:.1} s (sha256 {}…), cached in {}",
            module.name,
            started.elapsed().as_secs_f64(),
            &module.sha256[..12.min(module.sha256.len())],
            cache.display()
        );
    }
    Ok(())
}
