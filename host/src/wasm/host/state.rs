//! `eddy:processor/state`: value, list and map state variables of the current key.
//! Every write is held to `operator.max-state-value-bytes` (the value) and
//! `operator.max-state-bytes-per-batch` (what the batch has buffered).

use wasmtime::component::Resource;

use super::{HostState, ListStateHandle, MapStateHandle, ValueStateHandle, check_value, trap};
use crate::state::StateKind;
use crate::wasm::bindings::eddy::processor::state;

/// Splits the store data into the open variable and the current key + transaction.
macro_rules! keyed {
    ($self:ident, $handle:expr, $what:literal) => {{
        let decl = &$self.table.get(&$handle)?.0;
        let (Some(key), Some(txn), usage) = $self.scope.key_and_txn() else {
            wasmtime::bail!(
                "state variable '{}' was used outside a keyed call ({}); state is only reachable while handling a key",
                decl.name,
                $what
            );
        };
        (decl, key, txn, usage)
    }};
}

/// Runs a write on the batch's transaction and charges what it added to the
/// processor's buffered state changes (a trap past the limit).
macro_rules! charged {
    ($self:ident, $txn:ident, $usage:ident, $write:expr) => {{
        let before = $txn.buffered_bytes();
        let result = $write;
        $usage.charge_state(&$self.limits, before, $txn.buffered_bytes()).map_err(trap)?;
        result
    }};
}

impl state::Host for HostState {}

impl state::HostValueState for HostState {
    fn new(&mut self, name: String) -> wasmtime::Result<Resource<ValueStateHandle>> {
        let decl = self.open(&name, StateKind::Value)?;
        Ok(self.table.push(ValueStateHandle(decl))?)
    }
    fn get(&mut self, this: Resource<ValueStateHandle>) -> wasmtime::Result<Option<Vec<u8>>> {
        let (decl, key, txn, _) = keyed!(self, this, "value get");
        key.value_get(txn, decl).map_err(trap)
    }
    fn exists(&mut self, this: Resource<ValueStateHandle>) -> wasmtime::Result<bool> {
        let (decl, key, txn, _) = keyed!(self, this, "value exists");
        Ok(key.value_get(txn, decl).map_err(trap)?.is_some())
    }
    fn update(&mut self, this: Resource<ValueStateHandle>, value: Vec<u8>) -> wasmtime::Result<()> {
        let (decl, key, txn, usage) = keyed!(self, this, "value update");
        check_value(&self.limits, decl, "a value", value.len()).map_err(trap)?;
        charged!(self, txn, usage, key.value_update(txn, decl, &value));
        Ok(())
    }
    fn clear(&mut self, this: Resource<ValueStateHandle>) -> wasmtime::Result<()> {
        let (decl, key, txn, usage) = keyed!(self, this, "value clear");
        charged!(self, txn, usage, key.clear(txn, decl)).map_err(trap)
    }
    fn drop(&mut self, this: Resource<ValueStateHandle>) -> wasmtime::Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

impl state::HostListState for HostState {
    fn new(&mut self, name: String) -> wasmtime::Result<Resource<ListStateHandle>> {
        let decl = self.open(&name, StateKind::List)?;
        Ok(self.table.push(ListStateHandle(decl))?)
    }
    fn get(&mut self, this: Resource<ListStateHandle>) -> wasmtime::Result<Vec<Vec<u8>>> {
        let (decl, key, txn, _) = keyed!(self, this, "list get");
        key.list_get(txn, decl).map_err(trap)
    }
    fn exists(&mut self, this: Resource<ListStateHandle>) -> wasmtime::Result<bool> {
        let (decl, key, txn, _) = keyed!(self, this, "list exists");
        Ok(!key.list_get(txn, decl).map_err(trap)?.is_empty())
    }
    fn append(&mut self, this: Resource<ListStateHandle>, values: Vec<Vec<u8>>) -> wasmtime::Result<()> {
        let (decl, key, txn, usage) = keyed!(self, this, "list append");
        let stored = charged!(self, txn, usage, key.list_append(txn, decl, &values)).map_err(trap)?;
        check_value(&self.limits, decl, "the list", stored).map_err(trap)
    }
    fn put(&mut self, this: Resource<ListStateHandle>, values: Vec<Vec<u8>>) -> wasmtime::Result<()> {
        let (decl, key, txn, usage) = keyed!(self, this, "list put");
        let stored = charged!(self, txn, usage, key.list_put(txn, decl, &values));
        check_value(&self.limits, decl, "the list", stored).map_err(trap)
    }
    fn clear(&mut self, this: Resource<ListStateHandle>) -> wasmtime::Result<()> {
        let (decl, key, txn, usage) = keyed!(self, this, "list clear");
        charged!(self, txn, usage, key.clear(txn, decl)).map_err(trap)
    }
    fn drop(&mut self, this: Resource<ListStateHandle>) -> wasmtime::Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

impl state::HostMapState for HostState {
    fn new(&mut self, name: String) -> wasmtime::Result<Resource<MapStateHandle>> {
        let decl = self.open(&name, StateKind::Map)?;
        Ok(self.table.push(MapStateHandle(decl))?)
    }
    fn get(&mut self, this: Resource<MapStateHandle>, user_key: Vec<u8>) -> wasmtime::Result<Option<Vec<u8>>> {
        let (decl, key, txn, _) = keyed!(self, this, "map get");
        key.map_get(txn, decl, &user_key).map_err(trap)
    }
    fn contains(&mut self, this: Resource<MapStateHandle>, user_key: Vec<u8>) -> wasmtime::Result<bool> {
        let (decl, key, txn, _) = keyed!(self, this, "map contains");
        Ok(key.map_get(txn, decl, &user_key).map_err(trap)?.is_some())
    }
    fn update(&mut self, this: Resource<MapStateHandle>, user_key: Vec<u8>, value: Vec<u8>) -> wasmtime::Result<()> {
        let (decl, key, txn, usage) = keyed!(self, this, "map update");
        check_value(&self.limits, decl, "a map entry", user_key.len() + value.len()).map_err(trap)?;
        charged!(self, txn, usage, key.map_update(txn, decl, &user_key, &value));
        Ok(())
    }
    fn remove(&mut self, this: Resource<MapStateHandle>, user_key: Vec<u8>) -> wasmtime::Result<()> {
        let (decl, key, txn, usage) = keyed!(self, this, "map remove");
        charged!(self, txn, usage, key.map_remove(txn, decl, &user_key));
        Ok(())
    }
    fn exists(&mut self, this: Resource<MapStateHandle>) -> wasmtime::Result<bool> {
        let (decl, key, txn, _) = keyed!(self, this, "map exists");
        Ok(!key.map_entries(txn, decl).map_err(trap)?.is_empty())
    }
    fn keys(&mut self, this: Resource<MapStateHandle>) -> wasmtime::Result<Vec<Vec<u8>>> {
        let (decl, key, txn, _) = keyed!(self, this, "map keys");
        Ok(key.map_entries(txn, decl).map_err(trap)?.into_iter().map(|(k, _)| k).collect())
    }
    fn values(&mut self, this: Resource<MapStateHandle>) -> wasmtime::Result<Vec<Vec<u8>>> {
        let (decl, key, txn, _) = keyed!(self, this, "map values");
        Ok(key.map_entries(txn, decl).map_err(trap)?.into_iter().map(|(_, v)| v).collect())
    }
    fn iterator(&mut self, this: Resource<MapStateHandle>) -> wasmtime::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let (decl, key, txn, _) = keyed!(self, this, "map iterator");
        key.map_entries(txn, decl).map_err(trap)
    }
    fn clear(&mut self, this: Resource<MapStateHandle>) -> wasmtime::Result<()> {
        let (decl, key, txn, usage) = keyed!(self, this, "map clear");
        charged!(self, txn, usage, key.clear(txn, decl)).map_err(trap)
    }
    fn drop(&mut self, this: Resource<MapStateHandle>) -> wasmtime::Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}
