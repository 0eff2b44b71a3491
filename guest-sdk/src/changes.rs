//! A handler call's state writes and timer changes, buffered and handed to the host
//! together (`state.apply-changes`), and its reads (`state.read`), which name their
//! key: each host call costs a few hundred nanoseconds, so a window opened, updated
//! and closed costs a few calls instead of one per step. For the host backend only;
//! the harness's memory store is written directly.
//!
//! Semantics are those of one call per change: a read of an entry with a buffered
//! change first hands the buffer over, and so does every call whose answer or effect
//! depends on the host's state as a whole (map iteration, lists, timer listing, taking
//! a timer while timer changes are buffered); the buffer is handed over before each
//! handler returns. Each key of a call is selected on the host as the processor starts
//! on it (so that a failure, even a trap, names it); a timer's key by taking the timer.

use std::cell::RefCell;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use crate::bindings::eddy::processor::{scope, state};

/// Kinds of `apply-changes` records (see `wit/processor.wit`).
const KEY: u8 = 1;
const VALUE_UPDATE: u8 = 2;
const VALUE_CLEAR: u8 = 3;
const MAP_UPDATE: u8 = 4;
const MAP_REMOVE: u8 = 5;
const TIMER_REGISTER: u8 = 6;
const TIMER_DELETE: u8 = 7;

/// Past this many buffered bytes the buffer is handed over at once.
const FLUSH_BYTES: usize = 1 << 20;

/// A hasher for keys that are hashes already.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|byte| self.0 = (self.0 << 8) ^ u64::from(*byte));
    }
    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

#[derive(Default)]
struct Pending {
    /// The records not yet handed over.
    bytes: Vec<u8>,
    /// The key of the last record.
    record_key: Option<u32>,
    /// The key of the call the processor handles now.
    current: u32,
    /// The key the host has current, when known.
    selected: Option<u32>,
    /// Hashes of (variable, key, user key) with a buffered change (a collision only
    /// hands the buffer over early).
    touched: HashSet<u64, BuildHasherDefault<Prehashed>>,
    /// Whether a timer change is buffered.
    timers: bool,
}

thread_local! {
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
}

fn with<R>(f: impl FnOnce(&mut Pending) -> R) -> R {
    PENDING.with(|pending| f(&mut pending.borrow_mut()))
}

/// FNV-1a of an entry's place.
fn place(variable: u32, key: u32, user_key: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in variable.to_le_bytes().iter().chain(&key.to_le_bytes()).chain(user_key) {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

impl Pending {
    fn flush(&mut self) {
        if !self.bytes.is_empty() {
            state::apply_changes(&self.bytes);
            self.bytes.clear();
            self.touched.clear();
            self.record_key = None;
            self.timers = false;
        }
    }

    /// Starts a record of `kind` for the current key.
    fn record(&mut self, kind: u8) {
        if self.record_key != Some(self.current) {
            self.bytes.push(KEY);
            self.bytes.extend_from_slice(&self.current.to_le_bytes());
            self.record_key = Some(self.current);
        }
        self.bytes.push(kind);
    }

    fn push_bytes(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(bytes);
    }

    fn touch(&mut self, variable: u32, user_key: &[u8]) {
        self.touched.insert(place(variable, self.current, user_key));
        self.bound();
    }

    /// Hands the buffer over once it holds [`FLUSH_BYTES`].
    fn bound(&mut self) {
        if self.bytes.len() > FLUSH_BYTES {
            self.flush();
        }
    }

    fn select(&mut self) {
        if self.selected != Some(self.current) {
            scope::select_key(self.current);
            self.selected = Some(self.current);
        }
    }
}

/// Starts a handler call whose key `selected` (if any) the host made current itself;
/// what an earlier call left (it failed) is dropped.
pub(crate) fn start_call(selected: Option<u32>) {
    with(|pending| {
        pending.bytes.clear();
        pending.touched.clear();
        pending.record_key = None;
        pending.timers = false;
        pending.current = selected.unwrap_or(0);
        pending.selected = selected;
    });
}

/// Makes key `index` of the call the one the processor handles, and the host's
/// current key (so that a failure names it, whatever the processor calls).
pub(crate) fn set_key(index: u32) {
    with(|pending| {
        pending.current = index;
        pending.select();
    });
}

/// Takes due timer `index` of the call (of key `key`): whether it fires.
pub(crate) fn take_timer(index: u32, key: u32) -> bool {
    with(|pending| {
        if pending.timers {
            pending.flush();
        }
        pending.current = key;
        pending.selected = Some(key);
    });
    scope::take_timer(index)
}

/// Hands every buffered change over (before a handler returns).
pub(crate) fn flush() {
    with(Pending::flush);
}

/// Before a call that acts on the host's current key and its whole state: hands every
/// buffered change over and selects the key.
pub(crate) fn before_direct_call() {
    with(|pending| {
        pending.flush();
        pending.select();
    });
}

/// Before a call that only needs the host's current key (a log message; also from the
/// panic hook, so never while the buffer is borrowed).
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) fn select_current() {
    PENDING.with(|pending| {
        if let Ok(mut pending) = pending.try_borrow_mut() {
            pending.select();
        }
    });
}

/// The current key's value of value variable `variable` (`user_key` empty) or entry
/// `user_key` of map variable `variable`.
pub(crate) fn read(variable: u32, user_key: &[u8]) -> Option<Vec<u8>> {
    let key = with(|pending| {
        if pending.touched.contains(&place(variable, pending.current, user_key)) {
            pending.flush();
        }
        pending.current
    });
    state::read(variable, key, user_key)
}

pub(crate) fn value_update(variable: u32, value: &[u8]) {
    with(|pending| {
        pending.record(VALUE_UPDATE);
        pending.bytes.extend_from_slice(&variable.to_le_bytes());
        pending.push_bytes(value);
        pending.touch(variable, &[]);
    });
}

pub(crate) fn value_clear(variable: u32) {
    with(|pending| {
        pending.record(VALUE_CLEAR);
        pending.bytes.extend_from_slice(&variable.to_le_bytes());
        pending.touch(variable, &[]);
    });
}

pub(crate) fn map_update(variable: u32, user_key: &[u8], value: &[u8]) {
    with(|pending| {
        pending.record(MAP_UPDATE);
        pending.bytes.extend_from_slice(&variable.to_le_bytes());
        pending.push_bytes(user_key);
        pending.push_bytes(value);
        pending.touch(variable, user_key);
    });
}

pub(crate) fn map_remove(variable: u32, user_key: &[u8]) {
    with(|pending| {
        pending.record(MAP_REMOVE);
        pending.bytes.extend_from_slice(&variable.to_le_bytes());
        pending.push_bytes(user_key);
        pending.touch(variable, user_key);
    });
}

/// Registers (or, when not `register`, deletes) the current key's timer at `expiry`.
pub(crate) fn timer_change(expiry: i64, register: bool) {
    with(|pending| {
        pending.record(if register { TIMER_REGISTER } else { TIMER_DELETE });
        pending.bytes.extend_from_slice(&expiry.to_le_bytes());
        pending.timers = true;
        pending.bound();
    });
}
