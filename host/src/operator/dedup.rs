//! The deduplication stage: Spark's `dropDuplicates` (with the event-time column among
//! the key: a key is remembered until the watermark passes its event time),
//! `dropDuplicatesWithinWatermark` (the key alone, remembered for the watermark delay
//! after its first occurrence's event time) and every key forever (`state =
//! "forever"`: no watermark, or a key without the event-time column). The first
//! occurrence of a key is output; later ones are dropped. With a watermark, rows at or
//! before the previous batch's watermark are dropped as late whatever the retention,
//! as Spark's `StreamingDeduplicateExec` filters its input by the event-time column of
//! its child's output, not of its key.
//!
//! State per key: the value `seen` (CBOR: the event time at which it may be
//! forgotten, or null when kept forever) and an event-time timer at that time, which
//! evicts it once the watermark reaches it.

use anyhow::{Context, Result, bail};
use arrow::array::{Array, BooleanArray, RecordBatch, TimestampMicrosecondArray, UInt32Array};
use arrow::datatypes::{DataType, SchemaRef};

use super::grouping::group_by_key;
use super::stage::{BatchTime, Stage, StageOutput, StageStats};
use crate::pipeline::{DedupRetention, DedupSpec, StageSpec};
use crate::state::{KeyScope, OperatorStateSchema, StateKind, StateStore, Timers, VariableDecl};

/// A deduplication stage.
pub struct DedupStage {
    name: String,
    operator_id: u16,
    key_groups: u16,
    key_columns: Vec<String>,
    key_indices: Vec<usize>,
    /// The event-time column's index: late rows are judged by it, and the retentions
    /// that forget a key read its time there.
    time_index: Option<usize>,
    retention: DedupRetention,
    schema: SchemaRef,
    seen: VariableDecl,
    /// The next batch drops the timers a store of an earlier eddy kept by key (the
    /// stage keeps its timers in the timer index only: it never lists them).
    converting_timers: bool,
}

impl DedupStage {
    /// The stage `spec` describes over rows of `input`.
    pub fn open(stage: &StageSpec, spec: &DedupSpec, input: &SchemaRef, key_groups: u16) -> Result<DedupStage> {
        let key_indices = spec
            .key
            .iter()
            .map(|column| {
                input.index_of(column).map_err(|_| {
                    anyhow::anyhow!(
                        "dedup key column '{column}' is not among the stage's input columns ({})",
                        column_names(input)
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for (index, column) in key_indices.iter().zip(&spec.key) {
            if crate::contract::rows::contract_type(input.field(*index).data_type()).is_none() {
                bail!("dedup key column '{column}' is {}, which cannot be a key", input.field(*index).data_type());
            }
        }
        let time_index = match (&spec.retention, &spec.event_time_column) {
            (_, None) => None,
            // Every key kept: late rows are still dropped when the input has the
            // event-time column (a stage before may have projected it away: then, as in
            // Spark, the watermark does not reach this stage).
            (DedupRetention::Forever, Some(column)) => {
                input.index_of(column).ok().map(|_| event_time_index(input, column)).transpose()?
            }
            (_, Some(column)) => Some(event_time_index(input, column)?),
        };
        Ok(DedupStage {
            name: stage.name.clone(),
            operator_id: stage.operator_id,
            key_groups,
            key_columns: spec.key.clone(),
            key_indices,
            time_index,
            retention: spec.retention,
            schema: input.clone(),
            seen: VariableDecl { name: "seen".into(), kind: StateKind::Value, ttl_us: None },
            converting_timers: false,
        })
    }

    /// What the stage keeps, for the checkpoint's schema record and `eddy state`.
    pub fn state_schema(&self) -> OperatorStateSchema {
        OperatorStateSchema {
            key_columns: self.key_columns.clone(),
            key_groups: self.key_groups,
            variables: vec![self.seen.clone()],
            module_sha256: format!("builtin:dedup:{:?}", self.retention),
            stage: self.name.clone(),
            window_aggregates: Vec::new(),
            timers_by_key: false,
            timers_packed: true,
        }
    }

    /// Drops the stored timers kept by key and packs the timer index with the next batch
    /// (the store was written by an earlier eddy, which kept them so).
    pub fn convert_timers_with_next_batch(&mut self) {
        self.converting_timers = true;
    }

    /// The scope of a key: its timers in the timer index only.
    fn scope(&self, key_group: u16, key: &[u8], time: BatchTime) -> KeyScope {
        KeyScope::new(self.operator_id, key_group, key, time.processing_time).with_timers_by_key(false)
    }

    /// When a key first seen at `event_time` may be forgotten (`None`: never).
    fn forget_at(&self, event_time: Option<i64>) -> Option<i64> {
        match self.retention {
            DedupRetention::Forever => None,
            DedupRetention::UntilWatermark => event_time,
            DedupRetention::WithinWatermark { delay_us } => event_time.map(|t| t.saturating_add(delay_us)),
        }
    }
}

/// The index of the event-time column (the watermark's) in the stage's input.
fn event_time_index(input: &SchemaRef, column: &str) -> Result<usize> {
    let index = input.index_of(column).map_err(|_| {
        anyhow::anyhow!(
            "deduplication with a watermark needs the event-time column '{column}' among its input columns ({})",
            column_names(input)
        )
    })?;
    if !matches!(input.field(index).data_type(), DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, _)) {
        bail!("the event-time column '{column}' is {}, not a TIMESTAMP", input.field(index).data_type());
    }
    Ok(index)
}

fn column_names(schema: &SchemaRef) -> String {
    schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ")
}

impl Stage for DedupStage {
    fn output_schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Late rows are dropped here: a row at or before the previous batch's watermark.
    fn accepts_late_rows(&self) -> bool {
        true
    }

    fn timers_due(&mut self, store: &StateStore, time: BatchTime) -> Result<bool> {
        let Some(watermark) = time.watermark else { return Ok(false) };
        Timers::any_due(&store.begin(), self.operator_id, watermark)
    }

    fn run(&mut self, store: &StateStore, input: &RecordBatch, time: BatchTime) -> Result<StageOutput> {
        let started = std::time::Instant::now();
        let mut txn = store.begin();
        if std::mem::take(&mut self.converting_timers) {
            Timers::keep_by_key(&mut txn, self.operator_id, 0..self.key_groups, false)?;
            Timers::pack_index(&mut txn, self.operator_id, 0..self.key_groups)?;
        }
        let mut stats = StageStats { name: self.name.clone(), ..StageStats::default() };
        let times = match self.time_index {
            Some(index) => Some(
                input
                    .column(index)
                    .as_any()
                    .downcast_ref::<TimestampMicrosecondArray>()
                    .context("the event-time column is not a TIMESTAMP")?
                    .clone(),
            ),
            None => None,
        };
        let input = &match (&times, time.late_rows_watermark) {
            (Some(times), Some(watermark)) => {
                let keep: BooleanArray =
                    (0..times.len()).map(|i| Some(times.is_null(i) || times.value(i) > watermark)).collect();
                let kept = arrow::compute::filter_record_batch(input, &keep)?;
                stats.rows_dropped_by_watermark = (input.num_rows() - kept.num_rows()) as u64;
                kept
            }
            _ => input.clone(),
        };
        let times = match self.time_index {
            Some(index) => input.column(index).as_any().downcast_ref::<TimestampMicrosecondArray>().cloned(),
            None => None,
        };
        let grouped = group_by_key(input, &self.key_indices, self.key_groups);
        let mut kept: Vec<u32> = Vec::new();
        for key in grouped.keys() {
            stats.keys_with_input += 1;
            let scope = self.scope(key.key_group, key.key, time);
            if scope.value_get(&txn, &self.seen)?.is_some() {
                continue;
            }
            let first = key.rows[0];
            kept.push(first);
            let event_time = times.as_ref().and_then(|t| t.is_valid(first as usize).then(|| t.value(first as usize)));
            let forget_at = self.forget_at(event_time);
            let mut value = Vec::new();
            ciborium::into_writer(&forget_at, &mut value)?;
            scope.value_update(&mut txn, &self.seen, &value);
            if let Some(at) = forget_at {
                scope.timer_register(&mut txn, at);
                stats.timers_registered += 1;
            }
            stats.state_rows_updated += 1;
        }
        if let Some(watermark) = time.watermark {
            let due = Timers::due(&txn, self.operator_id, watermark, |_| true)?;
            for due in due.iter() {
                let scope = self.scope(due.key_group, due.key, time);
                scope.timer_fire(&mut txn, due.expiry)?;
                scope.clear(&mut txn, &self.seen)?;
                stats.entries_evicted += 1;
                stats.state_rows_removed += 1;
            }
            // All due timers are done: their index entries go at the commit as one range.
            Timers::drop_fired_index(&mut txn, self.operator_id, watermark)?;
        }
        kept.sort_unstable();
        let rows = arrow::compute::take_record_batch(input, &UInt32Array::from(kept))?;
        stats.run_ms = started.elapsed().as_millis() as u64;
        Ok(StageOutput { txns: vec![txn], rows: vec![rows], stats })
    }

    fn close(&mut self) -> Result<()> {
        Ok(())
    }
}
