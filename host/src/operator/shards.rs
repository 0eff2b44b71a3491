//! A user's processor as a stage (Spark's `transformWithState`), run in parallel: the
//! key groups are split into contiguous ranges, one per shard; each shard has its own
//! long-lived processor instance and its own state transaction, and the shards of a
//! batch run on their own threads.
//!
//! A batch's output does not depend on how many shards run it (a batch re-run after a
//! crash with another `parallelism` writes the same records in the same order): the
//! rows `handle-input-rows` returned, key by key in (key group, key) order, then the
//! rows of the fired timers, in the same order. Each shard's rows of each kind already
//! are in that order and the shards own consecutive key-group ranges, so the shards'
//! parts are put one after the other, input rows first.

use std::ops::Range;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use super::grouping::{group_by_key, key_group_ranges, keys_of_ranges, on_threads};
use super::stage::{BatchTime, Stage, StageOutput, StageStats};
use super::top_keys::TopKeysCollector;
use super::wasm_operator::{OperatorOptions, WasmOperator};
use crate::contract::TimeMode;
use crate::state::{Cf, StateStore, StateTxn, Timers, VariableDecl};
use crate::wasm::Module;

/// How progress names a processor stage, like Spark.
const STAGE_NAME: &str = "transformWithState";

/// A processor running as several shards over disjoint key-group ranges.
pub struct ShardedOperator {
    shards: Vec<WasmOperator>,
    ranges: Vec<Range<u16>>,
    key_groups: u16,
    operator_id: u16,
    /// Rows for `handle-initial-state`, applied in the query's first batch.
    initial_state: Option<RecordBatch>,
}

impl ShardedOperator {
    /// Opens `parallelism` instances of `module`, each owning a range of key groups.
    pub fn open(
        module: &Module,
        input_schema: &SchemaRef,
        options: OperatorOptions,
        parallelism: usize,
    ) -> Result<Self> {
        let ranges = key_group_ranges(options.key_groups, parallelism);
        let mut shards = Vec::with_capacity(ranges.len());
        for range in &ranges {
            let shard_options = OperatorOptions { key_group_range: range.clone(), ..options.clone() };
            shards.push(WasmOperator::open(module, input_schema, shard_options)?);
        }
        Ok(Self {
            shards,
            ranges,
            key_groups: options.key_groups,
            operator_id: options.operator_id,
            initial_state: None,
        })
    }

    /// Hands `rows` to `handle-initial-state` in the next batch (the query's first).
    pub fn start_from(&mut self, rows: RecordBatch) {
        self.initial_state = Some(rows);
    }

    fn first(&self) -> &WasmOperator {
        &self.shards[0]
    }

    /// The state variables the processor declared.
    pub fn state_variables(&self) -> Vec<VariableDecl> {
        self.first().state_variables()
    }

    /// The state variables the processor deletes (Spark's `deleteIfExists`).
    pub fn deleted_state(&self) -> Vec<String> {
        self.first().deleted_state()
    }

    /// Deletes the data of the stored variables `names` with the next batch.
    pub fn delete_state_with_next_batch(&mut self, names: Vec<String>) {
        if !names.is_empty() {
            let quoted: Vec<String> = names.iter().map(|name| format!("'{name}'")).collect();
            crate::log::info(&format!(
                "operator {}: the next batch deletes the state of {} (deleted in init, no longer declared)",
                self.operator_id,
                quoted.join(", ")
            ));
        }
        self.shards.iter_mut().for_each(|shard| shard.delete_state_with_next_batch(names.clone()));
    }

    /// Whether the keys' timers are kept by key as well as in the timer index.
    pub fn timers_by_key(&self) -> bool {
        self.first().timers_by_key()
    }

    /// Converts the stored timers to how this module keeps them, with the next batch.
    pub fn convert_timers_with_next_batch(&mut self) {
        let how = if self.timers_by_key() { "by key and in the timer index" } else { "in the timer index only" };
        let how = format!("{how}, the index packed by expiry and key group");
        crate::log::info(&format!("operator {}: the next batch keeps the stored timers {how}", self.operator_id));
        self.shards.iter_mut().for_each(WasmOperator::convert_timers_with_next_batch);
    }

    /// The processor's time mode.
    pub fn time_mode(&self) -> TimeMode {
        self.first().time_mode()
    }

    /// How many shards run.
    pub fn parallelism(&self) -> usize {
        self.shards.len()
    }

    /// Applies the initial state in every shard's transaction.
    fn apply_initial_state(
        &mut self,
        txns: Vec<StateTxn>,
        rows: &RecordBatch,
        time: BatchTime,
    ) -> Result<Vec<StateTxn>> {
        self.shards.iter_mut().zip(txns).map(|(shard, txn)| shard.apply_initial_state(txn, rows, time)).collect()
    }

    /// Runs one batch on every shard in parallel, each in its own transaction.
    fn run_shards(
        &mut self,
        store: &StateStore,
        txns: Vec<StateTxn>,
        input: &RecordBatch,
        time: BatchTime,
    ) -> Result<StageOutput> {
        let grouped = group_by_key(input, self.first().key_indices(), self.key_groups);
        let keys = grouped.keys();
        // Keys come in key-group order and each shard owns a run of key groups: a slice each.
        let per_shard = keys_of_ranges(&keys, &self.ranges);
        let parts = self.shards.iter_mut().zip(txns).zip(per_shard);
        let results = on_threads(parts, "a shard's thread", |((operator, txn), groups)| {
            let mut shard_output = operator.run_grouped(store, txn, input, groups, time)?;
            shard_output.txn.pack_timers_for_commit()?;
            Ok(shard_output)
        });
        let stats = StageStats { name: STAGE_NAME.to_string(), ..StageStats::default() };
        let mut output = StageOutput { txns: Vec::new(), rows: Vec::new(), stats };
        let mut top_keys = TopKeysCollector::default();
        let mut timer_rows = Vec::new();
        for result in results {
            let shard_output = result?;
            let calls = shard_output.calls;
            let handlers = &mut output.stats.handlers;
            handlers.entry("handle-input-rows".into()).or_default().add(calls.input_rows);
            handlers.entry("handle-expired-timers".into()).or_default().add(calls.expired_timers);
            output.stats.timers_registered += calls.timers_registered;
            output.stats.guest_memory_peak_bytes = output.stats.guest_memory_peak_bytes.max(calls.memory_peak_bytes);
            top_keys.merge(calls.top_keys);
            let (written, deleted) = shard_output.txn.change_counts(Cf::State);
            output.stats.state_rows_updated += written;
            output.stats.state_rows_removed += deleted;
            output.stats.keys_with_input += shard_output.keys_with_input as u64;
            output.stats.timers_fired += shard_output.timers_fired as u64;
            output.stats.entries_evicted += shard_output.entries_evicted;
            output.txns.push(shard_output.txn);
            let (input_rows, timers) = split_rows(shard_output.rows, shard_output.input_handler_rows);
            output.rows.extend(input_rows);
            timer_rows.extend(timers);
        }
        output.rows.extend(timer_rows);
        output.stats.top_keys = top_keys.finish();
        Ok(output)
    }
}

/// `rows` cut after their first `first` rows.
fn split_rows(rows: Vec<RecordBatch>, first: usize) -> (Vec<RecordBatch>, Vec<RecordBatch>) {
    let (mut head, mut tail) = (Vec::new(), Vec::new());
    let mut left = first;
    for batch in rows {
        let taken = left.min(batch.num_rows());
        left -= taken;
        if taken > 0 {
            head.push(batch.slice(0, taken));
        }
        if taken < batch.num_rows() {
            tail.push(batch.slice(taken, batch.num_rows() - taken));
        }
    }
    (head, tail)
}

impl Stage for ShardedOperator {
    fn output_schema(&self) -> &SchemaRef {
        self.first().output_schema()
    }

    fn accepts_late_rows(&self) -> bool {
        self.first().accepts_late_rows()
    }

    fn timers_due(&mut self, store: &StateStore, time: BatchTime) -> Result<bool> {
        let Some(deadline) = self.first().timer_deadline(time) else { return Ok(false) };
        Timers::any_due(&store.begin(), self.operator_id, deadline)
    }

    fn run(&mut self, store: &StateStore, input: &RecordBatch, time: BatchTime) -> Result<StageOutput> {
        let started = std::time::Instant::now();
        let mut txns = self.shards.iter().map(|_| store.begin()).collect();
        if let Some(initial) = self.initial_state.take() {
            txns = self.apply_initial_state(txns, &initial, time).context("applying the initial state failed")?;
        }
        let mut output = self.run_shards(store, txns, input, time)?;
        output.stats.run_ms = started.elapsed().as_millis() as u64;
        Ok(output)
    }

    fn close(&mut self) -> Result<()> {
        self.shards.iter_mut().try_for_each(WasmOperator::close)
    }
}
