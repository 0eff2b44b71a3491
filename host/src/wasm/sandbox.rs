//! The deterministic sandbox a guest runs in: WASI clocks that answer the batch's
//! processing time, randomness seeded from the query, the batch and the current key's
//! key group, captured stdout/stderr, and a memory cap.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::ResourceLimiter;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder};

/// What makes a batch's random numbers its own: a replay of the batch draws the same
/// streams, any other query or batch other ones. Within the batch each key group has a
/// stream of its own (see [`BatchClock::select_key_group`]), so what a key draws does
/// not depend on which shard runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RandomScope<'a> {
    /// The query's id (from the checkpoint's metadata).
    pub query_id: &'a str,
    /// The batch.
    pub batch_id: u64,
}

/// The batch's clock and seed, shared between the host and the guest's WASI context.
#[derive(Clone, Default)]
pub struct BatchClock {
    inner: Arc<Mutex<ClockState>>,
    /// The key group whose stream the guest draws from, plus one (0: no key is
    /// current); set at every key a call selects, so kept apart from the lock.
    key_group: Arc<AtomicU32>,
}

#[derive(Default)]
struct ClockState {
    /// Processing time of the current batch, microseconds since the epoch.
    now_us: i64,
    /// The batch's random key, from its [`RandomScope`] (zero before the first batch).
    batch_key: [u8; 32],
    /// The batch's random streams, one per key group drawn from (and one for draws
    /// while no key is current), made at their first draw.
    streams: HashMap<Option<u16>, HashStream>,
    /// The shortest wait a clock deadline found ahead of it since it was last taken.
    shortest_wait: Option<Duration>,
}

impl BatchClock {
    /// Sets the time and the random streams for the next batch.
    pub fn start_batch(&self, now_us: i64, random: RandomScope<'_>) {
        let mut state = self.inner.lock().unwrap_or_else(|poison| poison.into_inner());
        state.now_us = now_us;
        state.batch_key = batch_key(random);
        state.streams.clear();
        self.select_key_group(None);
    }

    /// Draws the next random numbers from `key_group`'s stream (the current key's),
    /// or, with `None`, from the stream of draws made while no key is current. A key
    /// group's keys are handled in the same order whatever shard runs them (by key,
    /// input rows first, then timers), so each draws the same numbers in any layout.
    pub fn select_key_group(&self, key_group: Option<u16>) {
        self.key_group.store(key_group.map_or(0, |group| u32::from(group) + 1), Ordering::Relaxed);
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

    fn fill(&self, dst: &mut [u8]) {
        let key_group = match self.key_group.load(Ordering::Relaxed) {
            0 => None,
            plus_one => u16::try_from(plus_one - 1).ok(),
        };
        let mut state = self.inner.lock().unwrap_or_else(|poison| poison.into_inner());
        let batch_key = state.batch_key;
        state.streams.entry(key_group).or_insert_with(|| HashStream::new(&batch_key, key_group)).fill(dst);
    }

    fn next_u64(&self) -> u64 {
        let mut bytes = [0; 8];
        self.fill(&mut bytes);
        u64::from_le_bytes(bytes)
    }
}

/// The key a batch's streams are derived from: SHA-256 of the [`RandomScope`].
fn batch_key(scope: RandomScope<'_>) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(b"eddy guest random v2\0");
    hasher.update((scope.query_id.len() as u64).to_le_bytes());
    hasher.update(scope.query_id.as_bytes());
    hasher.update(scope.batch_id.to_le_bytes());
    hasher.finalize().into()
}

/// A deterministic random stream: SHA-256 in counter mode under a 256-bit key derived
/// from the batch's key and a key group, so that streams of different scopes do not
/// overlap (a 64-bit seed would make UUIDs of 2³² batches collide).
struct HashStream {
    key: [u8; 32],
    counter: u64,
    block: [u8; 32],
    /// How many bytes of `block` were handed out (32 before the first).
    used: usize,
}

impl HashStream {
    fn new(batch_key: &[u8; 32], key_group: Option<u16>) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(batch_key);
        match key_group {
            Some(group) => hasher.update([&[1u8][..], &group.to_le_bytes()].concat()),
            None => hasher.update([0u8]),
        }
        Self { key: hasher.finalize().into(), counter: 0, block: [0; 32], used: 32 }
    }

    fn fill(&mut self, dst: &mut [u8]) {
        for byte in dst {
            if self.used >= self.block.len() {
                let mut hasher = Sha256::new();
                hasher.update(self.key);
                hasher.update(self.counter.to_le_bytes());
                self.block = hasher.finalize().into();
                self.counter += 1;
                self.used = 0;
            }
            *byte = self.block[self.used];
            self.used += 1;
        }
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
        self.fill(dst);
        Ok(())
    }
}

/// What a guest wrote to stdout and stderr during the current call, kept to explain
/// a trap: at most the last [`OUTPUT_KEPT_BYTES`].
#[derive(Clone, Default)]
pub struct GuestOutput {
    captured: Arc<Mutex<Captured>>,
}

#[derive(Default)]
struct Captured {
    tail: VecDeque<u8>,
    /// Whether earlier bytes were dropped to keep the tail within bounds.
    cut: bool,
}

/// How much of a call's output is kept.
pub const OUTPUT_KEPT_BYTES: usize = 4096;

impl GuestOutput {
    /// The call's output, whole or (when longer) its last 4 KiB after a `…`, trimmed,
    /// without the line of a Rust panic that says to set `RUST_BACKTRACE` (the
    /// sandbox has no environment to set it in).
    pub fn text(&self) -> String {
        let captured = self.captured.lock().unwrap_or_else(|poison| poison.into_inner());
        let bytes: Vec<u8> = captured.tail.iter().copied().collect();
        // A cut tail may start inside a UTF-8 sequence.
        let start = if captured.cut { bytes.iter().take_while(|byte| *byte & 0xc0 == 0x80).count() } else { 0 };
        let text = String::from_utf8_lossy(&bytes[start..]);
        let lines: Vec<&str> = text.lines().filter(|line| !line.contains("RUST_BACKTRACE")).collect();
        let body = lines.join("\n");
        let body = body.trim();
        if captured.cut && !body.is_empty() { format!("…{body}") } else { body.to_string() }
    }

    /// Forgets what was captured (at the start of each call).
    pub fn clear(&self) {
        let mut captured = self.captured.lock().unwrap_or_else(|poison| poison.into_inner());
        captured.tail.clear();
        captured.cut = false;
    }

    fn push(&self, bytes: &[u8]) {
        let mut captured = self.captured.lock().unwrap_or_else(|poison| poison.into_inner());
        captured.tail.extend(bytes);
        let excess = captured.tail.len().saturating_sub(OUTPUT_KEPT_BYTES);
        if excess > 0 {
            captured.tail.drain(..excess);
            captured.cut = true;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The first 48 bytes drawn in batch `scope`, for key group `key_group`, in two
    /// draws (after draws for another key group, which must not disturb it).
    fn first_bytes(scope: RandomScope<'_>, key_group: Option<u16>) -> [u8; 48] {
        let clock = BatchClock::default();
        clock.start_batch(0, scope);
        let mut bytes = [0; 48];
        clock.select_key_group(Some(999));
        clock.fill(&mut [0; 40]);
        clock.select_key_group(key_group);
        clock.fill(&mut bytes[..5]);
        clock.select_key_group(Some(998));
        clock.fill(&mut [0; 3]);
        clock.select_key_group(key_group);
        clock.fill(&mut bytes[5..]);
        bytes
    }

    #[test]
    fn each_key_group_draws_a_stream_of_its_batch_of_its_own() {
        let scope = RandomScope { query_id: "8c1f7a52-5d0e-4f6b-9a3e-2b7c4d1e0f9a", batch_id: 7 };
        let stream = first_bytes(scope, Some(64));
        assert_eq!(first_bytes(scope, Some(64)), stream, "a replay draws the same stream");
        // The stream is SHA-256 in counter mode under a key from the batch and the key group.
        let batch: [u8; 32] = Sha256::new()
            .chain_update(b"eddy guest random v2\0")
            .chain_update(36u64.to_le_bytes())
            .chain_update(scope.query_id)
            .chain_update(7u64.to_le_bytes())
            .finalize()
            .into();
        let key: [u8; 32] = Sha256::new().chain_update(batch).chain_update([1u8, 64, 0]).finalize().into();
        let block = |counter: u64| -> [u8; 32] {
            Sha256::new().chain_update(key).chain_update(counter.to_le_bytes()).finalize().into()
        };
        assert_eq!(stream[..32], block(0));
        assert_eq!(stream[32..], block(1)[..16]);
        let others = [
            first_bytes(scope, Some(65)),
            first_bytes(scope, None),
            first_bytes(RandomScope { batch_id: 8, ..scope }, Some(64)),
            first_bytes(RandomScope { query_id: "another query", ..scope }, Some(64)),
        ];
        for (i, other) in others.iter().enumerate() {
            assert_ne!(other[..16], stream[..16], "other scope {i}");
        }
    }

    #[test]
    fn a_trap_shows_the_whole_output_up_to_4_kib_without_the_rust_backtrace_hint() {
        let output = GuestOutput::default();
        output.push(b"Traceback (most recent call last):\n  File \"p.py\", line 3\nValueError: bad amount\n");
        assert_eq!(
            output.text(),
            "Traceback (most recent call last):\n  File \"p.py\", line 3\nValueError: bad amount"
        );
        output.clear();
        output.push(b"thread '<unnamed>' panicked at src/lib.rs:9:5:\nboom\n");
        output.push(b"note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n");
        assert_eq!(output.text(), "thread '<unnamed>' panicked at src/lib.rs:9:5:\nboom");
        // Over 4 KiB: the last 4 KiB, cut on a character boundary, after a mark.
        output.clear();
        output.push(b"first line, dropped\n");
        // 4097 bytes: the tail starts inside the first "é".
        output.push(format!("{}!", "é".repeat(OUTPUT_KEPT_BYTES / 2)).as_bytes());
        assert_eq!(output.text(), format!("…{}!", "é".repeat(OUTPUT_KEPT_BYTES / 2 - 1)));
        output.clear();
        assert_eq!(output.text(), "");
    }
}
