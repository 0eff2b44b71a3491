//! The committed state entries held in memory while they fit: a read of a state key
//! (there or not) is then answered by one hash lookup instead of a RocksDB read,
//! which searches the memtables and checks every table file's filter, and for an
//! entry written a batch ago reads its block. A stateful job's live state is often
//! small (the open windows, a count per key) while it reads a key or two per row.
//!
//! The copy is complete or absent: loaded when the query opens (when the state fits
//! the budget), changed by each commit exactly as the commit changes RocksDB, and
//! dropped for good (reads go to RocksDB again) once the state outgrows the budget or
//! a commit fails. Transactions read the copy of the batch before theirs; a commit
//! changes it only when no transaction reads it any more.

use std::collections::HashMap;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::{Scope, ScopedJoinHandle};

use anyhow::Result;
use rocksdb::{ColumnFamily, DB, IteratorMode};
use xxhash_rust::xxh3::Xxh3DefaultBuilder;

/// What one entry is counted as beyond its key and value: the two vectors' headers,
/// the hash table's slot and the allocator's rounding.
const ENTRY_OVERHEAD_BYTES: usize = 96;

/// A complete copy of the committed `Cf::State` entries.
#[derive(Default)]
pub struct ResidentState {
    entries: HashMap<Vec<u8>, Vec<u8>, Xxh3DefaultBuilder>,
    bytes: usize,
    /// The most `bytes` may be.
    budget: usize,
}

impl ResidentState {
    /// The committed value at `key` (`None`: there is none; the copy is complete).
    pub fn get(&self, key: &[u8]) -> Option<&Vec<u8>> {
        self.entries.get(key)
    }

    /// Reads every entry of `db`'s column family `state`, or `None` when they take
    /// more than `budget`.
    fn load(db: &DB, state: &ColumnFamily, budget: usize) -> Result<Option<Self>> {
        let mut copy = ResidentState { budget, ..ResidentState::default() };
        for item in db.iterator_cf(state, IteratorMode::Start) {
            let (key, value) = item?;
            copy.put(key.into_vec(), value.into_vec());
            if copy.bytes > budget {
                return Ok(None);
            }
        }
        Ok(Some(copy))
    }

    /// Makes `changes`, in order.
    fn apply(&mut self, changes: Vec<ResidentChange>) {
        for change in changes {
            match change {
                ResidentChange::Put(key, value) => self.put(key, value),
                ResidentChange::Delete(key) => self.delete(&key),
                ResidentChange::DropRange(start, end) => self.delete_range(&start, &end),
            }
        }
    }

    /// Sets `key` to `value`.
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        let (key_len, value_len) = (key.len(), value.len());
        match self.entries.insert(key, value) {
            Some(old) => self.bytes = self.bytes - old.len() + value_len,
            None => self.bytes += key_len + value_len + ENTRY_OVERHEAD_BYTES,
        }
    }

    /// Removes `key`.
    fn delete(&mut self, key: &[u8]) {
        if let Some((key, value)) = self.entries.remove_entry(key) {
            self.bytes -= key.len() + value.len() + ENTRY_OVERHEAD_BYTES;
        }
    }

    /// Removes every key with `start <= key < end`.
    fn delete_range(&mut self, start: &[u8], end: &[u8]) {
        let mut removed = 0;
        self.entries.retain(|key, value| {
            let keep = key.as_slice() < start || key.as_slice() >= end;
            if !keep {
                removed += key.len() + value.len() + ENTRY_OVERHEAD_BYTES;
            }
            keep
        });
        self.bytes -= removed;
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

/// How many changes go to the copy's thread at a time.
const FEED_CHUNK: usize = 4096;

/// Hands a commit's state changes, in order, to a thread that makes them in the
/// copy while the commit goes on (so the changes need not be held until the end).
pub struct ResidentFeed {
    sender: Option<SyncSender<Vec<ResidentChange>>>,
    pending: Vec<ResidentChange>,
}

impl ResidentFeed {
    /// Starts the thread that changes `copy` (none without a copy); joined, it
    /// returns the copy with every change fed before [`finish`](Self::finish), or
    /// `None` once the copy outgrew its budget (dropped right then, not at the end).
    pub fn start<'scope>(
        scope: &'scope Scope<'scope, '_>,
        copy: Option<ResidentState>,
    ) -> (Self, Option<ScopedJoinHandle<'scope, Option<ResidentState>>>) {
        let Some(copy) = copy else { return (ResidentFeed { sender: None, pending: Vec::new() }, None) };
        let (sender, receiver) = sync_channel::<Vec<ResidentChange>>(8);
        let applier = scope.spawn(move || {
            let mut copy = Some(copy);
            for changes in receiver {
                let Some(held) = copy.as_mut() else { continue };
                held.apply(changes);
                if held.bytes > held.budget {
                    crate::log::info(&format!(
                        "the state outgrew its in-memory copy's budget (state-in-memory, {} bytes): state reads \
                         go to RocksDB",
                        held.budget
                    ));
                    copy = None;
                }
            }
            copy
        });
        (ResidentFeed { sender: Some(sender), pending: Vec::with_capacity(FEED_CHUNK) }, Some(applier))
    }

    /// Whether there is a copy to change.
    pub fn is_fed(&self) -> bool {
        self.sender.is_some()
    }

    /// Feeds the next change.
    pub fn push(&mut self, change: ResidentChange) {
        self.pending.push(change);
        if self.pending.len() >= FEED_CHUNK {
            self.send();
        }
    }

    /// Feeds what is pending and ends the feed.
    pub fn finish(&mut self) {
        self.send();
        self.sender = None;
    }

    fn send(&mut self) {
        if let Some(sender) = &self.sender {
            let changes = std::mem::replace(&mut self.pending, Vec::with_capacity(FEED_CHUNK));
            // The thread ended early only by a panic: its copy is not put back.
            if sender.send(changes).is_err() {
                self.sender = None;
            }
        }
    }
}

/// The store's copy, shared by the store's clones.
#[derive(Clone, Default)]
pub struct Resident {
    copy: Arc<Mutex<Option<Arc<ResidentState>>>>,
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

    /// Takes the copy for a commit to change, when no transaction still reads it
    /// (otherwise it is dropped: a reader of it would see the commit's changes).
    pub fn take_for_commit(&self) -> Option<ResidentState> {
        let copy = self.lock().take()?;
        let taken = Arc::try_unwrap(copy).ok();
        if taken.is_none() {
            crate::log::debug("a transaction outlived its batch: state reads go to RocksDB from now on");
        }
        taken
    }

    /// Puts back the copy a successful commit changed.
    pub fn put_back(&self, copy: ResidentState) {
        *self.lock() = Some(Arc::new(copy));
    }

    /// The memory the copy takes (0 without one).
    pub fn bytes(&self) -> usize {
        self.lock().as_ref().map_or(0, |copy| copy.bytes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<ResidentState>>> {
        // Only whole copies are stored or taken: a panic elsewhere leaves none half-changed.
        self.copy.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
