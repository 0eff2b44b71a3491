//! The validated pipeline: what `pipeline.toml` describes, with paths resolved against
//! the spec file's directory and durations in microseconds.

use std::path::PathBuf;
use std::time::Duration;

use arrow::datatypes::SchemaRef;

use super::limits::InstanceLimits;
use crate::contract::{OutputMode, TimeMode};

/// The default of `state-in-memory`.
pub const DEFAULT_STATE_IN_MEMORY_BYTES: u64 = 128 << 20;

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
    /// The chain of stages each batch's rows pass through, in order.
    pub stages: Vec<StageSpec>,
    /// Static tables the SQL stages may join with (Spark's stream-static join).
    pub tables: Vec<TableSpec>,
    /// How many key groups every stateful stage's keys hash into.
    pub key_groups: u16,
    /// The output.
    pub sink: SinkSpec,
    /// When batches run.
    pub trigger: TriggerSpec,
    /// How many batches' offsets, commits and progress records the checkpoint keeps.
    pub min_batches_to_retain: u64,
    /// A state snapshot is taken every this many batches.
    pub snapshot_interval: u64,
    /// The committed state is held in memory (besides RocksDB) while it takes at most
    /// this many bytes; 0: never.
    pub state_in_memory: u64,
    /// Where the Prometheus endpoint and dashboard listen (`[monitoring] metrics`).
    pub metrics_address: Option<String>,
}

impl Pipeline {
    /// The first processor stage's spec, if the chain has one.
    pub fn processor(&self) -> Option<&OperatorSpec> {
        self.stages.iter().find_map(|stage| match &stage.kind {
            StageKind::Processor(processor) => Some(processor),
            _ => None,
        })
    }
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
    /// What the source reads, e.g. `kafka topics=orders` or `json /data/in`: the
    /// checkpoint keeps each source's progress by its position, and this tells
    /// whether a source moved (see `checkpoint::check_source_order`).
    pub fn identity(&self) -> String {
        match &self.kind {
            SourceKind::Files { format: FileFormat::Json, path, .. } => format!("json {}", path.display()),
            SourceKind::Files { path, .. } => format!("csv {}", path.display()),
            SourceKind::Rate { .. } => "rate".to_string(),
            SourceKind::Kafka(kafka) => match &kafka.subscription {
                super::kafka::Subscription::Topics(topics) => format!("kafka topics={}", topics.join(",")),
                super::kafka::Subscription::Pattern(pattern) => format!("kafka topic-pattern={pattern}"),
            },
        }
    }

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

/// One stage of the chain.
#[derive(Clone, Debug)]
pub struct StageSpec {
    /// The stage's name (default: its kind and position, e.g. `window-2`), used in
    /// progress, errors and `eddy state --operator`.
    pub name: String,
    /// Its operator id: where its state lives in the store (its position in the chain).
    pub operator_id: u16,
    /// The spec line it was declared on.
    pub line: usize,
    /// What it does.
    pub kind: StageKind,
    /// The most rows it may output in one batch (`[[stage]]
    /// max-output-rows-per-batch`); `None` for a processor, whose limits are its own
    /// ([`InstanceLimits`](super::InstanceLimits)).
    pub max_output_rows: Option<u64>,
}

/// The default of `[[stage]] max-output-rows-per-batch` (a processor's default
/// `max-output-rows-per-batch` too).
pub const DEFAULT_STAGE_OUTPUT_ROWS: u64 = 4_000_000;

/// What a stage does.
#[derive(Clone, Debug)]
pub enum StageKind {
    /// A WebAssembly processor over keyed rows.
    Processor(OperatorSpec),
    /// A SQL query over each batch's rows (table `input`) and the static tables.
    Sql(String),
    /// Event-time window aggregation.
    Window(WindowSpec),
    /// A running aggregate per group (no window).
    Aggregate(AggregateSpec),
    /// Deduplication.
    Dedup(DedupSpec),
}

impl StageKind {
    /// The kind's name in the spec.
    pub fn kind_name(&self) -> &'static str {
        match self {
            StageKind::Processor(_) => "processor",
            StageKind::Sql(_) => "sql",
            StageKind::Window(_) => "window",
            StageKind::Aggregate(_) => "aggregate",
            StageKind::Dedup(_) => "dedup",
        }
    }
}

/// A static table for SQL stages, read once when the query starts.
#[derive(Clone, Debug)]
pub struct TableSpec {
    /// The table's name in SQL.
    pub name: String,
    /// How its file is written.
    pub format: TableFormat,
    /// A file, or a directory of files of that format.
    pub path: PathBuf,
    /// Its schema.
    pub schema: SchemaRef,
}

/// How a static table's files are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableFormat {
    /// CSV with a header line.
    Csv,
    /// JSON lines.
    Json,
    /// Parquet.
    Parquet,
}

/// The windows of a window stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowKind {
    /// Fixed, non-overlapping windows of `size` microseconds, aligned to the epoch.
    Tumbling {
        /// The window length.
        size_us: i64,
    },
    /// Windows of `size` starting every `slide` microseconds.
    Sliding {
        /// The window length.
        size_us: i64,
        /// The distance between window starts.
        slide_us: i64,
    },
    /// Per group, rows closer than `gap` microseconds share a window.
    Session {
        /// The inactivity gap that closes a session.
        gap_us: i64,
    },
}

/// An aggregate function of a window stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregateFn {
    /// Rows (`count` or `count(*)`), or non-null values of a column.
    Count,
    /// The sum of a numeric column.
    Sum,
    /// The smallest value.
    Min,
    /// The largest value.
    Max,
    /// The mean, as DOUBLE.
    Avg,
}

impl AggregateFn {
    /// Every function, in the order of [`name`](Self::name)'s list.
    const ALL: [AggregateFn; 5] =
        [AggregateFn::Count, AggregateFn::Sum, AggregateFn::Min, AggregateFn::Max, AggregateFn::Avg];

    /// Its name in a spec: `count`, `sum`, `min`, `max`, `avg`.
    pub fn name(self) -> &'static str {
        match self {
            AggregateFn::Count => "count",
            AggregateFn::Sum => "sum",
            AggregateFn::Min => "min",
            AggregateFn::Max => "max",
            AggregateFn::Avg => "avg",
        }
    }

    /// The function named `name` (as [`name`](Self::name) gives it).
    pub fn from_name(name: &str) -> Option<AggregateFn> {
        Self::ALL.into_iter().find(|function| function.name() == name)
    }
}

/// One output column of a window stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Aggregate {
    /// The function.
    pub function: AggregateFn,
    /// Its input column (`None`: `count(*)`).
    pub column: Option<String>,
    /// The output column's name.
    pub name: String,
}

/// A window aggregation stage (Spark's `groupBy(window(...), cols).agg(...)`).
#[derive(Clone, Debug)]
pub struct WindowSpec {
    /// The event-time column (TIMESTAMP).
    pub time_column: String,
    /// Tumbling, sliding or session windows.
    pub windows: WindowKind,
    /// The grouping columns besides the window.
    pub group_by: Vec<String>,
    /// The aggregates, in output order.
    pub aggregates: Vec<Aggregate>,
    /// Append: a window once, when the watermark passes its end; update: changed
    /// windows every batch; complete: every window every batch.
    pub output_mode: OutputMode,
    /// Complete mode: the most result rows a trigger may output.
    pub max_complete_rows: u64,
}

/// A running aggregation stage (Spark's `groupBy(cols).agg(...)` without a window).
#[derive(Clone, Debug)]
pub struct AggregateSpec {
    /// The grouping columns (none: one group of every row).
    pub group_by: Vec<String>,
    /// The aggregates, in output order.
    pub aggregates: Vec<Aggregate>,
    /// Update: the groups a batch changed, after it; complete: every group every batch.
    pub output_mode: OutputMode,
    /// Complete mode: the most result rows a trigger may output.
    pub max_complete_rows: u64,
}

/// A deduplication stage (Spark's `dropDuplicates` / `dropDuplicatesWithinWatermark`).
#[derive(Clone, Debug)]
pub struct DedupSpec {
    /// The columns that make rows duplicates.
    pub key: Vec<String>,
    /// How long a key is remembered.
    pub retention: DedupRetention,
    /// The watermark's event-time column, when the query has one.
    pub event_time_column: Option<String>,
}

/// How long a deduplication stage remembers a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DedupRetention {
    /// `dropDuplicates` with the event-time column among the key: until the watermark
    /// passes the key's event time.
    UntilWatermark,
    /// `dropDuplicatesWithinWatermark`: for the watermark delay after the first
    /// occurrence's event time.
    WithinWatermark {
        /// The watermark delay, in microseconds.
        delay_us: i64,
    },
    /// Every key forever (`state = "forever"` in the spec): without a watermark, or
    /// with one whose column is not in the key (late rows are still dropped).
    Forever,
}

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
    /// How many bytes of a batch's changes (of every kind) one shard holds in memory;
    /// past that, they are written to the store ahead of the commit.
    pub spill_state_bytes: u64,
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
