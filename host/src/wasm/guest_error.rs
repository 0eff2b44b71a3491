//! What went wrong in a guest, said so that the user can act on it: a failed call (or
//! instantiation) becomes a [`GuestError`] naming the module, the function, the key,
//! what happened and — for a limit — the spec key to raise.

use std::fmt;
use std::time::Duration;

use wasmtime::{Trap, WasmBacktrace};

use super::host::HostState;
use super::waits::{WaitRefused, describe as describe_wait};
use crate::pipeline::InstanceLimits;

/// What went wrong inside a guest call.
#[derive(Debug, Clone, PartialEq)]
pub enum GuestProblem {
    /// The guest trapped (a panic, an invalid operation, or a host call it misused).
    Trap {
        /// The trap or the refused host call.
        message: String,
        /// What the guest wrote to stdout and stderr during the call (a Rust panic, a
        /// Python or JavaScript exception prints its message there): the whole text,
        /// or its last 4 KiB after a `…`.
        output: String,
    },
    /// The guest aborted (`unreachable`) after logging why at error level: a Rust
    /// processor's panic, whose SDK logs its message and location before the abort.
    Aborted {
        /// What it logged: e.g. `the processor panicked at src/lib.rs:9:5: boom`.
        reason: String,
        /// What it wrote to stdout and stderr during the call, as for a trap.
        output: String,
    },
    /// The guest's stack overflowed: deep or endless recursion.
    StackOverflow {
        /// The function (or cycle of functions) recursing, innermost first, when the
        /// backtrace shows one.
        recursing: Option<String>,
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
    /// The exported function, as named in the WIT contract, or `instantiation`.
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
                write!(f, "module '{module}' trapped in {place}: {message}\nguest output:\n{}", indent(output))
            }
            GuestProblem::Aborted { reason, output } if output.is_empty() => {
                write!(f, "module '{module}' failed in {place}: {reason}")
            }
            GuestProblem::Aborted { reason, output } => {
                write!(f, "module '{module}' failed in {place}: {reason}\nguest output:\n{}", indent(output))
            }
            GuestProblem::StackOverflow { recursing } => write!(
                f,
                "module '{module}' overflowed its stack in {place}{}: deep or endless recursion; bound it, or make it iterative",
                recursing.as_ref().map_or_else(String::new, |cycle| format!(" (recursing in {cycle})"))
            ),
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

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("  {line}")).collect::<Vec<_>>().join("\n")
}

/// What the wasmtime error `failure` of a call (or of instantiation) into a store
/// holding `data` means.
pub(super) fn classify(data: &HostState, failure: &wasmtime::Error, limits: InstanceLimits) -> GuestProblem {
    let trap = failure.downcast_ref::<Trap>();
    if trap == Some(&Trap::Interrupt) {
        return GuestProblem::Timeout(limits.call_timeout);
    }
    if let Some(refused) = failure.downcast_ref::<WaitRefused>() {
        return GuestProblem::Waited { wait: refused.wait, call_timeout: limits.call_timeout };
    }
    if let Some(requested_bytes) = data.memory.refused_at {
        return GuestProblem::MemoryCap { cap_bytes: data.memory.cap_bytes(), requested_bytes };
    }
    let recursing = failure.downcast_ref::<WasmBacktrace>().and_then(|backtrace| recursion(backtrace.frames()));
    match trap {
        Some(Trap::StackOverflow) => GuestProblem::StackOverflow { recursing },
        // A guest's own stack lives in its linear memory (a Rust guest's below its
        // data): overflowing it reads or writes out of bounds. A backtrace that is one
        // recursion all through tells that apart from a stray pointer.
        Some(Trap::MemoryOutOfBounds) if recursing.is_some() => GuestProblem::StackOverflow { recursing },
        // An abort right after an error logged: the guest said why (a Rust panic).
        Some(Trap::UnreachableCodeReached) if data.logged_error.is_some() => {
            GuestProblem::Aborted { reason: data.logged_error.clone().unwrap_or_default(), output: data.output.text() }
        }
        Some(trap) => GuestProblem::Trap { message: trap.to_string(), output: data.output.text() },
        None => GuestProblem::Trap { message: failure.root_cause().to_string(), output: data.output.text() },
    }
}

/// Whether an instantiation failed because of the guest (a trap in its start code,
/// its memory over the cap, its deadline) rather than the host (e.g. the instance
/// pool exhausted), whose own message is then the best there is.
pub(super) fn caused_by_guest(data: &HostState, failure: &wasmtime::Error) -> bool {
    failure.downcast_ref::<Trap>().is_some() || data.memory.refused_at.is_some()
}

/// The function, or short cycle of functions, that every captured frame (wasmtime
/// keeps the innermost 20) repeats: "f" or "f → g". `None` for a short backtrace or
/// one that is not a single recursion.
fn recursion(frames: &[wasmtime::FrameInfo]) -> Option<String> {
    const FEWEST_FRAMES: usize = 16;
    const LONGEST_CYCLE: usize = 4;
    if frames.len() < FEWEST_FRAMES {
        return None;
    }
    let names: Vec<String> = frames.iter().map(frame_name).collect();
    let cycle = (1..=LONGEST_CYCLE).find(|&length| names.iter().zip(&names[length..]).all(|(a, b)| a == b))?;
    Some(names[..cycle].join(" → "))
}

/// A frame's function name, a Rust symbol demangled without its hash.
fn frame_name(frame: &wasmtime::FrameInfo) -> String {
    match frame.func_name() {
        Some(name) => format!("{:#}", rustc_demangle::demangle(name)),
        None => format!("function #{}", frame.func_index()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_hit_while_instantiating_names_the_spec_key_to_raise() {
        // No guest built here runs code at instantiation (a Rust guest's constructors
        // run in its first call); the trap wasmtime raises there is this one.
        let data = HostState::new(
            "starts-slowly.wasm".into(),
            InstanceLimits { memory_cap_bytes: 1 << 20, ..InstanceLimits::default() },
        );
        let failure = wasmtime::Error::from(Trap::Interrupt);
        assert!(caused_by_guest(&data, &failure));
        let limits = InstanceLimits { call_timeout: Duration::from_millis(250), ..InstanceLimits::default() };
        let problem = classify(&data, &failure, limits);
        let error = GuestError { module: "starts-slowly.wasm".into(), function: "instantiation", key: None, problem };
        assert_eq!(
            error.to_string(),
            "module 'starts-slowly.wasm' ran past its 250 ms deadline in instantiation; fix the endless loop, or raise \
             operator.call-timeout-ms if the work is legitimate"
        );
        // The host's own limits are not the guest's doing.
        let pool_full = wasmtime::Error::msg("maximum concurrent component instance limit of 256 reached");
        assert!(!caused_by_guest(&data, &pool_full));
    }
}
