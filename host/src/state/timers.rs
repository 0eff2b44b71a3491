//! The timers of every key of one operator: which are due, and converting how a store
//! keeps them.

use std::cmp::Ordering;
use std::ops::Range;

use anyhow::{Context, Result, bail};

use super::layout;
use super::shared_prefix::shared_prefix_len;
use super::store::{Cf, StateTxn};
use super::timer_buckets::{
    BucketChanges, BucketKey, bucket_key, entry_bucket, is_single, merged_keys, split_bucket_key, visit_entry_timers,
};
use super::variables::corrupt;

/// A timer that is due: its expiry and the key it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DueTimer<'a> {
    /// The time the timer was registered for.
    pub expiry: i64,
    /// The key group of its key.
    pub key_group: u16,
    /// The encoded grouping key.
    pub key: &'a [u8],
}

/// The timers due in a batch, compactly (a batch may fire millions): 24 bytes each and
/// their keys in one buffer (of at most 4 GiB), rather than a buffer of its own each.
#[derive(Debug, Default)]
pub struct DueTimers {
    timers: Vec<Due>,
    keys: Vec<u8>,
    /// Whether a timer was left out: the keys would have passed 4 GiB.
    full: bool,
}

/// One due timer of [`DueTimers`]: its key is `keys[key_at..key_at + key_len]`.
#[derive(Clone, Copy, Debug)]
struct Due {
    /// The key group in the top 16 bits; while sorting, six bytes of the key below.
    order: u64,
    expiry: i64,
    key_at: u32,
    key_len: u32,
}

impl Due {
    fn key_group(&self) -> u16 {
        (self.order >> 48) as u16
    }
}

impl DueTimers {
    /// Adds a timer; one whose key would end past 4 GiB of keys is left out, and `full`
    /// says so.
    fn push(&mut self, expiry: i64, key_group: u16, key: &[u8]) {
        let end = self.keys.len().saturating_add(key.len());
        let (Ok(key_at), Ok(key_len), Ok(_)) =
            (u32::try_from(self.keys.len()), u32::try_from(key.len()), u32::try_from(end))
        else {
            self.full = true;
            return;
        };
        self.timers.push(Due { order: u64::from(key_group) << 48, expiry, key_at, key_len });
        self.keys.extend_from_slice(key);
    }

    fn at(&self, due: &Due) -> DueTimer<'_> {
        DueTimer { expiry: due.expiry, key_group: due.key_group(), key: key_of(&self.keys, due) }
    }

    /// How many timers are due.
    pub fn len(&self) -> usize {
        self.timers.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.timers.is_empty()
    }

    /// Puts the timers key after key (by key group, then key); a key's stay in the order
    /// they were in.
    ///
    /// Most comparisons are of one integer: the key group and the six key bytes after
    /// the start all keys share (zero past a key's end); keys that tie there are
    /// compared whole, unless both end within those bytes.
    pub fn sort_by_key(&mut self) {
        let keys = &self.keys;
        let key = |due: &Due| key_of(keys, due);
        let Some(first) = self.timers.first().map(key) else { return };
        let shared = self.timers.iter().map(|due| shared_prefix_len(first, key(due))).min().unwrap_or(0);
        for due in &mut self.timers {
            let mut six = [0u8; 8];
            let rest = key(due).get(shared..).unwrap_or_default();
            let take = rest.len().min(6);
            six[2..2 + take].copy_from_slice(&rest[..take]);
            due.order = (due.order & !((1 << 48) - 1)) | u64::from_be_bytes(six);
        }
        // Keys of one length that end within those six bytes and tie there are equal.
        let covered = shared.saturating_add(6);
        let same = |a: &Due, b: &Due| a.key_len == b.key_len && a.key_len as usize <= covered;
        self.timers.sort_by(|a, b| {
            a.order.cmp(&b.order).then_with(|| if same(a, b) { Ordering::Equal } else { key(a).cmp(key(b)) })
        });
    }

    /// The timers from `start`, at most `count` of them.
    pub fn slice(&self, start: usize, count: usize) -> Vec<DueTimer<'_>> {
        let end = start.saturating_add(count).min(self.timers.len());
        self.timers.get(start..end).unwrap_or_default().iter().map(|due| self.at(due)).collect()
    }

    /// Every timer, in order.
    pub fn iter(&self) -> impl Iterator<Item = DueTimer<'_>> {
        self.timers.iter().map(|due| self.at(due))
    }
}

/// The key of `due` in `keys`.
fn key_of<'k>(keys: &'k [u8], due: &Due) -> &'k [u8] {
    &keys[due.key_at as usize..due.key_at as usize + due.key_len as usize]
}

/// Queries over every key's timers of one operator.
pub struct Timers;

impl Timers {
    /// Drops, at `txn`'s commit, the index entries of every timer of `operator` with
    /// `expiry <= deadline` as one range (see [`StateTxn::drop_committed_range`]): for a
    /// batch that handled every due timer (timers registered meanwhile stay).
    pub fn drop_fired_index(txn: &mut StateTxn, operator: u16, deadline: i64) -> Result<()> {
        let (start, end) = Self::due_range(operator, deadline)?;
        txn.drop_committed_range(Cf::TimerIndex, start, end);
        Ok(())
    }

    /// Converts `operator`'s timers of the key groups `key_groups` at `txn`'s commit:
    /// kept by key as well (`keep`: each timer of the index gets its `timers` entry) or
    /// only in the index (the `timers` entries are dropped as one range). For a batch
    /// that starts with an operator whose modules changed in that respect, before it
    /// changes any timer.
    pub fn keep_by_key(txn: &mut StateTxn, operator: u16, key_groups: Range<u16>, keep: bool) -> Result<()> {
        let op = operator.to_be_bytes();
        if !keep {
            let start = [op, key_groups.start.to_be_bytes()].concat();
            let end = [op, key_groups.end.to_be_bytes()].concat();
            txn.drop_committed_range(Cf::Timers, start, end);
            return Ok(());
        }
        let end = layout::prefix_end(&op).context("operator id out of range")?;
        let mut by_key = Vec::new();
        txn.visit_range(Cf::TimerIndex, &op, Some(&end), |raw, value| {
            visit_entry_timers(raw, value, |expiry, key_group, key| {
                if key_groups.contains(&key_group) {
                    by_key.push(layout::timer_key(&layout::key_prefix(operator, key_group, key), expiry));
                }
            })
            .ok_or_else(|| corrupt("timer index"))?;
            Ok(true)
        })?;
        by_key.into_iter().for_each(|key| txn.put(Cf::Timers, key, Vec::new()));
        Ok(())
    }

    /// Packs `operator`'s timers of the key groups `key_groups` that a store of an
    /// earlier eddy holds one entry each into their buckets (see
    /// [`timer_buckets`](super::timer_buckets)), at `txn`'s commit. For a batch that
    /// starts with such a store, before it changes any timer.
    pub fn pack_index(txn: &mut StateTxn, operator: u16, key_groups: Range<u16>) -> Result<()> {
        let op = operator.to_be_bytes();
        let end = layout::prefix_end(&op).context("operator id out of range")?;
        let mut singles = Vec::new();
        txn.visit_range(Cf::TimerIndex, &op, Some(&end), |raw, value| {
            if is_single(raw, value) {
                let (expiry, key_group, key) =
                    layout::split_timer_index_key(raw).ok_or_else(|| corrupt("timer index"))?;
                if key_groups.contains(&key_group) {
                    singles.push((raw.to_vec(), bucket_key(operator, expiry, key_group), key.len()));
                }
            }
            Ok(true)
        })?;
        for (raw, bucket, key_len) in singles {
            txn.set_timer(bucket, &raw[raw.len() - key_len..], true);
            txn.delete(Cf::TimerIndex, raw);
        }
        Ok(())
    }

    /// The timer-index range of `operator`'s timers with `expiry <= deadline`.
    fn due_range(operator: u16, deadline: i64) -> Result<(Vec<u8>, Vec<u8>)> {
        let start = operator.to_be_bytes().to_vec();
        let end = match deadline.checked_add(1) {
            Some(bound) => [&start[..], &layout::sortable_i64(bound)].concat(),
            None => layout::prefix_end(&start).context("operator id out of range")?,
        };
        Ok((start, end))
    }

    /// Every timer of `operator` with `expiry <= deadline` whose key group `owns` says
    /// is wanted, in expiry order (then key group, then key by length and bytes): the
    /// committed ones with `txn`'s changes.
    pub fn due(txn: &StateTxn, operator: u16, deadline: i64, owns: impl Fn(u16) -> bool) -> Result<DueTimers> {
        let (start, end) = Self::due_range(operator, deadline)?;
        let mut out = DueTimers::default();
        // The transaction's changed buckets, each merged with its committed keys.
        let changed = txn.timer_changes_below(Some(&end));
        let mut changed = changed.into_iter().filter(|(bucket, _)| bucket.starts_with(&start)).peekable();
        // The bucket being visited, when it has changes: its committed keys so far.
        let mut visiting: Option<(&BucketKey, &BucketChanges)> = None;
        let mut committed: Vec<Vec<u8>> = Vec::new();
        let finish =
            |out: &mut DueTimers, bucket: &BucketKey, committed: &mut Vec<Vec<u8>>, changes: &BucketChanges| {
                let (expiry, key_group) = split_bucket_key(bucket);
                if owns(key_group) {
                    let keys: Vec<&[u8]> = committed.iter().map(Vec::as_slice).collect();
                    merged_keys(&keys, changes).into_iter().for_each(|key| out.push(expiry, key_group, key));
                }
                committed.clear();
            };
        txn.visit_range(Cf::TimerIndex, &start, Some(&end), |raw, value| {
            let bucket = entry_bucket(raw).ok_or_else(|| corrupt("timer index"))?;
            if visiting.is_some_and(|(at, _)| at != bucket) {
                let (at, changes) = visiting.take().ok_or_else(|| corrupt("timer index"))?;
                finish(&mut out, at, &mut committed, changes);
            }
            while let Some((before, changes)) = changed.next_if(|(changed, _)| *changed < bucket) {
                finish(&mut out, before, &mut committed, changes);
            }
            if let Some(this) = changed.next_if(|(changed, _)| *changed == bucket) {
                visiting = Some(this);
            }
            let (expiry, key_group) = split_bucket_key(bucket);
            if expiry > deadline {
                bail!("timer index out of order in the state store");
            }
            if !owns(key_group) {
                return Ok(true);
            }
            visit_entry_timers(raw, value, |_, _, key| match visiting {
                Some(_) => committed.push(key.to_vec()),
                None => out.push(expiry, key_group, key),
            })
            .ok_or_else(|| corrupt("timer index"))?;
            Ok(true)
        })?;
        if let Some((at, changes)) = visiting {
            finish(&mut out, at, &mut committed, changes);
        }
        for (bucket, changes) in changed {
            finish(&mut out, bucket, &mut committed, changes);
        }
        if out.full {
            bail!(
                "the keys of the timers due in one batch pass 4 GiB; let fewer timers fall due per batch (a \
                 smaller max-files-per-trigger or max-bytes-per-trigger)"
            );
        }
        Ok(out)
    }

    /// Whether `operator` has a timer with `expiry <= deadline`, committed or registered
    /// by `txn` (the search stops at the first).
    pub fn any_due(txn: &StateTxn, operator: u16, deadline: i64) -> Result<bool> {
        let (start, end) = Self::due_range(operator, deadline)?;
        let registered = txn
            .timer_changes_below(Some(&end))
            .iter()
            .any(|(bucket, changes)| bucket.starts_with(&start) && changes.values().any(|registered| *registered));
        if registered {
            return Ok(true);
        }
        let mut found = false;
        txn.visit_range(Cf::TimerIndex, &start, Some(&end), |_, _| {
            found = true;
            Ok(false)
        })?;
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::draws::Draws;

    /// Keys that share long starts, end in zero bytes or lie one inside another: put
    /// in the order a stable sort by (key group, key bytes) gives.
    #[test]
    fn due_timers_sort_key_after_key_keeping_each_keys_order() {
        let mut draws = Draws(0x9e37_79b9_7f4a_7c15);
        let mut next = |below: u64| draws.below(below);
        for shared in [0, 3, 11] {
            let mut due = DueTimers::default();
            let mut expected = Vec::new();
            for expiry in 0..2_000 {
                let mut key = vec![7u8; shared];
                for _ in 0..next(14) {
                    key.push([0, 1, 0xff, b'a' + next(3) as u8][next(4) as usize]);
                }
                let key_group = next(3) as u16;
                due.push(expiry, key_group, &key);
                expected.push((key_group, key, expiry));
            }
            expected.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
            due.sort_by_key();
            let sorted: Vec<(u16, Vec<u8>, i64)> =
                due.iter().map(|timer| (timer.key_group, timer.key.to_vec(), timer.expiry)).collect();
            assert_eq!(sorted, expected, "keys sharing {shared} bytes");
        }
        DueTimers::default().sort_by_key();
    }
}
