//! `eddy new processor NAME --lang …`: a ready project — a running-count processor with
//! a unit test, a pipeline over sample input, and a README with the commands.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::{Language, Toolchains};

/// One file of a template: its path in the project and its text with `{{…}}` holes.
type TemplateFile = (&'static str, &'static str);

/// Files every project has, whatever its language.
const COMMON: &[TemplateFile] = &[
    ("pipeline.toml", include_str!("../../templates/common/pipeline.toml")),
    ("input/events-000.jsonl", include_str!("../../templates/common/input/events-000.jsonl")),
    ("input/events-001.jsonl", include_str!("../../templates/common/input/events-001.jsonl")),
    (".gitignore", include_str!("../../templates/common/gitignore")),
];

const RUST: &[TemplateFile] = &[
    ("Cargo.toml", include_str!("../../templates/rust/Cargo.toml")),
    (".cargo/config.toml", include_str!("../../templates/rust/cargo-config.toml")),
    ("src/lib.rs", include_str!("../../templates/rust/lib.rs")),
    ("README.md", include_str!("../../templates/rust/README.md")),
];

const PYTHON: &[TemplateFile] = &[
    ("app.py", include_str!("../../templates/python/app.py")),
    ("test_app.py", include_str!("../../templates/python/test_app.py")),
    ("conftest.py", include_str!("../../templates/python/conftest.py")),
    ("README.md", include_str!("../../templates/python/README.md")),
];

const JS: &[TemplateFile] = &[
    ("app.js", include_str!("../../templates/js/app.js")),
    ("app.test.js", include_str!("../../templates/js/app.test.js")),
    ("package.json", include_str!("../../templates/js/package.json")),
    ("README.md", include_str!("../../templates/js/README.md")),
];

const TS: &[TemplateFile] = &[
    ("app.ts", include_str!("../../templates/ts/app.ts")),
    ("app.test.ts", include_str!("../../templates/ts/app.test.ts")),
    ("package.json", include_str!("../../templates/ts/package.json")),
    ("tsconfig.json", include_str!("../../templates/ts/tsconfig.json")),
    ("README.md", include_str!("../../templates/ts/README.md")),
];

/// Creates the project `name` in `language` under `parent` and returns its directory.
pub fn create(parent: &Path, name: &str, language: Language, tools: &Toolchains) -> Result<PathBuf> {
    check_name(name)?;
    let dir = parent.join(name);
    if dir.exists() && std::fs::read_dir(&dir).map(|mut entries| entries.next().is_some()).unwrap_or(true) {
        bail!("{} already exists and is not empty: choose another NAME or remove it", dir.display());
    }
    let module = name.replace('-', "_");
    let holes = [
        ("{{name}}", name.to_string()),
        ("{{module}}", module),
        ("{{language}}", language.to_string()),
        ("{{rust_sdk}}", tools.rust_sdk().display().to_string()),
        ("{{python_sdk}}", tools.python_sdk().display().to_string()),
        ("{{js_sdk}}", tools.js_sdk().display().to_string()),
    ];
    let files = match language {
        Language::Rust => RUST,
        Language::Python => PYTHON,
        Language::Js => JS,
        Language::Ts => TS,
    };
    for (path, text) in COMMON.iter().chain(files) {
        let text = holes.iter().fold(text.to_string(), |text, (hole, value)| text.replace(hole, value));
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(dir)
}

/// A project name: lower-case letters, digits, `-` and `_`, starting with a letter.
fn check_name(name: &str) -> Result<()> {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !valid {
        bail!("'{name}' is not a project name: use lower-case letters, digits, '-' and '_', starting with a letter");
    }
    Ok(())
}
