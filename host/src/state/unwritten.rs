//! State changes committed but not yet written to the `state` column family.
//!
//! While the store holds its state in memory ([`resident`](super::resident)), a batch
//! whose state changes all have change-log records commits only those records (with
//! its timers and metadata): its changes go to the in-memory copy, which remembers the
//! entries that differ from the column family. Every few batches, or when a commit
//! cannot defer, those entries are written to the family in one go; an entry put in
//! one batch and deleted in a later one (a window's, say) is then never written at
//! all. The change log is what makes each batch durable: the meta entry
//! [`UNWRITTEN_FROM`] names the first batch whose changes the family lacks, and opening
//! the store replays the change log from there ([`catch_up`]); `eddy state` reads
//! the family with that part of the change log on top ([`logged_since`]).

use std::borrow::Cow;
use std::collections::BTreeMap;

use anyhow::{Context, Result};
use rocksdb::{ColumnFamily, DB, Direction, IteratorMode, WriteBatch, WriteOptions};

use super::changelog;

/// The meta key of the first batch whose state changes the `state` family lacks
/// (absent: it lacks none).
pub const UNWRITTEN_FROM: &[u8] = b"state-unwritten-from";

/// How many batches at most the family lags behind the committed state.
pub const WRITE_EVERY_BATCHES: u64 = 16;

/// How large a write batch of replayed changes grows before it is written.
const REPLAY_BATCH_BYTES: usize = 32 << 20;

/// The batch `raw` (an [`UNWRITTEN_FROM`] value) names.
pub fn decode_batch(raw: &[u8]) -> Result<u64> {
    let bytes: [u8; 8] = raw.try_into().ok().context("corrupt state-unwritten-from entry in the state store")?;
    Ok(u64::from_be_bytes(bytes))
}

/// Calls `f` with every change the change log holds for batches `from` and later as
/// they were (or are to be) stored in the `state` family, in the order they were made.
pub fn for_each_logged_change(
    db: &DB,
    changelog_cf: &ColumnFamily,
    from: u64,
    mut f: impl FnMut(&[u8], Option<&[u8]>) -> Result<()>,
) -> Result<()> {
    let start = from.to_be_bytes();
    for item in db.iterator_cf(changelog_cf, IteratorMode::From(&start, Direction::Forward)) {
        let (raw_key, raw_value) = item.context("cannot read the state store's change log")?;
        let (_, changes) = changelog::decode_entry(&raw_key, &raw_value, changelog::View::Stored)?;
        for (key, value) in changes {
            f(&key, value.as_deref())?;
        }
    }
    Ok(())
}

/// The state changes of batches `from` and later, the last of each key (`None`:
/// deleted), for a reader to see on top of the `state` family.
pub fn logged_since(db: &DB, changelog_cf: &ColumnFamily, from: u64) -> Result<BTreeMap<Vec<u8>, Option<Vec<u8>>>> {
    let mut changes = BTreeMap::new();
    for_each_logged_change(db, changelog_cf, from, |key, value| {
        changes.insert(key.to_vec(), value.map(<[u8]>::to_vec));
        Ok(())
    })?;
    Ok(changes)
}

/// Writes to the `state` family every change the change log holds past what the family
/// has (nothing when [`UNWRITTEN_FROM`] is absent), then removes the mark; returns
/// whether there was anything to write. Safe to repeat after a crash part-way: the
/// changes are applied in order again.
pub fn catch_up(db: &DB, state_cf: &ColumnFamily, changelog_cf: &ColumnFamily, meta_cf: &ColumnFamily) -> Result<bool> {
    let Some(raw) = db.get_cf(meta_cf, UNWRITTEN_FROM)? else { return Ok(false) };
    let from = decode_batch(&raw)?;
    let mut options = WriteOptions::default();
    options.set_sync(true);
    let mut batch = WriteBatch::default();
    for_each_logged_change(db, changelog_cf, from, |key, value| {
        match value {
            Some(value) => batch.put_cf(state_cf, key, value),
            None => batch.delete_cf(state_cf, key),
        }
        if batch.size_in_bytes() >= REPLAY_BATCH_BYTES {
            db.write_opt(std::mem::take(&mut batch), &options)?;
        }
        Ok(())
    })?;
    batch.delete_cf(meta_cf, UNWRITTEN_FROM);
    db.write_opt(batch, &options).context("cannot write the state changes replayed from the change log")?;
    Ok(true)
}

/// An entry as RocksDB's iterator hands it over: its key and value.
type FamilyEntry = (Box<[u8]>, Box<[u8]>);

/// An entry of the committed state: its key and value, borrowed from a change or owned.
type MergedEntry<'a> = (Cow<'a, [u8]>, Cow<'a, [u8]>);

/// The entries with `start <= key < end` of `family` (the `state` family's, in key
/// order) with `changes` (in key order; `None`: deleted) in place of the family's
/// entries of their keys: what the committed state holds there.
pub fn merge_changes<'a, I>(
    family: I,
    changes: Vec<(&'a [u8], Option<&'a [u8]>)>,
) -> impl Iterator<Item = Result<MergedEntry<'a>>>
where
    I: Iterator<Item = Result<FamilyEntry, rocksdb::Error>>,
{
    let mut family = family;
    let mut changes = changes.into_iter().peekable();
    // The family's next entry, read ahead.
    let mut next: Option<FamilyEntry> = None;
    std::iter::from_fn(move || {
        loop {
            if next.is_none() {
                match family.next() {
                    Some(Ok(entry)) => next = Some(entry),
                    Some(Err(error)) => return Some(Err(error.into())),
                    None => {}
                }
            }
            let change_first = match (changes.peek(), &next) {
                (Some((changed, _)), Some((key, _))) => *changed <= &**key,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if !change_first {
                return next.take().map(|(key, value)| Ok((Cow::Owned(key.into_vec()), Cow::Owned(value.into_vec()))));
            }
            let (changed, value) = changes.next()?;
            // The family's own entry of this key is superseded.
            if next.as_ref().is_some_and(|(key, _)| **key == *changed) {
                next = None;
            }
            if let Some(value) = value {
                return Some(Ok((Cow::Borrowed(changed), Cow::Borrowed(value))));
            }
        }
    })
}
