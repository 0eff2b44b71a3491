//! The host side of the contract's imports, one file per WIT interface, all scoped
//! to the key of the current call:
//!
//! | WIT interface (`wit/processor.wit`) | file |
//! |---|---|
//! | `eddy:processor/scope` (which key of a call is current) | [`scope`] |
//! | `eddy:processor/state` (value-, list-, map-state) | [`state`] |
//! | `eddy:processor/state` (`read`, `apply-changes`) | [`changes`] |
//! | `eddy:processor/timers` | [`timers`] |
//! | `eddy:processor/logging` | [`logging`] |
//! | `eddy:processor/types` | no functions: [`crate::contract`] |
//!
//! This file holds the store data they share ([`HostState`]), the handles, and what
//! the processor has used of its host-side limits ([`Usage`]): a host call that
//! passes one of them traps, so the batch fails naming the module, the handler and
//! the key.

mod changes;
mod logging;
mod scope;
mod state;
mod timers;

use std::collections::HashMap;
use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::contract::{Scalar, TimeMode};
use crate::pipeline::{InstanceLimits, Limit, show_bytes};
use crate::state::{KeyScope, StateKind, StateTxn, VariableDecl};
use crate::wasm::sandbox::{BatchClock, GuestOutput, MemoryCap};

/// An open `value-state` handle.
pub struct ValueStateHandle(pub(super) Arc<VariableDecl>);
/// An open `list-state` handle.
pub struct ListStateHandle(pub(super) Arc<VariableDecl>);
/// An open `map-state` handle.
pub struct MapStateHandle(pub(super) Arc<VariableDecl>);

/// One key of a handler call: where its state and timers are.
pub struct CallKey {
    /// Where the key's state and timers are.
    pub scope: KeyScope,
}

impl CallKey {
    /// The key's values, decoded from its state key (for logs and errors only: the
    /// call hands the processor the values it decoded once).
    pub fn values(&self) -> Vec<Scalar> {
        crate::state::key::decode(self.scope.key()).unwrap_or_default()
    }

    /// The key as logs and errors show it, e.g. `["user-1"]`.
    pub fn label(&self) -> String {
        crate::contract::rows::key_label(&self.values())
    }
}

/// A due timer of a `handle-expired-timers` call.
#[derive(Clone, Copy, Debug)]
pub struct CallTimer {
    /// Its key: an index into the call's keys.
    pub key_index: usize,
    /// Its expiry time.
    pub expiry: i64,
    /// Whether the processor took it (`take-timer` answered true: it fired).
    pub fired: bool,
    /// Whether the processor asked for it (`take-timer` was called).
    pub taken: bool,
}

/// What the current call may touch: the declared variables, the batch's state
/// transaction, the call's keys and timers, and which key is current.
#[derive(Default)]
pub struct CallScope {
    /// The variables declared by `init` (None until `init` returned).
    pub declared: Option<HashMap<String, Arc<VariableDecl>>>,
    /// The same variables in the order of the spec (what `read` and `apply-changes`
    /// number them by).
    pub variables: Vec<Arc<VariableDecl>>,
    /// The declared time mode.
    pub time_mode: Option<TimeMode>,
    /// The batch's state changes (None outside a batch).
    pub txn: Option<StateTxn>,
    /// The keys of the current call (empty outside a keyed call).
    pub keys: Vec<CallKey>,
    /// The due timers of the current `handle-expired-timers` call.
    pub timers: Vec<CallTimer>,
    /// Which of `keys` state and timers act on (None until the processor selects one).
    pub current: Option<usize>,
    /// Timers registered in the current batch.
    pub timers_registered: u64,
    /// What the processor has used of its limits in this batch and call.
    pub usage: Usage,
}

impl CallScope {
    /// Starts a batch with its state transaction: no key yet, nothing used.
    pub fn start_batch(&mut self, txn: StateTxn) {
        self.txn = Some(txn);
        self.set_call(Vec::new(), Vec::new());
        self.usage = Usage::default();
    }

    /// Starts a call over `keys` (and, for `handle-expired-timers`, `timers`); no key
    /// is current until the processor selects one.
    pub fn set_call(&mut self, keys: Vec<CallKey>, timers: Vec<CallTimer>) {
        self.keys = keys;
        self.timers = timers;
        self.current = None;
    }

    /// The current key, if the processor selected one.
    pub fn key(&self) -> Option<&CallKey> {
        self.current.and_then(|index| self.keys.get(index))
    }

    /// The current key as logs show it (`[]` when none is current).
    pub fn key_label(&self) -> String {
        self.key().map_or_else(|| "[]".into(), CallKey::label)
    }

    /// The current key's scope, the batch's transaction and the usage, borrowed
    /// together.
    pub fn key_and_txn(&mut self) -> (Option<&KeyScope>, Option<&mut StateTxn>, &mut Usage) {
        let key = self.current.and_then(|index| self.keys.get(index)).map(|key| &key.scope);
        (key, self.txn.as_mut(), &mut self.usage)
    }
}

/// What the processor has added to the host's memory: in the current batch (state
/// changes, timer changes) and in the current call (log bytes). Only what its own
/// host calls add counts; what the host does itself (deleting a timer as it fires,
/// evicting expired entries) does not.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// Bytes the processor's state writes added to the batch's transaction.
    state_bytes: i64,
    /// Timer changes (registrations, deletions) the processor added.
    timers: i64,
    /// Bytes of log messages in the current call.
    log_bytes: u64,
}

impl Usage {
    /// Counts `before → after` bytes of buffered state changes; fails past the limit.
    fn charge_state(&mut self, limits: &InstanceLimits, before: u64, after: u64) -> anyhow::Result<()> {
        self.state_bytes += after as i64 - before as i64;
        let limit = Limit::StateBytesPerBatch;
        if self.state_bytes > limit.of(limits) as i64 {
            anyhow::bail!(limit.exceeded(
                limits,
                format!(
                    "the state changes the processor buffered in this batch reached {}",
                    show_bytes(self.state_bytes as u64)
                )
            ));
        }
        Ok(())
    }

    /// Counts `before → after` buffered timer changes; fails past the limit.
    fn charge_timers(&mut self, limits: &InstanceLimits, before: u64, after: u64) -> anyhow::Result<()> {
        self.timers += after as i64 - before as i64;
        let limit = Limit::TimersPerBatch;
        if self.timers > limit.of(limits) as i64 {
            anyhow::bail!(
                limit.exceeded(
                    limits,
                    format!("the processor registered or deleted {} timers in this batch", self.timers)
                )
            );
        }
        Ok(())
    }

    /// Counts a logged message of `bytes`; fails past the limit.
    fn charge_log(&mut self, limits: &InstanceLimits, bytes: usize) -> anyhow::Result<()> {
        self.log_bytes += bytes as u64;
        let limit = Limit::LogBytesPerCall;
        if self.log_bytes > limit.of(limits) {
            anyhow::bail!(
                limit.exceeded(limits, format!("the processor logged {} in this call", show_bytes(self.log_bytes)))
            );
        }
        Ok(())
    }
}

/// Fails when one state value (a value, a whole list, a map entry) of `bytes` is over
/// the limit.
fn check_value(limits: &InstanceLimits, decl: &VariableDecl, what: &str, bytes: usize) -> anyhow::Result<()> {
    let limit = Limit::StateValueBytes;
    if bytes as u64 > limit.of(limits) {
        anyhow::bail!(limit.exceeded(
            limits,
            format!("{what} of state variable '{}' would hold {}", decl.name, show_bytes(bytes as u64))
        ));
    }
    Ok(())
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
    /// What the processor may use.
    pub limits: InstanceLimits,
    /// What the current call may touch.
    pub scope: CallScope,
    /// The last message the guest logged at error level in the current call: why it
    /// aborted, if it then does (a Rust processor's panic; see the WIT `logging`).
    pub logged_error: Option<String>,
}

impl HostState {
    /// A fresh sandboxed state for one instance of `module`, held to `limits`.
    pub fn new(module: String, limits: InstanceLimits) -> Self {
        let clock = BatchClock::default();
        let output = GuestOutput::default();
        Self {
            wasi: crate::wasm::sandbox::sandboxed_wasi(&clock, &output),
            table: ResourceTable::new(),
            memory: MemoryCap::new(limits.memory_cap_bytes),
            output,
            clock,
            module,
            limits,
            scope: CallScope::default(),
            logged_error: None,
        }
    }

    /// Starts a call, or a key within one: nothing logged in it yet.
    pub fn start_call(&mut self) {
        self.scope.usage.log_bytes = 0;
        self.logged_error = None;
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
