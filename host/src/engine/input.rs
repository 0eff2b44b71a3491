//! The first step of a batch: what the sources planned becomes one input batch —
//! event times observed for the next watermark, late rows dropped (unless the first
//! stage takes late rows), and each source's part measured.
//!
//! Late rows follow Spark's rule (3.4+, `IncrementalExecution`): a row is late when its
//! event time is at or before (`<=`) the watermark of the *previous* batch
//! (`eventTimeWatermarkForLateEvents`), while state eviction and event-time timers use
//! the current batch's watermark (`eventTimeWatermarkForEviction`).

use anyhow::{Context, Result};
use arrow::array::{Array, BooleanArray, RecordBatch, TimestampMicrosecondArray};
use arrow::compute::{concat_batches, filter_record_batch};
use arrow::datatypes::SchemaRef;

use super::metrics::{EventTimeStats, SourceMetrics};
use super::watermark::WatermarkTracker;
use crate::operator::BatchTime;
use crate::source::{Source, SourceBatch};

/// A batch as planned: its clocks and each source's rows (`None`: nothing from it).
pub(super) struct Plan {
    pub time: BatchTime,
    /// The watermark late rows are judged by: the previous batch's (Spark's
    /// `eventTimeWatermarkForLateEvents`); `time.watermark` evicts state and fires timers.
    pub late_rows_watermark: Option<i64>,
    pub sources: Vec<Option<SourceBatch>>,
    pub plan_ms: u64,
}

/// A batch's input, ready for the stages.
pub(super) struct Input {
    pub time: BatchTime,
    pub rows: RecordBatch,
    pub sources: Vec<SourceMetrics>,
    pub event_times: EventTimeStats,
    pub rows_dropped_by_watermark: u64,
    /// The watermark state after this batch (committed with it).
    pub next_watermark: WatermarkTracker,
    /// The sources' meta entries, committed with the batch's state.
    pub commit_entries: Vec<(Vec<u8>, Vec<u8>)>,
    pub plan_ms: u64,
}

/// How the input step treats each source's rows.
pub(super) struct InputRules<'a> {
    pub schema: &'a SchemaRef,
    pub sources: &'a [Box<dyn Source>],
    /// Per source, the index of its event-time column.
    pub event_time_columns: &'a [Option<usize>],
    pub watermark: &'a WatermarkTracker,
    pub drop_late_rows: bool,
}

/// Turns `plan` into the batch's input under `rules`.
pub(super) fn read_input(plan: Plan, rules: &InputRules<'_>) -> Result<Input> {
    let mut next_watermark = rules.watermark.clone();
    let mut input = Input {
        time: plan.time,
        rows: RecordBatch::new_empty(rules.schema.clone()),
        sources: Vec::with_capacity(plan.sources.len()),
        event_times: EventTimeStats::default(),
        rows_dropped_by_watermark: 0,
        next_watermark: rules.watermark.clone(),
        commit_entries: Vec::new(),
        plan_ms: plan.plan_ms,
    };
    let mut parts = Vec::new();
    for (index, batch) in plan.sources.into_iter().enumerate() {
        let source = &rules.sources[index];
        let mut metrics = SourceMetrics {
            name: source.name().to_string(),
            description: source.description(),
            ..SourceMetrics::default()
        };
        let Some(batch) = batch else {
            input.sources.push(metrics);
            continue;
        };
        let mut rows = batch.rows;
        metrics.input_rows = rows.num_rows() as u64;
        if let Some(column) = rules.event_time_columns[index] {
            let times = event_time_values(&rows, column)?;
            if let Some(max) = times.iter().flatten().max() {
                next_watermark.observe(index, *max);
            }
            input.event_times.add(times.iter().flatten().copied());
            if let (Some(watermark), true) = (plan.late_rows_watermark, rules.drop_late_rows) {
                rows = drop_late_rows(&rows, &times, watermark)?;
                input.rows_dropped_by_watermark += metrics.input_rows - rows.num_rows() as u64;
            }
        }
        metrics.bad_records = batch.bad_records;
        metrics.input_bytes = batch.bytes;
        metrics.start_offset = batch.start_offset;
        metrics.end_offset = batch.end_offset;
        metrics.latest_offset = batch.latest_offset;
        metrics.metrics = batch.metrics;
        input.sources.push(metrics);
        input.commit_entries.extend(batch.commit);
        parts.push(rows);
    }
    input.rows = concat_batches(rules.schema, &parts)?;
    input.next_watermark = next_watermark;
    Ok(input)
}

/// The rows whose event time is after `watermark`: like Spark, a row at or before the
/// watermark is late (rows without an event time are kept).
fn drop_late_rows(rows: &RecordBatch, times: &[Option<i64>], watermark: i64) -> Result<RecordBatch> {
    let keep: BooleanArray = times.iter().map(|t| Some(t.is_none_or(|t| t > watermark))).collect();
    Ok(filter_record_batch(rows, &keep)?)
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
