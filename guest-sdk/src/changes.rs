//! A handler call's state writes and timer changes, buffered and handed to the host
//! together (`state.apply-changes`), and its reads (`state.read`), which name their
//! key: each host call costs a few hundred nanoseconds, so a window opened, updated
//! and closed costs a few calls instead of one per step. For the host backend only;
//! the harness's memory store is written directly.
//!
//! A handler call over several keys starts by fetching the entries of the variables
//! the previous call of its kind read, for all of its keys at once (`state.prefetch`):
//! reads of them are then answered here, until the processor changes the entry (then
//! the host answers) or calls the host about the key's state directly (then the host
//! answers every read of that key).
//!
//! Semantics are those of one call per change: a read of an entry with a buffered
//! change first hands the buffer over, and so does every call whose answer or effect
//! depends on the host's state as a whole (map iteration, lists, timer listing, taking
//! a timer while timer changes are buffered); the buffer is handed over before each
//! handler returns. Each key of a call is selected on the host as the processor starts
//! on it (so that a failure, even a trap, names it); a timer's key by taking the timer.

use std::cell::RefCell;
use std::collections::HashMap;
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

/// A call over fewer keys reads entry by entry (a prefetch would cost as many calls).
const PREFETCH_MIN_KEYS: usize = 4;

/// What `state.prefetch` answers for a key whose entries it did not fetch.
const NOT_PREFETCHED: u32 = u32::MAX;

/// The kinds of handler calls, each learning which variables to prefetch from its own
/// last call.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallKind {
    /// `handle-input-rows`.
    Input = 0,
    /// `handle-expired-timers`.
    Timers = 1,
    /// `handle-initial-state` (one key: no prefetch).
    InitialState = 2,
}

/// The entries `state.prefetch` answered with for the current call.
#[derive(Default)]
struct Prefetched {
    /// The answer.
    bytes: Vec<u8>,
    /// The variables it holds, in its order.
    variables: Vec<u32>,
    /// How many keys the call has.
    keys: usize,
    /// For each variable (in order) and key of the call: where the key's count is in
    /// `bytes`, or [`NOT_PREFETCHED`] when the host did not fetch or a direct call
    /// about the key's state made them stale.
    at: Vec<u32>,
}

impl Prefetched {
    /// Indexes an answer for `variables` over `keys` keys; an answer that does not
    /// follow the contract's layout is dropped (every read then goes to the host).
    fn new(bytes: Vec<u8>, variables: Vec<u32>, keys: usize) -> Self {
        let mut at = Vec::with_capacity(variables.len() * keys);
        let mut pos = 0usize;
        for _ in 0..variables.len() * keys {
            let Some(count) = u32_at(&bytes, pos) else { return Prefetched::default() };
            at.push(if count == NOT_PREFETCHED { NOT_PREFETCHED } else { pos as u32 });
            pos += 4;
            for _ in 0..if count == NOT_PREFETCHED { 0 } else { count } {
                for _ in 0..2 {
                    let Some(len) = u32_at(&bytes, pos) else { return Prefetched::default() };
                    pos = pos.saturating_add(4).saturating_add(len as usize);
                }
            }
        }
        if pos != bytes.len() {
            return Prefetched::default();
        }
        Prefetched { bytes, variables, keys, at }
    }

    /// The entry `user_key` of `variable` for `key` as fetched (`Some(None)`: it has
    /// none), or `None` when it was not fetched.
    fn get(&self, variable: u32, key: u32, user_key: &[u8]) -> Option<Option<&[u8]>> {
        let slot = self.variables.iter().position(|v| *v == variable)?;
        let pos = *self.at.get(slot * self.keys + key as usize)?;
        if pos == NOT_PREFETCHED {
            return None;
        }
        let mut pos = pos as usize;
        let count = u32_at(&self.bytes, pos)?;
        pos += 4;
        for _ in 0..count {
            let entry_key = self.byte_string(&mut pos)?;
            let value = self.byte_string(&mut pos)?;
            if entry_key == user_key {
                return Some(Some(value));
            }
        }
        Some(None)
    }

    fn byte_string(&self, pos: &mut usize) -> Option<&[u8]> {
        let len = u32_at(&self.bytes, *pos)? as usize;
        let bytes = self.bytes.get(*pos + 4..*pos + 4 + len)?;
        *pos += 4 + len;
        Some(bytes)
    }

    /// Forgets what was fetched for `key` (a direct call may change its state).
    fn forget_key(&mut self, key: u32) {
        for slot in 0..self.variables.len() {
            if let Some(at) = self.at.get_mut(slot * self.keys + key as usize) {
                *at = NOT_PREFETCHED;
            }
        }
    }
}

fn u32_at(bytes: &[u8], pos: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(pos..pos.checked_add(4)?)?.try_into().ok()?))
}

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
    /// Hashes of (variable, key, user key) the call changed, each with the number of
    /// hand-overs before its last change: equal to `flushes`, the change is still
    /// buffered (a collision only hands the buffer over early, or reads from the host).
    changed: HashMap<u64, u32, BuildHasherDefault<Prehashed>>,
    /// How many times the call handed its buffer over.
    flushes: u32,
    /// Whether a timer change is buffered.
    timers: bool,
    /// The entries fetched for the call.
    prefetched: Prefetched,
    /// The kind of the current call.
    kind: Option<CallKind>,
    /// The variables the current call read.
    read_now: Vec<u32>,
    /// For each kind of call, the variables its last call read.
    wanted: [Vec<u32>; 3],
}

thread_local! {
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
}

fn with<R>(f: impl FnOnce(&mut Pending) -> R) -> R {
    PENDING.with(|pending| f(&mut pending.borrow_mut()))
}

/// A hash of an entry's place, a word at a time (as FxHash mixes).
fn place(variable: u32, key: u32, user_key: &[u8]) -> u64 {
    const MIX: u64 = 0x517c_c1b7_2722_0a95;
    let step = |hash: u64, word: u64| (hash.rotate_left(5) ^ word).wrapping_mul(MIX);
    let mut hash = step(user_key.len() as u64, (u64::from(variable) << 32) | u64::from(key));
    let mut words = user_key.chunks_exact(8);
    for word in &mut words {
        hash = step(hash, u64::from_le_bytes(word.try_into().unwrap_or_default()));
    }
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    step(hash, u64::from_le_bytes(tail))
}

impl Pending {
    fn flush(&mut self) {
        if !self.bytes.is_empty() {
            state::apply_changes(&self.bytes);
            self.bytes.clear();
            self.flushes += 1;
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
        self.changed.insert(place(variable, self.current, user_key), self.flushes);
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

/// Starts a handler call of `kind` over `keys` keys whose key `selected` (if any) the
/// host made current itself; what an earlier call left (it failed) is dropped. Fetches
/// the entries of the variables the last call of its kind read.
pub(crate) fn start_call(kind: CallKind, keys: usize, selected: Option<u32>) {
    with(|pending| {
        if let Some(last) = pending.kind {
            pending.wanted[last as usize] = std::mem::take(&mut pending.read_now);
        }
        pending.kind = Some(kind);
        pending.read_now.clear();
        pending.bytes.clear();
        pending.changed.clear();
        pending.flushes = 0;
        pending.record_key = None;
        pending.timers = false;
        pending.current = selected.unwrap_or(0);
        pending.selected = selected;
        pending.prefetched = Prefetched::default();
        let wanted = &pending.wanted[kind as usize];
        if kind != CallKind::InitialState && keys >= PREFETCH_MIN_KEYS && !wanted.is_empty() {
            let answer = state::prefetch(wanted);
            pending.prefetched = Prefetched::new(answer, wanted.clone(), keys);
        }
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
        let current = pending.current;
        pending.prefetched.forget_key(current);
    });
}

/// Before a call that only needs the host's current key (a log message; also from the
/// panic hook, so never while the buffer is borrowed). Outside a handler call (in
/// `init`) there is no key to select.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) fn select_current() {
    PENDING.with(|pending| {
        if let Ok(mut pending) = pending.try_borrow_mut()
            && pending.kind.is_some()
        {
            pending.select();
        }
    });
}

/// Shows `answer` the current key's value of value variable `variable` (`user_key`
/// empty) or entry `user_key` of map variable `variable` (from what the call fetched,
/// when it can).
pub(crate) fn read_with<R>(variable: u32, user_key: &[u8], answer: impl FnOnce(Option<&[u8]>) -> R) -> R {
    PENDING.with(|pending| {
        let mut pending = pending.borrow_mut();
        if !pending.read_now.contains(&variable) {
            pending.read_now.push(variable);
        }
        match pending.changed.get(&place(variable, pending.current, user_key)) {
            Some(flushes) if *flushes == pending.flushes => pending.flush(),
            Some(_) => {}
            None => {
                if let Some(fetched) = pending.prefetched.get(variable, pending.current, user_key) {
                    return answer(fetched);
                }
            }
        }
        let key = pending.current;
        drop(pending);
        answer(state::read(variable, key, user_key).as_deref())
    })
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
