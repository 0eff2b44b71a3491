//! The open windows of a window stage, in memory.
//!
//! The store holds every open window durably, packed by end (see
//! [`WindowStage`](super::WindowStage)); this table holds the same windows in memory so
//! that a batch reads none of them from RocksDB. It is laid out as the store is: by
//! *bucket* (an end in a key group: what one packed entry holds), so that the windows
//! the watermark closes are whole buckets taken off the front, and a changed bucket is
//! written back from its own list of windows, without a lookup per window. It is loaded
//! from the store on a stage's first batch and follows every batch the stage runs;
//! when the store's committed batch is not the last one it followed (a batch failed
//! before its commit), it is loaded again. Each window also records whether a batch
//! changed it and whether it is stored on its own rather than (only) in its bucket's
//! packed entry. Memory: about 60 bytes per aggregate plus 100 per open window.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use anyhow::{Context, Result};
use hashbrown::HashTable;
use xxhash_rust::xxh3::{Xxh3DefaultBuilder, xxh3_64};

use super::cbor;
use super::group_key::GroupKey;
use super::running::WindowState;
use super::window_value;
use crate::pipeline::AggregateFn;
use crate::state::{Cf, StateStore, layout, packed};

/// The windows of one end in one key group: what one packed entry holds.
pub type Bucket = (i64, u16);

/// One open window, with its group key.
#[derive(Debug)]
pub struct Slot {
    /// The group key (encoded).
    pub key: GroupKey,
    /// Its running aggregates.
    pub window: WindowState,
    /// Changed since its bucket was last written back.
    pub changed: bool,
    /// Stored as an entry of its own (newer than its bucket's packed entry, if any).
    pub single: bool,
}

/// The open windows of one bucket; a group key has at most one window in a bucket (its
/// start follows from the end, or, for sessions, two with one end would have merged).
#[derive(Debug, Default)]
pub struct BucketWindows {
    slots: Vec<Slot>,
    /// Each key's place in `slots`, hashed by the key (held in the slot only).
    index: HashTable<u32>,
    /// How many slots are changed.
    changed: usize,
}

impl BucketWindows {
    /// Its windows, in no particular order.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// Its windows, to write back (clearing their `changed` marks is the writer's).
    pub fn slots_mut(&mut self) -> &mut [Slot] {
        &mut self.slots
    }

    /// How many of its windows changed since it was last written back.
    pub fn changed(&self) -> usize {
        self.changed
    }

    /// Records that its changed windows were written back.
    pub fn written(&mut self) {
        self.changed = 0;
        self.slots.iter_mut().for_each(|slot| slot.changed = false);
    }

    fn position(&self, key: &[u8]) -> Option<usize> {
        self.position_hashed(xxh3_64(key), key)
    }

    /// The place of `key`, whose hash is `hash`.
    fn position_hashed(&self, hash: u64, key: &[u8]) -> Option<usize> {
        let slots = &self.slots;
        self.index.find(hash, |&at| *slots[at as usize].key == *key).map(|&at| at as usize)
    }

    fn insert(&mut self, slot: Slot) -> usize {
        self.insert_hashed(xxh3_64(&slot.key), slot)
    }

    /// Adds `slot`, whose key's hash is `hash` (and not in the bucket yet).
    fn insert_hashed(&mut self, hash: u64, slot: Slot) -> usize {
        self.changed += usize::from(slot.changed);
        let slots = &self.slots;
        self.index.insert_unique(hash, slots.len() as u32, |&at| xxh3_64(&slots[at as usize].key));
        self.slots.push(slot);
        self.slots.len() - 1
    }

    fn remove(&mut self, key: &[u8]) -> Option<Slot> {
        let slots = &self.slots;
        let at = self.index.find_entry(xxh3_64(key), |&at| *slots[at as usize].key == *key).ok()?.remove().0 as usize;
        let slot = self.slots.swap_remove(at);
        if let Some(moved) = self.slots.get(at) {
            // The last slot moved to `at`.
            let last = self.slots.len() as u32;
            let place = self.index.find_mut(xxh3_64(&moved.key), |&place| place == last);
            debug_assert!(place.is_some(), "a bucket's index lacks one of its windows");
            if let Some(place) = place {
                *place = at as u32;
            }
        }
        self.changed -= usize::from(slot.changed);
        Some(slot)
    }
}

/// Every open window of one window stage.
#[derive(Default)]
pub struct OpenWindows {
    /// The last batch whose changes the table holds (`None`: loaded before any commit).
    as_of: Option<u64>,
    buckets: BTreeMap<Bucket, BucketWindows>,
    /// The buckets closed since [`take_changed`](Self::take_changed).
    closed: Vec<Bucket>,
    /// Sessions only: the ends of each key's open sessions (fixed windows are found
    /// by their end, which their start gives).
    session_ends: Option<HashMap<GroupKey, Vec<i64>, Xxh3DefaultBuilder>>,
    windows: usize,
}

impl OpenWindows {
    /// The open windows of `operator` in `key_groups` as the store has them committed;
    /// `sessions` says whether they are session windows.
    pub fn load(
        store: &StateStore,
        operator: u16,
        key_groups: Range<u16>,
        now: i64,
        sessions: bool,
        functions: &[AggregateFn],
    ) -> Result<OpenWindows> {
        let mut table = OpenWindows { as_of: store.committed_batch()?, ..OpenWindows::default() };
        if sessions {
            table.session_ends = Some(HashMap::default());
        }
        let txn = store.begin();
        let bound = |group: u16| [operator.to_be_bytes(), group.to_be_bytes()].concat();
        // Key groups are below the count, a u16: the range's end is a key group's prefix.
        // In a key group, the packed entries (no grouping key) come before the windows
        // stored on their own, which are newer.
        for (raw_key, raw_value) in txn.scan_range(Cf::State, &bound(key_groups.start), Some(&bound(key_groups.end)))? {
            let single = !packed::is_packed(&raw_key);
            let entries = if single { vec![(&raw_key[..], &raw_value[..])] } else { packed::unpack(&raw_value)? };
            for (entry_key, value) in entries {
                let (_, key_group, key, _, map_key) =
                    layout::split_state_key(entry_key).context("a state key of the window stage is corrupt")?;
                let (expiry, payload) = layout::unstamp(value).context("a window's state in the store is corrupt")?;
                if expiry <= now {
                    continue;
                }
                let window = window_value::decode_start(map_key)
                    .and_then(|start| window_value::decode(start, payload, functions))
                    .context("a window's state in the store does not decode")?;
                let key = GroupKey::new(key);
                // Of two copies of a window, the later (stored on its own) is kept.
                let bucket = table.buckets.entry((window.end, key_group)).or_default();
                if let Some(at) = bucket.position(&key) {
                    bucket.slots[at].window = window;
                    bucket.slots[at].single = single;
                    continue;
                }
                if let Some(ends) = &mut table.session_ends {
                    ends.entry(key.clone()).or_default().push(window.end);
                }
                bucket.insert(Slot { key, window, changed: false, single });
                table.windows += 1;
            }
        }
        Ok(table)
    }

    /// Whether the table holds exactly what the store has committed (`committed`: the
    /// store's last committed batch).
    pub fn is_current(&self, committed: Option<u64>) -> bool {
        self.as_of == committed
    }

    /// Records that the table now holds batch `batch_id`'s changes.
    pub fn advance_to(&mut self, batch_id: u64) {
        self.as_of = Some(batch_id);
    }

    /// How many windows are open.
    pub fn len(&self) -> usize {
        self.windows
    }

    /// The key's open sessions (of a table of sessions), by start.
    pub fn sessions_of(&self, key: &[u8], key_group: u16) -> Vec<WindowState> {
        let ends = self.session_ends.as_ref().and_then(|ends| ends.get(key)).map_or(&[][..], Vec::as_slice);
        let mut sessions: Vec<WindowState> = ends
            .iter()
            .filter_map(|end| {
                let bucket = self.buckets.get(&(*end, key_group))?;
                Some(bucket.slots[bucket.position(key)?].window.clone())
            })
            .collect();
        sessions.sort_by_key(|w| w.start);
        sessions
    }

    /// Adds `partial` (one batch's rows of a fixed window) to the key's window with
    /// the same end, opening it if needed; returns the window as it now is.
    pub fn add(&mut self, key: &GroupKey, key_group: u16, partial: WindowState) -> &Slot {
        let windows = self.buckets.entry((partial.end, key_group)).or_default();
        let hash = xxh3_64(key);
        let at = match windows.position_hashed(hash, key) {
            Some(at) => {
                let slot = &mut windows.slots[at];
                slot.window.merge(&partial);
                if !slot.changed {
                    slot.changed = true;
                    windows.changed += 1;
                }
                at
            }
            None => {
                self.windows += 1;
                windows.insert_hashed(hash, Slot { key: key.clone(), window: partial, changed: true, single: false })
            }
        };
        &windows.slots[at]
    }

    /// Replaces the key's sessions by `sessions` (after merging; the stage stores
    /// sessions on their own, not packed).
    pub fn replace_sessions(&mut self, key: &GroupKey, key_group: u16, sessions: Vec<WindowState>) {
        let Some(session_ends) = &mut self.session_ends else { return };
        for end in session_ends.remove(&**key).unwrap_or_default() {
            let bucket = (end, key_group);
            if let Some(windows) = self.buckets.get_mut(&bucket)
                && windows.remove(key).is_some()
            {
                self.windows -= 1;
                if windows.slots.is_empty() {
                    self.buckets.remove(&bucket);
                }
            }
        }
        if !sessions.is_empty() {
            session_ends.insert(key.clone(), sessions.iter().map(|s| s.end).collect());
        }
        for session in sessions {
            let windows = self.buckets.entry((session.end, key_group)).or_default();
            windows.insert(Slot { key: key.clone(), window: session, changed: false, single: true });
            self.windows += 1;
        }
    }

    /// Whether a window ends at or before `watermark`.
    pub fn any_ending_by(&self, watermark: i64) -> bool {
        self.buckets.first_key_value().is_some_and(|((end, _), _)| *end <= watermark)
    }

    /// Removes and returns every bucket whose windows end at or before `watermark`, by
    /// end.
    pub fn close_until(&mut self, watermark: i64) -> Vec<(Bucket, Vec<Slot>)> {
        let mut closed = Vec::new();
        while let Some(entry) = self.buckets.first_entry() {
            if entry.key().0 > watermark {
                break;
            }
            let (bucket, windows) = entry.remove_entry();
            self.closed.push(bucket);
            self.windows -= windows.slots.len();
            if let Some(ends) = &mut self.session_ends {
                for slot in &windows.slots {
                    if let Some(list) = ends.get_mut(&slot.key) {
                        list.retain(|end| *end != bucket.0);
                        if list.is_empty() {
                            ends.remove(&slot.key);
                        }
                    }
                }
            }
            closed.push((bucket, windows.slots));
        }
        closed
    }

    /// The buckets changed since the last call, by end then key group (a bucket not
    /// open any more is to be deleted).
    pub fn take_changed(&mut self) -> Vec<Bucket> {
        let mut changed = std::mem::take(&mut self.closed);
        changed.extend(self.buckets.iter().filter(|(_, windows)| windows.changed > 0).map(|(bucket, _)| *bucket));
        changed.sort_unstable();
        changed.dedup();
        changed
    }

    /// The open windows of `bucket`, if any.
    pub fn bucket_mut(&mut self, bucket: Bucket) -> Option<&mut BucketWindows> {
        self.buckets.get_mut(&bucket)
    }

    /// Every open window with its key.
    pub fn all(&self) -> impl Iterator<Item = &Slot> {
        self.buckets.values().flat_map(|windows| windows.slots.iter())
    }
}

/// Appends the state-CF key of the window starting at `start` of a group key to `out`:
/// the map entry of `variable` whose user key is `start` in CBOR.
pub fn window_key_into(out: &mut Vec<u8>, operator: u16, key_group: u16, key: &[u8], variable: &str, start: i64) {
    out.extend_from_slice(&operator.to_be_bytes());
    out.extend_from_slice(&key_group.to_be_bytes());
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&(variable.len() as u16).to_be_bytes());
    out.extend_from_slice(variable.as_bytes());
    cbor::int(start, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_finds_each_key_after_inserts_and_removals() {
        let key = |i: u32| GroupKey::new(format!("key-{i}").as_bytes());
        let mut bucket = BucketWindows::default();
        let mut model: Vec<u32> = Vec::new();
        for i in 0..500 {
            let window = WindowState::new(i64::from(i), i64::from(i) + 1, 0);
            bucket.insert(Slot { key: key(i), window, changed: i % 3 == 0, single: false });
            model.push(i);
            // Now and then one from the middle goes (the last slot moves into its place).
            if i % 4 == 3 {
                let gone = model.remove(model.len() / 2);
                let slot = bucket.remove(&key(gone)).expect("an inserted key is removed");
                assert_eq!(slot.window.start, i64::from(gone));
                assert!(bucket.remove(&key(gone)).is_none());
            }
        }
        assert_eq!(bucket.slots().len(), model.len());
        assert_eq!(bucket.changed(), model.iter().filter(|i| *i % 3 == 0).count());
        for i in 0..500 {
            let found = bucket.position(&key(i)).map(|at| bucket.slots()[at].window.start);
            assert_eq!(found, model.contains(&i).then_some(i64::from(i)), "key-{i}");
        }
    }

    #[test]
    fn window_keys_are_the_map_entries_serde_would_write() -> Result<()> {
        for start in [0, 1, 23, 24, 255, 256, 65_535, 65_536, 1 << 40, i64::MAX, -1, -24, -25, -257, i64::MIN] {
            let mut expected = layout::variable_key(&layout::key_prefix(3, 9, b"key"), "windows");
            ciborium::into_writer(&start, &mut expected)?;
            let mut key = Vec::new();
            window_key_into(&mut key, 3, 9, b"key", "windows", start);
            assert_eq!(key, expected, "{start}");
        }
        Ok(())
    }
}
