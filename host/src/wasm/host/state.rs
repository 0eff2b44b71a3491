//! `eddy:processor/state`: value, list and map state variables of the current key.
//! Every write is held to `operator.max-state-value-bytes` (the value) and
//! `operator.max-state-bytes-per-batch` (what the batch has buffered).

use wasmtime::component::Resource;

use super::{CallScope, HostState, ListStateHandle, MapStateHandle, Usage, ValueStateHandle, check_value, trap};
use crate::state::{KeyScope, StateKind, StateTxn, VariableDecl};
use crate::wasm::bindings::eddy::processor::state;

/// The variable of `$handle`, the current key, the batch's transaction and the usage.
macro_rules! keyed {
    ($self:ident, $handle:expr, $what:literal) => {{
        let decl = &$self.table.get(&$handle)?.0;
        let (key, txn, usage) = $self.scope.keyed(&decl.name, $what)?;
        (decl, key, txn, usage)
    }};
}

/// Runs a write on the batch's transaction and charges what it added to the
/// processor's buffered state changes (a trap past the limit).
macro_rules! charged {
    ($limits:expr, $txn:ident, $usage:ident, $write:expr) => {{
        let before = $txn.buffered_bytes();
        let result = $write;
        $usage.charge_state(&$limits, before, $txn.buffered_bytes()).map_err(trap)?;
        result
    }};
}

impl CallScope {
    /// The current key, the batch's transaction and the usage, for a use (`what`) of
    /// state variable `name`; fails outside a keyed call.
    pub(super) fn keyed(&mut self, name: &str, what: &str) -> wasmtime::Result<(&KeyScope, &mut StateTxn, &mut Usage)> {
        match self.key_and_txn() {
            (Some(key), Some(txn), usage) => Ok((key, txn, usage)),
            _ => wasmtime::bail!(
                "state variable '{name}' was used outside a keyed call ({what}); state is only reachable while handling a key"
            ),
        }
    }
}

/// The writes of the state interface, shared by the variables' own functions and
/// `apply-changes`: each on the current key, held to the limits.
impl HostState {
    pub(super) fn value_update(&mut self, decl: &VariableDecl, value: &[u8]) -> wasmtime::Result<()> {
        let limits = self.limits;
        check_value(&limits, decl, "a value", value.len()).map_err(trap)?;
        let (key, txn, usage) = self.scope.keyed(&decl.name, "value update")?;
        charged!(limits, txn, usage, key.value_update(txn, decl, value));
        Ok(())
    }

    pub(super) fn variable_clear(&mut self, decl: &VariableDecl, what: &str) -> wasmtime::Result<()> {
        let limits = self.limits;
        let (key, txn, usage) = self.scope.keyed(&decl.name, what)?;
        charged!(limits, txn, usage, key.clear(txn, decl)).map_err(trap)
    }

    pub(super) fn map_update(&mut self, decl: &VariableDecl, user_key: &[u8], value: &[u8]) -> wasmtime::Result<()> {
        let limits = self.limits;
        check_value(&limits, decl, "a map entry", user_key.len() + value.len()).map_err(trap)?;
        let (key, txn, usage) = self.scope.keyed(&decl.name, "map update")?;
        charged!(limits, txn, usage, key.map_update(txn, decl, user_key, value));
        Ok(())
    }

    pub(super) fn map_remove(&mut self, decl: &VariableDecl, user_key: &[u8]) -> wasmtime::Result<()> {
        let limits = self.limits;
        let (key, txn, usage) = self.scope.keyed(&decl.name, "map remove")?;
        charged!(limits, txn, usage, key.map_remove(txn, decl, user_key));
        Ok(())
    }
}

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
        let decl = self.table.get(&this)?.0.clone();
        self.value_update(&decl, &value)
    }
    fn clear(&mut self, this: Resource<ValueStateHandle>) -> wasmtime::Result<()> {
        let decl = self.table.get(&this)?.0.clone();
        self.variable_clear(&decl, "value clear")
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
        let limits = self.limits;
        let (decl, key, txn, usage) = keyed!(self, this, "list append");
        let stored = charged!(limits, txn, usage, key.list_append(txn, decl, &values)).map_err(trap)?;
        check_value(&self.limits, decl, "the list", stored).map_err(trap)
    }
    fn put(&mut self, this: Resource<ListStateHandle>, values: Vec<Vec<u8>>) -> wasmtime::Result<()> {
        let limits = self.limits;
        let (decl, key, txn, usage) = keyed!(self, this, "list put");
        let stored = charged!(limits, txn, usage, key.list_put(txn, decl, &values));
        check_value(&self.limits, decl, "the list", stored).map_err(trap)
    }
    fn clear(&mut self, this: Resource<ListStateHandle>) -> wasmtime::Result<()> {
        let decl = self.table.get(&this)?.0.clone();
        self.variable_clear(&decl, "list clear")
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
        let decl = self.table.get(&this)?.0.clone();
        self.map_update(&decl, &user_key, &value)
    }
    fn remove(&mut self, this: Resource<MapStateHandle>, user_key: Vec<u8>) -> wasmtime::Result<()> {
        let decl = self.table.get(&this)?.0.clone();
        self.map_remove(&decl, &user_key)
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
        let decl = self.table.get(&this)?.0.clone();
        self.variable_clear(&decl, "map clear")
    }
    fn drop(&mut self, this: Resource<MapStateHandle>) -> wasmtime::Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}
