//! `eddy:processor/scope`: which key of a multi-key call is current. Selecting a key
//! (or taking a timer, which selects its key) starts that key's share of the call:
//! its log bytes count from 0, errors name it and random numbers come from its key
//! group's stream.

use super::HostState;
use crate::wasm::bindings::eddy::processor::scope;

impl HostState {
    /// Makes key `index` of the call current.
    fn select(&mut self, index: usize, what: &str) -> wasmtime::Result<()> {
        if index >= self.scope.keys.len() {
            wasmtime::bail!(
                "{what} named key {index} of a call over {} keys; the processor's SDK selects each key of the call in turn",
                self.scope.keys.len()
            );
        }
        self.scope.current = Some(index);
        self.clock.select_key_group(Some(self.scope.keys[index].scope.key_group()));
        self.start_call();
        Ok(())
    }
}

impl scope::Host for HostState {
    fn select_key(&mut self, index: u32) -> wasmtime::Result<()> {
        if !self.scope.timers.is_empty() {
            wasmtime::bail!("select-key was called in handle-expired-timers; take each timer with take-timer instead");
        }
        self.select(index as usize, "select-key")
    }

    fn take_timer(&mut self, index: u32) -> wasmtime::Result<bool> {
        let Some(&timer) = self.scope.timers.get(index as usize) else {
            wasmtime::bail!(
                "take-timer named timer {index} of a call over {} timers; take-timer is only for the timers of the current handle-expired-timers call",
                self.scope.timers.len()
            );
        };
        if timer.taken {
            wasmtime::bail!("take-timer took timer {index} of the call twice; each due timer is handled once");
        }
        self.select(timer.key_index, "take-timer")?;
        let (key, txn, _) = self.timer_scope("take-timer")?;
        // An earlier handler of this call may have deleted it (a due timer exists
        // otherwise: the index it was found in and the timers are written together).
        let fires = key.timer_fire(txn, timer.expiry).map_err(super::trap)?;
        let taken = &mut self.scope.timers[index as usize];
        taken.taken = true;
        taken.fired = fires;
        Ok(fires)
    }
}
