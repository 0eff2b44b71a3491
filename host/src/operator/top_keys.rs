//! The hot keys of a batch: the keys with the most input rows and the keys whose
//! processor calls took longest, kept in bounded heaps so that collecting them costs a
//! comparison per key (a key's label is only made when it enters a heap).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::checkpoint::{HotKey, TopKeys};

/// How many keys each list keeps.
pub const TOP_KEYS: usize = 10;

/// Collects the hottest keys of one batch.
#[derive(Default)]
pub struct TopKeysCollector {
    by_rows: BinaryHeap<Reverse<(u64, u64, String)>>,
    by_time: BinaryHeap<Reverse<(u64, u64, String)>>,
}

impl TopKeysCollector {
    /// Notes a key with `rows` input rows whose call took `guest_micros`; `label`
    /// makes its printable form, only when it is among the hottest so far.
    pub fn note(&mut self, rows: u64, guest_micros: u64, label: impl Fn() -> String) {
        let enters = |heap: &BinaryHeap<Reverse<(u64, u64, String)>>, value: u64| {
            heap.len() < TOP_KEYS || heap.peek().is_some_and(|Reverse(min)| value > min.0)
        };
        let by_rows = enters(&self.by_rows, rows);
        let by_time = enters(&self.by_time, guest_micros);
        if !by_rows && !by_time {
            return;
        }
        let key = label();
        if by_rows {
            push_bounded(&mut self.by_rows, (rows, guest_micros, key.clone()));
        }
        if by_time {
            push_bounded(&mut self.by_time, (guest_micros, rows, key));
        }
    }

    /// Adds another collector's keys (another shard's).
    pub fn merge(&mut self, other: TopKeysCollector) {
        for Reverse(entry) in other.by_rows {
            push_bounded(&mut self.by_rows, entry);
        }
        for Reverse(entry) in other.by_time {
            push_bounded(&mut self.by_time, entry);
        }
    }

    /// The hottest keys, hottest first.
    pub fn finish(self) -> TopKeys {
        let sorted = |heap: BinaryHeap<Reverse<(u64, u64, String)>>| {
            let mut entries: Vec<_> = heap.into_iter().map(|Reverse(entry)| entry).collect();
            entries.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.2.cmp(&b.2)));
            entries
        };
        TopKeys {
            by_rows: sorted(self.by_rows)
                .into_iter()
                .map(|(rows, guest_micros, key)| HotKey { key, rows, guest_micros })
                .collect(),
            by_guest_time: sorted(self.by_time)
                .into_iter()
                .map(|(guest_micros, rows, key)| HotKey { key, rows, guest_micros })
                .collect(),
        }
    }
}

fn push_bounded(heap: &mut BinaryHeap<Reverse<(u64, u64, String)>>, entry: (u64, u64, String)) {
    heap.push(Reverse(entry));
    if heap.len() > TOP_KEYS {
        heap.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_hottest_keys_of_every_shard() {
        let mut first = TopKeysCollector::default();
        let mut second = TopKeysCollector::default();
        for i in 0..100u64 {
            let shard = if i % 2 == 0 { &mut first } else { &mut second };
            shard.note(i, 1_000 - i, || format!("k{i}"));
        }
        first.merge(second);
        let top = first.finish();
        let names = |keys: &[HotKey]| keys.iter().map(|k| k.key.clone()).collect::<Vec<_>>();
        assert_eq!(names(&top.by_rows), (90..100).rev().map(|i| format!("k{i}")).collect::<Vec<_>>());
        assert_eq!(names(&top.by_guest_time), (0..10).map(|i| format!("k{i}")).collect::<Vec<_>>());
        assert_eq!(top.by_rows[0], HotKey { key: "k99".into(), rows: 99, guest_micros: 901 });
    }
}
