//! A batch's transaction: its changes of every column family, buffered in memory and
//! visible to its own later reads, over the committed state (the store's in-memory
//! copy, what it read ahead, or RocksDB).

use std::cell::Cell;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

use anyhow::{Context, Result};
use rocksdb::{DB, Direction, IteratorMode, ReadOptions};

use super::ahead::WriteAhead;
use super::changelog::{ChangeRecords, Record};
use super::layout;
use super::layout::Cf;
use super::overlay::Overlay;
use super::resident::ResidentState;
use super::timer_buckets::{self, BucketKey, TimerBuckets};
use super::unwritten;
use crate::pipeline::CHANGE_OVERHEAD_BYTES;

/// The changes of one batch, readable before they are committed.
pub struct StateTxn {
    pub(super) db: Arc<DB>,
    /// The changes of each column family but the change log, in [`Cf`] order.
    pub(super) overlay: [Overlay; 5],
    /// The timer changes, by bucket of the timer index ([`timer_buckets`]): made into
    /// `Cf::TimerIndex` entries at the commit or a write ahead.
    pub(super) timers: TimerBuckets,
    /// Committed `Cf::State` values read ahead by [`StateTxn::prefetch_state`].
    pub(super) prefetched: HashMap<Vec<u8>, Option<Vec<u8>>, foldhash::fast::RandomState>,
    /// Changes of `Cf::State` the transaction does not read back, in order.
    pub(super) blind: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Change-log records the transaction's stage made itself, in order: of the
    /// entries it stores that are no entry's change of their own (packed entries, see
    /// [`packed`](super::packed)), which the commit stores, and of the entries' changes.
    pub(super) records: ChangeRecords,
    /// Ranges whose committed entries the commit drops before writing the changes.
    pub(super) dropped_ranges: Vec<(Cf, Vec<u8>, Vec<u8>)>,
    /// The committed state entries in memory (complete), when the store holds them.
    pub(super) resident: Option<Arc<ResidentState>>,
    /// Where the last read of `resident` ended (the next read searches from there).
    pub(super) resident_finger: Cell<usize>,
    /// What `overlay`, `blind` and the stored changes of `records` hold: each change's
    /// key and value bytes plus [`CHANGE_OVERHEAD_BYTES`] (`records` counts its own).
    pub(super) buffered_bytes: u64,
    /// The store's record of changes written ahead of their commit.
    pub(super) ahead: WriteAhead,
    /// How many changes of each family (puts, deletes) were written ahead of the commit
    /// (see [`ahead`](super::ahead)), in [`Cf`] order.
    pub(super) written_ahead: [(u64, u64); 5],
    /// The buffered bytes the last write ahead left (changes it may not write ahead).
    pub(super) held_back: u64,
}

/// The column families a transaction changes, in [`Cf`] order.
const FAMILIES: [Cf; 5] = [Cf::State, Cf::Timers, Cf::TimerIndex, Cf::Meta, Cf::TtlIndex];

/// A new transaction's overlays, in [`Cf`] order: the index families (ordered by
/// expiry, changed in no useful order, read by range about once a batch) hashed.
pub(super) fn overlays() -> [Overlay; 5] {
    FAMILIES.map(overlay_of)
}

/// A new overlay of `cf`'s changes (see [`overlays`]).
fn overlay_of(cf: Cf) -> Overlay {
    match cf {
        Cf::TimerIndex | Cf::TtlIndex => Overlay::hashed(),
        _ => Overlay::default(),
    }
}

/// What one buffered change counts.
fn change_bytes(key: usize, value_len: Option<usize>) -> u64 {
    (key + value_len.unwrap_or(0)) as u64 + CHANGE_OVERHEAD_BYTES
}

impl StateTxn {
    /// The value at `key`, seeing this transaction's own writes first.
    pub fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(change) = self.overlay[cf as usize].get(key) {
            return Ok(change.clone());
        }
        if cf == Cf::State
            && let Some(resident) = &self.resident
        {
            return Ok(resident.get_near(key, &self.resident_finger).map(<[u8]>::to_vec));
        }
        if cf == Cf::State
            && let Some(committed) = self.prefetched.get(key)
        {
            return Ok(committed.clone());
        }
        let handle = self.db.cf_handle(cf.name()).context("state column family missing")?;
        Ok(self.db.get_cf(handle, key)?)
    }

    /// Shows `visit` every live `Cf::State` entry under `prefix` (this transaction's
    /// changes over the committed ones), in key order, while it returns true; `false`
    /// without visiting anything when the store holds no in-memory copy of the state
    /// (a range read of RocksDB per key would cost more than the reads it spares).
    pub fn visit_prefix_in_memory(&self, prefix: &[u8], mut visit: impl FnMut(&[u8], &[u8]) -> bool) -> bool {
        let Some(resident) = &self.resident else { return false };
        let mut own = self.overlay[Cf::State as usize].prefixed(prefix).peekable();
        let mut committed = resident.prefixed_near(prefix, &self.resident_finger).peekable();
        loop {
            let next = match (committed.peek(), own.peek()) {
                (Some(&(key, _)), Some(&(own_key, _))) if own_key <= key => {
                    if own_key == key {
                        committed.next();
                    }
                    own.next().and_then(|(key, change)| Some((key, change.as_deref()?)))
                }
                (Some(_), _) => committed.next(),
                (None, Some(_)) => own.next().and_then(|(key, change)| Some((key, change.as_deref()?))),
                (None, None) => return true,
            };
            if let Some((key, value)) = next
                && !visit(key, value)
            {
                return true;
            }
        }
    }

    /// Whether [`prefetch_state`](Self::prefetch_state) reads anything ahead: not when
    /// the transaction reads the store's in-memory copy (callers then skip making keys).
    pub fn prefetches(&self) -> bool {
        self.resident.is_none()
    }

    /// Reads the committed values of `keys` (state keys, in key order) in one batched
    /// lookup — far cheaper than one `get` each — so that later `get`s of them need no
    /// store access. Replaces what an earlier prefetch held (bounding the memory).
    /// Nothing to do when it reads the store's in-memory copy (see [`prefetches`](Self::prefetches)).
    pub fn prefetch_state(&mut self, mut keys: Vec<Vec<u8>>) -> Result<()> {
        if !self.prefetches() {
            return Ok(());
        }
        // The batched lookup is told its keys are sorted: make sure (cheap when they are).
        keys.sort_unstable();
        let handle = self.db.cf_handle(Cf::State.name()).context("state column family missing")?;
        let values = self.db.batched_multi_get_cf(handle, &keys, true);
        self.prefetched.clear();
        for (key, value) in keys.into_iter().zip(values) {
            self.prefetched.insert(key, value?.map(|slice| slice.to_vec()));
        }
        Ok(())
    }

    /// Whether the change log can replay every state change of this transaction (it
    /// records all but a dropped state range): its commit can then leave them
    /// unwritten.
    pub(super) fn logs_every_state_change(&self) -> bool {
        !self.dropped_ranges.iter().any(|(cf, ..)| *cf == Cf::State)
    }

    /// What this transaction did to `key` of `cf`, if anything: `Some(None)` when it
    /// deleted it (the store is not read).
    pub fn own_change(&self, cf: Cf, key: &[u8]) -> Option<Option<&[u8]>> {
        self.overlay[cf as usize].get(key).map(|change| change.as_deref())
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, cf: Cf, key: Vec<u8>, value: Vec<u8>) {
        self.buffer(cf, key, Some(value));
    }

    /// Removes `key`.
    pub fn delete(&mut self, cf: Cf, key: Vec<u8>) {
        self.buffer(cf, key, None);
    }

    /// Drops every committed entry of `cf` with `start <= key < end` at the commit (one
    /// range deletion instead of one per key), before this and the other committed
    /// transactions' changes are written: their puts in the range stay. Reads in this
    /// transaction still see those entries: drop only a range all of whose entries the
    /// batch has dealt with, e.g. the index of timers that all fired.
    pub fn drop_committed_range(&mut self, cf: Cf, start: Vec<u8>, end: Vec<u8>) {
        self.dropped_ranges.push((cf, start, end));
    }

    /// Removes `key`; returns whether this transaction had deleted it already (one
    /// search, where [`own_change`](Self::own_change) and [`delete`](Self::delete) are two).
    /// After changes were written ahead of the commit, a key the overlay lacks is looked
    /// up in the store: absent there, it was deleted (or never was).
    pub fn delete_once(&mut self, cf: Cf, key: Vec<u8>) -> Result<bool> {
        if self.wrote_ahead() && self.overlay[cf as usize].get(&key).is_none() {
            let handle = self.db.cf_handle(cf.name()).context("state column family missing")?;
            if self.db.get_pinned_cf(handle, &key)?.is_none() {
                return Ok(true);
            }
        }
        let key_len = key.len();
        self.buffered_bytes += change_bytes(key_len, None);
        let replaced = self.overlay[cf as usize].insert(key, None);
        if let Some(replaced) = &replaced {
            self.buffered_bytes -= change_bytes(key_len, replaced.as_ref().map(Vec::len));
        }
        Ok(replaced.is_some_and(|change| change.is_none()))
    }

    /// Whether some of this transaction's changes were written ahead of its commit.
    fn wrote_ahead(&self) -> bool {
        self.written_ahead.iter().any(|(put, deleted)| put + deleted > 0)
    }

    /// Moves this transaction's changes into a transaction of their own, for the store
    /// to write ahead of the commit ([`ahead`](super::ahead)); but the changes under a
    /// range the commit drops stay (its deletion at the commit would delete them from
    /// the family). Reads then see the moved changes in the store: the transaction no
    /// longer reads the in-memory copy or what it read ahead, which lack them.
    pub(super) fn split_off_ahead(&mut self) -> StateTxn {
        let mut part = StateTxn {
            db: self.db.clone(),
            overlay: overlays(),
            timers: TimerBuckets::default(),
            prefetched: HashMap::default(),
            blind: std::mem::take(&mut self.blind),
            records: self.records.take(),
            dropped_ranges: Vec::new(),
            resident: None,
            resident_finger: Cell::new(0),
            buffered_bytes: 0,
            ahead: self.ahead.clone(),
            written_ahead: Default::default(),
            held_back: 0,
        };
        self.resident = None;
        self.prefetched.clear();
        self.buffered_bytes = 0;
        for cf in FAMILIES {
            let changes = std::mem::replace(&mut self.overlay[cf as usize], overlay_of(cf));
            for (key, change) in changes.into_sorted() {
                let stays = self.dropped_ranges.iter().any(|(range_cf, start, end)| {
                    *range_cf == cf && start.as_slice() <= key.as_slice() && key.as_slice() < end.as_slice()
                });
                if stays {
                    self.buffered_bytes += change_bytes(key.len(), change.as_ref().map(Vec::len));
                    self.overlay[cf as usize].insert(key, change);
                } else {
                    part.overlay[cf as usize].insert(key, change);
                }
            }
            let (put, deleted) = part.change_counts(cf);
            self.written_ahead[cf as usize].0 += put;
            self.written_ahead[cf as usize].1 += deleted;
        }
        self.held_back = self.buffered_bytes + self.timers.bytes(CHANGE_OVERHEAD_BYTES);
        part
    }

    /// Whether this transaction deleted `key` (its own changes only: not one written
    /// ahead of the commit).
    pub fn deleted_here(&self, cf: Cf, key: &[u8]) -> bool {
        matches!(self.overlay[cf as usize].get(key), Some(None))
    }

    /// Undoes this transaction's change of `key`, if any, so that the commit writes
    /// nothing for it: for an entry under a range the commit drops anyway
    /// ([`drop_committed_range`](Self::drop_committed_range)) that was put in this
    /// transaction or is committed.
    pub fn forget(&mut self, cf: Cf, key: &[u8]) {
        if let Some(change) = self.overlay[cf as usize].remove(key) {
            self.buffered_bytes -= change_bytes(key.len(), change.as_ref().map(Vec::len));
        }
    }

    fn buffer(&mut self, cf: Cf, key: Vec<u8>, change: Option<Vec<u8>>) {
        let key_len = key.len();
        self.buffered_bytes += change_bytes(key_len, change.as_ref().map(Vec::len));
        if let Some(replaced) = self.overlay[cf as usize].insert(key, change) {
            self.buffered_bytes -= change_bytes(key_len, replaced.as_ref().map(Vec::len));
        }
    }

    /// Sets `key` of `cf` (only `Cf::State`) without the transaction reading it back:
    /// cheaper than [`put`](Self::put), for a stage that keeps what it wrote itself.
    /// At the commit, blind changes are merged with the others in key order, the last
    /// blind change of a key winning; a key must not also be changed through `put` or
    /// `delete` in the same transaction.
    pub fn blind_put(&mut self, cf: Cf, key: Vec<u8>, value: Vec<u8>) {
        debug_assert_eq!(cf, Cf::State, "blind writes are for state entries");
        self.buffered_bytes += change_bytes(key.len(), Some(value.len()));
        self.blind.push((key, Some(value)));
    }

    /// Stores the entry `key` of `Cf::State` as no entry's change of its own: the stage
    /// records its entries' changes itself with [`log_change`](Self::log_change) (e.g.
    /// of the entries a packed entry holds, see [`packed`](super::packed)). Not read
    /// back by the transaction. The change log keeps it among the stored changes, for
    /// a replay.
    pub fn put_stored(&mut self, key: &[u8], value: &[u8]) {
        self.buffered_bytes += change_bytes(key.len(), Some(value.len()));
        self.records.push(Record::Stored, key, Some(value));
    }

    /// Deletes the entry `key` as [`put_stored`](Self::put_stored) writes.
    pub fn delete_stored(&mut self, key: &[u8]) {
        self.buffered_bytes += change_bytes(key.len(), None);
        self.records.push(Record::Stored, key, None);
    }

    /// Sets the entry `key` to `value` as [`put_stored`](Self::put_stored) does, where
    /// `value` is itself change-log records (see [`packed`](super::packed)) that say
    /// every change it stands for: the change log takes it as one record of both.
    pub fn put_packed(&mut self, key: &[u8], value: &[u8]) {
        self.buffered_bytes += change_bytes(key.len(), Some(value.len()));
        self.records.push(Record::Packed, key, Some(value));
    }

    /// Records in the change log that the entry `key` became `value` (`None`: was
    /// deleted), for changes stored with [`put_stored`](Self::put_stored).
    pub fn log_change(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.records.push(Record::Entry, key, value);
    }

    /// The bytes this transaction's changes hold: each change's key and value plus
    /// [`CHANGE_OVERHEAD_BYTES`], and the change-log records it made itself.
    pub fn buffered_bytes(&self) -> u64 {
        self.buffered_bytes + self.timers.bytes(CHANGE_OVERHEAD_BYTES) + self.records.bytes() as u64
    }

    /// How many keys of `cf` this transaction changes (writes and deletes); for the
    /// timer index, how many timers (of the buckets not yet made entries).
    pub fn changes(&self, cf: Cf) -> u64 {
        let blind = match cf {
            Cf::State => self.blind.len(),
            Cf::TimerIndex => self.timers.changes() as usize,
            _ => 0,
        };
        let (put, deleted) = self.written_ahead[cf as usize];
        (self.overlay[cf as usize].changed_keys() + blind) as u64 + put + deleted
    }

    /// Every live entry whose key starts with `prefix`, in key order.
    pub fn scan_prefix(&self, cf: Cf, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scan_range(cf, prefix, layout::prefix_end(prefix).as_deref())
    }

    /// Every live entry with `start <= key < end` (no end: to the last key), in key order.
    pub fn scan_range(&self, cf: Cf, start: &[u8], end: Option<&[u8]>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut entries = Vec::new();
        self.visit_range(cf, start, end, |key, value| {
            entries.push((key.to_vec(), value.to_vec()));
            Ok(true)
        })?;
        Ok(entries)
    }

    /// Shows `visit` every live entry with `start <= key < end` (no end: to the last
    /// key), in key order, while it returns true (nothing copied for the entries it
    /// passes over).
    pub fn visit_range(
        &self,
        cf: Cf,
        start: &[u8],
        end: Option<&[u8]>,
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<bool>,
    ) -> Result<()> {
        let handle = self.db.cf_handle(cf.name()).context("state column family missing")?;
        let mut options = ReadOptions::default();
        if let Some(end) = end {
            options.set_iterate_upper_bound(end.to_vec());
        }
        let upper = end.map_or(Bound::Unbounded, Bound::Excluded);
        let mut own = self.overlay[cf as usize].range(Bound::Included(start), upper).peekable();
        // The committed entries: the family's, with the changes it lacks on top.
        let unwritten = match (&self.resident, cf) {
            (Some(copy), Cf::State) => copy.unwritten_in(start, end),
            _ => Vec::new(),
        };
        let family = self.db.iterator_cf_opt(handle, options, IteratorMode::From(start, Direction::Forward));
        // Both in key order: merged as they come, the transaction's change of a key
        // replacing the committed entry.
        for item in unwritten::merge_changes(family, unwritten) {
            let (key, value) = item?;
            while let Some((own_key, change)) = own.next_if(|(own_key, _)| *own_key < &*key) {
                if let Some(value) = change
                    && !visit(own_key, value)?
                {
                    return Ok(());
                }
            }
            let go_on = match own.next_if(|(own_key, _)| *own_key == &*key) {
                Some((own_key, Some(change))) => visit(own_key, change)?,
                Some((_, None)) => true,
                None => visit(&key, &value)?,
            };
            if !go_on {
                return Ok(());
            }
        }
        for (key, change) in own {
            if let Some(value) = change
                && !visit(key, value)?
            {
                return Ok(());
            }
        }
        Ok(())
    }

    /// How many keys of `cf` this transaction writes and how many it deletes.
    pub fn change_counts(&self, cf: Cf) -> (u64, u64) {
        let blind = if cf == Cf::State { self.blind.as_slice() } else { &[] };
        let changes = self.overlay[cf as usize].values().chain(blind.iter().map(|(_, change)| change));
        changes.fold(
            self.written_ahead[cf as usize],
            |(w, d), change| if change.is_some() { (w + 1, d) } else { (w, d + 1) },
        )
    }

    /// Registers (`true`) or deletes the timer of `key` in `bucket` of the timer index.
    pub fn set_timer(&mut self, bucket: BucketKey, key: &[u8], registered: bool) {
        self.timers.set(bucket, key, registered);
    }

    /// Takes the due timer of `key` in `bucket` as it fires: false when this
    /// transaction deleted it (not counting a deletion written ahead of the commit: no
    /// due timer is); else this transaction's registration of it, if any, is undone
    /// (the timer is under a range the commit drops anyway, see [`forget`](Self::forget)).
    pub fn take_due_timer(&mut self, bucket: &BucketKey, key: &[u8]) -> bool {
        self.timers.take_due(bucket, key)
    }

    /// Undoes this transaction's change of the timer of `key` in `bucket`, if any: for a
    /// timer under a range the commit drops anyway (see [`forget`](Self::forget)).
    pub fn forget_timer(&mut self, bucket: &BucketKey, key: &[u8]) {
        self.timers.forget(bucket, key);
    }

    /// The buckets of timer changes with a key below `end`, in key order.
    pub fn timer_changes_below(&self, end: Option<&[u8]>) -> Vec<(&BucketKey, &timer_buckets::BucketChanges)> {
        self.timers.below(end)
    }

    /// The committed entries of a timer bucket, with this transaction's changes. A
    /// bucket whose first chunk is not there holds none (see [`timer_buckets`]; the
    /// entries of the one-per-timer layout are deleted by the transaction that packs
    /// them, and so scanned): most of a window job's buckets are new, and a point
    /// lookup answers for them where a range scan would build an iterator over every
    /// memtable and table file.
    fn bucket_entries(&self, bucket: &BucketKey) -> Result<Vec<timer_buckets::Entry>> {
        let end = layout::prefix_end(bucket);
        let own = &self.overlay[Cf::TimerIndex as usize];
        let changed = own.changed_keys() > 0
            && own
                .range(Bound::Included(&bucket[..]), end.as_deref().map_or(Bound::Unbounded, Bound::Excluded))
                .next()
                .is_some();
        if !changed {
            let handle = self.db.cf_handle(Cf::TimerIndex.name()).context("state column family missing")?;
            if self.db.get_pinned_cf(handle, bucket)?.is_none() {
                return Ok(Vec::new());
            }
        }
        self.scan_range(Cf::TimerIndex, bucket, end.as_deref())
    }

    /// Packs the timer changes into timer-index entries now, on the caller's thread,
    /// rather than at the commit (which then finds none left): a sharded stage packs
    /// each shard's on the shard's own thread, in parallel, where the commit would pack
    /// them one shard after another. For a transaction whose timers change no more: the
    /// commit would pack a bucket under a range it drops anew, from the later changes
    /// alone.
    pub fn pack_timers_for_commit(&mut self) -> Result<()> {
        self.pack_timers(false)
    }

    /// Makes the changed timer buckets `Cf::TimerIndex` entries: rewrites the chunks of
    /// each bucket that its committed keys and this transaction's changes make differ
    /// (see [`timer_buckets`]). `ahead`: for a write ahead of the commit, which leaves
    /// the buckets under a range the commit drops as they are; else, for the commit,
    /// which writes those over the dropped range with this transaction's registrations
    /// only (every committed timer in it fired).
    pub(super) fn pack_timers(&mut self, ahead: bool) -> Result<()> {
        let ranges = &self.dropped_ranges;
        let dropped = |bucket: &BucketKey| {
            ranges.iter().any(|(cf, start, end)| {
                *cf == Cf::TimerIndex && start.as_slice() <= &bucket[..] && &bucket[..] < end.as_slice()
            })
        };
        let mut taken = self.timers.take(|bucket| !(ahead && dropped(bucket)));
        taken.sort_unstable_by_key(|(bucket, _)| *bucket);
        let mut writes = Vec::new();
        for (bucket, changes) in &taken {
            let committed = if dropped(bucket) { Vec::new() } else { self.bucket_entries(bucket)? };
            let bucket_writes = timer_buckets::rechunk(bucket, &committed, changes)
                .context("corrupt timer index entry in the state store (the bytes do not follow eddy's layout)")?;
            writes.extend(bucket_writes);
        }
        for (key, value) in writes {
            self.buffer(Cf::TimerIndex, key, value);
        }
        Ok(())
    }
}
