//! The host side of the contract's imports, one file per WIT interface, all scoped
//! to the key of the current call:
//!
//! | WIT interface (`wit/processor.wit`) | file |
//! |---|---|
//! | `eddy:processor/state` (value-, list-, map-state) | [`state`] |
//! | `eddy:processor/timers` | [`timers`] |
//! | `eddy:processor/logging` | [`logging`] |
//! | `eddy:processor/types` | no functions: [`crate::contract`] |
//!
//! This file holds the store data they share ([`HostState`]) and the handles.

mod logging;
mod state;
mod timers;

use std::collections::HashMap;
use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::contract::TimeMode;
use crate::state::{KeyScope, StateKind, StateTxn, VariableDecl};
use crate::wasm::sandbox::{BatchClock, GuestOutput, MemoryCap};

/// An open `value-state` handle.
pub struct ValueStateHandle(pub(super) Arc<VariableDecl>);
/// An open `list-state` handle.
pub struct ListStateHandle(pub(super) Arc<VariableDecl>);
/// An open `map-state` handle.
pub struct MapStateHandle(pub(super) Arc<VariableDecl>);

/// What the current call may touch: the declared variables, the batch's state
/// transaction and the current key.
#[derive(Default)]
pub struct CallScope {
    /// The variables declared by `init` (None until `init` returned).
    pub declared: Option<HashMap<String, Arc<VariableDecl>>>,
    /// The declared time mode.
    pub time_mode: Option<TimeMode>,
    /// The batch's state changes (None outside a batch).
    pub txn: Option<StateTxn>,
    /// The key of the current call (None outside a keyed call).
    pub key: Option<KeyScope>,
    /// The key's values, for logs and errors.
    pub key_values: Vec<crate::contract::Scalar>,
    /// Timers registered in the current batch.
    pub timers_registered: u64,
}

/// Everything a guest's store holds.
pub struct HostState {
    wasi: WasiCtx,
    pub(super) table: ResourceTable,
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
            wasi: crate::wasm::sandbox::sandboxed_wasi(&clock, &output),
            table: ResourceTable::new(),
            memory: MemoryCap::new(memory_cap_bytes),
            output,
            clock,
            module,
            scope: CallScope::default(),
        }
    }

    pub(super) fn open(&mut self, name: &str, kind: StateKind) -> wasmtime::Result<Arc<VariableDecl>> {
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

impl crate::contract::eddy::processor::types::Host for HostState {}

/// A host-side failure as the trap it becomes in the guest.
fn trap(error: anyhow::Error) -> wasmtime::Error {
    wasmtime::Error::from_anyhow(error)
}
