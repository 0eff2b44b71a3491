//! Grouping a batch's rows by key, in (key group, key) order, and cutting the keys
//! into the runs of the key-group ranges that shards own.
//!
//! Built for batches of millions of rows over many keys: each row's key is encoded
//! once (into one arena per range of rows) and looked up in a table of key ids (the
//! distinct keys' bytes live in one arena, so lookups stay in cache); the keys are
//! sorted and copied in that order, and the rows placed by a counting sort into each
//! key's list, in input order. Row ranges are encoded, and key-group ranges grouped,
//! on the pool's threads.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;
use std::panic::AssertUnwindSafe;

use anyhow::{Result, anyhow};
use arrow::array::{ArrayRef, RecordBatch};
use rayon::prelude::*;

use crate::state::key;

/// One key's rows of a batch: its key group, its encoded key, and the indices of its
/// rows in input order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRows<'a> {
    /// The key group the key hashes into.
    pub key_group: u16,
    /// The encoded key.
    pub key: &'a [u8],
    /// Its rows' indices in the batch.
    pub rows: &'a [u32],
}

/// A batch's rows grouped by key: every key's bytes in one arena and every row index
/// in one array (no allocation per key).
pub struct Grouped {
    /// The keys' bytes, key after key in (key group, key) order.
    arena: Vec<u8>,
    /// The row indices, key after key.
    rows: Vec<u32>,
    /// Per key in (key group, key) order: its group, its bytes' end in `arena`, its
    /// rows' end in `rows` (each starts where the key before ends).
    order: Vec<(u16, usize, usize)>,
}

impl Grouped {
    /// Every key with its rows, in (key group, key) order.
    pub fn keys(&self) -> Vec<KeyRows<'_>> {
        let (mut key_start, mut rows_start) = (0, 0);
        self.order
            .iter()
            .map(|&(key_group, key_end, rows_end)| {
                let key =
                    KeyRows { key_group, key: &self.arena[key_start..key_end], rows: &self.rows[rows_start..rows_end] };
                (key_start, rows_start) = (key_end, rows_end);
                key
            })
            .collect()
    }
}

/// No further key with the same hash.
const END: u32 = u32::MAX;

/// Batches with fewer rows are grouped on the calling thread alone.
const PARALLEL_ROWS: usize = 16_384;

/// The rows of `input` grouped by the key in `key_indices`, ordered by key group then
/// encoded key. A large batch is grouped on the pool's threads: its rows' keys encoded
/// and hashed in row ranges, then each key-group range's rows grouped by a thread of
/// its own, the ranges' results put one after the other.
pub fn group_by_key(input: &RecordBatch, key_indices: &[usize], key_groups: u16) -> Grouped {
    let parts = if input.num_rows() < PARALLEL_ROWS { 1 } else { rayon::current_num_threads() };
    group_with_hash(input, key_indices, key_groups, parts, key::hash)
}

/// The distinct keys of a batch: their bytes (in one arena) and hashes.
#[derive(Default)]
struct Keys {
    arena: Vec<u8>,
    /// Per key id: where its bytes start in `arena` (they end where the next key's start).
    starts: Vec<usize>,
    hashes: Vec<u64>,
    /// Per key id: the next key id with the same hash (`END`: none).
    same_hash: Vec<u32>,
}

impl Keys {
    fn bytes(&self, id: u32) -> &[u8] {
        let id = id as usize;
        let end = self.starts.get(id + 1).copied().unwrap_or(self.arena.len());
        &self.arena[self.starts[id]..end]
    }

    fn add(&mut self, encoded: &[u8], hash: u64) -> u32 {
        let id = self.starts.len() as u32;
        self.starts.push(self.arena.len());
        self.arena.extend_from_slice(encoded);
        self.hashes.push(hash);
        self.same_hash.push(END);
        id
    }
}

/// The encoded keys of a range of rows, row after row.
struct EncodedRows {
    /// The first row's index in the batch.
    first_row: usize,
    arena: Vec<u8>,
    /// Per row: where its key ends in `arena` (it starts where the row before ends).
    ends: Vec<usize>,
    hashes: Vec<u64>,
    /// Per row: its key's key group.
    groups: Vec<u16>,
}

impl EncodedRows {
    /// The keys of `rows` encoded, hashed with `hash_of` and placed in key groups.
    fn encode(
        key_columns: &[ArrayRef],
        rows: Range<usize>,
        key_groups: u16,
        hash_of: &(impl Fn(&[u8]) -> u64 + Sync),
    ) -> Self {
        let mut encoded = EncodedRows {
            first_row: rows.start,
            arena: Vec::with_capacity(rows.len() * 16),
            ends: Vec::with_capacity(rows.len()),
            hashes: Vec::with_capacity(rows.len()),
            groups: Vec::with_capacity(rows.len()),
        };
        for row in rows {
            let start = encoded.arena.len();
            key::encode_row(key_columns, row, &mut encoded.arena);
            let hash = hash_of(&encoded.arena[start..]);
            encoded.ends.push(encoded.arena.len());
            encoded.hashes.push(hash);
            encoded.groups.push(key::group_of_hash(hash, key_groups));
        }
        encoded
    }

    /// The key of the `at`-th row of the range.
    fn key(&self, at: usize) -> &[u8] {
        let start = if at == 0 { 0 } else { self.ends[at - 1] };
        &self.arena[start..self.ends[at]]
    }
}

/// [`group_by_key`] in `parts` row ranges and key-group ranges (one: on the calling
/// thread), keys hashed by `hash_of`.
fn group_with_hash(
    input: &RecordBatch,
    key_indices: &[usize],
    key_groups: u16,
    parts: usize,
    hash_of: impl Fn(&[u8]) -> u64 + Sync,
) -> Grouped {
    let key_columns: Vec<ArrayRef> = key_indices.iter().map(|&i| input.column(i).clone()).collect();
    let rows = input.num_rows();
    if parts <= 1 {
        let encoded = [EncodedRows::encode(&key_columns, 0..rows, key_groups, &hash_of)];
        return group_range(&encoded, 0..key_groups.max(1), key_groups);
    }
    let row_ranges: Vec<Range<usize>> = (0..parts).map(|i| rows * i / parts..rows * (i + 1) / parts).collect();
    let encoded: Vec<EncodedRows> = row_ranges
        .into_par_iter()
        .with_max_len(1)
        .map(|range| EncodedRows::encode(&key_columns, range, key_groups, &hash_of))
        .collect();
    let ranges = key_group_ranges(key_groups.max(1), parts);
    let grouped: Vec<Grouped> =
        ranges.into_par_iter().with_max_len(1).map(|range| group_range(&encoded, range, key_groups)).collect();
    concat(grouped)
}

/// The rows of `encoded` whose key group is in `range`, grouped.
fn group_range(encoded: &[EncodedRows], range: Range<u16>, key_groups: u16) -> Grouped {
    let mut keys = Keys::default();
    let mut by_hash: HashMap<u64, u32, BuildHasherDefault<HashIsKey>> = HashMap::default();
    // The rows in range and their key ids.
    let mut rows_in_range: Vec<u32> = Vec::new();
    let mut key_of_row: Vec<u32> = Vec::new();
    for part in encoded {
        for (at, group) in part.groups.iter().enumerate() {
            if !range.contains(group) {
                continue;
            }
            let (encoded, hash) = (part.key(at), part.hashes[at]);
            let id = match by_hash.entry(hash) {
                Entry::Vacant(slot) => *slot.insert(keys.add(encoded, hash)),
                Entry::Occupied(slot) => {
                    let mut id = *slot.get();
                    loop {
                        if keys.bytes(id) == encoded {
                            break id;
                        }
                        let next = keys.same_hash[id as usize];
                        if next == END {
                            let added = keys.add(encoded, hash);
                            keys.same_hash[id as usize] = added;
                            break added;
                        }
                        id = next;
                    }
                }
            };
            rows_in_range.push((part.first_row + at) as u32);
            key_of_row.push(id);
        }
    }

    let groups: Vec<u16> = keys.hashes.iter().map(|hash| key::group_of_hash(*hash, key_groups)).collect();
    let order = key_order(&keys, &groups, key_groups);
    // The keys' bytes copied in that order: whoever goes through the keys in order
    // (decoding each, making its state keys) then reads them one after the other, not
    // scattered over the arena (a cache miss per key).
    let mut arena = Vec::with_capacity(keys.arena.len());
    let key_ends: Vec<usize> = order
        .iter()
        .map(|id| {
            arena.extend_from_slice(keys.bytes(*id));
            arena.len()
        })
        .collect();
    // Counting sort of the rows by key: each key's rows get a slice of `sorted`.
    let mut counts = vec![0u32; order.len()];
    for id in &key_of_row {
        counts[*id as usize] += 1;
    }
    let mut cursor = vec![0usize; order.len()];
    let mut next = 0usize;
    for id in &order {
        cursor[*id as usize] = next;
        next += counts[*id as usize] as usize;
    }
    let mut sorted = vec![0u32; rows_in_range.len()];
    for (row, id) in rows_in_range.iter().zip(&key_of_row) {
        let at = &mut cursor[*id as usize];
        sorted[*at] = *row;
        *at += 1;
    }
    // Each key's cursor now stands at the end of its rows.
    let order = order
        .into_iter()
        .zip(key_ends)
        .map(|(id, key_end)| (groups[id as usize], key_end, cursor[id as usize]))
        .collect();
    Grouped { arena, rows: sorted, order }
}

/// The groupings of consecutive key-group ranges as one.
fn concat(parts: Vec<Grouped>) -> Grouped {
    let mut parts = parts.into_iter();
    let mut all = parts.next().unwrap_or(Grouped { arena: Vec::new(), rows: Vec::new(), order: Vec::new() });
    for part in parts {
        let (arena_before, rows_before) = (all.arena.len(), all.rows.len());
        all.arena.extend_from_slice(&part.arena);
        all.rows.extend_from_slice(&part.rows);
        all.order.extend(
            part.order
                .into_iter()
                .map(|(group, key_end, rows_end)| (group, key_end + arena_before, rows_end + rows_before)),
        );
    }
    all
}

/// The key ids in (key group, key) order: placed by key group with a counting sort,
/// then each group's few keys sorted by their first bytes held inline (following each
/// id into the arena misses the cache at nearly every comparison), whole keys on a tie.
fn key_order(keys: &Keys, groups: &[u16], key_groups: u16) -> Vec<u32> {
    // Where each key group's keys start (`key_groups` is the bound `group_of_hash` keeps to).
    let mut starts = vec![0usize; usize::from(key_groups.max(1)) + 1];
    for group in groups {
        starts[usize::from(*group) + 1] += 1;
    }
    for group in 1..starts.len() {
        starts[group] += starts[group - 1];
    }
    let mut placed = vec![(0u128, 0u32); groups.len()];
    let mut cursor = starts.clone();
    for (id, group) in groups.iter().enumerate() {
        let at = &mut cursor[usize::from(*group)];
        placed[*at] = (inline_prefix(keys.bytes(id as u32)), id as u32);
        *at += 1;
    }
    for run in starts.windows(2) {
        placed[run[0]..run[1]]
            .sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| keys.bytes(a.1).cmp(keys.bytes(b.1))));
    }
    placed.into_iter().map(|(_, id)| id).collect()
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

/// One key-group range per core (the stages whose batch's keys are independent).
pub fn key_group_ranges_per_core(key_groups: u16) -> Vec<Range<u16>> {
    key_group_ranges(key_groups, std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Runs `work` on each of `parts` (a shard's share of a batch) in parallel, on the
/// threads of one pool kept for the process (a thread of its own per batch would
/// start, and at its end tear down, an allocator heap each time); returns the results
/// in order (a part whose work panicked: an error saying `what` panicked).
pub fn on_threads<P: Send, T: Send>(
    parts: impl IntoIterator<Item = P>,
    what: &str,
    work: impl Fn(P) -> Result<T> + Sync,
) -> Vec<Result<T>> {
    let parts: Vec<P> = parts.into_iter().collect();
    parts
        .into_par_iter()
        .with_max_len(1)
        .map(|part| {
            std::panic::catch_unwind(AssertUnwindSafe(|| work(part)))
                .unwrap_or_else(|_| Err(anyhow!("{what} panicked")))
        })
        .collect()
}

/// Each range's run of `keys`, which are in key-group order.
pub fn keys_of_ranges<'k, 'a>(keys: &'k [KeyRows<'a>], ranges: &[Range<u16>]) -> Vec<&'k [KeyRows<'a>]> {
    ranges
        .iter()
        .map(|range| {
            let start = keys.partition_point(|key| key.key_group < range.start);
            let end = keys.partition_point(|key| key.key_group < range.end);
            &keys[start..end]
        })
        .collect()
}

/// The first 16 bytes of `key`, zero-padded, as a number: ordered as the keys are,
/// except that keys alike in those bytes (or differing only in trailing zeros) tie.
pub fn inline_prefix(key: &[u8]) -> u128 {
    let mut prefix = [0u8; 16];
    let len = key.len().min(16);
    prefix[..len].copy_from_slice(&key[..len]);
    u128::from_be_bytes(prefix)
}

/// A hasher for keys that already are good hashes.
#[derive(Default)]
struct HashIsKey(u64);

impl Hasher for HashIsKey {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 << 8) | u64::from(*byte);
        }
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    /// Rows over `keys` keys (string + number, some nulls), in a scrambled order.
    fn batch(rows: usize, keys: usize) -> RecordBatch {
        let pick = |row: usize| (row * 7919 + row / 3) % keys;
        let names: StringArray = (0..rows).map(|r| (pick(r) % 5 != 0).then(|| format!("user-{}", pick(r)))).collect();
        let numbers: Int64Array = (0..rows).map(|r| Some((pick(r) % 3) as i64 - 1)).collect();
        let schema =
            Schema::new(vec![Field::new("name", DataType::Utf8, true), Field::new("n", DataType::Int64, false)]);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(names), Arc::new(numbers)]).expect("batch")
    }

    type Owned = Vec<(u16, Vec<u8>, Vec<u32>)>;

    fn owned(grouped: &Grouped) -> Owned {
        grouped.keys().iter().map(|k| (k.key_group, k.key.to_vec(), k.rows.to_vec())).collect()
    }

    /// The grouping by a plain ordered map, for comparison.
    fn reference(input: &RecordBatch, key_groups: u16) -> Owned {
        let columns = input.columns().to_vec();
        let mut map: BTreeMap<(u16, Vec<u8>), Vec<u32>> = BTreeMap::new();
        for row in 0..input.num_rows() {
            let mut encoded = Vec::new();
            key::encode_row(&columns, row, &mut encoded);
            let group = key::group_of_hash(key::hash(&encoded), key_groups);
            map.entry((group, encoded)).or_default().push(row as u32);
        }
        map.into_iter().map(|((group, key), rows)| (group, key, rows)).collect()
    }

    #[test]
    fn groups_like_an_ordered_map() {
        let input = batch(5_000, 321);
        let grouped = owned(&group_by_key(&input, &[0, 1], 16));
        // 256 named keys, and the 65 whose name is null fold into (null, -1 | 0 | 1).
        assert_eq!(grouped.len(), 256 + 3);
        assert_eq!(grouped, reference(&input, 16));
        // One key group (also when none is asked for).
        assert_eq!(owned(&group_by_key(&input, &[0, 1], 0)), reference(&input, 1));
    }

    #[test]
    fn groups_alike_in_any_number_of_parts() {
        let input = batch(5_000, 321);
        for parts in [1, 2, 3, 7] {
            for key_groups in [0, 1, 5, 16] {
                let grouped = owned(&group_with_hash(&input, &[0, 1], key_groups, parts, key::hash));
                assert_eq!(grouped, reference(&input, key_groups.max(1)), "{parts} parts, {key_groups} key groups");
            }
        }
        // Above the size grouped on several threads.
        let large = batch(PARALLEL_ROWS * 2 + 17, 3_000);
        assert_eq!(owned(&group_by_key(&large, &[0, 1], 128)), reference(&large, 128));
    }

    #[test]
    fn keys_whose_hashes_collide_stay_apart() {
        let input = batch(2_000, 50);
        // Every key hashes alike: they all share one chain.
        let grouped = owned(&group_with_hash(&input, &[0, 1], 8, 2, |encoded| key::hash(encoded) % 3));
        let expected = reference(&input, 8);
        assert_eq!(grouped.len(), expected.len());
        let rows = |groups: &Owned| -> BTreeMap<Vec<u8>, Vec<u32>> {
            groups.iter().map(|(_, key, rows)| (key.clone(), rows.clone())).collect()
        };
        assert_eq!(rows(&grouped), rows(&expected));
    }

    #[test]
    fn keys_alike_in_their_first_bytes_sort_by_the_rest() {
        // Long keys differing only past their first 16 encoded bytes, and keys one of
        // which is the other with a trailing NUL: in one key group, in byte order.
        let names = ["tenant-000000000000-b", "tenant-000000000000-a", "x\0", "x", "tenant-000000000000-a\0"];
        let schema = Schema::new(vec![Field::new("name", DataType::Utf8, false)]);
        let input =
            RecordBatch::try_new(Arc::new(schema), vec![Arc::new(StringArray::from(names.to_vec()))]).expect("batch");
        let grouped = owned(&group_by_key(&input, &[0], 1));
        assert_eq!(grouped, reference(&input, 1));
        let rows: Vec<u32> = grouped.iter().map(|(_, _, rows)| rows[0]).collect();
        // Encoded strings start with their length: the shorter first.
        assert_eq!(rows, [3, 2, 1, 0, 4], "x, x\\0, the tenants a and b, then a\\0");
    }

    #[test]
    fn ranges_cover_every_key_group_once() {
        assert_eq!(key_group_ranges(128, 2), vec![0..64, 64..128]);
        assert_eq!(key_group_ranges(10, 3), vec![0..3, 3..6, 6..10]);
        assert_eq!(key_group_ranges(2, 8), vec![0..1, 1..2]);
    }

    #[test]
    fn an_empty_batch_has_no_groups() {
        assert!(group_by_key(&batch(0, 1), &[0], 4).keys().is_empty());
    }

    #[test]
    fn parts_run_in_parallel_and_a_panic_is_an_error() {
        let results = on_threads(0..5, "a test part", |part: u32| {
            if part == 3 {
                panic!("part 3 fails");
            }
            Ok((part, std::thread::current().id()))
        });
        let messages: Vec<String> = results
            .iter()
            .map(|result| match result {
                Ok((part, _)) => part.to_string(),
                Err(error) => error.to_string(),
            })
            .collect();
        assert_eq!(messages, ["0", "1", "2", "a test part panicked", "4"]);
        // The work ran on the pool, not on the calling thread.
        let caller = std::thread::current().id();
        assert!(results.iter().flatten().all(|(_, thread)| *thread != caller));
    }
}
