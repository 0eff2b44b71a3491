//! The order of the window stage's output rows: by window, then group key. Each
//! shard sorts its closed windows into it; the shards' rows are merged in it.

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use super::group_key::GroupKey;
use super::running::WindowState;
use crate::util::prefetch;

/// The place of a window stage's output row: by window (start, end), then group key
/// (encoded).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OutputOrder {
    start: i64,
    end: i64,
    key: GroupKey,
}

impl OutputOrder {
    /// The place of `window` of the group `key`.
    pub fn new(key: GroupKey, window: &WindowState) -> Self {
        OutputOrder { start: window.start, end: window.end, key }
    }

    /// The group key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }
}

/// One batch of the shards' output rows, each shard's in [`OutputOrder`], merged in
/// that order.
pub fn merge_in_order(schema: &SchemaRef, mut shards: Vec<(RecordBatch, Vec<OutputOrder>)>) -> Result<RecordBatch> {
    shards.retain(|(rows, _)| rows.num_rows() > 0);
    if shards.len() <= 1 {
        return Ok(shards.pop().map_or_else(|| RecordBatch::new_empty(schema.clone()), |(rows, _)| rows));
    }
    let total = shards.iter().map(|(rows, _)| rows.num_rows()).sum();
    let mut next = vec![0usize; shards.len()];
    let mut picks: Vec<(usize, usize)> = Vec::with_capacity(total);
    for _ in 0..total {
        let shard = (0..shards.len())
            .filter(|&s| next[s] < shards[s].1.len())
            .min_by(|&a, &b| shards[a].1[next[a]].cmp(&shards[b].1[next[b]]))
            .context("the shards' output ran out early")?;
        picks.push((shard, next[shard]));
        next[shard] += 1;
    }
    let batches: Vec<&RecordBatch> = shards.iter().map(|(rows, _)| rows).collect();
    Ok(arrow::compute::interleave_record_batch(&batches, &picks)?)
}

/// `windows` in [`OutputOrder`]. What is sorted is a small record of integers per
/// window (its start and end, its key's first 16 bytes big-endian, its index), whole
/// keys compared only where those tie; the windows then move once into that order.
/// (Sorting the windows themselves moved ~90-byte elements and compared keys with
/// `memcmp`: 6 % of the built-in window job's CPU.)
pub fn in_output_order(windows: Vec<(GroupKey, WindowState)>) -> Vec<(OutputOrder, WindowState)> {
    let mut sort_keys: Vec<(i64, i64, u128, u32)> = windows
        .iter()
        .enumerate()
        .map(|(at, (key, window))| (window.start, window.end, key_prefix(key), at as u32))
        .collect();
    sort_keys.sort_unstable_by(|a, b| {
        (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)).then_with(|| windows[a.3 as usize].0.cmp(&windows[b.3 as usize].0))
    });
    let mut slots: Vec<Option<(GroupKey, WindowState)>> = windows.into_iter().map(Some).collect();
    let mut placed = Vec::with_capacity(slots.len());
    for (at, &(.., index)) in sort_keys.iter().enumerate() {
        if let Some(&(.., ahead)) = sort_keys.get(at + PLACE_AHEAD) {
            prefetch(&slots[ahead as usize]);
        }
        if let Some((key, window)) = slots[index as usize].take() {
            placed.push((OutputOrder::new(key, &window), window));
        }
    }
    placed
}

/// How many windows ahead [`in_output_order`] starts loading the one it will move.
const PLACE_AHEAD: usize = 8;

/// The first 16 bytes of `key` as a big-endian number, zero-padded: where two keys'
/// numbers differ, they order as the keys do (a shorter key padded with zeros is
/// below any key it begins).
fn key_prefix(key: &[u8]) -> u128 {
    let mut first = [0u8; 16];
    let n = key.len().min(16);
    first[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    #[test]
    fn shards_output_merges_by_window_then_key() -> Result<()> {
        let schema = Arc::new(Schema::new(vec![Field::new("row", DataType::Int64, false)]));
        // Each shard's rows in order; a row's value names its place in the merged order.
        let shard = |rows: &[(i64, i64, &str, i64)]| -> Result<(RecordBatch, Vec<OutputOrder>)> {
            let values = Int64Array::from(rows.iter().map(|r| r.3).collect::<Vec<_>>());
            let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(values)])?;
            let place = |(start, end, key, _): &(i64, i64, &str, i64)| {
                OutputOrder::new(GroupKey::new(key.as_bytes()), &WindowState::new(*start, *end, 0))
            };
            Ok((batch, rows.iter().map(place).collect()))
        };
        // Keys ordered by their bytes, also keys too long to be held inline (over 30
        // bytes) and a key before itself followed by a NUL.
        let first = shard(&[
            (0, 10, "a", 0),
            (0, 10, "c", 2),
            (10, 20, "a", 3),
            (20, 30, "b", 6),
            (30, 40, "the-first-16-bytes", 7),
            (30, 40, "the-first-16-bytes-b", 9),
            (30, 40, "the-first-16-bytes-d-and-more-than-30", 12),
        ])?;
        let second = shard(&[
            (0, 10, "b", 1),
            (10, 20, "b", 4),
            (10, 20, "c", 5),
            (30, 40, "the-first-16-bytes\0", 8),
            (30, 40, "the-first-16-bytes-c", 10),
            (30, 40, "the-first-16-bytes-c-and-more-than-30", 11),
        ])?;
        let empty = shard(&[])?;
        let merged = merge_in_order(&schema, vec![first, empty, second])?;
        let rows = merged.column(0).as_any().downcast_ref::<Int64Array>().context("row column")?;
        assert_eq!(rows.values().to_vec(), (0..13).collect::<Vec<i64>>());
        assert_eq!(merge_in_order(&schema, vec![shard(&[])?])?.num_rows(), 0);
        Ok(())
    }

    #[test]
    fn windows_are_placed_as_their_output_order_sorts_them() {
        // Keys sharing 16-byte prefixes, keys that begin others, zero bytes, long keys.
        let keys: Vec<Vec<u8>> = vec![
            b"user-000001".to_vec(),
            b"user-000001\0".to_vec(),
            b"user-00000".to_vec(),
            vec![0; 20],
            vec![0; 16],
            vec![0; 3],
            Vec::new(),
            b"a key longer than sixteen bytes, one".to_vec(),
            b"a key longer than sixteen bytes, two".to_vec(),
            b"a key longer than sixteen bytes".to_vec(),
            vec![255; 17],
        ];
        let mut windows = Vec::new();
        let mut expected = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            for (start, end) in [(10, 20), (0, 10), (0, 20), (-10, 0)] {
                // Keys in an order of their own, windows interleaved.
                let window = WindowState::new(start, end, 1 + i % 2);
                windows.push((GroupKey::new(key), window.clone()));
                expected.push(OutputOrder::new(GroupKey::new(key), &window));
            }
        }
        windows.reverse();
        expected.sort();
        let placed = in_output_order(windows);
        let order: Vec<&OutputOrder> = placed.iter().map(|(order, _)| order).collect();
        assert_eq!(order, expected.iter().collect::<Vec<_>>());
        for (order, window) in &placed {
            assert_eq!(*order, OutputOrder::new(GroupKey::new(order.key()), window), "each window kept with its key");
        }
    }
}
