//! A transaction's buffered changes of one column family, in key order.
//!
//! A batch visits its keys in key order (the grouping sorts them; due timers fire key
//! after key), so most changes come in increasing key order: those are appended to a
//! sorted run, where a key past the run's end is known absent with one comparison and
//! a read searches from where the last one ended (the next key is usually near). An
//! ordered map (a B-tree) would search its way down again for each, comparing the key
//! with every key of the nodes on its right edge.
//! A batch's second pass over its keys (the due timers, after the input rows) changes
//! keys below the first run's end, again in increasing order: those make a second run.
//! The changes that come out of order in both go to an ordered map beside the runs;
//! each key lives in one of the three.
//!
//! A family read by range only once or twice a batch and changed in no useful order
//! (the timer index, ordered by expiry) keeps its changes in a hash table instead
//! ([`Overlay::hashed`]), sorted when a range read or the commit needs them.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::ops::{Bound, RangeBounds};

use foldhash::fast::RandomState;

use super::gallop;

/// A change of one entry: the new value, or `None` for a deletion.
pub type Change = Option<Vec<u8>>;

/// Changes whose keys came in increasing order.
#[derive(Default)]
struct Run {
    /// The changes; `None`: the change was undone (kept, so that the last key only grows).
    changes: Vec<(Vec<u8>, Option<Change>)>,
    /// How many changes were undone.
    undone: usize,
    /// Where the last search ended: the next search starts there (keys come in order,
    /// so the next one is usually near).
    finger: Cell<usize>,
}

impl Run {
    fn last(&self) -> Option<&[u8]> {
        self.changes.last().map(|(key, _)| key.as_slice())
    }

    /// Whether `key` goes after every key of the run.
    fn is_past_end(&self, key: &[u8]) -> bool {
        self.last().is_none_or(|last| key > last)
    }

    /// Where `key` is, if it is here.
    fn find(&self, key: &[u8]) -> Option<usize> {
        if self.is_past_end(key) {
            return None;
        }
        let found = gallop::search(&self.changes, key, self.finger.get(), |(run_key, _)| run_key.as_slice());
        self.finger.set(found.unwrap_or_else(|at| at));
        found.ok()
    }

    /// Sets the change at `at`; returns the one it replaces.
    fn replace(&mut self, at: usize, change: Change) -> Option<Change> {
        let replaced = self.changes[at].1.replace(change);
        if replaced.is_none() {
            self.undone -= 1;
        }
        replaced
    }

    /// Undoes the change at `at`; returns it.
    fn take(&mut self, at: usize) -> Option<Change> {
        let removed = self.changes[at].1.take();
        if removed.is_some() {
            self.undone += 1;
        }
        removed
    }

    fn len(&self) -> usize {
        self.changes.len() - self.undone
    }

    /// The changes of the keys from `start` to `end`, in key order.
    fn range<'a>(&'a self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> impl Iterator<Item = (&'a [u8], &'a Change)> {
        let from = match start {
            Bound::Included(start) => self.changes.partition_point(|(key, _)| key.as_slice() < start),
            Bound::Excluded(start) => self.changes.partition_point(|(key, _)| key.as_slice() <= start),
            Bound::Unbounded => 0,
        };
        let to = match end {
            Bound::Included(end) => self.changes.partition_point(|(key, _)| key.as_slice() <= end),
            Bound::Excluded(end) => self.changes.partition_point(|(key, _)| key.as_slice() < end),
            Bound::Unbounded => self.changes.len(),
        };
        self.changes[from..to.max(from)]
            .iter()
            .filter_map(|(key, change)| change.as_ref().map(|change| (key.as_slice(), change)))
    }

    /// The changes of the keys that start with `prefix`, in key order, searched from
    /// where the last search ended.
    fn prefixed<'a>(&'a self, prefix: &'a [u8]) -> impl Iterator<Item = (&'a [u8], &'a Change)> {
        let from = if self.is_past_end(prefix) {
            self.changes.len()
        } else {
            let found = gallop::search(&self.changes, prefix, self.finger.get(), |(key, _)| key.as_slice());
            let from = found.unwrap_or_else(|at| at);
            self.finger.set(from);
            from
        };
        self.changes[from..]
            .iter()
            .take_while(move |(key, _)| key.starts_with(prefix))
            .filter_map(|(key, change)| change.as_ref().map(|change| (key.as_slice(), change)))
    }

    fn into_sorted(self) -> impl Iterator<Item = (Vec<u8>, Change)> {
        self.changes.into_iter().filter_map(|(key, change)| change.map(|change| (key, change)))
    }
}

/// The changes of one column family, in key order.
#[derive(Default)]
pub struct Overlay {
    /// The changes whose keys came in increasing order.
    run: Run,
    /// The changes below the run's last key that came in increasing order among
    /// themselves (a batch's second pass).
    second: Run,
    /// The other changes: every key here is below the run's last key.
    rest: BTreeMap<Vec<u8>, Change>,
    /// Every change, when the overlay is [`hashed`](Self::hashed) (the runs and `rest`
    /// then stay empty).
    hashed: Option<HashMap<Vec<u8>, Change, RandomState>>,
}

impl Overlay {
    /// An overlay that keeps its changes in a hash table: a change costs one hash
    /// lookup instead of a search of the ordered map, and each range read sorts the
    /// changes in its range.
    pub fn hashed() -> Self {
        Overlay { hashed: Some(HashMap::default()), ..Overlay::default() }
    }

    /// The change of `key`, if any.
    pub fn get(&self, key: &[u8]) -> Option<&Change> {
        if let Some(hashed) = &self.hashed {
            return hashed.get(key);
        }
        if let Some(at) = self.run.find(key) {
            return self.run.changes[at].1.as_ref();
        }
        if let Some(at) = self.second.find(key) {
            return self.second.changes[at].1.as_ref();
        }
        self.rest.get(key)
    }

    /// Sets the change of `key`; returns the change it replaces.
    pub fn insert(&mut self, key: Vec<u8>, change: Change) -> Option<Change> {
        if let Some(hashed) = &mut self.hashed {
            return hashed.insert(key, change);
        }
        if self.run.is_past_end(&key) {
            self.run.changes.push((key, Some(change)));
            return None;
        }
        if let Some(at) = self.run.find(&key) {
            return self.run.replace(at, change);
        }
        if let Some(at) = self.second.find(&key) {
            return self.second.replace(at, change);
        }
        if self.second.is_past_end(&key) && !self.rest.contains_key(&key) {
            self.second.changes.push((key, Some(change)));
            return None;
        }
        self.rest.insert(key, change)
    }

    /// Undoes the change of `key`; returns it.
    pub fn remove(&mut self, key: &[u8]) -> Option<Change> {
        if let Some(hashed) = &mut self.hashed {
            return hashed.remove(key);
        }
        if let Some(at) = self.run.find(key) {
            return self.run.take(at);
        }
        if let Some(at) = self.second.find(key) {
            return self.second.take(at);
        }
        self.rest.remove(key)
    }

    /// How many keys have a change.
    pub fn changed_keys(&self) -> usize {
        self.run.len() + self.second.len() + self.rest.len() + self.hashed.as_ref().map_or(0, HashMap::len)
    }

    /// Every change, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &Change> {
        let hashed = self.hashed.iter().flat_map(HashMap::values);
        let runs = self.run.changes.iter().chain(&self.second.changes).filter_map(|(_, change)| change.as_ref());
        runs.chain(self.rest.values()).chain(hashed)
    }

    /// The changes of the keys from `start` to `end`, in key order.
    pub fn range<'a>(
        &'a self,
        start: Bound<&'a [u8]>,
        end: Bound<&'a [u8]>,
    ) -> impl Iterator<Item = (&'a [u8], &'a Change)> + 'a {
        let runs = merge(self.run.range(start, end), self.second.range(start, end), |a, b| a.0 < b.0);
        let rest = self.rest.range::<[u8], _>((start, end)).map(|(key, change)| (key.as_slice(), change));
        let mut hashed: Vec<(&[u8], &Change)> = match &self.hashed {
            Some(hashed) => hashed
                .iter()
                .map(|(key, change)| (key.as_slice(), change))
                .filter(|(key, _)| RangeBounds::<[u8]>::contains(&(start, end), *key))
                .collect(),
            None => Vec::new(),
        };
        hashed.sort_unstable_by(|a, b| a.0.cmp(b.0));
        merge(merge(runs, rest, |a, b| a.0 < b.0), hashed.into_iter(), |a, b| a.0 < b.0)
    }

    /// The changes of the keys that start with `prefix`, in key order: for reads of a
    /// few keys' entries in key order, each searched from where the last one ended.
    pub fn prefixed<'a>(&'a self, prefix: &'a [u8]) -> impl Iterator<Item = (&'a [u8], &'a Change)> + 'a {
        let runs = merge(self.run.prefixed(prefix), self.second.prefixed(prefix), |a, b| a.0 < b.0);
        let rest = (!self.rest.is_empty())
            .then(|| self.rest.range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded)))
            .into_iter()
            .flatten()
            .take_while(move |(key, _)| key.starts_with(prefix))
            .map(|(key, change)| (key.as_slice(), change));
        let hashed: Vec<(&[u8], &Change)> = match &self.hashed {
            Some(hashed) => {
                let mut hashed: Vec<_> = hashed
                    .iter()
                    .filter(|(key, _)| key.starts_with(prefix))
                    .map(|(key, change)| (key.as_slice(), change))
                    .collect();
                hashed.sort_unstable_by(|a, b| a.0.cmp(b.0));
                hashed
            }
            None => Vec::new(),
        };
        merge(merge(runs, rest, |a, b| a.0 < b.0), hashed.into_iter(), |a, b| a.0 < b.0)
    }

    /// Every change, in key order.
    pub fn into_sorted(self) -> impl Iterator<Item = (Vec<u8>, Change)> {
        let runs = merge(self.run.into_sorted(), self.second.into_sorted(), |a, b| a.0 < b.0);
        let mut hashed: Vec<(Vec<u8>, Change)> = self.hashed.into_iter().flatten().collect();
        hashed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        merge(merge(runs, self.rest.into_iter(), |a, b| a.0 < b.0), hashed.into_iter(), |a, b| a.0 < b.0)
    }
}

/// Two sorted sequences as one; `first` tells whether an item goes before another.
fn merge<T>(
    a: impl Iterator<Item = T>,
    b: impl Iterator<Item = T>,
    first: impl Fn(&T, &T) -> bool,
) -> impl Iterator<Item = T> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if first(y, x) => b.next(),
        (Some(_), _) => a.next(),
        (None, _) => b.next(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Checks that `overlay` and `model` hold the same changes from `start` to `end`.
    fn assert_same_range(
        overlay: &Overlay,
        model: &BTreeMap<Vec<u8>, Change>,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        context: &str,
    ) {
        let got: Vec<_> = overlay.range(start, end).collect();
        let want: Vec<_> = model.range::<[u8], _>((start, end)).map(|(k, c)| (k.as_slice(), c)).collect();
        assert_eq!(got, want, "{context}");
    }

    /// Random inserts (in and out of order), removals and reads, against a BTreeMap.
    #[test]
    fn behaves_like_an_ordered_map() {
        behaves_like_an_ordered_map_when(Overlay::default());
    }

    /// The same for a hashed overlay.
    #[test]
    fn a_hashed_overlay_behaves_like_an_ordered_map() {
        behaves_like_an_ordered_map_when(Overlay::hashed());
    }

    fn behaves_like_an_ordered_map_when(mut overlay: Overlay) {
        let mut model: BTreeMap<Vec<u8>, Change> = BTreeMap::new();
        let mut seed = 7u64;
        let mut next = move |bound: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % bound
        };
        for step in 0..20_000u64 {
            // Mostly increasing keys, as a batch makes them, with some out of order.
            let key = if next(4) == 0 { next(2_000) } else { step / 10 };
            let key = format!("k{key:05}").into_bytes();
            match next(6) {
                0 => assert_eq!(overlay.remove(&key), model.remove(&key)),
                1 => assert_eq!(overlay.get(&key), model.get(&key)),
                2 => assert_eq!(overlay.insert(key.clone(), None), model.insert(key, None)),
                _ => {
                    let value = Some(step.to_be_bytes().to_vec());
                    assert_eq!(overlay.insert(key.clone(), value.clone()), model.insert(key, value));
                }
            }
            assert_eq!(overlay.changed_keys(), model.len());
            if step % 1_000 == 0 {
                assert_same_range(&overlay, &model, Bound::Included(b"k00100"), Bound::Excluded(b"k01500"), "");
                assert_same_range(&overlay, &model, Bound::Excluded(b"k00500"), Bound::Included(b"k01000"), "");
                assert_same_range(&overlay, &model, Bound::Unbounded, Bound::Unbounded, "");
            }
        }
        assert_eq!(overlay.values().count(), model.len());
        assert_eq!(overlay.into_sorted().collect::<Vec<_>>(), model.into_iter().collect::<Vec<_>>());
    }

    /// Passes over increasing keys one after another, as a batch makes them (its keys'
    /// input rows, then its due timers key after key), each writing, deleting and
    /// undoing keys of its own and of earlier passes and reading an earlier pass's keys,
    /// against a BTreeMap.
    #[test]
    fn passes_of_increasing_keys_behave_like_an_ordered_map() {
        let mut overlay = Overlay::default();
        let mut model: BTreeMap<Vec<u8>, Change> = BTreeMap::new();
        for pass in 0..12u64 {
            for i in 0..500u64 {
                // Mostly a key of this pass's own; every fourth one an earlier pass's.
                let slot = if i % 4 == 0 { pass / 2 } else { pass };
                let key = format!("k{:05}", i * 16 + slot).into_bytes();
                let probe = format!("k{:05}", i * 16 + (pass + 15) % 16).into_bytes();
                assert_eq!(overlay.get(&probe), model.get(&probe), "pass {pass}, key {i}");
                match (i + pass) % 5 {
                    0 => assert_eq!(overlay.remove(&key), model.remove(&key)),
                    1 => assert_eq!(overlay.insert(key.clone(), None), model.insert(key, None)),
                    _ => {
                        let value = Some((pass * 1_000 + i).to_be_bytes().to_vec());
                        assert_eq!(overlay.insert(key.clone(), value.clone()), model.insert(key, value));
                    }
                }
            }
            assert_eq!(overlay.changed_keys(), model.len());
            let pass = format!("pass {pass}");
            assert_same_range(&overlay, &model, Bound::Excluded(b"k01000"), Bound::Included(b"k05000"), &pass);
        }
        assert!(!overlay.second.changes.is_empty(), "the second pass makes a second run");
        assert!(!overlay.rest.is_empty(), "the later passes reach the ordered map");
        assert_eq!(overlay.into_sorted().collect::<Vec<_>>(), model.into_iter().collect::<Vec<_>>());
    }
}
