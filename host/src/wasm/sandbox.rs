//! The deterministic sandbox a guest runs in: WASI clocks that answer the batch's
//! processing time, randomness seeded from the batch id, captured stdout/stderr,
//! and a memory cap.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::ResourceLimiter;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder};

/// The batch's clock and seed, shared between the host and the guest's WASI context.
#[derive(Clone, Default)]
pub struct BatchClock {
    inner: Arc<Mutex<ClockState>>,
}

#[derive(Default)]
struct ClockState {
    /// Processing time of the current batch, microseconds since the epoch.
    now_us: i64,
    /// SplitMix64 state, reseeded from the batch id at each batch.
    rng: u64,
    /// The shortest wait a clock deadline found ahead of it since it was last taken.
    shortest_wait: Option<Duration>,
}

impl BatchClock {
    /// Sets the time and the random seed for the next batch.
    pub fn start_batch(&self, now_us: i64, batch_id: u64) {
        let mut state = self.inner.lock().unwrap_or_else(|poison| poison.into_inner());
        state.now_us = now_us;
        state.rng = batch_id ^ 0x6a09_e667_f3bc_c909;
    }

    /// Notes that a clock deadline is `wait` ahead of the batch clock.
    pub(super) fn note_wait(&self, wait: Duration) {
        let mut state = self.inner.lock().unwrap_or_else(|poison| poison.into_inner());
        state.shortest_wait = Some(state.shortest_wait.map_or(wait, |shortest| shortest.min(wait)));
    }

    /// The shortest wait noted since the last call, forgotten.
    pub(super) fn take_shortest_wait(&self) -> Option<Duration> {
        self.inner.lock().unwrap_or_else(|poison| poison.into_inner()).shortest_wait.take()
    }

    fn now_us(&self) -> i64 {
        self.inner.lock().unwrap_or_else(|poison| poison.into_inner()).now_us
    }

    fn next_u64(&self) -> u64 {
        let mut state = self.inner.lock().unwrap_or_else(|poison| poison.into_inner());
        state.rng = state.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl HostWallClock for BatchClock {
    fn resolution(&self) -> Duration {
        Duration::from_micros(1)
    }
    fn now(&self) -> Duration {
        Duration::from_micros(self.now_us().max(0) as u64)
    }
}

impl HostMonotonicClock for BatchClock {
    fn resolution(&self) -> u64 {
        1_000
    }
    fn now(&self) -> u64 {
        (self.now_us().max(0) as u64).saturating_mul(1_000)
    }
}

impl rand_core::TryRng for BatchClock {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.next_u64() as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(self.next_u64())
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        for chunk in dst.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        Ok(())
    }
}

/// The last bytes a guest wrote to stdout/stderr, kept to explain a trap.
#[derive(Clone, Default)]
pub struct GuestOutput {
    tail: Arc<Mutex<VecDeque<u8>>>,
}

const OUTPUT_TAIL_BYTES: usize = 4096;

impl GuestOutput {
    /// The captured text's last non-empty lines, joined by " | ".
    pub fn last_lines(&self, count: usize) -> String {
        let tail = self.tail.lock().unwrap_or_else(|poison| poison.into_inner());
        let bytes: Vec<u8> = tail.iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
        lines[lines.len().saturating_sub(count)..].join(" | ")
    }

    /// Forgets what was captured (at the start of each call).
    pub fn clear(&self) {
        self.tail.lock().unwrap_or_else(|poison| poison.into_inner()).clear();
    }

    fn push(&self, bytes: &[u8]) {
        let mut tail = self.tail.lock().unwrap_or_else(|poison| poison.into_inner());
        tail.extend(bytes);
        let excess = tail.len().saturating_sub(OUTPUT_TAIL_BYTES);
        tail.drain(..excess);
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(tokio::io::sink())
    }
}

#[async_trait::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }
    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

/// A WASI context with nothing from the outside world: no preopened directories,
/// no sockets, no environment or arguments, the batch's clock and seeded randomness.
pub fn sandboxed_wasi(clock: &BatchClock, output: &GuestOutput) -> WasiCtx {
    let mut builder = WasiCtxBuilder::new();
    builder
        .stdout(output.clone())
        .stderr(output.clone())
        .wall_clock(clock.clone())
        .monotonic_clock(clock.clone())
        .secure_random(clock.clone())
        .insecure_random(clock.clone())
        .insecure_random_seed(0)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    builder.build()
}

/// Caps a guest's linear memory and remembers when the cap stopped it.
pub struct MemoryCap {
    cap_bytes: usize,
    /// The size the guest asked for when the cap refused it.
    pub refused_at: Option<usize>,
    /// The largest size a memory has grown to.
    pub peak_bytes: usize,
}

impl MemoryCap {
    /// A cap of `cap_bytes` per linear memory.
    pub fn new(cap_bytes: usize) -> Self {
        Self { cap_bytes, refused_at: None, peak_bytes: 0 }
    }

    /// The cap in bytes.
    pub fn cap_bytes(&self) -> usize {
        self.cap_bytes
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.cap_bytes {
            self.refused_at = Some(desired);
            return Ok(false);
        }
        self.peak_bytes = self.peak_bytes.max(desired);
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}
