//! The committed state entries held in memory while they fit: a read of a state key
//! (there or not) is then answered by a search of a sorted list (from where the
//! reader's last search ended) instead of a RocksDB read,
//! which searches the memtables and checks every table file's filter, and for an
//! entry written a batch ago reads its block. A stateful job's live state is often
//! small (the open windows, a count per key) while it reads a key or two per row.
//!
//! The copy is complete or absent: loaded when the query opens (when the state fits
//! the budget), changed by each commit exactly as the commit changes RocksDB, and
//! dropped for good (reads go to RocksDB again) once the state outgrows the budget or
//! a commit fails. A batch that writes its changes ahead of its commit sets it aside
//! until the commit, after which it is loaded again. Transactions read the copy of the
//! batch before theirs; a commit changes it only when no transaction reads it any more.
//!
//! The copy also marks the keys whose entry the `state` column family does not have
//! yet: the changes of commits that wrote only their change-log records (see
//! [`unwritten`](super::unwritten)); a key deleted so stays, value-less, until the
//! family has the deletion. Marks and entries share one list, so that the commit's
//! thread makes each change with one search.

use std::cell::Cell;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use hashbrown::HashTable;
use rocksdb::{ColumnFamily, DB, IteratorMode, WriteBatch};
use xxhash_rust::xxh3::xxh3_64;

use super::gallop;
use super::resident_held::Held;
use super::unwritten::WRITE_EVERY_BATCHES;

/// What one entry is counted as beyond its key and value: its place in the list (with
/// the list's spare room), its length prefix and the allocator's rounding.
const ENTRY_OVERHEAD_BYTES: usize = 64;

/// How far past a read's first entry the entries whose bytes it prefetches start, and
/// how many: about the entries of the next key or two (a key holds two or three).
const READ_AHEAD_FROM: usize = 2;
const READ_AHEAD_ENTRIES: usize = 6;

/// What one unwritten key is counted as beyond its bytes.
const UNWRITTEN_OVERHEAD_BYTES: usize = 48;

/// The table's hash of a key (of the keys a commit adds, until they are merged in).
fn hash(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// Where `key` is in `entries`, or where it would go, searched from `hint`.
fn search(entries: &[Held], key: &[u8], hint: usize) -> Result<usize, usize> {
    gallop::search(entries, key, hint, Held::key)
}

/// Where a commit finds a key of the copy.
#[derive(Clone, Copy)]
enum Place {
    /// `entries[at]`.
    Entries(usize),
    /// `fresh[at]`.
    Fresh(usize),
    /// Not held.
    Absent,
}

/// A complete copy of the committed `Cf::State` entries, in key order: every key whose
/// entry is here or is to be deleted from the family. A batch reads keys in about
/// that order (grouped by key group, then key), so a read searches from where the
/// reader's last one ended ([`get_near`](Self::get_near)) and walks memory forwards
/// (a hash table's reads each missed the cache two or three times: 9 % of the
/// WebAssembly running count's CPU). A commit's changes come in key order too: it
/// changes the entries it finds in place, and the first key it adds before the last
/// entry starts a merge, which from there moves each entry up to the next changed key
/// into place (a change of a key before the last one merged, rare, changes the entry
/// it finds or gathers its key aside); what the merge did not reach, and the keys
/// gathered aside, are placed when the commit ends ([`settle`](Self::settle)).
#[derive(Default)]
pub struct ResidentState {
    /// The entries in key order; a commit's deleted ones stay dead (see
    /// [`Held::is_dead`]) until it settles. While a commit's changes are merged, the
    /// entries before the last key merged (the rest are in `unmerged`).
    entries: Vec<Held>,
    /// While a commit's changes are merged: the entries after the last key merged, in
    /// key order, not yet moved into `entries`.
    unmerged: Option<std::vec::IntoIter<Held>>,
    /// Where the last change was found in `entries` (the next is usually just after).
    cursor: usize,
    /// The keys a commit adds that sort before the last of `entries`, until it settles.
    fresh: Vec<Held>,
    /// The place in `fresh` of each of its keys.
    fresh_index: HashTable<usize>,
    /// How many of `entries` are dead.
    dead: usize,
    /// How many entries have a value.
    live: usize,
    bytes: usize,
    /// The most `bytes` may be.
    budget: usize,
    /// How many entries are unwritten, and what they count as.
    unwritten: UnwrittenCount,
    /// The first batch whose changes the family lacks (the store's `UNWRITTEN_FROM`).
    unwritten_from: Option<u64>,
    /// Whether the changes being applied are left unwritten (a deferring commit's).
    deferring: bool,
}

impl ResidentState {
    /// The committed value at `key` (`None`: there is none; the copy is complete).
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let at = self.entries.binary_search_by(|held| held.key().cmp(key)).ok()?;
        self.entries[at].value()
    }

    /// [`get`](Self::get), searching from `finger` (where the reader's last search
    /// ended), which it moves to where this one ends.
    pub fn get_near(&self, key: &[u8], finger: &Cell<usize>) -> Option<&[u8]> {
        let found = search(&self.entries, key, finger.get());
        finger.set(found.unwrap_or_else(|at| at));
        found.ok().and_then(|at| self.entries[at].value())
    }

    /// The committed entries whose keys start with `prefix`, in key order, searching
    /// from `finger` as [`get_near`](Self::get_near) does.
    pub fn prefixed_near<'a>(
        &'a self,
        prefix: &'a [u8],
        finger: &Cell<usize>,
    ) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let from = search(&self.entries, prefix, finger.get()).unwrap_or_else(|at| at);
        finger.set(from);
        // The next reads (keys in order) search and walk the entries just after these:
        // their bytes, each an allocation of its own, start loading now.
        for ahead in self.entries.iter().skip(from + READ_AHEAD_FROM).take(READ_AHEAD_ENTRIES) {
            ahead.prefetch();
        }
        self.entries[from..]
            .iter()
            .take_while(move |held| held.key().starts_with(prefix))
            .filter_map(|held| Some((held.key(), held.value()?)))
    }

    /// How many entries the committed state holds.
    pub fn len(&self) -> usize {
        self.live
    }

    /// What the entries take, in bytes (with their overhead).
    pub fn entry_bytes(&self) -> usize {
        self.bytes
    }

    /// Whether the changes being applied are left unwritten.
    pub fn deferring(&self) -> bool {
        self.deferring
    }

    /// Whether the unwritten changes are to be written with the commit of `batch_id`:
    /// every [`WRITE_EVERY_BATCHES`] batches, or once they take a quarter of the budget.
    pub fn unwritten_due(&self, batch_id: u64) -> bool {
        self.unwritten_from.is_some_and(|from| batch_id >= from.saturating_add(WRITE_EVERY_BATCHES))
            || self.unwritten.bytes > self.budget / 4
    }

    /// Whether a batch's changes of `bytes` (as its transactions count them, timers
    /// and deletions included: far more than the copy grows by) are within the budget.
    pub fn could_take(&self, bytes: u64) -> bool {
        usize::try_from(bytes).is_ok_and(|bytes| bytes <= self.budget)
    }

    /// The first batch whose changes the `state` family lacks, if any.
    pub fn unwritten_from(&self) -> Option<u64> {
        self.unwritten_from
    }

    /// The unwritten keys with `start <= key < end`, in key order, each with its
    /// committed value (`None`: deleted): what a range read of the family must see
    /// in place of the family's own entries of those keys.
    pub fn unwritten_in(&self, start: &[u8], end: Option<&[u8]>) -> Vec<(&[u8], Option<&[u8]>)> {
        if self.unwritten.keys == 0 {
            return Vec::new();
        }
        let from = self.entries.partition_point(|held| held.key() < start);
        self.entries[from..]
            .iter()
            .take_while(|held| end.is_none_or(|end| held.key() < end))
            .filter(|held| held.unwritten.is_some())
            .map(|held| (held.key(), held.value()))
            .collect()
    }

    /// Adds to `batch` what brings the `state` family (`cf`) up to this copy: each
    /// unwritten key's entry, in key order.
    pub fn write_unwritten(&self, batch: &mut WriteBatch, cf: &ColumnFamily) {
        for held in self.marked() {
            match held.value() {
                Some(value) => batch.put_cf(cf, held.key(), value),
                None => batch.delete_cf(cf, held.key()),
            }
        }
    }

    /// Records that the family now has every entry (after [`write_unwritten`](Self::write_unwritten)'s
    /// batch was written) and that, from `batch` on (if given), it lacks the changes again.
    pub fn mark_written(&mut self, unwritten_from: Option<u64>) {
        debug_assert!(
            self.fresh.is_empty() && self.unmerged.is_none(),
            "a copy is written while a commit applies to it"
        );
        if self.unwritten.keys > 0 {
            self.entries.retain_mut(|held| {
                held.unwritten = None;
                held.has_value
            });
            self.dead = 0;
        }
        self.unwritten.keys = 0;
        self.unwritten.bytes = 0;
        self.unwritten_from = unwritten_from;
    }

    /// Makes the changes applied from now on unwritten ones (`deferring`) or not.
    pub fn set_deferring(&mut self, deferring: bool) {
        self.deferring = deferring;
    }

    /// Reads every entry of `db`'s column family `state`, or `None` when they take
    /// more than `budget`.
    fn load(db: &DB, state: &ColumnFamily, budget: usize) -> Result<Option<Self>> {
        let mut copy = ResidentState { budget, ..ResidentState::default() };
        for item in db.iterator_cf(state, IteratorMode::Start) {
            let (key, value) = item?;
            copy.put(&key, &value);
            if copy.bytes > budget {
                return Ok(None);
            }
        }
        copy.settle();
        Ok(Some(copy))
    }

    /// Whether the copy takes more than its budget.
    pub(super) fn over_budget(&self) -> bool {
        self.bytes + self.unwritten.bytes > self.budget
    }

    /// The copy's budget, in bytes.
    pub(super) fn budget(&self) -> usize {
        self.budget
    }

    /// Makes `changes`, in order; [`settle`](Self::settle) after the last of a commit.
    pub(super) fn apply(&mut self, changes: Vec<ResidentChange>) {
        for change in changes {
            match change {
                ResidentChange::Put(key, value) => self.put(&key, &value),
                ResidentChange::Delete(key) => self.delete(&key),
                // Only commits that write their changes drop ranges.
                ResidentChange::DropRange(start, end) => self.delete_range(&start, &end),
            }
        }
    }

    /// Ends the merge of a commit's changes: the entries it did not reach go after
    /// the ones it did.
    fn end_merge(&mut self) {
        if let Some(unmerged) = self.unmerged.take() {
            self.entries.extend(unmerged);
        }
    }

    /// Merges the keys the commit added into `entries` and drops its dead entries.
    pub(super) fn settle(&mut self) {
        self.end_merge();
        if self.fresh.is_empty() && self.dead == 0 {
            return;
        }
        self.fresh_index.clear();
        let mut fresh = std::mem::take(&mut self.fresh);
        fresh.retain(|held| !held.is_dead());
        fresh.sort_unstable_by(|a, b| a.key().cmp(b.key()));
        let old = std::mem::take(&mut self.entries);
        let mut merged = Vec::with_capacity(old.len().saturating_sub(self.dead) + fresh.len());
        let (mut old, mut fresh) =
            (old.into_iter().filter(|held| !held.is_dead()).peekable(), fresh.into_iter().peekable());
        loop {
            let take_fresh = match (old.peek(), fresh.peek()) {
                (Some(a), Some(b)) => b.key() < a.key(),
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (None, None) => break,
            };
            merged.extend(if take_fresh { fresh.next() } else { old.next() });
        }
        self.entries = merged;
        self.dead = 0;
        self.cursor = 0;
    }

    /// Where `key` is held, if it is. While a commit's changes are merged (see
    /// [`put`](Self::put)), a key at or after the last of `entries` moves the unmerged
    /// entries up to it (and its own) into `entries`.
    fn place(&mut self, key: &[u8]) -> Place {
        if let Some(unmerged) = &mut self.unmerged
            && self.entries.last().is_none_or(|last| last.key() <= key)
        {
            while let Some(next) = unmerged.as_slice().first()
                && next.key() <= key
            {
                self.entries.extend(unmerged.next());
            }
            self.cursor = self.entries.len();
            return match self.entries.last() {
                Some(last) if last.key() == key => {
                    self.cursor -= 1;
                    Place::Entries(self.cursor)
                }
                _ => self.fresh_place(key),
            };
        }
        match search(&self.entries, key, self.cursor) {
            Ok(at) => {
                self.cursor = at;
                Place::Entries(at)
            }
            Err(at) => {
                self.cursor = at;
                self.fresh_place(key)
            }
        }
    }

    /// Where `key` is among the keys gathered aside, if it is.
    fn fresh_place(&self, key: &[u8]) -> Place {
        if self.fresh.is_empty() {
            return Place::Absent;
        }
        let fresh = &self.fresh;
        match self.fresh_index.find(hash(key), |at| fresh[*at].key() == key) {
            Some(at) => Place::Fresh(*at),
            None => Place::Absent,
        }
    }

    /// Sets `key` to `value`; the first key a commit adds before the last entry starts
    /// the merge (the entries after it wait in `unmerged`).
    fn put(&mut self, key: &[u8], value: &[u8]) {
        let (key_len, value_len) = (key.len(), value.len());
        let place = self.place(key);
        let held = match place {
            Place::Entries(at) => Some(&mut self.entries[at]),
            Place::Fresh(at) => Some(&mut self.fresh[at]),
            Place::Absent => None,
        };
        if let Some(held) = held
            && !held.is_dead()
        {
            match held.value() {
                Some(old) => self.bytes = self.bytes - old.len() + value_len,
                None => {
                    self.bytes += key_len + value_len + ENTRY_OVERHEAD_BYTES;
                    self.live += 1;
                }
            }
            held.set_value(Some(value));
            // A key here and written holds the same entry in the family.
            let family_holds = held.unwritten.unwrap_or(true);
            self.unwritten.mark(&mut held.unwritten, self.deferring.then_some(family_holds), key_len);
            return;
        }
        // A new key (or a dead one back): the family does not hold it.
        self.bytes += key_len + value_len + ENTRY_OVERHEAD_BYTES;
        self.live += 1;
        let mut held = Held::new(key, Some(value));
        self.unwritten.mark(&mut held.unwritten, self.deferring.then_some(false), key_len);
        match place {
            Place::Entries(at) => {
                self.entries[at] = held;
                self.dead -= 1;
            }
            Place::Fresh(at) => self.fresh[at] = held,
            Place::Absent if self.entries.last().is_none_or(|last| last.key() < key) => {
                self.cursor = self.entries.len();
                self.entries.push(held);
            }
            // The first key added before the last entry starts the merge there (the
            // search left the cursor where the key goes).
            Place::Absent if self.unmerged.is_none() => {
                let after = self.entries.split_off(self.cursor);
                self.unmerged = Some(after.into_iter());
                self.cursor = self.entries.len();
                self.entries.push(held);
            }
            Place::Absent => {
                let at = self.fresh.len();
                self.fresh.push(held);
                let fresh = &self.fresh;
                self.fresh_index.insert_unique(hash(key), at, |at| hash(fresh[*at].key()));
            }
        }
    }

    /// Deletes `key`.
    fn delete(&mut self, key: &[u8]) {
        let place = self.place(key);
        let held = match place {
            Place::Entries(at) => &mut self.entries[at],
            Place::Fresh(at) => &mut self.fresh[at],
            Place::Absent => return,
        };
        let Some(old) = held.value() else { return };
        self.bytes -= key.len() + old.len() + ENTRY_OVERHEAD_BYTES;
        self.live -= 1;
        let family_holds = held.unwritten.unwrap_or(true);
        if self.deferring && family_holds {
            // Kept, value-less, until the family has the deletion.
            held.set_value(None);
            self.unwritten.mark(&mut held.unwritten, Some(true), key.len());
        } else {
            self.unwritten.mark(&mut held.unwritten, None, key.len());
            held.set_value(None);
            if let Place::Entries(_) = place {
                self.dead += 1;
            }
        }
    }

    /// Removes every key with `start <= key < end`.
    fn delete_range(&mut self, start: &[u8], end: &[u8]) {
        self.end_merge();
        let from = self.entries.partition_point(|held| held.key() < start);
        let to = self.entries.partition_point(|held| held.key() < end);
        for held in self.entries[from..to.max(from)].iter_mut().chain(&mut self.fresh) {
            let key_len = held.key_len();
            if held.is_dead() || held.key() < start || held.key() >= end {
                continue;
            }
            if let Some(value) = held.value() {
                self.bytes -= key_len + value.len() + ENTRY_OVERHEAD_BYTES;
                self.live -= 1;
            }
            self.unwritten.mark(&mut held.unwritten, None, key_len);
            held.set_value(None);
        }
        self.dead = self.entries.iter().filter(|held| held.is_dead()).count();
    }

    /// The unwritten keys, in key order (when settled).
    fn marked(&self) -> impl Iterator<Item = &Held> {
        self.entries.iter().filter(|held| held.unwritten.is_some())
    }
}

/// How many keys of the copy are unwritten, and what they count as.
#[derive(Default)]
struct UnwrittenCount {
    keys: usize,
    bytes: usize,
}

impl UnwrittenCount {
    /// Sets a key's unwritten mark (`current`) to `new`, keeping the counts.
    fn mark(&mut self, current: &mut Option<bool>, new: Option<bool>, key_len: usize) {
        match (current.is_some(), new.is_some()) {
            (false, true) => {
                self.keys += 1;
                self.bytes += key_len + UNWRITTEN_OVERHEAD_BYTES;
            }
            (true, false) => {
                self.keys -= 1;
                self.bytes -= key_len + UNWRITTEN_OVERHEAD_BYTES;
            }
            _ => {}
        }
        *current = new;
    }
}

/// A change of the state entries, as a commit makes it.
pub enum ResidentChange {
    /// An entry set to a value.
    Put(Vec<u8>, Vec<u8>),
    /// An entry deleted.
    Delete(Vec<u8>),
    /// Every entry with `start <= key < end` deleted.
    DropRange(Vec<u8>, Vec<u8>),
}

/// The copy as a commit takes it.
pub enum Taken {
    /// The store holds no copy.
    None,
    /// No transaction reads it: the commit changes it and puts it back.
    Owned(ResidentState),
    /// A transaction still reads it: dropped after the commit.
    Shared(Arc<ResidentState>),
}

/// The store's copy, shared by the store's clones.
#[derive(Clone, Default)]
pub struct Resident {
    copy: Arc<Mutex<Option<Arc<ResidentState>>>>,
    /// The budget of a copy set aside while a batch writes its changes ahead of its
    /// commit, to be loaded again once the batch commits.
    set_aside: Arc<Mutex<Option<usize>>>,
}

impl Resident {
    /// Loads the copy of `db`'s column family `state` when it fits in `budget` bytes;
    /// returns whether it did.
    pub fn load(&self, db: &DB, state: &ColumnFamily, budget: usize) -> Result<bool> {
        let copy = ResidentState::load(db, state, budget)?.map(Arc::new);
        let loaded = copy.is_some();
        *self.lock() = copy;
        Ok(loaded)
    }

    /// The copy for a new transaction to read, if there is one.
    pub fn reader(&self) -> Option<Arc<ResidentState>> {
        self.lock().clone()
    }

    /// Takes the copy for a commit to change: owned when no transaction still reads
    /// it; otherwise shared, and no longer the store's (a reader of it would see the
    /// commit's changes), for the commit to write what the family lacks of it.
    pub fn take_for_commit(&self) -> Taken {
        let Some(copy) = self.lock().take() else { return Taken::None };
        match Arc::try_unwrap(copy) {
            Ok(copy) => Taken::Owned(copy),
            Err(shared) => {
                crate::log::debug("a transaction outlived its batch: state reads go to RocksDB from now on");
                Taken::Shared(shared)
            }
        }
    }

    /// Drops the copy until [`load_again`](Self::load_again): the store's reads go to
    /// RocksDB meanwhile.
    pub fn set_aside(&self) {
        if let Some(copy) = self.lock().take() {
            *lock(&self.set_aside) = Some(copy.budget());
        }
    }

    /// The budget of the copy set aside (if one was), no longer remembered.
    pub fn take_set_aside(&self) -> Option<usize> {
        lock(&self.set_aside).take()
    }

    /// Loads the copy set aside with `budget` again from `db`'s column family `state`,
    /// when the state still fits it; returns whether it did. A state that RocksDB's
    /// estimates put over the budget is not read in vain.
    pub fn load_again(&self, db: &DB, state: &ColumnFamily, budget: usize) -> Result<bool> {
        let estimate = |name| db.property_int_value_cf(state, name).ok().flatten().unwrap_or(0);
        let at_least = estimate("rocksdb.estimate-num-keys")
            .saturating_mul(ENTRY_OVERHEAD_BYTES as u64)
            .saturating_add(estimate("rocksdb.estimate-live-data-size"));
        if at_least > budget as u64 {
            return Ok(false);
        }
        self.load(db, state, budget)
    }

    /// Puts back the copy a successful commit changed.
    pub fn put_back(&self, copy: ResidentState) {
        *self.lock() = Some(Arc::new(copy));
    }

    /// The memory the copy takes (0 without one).
    pub fn bytes(&self) -> usize {
        self.lock().as_ref().map_or(0, |copy| copy.bytes + copy.unwritten.bytes)
    }

    /// `f` of the copy, if there is one.
    pub fn inspect<R>(&self, f: impl FnOnce(&ResidentState) -> R) -> Option<R> {
        self.lock().as_deref().map(f)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<ResidentState>>> {
        lock(&self.copy)
    }
}

/// Only whole values are stored or taken: a panic elsewhere leaves none half-changed.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
#[path = "resident_tests.rs"]
mod tests;
