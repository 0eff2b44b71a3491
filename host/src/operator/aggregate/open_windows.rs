//! The open windows of a window stage, in memory.
//!
//! The store holds every open window durably, packed by end (see
//! [`WindowStage`](super::WindowStage)); this table holds the same windows in memory so
//! that a batch reads none of them from RocksDB and finds the windows the watermark
//! closes by their end, without timers. It is loaded from the store on a stage's first
//! batch and follows every batch the stage runs; when the store's committed batch is
//! not the last one it followed (a batch failed before its commit), it is loaded again.
//! It also tracks, for the stage to write back, which windows a batch changed by
//! *bucket* (an end in a key group: what one packed entry holds), and which windows are
//! stored on their own rather than (only) in their bucket's packed entry.
//! Memory: about 60 bytes per aggregate plus 70 per open window, and each key once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use anyhow::{Context, Result};
use xxhash_rust::xxh3::Xxh3DefaultBuilder;

use super::cbor;
use super::running::WindowState;
use crate::state::{Cf, StateStore, layout, packed};

/// One group key's open windows.
#[derive(Debug, Default)]
pub struct Group {
    /// Its windows, by start.
    pub windows: Vec<WindowState>,
}

impl Group {
    /// The window starting at `start`, if open.
    pub fn find(&self, start: i64) -> Option<&WindowState> {
        self.windows.binary_search_by_key(&start, |w| w.start).ok().map(|i| &self.windows[i])
    }
}

/// Where a window is: its group key and start.
pub type WindowAt = (Arc<[u8]>, i64);

/// The windows of one end in one key group: what one packed entry holds.
pub type Bucket = (i64, u16);

/// A closed window: its group key, key group and final aggregates.
pub type Closed = (Arc<[u8]>, u16, WindowState);

/// Every open window of one window stage.
#[derive(Default)]
pub struct OpenWindows {
    /// The last batch whose changes the table holds (`None`: loaded before any commit).
    as_of: Option<u64>,
    groups: HashMap<Arc<[u8]>, Group, Xxh3DefaultBuilder>,
    /// The (key, start) of every open window, by bucket (end, then key group).
    ends: BTreeMap<Bucket, Vec<WindowAt>>,
    /// The windows changed since [`take_changed`](Self::take_changed), by bucket (a
    /// bucket whose windows closed is here too, without windows).
    changed: HashMap<Bucket, Vec<WindowAt>, Xxh3DefaultBuilder>,
    /// The windows stored as entries of their own (newer than their bucket's packed
    /// entry, if any).
    singles: HashSet<WindowAt, Xxh3DefaultBuilder>,
    windows: usize,
}

impl OpenWindows {
    /// The open windows of `operator` in `key_groups` as the store has them committed.
    pub fn load(store: &StateStore, operator: u16, key_groups: Range<u16>, now: i64) -> Result<OpenWindows> {
        let mut table = OpenWindows { as_of: store.committed_batch()?, ..OpenWindows::default() };
        let txn = store.begin();
        let bound = |group: u16| [operator.to_be_bytes(), group.to_be_bytes()].concat();
        let mut key_group_of: HashMap<Arc<[u8]>, u16, Xxh3DefaultBuilder> = HashMap::default();
        // Key groups are below the count, a u16: the range's end is a key group's prefix.
        // In a key group, the packed entries (no grouping key) come before the windows
        // stored on their own, which are newer.
        for (raw_key, raw_value) in txn.scan_range(Cf::State, &bound(key_groups.start), Some(&bound(key_groups.end)))? {
            let single = !packed::is_packed(&raw_key);
            let entries = if single { vec![(&raw_key[..], &raw_value[..])] } else { packed::unpack(&raw_value)? };
            for (entry_key, value) in entries {
                let (_, key_group, key, _, _) =
                    layout::split_state_key(entry_key).context("a state key of the window stage is corrupt")?;
                let (expiry, payload) = layout::unstamp(value).context("a window's state in the store is corrupt")?;
                if expiry <= now {
                    continue;
                }
                let window: WindowState =
                    ciborium::from_reader(payload).context("a window's state in the store does not decode")?;
                let key = table.shared_key(key);
                key_group_of.insert(key.clone(), key_group);
                if single {
                    table.singles.insert((key.clone(), window.start));
                }
                table.groups.entry(key).or_default().windows.push(window);
            }
        }
        for (key, group) in &mut table.groups {
            // Of two copies of a window, the later (stored on its own) is kept.
            group.windows.sort_by_key(|w| w.start);
            group.windows.dedup_by(|later, earlier| {
                let same = later.start == earlier.start;
                if same {
                    std::mem::swap(later, earlier);
                }
                same
            });
            let key_group = key_group_of.get(key).copied().unwrap_or_default();
            for window in &group.windows {
                table.ends.entry((window.end, key_group)).or_default().push((key.clone(), window.start));
            }
            table.windows += group.windows.len();
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

    /// The key's bytes as the table shares them (a new `Arc` for a key without windows).
    pub fn shared_key(&self, key: &[u8]) -> Arc<[u8]> {
        self.groups.get_key_value(key).map_or_else(|| Arc::from(key), |(shared, _)| shared.clone())
    }

    /// The key's open windows, by start.
    pub fn windows_of(&self, key: &[u8]) -> &[WindowState] {
        self.groups.get(key).map_or(&[], |group| group.windows.as_slice())
    }

    /// Adds `partial` (one batch's rows of a window) to the key's window with the same
    /// start, opening it if needed; returns the window as it now is.
    pub fn add(&mut self, key: &Arc<[u8]>, key_group: u16, partial: WindowState) -> &WindowState {
        let group = self.groups.entry(key.clone()).or_default();
        self.changed.entry((partial.end, key_group)).or_default().push((key.clone(), partial.start));
        match group.windows.binary_search_by_key(&partial.start, |w| w.start) {
            Ok(index) => {
                group.windows[index].merge(&partial);
                &group.windows[index]
            }
            Err(index) => {
                self.ends.entry((partial.end, key_group)).or_default().push((key.clone(), partial.start));
                self.windows += 1;
                group.windows.insert(index, partial);
                &group.windows[index]
            }
        }
    }

    /// Replaces the key's windows by `windows` (sessions after merging, which the stage
    /// stores on their own, not packed): one that moved or merged away leaves its bucket.
    pub fn replace(&mut self, key: &Arc<[u8]>, key_group: u16, mut windows: Vec<WindowState>) {
        windows.sort_by_key(|w| w.start);
        let group = self.groups.entry(key.clone()).or_default();
        for old in &group.windows {
            let kept = windows.binary_search_by_key(&old.start, |w| w.start).is_ok_and(|i| windows[i].end == old.end);
            if !kept && let Some(entries) = self.ends.get_mut(&(old.end, key_group)) {
                entries.retain(|(k, start)| !(*start == old.start && k == key));
                if entries.is_empty() {
                    self.ends.remove(&(old.end, key_group));
                }
            }
        }
        for window in &windows {
            if group.find(window.start).is_none_or(|old| old.end != window.end) {
                self.ends.entry((window.end, key_group)).or_default().push((key.clone(), window.start));
            }
        }
        self.windows = self.windows - group.windows.len() + windows.len();
        if windows.is_empty() {
            self.groups.remove(key);
        } else {
            group.windows = windows;
        }
    }

    /// Whether a window ends at or before `watermark`.
    pub fn any_ending_by(&self, watermark: i64) -> bool {
        self.ends.first_key_value().is_some_and(|((end, _), _)| *end <= watermark)
    }

    /// Removes and returns every window ending at or before `watermark`, by end.
    pub fn close_until(&mut self, watermark: i64) -> Vec<Closed> {
        let closing = self.ends.iter().take_while(|((end, _), _)| *end <= watermark).map(|(_, w)| w.len()).sum();
        let mut closed = Vec::with_capacity(closing);
        while let Some(entry) = self.ends.first_entry() {
            if entry.key().0 > watermark {
                break;
            }
            let ((end, key_group), windows) = entry.remove_entry();
            self.changed.entry((end, key_group)).or_default();
            for (key, start) in windows {
                let Some(group) = self.groups.get_mut(&key) else { continue };
                let Ok(index) = group.windows.binary_search_by_key(&start, |w| w.start) else { continue };
                if group.windows[index].end != end {
                    continue;
                }
                let window = group.windows.remove(index);
                if group.windows.is_empty() {
                    self.groups.remove(&key);
                }
                self.windows -= 1;
                closed.push((key, key_group, window));
            }
        }
        closed
    }

    /// The windows changed since the last call, by bucket (by end then key group; a
    /// bucket without windows now is to be deleted).
    pub fn take_changed(&mut self) -> Vec<(Bucket, Vec<WindowAt>)> {
        let mut buckets: Vec<(Bucket, Vec<WindowAt>)> = self.changed.drain().collect();
        buckets.sort_unstable_by_key(|(bucket, _)| *bucket);
        buckets
    }

    /// The window of `key` starting at `start`, if open.
    pub fn find(&self, key: &[u8], start: i64) -> Option<&WindowState> {
        self.groups.get(key)?.find(start)
    }

    /// How many windows `bucket` holds.
    pub fn bucket_len(&self, bucket: Bucket) -> usize {
        self.ends.get(&bucket).map_or(0, Vec::len)
    }

    /// Whether the window `at` is stored as an entry of its own.
    pub fn is_single(&self, at: &WindowAt) -> bool {
        self.singles.contains(at)
    }

    /// Records that the window `at` is (`true`) or is no longer (`false`) stored as an
    /// entry of its own.
    pub fn set_single(&mut self, at: WindowAt, single: bool) {
        if single {
            self.singles.insert(at);
        } else {
            self.singles.remove(&at);
        }
    }

    /// The windows of `bucket`, with their keys.
    pub fn bucket(&self, bucket: Bucket) -> impl Iterator<Item = (&Arc<[u8]>, &WindowState)> {
        self.ends.get(&bucket).into_iter().flatten().filter_map(|(key, start)| {
            let (shared, group) = self.groups.get_key_value(key)?;
            Some((shared, group.find(*start)?))
        })
    }

    /// Every open window with its key.
    pub fn all(&self) -> impl Iterator<Item = (&Arc<[u8]>, &WindowState)> {
        self.groups.iter().flat_map(|(key, group)| group.windows.iter().map(move |w| (key, w)))
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
