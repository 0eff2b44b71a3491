//! `eddy build`: runs a project's toolchain with the flags eddy needs, then checks the
//! component's imports and exports before anyone waits for its first compile.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::{Language, Toolchains};
use crate::contract::{CONTRACT_PACKAGE, CONTRACT_VERSION};
use crate::wasm::{check_imports, component_interfaces};

/// What a build made.
#[derive(Debug)]
pub struct BuildReport {
    /// The project's language.
    pub language: Language,
    /// The component written.
    pub output: PathBuf,
    /// How long the toolchain ran.
    pub seconds: f64,
    /// The component's size.
    pub bytes: u64,
}

/// Builds the project in `dir` into `output` (default `DIR/build/NAME.wasm`, NAME the
/// directory's name with `-` as `_`); `quickjs` picks the small, fast-building
/// JavaScript engine instead of StarlingMonkey.
pub fn build(
    dir: &Path,
    output: Option<&Path>,
    language: Option<Language>,
    quickjs: bool,
    tools: &Toolchains,
) -> Result<BuildReport> {
    let dir = dir.canonicalize().with_context(|| format!("cannot open the project directory {}", dir.display()))?;
    let language = match language {
        Some(language) => language,
        None => Language::detect(&dir)?,
    };
    let output = match output {
        Some(path) => std::path::absolute(path)?,
        None => dir.join("build").join(format!("{}.wasm", module_name(&dir))),
    };
    if let Some(parent) = output.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    if quickjs && !matches!(language, Language::Js | Language::Ts) {
        bail!("--quickjs picks the engine of a JavaScript or TypeScript processor; this project is {language}");
    }
    let started = Instant::now();
    match language {
        Language::Rust => build_rust(&dir, &output)?,
        Language::Python => build_python(&dir, &output, tools)?,
        Language::Js | Language::Ts => build_js(&dir, &output, language, quickjs, tools)?,
    }
    let seconds = started.elapsed().as_secs_f64();
    let bytes =
        std::fs::read(&output).with_context(|| format!("the build wrote no component at {}", output.display()))?;
    check_component(&output, &bytes)?;
    Ok(BuildReport { language, output, seconds, bytes: bytes.len() as u64 })
}

/// The module name of the project in `dir`.
fn module_name(dir: &Path) -> String {
    dir.file_name().map_or_else(|| "processor".to_string(), |name| name.to_string_lossy().replace('-', "_"))
}

/// Refuses a component eddy could not run: one importing what eddy does not provide,
/// or not exporting the processor handler of this eddy's contract version.
fn check_component(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    check_imports(&name, bytes)?;
    let interfaces =
        component_interfaces(bytes).with_context(|| format!("{} is not a WebAssembly component", path.display()))?;
    let handler = format!("{CONTRACT_PACKAGE}/handler@{CONTRACT_VERSION}");
    if !interfaces.exports.contains(&handler) {
        bail!(
            "{} does not export {handler} (it exports [{}]): the processor must be exported with the SDK's \
             export (Rust `export_processor!`, Python `export(...)`, JavaScript `exportProcessor(...)`)",
            path.display(),
            interfaces.exports.join(", ")
        );
    }
    Ok(())
}

/// Runs `command`, its output going to eddy's stderr, and fails naming `what` when it does.
fn run(mut command: Command, what: &str) -> Result<()> {
    let status = command
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .status()
        .with_context(|| format!("cannot start {what} ({:?})", command.get_program()))?;
    if !status.success() {
        bail!("{what} failed ({status}); its messages are above");
    }
    Ok(())
}

fn build_rust(dir: &Path, output: &Path) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let result = Command::new(&cargo)
        .current_dir(dir)
        .args(["build", "--release", "--target", "wasm32-wasip2", "--message-format=json-render-diagnostics"])
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| "cannot start cargo: install Rust with rustup (https://rustup.rs)".to_string())?;
    if !result.status.success() {
        bail!(
            "cargo build failed ({}); its messages are above (the target is added with `rustup target add wasm32-wasip2`)",
            result.status
        );
    }
    let artifact = String::from_utf8_lossy(&result.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter_map(|message| {
            message["filenames"]
                .as_array()?
                .iter()
                .filter_map(|f| f.as_str())
                .find(|f| f.ends_with(".wasm"))
                .map(PathBuf::from)
        })
        .next_back();
    let Some(artifact) = artifact else {
        bail!(
            "cargo built no .wasm in {}: the crate needs `[lib] crate-type = [\"cdylib\"]` (as `eddy new` writes it)",
            dir.display()
        );
    };
    std::fs::copy(&artifact, output)
        .with_context(|| format!("cannot copy {} to {}", artifact.display(), output.display()))?;
    Ok(())
}

fn build_python(dir: &Path, output: &Path, tools: &Toolchains) -> Result<()> {
    let componentize = tools.componentize_py()?;
    let sdk = tools.python_sdk();
    // `-p` directories come first on the guest's path: this eddy's SDK wins over an
    // installed copy; then the project.
    let mut command = Command::new(&componentize);
    command.current_dir(dir).arg("componentize");
    if sdk.is_dir() {
        command.arg("-p").arg(&sdk);
    }
    command.args(["-p", ".", "app", "-o"]).arg(output);
    if sdk.is_dir() {
        run(command, "componentize-py")
    } else {
        run(
            command,
            &format!(
                "componentize-py (eddy's Python SDK is not at {}: install it with pip, or set EDDY_HOME to eddy's sources)",
                sdk.display()
            ),
        )
    }
}

fn build_js(dir: &Path, output: &Path, language: Language, quickjs: bool, tools: &Toolchains) -> Result<()> {
    let entry = if language == Language::Ts { "app.ts" } else { "app.js" };
    if !dir.join(entry).is_file() {
        bail!("{} has no {entry}: a {language} processor's entry point is {entry}", dir.display());
    }
    let wrapper = tools.js_sdk().join("bin").join("eddy-guest-build.mjs");
    if !wrapper.is_file() {
        bail!("the JavaScript SDK's build wrapper {} is missing: set EDDY_HOME to eddy's sources", wrapper.display());
    }
    let mut command = Command::new(tools.node()?);
    command.current_dir(dir).arg(&wrapper).arg(entry).arg("-o").arg(output);
    if quickjs {
        command.args(["--engine", "quickjs"]);
    }
    command.env("EDDY_JS_TOOLCHAIN", tools.js_toolchain());
    run(
        command,
        if quickjs {
            "the JavaScript build (esbuild + jco's QuickJS)"
        } else {
            "the JavaScript build (esbuild + componentize-js)"
        },
    )
}
