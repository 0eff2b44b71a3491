//! The host side of the contract's imports: state variables, timers and logging,
//! all scoped to the key of the current call.

use std::collections::HashMap;
use std::sync::Arc;

use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::eddy::processor::{logging, state, timers, types};
use super::sandbox::{BatchClock, GuestOutput, MemoryCap};
use crate::state::{KeyScope, StateKind, StateTxn, VariableDecl};

/// An open `value-state` handle.
pub struct ValueStateHandle(Arc<VariableDecl>);
/// An open `list-state` handle.
pub struct ListStateHandle(Arc<VariableDecl>);
/// An open `map-state` handle.
pub struct MapStateHandle(Arc<VariableDecl>);

/// What the current call may touch: the declared variables, the batch's state
/// transaction and the current key.
#[derive(Default)]
pub struct CallScope {
    /// The variables declared by `init` (None until `init` returned).
    pub declared: Option<HashMap<String, Arc<VariableDecl>>>,
    /// The declared time mode.
    pub time_mode: Option<types::TimeMode>,
    /// The batch's state changes (None outside a batch).
    pub txn: Option<StateTxn>,
    /// The key of the current call (None outside a keyed call).
    pub key: Option<KeyScope>,
    /// The key's values, for logs and errors.
    pub key_values: Vec<types::Scalar>,
}

/// Everything a guest's store holds.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// The guest's memory cap.
    pub memory: MemoryCap,
    /// The guest's captured stdout/stderr.
    pub output: GuestOutput,
    /// The batch's clock, shared with WASI.
    pub clock: BatchClock,
    /// The module's file name, for messages.
    pub module: String,
    /// What the current call may touch.
    pub scope: CallScope,
}

impl HostState {
    /// A fresh sandboxed state for one instance of `module`.
    pub fn new(module: String, memory_cap_bytes: usize) -> Self {
        let clock = BatchClock::default();
        let output = GuestOutput::default();
        Self {
            wasi: super::sandbox::sandboxed_wasi(&clock, &output),
            table: ResourceTable::new(),
            memory: MemoryCap::new(memory_cap_bytes),
            output,
            clock,
            module,
            scope: CallScope::default(),
        }
    }

    fn open(&mut self, name: &str, kind: StateKind) -> wasmtime::Result<Arc<VariableDecl>> {
        let Some(declared) = &self.scope.declared else {
            wasmtime::bail!(
                "state variable '{name}' was opened during init; open state variables after init returns (the SDK does this lazily)"
            );
        };
        match declared.get(name) {
            Some(decl) if decl.kind == kind => Ok(decl.clone()),
            Some(decl) => {
                wasmtime::bail!("state variable '{name}' is declared as {:?} but was opened as {kind:?}", decl.kind)
            }
            None => {
                let mut names: Vec<&str> = declared.keys().map(String::as_str).collect();
                names.sort_unstable();
                wasmtime::bail!(
                    "state variable '{name}' was not declared in init (declared: {}); declare it in the processor spec",
                    if names.is_empty() { "none".to_string() } else { names.join(", ") }
                )
            }
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

fn trap(error: anyhow::Error) -> wasmtime::Error {
    wasmtime::Error::from_anyhow(error)
}

/// Splits the store data into the open variable and the current key + transaction.
macro_rules! keyed {
    ($self:ident, $handle:expr, $what:literal) => {{
        let decl = $self.table.get(&$handle)?.0.clone();
        let (Some(key), Some(txn)) = ($self.scope.key.as_ref(), $self.scope.txn.as_mut()) else {
            wasmtime::bail!(
                "state variable '{}' was used outside a keyed call ({}); state is only reachable while handling a key",
                decl.name,
                $what
            );
        };
        (decl, key, txn)
    }};
}

impl state::Host for HostState {}

impl state::HostValueState for HostState {
    fn new(&mut self, name: String) -> wasmtime::Result<Resource<ValueStateHandle>> {
        let decl = self.open(&name, StateKind::Value)?;
        Ok(self.table.push(ValueStateHandle(decl))?)
    }
    fn get(&mut self, this: Resource<ValueStateHandle>) -> wasmtime::Result<Option<Vec<u8>>> {
        let (decl, key, txn) = keyed!(self, this, "value get");
        key.value_get(txn, &decl).map_err(trap)
    }
    fn exists(&mut self, this: Resource<ValueStateHandle>) -> wasmtime::Result<bool> {
        let (decl, key, txn) = keyed!(self, this, "value exists");
        Ok(key.value_get(txn, &decl).map_err(trap)?.is_some())
    }
    fn update(&mut self, this: Resource<ValueStateHandle>, value: Vec<u8>) -> wasmtime::Result<()> {
        let (decl, key, txn) = keyed!(self, this, "value update");
        key.value_update(txn, &decl, &value);
        Ok(())
    }
    fn clear(&mut self, this: Resource<ValueStateHandle>) -> wasmtime::Result<()> {
        let (decl, key, txn) = keyed!(self, this, "value clear");
        key.clear(txn, &decl).map_err(trap)
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
        let (decl, key, txn) = keyed!(self, this, "list get");
        key.list_get(txn, &decl).map_err(trap)
    }
    fn exists(&mut self, this: Resource<ListStateHandle>) -> wasmtime::Result<bool> {
        let (decl, key, txn) = keyed!(self, this, "list exists");
        Ok(!key.list_get(txn, &decl).map_err(trap)?.is_empty())
    }
    fn append(&mut self, this: Resource<ListStateHandle>, values: Vec<Vec<u8>>) -> wasmtime::Result<()> {
        let (decl, key, txn) = keyed!(self, this, "list append");
        key.list_append(txn, &decl, &values).map_err(trap)
    }
    fn put(&mut self, this: Resource<ListStateHandle>, values: Vec<Vec<u8>>) -> wasmtime::Result<()> {
        let (decl, key, txn) = keyed!(self, this, "list put");
        key.list_put(txn, &decl, &values);
        Ok(())
    }
    fn clear(&mut self, this: Resource<ListStateHandle>) -> wasmtime::Result<()> {
        let (decl, key, txn) = keyed!(self, this, "list clear");
        key.clear(txn, &decl).map_err(trap)
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
        let (decl, key, txn) = keyed!(self, this, "map get");
        key.map_get(txn, &decl, &user_key).map_err(trap)
    }
    fn contains(&mut self, this: Resource<MapStateHandle>, user_key: Vec<u8>) -> wasmtime::Result<bool> {
        let (decl, key, txn) = keyed!(self, this, "map contains");
        Ok(key.map_get(txn, &decl, &user_key).map_err(trap)?.is_some())
    }
    fn update(&mut self, this: Resource<MapStateHandle>, user_key: Vec<u8>, value: Vec<u8>) -> wasmtime::Result<()> {
        let (decl, key, txn) = keyed!(self, this, "map update");
        key.map_update(txn, &decl, &user_key, &value);
        Ok(())
    }
    fn remove(&mut self, this: Resource<MapStateHandle>, user_key: Vec<u8>) -> wasmtime::Result<()> {
        let (decl, key, txn) = keyed!(self, this, "map remove");
        key.map_remove(txn, &decl, &user_key);
        Ok(())
    }
    fn exists(&mut self, this: Resource<MapStateHandle>) -> wasmtime::Result<bool> {
        let (decl, key, txn) = keyed!(self, this, "map exists");
        Ok(!key.map_entries(txn, &decl).map_err(trap)?.is_empty())
    }
    fn keys(&mut self, this: Resource<MapStateHandle>) -> wasmtime::Result<Vec<Vec<u8>>> {
        let (decl, key, txn) = keyed!(self, this, "map keys");
        Ok(key.map_entries(txn, &decl).map_err(trap)?.into_iter().map(|(k, _)| k).collect())
    }
    fn values(&mut self, this: Resource<MapStateHandle>) -> wasmtime::Result<Vec<Vec<u8>>> {
        let (decl, key, txn) = keyed!(self, this, "map values");
        Ok(key.map_entries(txn, &decl).map_err(trap)?.into_iter().map(|(_, v)| v).collect())
    }
    fn iterator(&mut self, this: Resource<MapStateHandle>) -> wasmtime::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let (decl, key, txn) = keyed!(self, this, "map iterator");
        key.map_entries(txn, &decl).map_err(trap)
    }
    fn clear(&mut self, this: Resource<MapStateHandle>) -> wasmtime::Result<()> {
        let (decl, key, txn) = keyed!(self, this, "map clear");
        key.clear(txn, &decl).map_err(trap)
    }
    fn drop(&mut self, this: Resource<MapStateHandle>) -> wasmtime::Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

impl HostState {
    fn timer_scope(&mut self, what: &str) -> wasmtime::Result<(&KeyScope, &mut StateTxn)> {
        match self.scope.time_mode {
            Some(types::TimeMode::ProcessingTime | types::TimeMode::EventTime) => {}
            _ => wasmtime::bail!(
                "{what} needs time mode processing-time or event-time, but the processor declared time mode none"
            ),
        }
        match (self.scope.key.as_ref(), self.scope.txn.as_mut()) {
            (Some(key), Some(txn)) => Ok((key, txn)),
            _ => wasmtime::bail!("{what} was called outside a keyed call; timers belong to the current key"),
        }
    }
}

impl timers::Host for HostState {
    fn register_timer(&mut self, expiry_time: i64) -> wasmtime::Result<()> {
        let (key, txn) = self.timer_scope("register-timer")?;
        key.timer_register(txn, expiry_time);
        Ok(())
    }
    fn delete_timer(&mut self, expiry_time: i64) -> wasmtime::Result<()> {
        let (key, txn) = self.timer_scope("delete-timer")?;
        key.timer_delete(txn, expiry_time);
        Ok(())
    }
    fn list_timers(&mut self) -> wasmtime::Result<Vec<i64>> {
        let (key, txn) = self.timer_scope("list-timers")?;
        key.timer_list(txn).map_err(trap)
    }
}

impl logging::Host for HostState {
    fn log(&mut self, level: logging::Level, message: String) -> wasmtime::Result<()> {
        crate::log::guest(&self.module, &super::rows::key_label(&self.scope.key_values), level, &message);
        Ok(())
    }
}

impl types::Host for HostState {}
