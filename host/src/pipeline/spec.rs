//! Reading and validating `pipeline.toml`. Every error names the file, the line,
//! the key and what is expected.

use std::path::Path;

use anyhow::{Result, anyhow};
use serde::Deserialize;
use toml::Spanned;

use super::duration::parse_duration;
use super::located::{Locator, one_of, positive_number};
use super::model::*;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawPipeline {
    name: Option<String>,
    checkpoint: Option<Spanned<String>>,
    watermark_policy: Option<Spanned<String>>,
    min_batches_to_retain: Option<Spanned<u64>>,
    snapshot_interval: Option<Spanned<u64>>,
    state_in_memory: Option<Spanned<super::limits::RawSize>>,
    source: Spanned<Vec<super::source_spec::RawSource>>,
    operator: Option<Spanned<super::processor_spec::RawOperator>>,
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

        let sources = source_specs(&at, base, &raw.source)?;
        let policies = [("min", WatermarkPolicy::Min), ("max", WatermarkPolicy::Max)];
        let watermark_policy = match &raw.watermark_policy {
            Some(policy) => one_of(&at, policy, "watermark-policy", "policy", &policies)?,
            None => WatermarkPolicy::Min,
        };
        let min_batches_to_retain = match &raw.min_batches_to_retain {
            Some(n) => positive_number(&at, n, "min-batches-to-retain", "number")?,
            None => 100,
        };
        let snapshot_interval = match &raw.snapshot_interval {
            Some(n) => positive_number(&at, n, "snapshot-interval", "number of batches")?,
            None => 10,
        };
        let state_in_memory = match &raw.state_in_memory {
            Some(size) => size.get_ref().bytes().map_err(|problem| at.at(size, "state-in-memory", problem))?,
            None => DEFAULT_STATE_IN_MEMORY_BYTES,
        };
        let stages = super::stage_spec::stage_specs(&at, base, raw.operator.as_ref(), raw.stage.as_ref(), &sources[0])?;
        let key_groups = stages
            .iter()
            .find_map(|stage| match &stage.kind {
                StageKind::Processor(processor) => Some(processor.key_groups),
                _ => None,
            })
            .unwrap_or(super::processor_spec::DEFAULT_KEY_GROUPS);
        let tables = super::stage_spec::table_specs(&at, base, raw.table.as_deref().unwrap_or_default())?;
        let sink = super::sink_spec::sink_spec(&at, base, raw.sink.as_ref())?;
        if let (Some(written), Some(span)) = (&sink.path, raw.sink.as_ref().and_then(|s| s.path.as_ref())) {
            super::overlap::refuse_within_sources(&at, span, "sink.path", written, &sources)?;
        }
        let dead_letter_paths: Vec<_> = raw.source.get_ref().iter().map(|s| s.dead_letter_path.as_ref()).collect();
        super::overlap::refuse_dead_letters_within_sources(&at, &dead_letter_paths, &sources)?;
        let metrics_address = metrics_address(&at, raw.monitoring.as_ref())?;
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
            state_in_memory,
            metrics_address,
        })
    }
}

/// The `[[source]]` entries: at least one, all of one schema (they feed one chain),
/// each with its own dead-letter directory.
fn source_specs(
    at: &Locator,
    base: &Path,
    raw: &Spanned<Vec<super::source_spec::RawSource>>,
) -> Result<Vec<SourceSpec>> {
    if raw.get_ref().is_empty() {
        return Err(at.at(raw, "source", "expected at least one [[source]]"));
    }
    let mut sources: Vec<SourceSpec> = Vec::new();
    for (index, source) in raw.get_ref().iter().enumerate() {
        let spec = super::source_spec::source_spec(at, base, index, source)?;
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
    Ok(sources)
}

/// The metrics endpoint's address, if `[monitoring] metrics` names one.
fn metrics_address(at: &Locator, raw: Option<&RawMonitoring>) -> Result<Option<String>> {
    match raw.and_then(|monitoring| monitoring.metrics.as_ref()) {
        Some(address) if address.get_ref().parse::<std::net::SocketAddr>().is_err() => {
            Err(at.at(address, "monitoring.metrics", "expected an address and port, like \"127.0.0.1:9464\""))
        }
        Some(address) => Ok(Some(address.get_ref().clone())),
        None => Ok(None),
    }
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
