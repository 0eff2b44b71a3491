//! Opening a query: its state store, its stages, its sources and sink, checked
//! against what the checkpoint already holds before anything is recorded.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use crate::checkpoint::{CheckpointDir, Metadata, check_source_order};
use crate::decode::decode_json_lines;
use crate::operator::{AggregateStage, DedupStage, OperatorOptions, ShardedOperator, SqlStage, Stage, WindowStage};
use crate::pipeline::{BadRecordPolicy, OperatorSpec, Pipeline, StageKind, StageSpec};
use crate::sink::{Sink, SinkOwner};
use crate::source::{Source, list_input_files};
use crate::state::{OperatorStateSchema, SchemaCheck, StateStore};
use crate::wasm::WasmRuntime;

/// The opened parts of a query.
pub(super) struct Parts {
    pub store: StateStore,
    pub stages: Vec<Box<dyn Stage>>,
    pub sources: Vec<Box<dyn Source>>,
    pub sink: Box<dyn Sink>,
    /// The query's id from the checkpoint's metadata (new for a new query).
    pub query_id: String,
    /// This run's id.
    pub run_id: String,
    /// State schemas that are new or changed compatibly: recorded with the next commit.
    pub schemas_to_record: Vec<(u16, OperatorStateSchema)>,
}

/// Opens every part of `pipeline` in `checkpoint`. The stored state's compatibility
/// is checked first; only then is the pipeline recorded in the metadata.
pub(super) fn open_parts(
    pipeline: &Pipeline,
    checkpoint: &CheckpointDir,
    module_cache: Option<PathBuf>,
) -> Result<Parts> {
    let existing = Metadata::read(&checkpoint.metadata_file())?;
    let source_identities: Vec<String> = pipeline.sources.iter().map(|source| source.identity()).collect();
    if let Some(metadata) = &existing {
        check_source_order(&metadata.sources, &source_identities, checkpoint.root())?;
    }
    let store = StateStore::open(&checkpoint.store_dir())?;
    let run = RunIds {
        query_id: match &existing {
            Some(metadata) => metadata.id.clone(),
            None => crate::util::new_uuid_v4()?,
        },
        run_id: crate::util::new_uuid_v4()?,
    };
    let mut schemas_to_record = Vec::new();
    let stages = open_stages(pipeline, &store, checkpoint, module_cache, &run, &mut schemas_to_record)?;
    // The copy answers the stages' reads and lets commits leave state writes for later.
    if pipeline.state_in_memory > 0 && stages.iter().any(|stage| !stage.is_stateless()) {
        store.hold_state_in_memory(usize::try_from(pipeline.state_in_memory).unwrap_or(usize::MAX))?;
    }
    let sources = pipeline
        .sources
        .iter()
        .enumerate()
        .map(|(index, source)| crate::source::open(source, index, checkpoint))
        .collect::<Result<Vec<_>>>()?;
    let new_query = store.committed_batch()?.is_none();
    let fingerprint = pipeline_fingerprint(pipeline);
    let metadata = Metadata::record(
        &checkpoint.metadata_file(),
        existing,
        &run.query_id,
        fingerprint,
        pipeline.key_groups,
        source_identities,
    )?;
    let owner = SinkOwner { query_id: metadata.id.clone(), checkpoint: checkpoint.root().to_path_buf(), new_query };
    for source in &pipeline.sources {
        if let BadRecordPolicy::DeadLetter(dir) = &source.on_bad_record {
            crate::sink::claim(dir, &owner, &crate::sink::DEAD_LETTER_DIR)
                .with_context(|| format!("source '{}'", source.name))?;
        }
    }
    let sink = crate::sink::open(&pipeline.sink, &owner)?;
    Ok(Parts { store, stages, sources, sink, query_id: metadata.id, run_id: run.run_id, schemas_to_record })
}

/// The ids a processor is told at init (Spark's `QueryInfo`): the query's (kept in
/// the checkpoint; made now for a new query) and this run's.
struct RunIds {
    query_id: String,
    run_id: String,
}

/// Opens the chain in order, each stage on the schema of the one before, and checks
/// each stateful stage's state schema against the store.
fn open_stages(
    pipeline: &Pipeline,
    store: &StateStore,
    checkpoint: &CheckpointDir,
    module_cache: Option<PathBuf>,
    run: &RunIds,
    schemas_to_record: &mut Vec<(u16, OperatorStateSchema)>,
) -> Result<Vec<Box<dyn Stage>>> {
    let mut input = pipeline.sources[0].schema.clone();
    let mut stages: Vec<Box<dyn Stage>> = Vec::with_capacity(pipeline.stages.len());
    // A window, aggregate or processor stage in update or complete mode outputs rows that change
    // later: Spark refuses any stateful operator after it, and so does eddy.
    let mut changing_rows_from: Option<&str> = None;
    for spec in &pipeline.stages {
        let place = || format!("{}:{}: stage '{}'", pipeline.file.display(), spec.line, spec.name);
        if let Some(window) = changing_rows_from
            && !matches!(spec.kind, StageKind::Sql(_))
        {
            anyhow::bail!(
                "{}: it follows stage '{window}', whose update or complete output mode emits rows that change later; \
                 a stateful stage after it needs append mode there (as in Spark), so make '{window}' append",
                place()
            );
        }
        let changing = match &spec.kind {
            StageKind::Window(window) => window.output_mode != crate::contract::OutputMode::Append,
            StageKind::Aggregate(_) => true,
            StageKind::Processor(processor) => processor.output_mode != crate::contract::OutputMode::Append,
            _ => false,
        };
        if changing {
            changing_rows_from = Some(&spec.name);
        }
        let (stage, state_schema): (Box<dyn Stage>, Option<OperatorStateSchema>) = match &spec.kind {
            StageKind::Processor(processor) => {
                let opened = open_processor(pipeline, spec, processor, &input, store, module_cache.clone(), run);
                // A lone processor's errors are about the processor; in a chain, name the stage.
                let (mut operator, schema) =
                    if pipeline.stages.len() > 1 { opened.with_context(place)? } else { opened? };
                let deleted = operator.deleted_state();
                let found = check_schema(store, spec.operator_id, schema, &deleted, checkpoint, schemas_to_record)?;
                operator.delete_state_with_next_batch(found.delete);
                if found.convert_timers {
                    operator.convert_timers_with_next_batch();
                }
                (Box::new(operator), None)
            }
            StageKind::Sql(query) => {
                let max_rows = spec.max_output_rows.unwrap_or(crate::pipeline::DEFAULT_STAGE_OUTPUT_ROWS);
                let stage =
                    SqlStage::open(&spec.name, query, &input, &pipeline.tables, max_rows).with_context(place)?;
                (Box::new(stage), None)
            }
            StageKind::Window(window) => {
                // The watermark is the event time's: a window over another time column
                // would be closed by an unrelated clock (Spark ties them too).
                if let Some(watermark) = &pipeline.sources[0].watermark
                    && input.index_of(&watermark.column).is_ok()
                    && window.time_column != watermark.column
                {
                    anyhow::bail!(
                        "{}: the window's time-column is '{}' but the watermark is on '{}'; window on the watermark's column",
                        place(),
                        window.time_column,
                        watermark.column
                    );
                }
                let has_watermark = pipeline.sources.iter().all(|source| source.watermark.is_some());
                let stage =
                    WindowStage::open(spec, window, &input, pipeline.key_groups, has_watermark).with_context(place)?;
                let schema = stage.state_schema();
                (Box::new(stage), Some(schema))
            }
            StageKind::Aggregate(aggregate) => {
                let stage = AggregateStage::open(spec, aggregate, &input, pipeline.key_groups).with_context(place)?;
                let schema = stage.state_schema();
                (Box::new(stage), Some(schema))
            }
            StageKind::Dedup(dedup) => {
                let mut stage = DedupStage::open(spec, dedup, &input, pipeline.key_groups).with_context(place)?;
                let found =
                    check_schema(store, spec.operator_id, stage.state_schema(), &[], checkpoint, schemas_to_record)?;
                if found.convert_timers {
                    stage.convert_timers_with_next_batch();
                }
                (Box::new(stage), None)
            }
        };
        if let Some(state_schema) = state_schema {
            check_schema(store, spec.operator_id, state_schema, &[], checkpoint, schemas_to_record)?;
        }
        input = stage.output_schema().clone();
        stages.push(stage);
    }
    Ok(stages)
}

/// Checks a stateful stage's state schema against the store (see
/// [`crate::state::check`]); returns the stored variables whose data the next batch
/// deletes.
fn check_schema(
    store: &StateStore,
    operator: u16,
    schema: OperatorStateSchema,
    deleted: &[String],
    checkpoint: &CheckpointDir,
    schemas_to_record: &mut Vec<(u16, OperatorStateSchema)>,
) -> Result<SchemaCheck> {
    let found = crate::state::check(store, operator, &schema, deleted, checkpoint)?;
    if found.record {
        schemas_to_record.push((operator, schema));
    } else {
        // The store has it; the readable copy may lack it if a crash came between the two.
        crate::state::write_schema_file(checkpoint, operator, &schema)?;
    }
    Ok(found)
}

/// Loads a processor stage's module and opens its shards on rows of `input`; returns
/// it with its state schema.
fn open_processor(
    pipeline: &Pipeline,
    stage: &StageSpec,
    spec: &OperatorSpec,
    input: &SchemaRef,
    store: &StateStore,
    module_cache: Option<PathBuf>,
    run: &RunIds,
) -> Result<(ShardedOperator, OperatorStateSchema)> {
    let runtime = WasmRuntime::new(module_cache)?;
    let module = runtime.load(&spec.module)?;
    let first = &pipeline.sources[0];
    let event_time_column =
        first.watermark.as_ref().map(|w| w.column.clone()).filter(|column| {
            pipeline.sources.iter().all(|s| s.watermark.as_ref().is_some_and(|w| &w.column == column))
        });
    let options = OperatorOptions {
        operator_id: stage.operator_id,
        key_columns: spec.key.clone(),
        key_groups: spec.key_groups,
        output_mode: spec.output_mode,
        config_json: spec.config_json.clone(),
        limits: spec.limits,
        spill_state_bytes: spec.spill_state_bytes,
        initial_state_schema: spec.initial_state.as_ref().map(|initial| initial.schema.clone()),
        event_time_column,
        key_group_range: 0..spec.key_groups,
        query_id: run.query_id.clone(),
        run_id: run.run_id.clone(),
    };
    let mut operator = ShardedOperator::open(&module, input, options, spec.parallelism)?;
    let state_schema = OperatorStateSchema {
        key_columns: spec.key.clone(),
        key_groups: spec.key_groups,
        variables: operator.state_variables(),
        module_sha256: module.sha256.clone(),
        stage: stage.name.clone(),
        window_aggregates: Vec::new(),
        timers_by_key: operator.timers_by_key(),
        timers_packed: true,
    };
    if let Some(required) = spec.time_mode
        && required != operator.time_mode()
    {
        anyhow::bail!(
            "{}:{}: the time-mode is {required:?} but module '{}' declares {:?}; make them agree",
            pipeline.file.display(),
            stage.line,
            module.name,
            operator.time_mode()
        );
    }
    if let Some(initial) = &spec.initial_state
        && store.committed_batch()?.is_none()
    {
        operator.start_from(read_json_lines(&initial.path, &initial.schema)?);
    }
    Ok((operator, state_schema))
}

/// A hash of what the pipeline's state depends on: the sources' schemas, each stateful
/// stage's key columns and the key-group count (for one processor stage, the same as
/// before stages existed, so existing checkpoints keep their fingerprint).
fn pipeline_fingerprint(pipeline: &Pipeline) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for source in &pipeline.sources {
        for field in source.schema.fields() {
            hasher.update(format!("{}:{}:{};", field.name(), field.data_type(), field.is_nullable()));
        }
        hasher.update("|");
    }
    for (index, stage) in pipeline.stages.iter().enumerate() {
        match &stage.kind {
            StageKind::Processor(processor) => hasher.update(format!("{:?}/{}", processor.key, processor.key_groups)),
            StageKind::Sql(_) => hasher.update(format!("{index}:sql;")),
            StageKind::Window(window) => {
                hasher.update(format!("{index}:window:{:?}/{};", window.group_by, pipeline.key_groups))
            }
            StageKind::Aggregate(aggregate) => {
                hasher.update(format!("{index}:aggregate:{:?}/{};", aggregate.group_by, pipeline.key_groups))
            }
            StageKind::Dedup(dedup) => hasher.update(format!("{index}:dedup:{:?}/{};", dedup.key, pipeline.key_groups)),
        }
    }
    hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Every record of a JSON-lines file or directory, in one batch.
fn read_json_lines(path: &Path, schema: &SchemaRef) -> Result<RecordBatch> {
    let mut batches = Vec::new();
    for file in list_input_files(path)? {
        let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
        batches.push(decode_json_lines(&bytes, schema, &file)?);
    }
    Ok(arrow::compute::concat_batches(schema, &batches)?)
}
