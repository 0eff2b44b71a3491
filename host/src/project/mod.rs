//! Processor projects: `eddy new` creates one from a template in Rust, Python,
//! JavaScript or TypeScript, and `eddy build` turns one into a checked component with
//! the language's toolchain, always with the flags eddy needs.

mod build;
mod templates;
mod toolchains;

use std::fmt;
use std::path::Path;

use anyhow::{Result, bail};

pub use build::{BuildReport, build};
pub use templates::create;
pub use toolchains::Toolchains;

/// The language a processor project is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    /// Rust with the `eddy-guest` crate, built by cargo for `wasm32-wasip2`.
    Rust,
    /// Python with the `eddy_guest` package, built by componentize-py.
    Python,
    /// JavaScript with the `eddy-guest` npm package, built by componentize-js.
    Js,
    /// TypeScript with the `eddy-guest` npm package (types stripped by esbuild).
    Ts,
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::Js => "js",
            Language::Ts => "ts",
        })
    }
}

impl Language {
    /// The language of the project in `dir`, from the files it holds.
    pub fn detect(dir: &Path) -> Result<Language> {
        let has = |file: &str| dir.join(file).is_file();
        Ok(if has("Cargo.toml") {
            Language::Rust
        } else if has("app.py") {
            Language::Python
        } else if has("app.ts") {
            Language::Ts
        } else if has("app.js") {
            Language::Js
        } else {
            bail!(
                "{} is not a processor project: it holds none of Cargo.toml (Rust), app.py (Python), \
                 app.ts (TypeScript) or app.js (JavaScript); create one with `eddy new processor NAME --lang …`",
                dir.display()
            )
        })
    }
}

/// The directory of eddy's sources, where the SDKs are: `$EDDY_HOME`, else the
/// checkout this eddy was built from.
pub fn eddy_home() -> std::path::PathBuf {
    std::env::var_os("EDDY_HOME").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(Path::new("/")).to_path_buf(),
        std::path::PathBuf::from,
    )
}
