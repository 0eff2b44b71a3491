//! Typed state variables over CBOR-encoded bytes.

use std::any::type_name;
use std::cell::{OnceCell, RefCell};
use std::marker::PhantomData;
use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::eddy::processor::state as host;
use crate::error::{Error, Result};
use crate::store::{Backend, Store};

/// How long a state value lives: forever ([`Ttl::NONE`]) or a duration of processing
/// time counted from each write (per value, per list element, per map entry).
///
/// `Duration` converts into it, so `Duration::from_secs(3600)` can be passed wherever
/// a `Ttl` is expected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ttl(Option<Duration>);

impl Ttl {
    /// Kept until cleared.
    pub const NONE: Ttl = Ttl(None);

    /// Expires `duration` after each write.
    pub fn after(duration: Duration) -> Ttl {
        Ttl(Some(duration))
    }

    /// The duration, if any.
    pub fn duration(&self) -> Option<Duration> {
        self.0
    }

    /// The TTL in microseconds as the host takes it; fails on zero.
    pub(crate) fn to_micros(self, name: &str) -> Result<Option<u64>> {
        match self.0 {
            None => Ok(None),
            Some(d) if d.is_zero() => {
                Err(Error::msg(format!("state variable `{name}` has a zero TTL; use Ttl::NONE for no expiry")))
            }
            Some(d) => Ok(Some(u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1))),
        }
    }
}

impl From<Duration> for Ttl {
    fn from(duration: Duration) -> Self {
        Ttl::after(duration)
    }
}

thread_local! {
    /// Buffers that held encoded values, kept for the next encodings: a state access
    /// encodes a key or a value and the SDK copies it on, so each would otherwise
    /// cost an allocation.
    static SPARE_BUFFERS: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// How many spare buffers are kept, and the largest kept.
const SPARE_BUFFERS_KEPT: usize = 8;
const SPARE_BUFFER_BYTES: usize = 4096;

/// A value's CBOR encoding, in a buffer given back for reuse when dropped.
pub(crate) struct Encoded(Vec<u8>);

impl Encoded {
    /// The bytes, as a vector of their own.
    pub(crate) fn into_vec(mut self) -> Vec<u8> {
        std::mem::take(&mut self.0)
    }
}

impl std::ops::Deref for Encoded {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Encoded {
    fn drop(&mut self) {
        let buffer = std::mem::take(&mut self.0);
        if buffer.capacity() == 0 || buffer.capacity() > SPARE_BUFFER_BYTES {
            return;
        }
        SPARE_BUFFERS.with(|spare| {
            if let Ok(mut spare) = spare.try_borrow_mut()
                && spare.len() < SPARE_BUFFERS_KEPT
            {
                spare.push(buffer);
            }
        });
    }
}

/// Encodes a state value as CBOR (by the fast path when it can, else by `ciborium`).
pub(crate) fn encode<T: Serialize + ?Sized>(name: &str, value: &T) -> Result<Encoded> {
    let spare = SPARE_BUFFERS.with(|spare| spare.try_borrow_mut().ok().and_then(|mut spare| spare.pop()));
    let mut bytes = Encoded(spare.unwrap_or_else(|| Vec::with_capacity(32)));
    bytes.0.clear();
    if crate::cbor::to_vec(value, &mut bytes.0) {
        return Ok(bytes);
    }
    ciborium::into_writer(value, &mut bytes.0)
        .map_err(|e| Error::msg(format!("state `{name}`: cannot encode a `{}` as CBOR: {e}", type_name::<T>())))?;
    Ok(bytes)
}

thread_local! {
    /// The decoder's scratch space for text and byte strings, reused by every decode
    /// (`ciborium::from_reader` zeroes a new 4 KiB buffer on each call).
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(vec![0; 4096]);
}

/// Decodes a CBOR state value (by the fast path when it can, else by `ciborium`).
pub(crate) fn decode<T: DeserializeOwned>(name: &str, bytes: &[u8]) -> Result<T> {
    if let Some(value) = crate::cbor::from_slice(bytes) {
        return Ok(value);
    }
    let decoded = SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut scratch) => ciborium::de::from_reader_with_buffer(bytes, &mut scratch),
        Err(_) => ciborium::from_reader(bytes),
    });
    decoded.map_err(|e| {
        Error::msg(format!(
            "state `{name}`: cannot decode the stored value as `{}`: {e} (did the variable's \
             type change? then give the new type a new variable name)",
            type_name::<T>()
        ))
    })
}

/// Decodes a CBOR state value, if there is one.
fn decode_some<T: DeserializeOwned>(name: &str, bytes: Option<&[u8]>) -> Result<Option<T>> {
    bytes.map(|bytes| decode(name, bytes)).transpose()
}

fn decode_all<T: DeserializeOwned>(name: &str, all: Vec<Vec<u8>>) -> Result<Vec<T>> {
    all.iter().map(|bytes| decode(name, bytes)).collect()
}

fn encode_all<'a, T: Serialize + 'a>(name: &str, values: impl IntoIterator<Item = &'a T>) -> Result<Vec<Vec<u8>>> {
    values.into_iter().map(|value| encode(name, value).map(Encoded::into_vec)).collect()
}

/// Runs `$host` with the opened WIT resource (after handing buffered changes over and
/// selecting the current key) or `$memory` with the in-memory store.
macro_rules! dispatch {
    ($self:ident, $resource:ty, |$h:ident| $host:expr, |$m:ident| $memory:expr) => {{
        $self.store.check_active(|| format!("state variable `{}`", $self.name))?;
        match &$self.store.backend {
            Backend::Host => {
                crate::changes::before_direct_call();
                let $h = $self.handle.get_or_init(|| <$resource>::new(&$self.name));
                $host
            }
            Backend::Memory(memory) => {
                #[allow(unused_mut)]
                let mut $m = memory.borrow_mut();
                $memory
            }
        }
    }};
}

/// Runs `$host`, a read or a buffered change (see [`changes`](crate::changes)), or
/// `$memory` with the in-memory store.
macro_rules! buffered {
    ($self:ident, $host:expr, |$m:ident| $memory:expr) => {{
        $self.store.check_active(|| format!("state variable `{}`", $self.name))?;
        match &$self.store.backend {
            Backend::Host => $host,
            Backend::Memory(memory) => {
                #[allow(unused_mut)]
                let mut $m = memory.borrow_mut();
                $memory
            }
        }
    }};
}

/// One value per key (Spark's `ValueState`), declared in init with
/// [`InitContext::value_state`](crate::InitContext::value_state).
pub struct ValueState<T> {
    name: String,
    /// Its place in the spec's state variables.
    variable: u32,
    store: Rc<Store>,
    _type: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned> ValueState<T> {
    pub(crate) fn new(name: &str, variable: u32, store: Rc<Store>) -> Self {
        ValueState { name: name.to_string(), variable, store, _type: PhantomData }
    }

    /// The variable's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The current key's value, if any and not expired.
    pub fn get(&self) -> Result<Option<T>> {
        buffered!(self, crate::changes::read_with(self.variable, &[], |bytes| decode_some(&self.name, bytes)), |m| {
            let key = m.key.clone();
            decode_some(&self.name, m.value_get(&key, &self.name).as_deref())
        })
    }

    /// Whether the current key has a live value.
    pub fn exists(&self) -> Result<bool> {
        Ok(buffered!(self, crate::changes::read_with(self.variable, &[], |bytes| bytes.is_some()), |m| {
            let key = m.key.clone();
            m.value_get(&key, &self.name).is_some()
        }))
    }

    /// Replaces the current key's value (and restarts its TTL).
    pub fn update(&self, value: &T) -> Result<()> {
        let bytes = encode(&self.name, value)?;
        buffered!(self, crate::changes::value_update(self.variable, &bytes), |m| m
            .value_update(&self.name, bytes.into_vec()));
        Ok(())
    }

    /// Removes the current key's value.
    pub fn clear(&self) -> Result<()> {
        buffered!(self, crate::changes::value_clear(self.variable), |m| m.value_clear(&self.name));
        Ok(())
    }
}

/// An ordered list of values per key (Spark's `ListState`), declared in init with
/// [`InitContext::list_state`](crate::InitContext::list_state).
pub struct ListState<T> {
    name: String,
    store: Rc<Store>,
    handle: OnceCell<host::ListState>,
    _type: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned> ListState<T> {
    pub(crate) fn new(name: &str, store: Rc<Store>) -> Self {
        ListState { name: name.to_string(), store, handle: OnceCell::new(), _type: PhantomData }
    }

    /// The variable's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The current key's live elements, oldest first.
    pub fn get(&self) -> Result<Vec<T>> {
        let all = dispatch!(self, host::ListState, |h| h.get(), |m| {
            let key = m.key.clone();
            m.list_get(&key, &self.name)
        });
        decode_all(&self.name, all)
    }

    /// Whether the current key has at least one live element.
    pub fn exists(&self) -> Result<bool> {
        Ok(dispatch!(self, host::ListState, |h| h.exists(), |m| {
            let key = m.key.clone();
            !m.list_get(&key, &self.name).is_empty()
        }))
    }

    /// Appends one element at the end.
    pub fn append_value(&self, value: &T) -> Result<()> {
        self.append_list(std::slice::from_ref(value))
    }

    /// Appends elements at the end, in order.
    pub fn append_list(&self, values: &[T]) -> Result<()> {
        let all = encode_all(&self.name, values)?;
        dispatch!(self, host::ListState, |h| h.append(&all), |m| m.list_append(&self.name, all));
        Ok(())
    }

    /// Replaces the whole list.
    pub fn put(&self, values: &[T]) -> Result<()> {
        let all = encode_all(&self.name, values)?;
        dispatch!(self, host::ListState, |h| h.put(&all), |m| m.list_put(&self.name, all));
        Ok(())
    }

    /// Removes every element.
    pub fn clear(&self) -> Result<()> {
        dispatch!(self, host::ListState, |h| h.clear(), |m| m.list_clear(&self.name));
        Ok(())
    }
}

/// A map of user keys to values per key (Spark's `MapState`), declared in init with
/// [`InitContext::map_state`](crate::InitContext::map_state). Iteration follows the
/// byte order of the CBOR-encoded user keys.
pub struct MapState<K, V> {
    name: String,
    /// Its place in the spec's state variables.
    variable: u32,
    store: Rc<Store>,
    handle: OnceCell<host::MapState>,
    _type: PhantomData<fn() -> (K, V)>,
}

impl<K: Serialize + DeserializeOwned, V: Serialize + DeserializeOwned> MapState<K, V> {
    pub(crate) fn new(name: &str, variable: u32, store: Rc<Store>) -> Self {
        MapState { name: name.to_string(), variable, store, handle: OnceCell::new(), _type: PhantomData }
    }

    /// The variable's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value for `key`, if present and not expired.
    pub fn get(&self, key: &K) -> Result<Option<V>> {
        let user_key = encode(&self.name, key)?;
        buffered!(
            self,
            crate::changes::read_with(self.variable, &user_key, |bytes| decode_some(&self.name, bytes)),
            |m| decode_some(&self.name, m.map_get(&self.name, &user_key).as_deref())
        )
    }

    /// Whether `key` has a live value.
    pub fn contains(&self, key: &K) -> Result<bool> {
        let user_key = encode(&self.name, key)?;
        Ok(buffered!(self, crate::changes::read_with(self.variable, &user_key, |bytes| bytes.is_some()), |m| m
            .map_get(&self.name, &user_key)
            .is_some()))
    }

    /// Sets the value for `key` (and restarts its TTL).
    pub fn update(&self, key: &K, value: &V) -> Result<()> {
        let user_key = encode(&self.name, key)?;
        let bytes = encode(&self.name, value)?;
        buffered!(self, crate::changes::map_update(self.variable, &user_key, &bytes), |m| m.map_update(
            &self.name,
            user_key.into_vec(),
            bytes.into_vec()
        ));
        Ok(())
    }

    /// Removes `key`.
    pub fn remove(&self, key: &K) -> Result<()> {
        let user_key = encode(&self.name, key)?;
        buffered!(self, crate::changes::map_remove(self.variable, &user_key), |m| m.map_remove(&self.name, &user_key));
        Ok(())
    }

    /// Whether the map has at least one live entry.
    pub fn exists(&self) -> Result<bool> {
        Ok(dispatch!(self, host::MapState, |h| h.exists(), |m| {
            let key = m.key.clone();
            !m.map_entries(&key, &self.name).is_empty()
        }))
    }

    /// Every live key.
    pub fn keys(&self) -> Result<Vec<K>> {
        let all = dispatch!(self, host::MapState, |h| h.keys(), |m| {
            let key = m.key.clone();
            m.map_entries(&key, &self.name).into_iter().map(|(k, _)| k).collect()
        });
        decode_all(&self.name, all)
    }

    /// Every live value, in key order.
    pub fn values(&self) -> Result<Vec<V>> {
        let all = dispatch!(self, host::MapState, |h| h.values(), |m| {
            let key = m.key.clone();
            m.map_entries(&key, &self.name).into_iter().map(|(_, v)| v).collect()
        });
        decode_all(&self.name, all)
    }

    /// Every live entry as (key, value), in key order.
    pub fn iter(&self) -> Result<std::vec::IntoIter<(K, V)>> {
        let all = dispatch!(self, host::MapState, |h| h.iterator(), |m| {
            let key = m.key.clone();
            m.map_entries(&key, &self.name)
        });
        let entries: Result<Vec<(K, V)>> =
            all.iter().map(|(k, v)| Ok((decode(&self.name, k)?, decode(&self.name, v)?))).collect();
        Ok(entries?.into_iter())
    }

    /// Removes every entry.
    pub fn clear(&self) -> Result<()> {
        dispatch!(self, host::MapState, |h| h.clear(), |m| m.map_clear(&self.name));
        Ok(())
    }
}
