//! One query and the protocol of one batch, in named steps:
//!
//! 1. **plan** — each source's rows from what the store has committed, recorded in
//!    `offsets/N` before anything runs (or, after a crash, re-planned exactly from it);
//! 2. **read input** — event times observed, late rows dropped ([`super::input`]);
//! 3. **run the stages** — the chain, each stage on the rows of the one before;
//! 4. **publish** — the sink writes the output and its manifest `sinks/0/N`;
//! 5. **commit** — every stage's state changes, the sources' progress and the next
//!    watermark in one atomic RocksDB write, then `commits/N`, a snapshot when due,
//!    the progress record and the checkpoint's retention.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;

use super::input::{Input, InputRules, Plan, read_input};
use super::metrics::BatchMetrics;
use super::open::open_parts;
use super::report::Reporter;
use super::watermark::WatermarkTracker;
use crate::checkpoint::{CheckpointDir, CommitRecord, OffsetsRecord, QueryProgress, SinkManifest};
use crate::operator::{BatchTime, Stage, StageStats, StaticTable};
use crate::pipeline::Pipeline;
use crate::sink::Sink;
use crate::source::{Source, SourceBatch};
use crate::state::{Cf, OperatorStateSchema, StateStore, StateTxn, schema_entry, write_schema_file};
use crate::util::fault;

/// The meta key of the watermark the last batch ran with.
const LAST_BATCH_WATERMARK: &[u8] = b"engine/last-batch-watermark";

/// A running query.
pub struct Query {
    checkpoint: CheckpointDir,
    store: StateStore,
    sources: Vec<Box<dyn Source>>,
    input_schema: SchemaRef,
    stages: Vec<Box<dyn Stage>>,
    /// Each stage's `max-output-rows-per-batch` (`None`: a processor's own limits).
    max_output_rows: Vec<Option<u64>>,
    sink: Box<dyn Sink>,
    watermark: WatermarkTracker,
    event_time_columns: Vec<Option<usize>>,
    next_batch: u64,
    reporter: Reporter,
    retain_batches: u64,
    snapshot_interval: u64,
    /// State schemas recorded with the next commit (new, or a new module's).
    schemas_to_record: Vec<(u16, OperatorStateSchema)>,
    /// The static tables the stages read when they opened (each once, by name).
    static_tables: Vec<StaticTable>,
}

/// What the stages of one batch produced.
struct StagesOutput {
    txns: Vec<StateTxn>,
    rows: Vec<RecordBatch>,
    stats: Vec<StageStats>,
    run_ms: u64,
}

impl Query {
    /// Opens `pipeline` with its state in `checkpoint` (compiled modules cached in
    /// `module_cache`), cleaning what a crash left half-written.
    pub fn open(pipeline: &Pipeline, checkpoint: CheckpointDir, module_cache: Option<PathBuf>) -> Result<Self> {
        let parts = open_parts(pipeline, &checkpoint, module_cache)?;
        checkpoint.remove_interrupted_writes()?;
        let watermark = WatermarkTracker::load(&parts.store, &pipeline.sources, pipeline.watermark_policy)?;
        let committed = parts.store.committed_batch()?;
        if let Some(batch_id) = committed {
            // The state may hold a batch whose commit record a crash prevented.
            let record = CommitRecord { batch_id, next_watermark_us: watermark.current() };
            checkpoint.commits().write(batch_id, &record)?;
        }
        let mut static_tables: Vec<StaticTable> = Vec::new();
        for table in parts.stages.iter().flat_map(|stage| stage.static_tables()) {
            if !static_tables.iter().any(|known| known.name == table.name) {
                static_tables.push(table);
            }
        }
        let reporter = Reporter {
            query_id: parts.query_id,
            run_id: parts.run_id,
            sink: parts.sink.description(),
            query_name: pipeline.name.clone(),
            previous_start: None,
        };
        Ok(Self {
            checkpoint,
            store: parts.store,
            sources: parts.sources,
            input_schema: pipeline.sources[0].schema.clone(),
            stages: parts.stages,
            max_output_rows: pipeline.stages.iter().map(|stage| stage.max_output_rows).collect(),
            sink: parts.sink,
            watermark,
            event_time_columns: pipeline.sources.iter().map(|source| source.event_time_column()).collect(),
            next_batch: committed.map_or(0, |id| id + 1),
            reporter,
            retain_batches: pipeline.min_batches_to_retain,
            snapshot_interval: pipeline.snapshot_interval,
            schemas_to_record: parts.schemas_to_record,
            static_tables,
        })
    }

    /// The id the next batch will have.
    pub fn next_batch_id(&self) -> u64 {
        self.next_batch
    }

    /// Fixes every source to what is available at `now` (available-now and once
    /// triggers); `lift_limits` also drops per-batch limits (once).
    pub fn bound_to_available_now(&mut self, now: i64, lift_limits: bool) -> Result<()> {
        for source in &mut self.sources {
            source.bound_to_available_now(&self.store, now)?;
            if lift_limits {
                source.lift_batch_limits();
            }
        }
        Ok(())
    }

    /// How many files the bounded file sources have left (None when none counts).
    pub fn files_left(&self) -> Result<Option<u64>> {
        let mut total = None;
        for source in &self.sources {
            if let Some(left) = source.files_left(&self.store)? {
                total = Some(total.unwrap_or(0) + left);
            }
        }
        Ok(total)
    }

    /// Whether every bounded source has committed everything up to its bound.
    pub fn caught_up(&self) -> Result<bool> {
        for source in &self.sources {
            if !source.caught_up(&self.store)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Plans and, when there is anything to do (new rows, due timers, or a watermark
    /// that moved since the last batch for a stage that evicts or outputs by it), runs
    /// one batch at processing time `now`; returns its metrics and progress record. A
    /// batch that was planned but not committed before a crash is re-run exactly as
    /// planned instead.
    pub fn try_run_batch(&mut self, now: i64) -> Result<Option<(BatchMetrics, QueryProgress)>> {
        let started = Instant::now();
        let Some(plan) = self.plan(now, started)? else { return Ok(None) };
        let batch_id = plan.time.batch_id;
        let rules = InputRules {
            schema: &self.input_schema,
            sources: &self.sources,
            event_time_columns: &self.event_time_columns,
            watermark: &self.watermark,
            // Late rows are a stateful stage's concern (as in Spark): the first one says.
            drop_late_rows: self
                .stages
                .iter()
                .find(|stage| !stage.is_stateless())
                .is_some_and(|stage| !stage.accepts_late_rows()),
        };
        let input = read_input(plan, &rules)?;
        let output = self
            .run_stages(input.rows.clone(), input.time)
            .with_context(|| format!("batch {batch_id} failed; nothing of it was committed"))?;
        for source in &mut self.sources {
            source.read_ahead(&self.store);
        }
        let sink_bytes_before = self.sink.bytes_written();
        let sink_ms = self.publish(batch_id, &output.rows)?;
        fault::pause("EDDY_PAUSE_AFTER_PUBLISH_MS");
        let sink_bytes = self.sink.bytes_written() - sink_bytes_before;
        let commit_ms = self.commit(&input, output.txns)?;
        let mut metrics = batch_metrics(input, output.stats, output.rows.iter().map(|b| b.num_rows() as u64).sum());
        metrics.operator_ms = output.run_ms;
        metrics.sink_ms = sink_ms;
        metrics.commit_ms = commit_ms;
        metrics.sink_bytes = sink_bytes;
        metrics.state_rows_total = self.store.estimated_state_entries();
        metrics.state_bytes = self.store.estimated_state_bytes();
        metrics.memory_used_bytes = self.store.memory_used_bytes();
        metrics.total_ms = started.elapsed().as_millis() as u64;
        let record = self.reporter.record(&metrics);
        self.checkpoint.progress().append(&record)?;
        let keep_changes_from = self.checkpoint.retain(batch_id, self.retain_batches)?;
        self.store.prune_changelog(keep_changes_from)?;
        Ok(Some((metrics, record)))
    }

    /// Step 1: the next batch's plan, recorded before it runs; `None` when there is
    /// nothing to do.
    fn plan(&mut self, now: i64, started: Instant) -> Result<Option<Plan>> {
        let batch_id = self.next_batch;
        if let Some(record) = self.checkpoint.offsets().read::<OffsetsRecord>(batch_id)? {
            return self.replan(record, started).map(Some);
        }
        let mut planned = Vec::with_capacity(self.sources.len());
        for source in &mut self.sources {
            planned.push(source.next_batch(&self.store, batch_id, now)?);
        }
        let mut time = BatchTime {
            batch_id,
            processing_time: now,
            watermark: self.watermark.current(),
            late_rows_watermark: None,
        };
        let last_watermark = self.last_batch_watermark()?;
        // A batch without new rows runs for the watermark only when a stage would evict
        // or output because it moved (Spark: complete mode, for one, never does).
        let watermark_moved = time.watermark.is_some()
            && time.watermark != last_watermark
            && self.stages.iter().any(|stage| stage.runs_when_the_watermark_moves());
        if !planned.iter().any(Option::is_some) && !watermark_moved && !self.timers_due(time)? {
            return Ok(None);
        }
        let end_offsets = planned
            .iter()
            .map(|batch| batch.as_ref().map_or(serde_json::Value::Null, |b| b.end_offset.clone()))
            .collect();
        let static_tables = self.static_table_fingerprints();
        let record = OffsetsRecord {
            batch_id,
            batch_timestamp_us: now,
            watermark_us: time.watermark,
            end_offsets,
            static_tables,
        };
        self.checkpoint.offsets().write(batch_id, &record)?;
        let late_rows_watermark = self.late_rows_watermark(time)?;
        time.late_rows_watermark = late_rows_watermark;
        Ok(Some(Plan { time, late_rows_watermark, sources: planned, plan_ms: started.elapsed().as_millis() as u64 }))
    }

    /// The plan of a batch recorded before a crash: the same input, time, watermark
    /// and, once the sink may have published some of it, static tables.
    fn replan(&mut self, mut record: OffsetsRecord, started: Instant) -> Result<Plan> {
        let batch_id = record.batch_id;
        // Once the sink may hold some of the batch, the re-run must read the same tables;
        // before that, its output is the first and may read the tables as they are now.
        let published =
            self.checkpoint.sink_manifests(0).has(batch_id) || self.checkpoint.sink_intents(0).has(batch_id);
        let tables = self.static_table_fingerprints();
        if published {
            check_static_tables(batch_id, &record.static_tables, &self.static_tables)?;
        } else if record.static_tables != tables {
            record.static_tables = tables;
            self.checkpoint.offsets().write(batch_id, &record)?;
        }
        if record.end_offsets.len() != self.sources.len() {
            anyhow::bail!(
                "batch {batch_id} was planned with {} source(s) and the pipeline now has {}; restore the \
                 pipeline's sources to let batch {batch_id} finish, then change them",
                record.end_offsets.len(),
                self.sources.len()
            );
        }
        let mut planned: Vec<Option<SourceBatch>> = Vec::with_capacity(self.sources.len());
        for (source, end) in self.sources.iter_mut().zip(&record.end_offsets) {
            planned.push(source.replan_batch(&self.store, batch_id, record.batch_timestamp_us, end)?);
        }
        let mut time = BatchTime {
            batch_id,
            processing_time: record.batch_timestamp_us,
            watermark: record.watermark_us,
            late_rows_watermark: None,
        };
        let late_rows_watermark = self.late_rows_watermark(time)?;
        time.late_rows_watermark = late_rows_watermark;
        Ok(Plan { time, late_rows_watermark, sources: planned, plan_ms: started.elapsed().as_millis() as u64 })
    }

    /// Each static table's fingerprint, by name, as the stages read it.
    fn static_table_fingerprints(&self) -> BTreeMap<String, String> {
        self.static_tables.iter().map(|table| (table.name.clone(), table.fingerprint.clone())).collect()
    }

    /// The watermark the last committed batch ran with.
    fn last_batch_watermark(&self) -> Result<Option<i64>> {
        let raw = self.store.read(Cf::Meta, LAST_BATCH_WATERMARK)?;
        Ok(raw.and_then(|raw| Some(i64::from_be_bytes(raw.as_slice().try_into().ok()?))))
    }

    /// The watermark batch `time.batch_id` judges late rows by: the previous batch's
    /// (the query's first batch has none before it and uses its own, as Spark does).
    /// Read from the committed store, so a batch re-run after a crash judges alike.
    fn late_rows_watermark(&self, time: BatchTime) -> Result<Option<i64>> {
        if self.store.committed_batch()?.is_none() {
            return Ok(time.watermark);
        }
        self.last_batch_watermark()
    }

    fn timers_due(&mut self, time: BatchTime) -> Result<bool> {
        for stage in &mut self.stages {
            if stage.timers_due(&self.store, time)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Step 3: the chain of stages, each on the rows of the one before.
    fn run_stages(&mut self, input: RecordBatch, time: BatchTime) -> Result<StagesOutput> {
        let started = Instant::now();
        let mut schema = input.schema();
        let mut output = StagesOutput { txns: Vec::new(), rows: vec![input], stats: Vec::new(), run_ms: 0 };
        for (stage, max_rows) in self.stages.iter_mut().zip(&self.max_output_rows) {
            let rows = match output.rows.len() {
                1 => output.rows.swap_remove(0),
                _ => concat_batches(&schema, &output.rows)?,
            };
            let ran = stage.run(&self.store, &rows, time)?;
            let output_rows: u64 = ran.rows.iter().map(|batch| batch.num_rows() as u64).sum();
            if let Some(max_rows) = max_rows
                && output_rows > *max_rows
            {
                anyhow::bail!(
                    "stage '{}' output {output_rows} rows in this batch, over its limit of {max_rows} rows per batch \
                     (max-output-rows-per-batch of the stage); make batches smaller (the source's \
                     max-files-per-trigger, max-bytes-per-trigger or max-rows-per-trigger), or raise the stage's \
                     max-output-rows-per-batch",
                    ran.stats.name
                );
            }
            schema = stage.output_schema().clone();
            output.txns.extend(ran.txns);
            output.rows = ran.rows;
            // Progress lists the stateful stages (Spark's `stateOperators`); a stateless
            // stage keeps nothing to report there.
            if !stage.is_stateless() {
                output.stats.push(ran.stats);
            }
        }
        output.run_ms = started.elapsed().as_millis() as u64;
        Ok(output)
    }

    /// Step 4: the sink publishes the output, once: a batch its manifest already has
    /// (re-run after a crash) is only shown again by sinks that show, not rewritten.
    fn publish(&mut self, batch_id: u64, rows: &[RecordBatch]) -> Result<u64> {
        let started = Instant::now();
        let schema = self.output_schema();
        let manifests = self.checkpoint.sink_manifests(0);
        if manifests.has(batch_id) {
            self.sink.replay_batch(batch_id, &schema, rows)?;
        } else {
            self.sink.write_batch(batch_id, &schema, rows)?;
            fault::pause("EDDY_PAUSE_BEFORE_MANIFEST_MS");
            let num_output_rows = rows.iter().map(|b| b.num_rows() as u64).sum();
            manifests.write(batch_id, &SinkManifest { batch_id, sink: self.sink.description(), num_output_rows })?;
        }
        Ok(started.elapsed().as_millis() as u64)
    }

    /// The schema of the rows the sink receives: the last stage's.
    fn output_schema(&self) -> SchemaRef {
        self.stages.last().map_or_else(|| self.input_schema.clone(), |stage| stage.output_schema().clone())
    }

    /// Step 5: one atomic write of every change of the batch, then its commit record
    /// and, when due, a snapshot.
    fn commit(&mut self, input: &Input, mut txns: Vec<StateTxn>) -> Result<u64> {
        let started = Instant::now();
        let batch_id = input.time.batch_id;
        let mut next_watermark = input.next_watermark.clone();
        next_watermark.advance();
        let mut meta = self.store.begin();
        for (key, value) in input.commit_entries.iter().cloned().chain(next_watermark.commit_entries()) {
            meta.put(Cf::Meta, key, value);
        }
        if let Some(watermark) = input.time.watermark {
            meta.put(Cf::Meta, LAST_BATCH_WATERMARK.to_vec(), watermark.to_be_bytes().to_vec());
        }
        for (operator, schema) in &self.schemas_to_record {
            let (key, value) = schema_entry(*operator, schema)?;
            meta.put(Cf::Meta, key, value);
        }
        txns.push(meta);
        self.store.commit_all(txns, batch_id)?;
        for (operator, schema) in std::mem::take(&mut self.schemas_to_record) {
            write_schema_file(&self.checkpoint, operator, &schema)?;
        }
        let record = CommitRecord { batch_id, next_watermark_us: next_watermark.current() };
        self.checkpoint.commits().write(batch_id, &record)?;
        if batch_id.is_multiple_of(self.snapshot_interval) {
            self.store.snapshot(&self.checkpoint.snapshot_of(batch_id))?;
        }
        self.watermark = next_watermark;
        self.next_batch += 1;
        Ok(started.elapsed().as_millis() as u64)
    }

    /// Ends every stage.
    pub fn close(&mut self) -> Result<()> {
        self.stages.iter_mut().try_for_each(|stage| stage.close())
    }
}

/// Refuses to re-run batch `batch_id`, planned with the static tables `recorded` (name
/// to fingerprint), when a table the stages read now differs or is gone.
fn check_static_tables(batch_id: u64, recorded: &BTreeMap<String, String>, current: &[StaticTable]) -> Result<()> {
    let why = "a batch re-run after a crash reads what it read before, or its output could differ from what \
               the sink already has of it";
    for (name, fingerprint) in recorded {
        match current.iter().find(|table| &table.name == name) {
            None => anyhow::bail!(
                "batch {batch_id} was planned with static table '{name}', which no SQL stage of the pipeline reads \
                 now; {why}: restore the table and the stages that read it until batch {batch_id} has committed, \
                 then remove them"
            ),
            Some(table) if &table.fingerprint != fingerprint => anyhow::bail!(
                "batch {batch_id} cannot run again: static table '{name}' ({}) changed since the batch was planned \
                 (its files' fingerprint was {}, now {}); {why}: put the table's files back as they were until \
                 batch {batch_id} has committed, then change them (static tables are read when the query starts)",
                table.path.display(),
                short(fingerprint),
                short(&table.fingerprint)
            ),
            Some(_) => {}
        }
    }
    Ok(())
}

/// The first 12 hex digits of a fingerprint, as messages show it.
fn short(fingerprint: &str) -> &str {
    fingerprint.get(..12).unwrap_or(fingerprint)
}

/// The metrics of a batch from its input and what its stateful stages did (the rows
/// the input step dropped as late count for the first of them, whose rule it applied).
fn batch_metrics(input: Input, mut stages: Vec<StageStats>, output_rows: u64) -> BatchMetrics {
    if let Some(first) = stages.first_mut() {
        first.rows_dropped_by_watermark += input.rows_dropped_by_watermark;
    }
    BatchMetrics {
        batch_id: input.time.batch_id,
        processing_time: input.time.processing_time,
        watermark: input.time.watermark,
        input_rows: input.sources.iter().map(|s| s.input_rows).sum(),
        sources: input.sources,
        rows_dropped_by_watermark: stages.iter().map(|stage| stage.rows_dropped_by_watermark).sum(),
        event_time: input.event_times,
        stages,
        output_rows,
        plan_ms: input.plan_ms,
        ..BatchMetrics::default()
    }
}
