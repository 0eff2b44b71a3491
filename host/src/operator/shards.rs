//! Parallelism: the key groups are split into contiguous ranges, one per shard; each
//! shard has its own long-lived processor instance and its own state transaction, and
//! the shards of a batch run on their own threads.

use std::ops::Range;

use anyhow::{Result, anyhow};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use super::grouping::{KeyRows, group_by_key};
use super::wasm_operator::{BatchTime, OperatorOptions, WasmOperator};
use crate::state::{StateStore, StateTxn, VariableDecl};
use crate::wasm::{Module, TimeMode};

/// What one batch of all shards produced.
pub struct ShardedOutput {
    /// One state transaction per shard, to be committed together.
    pub txns: Vec<StateTxn>,
    /// The processor's output rows, shard by shard (so in key-group order).
    pub rows: Vec<RecordBatch>,
    /// Keys that had input rows.
    pub keys_with_input: usize,
    /// Timers that fired.
    pub timers_fired: usize,
    /// Expired state entries evicted.
    pub entries_evicted: u64,
}

/// A processor running as several shards over disjoint key-group ranges.
pub struct ShardedOperator {
    shards: Vec<WasmOperator>,
    ranges: Vec<Range<u16>>,
    key_groups: u16,
}

/// Splits `0..key_groups` into `parts` contiguous, nearly equal ranges.
pub fn key_group_ranges(key_groups: u16, parts: usize) -> Vec<Range<u16>> {
    let parts = parts.clamp(1, usize::from(key_groups.max(1)));
    (0..parts)
        .map(|i| {
            let start = usize::from(key_groups) * i / parts;
            let end = usize::from(key_groups) * (i + 1) / parts;
            start as u16..end as u16
        })
        .collect()
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
        Ok(Self { shards, ranges, key_groups: options.key_groups })
    }

    fn first(&self) -> &WasmOperator {
        &self.shards[0]
    }

    /// The schema of the rows the processor returns.
    pub fn output_schema(&self) -> &SchemaRef {
        self.first().output_schema()
    }

    /// The state variables the processor declared.
    pub fn state_variables(&self) -> Vec<VariableDecl> {
        self.first().state_variables()
    }

    /// The processor's time mode.
    pub fn time_mode(&self) -> TimeMode {
        self.first().time_mode()
    }

    /// Whether the processor wants late rows.
    pub fn accepts_late_rows(&self) -> bool {
        self.first().accepts_late_rows()
    }

    /// How many shards run.
    pub fn parallelism(&self) -> usize {
        self.shards.len()
    }

    /// Starts one state transaction per shard.
    pub fn begin(&self, store: &StateStore) -> Vec<StateTxn> {
        self.shards.iter().map(|_| store.begin()).collect()
    }

    /// Applies the initial state in every shard's transaction.
    pub fn apply_initial_state(
        &mut self,
        txns: Vec<StateTxn>,
        rows: &RecordBatch,
        time: BatchTime,
    ) -> Result<Vec<StateTxn>> {
        self.shards.iter_mut().zip(txns).map(|(shard, txn)| shard.apply_initial_state(txn, rows, time)).collect()
    }

    /// Runs one batch on every shard in parallel.
    pub fn run_batch(&mut self, txns: Vec<StateTxn>, input: &RecordBatch, time: BatchTime) -> Result<ShardedOutput> {
        let grouped = group_by_key(input, self.first().key_indices(), self.key_groups);
        let keys = grouped.keys();
        // Keys come in key-group order and each shard owns a run of key groups: a slice each.
        let per_shard: Vec<&[KeyRows]> = self
            .ranges
            .iter()
            .map(|range| {
                let start = keys.partition_point(|key| key.key_group < range.start);
                let end = keys.partition_point(|key| key.key_group < range.end);
                &keys[start..end]
            })
            .collect();
        let results: Vec<Result<_>> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .shards
                .iter_mut()
                .zip(txns)
                .zip(per_shard)
                .map(|((operator, txn), groups)| scope.spawn(move || operator.run_grouped(txn, input, groups, time)))
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap_or_else(|_| Err(anyhow!("a shard's thread panicked"))))
                .collect()
        });
        let mut output = ShardedOutput {
            txns: Vec::new(),
            rows: Vec::new(),
            keys_with_input: 0,
            timers_fired: 0,
            entries_evicted: 0,
        };
        for result in results {
            let shard_output = result?;
            output.txns.push(shard_output.txn);
            output.rows.extend(shard_output.rows);
            output.keys_with_input += shard_output.keys_with_input;
            output.timers_fired += shard_output.timers_fired;
            output.entries_evicted += shard_output.entries_evicted;
        }
        Ok(output)
    }

    /// Closes every shard's processor.
    pub fn close(&mut self) -> Result<()> {
        self.shards.iter_mut().try_for_each(WasmOperator::close)
    }
}

#[cfg(test)]
mod tests {
    use super::key_group_ranges;

    #[test]
    fn ranges_cover_every_key_group_once() {
        assert_eq!(key_group_ranges(128, 2), vec![0..64, 64..128]);
        assert_eq!(key_group_ranges(10, 3), vec![0..3, 3..6, 6..10]);
        assert_eq!(key_group_ranges(2, 8), vec![0..1, 1..2]);
    }
}
