//! `eddy:processor/timers`: the current key's timers, in the declared time mode's domain.
//! Registrations and deletions are held to `operator.max-timers-per-batch`.

use super::{HostState, Usage, trap};
use crate::contract::TimeMode;
use crate::state::{KeyScope, StateTxn};
use crate::wasm::bindings::eddy::processor::timers;

impl HostState {
    /// The current key, the batch's transaction and the usage, when timers may be used.
    pub(super) fn timer_scope(&mut self, what: &str) -> wasmtime::Result<(&KeyScope, &mut StateTxn, &mut Usage)> {
        match self.scope.time_mode {
            Some(TimeMode::ProcessingTime | TimeMode::EventTime) => {}
            _ => wasmtime::bail!(
                "{what} needs time mode processing-time or event-time, but the processor declared time mode none"
            ),
        }
        match self.scope.key_and_txn() {
            (Some(key), Some(txn), usage) => Ok((key, txn, usage)),
            _ => wasmtime::bail!("{what} was called outside a keyed call; timers belong to the current key"),
        }
    }
}

/// Registering and deleting, shared by the timer functions and `apply-changes`.
impl HostState {
    pub(super) fn timer_register(&mut self, expiry_time: i64) -> wasmtime::Result<()> {
        let limits = self.limits;
        let (key, txn, usage) = self.timer_scope("register-timer")?;
        let before = txn.changes(key.timer_family());
        key.timer_register(txn, expiry_time);
        let after = txn.changes(key.timer_family());
        usage.charge_timers(&limits, before, after).map_err(trap)?;
        self.scope.timers_registered += 1;
        Ok(())
    }

    pub(super) fn timer_delete(&mut self, expiry_time: i64) -> wasmtime::Result<()> {
        let limits = self.limits;
        let (key, txn, usage) = self.timer_scope("delete-timer")?;
        let before = txn.changes(key.timer_family());
        key.timer_delete(txn, expiry_time);
        let after = txn.changes(key.timer_family());
        usage.charge_timers(&limits, before, after).map_err(trap)
    }
}

impl timers::Host for HostState {
    fn register_timer(&mut self, expiry_time: i64) -> wasmtime::Result<()> {
        self.timer_register(expiry_time)
    }
    fn delete_timer(&mut self, expiry_time: i64) -> wasmtime::Result<()> {
        self.timer_delete(expiry_time)
    }
    fn list_timers(&mut self) -> wasmtime::Result<Vec<i64>> {
        let (key, txn, _) = self.timer_scope("list-timers")?;
        key.timer_list(txn).map_err(trap)
    }
}
