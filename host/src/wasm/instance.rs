//! A long-lived instance of a processor module and the calls into it, each under a
//! deadline and a memory cap, with failures turned into errors that name the
//! module, the function and the key ([`super::guest_error`]).

use std::time::Duration;

use wasmtime::Store;

use super::bindings::Processor;
use super::guest_error::{GuestError, GuestProblem, caused_by_guest, classify};
use super::host::{CallKey, CallTimer, HostState};
use super::runtime::{EPOCH_TICK, Module};
use super::sandbox::RandomScope;
use crate::contract::{DueTimer, InitContext, KeyRows, Output, ProcessorSpec, RowBatch, Scalar, TimerValues};
use crate::pipeline::InstanceLimits;
use crate::state::{StateTxn, VariableDecl};

/// One long-lived instance of a processor module.
pub struct ProcessorInstance {
    store: Store<HostState>,
    processor: Processor,
    limits: InstanceLimits,
    poisoned: bool,
}

/// The least time a module's start code gets, whatever `operator.call-timeout-ms` is:
/// a Python or JavaScript processor's interpreter sets itself up there.
pub const INSTANTIATION_BUDGET: Duration = Duration::from_secs(10);

impl Module {
    /// Creates a new sandboxed instance with `limits` (its start code may run for
    /// [`INSTANTIATION_BUDGET`] or the call timeout, whichever is longer). A failure of the guest's start
    /// code (its memory over the cap, its deadline, a trap) is a [`GuestError`] for
    /// `instantiation`.
    pub fn instantiate(&self, limits: InstanceLimits) -> anyhow::Result<ProcessorInstance> {
        let mut store = Store::new(&self.engine, HostState::new(self.name.clone(), limits));
        store.limiter(|state| &mut state.memory);
        // Start code (an interpreter setting itself up) gets its own budget.
        let start = InstanceLimits { call_timeout: limits.call_timeout.max(INSTANTIATION_BUDGET), ..limits };
        store.set_epoch_deadline(ticks(start.call_timeout));
        store.epoch_deadline_trap();
        match self.pre.instantiate(&mut store) {
            Ok(processor) => Ok(ProcessorInstance { store, processor, limits, poisoned: false }),
            Err(failure) if caused_by_guest(store.data(), &failure) => Err(GuestError {
                module: self.name.clone(),
                function: "instantiation",
                key: None,
                problem: classify(store.data(), &failure, start),
            }
            .into()),
            Err(failure) => Err(anyhow::anyhow!("cannot instantiate module '{}': {failure:#}", self.name)),
        }
    }
}

fn ticks(timeout: Duration) -> u64 {
    (timeout.as_micros() / EPOCH_TICK.as_micros()).max(1) as u64 + 1
}

impl ProcessorInstance {
    /// Calls `init`; on success the declared variables become available to later calls.
    pub fn init(&mut self, context: &InitContext) -> Result<ProcessorSpec, GuestError> {
        let spec = self.call("init", |p, s| p.eddy_processor_handler().call_init(s, context))?;
        let scope = &mut self.store.data_mut().scope;
        scope.variables = spec.state.iter().map(|decl| std::sync::Arc::new(VariableDecl::from(decl))).collect();
        scope.declared = Some(scope.variables.iter().map(|decl| (decl.name.clone(), decl.clone())).collect());
        scope.time_mode = Some(spec.time_mode);
        Ok(spec)
    }

    /// Starts a batch: its state transaction, processing time and random stream.
    pub fn start_batch(&mut self, txn: StateTxn, processing_time: i64, random: RandomScope<'_>) {
        let data = self.store.data_mut();
        data.clock.start_batch(processing_time, random);
        data.scope.start_batch(txn);
    }

    /// Ends the batch and hands its state transaction back.
    pub fn finish_batch(&mut self) -> Option<StateTxn> {
        let scope = &mut self.store.data_mut().scope;
        scope.set_call(Vec::new(), Vec::new());
        scope.txn.take()
    }

    /// Timers the guest registered since the last call (then counted from 0 again).
    pub fn take_timers_registered(&mut self) -> u64 {
        std::mem::take(&mut self.store.data_mut().scope.timers_registered)
    }

    /// The largest linear memory the guest has had, in bytes.
    pub fn memory_peak_bytes(&self) -> u64 {
        self.store.data().memory.peak_bytes as u64
    }

    /// The batch's state transaction.
    pub fn txn_mut(&mut self) -> Option<&mut StateTxn> {
        self.store.data_mut().scope.txn.as_mut()
    }

    /// The keys of the last call (what its output and errors are about).
    pub fn call_keys(&self) -> &[CallKey] {
        &self.store.data().scope.keys
    }

    /// Calls `handle-input-rows` over `keys`, the i-th with the values and row count
    /// of `wire[i]` (its rows the next ones of `rows`).
    pub fn handle_input_rows(
        &mut self,
        keys: Vec<CallKey>,
        wire: Vec<KeyRows>,
        rows: &RowBatch,
        time: TimerValues,
    ) -> Result<Output, GuestError> {
        self.store.data_mut().scope.set_call(keys, Vec::new());
        self.call("handle-input-rows", |p, s| p.eddy_processor_handler().call_handle_input_rows(s, &wire, rows, time))
    }

    /// Calls `handle-expired-timers` over `timers` (of `keys`, whose values are
    /// `wire_keys`); returns the output and the timers, each marked with whether the
    /// processor took it and whether it fired.
    pub fn handle_expired_timers(
        &mut self,
        keys: Vec<CallKey>,
        wire_keys: Vec<Vec<Scalar>>,
        timers: Vec<CallTimer>,
        time: TimerValues,
    ) -> Result<(Output, Vec<CallTimer>), GuestError> {
        let wire_timers: Vec<DueTimer> = timers
            .iter()
            .map(|timer| DueTimer { key_index: timer.key_index as u32, expiry_time: timer.expiry })
            .collect();
        self.store.data_mut().scope.set_call(keys, timers);
        let output = self.call("handle-expired-timers", |p, s| {
            p.eddy_processor_handler().call_handle_expired_timers(s, &wire_keys, &wire_timers, time)
        })?;
        Ok((output, std::mem::take(&mut self.store.data_mut().scope.timers)))
    }

    /// Calls `handle-initial-state` for `key`, whose values are `values`.
    pub fn handle_initial_state(
        &mut self,
        key: CallKey,
        values: Vec<Scalar>,
        rows: &RowBatch,
        time: TimerValues,
    ) -> Result<(), GuestError> {
        let scope = &mut self.store.data_mut().scope;
        scope.set_call(vec![key], Vec::new());
        scope.current = Some(0);
        self.call("handle-initial-state", |p, s| {
            p.eddy_processor_handler().call_handle_initial_state(s, &values, rows, time)
        })
    }

    /// Calls `close`.
    pub fn close(&mut self) -> Result<(), GuestError> {
        self.call("close", |p, s| p.eddy_processor_handler().call_close(s).map(Ok))
    }

    fn call<T>(
        &mut self,
        function: &'static str,
        invoke: impl FnOnce(&Processor, &mut Store<HostState>) -> wasmtime::Result<Result<T, String>>,
    ) -> Result<T, GuestError> {
        let error = |this: &Self, problem| GuestError {
            module: this.store.data().module.clone(),
            function,
            key: this.store.data().scope.key().map(CallKey::label),
            problem,
        };
        if self.poisoned {
            return Err(error(self, GuestProblem::Poisoned));
        }
        self.store.set_epoch_deadline(ticks(self.limits.call_timeout));
        self.store.data().output.clear();
        self.store.data_mut().memory.refused_at = None;
        self.store.data_mut().start_call();
        // Random numbers come from the current key's group (none is, until one is selected).
        let key_group = self.store.data().scope.key().map(|key| key.scope.key_group());
        self.store.data().clock.select_key_group(key_group);
        match invoke(&self.processor, &mut self.store) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(message)) => Err(error(self, GuestProblem::Failed(message))),
            Err(failure) => {
                self.poisoned = true;
                if let Some(backtrace) = failure.downcast_ref::<wasmtime::WasmBacktrace>() {
                    let module = &self.store.data().module;
                    crate::log::debug(&format!("module '{module}' failed in {function}; {backtrace}"));
                }
                Err(error(self, classify(self.store.data(), &failure, self.limits)))
            }
        }
    }
}
