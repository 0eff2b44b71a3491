//! A processor's table in `pipeline.toml` — `[operator]` or `[stage.processor]`: its
//! module, key, modes, parallelism, limits, config and initial state.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use arrow::datatypes::Schema;
use serde::Deserialize;
use toml::Spanned;

use super::limits::{InstanceLimits, Limit, RawSize};
use super::located::{Locator, one_of, output_mode, positive, positive_number};
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
    let module = base.join(op.module.get_ref());
    if !module.is_file() {
        return Err(at.at(
            &op.module,
            &format!("{prefix}.module"),
            format!("{} does not exist; build the processor first (for the examples: `make guests`)", module.display()),
        ));
    }
    check_key(at, op, prefix, &source.schema, reads_source)?;
    let output_mode = output_mode(
        at,
        op.output_mode.as_ref(),
        &format!("{prefix}.output-mode"),
        OutputMode::Append,
        &[OutputMode::Append, OutputMode::Update],
        |_| {
            "complete mode needs an operator that can produce the whole result; processors support \"append\" and \"update\"".into()
        },
    )?;
    let time_mode = time_mode(at, op, prefix, source)?;
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
    let spill_state_bytes = match &op.spill_state_bytes {
        Some(raw) => positive(at, raw, &format!("{prefix}.spill-state-bytes"), true)?,
        None => DEFAULT_SPILL_STATE_BYTES,
    };
    Ok(OperatorSpec {
        module,
        key: op.key.get_ref().clone(),
        output_mode,
        time_mode,
        key_groups,
        parallelism,
        limits: instance_limits(at, op, prefix)?,
        spill_state_bytes,
        config_json: serde_json::to_string(&op.config.clone().unwrap_or_default())?,
        initial_state: initial_state(at, base, op, prefix)?,
    })
}

/// The key: at least one column, each in the source's schema when the processor reads
/// the source (a stage after another reads that one's columns: checked when the
/// stages open).
fn check_key(at: &Locator, op: &RawOperator, prefix: &str, schema: &Schema, reads_source: bool) -> Result<()> {
    if op.key.get_ref().is_empty() {
        return Err(at.at(&op.key, &format!("{prefix}.key"), "expected at least one key column"));
    }
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
    Ok(())
}

/// The time mode, if the spec names one; event time needs the source's watermark.
fn time_mode(at: &Locator, op: &RawOperator, prefix: &str, source: &SourceSpec) -> Result<Option<TimeMode>> {
    let Some(raw) = &op.time_mode else { return Ok(None) };
    let key = format!("{prefix}.time-mode");
    let modes =
        [("none", TimeMode::None), ("processing-time", TimeMode::ProcessingTime), ("event-time", TimeMode::EventTime)];
    let mode = one_of(at, raw, &key, "time mode", &modes)?;
    if mode == TimeMode::EventTime && source.watermark.is_none() {
        return Err(at.at(raw, &key, "event time needs a watermark: add [source.watermark] with column and delay"));
    }
    Ok(Some(mode))
}

/// The instance's memory, time and per-call/per-batch limits.
fn instance_limits(at: &Locator, op: &RawOperator, prefix: &str) -> Result<InstanceLimits> {
    let mut limits = InstanceLimits::default();
    if let Some(mb) = &op.memory_limit_mb {
        if !(1..=4096).contains(mb.get_ref()) {
            return Err(at.at(mb, &format!("{prefix}.memory-limit-mb"), "expected a number from 1 to 4096"));
        }
        limits.memory_cap_bytes = (*mb.get_ref() as usize) << 20;
    }
    if let Some(ms) = &op.call_timeout_ms {
        let ms = positive_number(at, ms, &format!("{prefix}.call-timeout-ms"), "number of milliseconds")?;
        limits.call_timeout = Duration::from_millis(ms);
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
    Ok(limits)
}

/// The initial state's files and schema (which must hold the key columns), if given.
fn initial_state(at: &Locator, base: &Path, op: &RawOperator, prefix: &str) -> Result<Option<InitialStateSpec>> {
    let Some(initial) = &op.initial_state else { return Ok(None) };
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
    Ok(Some(InitialStateSpec { path, schema }))
}
