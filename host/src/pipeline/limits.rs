//! What one processor instance may use, and the byte sizes the spec writes them in.
//!
//! Besides the guest's own memory cap and call deadline, a processor can make the
//! *host* hold memory: the state changes and timers a batch buffers until its commit,
//! the rows it returns, the lines it logs. Each of these has a limit ([`Limit`]), per
//! shard and batch or per call; a processor that passes one fails the batch (nothing
//! is committed) with a message naming the limit and the spec key that raises it.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

/// What one processor instance (one shard) may use: spec data the runtime enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstanceLimits {
    /// The largest linear memory the guest may grow to, in bytes.
    pub memory_cap_bytes: usize,
    /// The longest one call into the guest may run.
    pub call_timeout: Duration,
    /// Bytes of state changes (value, list and map writes and removals) one shard's
    /// batch may buffer: each change counts its key, its value and
    /// [`CHANGE_OVERHEAD_BYTES`].
    pub state_bytes_per_batch: u64,
    /// Timer registrations and deletions one shard's batch may buffer.
    pub timers_per_batch: u64,
    /// The largest single state value: a value, a whole list, or a map entry (its key
    /// and value).
    pub state_value_bytes: u64,
    /// Output rows the handling of one key (or one timer) may return.
    pub output_rows_per_call: u64,
    /// Output bytes the handling of one key (or one timer) may return (see
    /// [`crate::contract::rows::row_range_bytes`]).
    pub output_bytes_per_call: u64,
    /// Output rows one shard's batch may collect.
    pub output_rows_per_batch: u64,
    /// Output bytes one shard's batch may collect.
    pub output_bytes_per_batch: u64,
    /// Bytes of log messages the handling of one key (or timer) may log (at any level,
    /// shown or not).
    pub log_bytes_per_call: u64,
}

/// What a buffered state change costs beyond its key and value bytes (the map entry
/// and allocations that hold it), as counted against `max-state-bytes-per-batch`.
pub const CHANGE_OVERHEAD_BYTES: u64 = 64;

const MIB: u64 = 1 << 20;

impl Default for InstanceLimits {
    fn default() -> Self {
        Self {
            memory_cap_bytes: 256 << 20,
            call_timeout: Duration::from_secs(30),
            state_bytes_per_batch: 64 * MIB,
            timers_per_batch: 500_000,
            state_value_bytes: 16 * MIB,
            output_rows_per_call: 1_000_000,
            output_bytes_per_call: 64 * MIB,
            output_rows_per_batch: 4_000_000,
            output_bytes_per_batch: 128 * MIB,
            log_bytes_per_call: MIB,
        }
    }
}

/// One of the host-memory limits of [`InstanceLimits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// `operator.max-state-bytes-per-batch`.
    StateBytesPerBatch,
    /// `operator.max-timers-per-batch`.
    TimersPerBatch,
    /// `operator.max-state-value-bytes`.
    StateValueBytes,
    /// `operator.max-output-rows-per-call`.
    OutputRowsPerCall,
    /// `operator.max-output-bytes-per-call`.
    OutputBytesPerCall,
    /// `operator.max-output-rows-per-batch`.
    OutputRowsPerBatch,
    /// `operator.max-output-bytes-per-batch`.
    OutputBytesPerBatch,
    /// `operator.max-log-bytes-per-call`.
    LogBytesPerCall,
}

impl Limit {
    /// Every limit, in spec order.
    pub const ALL: [Limit; 8] = [
        Limit::StateBytesPerBatch,
        Limit::TimersPerBatch,
        Limit::StateValueBytes,
        Limit::OutputRowsPerCall,
        Limit::OutputBytesPerCall,
        Limit::OutputRowsPerBatch,
        Limit::OutputBytesPerBatch,
        Limit::LogBytesPerCall,
    ];

    /// The spec key under `[operator]`, e.g. `max-state-bytes-per-batch`.
    pub fn key(self) -> &'static str {
        match self {
            Limit::StateBytesPerBatch => "max-state-bytes-per-batch",
            Limit::TimersPerBatch => "max-timers-per-batch",
            Limit::StateValueBytes => "max-state-value-bytes",
            Limit::OutputRowsPerCall => "max-output-rows-per-call",
            Limit::OutputBytesPerCall => "max-output-bytes-per-call",
            Limit::OutputRowsPerBatch => "max-output-rows-per-batch",
            Limit::OutputBytesPerBatch => "max-output-bytes-per-batch",
            Limit::LogBytesPerCall => "max-log-bytes-per-call",
        }
    }

    /// Whether the limit counts bytes (else a number of rows or timers).
    pub fn in_bytes(self) -> bool {
        !matches!(self, Limit::TimersPerBatch | Limit::OutputRowsPerCall | Limit::OutputRowsPerBatch)
    }

    /// Its value in `limits`.
    pub fn of(self, limits: &InstanceLimits) -> u64 {
        match self {
            Limit::StateBytesPerBatch => limits.state_bytes_per_batch,
            Limit::TimersPerBatch => limits.timers_per_batch,
            Limit::StateValueBytes => limits.state_value_bytes,
            Limit::OutputRowsPerCall => limits.output_rows_per_call,
            Limit::OutputBytesPerCall => limits.output_bytes_per_call,
            Limit::OutputRowsPerBatch => limits.output_rows_per_batch,
            Limit::OutputBytesPerBatch => limits.output_bytes_per_batch,
            Limit::LogBytesPerCall => limits.log_bytes_per_call,
        }
    }

    /// Sets its value in `limits`.
    pub fn set(self, limits: &mut InstanceLimits, value: u64) {
        let field = match self {
            Limit::StateBytesPerBatch => &mut limits.state_bytes_per_batch,
            Limit::TimersPerBatch => &mut limits.timers_per_batch,
            Limit::StateValueBytes => &mut limits.state_value_bytes,
            Limit::OutputRowsPerCall => &mut limits.output_rows_per_call,
            Limit::OutputBytesPerCall => &mut limits.output_bytes_per_call,
            Limit::OutputRowsPerBatch => &mut limits.output_rows_per_batch,
            Limit::OutputBytesPerBatch => &mut limits.output_bytes_per_batch,
            Limit::LogBytesPerCall => &mut limits.log_bytes_per_call,
        };
        *field = value;
    }

    /// What the limit bounds, e.g. "per shard and batch".
    fn scope(self) -> &'static str {
        match self {
            Limit::StateBytesPerBatch
            | Limit::TimersPerBatch
            | Limit::OutputRowsPerBatch
            | Limit::OutputBytesPerBatch => "per shard and batch",
            Limit::OutputRowsPerCall | Limit::OutputBytesPerCall | Limit::LogBytesPerCall => "per call",
            Limit::StateValueBytes => "for one state value",
        }
    }

    /// What to do besides raising the limit.
    fn advice(self) -> &'static str {
        match self {
            Limit::StateBytesPerBatch | Limit::TimersPerBatch => {
                "make batches smaller (the source's max-bytes-per-trigger, max-files-per-trigger or max-rows-per-trigger)"
            }
            Limit::StateValueBytes => "keep large data out of state (spread it over map entries)",
            Limit::OutputRowsPerCall | Limit::OutputBytesPerCall => "return fewer or smaller rows per call",
            Limit::OutputRowsPerBatch | Limit::OutputBytesPerBatch => {
                "return fewer rows, or make batches smaller (the source's max-bytes-per-trigger, max-files-per-trigger or max-rows-per-trigger)"
            }
            Limit::LogBytesPerCall => "log less",
        }
    }

    /// The message for passing the limit in `limits`: `what` happened (e.g. "the
    /// state changes of this batch reached 70 MiB"), the limit, and what to do.
    pub fn exceeded(self, limits: &InstanceLimits, what: impl fmt::Display) -> String {
        let value = self.of(limits);
        let shown = if self.in_bytes() { show_bytes(value) } else { value.to_string() };
        let key = self.key();
        format!(
            "{what}, over the limit of {shown} {} (operator.{key}); {}, or raise operator.{key}",
            self.scope(),
            self.advice()
        )
    }
}

/// `n` bytes as a person reads them: `512 bytes`, `64 MiB`, `1.5 GiB`.
pub fn show_bytes(n: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if n >= size {
            return if n.is_multiple_of(size) {
                format!("{} {unit}", n / size)
            } else {
                format!("{:.1} {unit}", n as f64 / size as f64)
            };
        }
    }
    format!("{n} bytes")
}

/// A byte size in the spec: a number of bytes, or text with a unit (`"64 MiB"`).
#[derive(Clone, Debug)]
pub(super) enum RawSize {
    /// A plain number (negative ones are refused when validated).
    Bytes(i64),
    /// Text such as `"64 MiB"`.
    Text(String),
}

impl<'de> Deserialize<'de> for RawSize {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = RawSize;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a positive number, or a size like \"64 MiB\"")
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<RawSize, E> {
                Ok(RawSize::Bytes(n))
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<RawSize, E> {
                Ok(RawSize::Bytes(i64::try_from(n).unwrap_or(i64::MAX)))
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<RawSize, E> {
                Ok(RawSize::Text(text.to_string()))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl RawSize {
    /// The size in bytes, or what is wrong with it.
    pub(super) fn bytes(&self) -> Result<u64, String> {
        match self {
            RawSize::Bytes(n) => u64::try_from(*n).map_err(|_| format!("{n} is negative; expected a positive number")),
            RawSize::Text(text) => parse_size(text),
        }
    }
}

/// Parses `<number> <unit>`: B, KB/MB/GB (powers of 1000), KiB/MiB/GiB (powers of
/// 1024), or a bare number of bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let expected = "expected a size like \"64 MiB\", \"512 KiB\" or a number of bytes";
    let value: f64 = number.parse().map_err(|_| format!("'{text}' is not a size; {expected}"))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" | "byte" | "bytes" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        other => return Err(format!("unknown unit '{other}' in '{text}'; {expected}")),
    };
    let bytes = value * scale;
    if !bytes.is_finite() || bytes >= 2f64.powi(63) {
        return Err(format!("'{text}' is too large"));
    }
    Ok(bytes.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes_with_and_without_units() {
        assert_eq!(parse_size("64 MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1.5KiB"), Ok(1536));
        assert_eq!(parse_size("2 GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("100"), Ok(100));
        assert_eq!(parse_size("7 bytes"), Ok(7));
        assert!(parse_size("lots").unwrap_err().contains("is not a size"));
        assert!(parse_size("3 parsecs").unwrap_err().contains("unknown unit 'parsecs'"));
        assert!(parse_size("99999999999 GiB").unwrap_err().contains("too large"));
    }

    #[test]
    fn messages_name_the_limit_and_the_key_to_raise() {
        let limits = InstanceLimits::default();
        assert_eq!(
            Limit::LogBytesPerCall.exceeded(&limits, "the processor logged 2 MiB"),
            "the processor logged 2 MiB, over the limit of 1 MiB per call (operator.max-log-bytes-per-call); \
             log less, or raise operator.max-log-bytes-per-call"
        );
        assert!(Limit::TimersPerBatch.exceeded(&limits, "x").contains("500000 per shard and batch"));
        assert_eq!(show_bytes(1536), "1.5 KiB");
        assert_eq!(show_bytes(12), "12 bytes");
        let mut changed = limits;
        for (value, limit) in Limit::ALL.into_iter().enumerate() {
            limit.set(&mut changed, value as u64 + 1);
            assert_eq!(limit.of(&changed), value as u64 + 1, "{}", limit.key());
        }
    }

    /// Parses a spec with `source` and `operator` lines added to a valid one.
    fn parse(source: &str, operator: &str) -> anyhow::Result<super::super::Pipeline> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("input"))?;
        std::fs::write(dir.path().join("p.wasm"), "")?;
        let text = format!(
            "[[source]]\nformat = \"json\"\npath = \"input\"\nschema = \"k STRING\"\n{source}\n\n\
             [operator]\nmodule = \"p.wasm\"\nkey = [\"k\"]\n{operator}\n"
        );
        super::super::Pipeline::parse(&dir.path().join("pipeline.toml"), &text)
    }

    #[test]
    fn the_spec_sets_limits_and_says_what_is_wrong_where() {
        use super::super::{DEFAULT_MAX_BYTES_PER_TRIGGER, SourceKind};
        let defaults = parse("", "").expect("valid");
        assert_eq!(defaults.processor().expect("a processor").limits, InstanceLimits::default());
        let SourceKind::Files { max_bytes_per_trigger, .. } = defaults.sources[0].kind else { panic!("files") };
        assert_eq!(max_bytes_per_trigger, Some(DEFAULT_MAX_BYTES_PER_TRIGGER));

        let set = parse(
            "max-bytes-per-trigger = \"2 KiB\"",
            "max-state-bytes-per-batch = \"1 GiB\"\nmax-timers-per-batch = 7\nmax-log-bytes-per-call = 100",
        )
        .expect("valid");
        let SourceKind::Files { max_bytes_per_trigger, .. } = set.sources[0].kind else { panic!("files") };
        assert_eq!(max_bytes_per_trigger, Some(2048));
        let limits = set.processor().expect("a processor").limits;
        assert_eq!(
            (limits.state_bytes_per_batch, limits.timers_per_batch, limits.log_bytes_per_call),
            (1 << 30, 7, 100)
        );

        let error = |source: &str, operator: &str| {
            let message = parse(source, operator).expect_err("invalid").to_string();
            message.split_once("pipeline.toml:").map(|(_, rest)| rest.to_string()).unwrap_or(message)
        };
        assert_eq!(
            error("", "max-state-value-bytes = \"lots\""),
            "10: operator.max-state-value-bytes: 'lots' is not a size; expected a size like \"64 MiB\", \"512 KiB\" or a number of bytes"
        );
        assert_eq!(
            error("", "max-output-rows-per-call = 0"),
            "10: operator.max-output-rows-per-call: expected a positive number"
        );
        assert_eq!(
            error("", "max-output-rows-per-batch = -3"),
            "10: operator.max-output-rows-per-batch: -3 is negative; expected a positive number"
        );
        assert!(
            error("", "max-log-bytes-per-call = true")
                .contains("expected a positive number, or a size like \"64 MiB\"")
        );
        assert_eq!(
            error("", "max-timers-per-batch = \"1 MiB\""),
            "10: operator.max-timers-per-batch: expected a positive number"
        );
        assert_eq!(
            error("max-bytes-per-trigger = 0", ""),
            "5: source[0].max-bytes-per-trigger: expected a positive size, e.g. \"64 MiB\""
        );
        assert!(
            error("max-rows-per-trigger = 10", "")
                .starts_with("5: source[0].max-rows-per-trigger: only the rate source takes max-rows-per-trigger"),
        );
    }
}
