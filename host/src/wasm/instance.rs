//! A long-lived instance of a processor module and the calls into it, each under a
//! deadline and a memory cap, with failures turned into errors that name the
//! module, the function and the key.

use std::fmt;
use std::time::Duration;

use wasmtime::{Store, Trap};

use super::bindings::Processor;
use super::host::HostState;
use super::runtime::{EPOCH_TICK, Module};
use super::sandbox::RandomScope;
use super::waits::{WaitRefused, describe as describe_wait};
use crate::contract::{ExpiredTimer, InitContext, ProcessorSpec, RowBatch, Scalar, TimerValues};
use crate::pipeline::InstanceLimits;
use crate::state::{KeyScope, StateTxn, VariableDecl};

/// What went wrong inside a guest call.
#[derive(Debug, Clone, PartialEq)]
pub enum GuestProblem {
    /// The guest trapped (a panic, an invalid operation, or a host call it misused).
    Trap {
        /// The trap or the refused host call.
        message: String,
        /// The last lines the guest printed (a Rust panic prints its message there).
        output: String,
    },
    /// The call ran past its deadline.
    Timeout(Duration),
    /// The guest slept, or waited on `wasi:io/poll`, for something that cannot happen
    /// while the batch clock stands still; the call is stopped instead of blocking.
    Waited {
        /// How long it would have waited (`None`: not on a clock deadline).
        wait: Option<Duration>,
        /// The call deadline it would have blocked past.
        call_timeout: Duration,
    },
    /// The guest tried to grow its memory past the cap.
    MemoryCap {
        /// The cap in bytes.
        cap_bytes: usize,
        /// The size it asked for.
        requested_bytes: usize,
    },
    /// The guest returned an error.
    Failed(String),
    /// An earlier failure left the instance unusable.
    Poisoned,
}

/// A failed guest call: which module, which function, which key, and what happened.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestError {
    /// The module's file name.
    pub module: String,
    /// The exported function, as named in the WIT contract.
    pub function: &'static str,
    /// The key of the call, if it was keyed.
    pub key: Option<String>,
    /// What happened.
    pub problem: GuestProblem,
}

impl fmt::Display for GuestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let module = &self.module;
        let function = self.function;
        let place = match &self.key {
            Some(key) => format!("{function} for key {key}"),
            None => function.to_string(),
        };
        match &self.problem {
            GuestProblem::Trap { message, output } if output.is_empty() => {
                write!(f, "module '{module}' trapped in {place}: {message}")
            }
            GuestProblem::Trap { message, output } => {
                write!(f, "module '{module}' trapped in {place}: {message} (guest output: {output})")
            }
            GuestProblem::Timeout(limit) => write!(
                f,
                "module '{module}' ran past its {} ms deadline in {place}; fix the endless loop, or raise operator.call-timeout-ms if the work is legitimate",
                limit.as_millis()
            ),
            GuestProblem::Waited { wait, call_timeout } => write!(
                f,
                "module '{module}' {} in {place}; time inside the sandbox stands still at the batch's processing time, so no sleep or wait can end: the call was stopped rather than left blocking past operator.call-timeout-ms ({} ms); remove the sleep or wait from the processor",
                wait.map_or_else(
                    || "waited on wasi:io/poll with nothing ready".to_string(),
                    |wait| format!("tried to sleep {}", describe_wait(wait))
                ),
                call_timeout.as_millis()
            ),
            GuestProblem::MemoryCap { cap_bytes, requested_bytes } => write!(
                f,
                "module '{module}' exceeded its memory cap of {} MiB in {place} (it asked for {} MiB); keep less in guest memory, or raise operator.memory-limit-mb",
                cap_bytes >> 20,
                requested_bytes.div_ceil(1 << 20)
            ),
            GuestProblem::Failed(message) => write!(f, "module '{module}' failed in {place}: {message}"),
            GuestProblem::Poisoned => {
                write!(f, "module '{module}' cannot run {place}: an earlier failure left its instance unusable")
            }
        }
    }
}

impl std::error::Error for GuestError {}

/// One long-lived instance of a processor module.
pub struct ProcessorInstance {
    store: Store<HostState>,
    processor: Processor,
    limits: InstanceLimits,
    poisoned: bool,
}

impl Module {
    /// Creates a new sandboxed instance with `limits`.
    pub fn instantiate(&self, limits: InstanceLimits) -> anyhow::Result<ProcessorInstance> {
        let mut store = Store::new(&self.engine, HostState::new(self.name.clone(), limits));
        store.limiter(|state| &mut state.memory);
        store.set_epoch_deadline(ticks(limits.call_timeout));
        store.epoch_deadline_trap();
        let processor = self
            .pre
            .instantiate(&mut store)
            .map_err(|error| anyhow::anyhow!("cannot instantiate module '{}': {error:#}", self.name))?;
        Ok(ProcessorInstance { store, processor, limits, poisoned: false })
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
        scope.declared = Some(
            spec.state.iter().map(|decl| (decl.name.clone(), std::sync::Arc::new(VariableDecl::from(decl)))).collect(),
        );
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
        scope.key = None;
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

    /// Makes `key` (whose values are `values`) the key that state and timers act on.
    pub fn set_key(&mut self, key: KeyScope, values: Vec<Scalar>) {
        let scope = &mut self.store.data_mut().scope;
        scope.key = Some(key);
        scope.key_values = values;
    }

    /// Calls `handle-input-rows` for the current key.
    pub fn handle_input_rows(
        &mut self,
        key: &[Scalar],
        rows: &RowBatch,
        time: TimerValues,
    ) -> Result<RowBatch, GuestError> {
        self.call("handle-input-rows", |p, s| p.eddy_processor_handler().call_handle_input_rows(s, key, rows, time))
    }

    /// Calls `handle-expired-timer` for the current key.
    pub fn handle_expired_timer(
        &mut self,
        key: &[Scalar],
        time: TimerValues,
        timer: ExpiredTimer,
    ) -> Result<RowBatch, GuestError> {
        self.call("handle-expired-timer", |p, s| {
            p.eddy_processor_handler().call_handle_expired_timer(s, key, time, timer)
        })
    }

    /// Calls `handle-initial-state` for the current key.
    pub fn handle_initial_state(
        &mut self,
        key: &[Scalar],
        rows: &RowBatch,
        time: TimerValues,
    ) -> Result<(), GuestError> {
        self.call("handle-initial-state", |p, s| {
            p.eddy_processor_handler().call_handle_initial_state(s, key, rows, time)
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
        let keyed = self.store.data().scope.key.is_some();
        let error = |this: &Self, problem| GuestError {
            module: this.store.data().module.clone(),
            function,
            key: keyed.then(|| crate::contract::rows::key_label(&this.store.data().scope.key_values)),
            problem,
        };
        if self.poisoned {
            return Err(error(self, GuestProblem::Poisoned));
        }
        self.store.set_epoch_deadline(ticks(self.limits.call_timeout));
        self.store.data().output.clear();
        self.store.data_mut().memory.refused_at = None;
        self.store.data_mut().start_call();
        match invoke(&self.processor, &mut self.store) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(message)) => Err(error(self, GuestProblem::Failed(message))),
            Err(failure) => {
                self.poisoned = true;
                let problem = self.classify(&failure);
                Err(error(self, problem))
            }
        }
    }

    fn classify(&self, failure: &wasmtime::Error) -> GuestProblem {
        let data = self.store.data();
        if failure.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
            return GuestProblem::Timeout(self.limits.call_timeout);
        }
        if let Some(refused) = failure.downcast_ref::<WaitRefused>() {
            return GuestProblem::Waited { wait: refused.wait, call_timeout: self.limits.call_timeout };
        }
        if let Some(requested_bytes) = data.memory.refused_at {
            return GuestProblem::MemoryCap { cap_bytes: data.memory.cap_bytes(), requested_bytes };
        }
        let message = match failure.downcast_ref::<Trap>() {
            Some(trap) => trap.to_string(),
            None => failure.root_cause().to_string(),
        };
        GuestProblem::Trap { message, output: data.output.last_lines(2) }
    }
}
