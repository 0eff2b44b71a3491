//! Where state and timers live: the host (through the WIT imports) or memory (the
//! test harness). Every state and timer handle holds an `Rc<Store>`.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::modes::TimeMode;

/// The shared context of every handle of one processor instance.
pub(crate) struct Store {
    /// Set while a handler with a current key runs.
    active: Cell<bool>,
    /// The time mode declared in `init`.
    time_mode: Cell<TimeMode>,
    pub(crate) backend: Backend,
}

pub(crate) enum Backend {
    /// The WIT imports of the running component.
    Host,
    /// The in-memory store of the native test harness.
    Memory(Rc<RefCell<MemoryStore>>),
}

impl Store {
    pub(crate) fn new(backend: Backend) -> Self {
        Store { active: Cell::new(false), time_mode: Cell::new(TimeMode::None), backend }
    }

    pub(crate) fn set_active(&self, active: bool) {
        self.active.set(active);
    }

    pub(crate) fn time_mode(&self) -> TimeMode {
        self.time_mode.get()
    }

    pub(crate) fn set_time_mode(&self, mode: TimeMode) {
        self.time_mode.set(mode);
    }

    /// Fails unless a handler with a current key is running.
    pub(crate) fn check_active(&self, what: impl FnOnce() -> String) -> Result<()> {
        if self.active.get() {
            Ok(())
        } else {
            Err(Error::msg(format!(
                "{} can only be used inside handle_input_rows, handle_expired_timer or \
                 handle_initial_state, where a key is current (not in init or close)",
                what()
            )))
        }
    }
}

/// One stored value with its expiry (microseconds of processing time).
#[derive(Clone, Debug)]
struct Entry {
    bytes: Vec<u8>,
    expires: Option<i64>,
}

impl Entry {
    fn live(&self, now: i64) -> bool {
        self.expires.is_none_or(|at| at > now)
    }
}

type Slot = (Vec<u8>, String);

/// State and timers of every key, in memory, with the host's semantics: TTL counted
/// from each write in processing time, expired values invisible, map entries in byte
/// order of their encoded user keys, timers deduplicated and listed in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct MemoryStore {
    /// The current processing time.
    pub(crate) now: i64,
    /// The encoded current key.
    pub(crate) key: Vec<u8>,
    /// Declared variables and their TTLs in microseconds.
    pub(crate) ttls: HashMap<String, Option<u64>>,
    values: HashMap<Slot, Entry>,
    lists: HashMap<Slot, Vec<Entry>>,
    maps: HashMap<Slot, BTreeMap<Vec<u8>, Entry>>,
    timers: BTreeMap<Vec<u8>, BTreeSet<i64>>,
}

impl MemoryStore {
    fn slot(&self, name: &str) -> Slot {
        (self.key.clone(), name.to_string())
    }

    fn entry(&self, name: &str, bytes: Vec<u8>) -> Entry {
        let ttl = self.ttls.get(name).copied().flatten();
        let expires = ttl.map(|micros| self.now.saturating_add(i64::try_from(micros).unwrap_or(i64::MAX)));
        Entry { bytes, expires }
    }

    pub(crate) fn value_get(&self, key: &[u8], name: &str) -> Option<Vec<u8>> {
        let entry = self.values.get(&(key.to_vec(), name.to_string()))?;
        entry.live(self.now).then(|| entry.bytes.clone())
    }

    pub(crate) fn value_update(&mut self, name: &str, bytes: Vec<u8>) {
        let entry = self.entry(name, bytes);
        self.values.insert(self.slot(name), entry);
    }

    pub(crate) fn value_clear(&mut self, name: &str) {
        self.values.remove(&self.slot(name));
    }

    pub(crate) fn list_get(&self, key: &[u8], name: &str) -> Vec<Vec<u8>> {
        let Some(list) = self.lists.get(&(key.to_vec(), name.to_string())) else {
            return Vec::new();
        };
        list.iter().filter(|e| e.live(self.now)).map(|e| e.bytes.clone()).collect()
    }

    pub(crate) fn list_append(&mut self, name: &str, values: Vec<Vec<u8>>) {
        let entries: Vec<Entry> = values.into_iter().map(|v| self.entry(name, v)).collect();
        self.lists.entry(self.slot(name)).or_default().extend(entries);
    }

    pub(crate) fn list_put(&mut self, name: &str, values: Vec<Vec<u8>>) {
        self.list_clear(name);
        self.list_append(name, values);
    }

    pub(crate) fn list_clear(&mut self, name: &str) {
        self.lists.remove(&self.slot(name));
    }

    pub(crate) fn map_get(&self, name: &str, user_key: &[u8]) -> Option<Vec<u8>> {
        let entry = self.maps.get(&self.slot(name))?.get(user_key)?;
        entry.live(self.now).then(|| entry.bytes.clone())
    }

    pub(crate) fn map_update(&mut self, name: &str, user_key: Vec<u8>, value: Vec<u8>) {
        let entry = self.entry(name, value);
        self.maps.entry(self.slot(name)).or_default().insert(user_key, entry);
    }

    pub(crate) fn map_remove(&mut self, name: &str, user_key: &[u8]) {
        if let Some(map) = self.maps.get_mut(&self.slot(name)) {
            map.remove(user_key);
        }
    }

    /// Live entries in byte order of the encoded user keys.
    pub(crate) fn map_entries(&self, key: &[u8], name: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        let Some(map) = self.maps.get(&(key.to_vec(), name.to_string())) else {
            return Vec::new();
        };
        map.iter().filter(|(_, e)| e.live(self.now)).map(|(k, e)| (k.clone(), e.bytes.clone())).collect()
    }

    pub(crate) fn map_clear(&mut self, name: &str) {
        self.maps.remove(&self.slot(name));
    }

    pub(crate) fn timer_register(&mut self, expiry: i64) {
        self.timers.entry(self.key.clone()).or_default().insert(expiry);
    }

    pub(crate) fn timer_delete(&mut self, expiry: i64) {
        if let Some(set) = self.timers.get_mut(&self.key) {
            set.remove(&expiry);
        }
    }

    /// The timers of `key`, earliest first.
    pub(crate) fn timer_list(&self, key: &[u8]) -> Vec<i64> {
        self.timers.get(key).map(|set| set.iter().copied().collect()).unwrap_or_default()
    }

    /// Every timer with expiry ≤ `clock` as (expiry, key), in expiry order.
    pub(crate) fn due_timers(&self, clock: i64) -> Vec<(i64, Vec<u8>)> {
        let mut due: Vec<(i64, Vec<u8>)> =
            self.timers.iter().flat_map(|(key, set)| set.range(..=clock).map(move |t| (*t, key.clone()))).collect();
        due.sort();
        due
    }

    /// Removes the timer (expiry, key); whether it was there.
    pub(crate) fn take_timer(&mut self, expiry: i64, key: &[u8]) -> bool {
        self.timers.get_mut(key).is_some_and(|set| set.remove(&expiry))
    }
}
