//! The validated pipeline: what `pipeline.toml` describes, with paths resolved against
//! the spec file's directory and durations in microseconds.

use std::path::PathBuf;
use std::time::Duration;

use arrow::datatypes::SchemaRef;

use super::limits::InstanceLimits;
use crate::contract::{OutputMode, TimeMode};

/// A validated pipeline.
#[derive(Clone, Debug)]
pub struct Pipeline {
    /// The spec file.
    pub file: PathBuf,
    /// The query's name (default: the spec directory's name).
    pub name: String,
    /// Where the query keeps its state; `None` means a temporary directory per run.
    pub checkpoint: Option<PathBuf>,
    /// The inputs, unioned (they share one schema).
    pub sources: Vec<SourceSpec>,
    /// How the query watermark follows the per-source watermarks.
    pub watermark_policy: WatermarkPolicy,
    /// The processor.
    pub operator: OperatorSpec,
    /// The output.
    pub sink: SinkSpec,
    /// When batches run.
    pub trigger: TriggerSpec,
    /// How many batches' offsets, commits and progress records the checkpoint keeps.
    pub min_batches_to_retain: u64,
    /// A state snapshot is taken every this many batches.
    pub snapshot_interval: u64,
    /// Where the Prometheus endpoint and dashboard listen (`[monitoring] metrics`).
    pub metrics_address: Option<String>,
}

/// One input.
#[derive(Clone, Debug)]
pub struct SourceSpec {
    /// The source's name (default `source-<index>`), used in progress and errors.
    pub name: String,
    /// Where rows come from.
    pub kind: SourceKind,
    /// The schema of its rows (for `rate`: `timestamp TIMESTAMP, value BIGINT`).
    pub schema: SchemaRef,
    /// Event time and lateness, if the source has a watermark.
    pub watermark: Option<WatermarkSpec>,
    /// What to do with a record that does not decode.
    pub on_bad_record: BadRecordPolicy,
}

impl SourceSpec {
    /// The index of the event-time column in the schema, when the source has a watermark.
    pub fn event_time_column(&self) -> Option<usize> {
        self.watermark.as_ref().and_then(|watermark| self.schema.index_of(&watermark.column).ok())
    }
}

/// Where a source's rows come from.
#[derive(Clone, Debug)]
pub enum SourceKind {
    /// Files in a directory (or one file), discovered anew at each trigger.
    Files {
        /// How records are written.
        format: FileFormat,
        /// A file, or a directory whose files of that format are read in name order.
        path: PathBuf,
        /// At most this many new files per batch (`None`: all new files).
        max_files_per_trigger: Option<usize>,
        /// A batch takes files (in name order) up to this many bytes, and always at
        /// least one (`None`: no byte limit).
        max_bytes_per_trigger: Option<u64>,
    },
    /// Generated rows `timestamp, value`: `value` counts up from 0 and `timestamp`
    /// is `start + value / rows_per_second`.
    Rate {
        /// How many rows each second of processing time makes.
        rows_per_second: u64,
        /// The timestamp of row 0 (microseconds); `None`: the query's first batch time.
        start_us: Option<i64>,
        /// At most this many rows per batch, however far behind the source is
        /// (`None`: all rows due).
        max_rows_per_trigger: Option<u64>,
    },
    /// Records of Kafka topics, read by partition from positions kept in the state store.
    Kafka(super::kafka::KafkaSourceSpec),
}

/// How file records are written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileFormat {
    /// JSON lines: one object per line (`*.json`, `*.jsonl`).
    Json,
    /// CSV (`*.csv`).
    Csv {
        /// Whether the first line of each file names the columns (and is skipped).
        header: bool,
        /// The field delimiter.
        delimiter: u8,
    },
}

/// The watermark of one source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatermarkSpec {
    /// The event-time column (TIMESTAMP).
    pub column: String,
    /// How late rows may arrive, in microseconds.
    pub delay_us: i64,
}

/// How several sources' watermarks combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatermarkPolicy {
    /// The slowest source's (Spark's default): no source's rows are dropped early.
    Min,
    /// The fastest source's: slower sources' rows may be dropped as late.
    Max,
}

/// What a source does with a record that does not decode against its schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadRecordPolicy {
    /// Stop the query, naming the file, line and reason (the default).
    Fail,
    /// Leave the record out and count it in progress.
    Skip,
    /// Leave it out, count it, and write the raw record and the reason to a file in
    /// this directory.
    DeadLetter(PathBuf),
}

/// The default of `max-bytes-per-trigger` for file sources.
pub const DEFAULT_MAX_BYTES_PER_TRIGGER: u64 = 32 << 20;
/// The default of `max-rows-per-trigger` for the rate source.
pub const DEFAULT_MAX_ROWS_PER_TRIGGER: u64 = 1_000_000;

/// A WebAssembly processor over keyed rows.
#[derive(Clone, Debug)]
pub struct OperatorSpec {
    /// The component file.
    pub module: PathBuf,
    /// The grouping columns.
    pub key: Vec<String>,
    /// The output mode the processor is told about.
    pub output_mode: OutputMode,
    /// The time mode the spec requires (checked against what the processor declares).
    pub time_mode: Option<TimeMode>,
    /// How many key groups keys hash into.
    pub key_groups: u16,
    /// How many shards (each with its own instance) run the key groups in parallel.
    pub parallelism: usize,
    /// Memory cap, call deadline and the limits on what a batch may buffer.
    pub limits: InstanceLimits,
    /// The `config` table as JSON text.
    pub config_json: String,
    /// State to start a new query from, handed to `handle-initial-state`.
    pub initial_state: Option<InitialStateSpec>,
}

/// JSON-lines rows that seed a new query's state, one group per key.
#[derive(Clone, Debug)]
pub struct InitialStateSpec {
    /// A JSON-lines file, or a directory of them.
    pub path: PathBuf,
    /// Their schema; it must hold the key columns.
    pub schema: SchemaRef,
}

/// Where results go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkFormat {
    /// A table per batch on stdout.
    Console,
    /// JSON-lines part files, one per batch.
    Json,
    /// Parquet part files, one per batch.
    Parquet,
    /// JSON records in Kafka topics.
    Kafka,
}

/// The sink.
#[derive(Clone, Debug)]
pub struct SinkSpec {
    /// Console or files.
    pub format: SinkFormat,
    /// The output directory (file sinks).
    pub path: Option<PathBuf>,
    /// Console: the most rows shown per batch.
    pub num_rows: usize,
    /// Console: whether long values are cut to 20 characters.
    pub truncate: bool,
    /// Kafka: the topic, key and client properties.
    pub kafka: Option<super::kafka::KafkaSinkSpec>,
}

/// When batches run (Spark's triggers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriggerSpec {
    /// The next batch starts as soon as the previous one ends (the default).
    AsFastAsPossible,
    /// A batch starts every interval; a batch that runs longer is reported, and the
    /// next one starts at once.
    ProcessingTime(Duration),
    /// Everything available at the start, in as many batches as the source limits
    /// allow, then stop.
    AvailableNow,
    /// One batch of everything available, then stop.
    Once,
}
