//! Running a pipeline under its trigger.
//!
//! - as fast as possible: a batch whenever there is something to do, polling for new
//!   input otherwise; runs until stopped;
//! - processing time: a batch at most every interval (a batch that runs longer is
//!   reported, and the next starts at once);
//! - available now: what is there at the start, in as many batches as the source
//!   limits allow, plus the batches that due timers and the moved watermark need;
//!   then stop;
//! - once: what is there at the start in one batch (ignoring max-files-per-trigger,
//!   like Spark's), then stop.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;

use super::checkpoint::Metadata;
use super::metrics::BatchMetrics;
use super::query::{Query, operator_id};
use super::report::Reporter;
use crate::decode::decode_json_lines;
use crate::operator::{OperatorOptions, ShardedOperator};
use crate::pipeline::{Pipeline, TriggerSpec};
use crate::progress::{Bar, ProgressLog, QueryProgress, new_uuid_v4, now_micros};
use crate::source::list_input_files;
use crate::state::{OperatorStateSchema, StateStore, check_and_record};
use crate::wasm::WasmRuntime;

/// How to run a pipeline.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Overrides the spec's checkpoint directory.
    pub checkpoint: Option<PathBuf>,
    /// Where compiled modules are cached (`None`: no cache).
    pub module_cache: Option<PathBuf>,
    /// Stop after this many batches (any trigger).
    pub max_batches: Option<u64>,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Batches committed by this run.
    pub batches: u64,
    /// Input rows read.
    pub input_rows: u64,
    /// Rows written to the sink.
    pub output_rows: u64,
    /// Rows dropped as late.
    pub rows_dropped_by_watermark: u64,
}

/// How long an idle as-fast-as-possible query waits before looking for input again.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Opens every part of `pipeline` in `checkpoint`.
pub fn open_query(pipeline: &Pipeline, checkpoint: &Path, module_cache: Option<PathBuf>) -> Result<Query> {
    let store = StateStore::open(&crate::state::paths::store_dir(checkpoint))?;
    let runtime = WasmRuntime::new(module_cache)?;
    let module = runtime.load(&pipeline.operator.module)?;
    let spec = &pipeline.operator;
    let first = &pipeline.sources[0];
    let event_time_column =
        first.watermark.as_ref().map(|w| w.column.clone()).filter(|column| {
            pipeline.sources.iter().all(|s| s.watermark.as_ref().is_some_and(|w| &w.column == column))
        });
    let options = OperatorOptions {
        operator_id: operator_id(),
        key_columns: spec.key.clone(),
        key_groups: spec.key_groups,
        output_mode: spec.output_mode,
        config_json: spec.config_json.clone(),
        limits: spec.limits,
        initial_state_schema: spec.initial_state.as_ref().map(|initial| initial.schema.clone()),
        event_time_column,
        key_group_range: 0..spec.key_groups,
    };
    let operator = ShardedOperator::open(&module, &first.schema, options, spec.parallelism)?;
    let state_schema = OperatorStateSchema {
        key_columns: spec.key.clone(),
        key_groups: spec.key_groups,
        variables: operator.state_variables(),
        module_sha256: module.sha256.clone(),
    };
    check_and_record(&store, operator_id(), &state_schema, checkpoint)?;
    if let Some(required) = spec.time_mode
        && required != operator.time_mode()
    {
        anyhow::bail!(
            "{}: operator.time-mode is {required:?} but module '{}' declares {:?}; make them agree",
            pipeline.file.display(),
            module.name,
            operator.time_mode()
        );
    }
    let sources = pipeline
        .sources
        .iter()
        .enumerate()
        .map(|(index, source)| crate::source::open(source, index, checkpoint))
        .collect::<Result<Vec<_>>>()?;
    let sink = crate::sink::open(&pipeline.sink)?;
    let initial_state = match &spec.initial_state {
        Some(initial) => Some(read_json_lines(&initial.path, &initial.schema)?),
        None => None,
    };
    Query::new(pipeline.clone(), checkpoint, store, sources, operator, sink, initial_state)
}

/// A hash of what the pipeline's state depends on: the sources' schemas, the key
/// columns and the key-group count.
fn pipeline_fingerprint(pipeline: &Pipeline) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for source in &pipeline.sources {
        for field in source.schema.fields() {
            hasher.update(format!("{}:{}:{};", field.name(), field.data_type(), field.is_nullable()));
        }
        hasher.update("|");
    }
    hasher.update(format!("{:?}/{}", pipeline.operator.key, pipeline.operator.key_groups));
    hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Runs `pipeline` under its trigger; every committed batch's progress record is
/// appended under the checkpoint's `progress/`, and `on_batch` sees it.
pub fn run_pipeline(
    pipeline: &Pipeline,
    options: &RunOptions,
    mut on_batch: impl FnMut(&BatchMetrics, &QueryProgress) -> Result<()>,
) -> Result<RunSummary> {
    let temporary;
    let checkpoint = match options.checkpoint.as_ref().or(pipeline.checkpoint.as_ref()) {
        Some(dir) => dir.clone(),
        None => {
            temporary = tempfile::Builder::new().prefix("eddy-checkpoint-").tempdir()?;
            temporary.path().to_path_buf()
        }
    };
    std::fs::create_dir_all(&checkpoint)
        .with_context(|| format!("cannot create checkpoint {}", checkpoint.display()))?;
    let existing = Metadata::read(&checkpoint)?;
    // Opening checks the stored state's compatibility; only then is the pipeline recorded.
    let mut query = open_query(pipeline, &checkpoint, options.module_cache.clone())?;
    let metadata =
        Metadata::record(&checkpoint, existing, pipeline_fingerprint(pipeline), pipeline.operator.key_groups)?;
    let progress_log = ProgressLog::new(&checkpoint);
    let mut reporter = Reporter {
        query_id: metadata.id,
        run_id: new_uuid_v4()?,
        sink: query.sink.description(),
        previous_start: None,
    };
    let trigger = pipeline.trigger;
    if matches!(trigger, TriggerSpec::AvailableNow | TriggerSpec::Once) {
        let now = now_micros();
        for source in &mut query.sources {
            source.bound_to_available_now(&query.store, now)?;
            if trigger == TriggerSpec::Once {
                source.lift_batch_limits();
            }
        }
    }
    // A long available-now run shows a bar of the files it works through (on a terminal).
    let on_terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let files_left = if on_terminal && trigger == TriggerSpec::AvailableNow { query.files_left()? } else { None };
    let mut bar = match files_left {
        Some(total) if total > 0 => Some((Bar::new(total, "files"), total)),
        _ => None,
    };
    let mut summary = RunSummary::default();
    let mut next_start = now_micros();
    loop {
        if options.max_batches.is_some_and(|max| summary.batches >= max) {
            break;
        }
        if let TriggerSpec::ProcessingTime(interval) = trigger {
            let wait = next_start - now_micros();
            if wait > 0 {
                std::thread::sleep(Duration::from_micros(wait as u64));
            }
            next_start += interval.as_micros() as i64;
        }
        let ran = query.try_run_batch(now_micros())?;
        if let Some(metrics) = &ran {
            summary.batches += 1;
            summary.input_rows += metrics.input_rows;
            summary.output_rows += metrics.output_rows;
            summary.rows_dropped_by_watermark += metrics.rows_dropped_by_watermark;
            let record = reporter.record(pipeline, metrics);
            progress_log.append(&record)?;
            progress_log.retain_last(pipeline.min_batches_to_retain as usize)?;
            if let Some((bar, total)) = bar.as_mut()
                && let Some(left) = query.files_left()?
            {
                bar.set(total.saturating_sub(left));
            }
            on_batch(metrics, &record)?;
            if let TriggerSpec::ProcessingTime(interval) = trigger
                && Duration::from_millis(metrics.total_ms) > interval
            {
                crate::log::warn(&format!(
                    "batch {} took {} ms, longer than the trigger interval of {} ms; the next batch starts now",
                    metrics.batch_id,
                    metrics.total_ms,
                    interval.as_millis()
                ));
                next_start = now_micros();
            }
        }
        let done = match trigger {
            TriggerSpec::Once => true,
            TriggerSpec::AvailableNow => ran.is_none() && query.caught_up()?,
            TriggerSpec::AsFastAsPossible | TriggerSpec::ProcessingTime(_) => false,
        };
        let idle = ran.is_none() && matches!(trigger, TriggerSpec::AsFastAsPossible | TriggerSpec::AvailableNow);
        if idle && !done {
            std::thread::sleep(POLL_INTERVAL);
        }
        if done {
            break;
        }
    }
    if let Some((mut bar, _)) = bar {
        bar.finish();
    }
    query.operator.close()?;
    Ok(summary)
}

/// Every record of a JSON-lines file or directory, in one batch.
fn read_json_lines(path: &Path, schema: &arrow::datatypes::SchemaRef) -> Result<RecordBatch> {
    let mut batches = Vec::new();
    for file in list_input_files(path)? {
        let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
        batches.push(decode_json_lines(&bytes, schema, &file)?);
    }
    Ok(arrow::compute::concat_batches(schema, &batches)?)
}
