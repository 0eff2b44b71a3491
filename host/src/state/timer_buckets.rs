//! The timer index packed by bucket: the timers of one (operator, expiry, key group)
//! listed in a few entries, instead of one entry per timer.
//!
//! A windowed processor registers a timer per window and fires it a batch or two later:
//! hundreds of thousands per batch, but at a few dozen expiries. One entry per timer
//! made each of them a write-buffer insert, a RocksDB write, a flush and a range drop,
//! and made the scan for due timers walk every one; a bucket makes that work per expiry
//! and key group, and its keys a few lists read in one piece each.
//!
//! A bucket's keys, ascending by (length, bytes), are cut into chunks where a key's
//! seeded hash says so (about [`CHUNK_KEYS`] keys each, at most four times that): a key
//! added or removed then changes the one chunk it falls in, however many keys the
//! bucket holds (a timer at midnight for each of millions of keys is many chunks).
//!
//! ```text
//! first chunk:  op u16 | expiry (sortable i64) | key group u16                   → keys
//! other chunks: op u16 | expiry | key group | first key len u32 | first key      → keys
//! keys:         ff ff ff ff | each key as a part (see shared_prefix)
//! ```
//!
//! A part stores a key by what it shares with the key before (a chunk's first key
//! shares nothing): keys in order differ in their last bytes, and a window job's
//! timers, one per key, took 20 bytes each stored whole. A bucket that holds a key in
//! chunks has its first chunk, keyed by the bucket alone: one point lookup says
//! whether it holds any.
//!
//! Earlier stores hold chunks whose keys are stored whole (each key's u32 length,
//! little-endian, then the key), or one entry per timer, with the other chunks' key and
//! an empty value; the decoding here reads all three, a chunk that changes is written
//! anew, and a restart packs single entries
//! ([`Timers::pack_index`](super::Timers::pack_index)). A transaction keeps its timer
//! changes per bucket ([`TimerBuckets`]) and rewrites each changed bucket's changed
//! chunks once, at its commit or when it writes ahead ([`rechunk`]).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::OnceLock;

use foldhash::fast::RandomState;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::layout::{from_sortable_i64, sortable_i64, split_timer_index_key};
use super::shared_prefix::{push_part, read_part};

/// The length of a bucket's key.
pub const BUCKET_KEY_LEN: usize = 12;

/// How many keys a chunk holds on average.
const CHUNK_KEYS: usize = 128;

/// How many keys a chunk holds at most.
const MAX_CHUNK_KEYS: usize = 4 * CHUNK_KEYS;

/// How a chunk's value whose keys are stored by what they share starts. A value of the
/// earlier layout cannot (no key is 4 GiB long), and an eddy that reads only that
/// layout refuses this one as cut short rather than misreading it.
const PREFIXED: [u8; 4] = [0xff; 4];

/// The seed of the hash that says where a bucket's chunks end, anew in each process. Keys picked so that none ends a chunk (filling chunks to the cap,
/// whose cuts move when a key is added before them) cannot be picked without the seed;
/// the cuts differ between processes, which costs a restarted query one rewrite of each
/// bucket it changes, and nothing in what is read.
fn process_seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64))
}

/// Whether a chunk ends after `key` under `seed`.
fn ends_chunk(key: &[u8], seed: u64) -> bool {
    xxh3_64_with_seed(key, seed).is_multiple_of(CHUNK_KEYS as u64)
}

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

/// The bucket of a timer-index entry (its first 12 bytes), if the key is long enough.
pub fn entry_bucket(raw_key: &[u8]) -> Option<&BucketKey> {
    raw_key.get(..BUCKET_KEY_LEN)?.try_into().ok()
}

/// Whether a timer-index entry is one timer of an earlier eddy's layout.
pub fn is_single(raw_key: &[u8], value: &[u8]) -> bool {
    raw_key.len() > BUCKET_KEY_LEN && value.is_empty()
}

/// Shows `visit` the timers one timer-index entry holds, as (expiry, key group, key):
/// a chunk's keys, or the one timer of an entry of the earlier layout; `None` when the
/// bytes follow neither (the timers before the fault were shown).
pub fn visit_entry_timers(raw_key: &[u8], value: &[u8], mut visit: impl FnMut(i64, u16, &[u8])) -> Option<()> {
    if is_single(raw_key, value) {
        let (expiry, key_group, key) = split_timer_index_key(raw_key)?;
        visit(expiry, key_group, key);
        return Some(());
    }
    let (expiry, key_group) = split_bucket_key(entry_bucket(raw_key)?);
    visit_bucket_keys(value, |key| visit(expiry, key_group, key))
}

/// The timers one timer-index entry holds (see [`visit_entry_timers`]).
pub fn entry_timers(raw_key: &[u8], value: &[u8]) -> Option<Vec<(i64, u16, Vec<u8>)>> {
    let mut timers = Vec::new();
    visit_entry_timers(raw_key, value, |expiry, key_group, key| timers.push((expiry, key_group, key.to_vec())))?;
    Some(timers)
}

/// Shows `visit` the keys a chunk's value lists, in order; `None` when it is cut short
/// or a key shares more than the one before has.
pub fn visit_bucket_keys(value: &[u8], mut visit: impl FnMut(&[u8])) -> Option<()> {
    if let Some(mut rest) = value.strip_prefix(&PREFIXED) {
        let mut key = Vec::new();
        while !rest.is_empty() {
            rest = read_part(rest, &mut key)?;
            visit(&key);
        }
        return Some(());
    }
    let mut rest = value;
    while !rest.is_empty() {
        let len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        visit(rest.get(4..4 + len)?);
        rest = &rest[4 + len..];
    }
    Some(())
}

/// The order of keys in a bucket (that of the earlier layout's entries).
fn key_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    (a.len(), a).cmp(&(b.len(), b))
}

/// An entry of the timer index: its key and value.
pub type Entry = (Vec<u8>, Vec<u8>);

/// A write of a timer-index entry (`None`: a deletion).
pub type EntryWrite = (Vec<u8>, Option<Vec<u8>>);

/// A transaction's changes of one bucket: each key it registered (true) or deleted.
pub type BucketChanges = HashMap<Box<[u8]>, bool, RandomState>;

/// A transaction's timer changes, by bucket.
#[derive(Debug, Default)]
pub struct TimerBuckets {
    buckets: HashMap<BucketKey, BucketChanges, RandomState>,
    /// How many (bucket, key) changes there are.
    changes: u64,
    /// The bytes of their keys.
    key_bytes: u64,
}

impl TimerBuckets {
    /// Records that `key`'s timer in `bucket` is registered (`true`) or deleted;
    /// returns whether the key had no change in the bucket before.
    pub fn set(&mut self, bucket: BucketKey, key: &[u8], registered: bool) -> bool {
        // A new bucket's table starts with room for as many keys as the others hold on
        // average (a window's timers fill buckets of dozens of keys each: a table grown
        // from empty rehashes five or six times).
        let average = self.changes as usize / self.buckets.len().max(1);
        let changes = self
            .buckets
            .entry(bucket)
            .or_insert_with(|| HashMap::with_capacity_and_hasher(average.clamp(1, 1024), RandomState::default()));
        if let Some(change) = changes.get_mut(key) {
            *change = registered;
            return false;
        }
        changes.insert(key.into(), registered);
        self.changes += 1;
        self.key_bytes += key.len() as u64;
        true
    }

    /// Takes `key`'s due timer in `bucket` as it fires: false when this transaction
    /// deleted it (the deletion stays); else its registration here, if any, is undone
    /// (one lookup of the bucket and the key, where `deleted` and `forget` take two).
    pub fn take_due(&mut self, bucket: &BucketKey, key: &[u8]) -> bool {
        let Some(changes) = self.buckets.get_mut(bucket) else { return true };
        match changes.get(key) {
            None => return true,
            Some(false) => return false,
            Some(true) => {}
        }
        changes.remove(key);
        self.changes -= 1;
        self.key_bytes -= key.len() as u64;
        if changes.is_empty() {
            self.buckets.remove(bucket);
        }
        true
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

/// The entry of a chunk of `bucket` holding `keys` (in order), keyed by the bucket
/// alone when it is the bucket's first.
fn chunk(bucket: &BucketKey, past_first: bool, keys: &[&[u8]]) -> Entry {
    let mut entry = bucket.to_vec();
    if let (true, Some(first)) = (past_first, keys.first()) {
        entry.extend_from_slice(&(first.len() as u32).to_be_bytes());
        entry.extend_from_slice(first);
    }
    let mut value = Vec::with_capacity(PREFIXED.len() + keys.iter().map(|key| 2 + key.len()).sum::<usize>());
    value.extend_from_slice(&PREFIXED);
    let mut last = Vec::new();
    for key in keys {
        push_part(&mut value, &mut last, key);
    }
    (entry, value)
}

/// A bucket's entries for `keys` (in order): each chunk's key and value.
pub fn chunks(bucket: &BucketKey, keys: &[&[u8]]) -> Vec<Entry> {
    chunks_seeded(bucket, keys, process_seed())
}

/// [`chunks`] cut under `seed`.
fn chunks_seeded(bucket: &BucketKey, keys: &[&[u8]], seed: u64) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut start = 0;
    for (at, key) in keys.iter().enumerate() {
        let ends = ends_chunk(key, seed) || at + 1 - start == MAX_CHUNK_KEYS || at + 1 == keys.len();
        if !ends {
            continue;
        }
        let part = &keys[start..=at];
        let (entry, value) = chunk(bucket, start > 0, part);
        out.push((entry, value));
        start = at + 1;
    }
    out
}

/// The writes that make a bucket whose entries are `committed` (key and value, in key
/// order) hold its keys after `changes`: a put of each chunk that differs, a deletion
/// of each entry that is no chunk any more. `None` when an entry is corrupt.
pub fn rechunk(bucket: &BucketKey, committed: &[Entry], changes: &BucketChanges) -> Option<Vec<EntryWrite>> {
    rechunk_seeded(bucket, committed, changes, process_seed())
}

/// [`rechunk`] cut under `seed`.
fn rechunk_seeded(
    bucket: &BucketKey,
    committed: &[Entry],
    changes: &BucketChanges,
    seed: u64,
) -> Option<Vec<EntryWrite>> {
    // The committed keys, one after another in `flat`; each ends at its `ends` entry.
    let (mut flat, mut ends) = (Vec::new(), Vec::new());
    for (raw, value) in committed {
        visit_entry_timers(raw, value, |_, _, key| {
            flat.extend_from_slice(key);
            ends.push(flat.len());
        })?;
    }
    let starts = std::iter::once(0).chain(ends.iter().copied());
    let keys: Vec<&[u8]> = starts.zip(&ends).map(|(start, &end)| &flat[start..end]).collect();
    let merged = merged_keys(&keys, changes);
    let new = chunks_seeded(bucket, &merged, seed);
    let mut writes = Vec::new();
    let (mut old, mut new) = (committed.iter().peekable(), new.into_iter().peekable());
    loop {
        match (old.peek(), new.peek()) {
            (Some((old_key, old_value)), Some((new_key, new_value))) if old_key == new_key => {
                if old_value != new_value {
                    writes.push((new_key.clone(), Some(new_value.clone())));
                }
                old.next();
                new.next();
            }
            (Some((old_key, _)), Some((new_key, _))) if old_key < new_key => {
                writes.push((old_key.clone(), None));
                old.next();
            }
            (Some(_), Some(_)) | (None, Some(_)) => {
                let (key, value) = new.next()?;
                writes.push((key, Some(value)));
            }
            (Some((old_key, _)), None) => {
                writes.push((old_key.clone(), None));
                old.next();
            }
            (None, None) => return Some(writes),
        }
    }
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

    /// A fixed seed: where the 5 000 keys' chunks end, and so how many writes a change
    /// makes (more when it moves a cut forced by the cap), is the same every run.
    const SEED: u64 = 0;

    fn keys(count: usize) -> Vec<Vec<u8>> {
        (0..count).map(|n| format!("user-{n:06}").into_bytes()).collect()
    }

    #[test]
    fn a_merge_keeps_the_committed_keys_not_deleted_and_adds_the_registered_in_order() {
        let committed: Vec<&[u8]> = vec![b"b", b"d", b"aa", b"cc"];
        let changes = changes(&[("c", true), ("d", false), ("b", true), ("zzz", true)]);
        let merged = merged_keys(&committed, &changes);
        assert_eq!(merged, vec![&b"b"[..], b"c", b"aa", b"cc", b"zzz"]);
        assert!(merged_keys(&[b"a"], &self::changes(&[("a", false)])).is_empty());
    }

    #[test]
    fn a_bucket_is_cut_into_chunks_that_one_change_touches_one_of() {
        let bucket = bucket_key(1, 60, 2);
        let all = keys(5000);
        let refs: Vec<&[u8]> = all.iter().map(Vec::as_slice).collect();
        let stored = chunks_seeded(&bucket, &refs, SEED);
        assert!(stored.len() > 5000 / MAX_CHUNK_KEYS && stored.len() < 5000 / 16, "{} chunks", stored.len());
        assert_eq!(stored[0].0, bucket.to_vec(), "the first chunk is the bucket's key");
        let read: Vec<Vec<u8>> = stored
            .iter()
            .flat_map(|(raw, value)| entry_timers(raw, value).expect("a chunk"))
            .map(|(expiry, key_group, key)| {
                assert_eq!((expiry, key_group), (60, 2));
                key
            })
            .collect();
        assert_eq!(read, all, "the chunks hold every key, in order");
        // Stored by what each shares with the key before: `user-00NNNN` in order shares
        // 9 or 10 bytes, and takes 3 or 4 (two varints and the rest) instead of 15.
        let bytes: usize = stored.iter().map(|(_, value)| value.len() - PREFIXED.len()).sum();
        assert!(bytes < 5000 * 5, "{bytes} bytes for 5000 keys");
        assert!(stored.windows(2).all(|pair| pair[0].0 < pair[1].0), "chunk keys ascend");
        // A key added, one removed, one registered again: one or two chunks change.
        for change in [("user-002500x", true), ("user-001234", false), ("user-000007", true)] {
            let writes = rechunk_seeded(&bucket, &stored, &changes(&[change]), SEED).expect("well-formed");
            assert!(!writes.is_empty() || change.0 == "user-000007", "{change:?}");
            assert!(writes.len() <= 2, "{change:?}: {} writes", writes.len());
        }
        // Every key removed: every entry goes.
        let gone: BucketChanges = all.iter().map(|key| (key.clone().into_boxed_slice(), false)).collect();
        let writes = rechunk_seeded(&bucket, &stored, &gone, SEED).expect("well-formed");
        assert_eq!(writes.len(), stored.len());
        assert!(writes.iter().all(|(_, value)| value.is_none()));
    }

    /// What another process cut (its seed differs: here, a cut every 100 keys) is read
    /// whole and cut again: the keys stay, and each entry is rewritten or deleted.
    #[test]
    fn chunks_cut_by_another_process_are_read_and_cut_again() {
        let bucket = bucket_key(1, 60, 2);
        let all = keys(1000);
        let refs: Vec<&[u8]> = all.iter().map(Vec::as_slice).collect();
        let other: Vec<Entry> = refs.chunks(100).enumerate().map(|(n, part)| chunk(&bucket, n > 0, part)).collect();
        let writes = rechunk(&bucket, &other, &changes(&[])).expect("well-formed");
        let mut stored: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = other.into_iter().collect();
        for (key, value) in writes {
            match value {
                Some(value) => stored.insert(key, value),
                None => stored.remove(&key),
            };
        }
        assert_eq!(stored.into_iter().collect::<Vec<_>>(), chunks(&bucket, &refs));
    }

    #[test]
    fn every_layout_decodes_to_its_timers() {
        let bucket = bucket_key(7, -5, 3);
        assert_eq!(split_bucket_key(&bucket), (-5, 3));
        let expected = vec![(-5, 3, b"k1".to_vec()), (-5, 3, b"key2".to_vec()), (-5, 3, b"key3".to_vec())];
        let whole = value(&["k1", "key2", "key3"]);
        assert_eq!(entry_timers(&bucket, &whole), Some(expected.clone()), "keys stored whole");
        let (raw, prefixed) = chunk(&bucket, false, &[b"k1", b"key2", b"key3"]);
        assert_eq!(raw, bucket.to_vec());
        assert_eq!(prefixed, [&PREFIXED[..], &[0, 2], b"k1", &[1, 3], b"ey2", &[3, 1], b"3"].concat());
        assert_eq!(entry_timers(&bucket, &prefixed), Some(expected), "keys stored by what they share");
        let single = super::super::layout::timer_index_key(7, 9, 2, b"k");
        assert_eq!(entry_timers(&single, &[]), Some(vec![(9, 2, b"k".to_vec())]));
        assert!(is_single(&single, &[]) && !is_single(&bucket, &[]));
        assert_eq!(entry_timers(&[0; 5], &[]), None);
        assert_eq!(entry_timers(&bucket, &[1, 0, 0]), None, "a value cut short");
        assert_eq!(entry_timers(&bucket, &prefixed[..prefixed.len() - 1]), None, "a key cut short");
        let too_shared = [&PREFIXED[..], &[0, 1], b"k", &[2, 1], b"x"].concat();
        assert_eq!(entry_timers(&bucket, &too_shared), None, "a key sharing more than the one before has");
        assert_eq!(entry_timers(&bucket, &PREFIXED), Some(Vec::new()), "no key");
    }

    #[test]
    fn changes_count_once_per_bucket_and_key_and_forget_undoes_them() {
        let mut buckets = TimerBuckets::default();
        let (a, b) = (bucket_key(1, 10, 0), bucket_key(1, 20, 0));
        assert!(buckets.set(a, b"k", true));
        assert!(!buckets.set(a, b"k", false));
        assert!(buckets.set(b, b"k", true));
        assert_eq!(buckets.changes(), 2);
        assert!(!buckets.take_due(&a, b"k"), "a deleted timer does not fire, and its deletion stays");
        assert_eq!(buckets.changes(), 2);
        assert!(buckets.take_due(&b, b"k") && buckets.take_due(&b, b"j"), "a registered or unchanged one fires");
        assert_eq!(buckets.changes(), 1, "the registration it fires with is undone");
        assert!(buckets.set(b, b"k", true));
        assert!(buckets.forget(&a, b"k") && !buckets.forget(&a, b"k"));
        assert_eq!(buckets.changes(), 1);
        assert_eq!(buckets.below(Some(&b[..])).len(), 0);
        assert_eq!(buckets.take(|_| true).len(), 1);
        assert_eq!(buckets.changes(), 0);
    }
}
