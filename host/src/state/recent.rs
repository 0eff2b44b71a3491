//! The state entries the last commits wrote, kept in memory up to a budget, so that
//! the next batches read them without RocksDB: a window written in one batch is read
//! when its timer fires in the next, a running total every batch.
//!
//! One generation per commit, newest first. A key lives in at most one generation (a
//! commit takes the keys it writes or deletes out of the older ones), so a key found in
//! none is read from RocksDB, which holds the same committed state. Past the budget
//! whole generations go, oldest first; a commit too big for the budget empties the
//! cache instead of keeping part of it.

use std::collections::{HashMap, VecDeque};

/// What one cached entry costs beyond its key and value bytes: its map slot and the
/// two allocations.
const ENTRY_OVERHEAD_BYTES: usize = 64;

/// The committed state entries of the last commits (`Cf::State` only).
pub struct RecentWrites {
    generations: VecDeque<Generation>,
    bytes: usize,
    budget: usize,
}

/// What one commit wrote to the state column family, gathered while it is written.
#[derive(Default)]
pub struct Generation {
    entries: HashMap<Vec<u8>, Vec<u8>>,
    deleted: Vec<Vec<u8>>,
    bytes: usize,
    budget: usize,
    /// More than the budget was written: the generation keeps nothing.
    overflowed: bool,
}

impl Generation {
    /// Notes that the commit set `key` to `value`.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        if self.overflowed {
            return;
        }
        let key_bytes = key.len() + ENTRY_OVERHEAD_BYTES;
        self.bytes += key_bytes + value.len();
        if self.bytes > self.budget {
            self.overflowed = true;
            self.entries = HashMap::new();
            self.deleted = Vec::new();
            return;
        }
        if let Some(previous) = self.entries.insert(key, value) {
            self.bytes -= key_bytes + previous.len();
        }
    }

    /// Notes that the commit deleted `key`.
    pub fn delete(&mut self, key: Vec<u8>) {
        if self.overflowed {
            return;
        }
        if let Some(previous) = self.entries.remove(&key) {
            self.bytes -= key.len() + previous.len() + ENTRY_OVERHEAD_BYTES;
        }
        self.deleted.push(key);
    }
}

impl RecentWrites {
    /// An empty cache that holds up to `budget` bytes.
    pub fn new(budget: usize) -> Self {
        Self { generations: VecDeque::new(), bytes: 0, budget }
    }

    /// The committed value of `key` if a recent commit wrote it; None when the store
    /// must be asked (never written recently, or deleted).
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.generations.iter().find_map(|generation| generation.entries.get(key)).map(Vec::as_slice)
    }

    /// A generation to fill while a commit is written.
    pub fn begin(&self) -> Generation {
        Generation { budget: self.budget, ..Generation::default() }
    }

    /// Makes `generation` the newest, once its commit is durable.
    pub fn install(&mut self, generation: Generation) {
        if generation.overflowed {
            self.generations.clear();
            self.bytes = 0;
            return;
        }
        let changed = generation.entries.keys().chain(&generation.deleted);
        if !self.generations.is_empty() {
            for key in changed {
                for older in &mut self.generations {
                    if let Some(value) = older.entries.remove(key) {
                        let freed = key.len() + value.len() + ENTRY_OVERHEAD_BYTES;
                        older.bytes -= freed;
                        self.bytes -= freed;
                    }
                }
            }
        }
        self.bytes += generation.bytes;
        self.generations.push_front(Generation { deleted: Vec::new(), ..generation });
        while self.bytes > self.budget {
            match self.generations.pop_back() {
                Some(oldest) => self.bytes -= oldest.bytes,
                None => break,
            }
        }
        self.generations.retain(|generation| !generation.entries.is_empty());
    }

    /// The bytes the cache holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generation(cache: &RecentWrites, puts: &[(&str, &str)], deletes: &[&str]) -> Generation {
        let mut generation = cache.begin();
        for (key, value) in puts {
            generation.put(key.as_bytes().to_vec(), value.as_bytes().to_vec());
        }
        for key in deletes {
            generation.delete(key.as_bytes().to_vec());
        }
        generation
    }

    fn get<'a>(cache: &'a RecentWrites, key: &str) -> Option<&'a str> {
        cache.get(key.as_bytes()).map(|value| std::str::from_utf8(value).expect("utf8"))
    }

    #[test]
    fn the_newest_commit_wins_and_deletes_hide_older_values() {
        let mut cache = RecentWrites::new(1 << 20);
        cache.install(generation(&cache, &[("a", "1"), ("b", "1"), ("c", "1")], &[]));
        cache.install(generation(&cache, &[("a", "2")], &["b"]));
        assert_eq!((get(&cache, "a"), get(&cache, "b"), get(&cache, "c")), (Some("2"), None, Some("1")));
        assert_eq!(get(&cache, "d"), None);
        // Written and deleted in one commit: gone.
        cache.install(generation(&cache, &[("c", "3")], &["c"]));
        assert_eq!(get(&cache, "c"), None);
        assert_eq!(cache.bytes(), ENTRY_OVERHEAD_BYTES + 2, "a=2 is all that is left");
    }

    #[test]
    fn past_the_budget_the_oldest_generations_go_and_a_commit_too_big_empties_the_cache() {
        let entry = ENTRY_OVERHEAD_BYTES + 2;
        let mut cache = RecentWrites::new(3 * entry);
        cache.install(generation(&cache, &[("a", "1"), ("b", "1")], &[]));
        cache.install(generation(&cache, &[("c", "1")], &[]));
        assert_eq!((get(&cache, "a"), get(&cache, "c")), (Some("1"), Some("1")));
        cache.install(generation(&cache, &[("d", "1")], &[]));
        assert_eq!((get(&cache, "a"), get(&cache, "b")), (None, None), "the oldest generation went whole");
        assert_eq!((get(&cache, "c"), get(&cache, "d")), (Some("1"), Some("1")));
        assert_eq!(cache.bytes(), 2 * entry);
        cache.install(generation(&cache, &[("e", "1"), ("f", "1"), ("g", "1"), ("h", "1")], &[]));
        assert_eq!((get(&cache, "c"), get(&cache, "e"), cache.bytes()), (None, None, 0));
    }
}
