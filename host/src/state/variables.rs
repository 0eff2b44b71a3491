//! Typed operations on state variables and timers of one grouping key.
//!
//! Every read hides values whose TTL has expired at the batch's processing time, so a
//! processor never sees an expired value even before it is physically removed.

use anyhow::{Result, bail};

use super::layout::{self, NEVER};
use super::store::{Cf, StateTxn};
use super::timer_buckets::{BucketKey, bucket_key};

/// The kind of a state variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateKind {
    /// One value per key.
    Value,
    /// An ordered list per key.
    List,
    /// A map of user keys to values per key.
    Map,
}

/// A state variable as a processor declared it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VariableDecl {
    /// The variable's name.
    pub name: String,
    /// value, list or map.
    pub kind: StateKind,
    /// Time to live in microseconds of processing time, from each write.
    pub ttl_us: Option<u64>,
}

impl From<&crate::contract::StateDeclaration> for VariableDecl {
    /// The host's view of a variable a processor declared in `init`.
    fn from(decl: &crate::contract::StateDeclaration) -> Self {
        use crate::contract::StateKind as Declared;
        let kind = match decl.kind {
            Declared::Value => StateKind::Value,
            Declared::List => StateKind::List,
            Declared::Map => StateKind::Map,
        };
        Self { name: decl.name.clone(), kind, ttl_us: decl.ttl }
    }
}

impl VariableDecl {
    fn expiry(&self, now: i64) -> i64 {
        match self.ttl_us {
            Some(ttl) => now.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX)),
            None => NEVER,
        }
    }
}

/// One grouping key of one operator at one processing time: the scope that state
/// variables and timers act in.
#[derive(Clone, Debug)]
pub struct KeyScope {
    operator: u16,
    key_group: u16,
    /// The key's prefix ([`layout::key_prefix`]), which ends with the encoded key
    /// (after its first [`layout::KEY_PREFIX_HEADER`] bytes).
    prefix: Vec<u8>,
    now: i64,
    /// Whether the key's timers are also kept by key (the `timers` family), besides the
    /// timer index: only an operator whose timers are listed needs them (see
    /// [`with_timers_by_key`](Self::with_timers_by_key)).
    timers_by_key: bool,
}

pub(super) fn corrupt(what: &str) -> anyhow::Error {
    anyhow::anyhow!("corrupt {what} in the state store (the bytes do not follow eddy's layout)")
}

/// The payload of a stamped value if it is still alive at `now`.
pub fn value_get(raw: Option<Vec<u8>>, now: i64) -> Result<Option<Vec<u8>>> {
    let Some(mut raw) = raw else { return Ok(None) };
    let (expiry, payload) = layout::unstamp(&raw).ok_or_else(|| corrupt("value"))?;
    if expiry <= now {
        return Ok(None);
    }
    // The payload moves to the front of the same buffer (no second allocation).
    raw.drain(..raw.len() - payload.len());
    Ok(Some(raw))
}

/// The elements of a stored list that are still alive at `now`, with their expiry.
pub fn live_list(raw: &[u8], now: i64) -> Result<Vec<(i64, Vec<u8>)>> {
    let elements = layout::decode_list(raw).ok_or_else(|| corrupt("list"))?;
    Ok(elements.into_iter().filter(|(expiry, _)| *expiry > now).map(|(e, p)| (e, p.to_vec())).collect())
}

/// What `state.prefetch` answers for a key whose entries it did not fetch.
pub const NOT_PREFETCHED: u32 = u32::MAX;

impl KeyScope {
    /// The scope of `key` (encoded) in `key_group` of `operator` at processing time `now`.
    pub fn new(operator: u16, key_group: u16, key: &[u8], now: i64) -> Self {
        Self { operator, key_group, prefix: layout::key_prefix(operator, key_group, key), now, timers_by_key: true }
    }

    /// This scope with the key's timers kept by key (the default) or only in the timer
    /// index. The index alone serves registering, deleting and firing timers: a timer
    /// then costs one write instead of two when registered and none when it fires.
    /// Listing a key's timers needs them by key; an operator's store converts between
    /// the two ([`Timers::keep_by_key`]).
    pub fn with_timers_by_key(mut self, timers_by_key: bool) -> Self {
        self.timers_by_key = timers_by_key;
        self
    }

    /// The family whose changes count a key's timer registrations and deletions.
    pub fn timer_family(&self) -> Cf {
        if self.timers_by_key { Cf::Timers } else { Cf::TimerIndex }
    }

    /// The key group the key hashes into.
    pub fn key_group(&self) -> u16 {
        self.key_group
    }

    /// The encoded grouping key.
    pub fn key(&self) -> &[u8] {
        &self.prefix[layout::KEY_PREFIX_HEADER..]
    }

    /// The state key of a value or list variable (a map's entries are under it).
    pub fn var_key(&self, decl: &VariableDecl) -> Vec<u8> {
        layout::variable_key(&self.prefix, &decl.name)
    }

    /// Writes a stamped entry, indexing it for eviction when it can expire.
    fn put_expiring(&self, txn: &mut StateTxn, decl: &VariableDecl, state_key: Vec<u8>, expiry: i64, raw: Vec<u8>) {
        if expiry != NEVER {
            txn.put(
                Cf::TtlIndex,
                layout::ttl_index_key(self.operator, expiry, decl.kind as u8, &state_key),
                Vec::new(),
            );
        }
        txn.put(Cf::State, state_key, raw);
    }

    /// The live value of a value variable.
    pub fn value_get(&self, txn: &StateTxn, decl: &VariableDecl) -> Result<Option<Vec<u8>>> {
        value_get(txn.get(Cf::State, &self.var_key(decl))?, self.now)
    }

    /// Replaces the value of a value variable.
    pub fn value_update(&self, txn: &mut StateTxn, decl: &VariableDecl, value: &[u8]) {
        let expiry = decl.expiry(self.now);
        self.put_expiring(txn, decl, self.var_key(decl), expiry, layout::stamp(expiry, value));
    }

    /// Removes the value (or the whole list) of a variable.
    pub fn clear(&self, txn: &mut StateTxn, decl: &VariableDecl) -> Result<()> {
        match decl.kind {
            StateKind::Value | StateKind::List => txn.delete(Cf::State, self.var_key(decl)),
            StateKind::Map => {
                for (key, _) in txn.scan_prefix(Cf::State, &self.var_key(decl))? {
                    txn.delete(Cf::State, key);
                }
            }
        }
        Ok(())
    }

    /// The live elements of a list variable, oldest first.
    pub fn list_get(&self, txn: &StateTxn, decl: &VariableDecl) -> Result<Vec<Vec<u8>>> {
        Ok(self.list_entries(txn, decl)?.into_iter().map(|(_, payload)| payload).collect())
    }

    fn list_entries(&self, txn: &StateTxn, decl: &VariableDecl) -> Result<Vec<(i64, Vec<u8>)>> {
        match txn.get(Cf::State, &self.var_key(decl))? {
            Some(raw) => live_list(&raw, self.now),
            None => Ok(Vec::new()),
        }
    }

    /// Appends elements to a list variable (expired elements are dropped on the way);
    /// returns the size of the list as stored.
    pub fn list_append(&self, txn: &mut StateTxn, decl: &VariableDecl, values: &[Vec<u8>]) -> Result<usize> {
        let mut entries = self.list_entries(txn, decl)?;
        let expiry = decl.expiry(self.now);
        entries.extend(values.iter().map(|value| (expiry, value.clone())));
        Ok(self.write_list(txn, decl, &entries, expiry))
    }

    /// Replaces a list variable's elements; returns the size of the list as stored.
    pub fn list_put(&self, txn: &mut StateTxn, decl: &VariableDecl, values: &[Vec<u8>]) -> usize {
        let expiry = decl.expiry(self.now);
        let entries: Vec<(i64, Vec<u8>)> = values.iter().map(|value| (expiry, value.clone())).collect();
        self.write_list(txn, decl, &entries, expiry)
    }

    fn write_list(
        &self,
        txn: &mut StateTxn,
        decl: &VariableDecl,
        entries: &[(i64, Vec<u8>)],
        new_expiry: i64,
    ) -> usize {
        if entries.is_empty() {
            txn.delete(Cf::State, self.var_key(decl));
            0
        } else {
            let raw = layout::encode_list(entries.iter().map(|(expiry, payload)| (*expiry, payload.as_slice())));
            let stored = raw.len();
            self.put_expiring(txn, decl, self.var_key(decl), new_expiry, raw);
            stored
        }
    }

    fn map_entry_key(&self, decl: &VariableDecl, user_key: &[u8]) -> Vec<u8> {
        let mut key = self.var_key(decl);
        key.extend_from_slice(user_key);
        key
    }

    /// The live value of `user_key` in a map variable.
    pub fn map_get(&self, txn: &StateTxn, decl: &VariableDecl, user_key: &[u8]) -> Result<Option<Vec<u8>>> {
        value_get(txn.get(Cf::State, &self.map_entry_key(decl, user_key))?, self.now)
    }

    /// Sets `user_key` in a map variable.
    pub fn map_update(&self, txn: &mut StateTxn, decl: &VariableDecl, user_key: &[u8], value: &[u8]) {
        let expiry = decl.expiry(self.now);
        self.put_expiring(txn, decl, self.map_entry_key(decl, user_key), expiry, layout::stamp(expiry, value));
    }

    /// Removes `user_key` from a map variable.
    pub fn map_remove(&self, txn: &mut StateTxn, decl: &VariableDecl, user_key: &[u8]) {
        txn.delete(Cf::State, self.map_entry_key(decl, user_key));
    }

    /// The live entries of a map variable, in user-key byte order.
    pub fn map_entries(&self, txn: &StateTxn, decl: &VariableDecl) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let prefix = self.var_key(decl);
        let mut out = Vec::new();
        for (key, raw) in txn.scan_prefix(Cf::State, &prefix)? {
            let (expiry, payload) = layout::unstamp(&raw).ok_or_else(|| corrupt("map entry"))?;
            if expiry > self.now {
                out.push((key[prefix.len()..].to_vec(), payload.to_vec()));
            }
        }
        Ok(out)
    }

    /// Appends to `out` the live entries of a value or map variable held in memory, for
    /// `state.prefetch`: a u32 count, then each entry's user key and value (a u32
    /// length, then the bytes). Appends [`NOT_PREFETCHED`] instead when the store holds
    /// no in-memory copy or the entries pass `max_entries` or `max_bytes`. `prefix` is
    /// room for the variable's key.
    pub fn prefetch_into(
        &self,
        txn: &StateTxn,
        decl: &VariableDecl,
        (max_entries, max_bytes): (u32, usize),
        prefix: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let start = out.len();
        out.extend_from_slice(&0u32.to_le_bytes());
        layout::variable_key_into(&self.prefix, &decl.name, prefix);
        let prefix = prefix.as_slice();
        let (mut count, mut corrupt_entry, mut fits) = (0u32, false, true);
        let held = txn.visit_prefix_in_memory(prefix, |key, raw| {
            // A value variable is its one key; what lies under it is another's.
            let user_key = &key[prefix.len()..];
            if decl.kind == StateKind::Value && !user_key.is_empty() {
                return false;
            }
            let Some((expiry, payload)) = layout::unstamp(raw) else {
                corrupt_entry = true;
                return false;
            };
            if expiry <= self.now {
                return true;
            }
            count += 1;
            fits = count <= max_entries && out.len() - start + user_key.len() + payload.len() + 8 <= max_bytes;
            if fits {
                for bytes in [user_key, payload] {
                    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                    out.extend_from_slice(bytes);
                }
            }
            fits
        });
        if corrupt_entry {
            return Err(corrupt(if decl.kind == StateKind::Value { "value" } else { "map entry" }));
        }
        if held && fits {
            out[start..start + 4].copy_from_slice(&count.to_le_bytes());
        } else {
            out.truncate(start);
            out.extend_from_slice(&NOT_PREFETCHED.to_le_bytes());
        }
        Ok(())
    }

    /// Registers a timer at `expiry` for this key (once, however often it is called).
    pub fn timer_register(&self, txn: &mut StateTxn, expiry: i64) {
        if self.timers_by_key {
            txn.put(Cf::Timers, layout::timer_key(&self.prefix, expiry), Vec::new());
        }
        txn.set_timer(self.timer_bucket(expiry), self.key(), true);
    }

    /// The timer-index bucket of this key's timers at `expiry`.
    fn timer_bucket(&self, expiry: i64) -> BucketKey {
        bucket_key(self.operator, expiry, self.key_group)
    }

    /// Deletes this key's timer at `expiry`, if there is one.
    pub fn timer_delete(&self, txn: &mut StateTxn, expiry: i64) {
        if self.timers_by_key {
            txn.delete(Cf::Timers, layout::timer_key(&self.prefix, expiry));
        }
        txn.set_timer(self.timer_bucket(expiry), self.key(), false);
    }

    /// Deletes this key's due timer at `expiry` as it fires; false when this
    /// transaction had deleted it already (a timer found due at the start of a pass
    /// may be deleted by a handler of that pass). Its index entry is left to the
    /// batch's range drop of fired timers ([`Timers::drop_fired_index`]).
    pub fn timer_fire(&self, txn: &mut StateTxn, expiry: i64) -> Result<bool> {
        let bucket = self.timer_bucket(expiry);
        if !self.timers_by_key {
            // A timer deleted before the pass is not due; one deleted during it is a
            // change this transaction holds (the pass's range drop keeps the changes
            // inside the range from being written ahead of the commit).
            return Ok(txn.take_due_timer(&bucket, self.key()));
        }
        if txn.delete_once(Cf::Timers, layout::timer_key(&self.prefix, expiry))? {
            return Ok(false);
        }
        txn.forget_timer(&bucket, self.key());
        Ok(true)
    }

    /// This key's timers, earliest first (only when kept by key).
    pub fn timer_list(&self, txn: &StateTxn) -> Result<Vec<i64>> {
        if !self.timers_by_key {
            bail!(
                "this operator's timers are not kept by key, so they cannot be listed (eddy keeps them by key for a module that imports list-timers)"
            );
        }
        txn.scan_prefix(Cf::Timers, &self.prefix)?
            .into_iter()
            .map(|(key, _)| layout::from_sortable_i64(&key[self.prefix.len()..]).ok_or_else(|| corrupt("timer")))
            .collect()
    }
}
