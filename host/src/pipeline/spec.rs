//! Reading and validating `pipeline.toml`. Every error names the file, the line,
//! the key and what is expected.

use std::path::Path;
use std::time::Duration;

use anyhow::{Result, anyhow};
use serde::Deserialize;
use toml::Spanned;

use super::duration::parse_duration;
use super::limits::{InstanceLimits, Limit, RawSize};
use super::located::{Locator, positive};
use super::model::*;
use super::schema::parse_schema;
use crate::contract::{OutputMode, TimeMode};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawPipeline {
    name: Option<String>,
    checkpoint: Option<Spanned<String>>,
    watermark_policy: Option<Spanned<String>>,
    min_batches_to_retain: Option<Spanned<u64>>,
    snapshot_interval: Option<Spanned<u64>>,
    source: Spanned<Vec<super::source_spec::RawSource>>,
    operator: Option<Spanned<RawOperator>>,
    stage: Option<Spanned<Vec<super::stage_spec::RawStage>>>,
    table: Option<Vec<super::stage_spec::RawTable>>,
    sink: Option<super::sink_spec::RawSink>,
    trigger: Option<Spanned<RawTrigger>>,
    monitoring: Option<RawMonitoring>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawMonitoring {
    metrics: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawOperator {
    module: Spanned<String>,
    key: Spanned<Vec<String>>,
    output_mode: Option<Spanned<String>>,
    time_mode: Option<Spanned<String>>,
    key_groups: Option<Spanned<u16>>,
    parallelism: Option<Spanned<u64>>,
    memory_limit_mb: Option<Spanned<u64>>,
    call_timeout_ms: Option<Spanned<u64>>,
    max_state_bytes_per_batch: Option<Spanned<RawSize>>,
    max_timers_per_batch: Option<Spanned<RawSize>>,
    max_state_value_bytes: Option<Spanned<RawSize>>,
    max_output_rows_per_call: Option<Spanned<RawSize>>,
    max_output_bytes_per_call: Option<Spanned<RawSize>>,
    max_output_rows_per_batch: Option<Spanned<RawSize>>,
    max_output_bytes_per_batch: Option<Spanned<RawSize>>,
    max_log_bytes_per_call: Option<Spanned<RawSize>>,
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
struct RawTrigger {
    processing_time: Option<Spanned<String>>,
    available_now: Option<bool>,
    once: Option<bool>,
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
            match super::spec_errors::locate(text, error.span(), error.message()) {
                (Some(line), Some(key), problem) => anyhow!("{}:{line}: {key}: {problem}", file.display()),
                (Some(line), None, problem) => anyhow!("{}:{line}: {problem}", file.display()),
                (None, _, problem) => anyhow!("{}: {problem}", file.display()),
            }
        })?;
        let at = Locator::new(file, text);
        let base = file.parent().unwrap_or(Path::new("."));

        if raw.source.get_ref().is_empty() {
            return Err(at.at(&raw.source, "source", "expected at least one [[source]]"));
        }
        let mut sources: Vec<SourceSpec> = Vec::new();
        for (index, source) in raw.source.get_ref().iter().enumerate() {
            let spec = super::source_spec::source_spec(&at, base, index, source)?;
            if let Some(first) = sources.first()
                && first.schema.fields() != spec.schema.fields()
            {
                return Err(at.at(
                    &source.format,
                    "source",
                    format!(
                        "source '{}' has another schema than source '{}'; every source feeds the same operator, so their schemas must match",
                        spec.name, first.name
                    ),
                ));
            }
            if let BadRecordPolicy::DeadLetter(dir) = &spec.on_bad_record
                && let Some(other) = sources.iter().find(|s| s.on_bad_record == spec.on_bad_record)
                && let Some(path) = &source.dead_letter_path
            {
                return Err(at.at(
                    path,
                    &format!("source[{index}].dead-letter-path"),
                    format!(
                        "source '{}' already writes its dead letters to {}; give each source its own directory",
                        other.name,
                        dir.display()
                    ),
                ));
            }
            sources.push(spec);
        }
        let watermark_policy = match raw.watermark_policy.as_ref().map(|p| (p.get_ref().as_str(), p)) {
            None | Some(("min", _)) => WatermarkPolicy::Min,
            Some(("max", _)) => WatermarkPolicy::Max,
            Some((other, span)) => {
                return Err(at.at(
                    span,
                    "watermark-policy",
                    format!("unknown policy '{other}'; expected \"min\" or \"max\""),
                ));
            }
        };
        let min_batches_to_retain = match &raw.min_batches_to_retain {
            Some(n) if *n.get_ref() == 0 => {
                return Err(at.at(n, "min-batches-to-retain", "expected a positive number"));
            }
            Some(n) => *n.get_ref(),
            None => 100,
        };
        let snapshot_interval = match &raw.snapshot_interval {
            Some(n) if *n.get_ref() == 0 => {
                return Err(at.at(n, "snapshot-interval", "expected a positive number of batches"));
            }
            Some(n) => *n.get_ref(),
            None => 10,
        };
        let stages = super::stage_spec::stage_specs(&at, base, raw.operator.as_ref(), raw.stage.as_ref(), &sources[0])?;
        let key_groups = stages
            .iter()
            .find_map(|stage| match &stage.kind {
                StageKind::Processor(processor) => Some(processor.key_groups),
                _ => None,
            })
            .unwrap_or(DEFAULT_KEY_GROUPS);
        let tables = super::stage_spec::table_specs(&at, base, raw.table.as_deref().unwrap_or_default())?;
        let sink = super::sink_spec::sink_spec(&at, base, raw.sink.as_ref())?;
        let metrics_address = match raw.monitoring.as_ref().and_then(|m| m.metrics.as_ref()) {
            Some(address) if address.get_ref().parse::<std::net::SocketAddr>().is_err() => {
                return Err(at.at(
                    address,
                    "monitoring.metrics",
                    "expected an address and port, like \"127.0.0.1:9464\"",
                ));
            }
            Some(address) => Some(address.get_ref().clone()),
            None => None,
        };
        let trigger = trigger_spec(&at, raw.trigger.as_ref())?;
        let name = raw.name.clone().unwrap_or_else(|| {
            let dir = base.canonicalize().ok();
            dir.and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned())).unwrap_or_else(|| "query".into())
        });
        Ok(Pipeline {
            file: file.to_path_buf(),
            name,
            checkpoint: raw.checkpoint.as_ref().map(|c| base.join(c.get_ref())),
            sources,
            watermark_policy,
            stages,
            tables,
            key_groups,
            sink,
            trigger,
            min_batches_to_retain,
            snapshot_interval,
            metrics_address,
        })
    }
}

/// The default number of key groups.
pub const DEFAULT_KEY_GROUPS: u16 = 128;

/// The processor `op` describes, its keys named `{prefix}.…` in errors.
pub(super) fn operator_spec(
    at: &Locator,
    base: &Path,
    op: &RawOperator,
    prefix: &str,
    source: &SourceSpec,
    reads_source: bool,
) -> Result<OperatorSpec> {
    let schema = &source.schema;
    let module = base.join(op.module.get_ref());
    if !module.is_file() {
        return Err(at.at(
            &op.module,
            &format!("{prefix}.module"),
            format!("{} does not exist; build the processor first (for the examples: `make guests`)", module.display()),
        ));
    }
    if op.key.get_ref().is_empty() {
        return Err(at.at(&op.key, &format!("{prefix}.key"), "expected at least one key column"));
    }
    // A stage after another reads that one's columns: checked when the stages open.
    for column in op.key.get_ref().iter().filter(|_| reads_source) {
        if schema.index_of(column).is_err() {
            let columns: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            return Err(at.at(
                &op.key,
                &format!("{prefix}.key"),
                format!("key column '{column}' is not in source.schema (columns: {})", columns.join(", ")),
            ));
        }
    }
    let output_mode = match op.output_mode.as_ref().map(|mode| (mode.get_ref().as_str(), mode)) {
        None | Some(("append", _)) => OutputMode::Append,
        Some(("update", _)) => OutputMode::Update,
        Some(("complete", span)) => {
            return Err(at.at(span, &format!("{prefix}.output-mode"), "complete mode needs an operator that can produce the whole result; processors support \"append\" and \"update\""));
        }
        Some((other, span)) => {
            return Err(at.at(
                span,
                &format!("{prefix}.output-mode"),
                format!("unknown output mode '{other}'; expected \"append\" or \"update\""),
            ));
        }
    };
    let time_mode = match op.time_mode.as_ref().map(|mode| (mode.get_ref().as_str(), mode)) {
        None => None,
        Some(("none", _)) => Some(TimeMode::None),
        Some(("processing-time", _)) => Some(TimeMode::ProcessingTime),
        Some(("event-time", span)) => {
            if source.watermark.is_none() {
                return Err(at.at(
                    span,
                    &format!("{prefix}.time-mode"),
                    "event time needs a watermark: add [source.watermark] with column and delay",
                ));
            }
            Some(TimeMode::EventTime)
        }
        Some((other, span)) => {
            return Err(at.at(
                span,
                &format!("{prefix}.time-mode"),
                format!("unknown time mode '{other}'; expected \"none\", \"processing-time\" or \"event-time\""),
            ));
        }
    };
    let key_groups = match &op.key_groups {
        Some(groups) if *groups.get_ref() == 0 => {
            return Err(at.at(groups, &format!("{prefix}.key-groups"), "expected a number from 1 to 65535"));
        }
        Some(groups) => *groups.get_ref(),
        None => DEFAULT_KEY_GROUPS,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let parallelism = match &op.parallelism {
        Some(n) if *n.get_ref() == 0 || *n.get_ref() > u64::from(key_groups) => {
            return Err(at.at(
                n,
                &format!("{prefix}.parallelism"),
                format!("expected a number from 1 to key-groups ({key_groups})"),
            ));
        }
        Some(n) => *n.get_ref() as usize,
        None => cores.min(usize::from(key_groups)),
    };
    let mut limits = InstanceLimits::default();
    if let Some(mb) = &op.memory_limit_mb {
        if !(1..=4096).contains(mb.get_ref()) {
            return Err(at.at(mb, &format!("{prefix}.memory-limit-mb"), "expected a number from 1 to 4096"));
        }
        limits.memory_cap_bytes = (*mb.get_ref() as usize) << 20;
    }
    if let Some(ms) = &op.call_timeout_ms {
        if *ms.get_ref() == 0 {
            return Err(at.at(ms, &format!("{prefix}.call-timeout-ms"), "expected a positive number of milliseconds"));
        }
        limits.call_timeout = Duration::from_millis(*ms.get_ref());
    }
    let raw_limits = [
        &op.max_state_bytes_per_batch,
        &op.max_timers_per_batch,
        &op.max_state_value_bytes,
        &op.max_output_rows_per_call,
        &op.max_output_bytes_per_call,
        &op.max_output_rows_per_batch,
        &op.max_output_bytes_per_batch,
        &op.max_log_bytes_per_call,
    ];
    for (limit, raw) in Limit::ALL.into_iter().zip(raw_limits) {
        if let Some(raw) = raw {
            limit.set(&mut limits, positive(at, raw, &format!("{prefix}.{}", limit.key()), limit.in_bytes())?);
        }
    }
    let config_json = serde_json::to_string(&op.config.clone().unwrap_or_default())?;
    let initial_state = match &op.initial_state {
        None => None,
        Some(initial) => {
            let schema = parse_schema(initial.schema.get_ref())
                .map_err(|problem| at.at(&initial.schema, &format!("{prefix}.initial-state.schema"), problem))?;
            if let Some(column) = op.key.get_ref().iter().find(|column| schema.index_of(column).is_err()) {
                return Err(at.at(
                    &initial.schema,
                    &format!("{prefix}.initial-state.schema"),
                    format!("the initial state needs key column '{column}'"),
                ));
            }
            let path = base.join(initial.path.get_ref());
            if !path.exists() {
                return Err(at.at(
                    &initial.path,
                    &format!("{prefix}.initial-state.path"),
                    format!("{} does not exist; expected a JSON-lines file or a directory of them", path.display()),
                ));
            }
            Some(InitialStateSpec { path, schema })
        }
    };
    Ok(OperatorSpec {
        module,
        key: op.key.get_ref().clone(),
        output_mode,
        time_mode,
        key_groups,
        parallelism,
        limits,
        config_json,
        initial_state,
    })
}

fn trigger_spec(at: &Locator, raw: Option<&Spanned<RawTrigger>>) -> Result<TriggerSpec> {
    let Some(spanned) = raw else { return Ok(TriggerSpec::AsFastAsPossible) };
    let trigger = spanned.get_ref();
    let chosen = [trigger.processing_time.is_some(), trigger.available_now == Some(true), trigger.once == Some(true)];
    if chosen.iter().filter(|set| **set).count() > 1 {
        return Err(at.at(spanned, "trigger", "choose one of processing-time, available-now and once"));
    }
    Ok(match (&trigger.processing_time, trigger.available_now, trigger.once) {
        (Some(interval), _, _) => {
            let every = parse_duration(interval.get_ref())
                .map_err(|problem| at.at(interval, "trigger.processing-time", problem))?;
            if every.is_zero() { TriggerSpec::AsFastAsPossible } else { TriggerSpec::ProcessingTime(every) }
        }
        (None, Some(true), _) => TriggerSpec::AvailableNow,
        (None, _, Some(true)) => TriggerSpec::Once,
        _ => TriggerSpec::AsFastAsPossible,
    })
}
