//! One query: its sources, watermark, sharded operator, sink and state store, and
//! the execution of one batch.
//!
//! Per batch N: plan each source's rows from what the store has committed; drop rows
//! older than the watermark (unless the processor takes late rows); run the operator
//! shards; write the sink; commit every shard's state changes, the sources' progress
//! and the next watermark in one atomic RocksDB write.

use std::time::Instant;

use anyhow::{Context, Result};
use arrow::array::{Array, BooleanArray, RecordBatch, TimestampMicrosecondArray};
use arrow::compute::{concat_batches, filter_record_batch};
use arrow::datatypes::SchemaRef;

use super::checkpoint::{BatchLog, Snapshots, remove_interrupted_writes};
use super::metrics::{BatchMetrics, EventTimeStats, SourceMetrics};
use super::watermark::WatermarkTracker;
use crate::operator::{BatchTime, ShardedOperator};
use crate::pipeline::Pipeline;
use crate::sink::Sink;
use crate::source::{Source, SourceBatch};
use crate::state::{Cf, StateStore, Timers};
use crate::wasm::TimeMode;

const LAST_BATCH_WATERMARK: &[u8] = b"engine/last-batch-watermark";
const OPERATOR_ID: u16 = 0;

/// A running query.
pub struct Query {
    /// The validated spec.
    pub pipeline: Pipeline,
    /// The state store.
    pub store: StateStore,
    /// The inputs, in spec order.
    pub sources: Vec<Box<dyn Source>>,
    /// The processor shards.
    pub operator: ShardedOperator,
    /// The output.
    pub sink: Box<dyn Sink>,
    watermark: WatermarkTracker,
    event_time_columns: Vec<Option<usize>>,
    initial_state: Option<RecordBatch>,
    next_batch: u64,
    log: BatchLog,
    snapshots: Snapshots,
    retain_batches: u64,
}

/// The operator's id within the query (the only operator today).
pub fn operator_id() -> u16 {
    OPERATOR_ID
}

impl Query {
    /// Assembles a query whose parts were opened by the caller; its batch logs live in
    /// `checkpoint`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        pipeline: Pipeline,
        checkpoint: &std::path::Path,
        store: StateStore,
        sources: Vec<Box<dyn Source>>,
        operator: ShardedOperator,
        sink: Box<dyn Sink>,
        initial_state: Option<RecordBatch>,
    ) -> Result<Self> {
        let watermark = WatermarkTracker::load(&store, &pipeline.sources, pipeline.watermark_policy)?;
        let event_time_columns = pipeline
            .sources
            .iter()
            .map(|source| source.watermark.as_ref().and_then(|w| source.schema.index_of(&w.column).ok()))
            .collect();
        remove_interrupted_writes(checkpoint)?;
        let committed = store.committed_batch()?;
        let log = BatchLog::new(checkpoint);
        if let Some(batch_id) = committed {
            // The state may hold a batch whose commit record a crash prevented.
            log.write_commit(batch_id, watermark.current())?;
        }
        let next_batch = committed.map_or(0, |id| id + 1);
        let initial_state = if next_batch == 0 { initial_state } else { None };
        let retain_batches = pipeline.min_batches_to_retain;
        let snapshots = Snapshots::new(checkpoint);
        Ok(Self {
            pipeline,
            store,
            sources,
            operator,
            sink,
            watermark,
            event_time_columns,
            initial_state,
            next_batch,
            log,
            snapshots,
            retain_batches,
        })
    }

    /// The id the next batch will have.
    pub fn next_batch_id(&self) -> u64 {
        self.next_batch
    }

    /// Plans and, when there is anything to do (new rows, due timers, or a watermark
    /// that moved since the last batch), runs one batch at processing time `now`. A
    /// batch that was planned (`offsets/N`) but not committed before a crash is re-run
    /// exactly as planned instead.
    pub fn try_run_batch(&mut self, now: i64) -> Result<Option<BatchMetrics>> {
        let started = Instant::now();
        let batch_id = self.next_batch;
        if let Some(record) = self.log.read_offsets(batch_id)? {
            if record.end_offsets.len() != self.sources.len() {
                anyhow::bail!(
                    "batch {batch_id} was planned with {} source(s) and the pipeline now has {}; restore the \
                     pipeline's sources to let batch {batch_id} finish, then change them",
                    record.end_offsets.len(),
                    self.sources.len()
                );
            }
            let mut planned = Vec::with_capacity(self.sources.len());
            for (source, end) in self.sources.iter_mut().zip(&record.end_offsets) {
                planned.push(source.replan_batch(&self.store, batch_id, record.batch_timestamp_us, end)?);
            }
            let plan_ms = started.elapsed().as_millis() as u64;
            let (now, watermark) = (record.batch_timestamp_us, record.watermark_us);
            return self.run_batch(batch_id, now, watermark, planned, started, plan_ms).map(Some);
        }
        let mut planned = Vec::with_capacity(self.sources.len());
        for source in &mut self.sources {
            planned.push(source.next_batch(&self.store, batch_id, now)?);
        }
        let plan_ms = started.elapsed().as_millis() as u64;
        let watermark = self.watermark.current();
        let has_input = planned.iter().any(Option::is_some);
        if !has_input && !self.watermark_moved(watermark)? && !self.timers_due(now, watermark)? {
            return Ok(None);
        }
        let end_offsets = planned
            .iter()
            .map(|batch| batch.as_ref().map_or(serde_json::Value::Null, |b| b.end_offset.clone()))
            .collect();
        self.log.write_offsets(batch_id, now, watermark, end_offsets)?;
        self.run_batch(batch_id, now, watermark, planned, started, plan_ms).map(Some)
    }

    fn watermark_moved(&self, watermark: Option<i64>) -> Result<bool> {
        let last = self.store.read(Cf::Meta, LAST_BATCH_WATERMARK)?;
        Ok(watermark.is_some() && last.as_deref() != watermark.map(i64::to_be_bytes).as_ref().map(|b| b.as_slice()))
    }

    fn timers_due(&self, now: i64, watermark: Option<i64>) -> Result<bool> {
        let deadline = match (self.operator.time_mode(), watermark) {
            (TimeMode::ProcessingTime, _) => now,
            (TimeMode::EventTime, Some(watermark)) => watermark,
            _ => return Ok(false),
        };
        Ok(!Timers::due(&self.store.begin(), OPERATOR_ID, deadline)?.is_empty())
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

    fn run_batch(
        &mut self,
        batch_id: u64,
        now: i64,
        watermark: Option<i64>,
        planned: Vec<Option<SourceBatch>>,
        started: Instant,
        plan_ms: u64,
    ) -> Result<BatchMetrics> {
        let schema: SchemaRef = self.pipeline.sources[0].schema.clone();
        let mut next_watermark = self.watermark.clone();
        let mut metrics = BatchMetrics { batch_id, processing_time: now, watermark, ..BatchMetrics::default() };
        let mut inputs = Vec::new();
        let mut commit_entries = Vec::new();
        let mut event_times = EventTimeStats::default();
        for (index, batch) in planned.into_iter().enumerate() {
            let source_name = self.sources[index].name().to_string();
            let Some(batch) = batch else {
                metrics.sources.push(SourceMetrics { name: source_name, ..SourceMetrics::default() });
                continue;
            };
            let mut rows = batch.rows;
            let read_rows = rows.num_rows() as u64;
            let mut dropped = 0;
            if let Some(column) = self.event_time_columns[index] {
                let times = event_time_values(&rows, column)?;
                if let Some(max) = times.iter().flatten().max() {
                    next_watermark.observe(index, *max);
                }
                event_times.add(times.iter().flatten().copied());
                if let (Some(watermark), false) = (watermark, self.operator.accepts_late_rows()) {
                    let keep: BooleanArray = times.iter().map(|t| Some(t.is_none_or(|t| t >= watermark))).collect();
                    let kept = filter_record_batch(&rows, &keep)?;
                    dropped = read_rows - kept.num_rows() as u64;
                    rows = kept;
                }
            }
            metrics.rows_dropped_by_watermark += dropped;
            metrics.sources.push(SourceMetrics {
                name: source_name,
                input_rows: read_rows,
                bad_records: batch.bad_records,
                start_offset: batch.start_offset,
                end_offset: batch.end_offset,
            });
            commit_entries.extend(batch.commit);
            inputs.push(rows);
        }
        metrics.input_rows = metrics.sources.iter().map(|s| s.input_rows).sum();
        metrics.event_time = event_times;
        let input = concat_batches(&schema, &inputs)?;

        let time = BatchTime { batch_id, processing_time: now, watermark };
        let operator_started = Instant::now();
        let mut txns = self.operator.begin(&self.store);
        if let Some(initial) = &self.initial_state {
            txns =
                self.operator.apply_initial_state(txns, initial, time).context("applying the initial state failed")?;
        }
        let output = self
            .operator
            .run_batch(txns, &input, time)
            .with_context(|| format!("batch {batch_id} failed; nothing of it was committed"))?;
        metrics.operator_ms = operator_started.elapsed().as_millis() as u64;
        metrics.keys_with_input = output.keys_with_input as u64;
        metrics.timers_fired = output.timers_fired as u64;
        metrics.entries_evicted = output.entries_evicted;
        for txn in &output.txns {
            let (written, deleted) = txn.change_counts(Cf::State);
            metrics.state_rows_updated += written;
            metrics.state_rows_removed += deleted;
        }
        metrics.output_rows = output.rows.iter().map(|b| b.num_rows() as u64).sum();

        let sink_started = Instant::now();
        if self.log.sink_has(batch_id) {
            self.sink.replay_batch(batch_id, self.operator.output_schema(), &output.rows)?;
        } else {
            self.sink.write_batch(batch_id, self.operator.output_schema(), &output.rows)?;
            self.log.write_sink_manifest(batch_id, &self.sink.description(), metrics.output_rows)?;
        }
        metrics.sink_ms = sink_started.elapsed().as_millis() as u64;

        next_watermark.advance();
        let mut meta = self.store.begin();
        for (key, value) in commit_entries.into_iter().chain(next_watermark.commit_entries()) {
            meta.put(Cf::Meta, key, value);
        }
        if let Some(watermark) = watermark {
            meta.put(Cf::Meta, LAST_BATCH_WATERMARK.to_vec(), watermark.to_be_bytes().to_vec());
        }
        let commit_started = Instant::now();
        let mut txns = output.txns;
        txns.push(meta);
        self.store.commit_all(txns, batch_id)?;
        self.log.write_commit(batch_id, next_watermark.current())?;
        self.log.retain_last(batch_id, self.retain_batches)?;
        if batch_id.is_multiple_of(self.pipeline.snapshot_interval) {
            self.store.snapshot(&self.snapshots.path_of(batch_id))?;
        }
        // Keep the change log of every retained batch, and from the oldest snapshot still
        // needed, so every retained batch can be rebuilt from a snapshot and the changes
        // after it.
        let oldest_kept = (batch_id + 1).saturating_sub(self.retain_batches);
        let base = self.snapshots.retain_from(oldest_kept)?;
        self.store.prune_changelog(base.map_or(oldest_kept, |base| (base + 1).min(oldest_kept)))?;
        metrics.commit_ms = commit_started.elapsed().as_millis() as u64;
        self.watermark = next_watermark;
        self.initial_state = None;
        self.next_batch += 1;
        metrics.plan_ms = plan_ms;
        metrics.total_ms = started.elapsed().as_millis() as u64;
        metrics.state_rows_total = self.store.estimated_state_entries();
        metrics.memory_used_bytes = self.store.memory_used_bytes();
        Ok(metrics)
    }
}

/// The event times of a TIMESTAMP column (None for nulls).
fn event_time_values(rows: &RecordBatch, column: usize) -> Result<Vec<Option<i64>>> {
    let array = rows
        .column(column)
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .context("the event-time column is not a TIMESTAMP")?;
    Ok((0..array.len()).map(|i| array.is_valid(i).then(|| array.value(i))).collect())
}
