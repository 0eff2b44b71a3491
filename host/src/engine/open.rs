//! Opening a query: its state store, its stages, its sources and sink, checked
//! against what the checkpoint already holds before anything is recorded.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use crate::checkpoint::{CheckpointDir, Metadata};
use crate::decode::decode_json_lines;
use crate::operator::{OperatorOptions, ShardedOperator, Stage};
use crate::pipeline::Pipeline;
use crate::sink::{Sink, SinkOwner};
use crate::source::{Source, list_input_files};
use crate::state::{OperatorStateSchema, StateStore};
use crate::wasm::WasmRuntime;

/// The processor stage's operator id (part of every state key); one stage today.
const PROCESSOR_OPERATOR_ID: u16 = 0;

/// The opened parts of a query.
pub(super) struct Parts {
    pub store: StateStore,
    pub stages: Vec<Box<dyn Stage>>,
    pub sources: Vec<Box<dyn Source>>,
    pub sink: Box<dyn Sink>,
    /// The query's id from the checkpoint's metadata (new for a new query).
    pub query_id: String,
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
    let store = StateStore::open(&checkpoint.store_dir())?;
    let mut schemas_to_record = Vec::new();
    let mut processor = open_processor(pipeline, &store, checkpoint, module_cache, &mut schemas_to_record)?;
    let sources = pipeline
        .sources
        .iter()
        .enumerate()
        .map(|(index, source)| crate::source::open(source, index, checkpoint))
        .collect::<Result<Vec<_>>>()?;
    let new_query = store.committed_batch()?.is_none();
    let metadata = Metadata::record(
        &checkpoint.metadata_file(),
        existing,
        pipeline_fingerprint(pipeline),
        pipeline.operator.key_groups,
    )?;
    processor.set_query_id(&metadata.id);
    let owner = SinkOwner { query_id: metadata.id.clone(), checkpoint: checkpoint.root().to_path_buf(), new_query };
    let sink = crate::sink::open(&pipeline.sink, &owner)?;
    Ok(Parts { store, stages: vec![Box::new(processor)], sources, sink, query_id: metadata.id, schemas_to_record })
}

/// Loads the processor module, opens its shards and checks its state schema against
/// the store (adding it to `schemas_to_record` when it is new or changed).
fn open_processor(
    pipeline: &Pipeline,
    store: &StateStore,
    checkpoint: &CheckpointDir,
    module_cache: Option<PathBuf>,
    schemas_to_record: &mut Vec<(u16, OperatorStateSchema)>,
) -> Result<ShardedOperator> {
    let runtime = WasmRuntime::new(module_cache)?;
    let module = runtime.load(&pipeline.operator.module)?;
    let spec = &pipeline.operator;
    let first = &pipeline.sources[0];
    let event_time_column =
        first.watermark.as_ref().map(|w| w.column.clone()).filter(|column| {
            pipeline.sources.iter().all(|s| s.watermark.as_ref().is_some_and(|w| &w.column == column))
        });
    let options = OperatorOptions {
        operator_id: PROCESSOR_OPERATOR_ID,
        key_columns: spec.key.clone(),
        key_groups: spec.key_groups,
        output_mode: spec.output_mode,
        config_json: spec.config_json.clone(),
        limits: spec.limits,
        initial_state_schema: spec.initial_state.as_ref().map(|initial| initial.schema.clone()),
        event_time_column,
        key_group_range: 0..spec.key_groups,
        // Known once the metadata is recorded, after the state was found compatible.
        query_id: String::new(),
    };
    let mut operator = ShardedOperator::open(&module, &first.schema, options, spec.parallelism)?;
    let state_schema = OperatorStateSchema {
        key_columns: spec.key.clone(),
        key_groups: spec.key_groups,
        variables: operator.state_variables(),
        module_sha256: module.sha256.clone(),
    };
    if crate::state::check(store, PROCESSOR_OPERATOR_ID, &state_schema, checkpoint)? {
        schemas_to_record.push((PROCESSOR_OPERATOR_ID, state_schema));
    } else {
        // The store has it; the readable copy may lack it if a crash came between the two.
        crate::state::write_schema_file(checkpoint, PROCESSOR_OPERATOR_ID, &state_schema)?;
    }
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
    if let Some(initial) = &spec.initial_state
        && store.committed_batch()?.is_none()
    {
        operator.start_from(read_json_lines(&initial.path, &initial.schema)?);
    }
    Ok(operator)
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

/// Every record of a JSON-lines file or directory, in one batch.
fn read_json_lines(path: &Path, schema: &SchemaRef) -> Result<RecordBatch> {
    let mut batches = Vec::new();
    for file in list_input_files(path)? {
        let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
        batches.push(decode_json_lines(&bytes, schema, &file)?);
    }
    Ok(arrow::compute::concat_batches(schema, &batches)?)
}
