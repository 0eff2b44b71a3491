//! Reading and validating `pipeline.toml`. Every error names the file, the line,
//! the key and what is expected.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, anyhow};
use arrow::datatypes::SchemaRef;
use serde::Deserialize;
use toml::Spanned;

use super::schema::parse_schema;
use crate::wasm::{InstanceLimits, OutputMode};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawPipeline {
    name: Option<String>,
    checkpoint: Option<Spanned<String>>,
    source: RawSource,
    operator: RawOperator,
    sink: Option<RawSink>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawSource {
    format: Spanned<String>,
    path: Spanned<String>,
    schema: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawOperator {
    module: Spanned<String>,
    key: Spanned<Vec<String>>,
    output_mode: Option<Spanned<String>>,
    key_groups: Option<Spanned<u16>>,
    memory_limit_mb: Option<Spanned<u64>>,
    call_timeout_ms: Option<Spanned<u64>>,
    config: Option<toml::Table>,
    initial_state: Option<RawInitialState>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawInitialState {
    path: Spanned<String>,
    schema: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawSink {
    format: Spanned<String>,
    path: Option<Spanned<String>>,
}

/// A validated pipeline: paths resolved against the spec file's directory.
#[derive(Clone, Debug)]
pub struct Pipeline {
    /// The spec file.
    pub file: PathBuf,
    /// The query's name (default: the spec directory's name).
    pub name: String,
    /// Where the query keeps its state; `None` means a temporary directory per run.
    pub checkpoint: Option<PathBuf>,
    /// The input.
    pub source: SourceSpec,
    /// The processor.
    pub operator: OperatorSpec,
    /// The output.
    pub sink: SinkSpec,
}

/// A JSON-lines file source.
#[derive(Clone, Debug)]
pub struct SourceSpec {
    /// A file, or a directory whose `*.json`/`*.jsonl` files are read in name order.
    pub path: PathBuf,
    /// The declared schema of every record.
    pub schema: SchemaRef,
}

/// A WebAssembly processor over keyed rows.
#[derive(Clone, Debug)]
pub struct OperatorSpec {
    /// The component file.
    pub module: PathBuf,
    /// The grouping columns.
    pub key: Vec<String>,
    /// The output mode the processor is told about.
    pub output_mode: OutputMode,
    /// How many key groups keys hash into.
    pub key_groups: u16,
    /// Memory cap and call deadline.
    pub limits: InstanceLimits,
    /// The `config` table as JSON text.
    pub config_json: String,
    /// State to start a new query from, handed to `handle-initial-state`.
    pub initial_state: Option<InitialStateSpec>,
}

/// JSON-lines rows that seed a new query's state, one group per key.
#[derive(Clone, Debug)]
pub struct InitialStateSpec {
    /// A JSON-lines file, or a directory of them.
    pub path: PathBuf,
    /// Their schema; it must hold the key columns.
    pub schema: SchemaRef,
}

/// Where results go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkFormat {
    /// A table per batch on stdout.
    Console,
    /// JSON-lines part files, one per batch.
    Json,
}

/// The sink.
#[derive(Clone, Debug)]
pub struct SinkSpec {
    /// Console or files.
    pub format: SinkFormat,
    /// The output directory (file sinks).
    pub path: Option<PathBuf>,
}

/// Locates a spec error: `file:line: key: problem`.
struct Locator<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Locator<'_> {
    fn error(&self, span: Option<std::ops::Range<usize>>, key: &str, problem: impl std::fmt::Display) -> anyhow::Error {
        match span {
            Some(span) => {
                let line = self.text[..span.start.min(self.text.len())].matches('\n').count() + 1;
                anyhow!("{}:{line}: {key}: {problem}", self.file.display())
            }
            None => anyhow!("{}: {key}: {problem}", self.file.display()),
        }
    }
}

impl Pipeline {
    /// Reads and validates the spec at `file`.
    pub fn load(file: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(file)
            .map_err(|error| anyhow!("cannot read pipeline spec {}: {error}", file.display()))?;
        Self::parse(file, &text)
    }

    /// Validates spec `text` as if read from `file`.
    pub fn parse(file: &Path, text: &str) -> Result<Self> {
        let raw: RawPipeline = toml::from_str(text).map_err(|error| {
            let line = error.span().map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
            let message = error.message().trim_end().to_string();
            match line {
                Some(line) => anyhow!("{}:{line}: {message}", file.display()),
                None => anyhow!("{}: {message}", file.display()),
            }
        })?;
        let at = Locator { file, text };
        let base = file.parent().unwrap_or(Path::new("."));
        let resolve = |relative: &str| base.join(relative);

        let source = &raw.source;
        if source.format.get_ref() != "json" {
            return Err(at.error(
                Some(source.format.span()),
                "source.format",
                format!("unknown format '{}'; expected \"json\" (JSON lines)", source.format.get_ref()),
            ));
        }
        let schema = parse_schema(source.schema.get_ref())
            .map_err(|problem| at.error(Some(source.schema.span()), "source.schema", problem))?;
        let source_path = resolve(source.path.get_ref());
        if !source_path.exists() {
            return Err(at.error(
                Some(source.path.span()),
                "source.path",
                format!("{} does not exist; expected a JSON-lines file or a directory of them", source_path.display()),
            ));
        }

        let op = &raw.operator;
        let module = resolve(op.module.get_ref());
        if !module.is_file() {
            return Err(at.error(
                Some(op.module.span()),
                "operator.module",
                format!(
                    "{} does not exist; build the processor first (for the examples: `make guests`)",
                    module.display()
                ),
            ));
        }
        if op.key.get_ref().is_empty() {
            return Err(at.error(Some(op.key.span()), "operator.key", "expected at least one key column"));
        }
        for column in op.key.get_ref() {
            if schema.index_of(column).is_err() {
                let columns: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                return Err(at.error(
                    Some(op.key.span()),
                    "operator.key",
                    format!("key column '{column}' is not in source.schema (columns: {})", columns.join(", ")),
                ));
            }
        }
        let output_mode = match op.output_mode.as_ref().map(|mode| (mode.get_ref().as_str(), mode.span())) {
            None | Some(("append", _)) => OutputMode::Append,
            Some(("update", _)) => OutputMode::Update,
            Some(("complete", span)) => {
                return Err(at.error(
                    Some(span),
                    "operator.output-mode",
                    "complete mode needs an operator that can produce the whole result; processors support \"append\" and \"update\"",
                ));
            }
            Some((other, span)) => {
                return Err(at.error(
                    Some(span),
                    "operator.output-mode",
                    format!("unknown output mode '{other}'; expected \"append\" or \"update\""),
                ));
            }
        };
        let key_groups = match &op.key_groups {
            Some(groups) if *groups.get_ref() == 0 => {
                return Err(at.error(Some(groups.span()), "operator.key-groups", "expected a number from 1 to 65535"));
            }
            Some(groups) => *groups.get_ref(),
            None => 128,
        };
        let mut limits = InstanceLimits::default();
        if let Some(mb) = &op.memory_limit_mb {
            if !(1..=4096).contains(mb.get_ref()) {
                return Err(at.error(Some(mb.span()), "operator.memory-limit-mb", "expected a number from 1 to 4096"));
            }
            limits.memory_cap_bytes = (*mb.get_ref() as usize) << 20;
        }
        if let Some(ms) = &op.call_timeout_ms {
            if *ms.get_ref() == 0 {
                return Err(at.error(Some(ms.span()), "operator.call-timeout-ms", "expected a positive number of milliseconds"));
            }
            limits.call_timeout = Duration::from_millis(*ms.get_ref());
        }
        let config_json = serde_json::to_string(&op.config.clone().unwrap_or_default())?;
        let initial_state = match &op.initial_state {
            None => None,
            Some(initial) => {
                let schema = parse_schema(initial.schema.get_ref())
                    .map_err(|problem| at.error(Some(initial.schema.span()), "operator.initial-state.schema", problem))?;
                if let Some(column) = op.key.get_ref().iter().find(|column| schema.index_of(column).is_err()) {
                    return Err(at.error(
                        Some(initial.schema.span()),
                        "operator.initial-state.schema",
                        format!("the initial state needs key column '{column}'"),
                    ));
                }
                let path = resolve(initial.path.get_ref());
                if !path.exists() {
                    return Err(at.error(
                        Some(initial.path.span()),
                        "operator.initial-state.path",
                        format!("{} does not exist; expected a JSON-lines file or a directory of them", path.display()),
                    ));
                }
                Some(InitialStateSpec { path, schema })
            }
        };

        let sink = match &raw.sink {
            None => SinkSpec { format: SinkFormat::Console, path: None },
            Some(sink) => {
                let format = match sink.format.get_ref().as_str() {
                    "console" => SinkFormat::Console,
                    "json" => SinkFormat::Json,
                    other => {
                        return Err(at.error(
                            Some(sink.format.span()),
                            "sink.format",
                            format!("unknown format '{other}'; expected \"console\" or \"json\""),
                        ));
                    }
                };
                let path = sink.path.as_ref().map(|p| resolve(p.get_ref()));
                if format == SinkFormat::Json && path.is_none() {
                    return Err(at.error(Some(sink.format.span()), "sink.path", "the json sink needs a path (an output directory)"));
                }
                SinkSpec { format, path }
            }
        };

        let name = raw.name.clone().unwrap_or_else(|| {
            base.canonicalize().ok().and_then(|dir| dir.file_name().map(|n| n.to_string_lossy().into_owned())).unwrap_or_else(|| "query".into())
        });
        Ok(Pipeline {
            file: file.to_path_buf(),
            name,
            checkpoint: raw.checkpoint.as_ref().map(|c| resolve(c.get_ref())),
            source: SourceSpec { path: source_path, schema },
            operator: OperatorSpec {
                module,
                key: op.key.get_ref().clone(),
                output_mode,
                key_groups,
                limits,
                config_json,
                initial_state,
            },
            sink,
        })
    }
}
