//! The RocksDB state store and its per-batch transactions.
//!
//! A batch reads and writes through a [`StateTxn`]: every change is buffered in
//! memory (and visible to later reads of the same batch), then [`StateStore::commit`]
//! writes all of them, together with the committed batch id, in one atomic
//! RocksDB `WriteBatch`. A batch that fails is simply dropped: nothing of it lands.
//! A transaction counts what its buffer holds ([`StateTxn::buffered_bytes`]) so that
//! the processor's share of it can be held to `operator.max-state-bytes-per-batch`.

use std::collections::HashMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use rocksdb::{ColumnFamilyDescriptor, DB, Direction, IteratorMode, ReadOptions, WriteBatch, WriteOptions};

use super::changelog::{ChangeLogWriter, ChangeRecords, SpareChunks};
use super::layout;
use super::overlay::{Change, Overlay};
use super::resident::{Resident, ResidentChange, ResidentFeed, ResidentState};
use super::tuning;
use crate::pipeline::CHANGE_OVERHEAD_BYTES;

/// The column families of the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cf {
    /// Value, list and map variables.
    State = 0,
    /// Timers, keyed by grouping key then expiry.
    Timers = 1,
    /// Timers, keyed by expiry then grouping key (for firing in time order).
    TimerIndex = 2,
    /// Store metadata: the committed batch id, source progress, the watermark.
    Meta = 3,
    /// TTL'd state entries, keyed by expiry (for eviction in time order).
    TtlIndex = 4,
}

/// The column families, in [`Cf`] order.
pub const CF_NAMES: [&str; 6] = ["state", "timers", "timer_index", "meta", "ttl_index", CHANGELOG];

/// The column family holding each batch's state changes (see [`changelog`](super::changelog)).
pub const CHANGELOG: &str = "changelog";
/// The meta key of the last committed batch id.
pub const COMMITTED_BATCH: &[u8] = b"committed-batch";

impl Cf {
    /// The column family's name in the store.
    pub fn name(self) -> &'static str {
        CF_NAMES[self as usize]
    }
}

/// A RocksDB database holding every operator's state of one query.
#[derive(Clone)]
pub struct StateStore {
    db: Arc<DB>,
    path: PathBuf,
    /// Change-log chunks written by earlier commits, reused by later batches.
    spare_chunks: SpareChunks,
    /// The committed state entries in memory, while they fit.
    resident: Resident,
}

impl StateStore {
    /// Opens (or creates) the store in `path`.
    pub fn open(path: &Path) -> Result<Self> {
        std::fs::create_dir_all(path)
            .with_context(|| format!("cannot create the state directory {}", path.display()))?;
        let cache = tuning::shared_block_cache();
        let families = CF_NAMES
            .iter()
            .map(|name| ColumnFamilyDescriptor::new(*name, tuning::family_options(&cache, *name == CHANGELOG)));
        let db = DB::open_cf_descriptors(&tuning::db_options(), path, families).with_context(|| {
            format!(
                "cannot open the state store in {} (is another eddy process using this checkpoint?)",
                path.display()
            )
        })?;
        Ok(Self {
            db: Arc::new(db),
            path: path.to_path_buf(),
            spare_chunks: SpareChunks::default(),
            resident: Resident::default(),
        })
    }

    /// Holds a copy of every committed state entry in memory while they take at most
    /// `budget` bytes, for transactions to read instead of RocksDB (see
    /// [`resident`](super::resident)); returns whether the state fits now.
    pub fn hold_state_in_memory(&self, budget: usize) -> Result<bool> {
        self.resident.load(&self.db, self.cf_handle(Cf::State.name())?, budget)
    }

    /// Where the store lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Starts a transaction that sees the committed state plus its own writes.
    pub fn begin(&self) -> StateTxn {
        StateTxn {
            db: self.db.clone(),
            overlay: Default::default(),
            prefetched: HashMap::new(),
            blind: Vec::new(),
            unlogged: Vec::new(),
            records: ChangeRecords::new(self.spare_chunks.clone()),
            self_logged: Vec::new(),
            dropped_ranges: Vec::new(),
            buffered_bytes: 0,
            resident: self.resident.reader(),
        }
    }

    /// Writes every change of `txn`, and `batch_id` as the committed batch, atomically
    /// and durably.
    pub fn commit(&self, txn: StateTxn, batch_id: u64) -> Result<()> {
        self.commit_all(vec![txn], batch_id)
    }

    /// Writes every change of all `txns` (which touch disjoint keys, e.g. one per
    /// shard) and `batch_id` as the committed batch, in one atomic, durable write.
    pub fn commit_all(&self, mut txns: Vec<StateTxn>, batch_id: u64) -> Result<()> {
        // The in-memory copy changes with the write batch, once no transaction reads it:
        // on a second thread, fed each state change as the batch takes it.
        txns.iter_mut().for_each(|txn| txn.resident = None);
        let resident = self.resident.take_for_commit();
        let (written, changed) = std::thread::scope(|scope| {
            let (mut feed, applier) = ResidentFeed::start(scope, resident);
            let written = self.write_batch(txns, batch_id, &mut feed).and_then(|batch| {
                feed.finish();
                let mut options = WriteOptions::default();
                options.set_sync(true);
                self.db.write_opt(batch, &options).with_context(|| {
                    format!("cannot commit batch {batch_id} to the state store in {}", self.path.display())
                })
            });
            drop(feed);
            (written, applier.map(|thread| thread.join()))
        });
        written?;
        if let Some(Ok(Some(copy))) = changed {
            self.resident.put_back(copy);
        }
        Ok(())
    }

    /// The write batch of every change of `txns` and `batch_id` as the committed
    /// batch; the state changes also go to `feed`.
    fn write_batch(&self, mut txns: Vec<StateTxn>, batch_id: u64, feed: &mut ResidentFeed) -> Result<WriteBatch> {
        // Room for every change and its change-log copy up front (a write batch that
        // grows copies itself each time it doubles): the buffered bytes count each
        // change's key and value plus 64, about what the two copies take.
        let buffered: u64 = txns.iter().map(StateTxn::buffered_bytes).sum();
        let mut batch = WriteBatch::with_capacity_bytes(buffered as usize + buffered as usize / 4 + 4096);
        let mut log = ChangeLogWriter::new(batch_id, self.spare_chunks.clone());
        let changelog = self.cf_handle(CHANGELOG)?;
        // Dropped ranges first, so that every transaction's own puts in them stay; its
        // deletes there are already done by the range.
        let dropped: Vec<(Cf, Vec<u8>, Vec<u8>)> =
            txns.iter_mut().flat_map(|txn| std::mem::take(&mut txn.dropped_ranges)).collect();
        for (cf, start, end) in &dropped {
            batch.delete_range_cf(self.cf_handle(cf.name())?, start, end);
            if *cf == Cf::State && feed.is_fed() {
                feed.push(ResidentChange::DropRange(start.clone(), end.clone()));
            }
        }
        let covered = |cf: Cf, key: &[u8]| {
            dropped
                .iter()
                .any(|(range_cf, start, end)| *range_cf == cf && start.as_slice() <= key && key < end.as_slice())
        };
        // Each change moves from the buffer into the write batch (the buffer shrinks as
        // the batch grows), so the commit does not hold both whole.
        for txn in txns {
            let [state, rest @ ..] = txn.overlay;
            let cf = self.cf_handle(Cf::State.name())?;
            for (key, change) in txn.unlogged {
                write_state(&mut batch, cf, feed, key, change);
            }
            for (key, value) in txn.self_logged {
                batch.put_cf(changelog, log.next_chunk_key(), &value);
                write_state(&mut batch, cf, feed, key, Some(value));
            }
            for chunk in txn.records.into_chunks() {
                batch.put_cf(changelog, log.next_chunk_key(), &chunk);
                self.spare_chunks.give_back(chunk);
            }
            // State changes in key order (RocksDB inserts a sorted run fastest); of a key
            // changed twice blindly, the last change.
            debug_assert!(txn.blind.iter().all(|(key, _)| state.get(key).is_none()), "a key changed blindly and not");
            let mut changes: Vec<(Vec<u8>, Change)> = state.into_sorted().collect();
            if !txn.blind.is_empty() {
                changes.extend(txn.blind);
                changes.sort_by(|a, b| a.0.cmp(&b.0));
            }
            changes.dedup_by(|later, earlier| {
                let same = later.0 == earlier.0;
                if same {
                    std::mem::swap(later, earlier);
                }
                same
            });
            for (key, change) in changes {
                if let Some((log_key, chunk)) = log.record(&key, change.as_deref()) {
                    batch.put_cf(changelog, log_key, &chunk);
                    self.spare_chunks.give_back(chunk);
                }
                write_state(&mut batch, cf, feed, key, change);
            }
            for (family, changes) in [Cf::Timers, Cf::TimerIndex, Cf::Meta, Cf::TtlIndex].into_iter().zip(rest) {
                let cf = self.cf_handle(family.name())?;
                for (key, change) in changes.into_sorted() {
                    match change {
                        Some(value) => batch.put_cf(cf, key, value),
                        None if covered(family, &key) => {}
                        None => batch.delete_cf(cf, key),
                    }
                }
            }
        }
        if let Some((log_key, chunk)) = log.finish() {
            batch.put_cf(changelog, log_key, &chunk);
            self.spare_chunks.give_back(chunk);
        }
        batch.put_cf(self.cf_handle(Cf::Meta.name())?, COMMITTED_BATCH, batch_id.to_be_bytes());
        Ok(batch)
    }

    /// The id of the last committed batch, if any.
    pub fn committed_batch(&self) -> Result<Option<u64>> {
        let raw = self.db.get_cf(self.cf_handle(Cf::Meta.name())?, COMMITTED_BATCH)?;
        Ok(raw.and_then(|bytes| Some(u64::from_be_bytes(bytes.as_slice().try_into().ok()?))))
    }

    /// Writes a consistent copy of the store into `dir` (a RocksDB checkpoint: hard
    /// links to its files), published by a rename so a half-made snapshot is never seen.
    pub fn snapshot(&self, dir: &Path) -> Result<()> {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let temporary = dir.with_file_name(format!(".{name}.tmp"));
        if temporary.exists() {
            std::fs::remove_dir_all(&temporary)?;
        }
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent)?;
        }
        rocksdb::checkpoint::Checkpoint::new(&self.db)?
            .create_checkpoint(&temporary)
            .with_context(|| format!("cannot snapshot the state store into {}", temporary.display()))?;
        std::fs::rename(&temporary, dir).with_context(|| format!("cannot publish the snapshot {}", dir.display()))?;
        Ok(())
    }

    /// Deletes the change log of every batch before `batch_id`.
    pub fn prune_changelog(&self, batch_id: u64) -> Result<()> {
        let cf = self.cf_handle(CHANGELOG)?;
        Ok(self.db.delete_range_cf(cf, 0u64.to_be_bytes(), batch_id.to_be_bytes())?)
    }

    /// RocksDB's estimate of the number of live state entries.
    pub fn estimated_state_entries(&self) -> u64 {
        self.int_property(Cf::State, "rocksdb.estimate-num-keys")
    }

    /// Estimated bytes of live state (state entries on disk and in memtables).
    pub fn estimated_state_bytes(&self) -> u64 {
        self.int_property(Cf::State, "rocksdb.estimate-live-data-size")
            + self.int_property(Cf::State, "rocksdb.size-all-mem-tables")
    }

    /// Memory held by RocksDB memtables and readers (all column families) and by the
    /// state's in-memory copy, in bytes.
    pub fn memory_used_bytes(&self) -> u64 {
        self.resident.bytes() as u64
            + CF_NAMES
                .iter()
                .filter_map(|name| self.db.cf_handle(name))
                .map(|cf| {
                    ["rocksdb.cur-size-all-mem-tables", "rocksdb.estimate-table-readers-mem"]
                        .iter()
                        .filter_map(|property| self.db.property_int_value_cf(cf, *property).ok().flatten())
                        .sum::<u64>()
                })
                .sum::<u64>()
    }

    fn int_property(&self, cf: Cf, property: &str) -> u64 {
        self.db
            .cf_handle(cf.name())
            .and_then(|handle| self.db.property_int_value_cf(handle, property).ok().flatten())
            .unwrap_or(0)
    }

    /// Writes one metadata entry durably, outside any batch.
    pub fn write_meta(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut options = WriteOptions::default();
        options.set_sync(true);
        Ok(self.db.put_cf_opt(self.cf_handle(Cf::Meta.name())?, key, value, &options)?)
    }

    /// The committed value at `key` (ignoring any open transaction).
    pub fn read(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get_cf(self.cf_handle(cf.name())?, key)?)
    }

    fn cf_handle(&self, name: &str) -> Result<&rocksdb::ColumnFamily> {
        self.db
            .cf_handle(name)
            .with_context(|| format!("the state store in {} lacks column family {name}", self.path.display()))
    }
}

/// The changes of one batch, readable before they are committed.
pub struct StateTxn {
    db: Arc<DB>,
    /// The changes of each column family but the change log, in [`Cf`] order.
    overlay: [Overlay; 5],
    /// Committed `Cf::State` values read ahead by [`StateTxn::prefetch_state`].
    prefetched: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// Changes of `Cf::State` the transaction does not read back, in order.
    blind: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// State entries written or deleted without a change-log record (e.g. packed
    /// entries, see [`packed`](super::packed)): the stage records the changes itself,
    /// in `records`.
    unlogged: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Change-log records the transaction's stage made itself.
    records: ChangeRecords,
    /// State entries whose values are change-log records (packed entries all of whose
    /// windows changed): each is logged as it is, one change-log chunk, not copied.
    self_logged: Vec<(Vec<u8>, Vec<u8>)>,
    /// Ranges whose committed entries the commit drops before writing the changes.
    dropped_ranges: Vec<(Cf, Vec<u8>, Vec<u8>)>,
    /// The committed state entries in memory (complete), when the store holds them.
    resident: Option<Arc<ResidentState>>,
    /// What `overlay`, `blind`, `unlogged` and `self_logged` hold: each change's key and
    /// value bytes plus [`CHANGE_OVERHEAD_BYTES`] (a self-logged value twice: it is
    /// written twice).
    buffered_bytes: u64,
}

/// Writes a change of the state entry `key` into `batch`, and feeds it to the
/// in-memory copy when there is one.
fn write_state(
    batch: &mut WriteBatch,
    cf: &rocksdb::ColumnFamily,
    feed: &mut ResidentFeed,
    key: Vec<u8>,
    change: Option<Vec<u8>>,
) {
    match &change {
        Some(value) => batch.put_cf(cf, &key, value),
        None => batch.delete_cf(cf, &key),
    }
    if feed.is_fed() {
        feed.push(match change {
            Some(value) => ResidentChange::Put(key, value),
            None => ResidentChange::Delete(key),
        });
    }
}

/// What one buffered change counts.
fn change_bytes(key: usize, value: Option<&Vec<u8>>) -> u64 {
    (key + value.map_or(0, Vec::len)) as u64 + CHANGE_OVERHEAD_BYTES
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
            return Ok(resident.get(key).cloned());
        }
        if cf == Cf::State
            && let Some(committed) = self.prefetched.get(key)
        {
            return Ok(committed.clone());
        }
        let handle = self.db.cf_handle(cf.name()).context("state column family missing")?;
        Ok(self.db.get_cf(handle, key)?)
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
    pub fn delete_once(&mut self, cf: Cf, key: Vec<u8>) -> bool {
        let key_len = key.len();
        self.buffered_bytes += change_bytes(key_len, None);
        let replaced = self.overlay[cf as usize].insert(key, None);
        if let Some(replaced) = &replaced {
            self.buffered_bytes -= change_bytes(key_len, replaced.as_ref());
        }
        replaced.is_some_and(|change| change.is_none())
    }

    /// Undoes this transaction's change of `key`, if any, so that the commit writes
    /// nothing for it: for an entry under a range the commit drops anyway
    /// ([`drop_committed_range`](Self::drop_committed_range)) that was put in this
    /// transaction or is committed.
    pub fn forget(&mut self, cf: Cf, key: &[u8]) {
        if let Some(change) = self.overlay[cf as usize].remove(key) {
            self.buffered_bytes -= change_bytes(key.len(), change.as_ref());
        }
    }

    fn buffer(&mut self, cf: Cf, key: Vec<u8>, change: Option<Vec<u8>>) {
        let key_len = key.len();
        self.buffered_bytes += change_bytes(key_len, change.as_ref());
        if let Some(replaced) = self.overlay[cf as usize].insert(key, change) {
            self.buffered_bytes -= change_bytes(key_len, replaced.as_ref());
        }
    }

    /// Sets `key` of `cf` (only `Cf::State`) without the transaction reading it back:
    /// cheaper than [`put`](Self::put), for a stage that keeps what it wrote itself.
    /// At the commit, blind changes are merged with the others in key order, the last
    /// blind change of a key winning; a key must not also be changed through `put` or
    /// `delete` in the same transaction.
    pub fn blind_put(&mut self, cf: Cf, key: Vec<u8>, value: Vec<u8>) {
        debug_assert_eq!(cf, Cf::State, "blind writes are for state entries");
        self.buffered_bytes += change_bytes(key.len(), Some(&value));
        self.blind.push((key, Some(value)));
    }

    /// Writes the entry `key` of `Cf::State` without a change-log record: the stage
    /// records its changes itself with [`log_change`](Self::log_change) (e.g. of the
    /// entries a packed entry holds, see [`packed`](super::packed)). Not read back by
    /// the transaction.
    pub fn put_unlogged(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.buffered_bytes += change_bytes(key.len(), Some(&value));
        self.unlogged.push((key, Some(value)));
    }

    /// Deletes the entry `key` as [`put_unlogged`](Self::put_unlogged) writes.
    pub fn delete_unlogged(&mut self, key: Vec<u8>) {
        self.buffered_bytes += change_bytes(key.len(), None);
        self.unlogged.push((key, None));
    }

    /// Sets the entry `key` to `value` as [`put_unlogged`](Self::put_unlogged) does, where
    /// `value` is itself change-log records (see [`packed`](super::packed)) that say
    /// every change it stands for: the change log takes them as they are.
    pub fn put_self_logged(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.buffered_bytes += change_bytes(key.len(), Some(&value)) + value.len() as u64;
        self.self_logged.push((key, value));
    }

    /// Records in the change log that the entry `key` became `value` (`None`: was
    /// deleted), for changes written with [`put_unlogged`](Self::put_unlogged).
    pub fn log_change(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.records.push(key, value);
    }

    /// The bytes this transaction's changes hold: each change's key and value plus
    /// [`CHANGE_OVERHEAD_BYTES`], and the change-log records it made itself.
    pub fn buffered_bytes(&self) -> u64 {
        self.buffered_bytes + self.records.bytes() as u64
    }

    /// How many keys of `cf` this transaction changes (writes and deletes).
    pub fn changes(&self, cf: Cf) -> u64 {
        let blind = if cf == Cf::State { self.blind.len() } else { 0 };
        (self.overlay[cf as usize].changed_keys() + blind) as u64
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
        // Both in key order: merged as they come, the transaction's change of a key
        // replacing the committed entry.
        for item in self.db.iterator_cf_opt(handle, options, IteratorMode::From(start, Direction::Forward)) {
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
        let (written, deleted) =
            changes.fold((0, 0), |(w, d), change| if change.is_some() { (w + 1, d) } else { (w, d + 1) });
        (written, deleted)
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
