//! The aggregate stage: Spark's `groupBy(cols).agg(...)` without a window — a running
//! aggregate per group, in update mode (the groups a batch changed, after it) or
//! complete mode (every group, every batch).
//!
//! State per group key: the value `aggregates`, each aggregate's running state (CBOR,
//! only what its result reads). A batch aggregates its rows per group first, reads the
//! stored aggregates of its groups in one batched lookup, and writes the merged ones
//! back. Late rows are not dropped: no group is ever final (as in Spark, where a
//! watermark only evicts aggregation state when its column is a grouping key).

use std::collections::BTreeMap;
use std::ops::Range;

use anyhow::{Context, Result, bail};
use arrow::array::RecordBatch;
use arrow::datatypes::{Field, SchemaRef};

use super::running::{self, Column, Running, Values, WindowState};
use crate::contract::OutputMode;
use crate::operator::grouping::{
    KeyRows, group_by_key, inline_prefix, key_group_ranges_per_core, keys_of_ranges, on_threads,
};
use crate::operator::stage::{BatchTime, Stage, StageOutput, StageStats};
use crate::pipeline::{AggregateFn, AggregateSpec, StageSpec};
use crate::state::{Cf, OperatorStateSchema, StateKind, StateStore, StateTxn, VariableDecl, layout, value_get};

/// What one shard did in a batch: its transaction, and its groups with their new
/// aggregates.
type ShardRun = (StateTxn, Vec<(Vec<u8>, WindowState)>);

/// An aggregate stage.
pub struct AggregateStage {
    name: String,
    operator_id: u16,
    key_groups: u16,
    spec: AggregateSpec,
    group_indices: Vec<usize>,
    columns: Vec<Column>,
    functions: Vec<AggregateFn>,
    output_schema: SchemaRef,
    aggregates: VariableDecl,
    /// The key-group ranges of the shards a batch runs on in parallel.
    shards: Vec<Range<u16>>,
}

impl AggregateStage {
    /// The stage `spec` describes over rows of `input`.
    pub fn open(stage: &StageSpec, spec: &AggregateSpec, input: &SchemaRef, key_groups: u16) -> Result<AggregateStage> {
        let group_indices = running::resolve_groups(&spec.group_by, input)?;
        let columns = running::resolve(&spec.aggregates, input)?;
        let group_fields: Vec<Field> = group_indices.iter().map(|i| input.field(*i).clone()).collect();
        Ok(AggregateStage {
            name: stage.name.clone(),
            operator_id: stage.operator_id,
            key_groups,
            spec: spec.clone(),
            group_indices,
            functions: spec.aggregates.iter().map(|a| a.function).collect(),
            output_schema: running::output_schema(&group_fields, false, &columns),
            columns,
            aggregates: VariableDecl { name: "aggregates".into(), kind: StateKind::Value, ttl_us: None },
            // One shard per core: a batch's groups are independent.
            shards: key_group_ranges_per_core(key_groups),
        })
    }

    /// The stage with its batches split over `parts` shards instead of one per core
    /// (for the tests that its output does not depend on the layout).
    #[cfg(test)]
    pub(crate) fn with_shards(mut self, parts: usize) -> Self {
        self.shards = crate::operator::grouping::key_group_ranges(self.key_groups, parts);
        self
    }

    /// What the stage keeps, for the checkpoint's schema record and `eddy state`.
    pub fn state_schema(&self) -> OperatorStateSchema {
        OperatorStateSchema {
            key_columns: self.spec.group_by.clone(),
            key_groups: self.key_groups,
            variables: vec![self.aggregates.clone()],
            module_sha256: format!("builtin:aggregate:{:?}", self.spec.aggregates),
            stage: self.name.clone(),
            window_aggregates: Vec::new(),
            timers_by_key: true,
            timers_packed: true,
        }
    }

    /// Every group in state (complete mode), refused past `max-complete-rows`: the
    /// count is checked as the store is visited, so that at most one group more than
    /// the cap is ever read into memory.
    fn all_groups(&self, store: &StateStore, now: i64) -> Result<Vec<(Vec<u8>, WindowState)>> {
        let prefix = self.operator_id.to_be_bytes();
        let end = layout::prefix_end(&prefix);
        let max = self.spec.max_complete_rows;
        let mut all = Vec::new();
        store.begin().visit_range(Cf::State, &prefix, end.as_deref(), |raw_key, raw| {
            let (_, _, group, _, _) =
                layout::split_state_key(raw_key).context("a state key of the aggregate stage is corrupt")?;
            if let Some(payload) = value_get(Some(raw.to_vec()), now)? {
                all.push((group.to_vec(), WindowState::unbounded(decode(&payload)?)));
            }
            Ok(all.len() as u64 <= max)
        })?;
        if all.len() as u64 > max {
            bail!(
                "complete mode would output more than max-complete-rows ({max}) groups; raise it, or use update mode"
            );
        }
        Ok(all)
    }

    /// One shard's part of a batch (`keys`, a run of its key groups) in its own
    /// transaction: each group's stored aggregates merged with its rows' and written
    /// back; returns the transaction and the groups with their new aggregates.
    fn run_shard(&self, store: &StateStore, keys: &[KeyRows], values: &Values, now: i64) -> Result<ShardRun> {
        let mut txn = store.begin();
        // Each group's value, read ahead in one batched lookup (unless the store's
        // in-memory copy answers).
        let state_keys: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| {
                layout::variable_key(&layout::key_prefix(self.operator_id, k.key_group, k.key), &self.aggregates.name)
            })
            .collect();
        if txn.prefetches() {
            txn.prefetch_state(state_keys.clone())?;
        }
        let mut changed: Vec<(Vec<u8>, WindowState)> = Vec::with_capacity(keys.len());
        for (rows, state_key) in keys.iter().zip(state_keys) {
            let mut partial = vec![Running::default(); self.columns.len()];
            for &row in rows.rows {
                values.add_row(row as usize, &mut partial);
            }
            let mut merged = match value_get(txn.get(Cf::State, &state_key)?, now)? {
                Some(raw) => decode(&raw)?,
                None => vec![Running::default(); self.columns.len()],
            };
            for (stored, batch) in merged.iter_mut().zip(&partial) {
                stored.merge(batch);
            }
            let mut value = layout::NEVER.to_be_bytes().to_vec();
            ciborium::into_writer(&running::trimmed(&merged, &self.functions), &mut value)?;
            txn.blind_put(Cf::State, state_key, value);
            changed.push((rows.key.to_vec(), WindowState::unbounded(merged)));
        }
        Ok((txn, changed))
    }
}

fn decode(raw: &[u8]) -> Result<Vec<Running>> {
    ciborium::from_reader(raw).context("a group's aggregates in the store do not decode")
}

impl Stage for AggregateStage {
    fn output_schema(&self) -> &SchemaRef {
        &self.output_schema
    }

    /// No row is late for a running aggregate.
    fn accepts_late_rows(&self) -> bool {
        true
    }

    /// Spark's `StateStoreSaveExec`: a batch without rows runs for a watermark that moved
    /// in update mode (with nothing to output here), never in complete mode.
    fn runs_when_the_watermark_moves(&self) -> bool {
        self.spec.output_mode != OutputMode::Complete
    }

    fn timers_due(&mut self, _store: &StateStore, _time: BatchTime) -> Result<bool> {
        Ok(false)
    }

    fn run(&mut self, store: &StateStore, input: &RecordBatch, time: BatchTime) -> Result<StageOutput> {
        let started = std::time::Instant::now();
        let values = Values::of(input, &self.columns);
        let grouped = group_by_key(input, &self.group_indices, self.key_groups);
        let keys = grouped.keys();
        let now = time.processing_time;
        let ran = on_threads(keys_of_ranges(&keys, &self.shards), "an aggregate shard", |keys| {
            self.run_shard(store, keys, &values, now)
        });
        let mut txns = Vec::with_capacity(ran.len());
        let mut changed: Vec<(Vec<u8>, WindowState)> = Vec::with_capacity(keys.len());
        for shard in ran {
            let (txn, shard_changed) = shard?;
            txns.push(txn);
            changed.extend(shard_changed);
        }
        let mut stats = StageStats { name: self.name.clone(), ..StageStats::default() };
        stats.keys_with_input = keys.len() as u64;
        stats.state_rows_updated = keys.len() as u64;
        let output = match self.spec.output_mode {
            OutputMode::Complete => {
                // The store's groups with this batch's changes (not read back from `txn`).
                let mut all: BTreeMap<Vec<u8>, WindowState> =
                    self.all_groups(store, time.processing_time)?.into_iter().collect();
                all.extend(changed);
                if all.len() as u64 > self.spec.max_complete_rows {
                    bail!(
                        "complete mode would output {} groups, more than max-complete-rows ({}); raise it, or use update mode",
                        all.len(),
                        self.spec.max_complete_rows
                    );
                }
                all.into_iter().collect()
            }
            _ => changed,
        };
        // By group, in the keys' encoded order: sorted by their first 16 bytes held
        // inline, whole keys read only on a tie.
        let mut order: Vec<(u128, usize)> =
            output.iter().enumerate().map(|(index, (group, _))| (inline_prefix(group), index)).collect();
        order.sort_unstable_by(|(a_head, a), (b_head, b)| {
            a_head.cmp(b_head).then_with(|| output[*a].0.cmp(&output[*b].0))
        });
        let output: Vec<(&[u8], &WindowState)> =
            order.into_iter().map(|(_, index)| (&output[index].0[..], &output[index].1)).collect();
        let rows =
            running::output_rows(&self.output_schema, self.group_indices.len(), false, &self.functions, &output)?;
        stats.run_ms = started.elapsed().as_millis() as u64;
        Ok(StageOutput { txns, rows: vec![rows], stats })
    }

    fn close(&mut self) -> Result<()> {
        Ok(())
    }
}
