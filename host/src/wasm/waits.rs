//! Waiting inside the sandbox: `wasi:clocks/monotonic-clock`'s `subscribe-duration`
//! and `subscribe-instant`, and `wasi:io/poll`, answered against the batch clock
//! without ever blocking the thread.
//!
//! wasmtime-wasi answers them with timers on the real clock and blocks the thread
//! until they fire, and the epoch deadline only interrupts running WebAssembly: a
//! guest's ten-minute `sleep` would hold its shard for ten minutes (an overflowing
//! duration, forever). Here a subscription is a deadline on the batch clock, ready once
//! the batch's processing time has reached it. That time stands still while a batch
//! runs, so a wait for a later deadline could never end: a `poll` or `block` that finds
//! nothing ready fails the call at once ([`WaitRefused`]). Other pollables (the
//! captured stdout, the closed stdin) are asked once whether they are ready, never
//! awaited. These replace wasmtime-wasi's functions of the same names in the linker.

use std::fmt;
use std::time::Duration;

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::HostMonotonicClock;
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::bindings::io::poll as async_poll;
use wasmtime_wasi::p2::bindings::sync::io::poll;
use wasmtime_wasi::p2::{DynPollable, Pollable, subscribe};
use wasmtime_wasi::runtime::{poll_noop, with_ambient_tokio_runtime};

use super::host::HostState;
use super::sandbox::BatchClock;

/// A guest asked to wait for something that cannot happen during its call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitRefused {
    /// How long the wait would have lasted on the batch clock (`None` when nothing it
    /// waited on was a clock deadline).
    pub wait: Option<Duration>,
}

impl fmt::Display for WaitRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.wait {
            Some(wait) => write!(f, "the guest tried to sleep {}", describe(wait)),
            None => write!(f, "the guest waited on wasi:io/poll with nothing ready"),
        }
    }
}

impl std::error::Error for WaitRefused {}

/// A wait's length the way the error messages give it: seconds, to the millisecond.
pub fn describe(wait: Duration) -> String {
    match wait.subsec_millis() {
        0 => format!("{} s", wait.as_secs()),
        millis => format!("{}.{millis:03} s", wait.as_secs()),
    }
}

/// Links the batch-clock versions of `wasi:clocks/monotonic-clock` and `wasi:io/poll`
/// over wasmtime-wasi's (which must be linked already).
pub(super) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    monotonic_clock::add_to_linker::<HostState, BatchTime>(linker, view)?;
    poll::add_to_linker::<HostState, BatchTime>(linker, view)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// What the replacements see of a store: the batch clock and the resource table.
pub(super) struct BatchTimeView<'a> {
    clock: &'a BatchClock,
    table: &'a mut ResourceTable,
}

struct BatchTime;

impl HasData for BatchTime {
    type Data<'a> = BatchTimeView<'a>;
}

fn view(state: &mut HostState) -> BatchTimeView<'_> {
    BatchTimeView { clock: &state.clock, table: &mut state.table }
}

impl BatchTimeView<'_> {
    fn subscribe_at(&mut self, at_ns: u64) -> wasmtime::Result<Resource<DynPollable>> {
        let deadline = self.table.push(BatchDeadline { clock: self.clock.clone(), at_ns })?;
        subscribe(self.table, deadline)
    }

    /// The error for a wait that found nothing ready.
    fn refused(&self) -> wasmtime::Error {
        wasmtime::Error::new(WaitRefused { wait: self.clock.take_shortest_wait() })
    }
}

impl monotonic_clock::Host for BatchTimeView<'_> {
    fn now(&mut self) -> wasmtime::Result<u64> {
        Ok(HostMonotonicClock::now(self.clock))
    }

    fn resolution(&mut self) -> wasmtime::Result<u64> {
        Ok(HostMonotonicClock::resolution(self.clock))
    }

    fn subscribe_instant(&mut self, when: u64) -> wasmtime::Result<Resource<DynPollable>> {
        self.subscribe_at(when)
    }

    fn subscribe_duration(&mut self, duration: u64) -> wasmtime::Result<Resource<DynPollable>> {
        let now = HostMonotonicClock::now(self.clock);
        self.subscribe_at(now.saturating_add(duration))
    }
}

impl poll::Host for BatchTimeView<'_> {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        self.clock.take_shortest_wait();
        let ready = without_waiting(async_poll::Host::poll(&mut *self.table, pollables));
        ready.unwrap_or_else(|| Err(self.refused()))
    }
}

impl poll::HostPollable for BatchTimeView<'_> {
    fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        without_waiting(async_poll::HostPollable::ready(&mut *self.table, pollable)).unwrap_or(Ok(false))
    }

    fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        self.clock.take_shortest_wait();
        let ready = without_waiting(async_poll::HostPollable::block(&mut *self.table, pollable));
        ready.unwrap_or_else(|| Err(self.refused()))
    }

    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        async_poll::HostPollable::drop(&mut *self.table, pollable)
    }
}

/// Polls `future` once (inside wasmtime-wasi's tokio context, for pollables that
/// need one): its output if it is ready, `None` if it would wait.
fn without_waiting<F: Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    with_ambient_tokio_runtime(|| poll_noop(future.as_mut()))
}

/// A `subscribe-duration`/`subscribe-instant` pollable: ready once the batch clock's
/// monotonic time reaches `at_ns`.
struct BatchDeadline {
    clock: BatchClock,
    at_ns: u64,
}

#[async_trait::async_trait]
impl Pollable for BatchDeadline {
    async fn ready(&mut self) {
        let now = HostMonotonicClock::now(&self.clock);
        if now < self.at_ns {
            self.clock.note_wait(Duration::from_nanos(self.at_ns - now));
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::describe;
    use std::time::Duration;

    #[test]
    fn waits_are_given_in_seconds() {
        assert_eq!(describe(Duration::from_secs(600)), "600 s");
        assert_eq!(describe(Duration::from_millis(1500)), "1.500 s");
        assert_eq!(describe(Duration::from_nanos(u64::MAX)), "18446744073.709 s");
    }
}
