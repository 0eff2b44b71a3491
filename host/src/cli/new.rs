//! `eddy new processor NAME --lang rust|python|js|ts`: creates a ready processor project.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::project::{Language, Toolchains, create};

/// The arguments of `eddy new`.
#[derive(Args, Debug)]
pub struct NewArgs {
    #[command(subcommand)]
    what: NewWhat,
}

#[derive(Subcommand, Debug)]
enum NewWhat {
    /// A processor project: a running count per user with a unit test, a pipeline over
    /// sample input, and a README with the commands.
    Processor {
        /// The project's name (lower-case letters, digits, '-', '_'); also its directory.
        name: String,
        /// The language to write it in.
        #[arg(long, value_enum, default_value_t = Language::Rust)]
        lang: Language,
        /// Where to create the project's directory.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
}

/// Runs `eddy new`.
pub fn run(args: &NewArgs) -> Result<()> {
    let NewWhat::Processor { name, lang, dir } = &args.what;
    let project = create(dir, name, *lang, &Toolchains::from_env())?;
    let tools = Toolchains::from_env();
    let python = tools.python_venv().join("bin").join("python");
    let test = match lang {
        Language::Rust => "cargo test".to_string(),
        Language::Python if python.is_file() => format!("{} -m pytest", python.display()),
        Language::Python => "python -m pytest".to_string(),
        Language::Js | Language::Ts => "npm test".to_string(),
    };
    println!("created the {lang} processor project {}", project.display());
    println!("next:\n  cd {}\n  {test}\n  eddy build\n  eddy run pipeline.toml", project.display());
    Ok(())
}
