//! Running a pipeline: one batch per new input file, in name order.
//!
//! Per batch: decode the file, run the operator (state changes buffered), write the
//! sink, then commit the state changes together with the record that the file was
//! consumed, in one atomic RocksDB write. A re-run skips files already committed.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use crate::decode::decode_json_lines;
use crate::operator::{BatchTime, OperatorOptions, WasmOperator};
use crate::pipeline::Pipeline;
use crate::sink;
use crate::source::list_input_files;
use crate::state::{Cf, StateStore};
use crate::wasm::WasmRuntime;

/// How to run a pipeline.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Overrides the spec's checkpoint directory.
    pub checkpoint: Option<PathBuf>,
    /// Where compiled modules are cached (`None`: no cache).
    pub module_cache: Option<PathBuf>,
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
}

const CONSUMED_FILE: &str = "source-file:";
const OPERATOR_ID: u16 = 0;

/// Runs `pipeline` over every input file not yet committed, then stops.
pub fn run_pipeline(pipeline: &Pipeline, options: &RunOptions) -> Result<RunSummary> {
    let temporary;
    let checkpoint = match options.checkpoint.as_ref().or(pipeline.checkpoint.as_ref()) {
        Some(dir) => dir.clone(),
        None => {
            temporary = tempfile::Builder::new().prefix("eddy-checkpoint-").tempdir()?;
            temporary.path().to_path_buf()
        }
    };
    let store = StateStore::open(&checkpoint.join("state"))?;
    let runtime = WasmRuntime::new(options.module_cache.clone())?;
    let module = runtime.load(&pipeline.operator.module)?;
    let spec = &pipeline.operator;
    let schema = &pipeline.source.schema;
    let mut operator = WasmOperator::open(
        &module,
        schema,
        OperatorOptions {
            operator_id: OPERATOR_ID,
            key_columns: spec.key.clone(),
            key_groups: spec.key_groups,
            output_mode: spec.output_mode,
            config_json: spec.config_json.clone(),
            limits: spec.limits,
            initial_state_schema: spec.initial_state.as_ref().map(|initial| initial.schema.clone()),
        },
    )?;
    let mut sink = sink::open(&pipeline.sink)?;
    let mut summary = RunSummary::default();
    let mut next_batch = store.committed_batch()?.map_or(0, |id| id + 1);
    let mut initial_state = match (&spec.initial_state, next_batch) {
        (Some(initial), 0) => Some(read_json_lines(&initial.path, &initial.schema)?),
        _ => None,
    };
    for file in list_input_files(&pipeline.source.path)? {
        let marker = consumed_marker(&file);
        if store.read(Cf::Meta, &marker)?.is_some() {
            continue;
        }
        let input = read_json_lines(&file, schema)?;
        let time = BatchTime { batch_id: next_batch, processing_time: now_micros(), watermark: None };
        let txn = match initial_state.take() {
            Some(rows) => operator.apply_initial_state(store.begin(), &rows, time).context("applying the initial state failed")?,
            None => store.begin(),
        };
        let output = operator
            .run_batch(txn, &input, time)
            .with_context(|| format!("batch {next_batch} (input {}) failed; nothing of it was committed", file.display()))?;
        sink.write_batch(next_batch, operator.output_schema(), &output.rows)?;
        let mut txn = output.txn;
        txn.put(Cf::Meta, marker, next_batch.to_be_bytes().to_vec());
        store.commit(txn, next_batch)?;
        summary.batches += 1;
        summary.input_rows += input.num_rows() as u64;
        summary.output_rows += output.rows.iter().map(|batch| batch.num_rows() as u64).sum::<u64>();
        next_batch += 1;
    }
    operator.close()?;
    Ok(summary)
}

/// Every record of a JSON-lines file or directory, in one batch.
fn read_json_lines(path: &Path, schema: &arrow::datatypes::SchemaRef) -> Result<arrow::array::RecordBatch> {
    let mut batches = Vec::new();
    for file in list_input_files(path)? {
        let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
        batches.push(decode_json_lines(&bytes, schema, &file)?);
    }
    Ok(arrow::compute::concat_batches(schema, &batches)?)
}

fn consumed_marker(file: &Path) -> Vec<u8> {
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{CONSUMED_FILE}{name}").into_bytes()
}

fn now_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_micros() as i64)
}
