//! A processor's table in `pipeline.toml` — `[operator]` or `[stage.processor]`: its
//! module, key, modes, parallelism, limits, config and initial state.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::limits::{InstanceLimits, Limit, RawSize};
use super::located::{Locator, positive};
use super::model::*;
use super::schema::parse_schema;
use crate::contract::{OutputMode, TimeMode};

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
    spill_state_bytes: Option<Spanned<RawSize>>,
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
pub(super) struct RawInitialState {
    path: Spanned<String>,
    schema: Spanned<String>,
}

/// How many bytes of a batch's changes one shard holds in memory by default before
/// it writes them to the store ahead of the commit.
pub const DEFAULT_SPILL_STATE_BYTES: u64 = 128 << 20;

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
    let spill_state_bytes = match &op.spill_state_bytes {
        Some(raw) => positive(at, raw, &format!("{prefix}.spill-state-bytes"), true)?,
        None => DEFAULT_SPILL_STATE_BYTES,
    };
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
        spill_state_bytes,
        config_json,
        initial_state,
    })
}
