//! The RocksDB state store and its per-batch transactions.
//!
//! A batch reads and writes through a [`StateTxn`]: every change is buffered in
//! memory (and visible to later reads of the same batch), then [`StateStore::commit`]
//! writes all of them, together with the committed batch id, in one atomic
//! RocksDB `WriteBatch`. A batch that fails is simply dropped: nothing of it lands.
//! A transaction counts what its buffer holds ([`StateTxn::buffered_bytes`]) so that
//! the processor's share of it can be held to `operator.max-state-bytes-per-batch`.

use std::cell::Cell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use rocksdb::{ColumnFamilyDescriptor, DB, WriteBatch, WriteOptions};

use super::ahead::{self, WriteAhead};
use super::changelog::{self, ChangeLogWriter, ChangeRecords, SpareChunks, View};
use super::overlay::Change;
use super::resident::{Resident, ResidentChange, ResidentState, Taken};
use super::resident_feed::ResidentFeed;
use super::tuning;
use super::txn::overlays;
use super::unwritten::{self, UNWRITTEN_FROM};

pub use super::layout::{CF_NAMES, CHANGELOG, Cf};
pub use super::txn::StateTxn;

/// The meta key of the last committed batch id.
pub const COMMITTED_BATCH: &[u8] = b"committed-batch";

/// A RocksDB database holding every operator's state of one query.
#[derive(Clone)]
pub struct StateStore {
    db: Arc<DB>,
    path: PathBuf,
    /// Change-log chunks written by earlier commits, reused by later batches.
    spare_chunks: SpareChunks,
    /// The committed state entries in memory, while they fit.
    resident: Resident,
    /// Whether a batch's changes were written ahead of its commit.
    ahead: WriteAhead,
}

impl StateStore {
    /// Opens (or creates) the store in `path`. A batch whose changes were written ahead
    /// of a commit that did not happen is rolled back (see [`ahead`](super::ahead)).
    pub fn open(path: &Path) -> Result<Self> {
        ahead::finish_interrupted(path)?;
        let mut store = Self::open_families(path)?;
        ahead::remove_half_made(path)?;
        if let Some((batch, copy)) = ahead::copy_before(path)? {
            if store.committed_batch()?.is_some_and(|committed| committed >= batch) {
                std::fs::remove_dir_all(&copy).with_context(|| format!("cannot remove {}", copy.display()))?;
            } else {
                drop(store);
                ahead::restore(path, &copy)?;
                store = Self::open_families(path)?;
            }
        }
        // The last run may have committed changes it had not written yet.
        store.catch_up()?;
        Ok(store)
    }

    fn open_families(path: &Path) -> Result<Self> {
        std::fs::create_dir_all(path)
            .with_context(|| format!("cannot create the state directory {}", path.display()))?;
        let cache = tuning::shared_block_cache();
        let families =
            CF_NAMES.iter().map(|name| ColumnFamilyDescriptor::new(*name, tuning::family_options(&cache, name)));
        let db = DB::open_cf_descriptors(&tuning::db_options(path), path, families).with_context(|| {
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
            ahead: WriteAhead::new(path),
        })
    }

    /// Holds a copy of every committed state entry in memory while they take at most
    /// `budget` bytes, for transactions to read instead of RocksDB (see
    /// [`resident`](super::resident)); returns whether the state fits now.
    pub fn hold_state_in_memory(&self, budget: usize) -> Result<bool> {
        self.write_unwritten()?;
        self.resident.load(&self.db, self.cf_handle(Cf::State.name())?, budget)
    }

    /// Whether the store holds its state in memory now.
    #[cfg(test)]
    pub(super) fn holds_state_in_memory(&self) -> bool {
        self.resident.inspect(|_| ()).is_some()
    }

    /// Writes to the `state` family what the in-memory copy has and it lacks, if anything.
    fn write_unwritten(&self) -> Result<()> {
        let state = self.cf_handle(Cf::State.name())?;
        let lacking = self.resident.inspect(|copy| {
            copy.unwritten_from().map(|_| {
                let mut batch = WriteBatch::default();
                copy.write_unwritten(&mut batch, state);
                batch
            })
        });
        if let Some(Some(mut batch)) = lacking {
            batch.delete_cf(self.cf_handle(Cf::Meta.name())?, UNWRITTEN_FROM);
            let mut options = WriteOptions::default();
            options.set_sync(true);
            self.db.write_opt(batch, &options).with_context(|| {
                format!("cannot write the committed state to the state store in {}", self.path.display())
            })?;
        }
        Ok(())
    }

    /// Where the store lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Starts a transaction that sees the committed state plus its own writes.
    pub fn begin(&self) -> StateTxn {
        StateTxn {
            db: self.db.clone(),
            overlay: overlays(),
            timers: Default::default(),
            prefetched: HashMap::default(),
            blind: Vec::new(),
            records: ChangeRecords::new(self.spare_chunks.clone()),
            dropped_ranges: Vec::new(),
            buffered_bytes: 0,
            resident: self.resident.reader(),
            resident_finger: Cell::new(0),
            ahead: self.ahead.clone(),
            written_ahead: Default::default(),
            held_back: 0,
        }
    }

    /// Writes `txn`'s changes (of batch `batch_id`) to the store now, ahead of the
    /// batch's commit, when they hold more than `bytes` (besides those the last time
    /// could not write); returns whether it did. The commit then writes the rest (see
    /// [`ahead`](super::ahead)). Not for a transaction that drops a range of state
    /// entries (the change log lacks that change).
    pub fn write_ahead_over(&self, txn: &mut StateTxn, batch_id: u64, bytes: u64) -> Result<bool> {
        if txn.buffered_bytes().saturating_sub(txn.held_back) <= bytes || !txn.logs_every_state_change() {
            return Ok(false);
        }
        let mut ahead = self.ahead.begin(&self.db, batch_id, || {
            // The family gets what the in-memory copy has and it lacks, and the copy
            // goes until the commit: it would not see the changes written ahead.
            self.write_unwritten()?;
            self.resident.set_aside();
            Ok(())
        })?;
        txn.pack_timers(true)?;
        // Room for every change and its change-log copy up front, as at the commit.
        let buffered = txn.buffered_bytes() as usize;
        let part = txn.split_off_ahead();
        let mut batch = WriteBatch::with_capacity_bytes(buffered + buffered / 4 + 4096);
        let mut log = ChangeLogWriter::new(batch_id, ahead.next_chunk, self.spare_chunks.clone());
        let mut feed = ResidentFeed::none();
        let state_cf = self.cf_handle(Cf::State.name())?;
        let mut state = StateWriter { batch: &mut batch, cf: state_cf, feed: &mut feed, write: true };
        self.write_changes(&mut state, vec![part], &mut log, batch_id, |_, _| false)?;
        if let Some((log_key, chunk)) = log.finish_chunk() {
            batch.put_cf(self.cf_handle(CHANGELOG)?, log_key, &chunk);
            self.spare_chunks.give_back(chunk);
        }
        ahead.next_chunk = log.next_chunk();
        self.db.write(batch).with_context(|| {
            format!("cannot write batch {batch_id}'s state changes to the state store in {}", self.path.display())
        })?;
        Ok(true)
    }

    /// Writes every change of `txn`, and `batch_id` as the committed batch, atomically
    /// and durably.
    pub fn commit(&self, txn: StateTxn, batch_id: u64) -> Result<()> {
        self.commit_all(vec![txn], batch_id)
    }

    /// Writes every change of all `txns` (which touch disjoint keys, e.g. one per
    /// shard) and `batch_id` as the committed batch, in one atomic, durable write.
    /// While the state is held in memory, a batch whose state changes all have
    /// change-log records leaves them unwritten in the `state` family for a while
    /// (see [`unwritten`](super::unwritten)).
    pub fn commit_all(&self, mut txns: Vec<StateTxn>, batch_id: u64) -> Result<()> {
        for txn in &mut txns {
            txn.pack_timers(false)?;
        }
        // The in-memory copy changes with the write batch, once no transaction reads it:
        // on a second thread, fed each state change as the batch takes it.
        txns.iter_mut().for_each(|txn| txn.resident = None);
        // Room for every change and its change-log copy up front (a write batch that
        // grows copies itself each time it doubles): the buffered bytes count each
        // change's key and value plus 64, about what the two copies take.
        let buffered: u64 = txns.iter().map(StateTxn::buffered_bytes).sum();
        let mut batch = WriteBatch::with_capacity_bytes(buffered as usize + buffered as usize / 4 + 4096);
        let copy = self.take_copy_for_commit(&mut batch, &txns, batch_id)?;
        let deferring = copy.as_ref().is_some_and(ResidentState::deferring);
        // Only a copy that left changes unwritten can be lost with them.
        let may_lag = copy.as_ref().is_some_and(|copy| copy.unwritten_from().is_some());
        let (written, changed) = std::thread::scope(|scope| {
            let (mut feed, applier) = ResidentFeed::start(scope, copy);
            let written = self.write_batch(&mut batch, txns, batch_id, &mut feed, !deferring).and_then(|()| {
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
        if written.is_ok() {
            self.ahead.committed(batch_id);
        }
        let committed = match changed {
            Some(Ok(Some(mut copy))) if written.is_ok() => {
                copy.set_deferring(false);
                self.resident.put_back(copy);
                written
            }
            // Without the copy, reads go to the family: it must have every change (also
            // when the commit failed after taking a copy that lagged and was shared).
            _ if may_lag || written.is_err() => written.and(self.catch_up()),
            _ => written,
        };
        self.load_set_aside(committed.is_ok(), batch_id);
        committed
    }

    /// After batch `batch_id`'s commit, loads the in-memory copy its write-ahead set
    /// aside again (the family has every committed change then), when the state still
    /// fits the copy's budget. A copy that cannot be loaded leaves reads on RocksDB:
    /// the commit stands.
    fn load_set_aside(&self, committed: bool, batch_id: u64) {
        let Some(budget) = self.resident.take_set_aside() else { return };
        if !committed {
            return;
        }
        let loaded =
            self.cf_handle(Cf::State.name()).and_then(|state| self.resident.load_again(&self.db, state, budget));
        if let Err(error) = loaded {
            crate::log::warn(&format!(
                "after batch {batch_id}, whose changes were written ahead of its commit, the state in {} could not \
                 be loaded into memory again (state reads go to RocksDB): {error:#}",
                self.path.display()
            ));
        }
    }

    /// Takes the in-memory copy (if any) for the commit of `txns` as batch `batch_id`
    /// and decides whether the commit leaves its state changes unwritten: it can when
    /// every change has a change-log record. Adds to `batch` what the family lacks when
    /// it is to be written now (a commit that cannot defer, a copy that a transaction
    /// still reads and that is dropped, or when [`ResidentState::unwritten_due`]), and
    /// the mark of the first unwritten batch.
    fn take_copy_for_commit(
        &self,
        batch: &mut WriteBatch,
        txns: &[StateTxn],
        batch_id: u64,
    ) -> Result<Option<ResidentState>> {
        let (state, meta) = (self.cf_handle(Cf::State.name())?, self.cf_handle(Cf::Meta.name())?);
        match self.resident.take_for_commit() {
            Taken::None => Ok(None),
            Taken::Shared(copy) => {
                if copy.unwritten_from().is_some() {
                    copy.write_unwritten(batch, state);
                    batch.delete_cf(meta, UNWRITTEN_FROM);
                }
                Ok(None)
            }
            Taken::Owned(mut copy) => {
                // A batch of changes larger than the copy's whole budget (which would
                // drop the copy at this commit) writes them now rather than replay them
                // from the change log.
                let buffered: u64 = txns.iter().map(StateTxn::buffered_bytes).sum();
                let defer = copy.could_take(buffered) && txns.iter().all(StateTxn::logs_every_state_change);
                let lagging = copy.unwritten_from().is_some();
                if lagging && (!defer || copy.unwritten_due(batch_id)) {
                    copy.write_unwritten(batch, state);
                    copy.mark_written(None);
                }
                if defer && copy.unwritten_from().is_none() {
                    batch.put_cf(meta, UNWRITTEN_FROM, batch_id.to_be_bytes());
                    copy.mark_written(Some(batch_id));
                } else if !defer && lagging {
                    batch.delete_cf(meta, UNWRITTEN_FROM);
                }
                copy.set_deferring(defer);
                Ok(Some(copy))
            }
        }
    }

    /// Writes to the `state` family the changes of every batch it lacks (after a
    /// crash, or when the in-memory copy that had them is gone), from the change log.
    fn catch_up(&self) -> Result<()> {
        let caught_up = unwritten::catch_up(
            &self.db,
            self.cf_handle(Cf::State.name())?,
            self.cf_handle(CHANGELOG)?,
            self.cf_handle(Cf::Meta.name())?,
        )
        .with_context(|| format!("cannot bring the state store in {} up to its change log", self.path.display()))?;
        if caught_up {
            crate::log::debug("state changes replayed from the change log into the state store");
        }
        Ok(())
    }

    /// Adds every change of `txns` and `batch_id` as the committed batch to `batch`;
    /// the state changes also go to `feed`, and to the `state` family only when
    /// `write_state` (not when the commit leaves them unwritten).
    fn write_batch(
        &self,
        batch: &mut WriteBatch,
        mut txns: Vec<StateTxn>,
        batch_id: u64,
        feed: &mut ResidentFeed,
        write_state: bool,
    ) -> Result<()> {
        let mut log = ChangeLogWriter::new(batch_id, self.ahead.first_chunk(batch_id)?, self.spare_chunks.clone());
        // Dropped ranges first, so that every transaction's own puts in them stay; its
        // deletes there are already done by the range. (Every shard may drop the same.)
        let mut dropped: Vec<(Cf, Vec<u8>, Vec<u8>)> =
            txns.iter_mut().flat_map(|txn| std::mem::take(&mut txn.dropped_ranges)).collect();
        dropped.sort_by_key(|(cf, ..)| *cf as usize);
        dropped.dedup();
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
        let mut state = StateWriter { batch, cf: self.cf_handle(Cf::State.name())?, feed, write: write_state };
        self.write_changes(&mut state, txns, &mut log, batch_id, covered)?;
        if let Some((log_key, chunk)) = log.finish_chunk() {
            batch.put_cf(self.cf_handle(CHANGELOG)?, log_key, &chunk);
            self.spare_chunks.give_back(chunk);
        }
        batch.put_cf(self.cf_handle(Cf::Meta.name())?, COMMITTED_BATCH, batch_id.to_be_bytes());
        Ok(())
    }

    /// Adds every change of `txns` to `state`'s write batch (the state changes through
    /// `state`, each with its change-log record in `log`), but the deletions `covered`
    /// says a dropped range does already.
    fn write_changes(
        &self,
        state: &mut StateWriter,
        txns: Vec<StateTxn>,
        log: &mut ChangeLogWriter,
        batch_id: u64,
        covered: impl Fn(Cf, &[u8]) -> bool,
    ) -> Result<()> {
        let changelog_cf = self.cf_handle(CHANGELOG)?;
        // Each change moves from the buffer into the write batch (the buffer shrinks as
        // the batch grows), so the commit does not hold both whole.
        for txn in txns {
            let [overlay, rest @ ..] = txn.overlay;
            // The stage's own records: the stored ones among them are stored, in order.
            for chunk in txn.records.into_chunks() {
                let Some(stored) = changelog::records(&chunk, View::Stored) else {
                    bail!(
                        "a stage's change-log records of batch {batch_id} are corrupt (a record is cut short or of an unknown kind)"
                    );
                };
                for (key, value) in stored {
                    state.write(key.to_vec(), value.map(<[u8]>::to_vec));
                }
                state.batch.put_cf(changelog_cf, log.next_chunk_key(), &chunk);
                self.spare_chunks.give_back(chunk);
            }
            // State changes in key order (RocksDB inserts a sorted run fastest); of a key
            // changed twice blindly, the last change. The overlay holds each key once:
            // without blind changes its sorted changes are written as they come.
            debug_assert!(txn.blind.iter().all(|(key, _)| overlay.get(key).is_none()), "a key changed blindly and not");
            let mut write = |(key, change): (Vec<u8>, Change)| {
                if let Some((log_key, chunk)) = log.record(&key, change.as_deref()) {
                    state.batch.put_cf(changelog_cf, log_key, &chunk);
                    self.spare_chunks.give_back(chunk);
                }
                state.write(key, change);
            };
            if txn.blind.is_empty() {
                overlay.into_sorted().for_each(&mut write);
            } else {
                let mut changes: Vec<(Vec<u8>, Change)> = overlay.into_sorted().collect();
                changes.extend(txn.blind);
                changes.sort_by(|a, b| a.0.cmp(&b.0));
                changes.dedup_by(|later, earlier| {
                    let same = later.0 == earlier.0;
                    if same {
                        std::mem::swap(later, earlier);
                    }
                    same
                });
                changes.into_iter().for_each(&mut write);
            }
            for (family, changes) in [Cf::Timers, Cf::TimerIndex, Cf::Meta, Cf::TtlIndex].into_iter().zip(rest) {
                let cf = self.cf_handle(family.name())?;
                for (key, change) in changes.into_sorted() {
                    match change {
                        Some(value) => state.batch.put_cf(cf, key, value),
                        None if covered(family, &key) => {}
                        None => state.batch.delete_cf(cf, key),
                    }
                }
            }
        }
        Ok(())
    }

    /// The id of the last committed batch, if any.
    pub fn committed_batch(&self) -> Result<Option<u64>> {
        let raw = self.db.get_cf(self.cf_handle(Cf::Meta.name())?, COMMITTED_BATCH)?;
        Ok(raw.and_then(|bytes| Some(u64::from_be_bytes(bytes.as_slice().try_into().ok()?))))
    }

    /// Writes a consistent copy of the store into `dir` (a RocksDB checkpoint: hard
    /// links to its files), published by a rename so a half-made snapshot is never seen,
    /// and the rename synced to disk.
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
        // The rename is durable only once the directory that holds it is synced.
        crate::util::fs::sync_parent(dir)
    }

    /// Deletes the change log of every batch before `batch_id` but of those whose
    /// changes the `state` family lacks.
    pub fn prune_changelog(&self, batch_id: u64) -> Result<()> {
        let cf = self.cf_handle(CHANGELOG)?;
        let unwritten_from = match self.read_meta(UNWRITTEN_FROM)? {
            Some(raw) => unwritten::decode_batch(&raw)?,
            None => u64::MAX,
        };
        Ok(self.db.delete_range_cf(cf, 0u64.to_be_bytes(), batch_id.min(unwritten_from).to_be_bytes())?)
    }

    /// The number of live state entries: exact with the in-memory copy, else RocksDB's
    /// estimate.
    pub fn estimated_state_entries(&self) -> u64 {
        self.resident
            .inspect(|copy| copy.len() as u64)
            .unwrap_or_else(|| self.int_property(Cf::State, "rocksdb.estimate-num-keys"))
    }

    /// Estimated bytes of live state (state entries on disk and in memtables; of the
    /// in-memory copy when there is one).
    pub fn estimated_state_bytes(&self) -> u64 {
        self.resident.inspect(|copy| copy.entry_bytes() as u64).unwrap_or_else(|| {
            self.int_property(Cf::State, "rocksdb.estimate-live-data-size")
                + self.int_property(Cf::State, "rocksdb.size-all-mem-tables")
        })
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
        if cf == Cf::State
            && let Some(value) = self.resident.inspect(|copy| copy.get(key).map(<[u8]>::to_vec))
        {
            return Ok(value);
        }
        Ok(self.db.get_cf(self.cf_handle(cf.name())?, key)?)
    }

    fn read_meta(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get_cf(self.cf_handle(Cf::Meta.name())?, key)?)
    }

    fn cf_handle(&self, name: &str) -> Result<&rocksdb::ColumnFamily> {
        self.db
            .cf_handle(name)
            .with_context(|| format!("the state store in {} lacks column family {name}", self.path.display()))
    }
}

/// Where a commit's state changes go: the write batch (unless the commit leaves them
/// unwritten) and the in-memory copy when there is one.
struct StateWriter<'a> {
    batch: &'a mut WriteBatch,
    cf: &'a rocksdb::ColumnFamily,
    feed: &'a mut ResidentFeed,
    write: bool,
}

impl StateWriter<'_> {
    /// A change of the state entry `key` (`None`: deleted).
    fn write(&mut self, key: Vec<u8>, change: Option<Vec<u8>>) {
        if self.write {
            match &change {
                Some(value) => self.batch.put_cf(self.cf, &key, value),
                None => self.batch.delete_cf(self.cf, &key),
            }
        }
        if self.feed.is_fed() {
            self.feed.push(match change {
                Some(value) => ResidentChange::Put(key, value),
                None => ResidentChange::Delete(key),
            });
        }
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "ahead_tests.rs"]
mod ahead_tests;

#[cfg(test)]
#[path = "timer_tests.rs"]
mod timer_tests;
