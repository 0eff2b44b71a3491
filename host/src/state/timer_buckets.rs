//! The timer index packed by bucket: one entry per (operator, expiry, key group) whose
//! value lists the keys with a timer then, instead of one entry per timer.
//!
//! A windowed processor registers a timer per window and fires it a batch or two later:
//! hundreds of thousands per batch, but at a few dozen expiries. One entry per timer
//! made each of them a write-buffer insert, a RocksDB write, a flush and a range drop,
//! and the scan for due timers walk every one; a bucket makes that work per expiry and
//! key group, and the keys within it a list read in one piece.
//!
//! ```text
//! key:    op u16 | expiry (sortable i64) | key group u16          (12 bytes)
//! value:  keys, ascending by (length, bytes), each  key len u32 | key
//! ```
//!
//! Stores written before hold one entry per timer (`op | expiry | key group | key len
//! u32 | key`, no value); the decoding here reads both, and a restart packs them
//! ([`Timers::pack_index`](super::Timers::pack_index)). A transaction keeps its timer
//! changes per bucket ([`TimerBuckets`]) and makes each changed bucket's entry once,
//! at its commit or when it writes ahead ([`merge`]).

use std::collections::HashMap;

use xxhash_rust::xxh3::Xxh3DefaultBuilder;

use super::layout::{from_sortable_i64, sortable_i64, split_timer_index_key};

/// The length of a bucket's key.
pub const BUCKET_KEY_LEN: usize = 12;

/// A bucket's key: operator, expiry, key group.
pub type BucketKey = [u8; BUCKET_KEY_LEN];

/// The key of the bucket of `operator`'s timers at `expiry` in `key_group`.
pub fn bucket_key(operator: u16, expiry: i64, key_group: u16) -> BucketKey {
    let mut out = [0; BUCKET_KEY_LEN];
    out[..2].copy_from_slice(&operator.to_be_bytes());
    out[2..10].copy_from_slice(&sortable_i64(expiry));
    out[10..].copy_from_slice(&key_group.to_be_bytes());
    out
}

/// The (expiry, key group) of a bucket's key.
pub fn split_bucket_key(key: &BucketKey) -> (i64, u16) {
    let expiry = from_sortable_i64(&key[2..10]).unwrap_or_default();
    (expiry, u16::from_be_bytes([key[10], key[11]]))
}

/// The timers one timer-index entry holds, as (expiry, key group, key): a bucket's
/// keys, or the one timer of an entry of the earlier layout; `None` when the bytes
/// follow neither.
pub fn index_entry_timers<'a>(raw_key: &'a [u8], value: &'a [u8]) -> Option<Vec<(i64, u16, &'a [u8])>> {
    if let Ok(bucket) = <&BucketKey>::try_from(raw_key) {
        let (expiry, key_group) = split_bucket_key(bucket);
        return Some(bucket_keys(value)?.into_iter().map(|key| (expiry, key_group, key)).collect());
    }
    split_timer_index_key(raw_key).map(|timer| vec![timer])
}

/// The keys a bucket's value lists, in order; `None` when it is cut short.
pub fn bucket_keys(mut value: &[u8]) -> Option<Vec<&[u8]>> {
    let mut keys = Vec::new();
    while !value.is_empty() {
        let len = u32::from_le_bytes(value.get(..4)?.try_into().ok()?) as usize;
        keys.push(value.get(4..4 + len)?);
        value = &value[4 + len..];
    }
    Some(keys)
}

/// The order of keys in a bucket (that of the earlier layout's entries).
fn key_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    (a.len(), a).cmp(&(b.len(), b))
}

/// A transaction's changes of one bucket: each key it registered (true) or deleted.
pub type BucketChanges = HashMap<Box<[u8]>, bool, Xxh3DefaultBuilder>;

/// A transaction's timer changes, by bucket.
#[derive(Debug, Default)]
pub struct TimerBuckets {
    buckets: HashMap<BucketKey, BucketChanges, Xxh3DefaultBuilder>,
    /// How many (bucket, key) changes there are.
    changes: u64,
    /// The bytes of their keys.
    key_bytes: u64,
}

impl TimerBuckets {
    /// Records that `key`'s timer in `bucket` is registered (`true`) or deleted;
    /// returns whether the key had no change in the bucket before.
    pub fn set(&mut self, bucket: BucketKey, key: &[u8], registered: bool) -> bool {
        let changes = self.buckets.entry(bucket).or_default();
        if let Some(change) = changes.get_mut(key) {
            *change = registered;
            return false;
        }
        changes.insert(key.into(), registered);
        self.changes += 1;
        self.key_bytes += key.len() as u64;
        true
    }

    /// Whether this transaction deleted `key`'s timer in `bucket`.
    pub fn deleted(&self, bucket: &BucketKey, key: &[u8]) -> bool {
        self.buckets.get(bucket).and_then(|changes| changes.get(key)) == Some(&false)
    }

    /// Undoes this transaction's change of `key`'s timer in `bucket`, if any; returns
    /// whether there was one.
    pub fn forget(&mut self, bucket: &BucketKey, key: &[u8]) -> bool {
        let Some(changes) = self.buckets.get_mut(bucket) else { return false };
        if changes.remove(key).is_none() {
            return false;
        }
        self.changes -= 1;
        self.key_bytes -= key.len() as u64;
        if changes.is_empty() {
            self.buckets.remove(bucket);
        }
        true
    }

    /// How many (bucket, key) changes there are.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The bytes the changes count, each as `overhead` plus its bucket and key.
    pub fn bytes(&self, overhead: u64) -> u64 {
        self.changes * (overhead + BUCKET_KEY_LEN as u64) + self.key_bytes
    }

    /// The changed buckets with a key below `end` (every one with `None`), in key order.
    pub fn below(&self, end: Option<&[u8]>) -> Vec<(&BucketKey, &BucketChanges)> {
        let mut out: Vec<_> = self.buckets.iter().filter(|(key, _)| end.is_none_or(|end| &key[..] < end)).collect();
        out.sort_unstable_by(|a, b| a.0.cmp(b.0));
        out
    }

    /// Takes the changes of the buckets `take` says, leaving the others.
    pub fn take(&mut self, take: impl Fn(&BucketKey) -> bool) -> Vec<(BucketKey, BucketChanges)> {
        let keys: Vec<BucketKey> = self.buckets.keys().filter(|key| take(key)).copied().collect();
        let taken: Vec<_> =
            keys.into_iter().filter_map(|key| self.buckets.remove(&key).map(|changes| (key, changes))).collect();
        for (_, changes) in &taken {
            self.changes -= changes.len() as u64;
            self.key_bytes -= changes.keys().map(|key| key.len() as u64).sum::<u64>();
        }
        taken
    }
}

/// The keys of a bucket whose committed value is `committed` after `changes`, in
/// order: the committed ones it did not delete, and those it registered.
pub fn merged_keys<'a>(committed: &[&'a [u8]], changes: &'a BucketChanges) -> Vec<&'a [u8]> {
    let mut added: Vec<&[u8]> = changes.iter().filter(|(_, registered)| **registered).map(|(key, _)| &**key).collect();
    added.sort_unstable_by(|a, b| key_order(a, b));
    let mut out = Vec::with_capacity(committed.len() + added.len());
    let mut added = added.into_iter().peekable();
    for &key in committed {
        while let Some(new) = added.next_if(|new| key_order(new, key).is_lt()) {
            out.push(new);
        }
        if added.next_if(|new| *new == key).is_some() || !changes.contains_key(key) {
            out.push(key);
        }
    }
    out.extend(added);
    out
}

/// The value of a bucket whose committed value is `committed` (`None`: none) after
/// `changes`; `None` when it holds no key.
pub fn merge(committed: Option<&[u8]>, changes: &BucketChanges) -> Option<Option<Vec<u8>>> {
    let committed = match committed {
        Some(value) => bucket_keys(value)?,
        None => Vec::new(),
    };
    let keys = merged_keys(&committed, changes);
    if keys.is_empty() {
        return Some(None);
    }
    let mut value = Vec::with_capacity(keys.iter().map(|key| 4 + key.len()).sum());
    for key in keys {
        value.extend_from_slice(&(key.len() as u32).to_le_bytes());
        value.extend_from_slice(key);
    }
    Some(Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(entries: &[(&str, bool)]) -> BucketChanges {
        entries.iter().map(|(key, registered)| (key.as_bytes().into(), *registered)).collect()
    }

    fn value(keys: &[&str]) -> Vec<u8> {
        keys.iter().flat_map(|key| [&(key.len() as u32).to_le_bytes()[..], key.as_bytes()].concat()).collect()
    }

    #[test]
    fn a_merge_keeps_the_committed_keys_not_deleted_and_adds_the_registered_in_order() {
        let committed = value(&["b", "d", "aa", "cc"]);
        let merged = merge(Some(&committed), &changes(&[("c", true), ("d", false), ("b", true), ("zzz", true)]));
        assert_eq!(merged, Some(Some(value(&["b", "c", "aa", "cc", "zzz"]))));
        assert_eq!(merge(Some(&value(&["a"])), &changes(&[("a", false)])), Some(None));
        assert_eq!(merge(None, &changes(&[("a", false)])), Some(None));
        assert_eq!(merge(Some(&[1, 0, 0]), &changes(&[])), None, "a value cut short");
    }

    #[test]
    fn both_layouts_decode_to_their_timers() {
        let bucket = bucket_key(7, -5, 3);
        assert_eq!(split_bucket_key(&bucket), (-5, 3));
        let packed = value(&["k1", "key2"]);
        let timers = index_entry_timers(&bucket, &packed).expect("a bucket");
        assert_eq!(timers, vec![(-5, 3, &b"k1"[..]), (-5, 3, &b"key2"[..])]);
        let single = super::super::layout::timer_index_key(7, 9, 2, b"k");
        assert_eq!(index_entry_timers(&single, &[]), Some(vec![(9, 2, &b"k"[..])]));
        assert_eq!(index_entry_timers(&[0; 5], &[]), None);
    }

    #[test]
    fn changes_count_once_per_bucket_and_key_and_forget_undoes_them() {
        let mut buckets = TimerBuckets::default();
        let (a, b) = (bucket_key(1, 10, 0), bucket_key(1, 20, 0));
        assert!(buckets.set(a, b"k", true));
        assert!(!buckets.set(a, b"k", false));
        assert!(buckets.set(b, b"k", true));
        assert_eq!(buckets.changes(), 2);
        assert!(buckets.deleted(&a, b"k") && !buckets.deleted(&b, b"k"));
        assert!(buckets.forget(&a, b"k") && !buckets.forget(&a, b"k"));
        assert_eq!(buckets.changes(), 1);
        assert_eq!(buckets.below(Some(&b[..])).len(), 0);
        assert_eq!(buckets.take(|_| true).len(), 1);
        assert_eq!(buckets.changes(), 0);
    }
}
