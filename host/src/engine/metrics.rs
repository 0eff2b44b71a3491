//! What one batch did, measured by the engine (turned into a progress record).

use crate::operator::StageStats;

/// Event-time statistics of a batch's input.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventTimeStats {
    /// The smallest event time.
    pub min: Option<i64>,
    /// The largest event time.
    pub max: Option<i64>,
    sum: i128,
    count: u64,
}

impl EventTimeStats {
    /// Adds event times.
    pub fn add(&mut self, times: impl Iterator<Item = i64>) {
        for time in times {
            self.min = Some(self.min.map_or(time, |m| m.min(time)));
            self.max = Some(self.max.map_or(time, |m| m.max(time)));
            self.sum += i128::from(time);
            self.count += 1;
        }
    }

    /// The average event time.
    pub fn avg(&self) -> Option<i64> {
        (self.count > 0).then(|| (self.sum / i128::from(self.count)) as i64)
    }
}

/// What one source contributed to a batch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceMetrics {
    /// The source's name.
    pub name: String,
    /// How progress describes it (`FileSource[/in]`).
    pub description: String,
    /// Rows read (before the watermark filter).
    pub input_rows: u64,
    /// Bytes read.
    pub input_bytes: u64,
    /// Records skipped or dead-lettered.
    pub bad_records: u64,
    /// Where the batch started.
    pub start_offset: serde_json::Value,
    /// Where it ended.
    pub end_offset: serde_json::Value,
    /// The newest offset available when the batch was planned (`null`: not known).
    pub latest_offset: serde_json::Value,
    /// Source-specific counters (e.g. Kafka's backlog).
    pub metrics: std::collections::BTreeMap<String, String>,
}

/// What one batch did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BatchMetrics {
    /// The batch id.
    pub batch_id: u64,
    /// The batch's processing time (microseconds since the epoch).
    pub processing_time: i64,
    /// The watermark the batch ran with.
    pub watermark: Option<i64>,
    /// Rows read from all sources.
    pub input_rows: u64,
    /// Per source.
    pub sources: Vec<SourceMetrics>,
    /// Rows dropped as late, by every stage.
    pub rows_dropped_by_watermark: u64,
    /// Event times of the input.
    pub event_time: EventTimeStats,
    /// What each stateful stage did, in chain order (a stateless one keeps nothing to
    /// report: Spark lists only stateful operators in `stateOperators`).
    pub stages: Vec<StageStats>,
    /// Estimated live state entries after the batch.
    pub state_rows_total: u64,
    /// State store memory.
    pub memory_used_bytes: u64,
    /// Rows written to the sink.
    pub output_rows: u64,
    /// Bytes the sink wrote.
    pub sink_bytes: u64,
    /// Estimated bytes of live state (the whole store).
    pub state_bytes: u64,
    /// Whether the batch ran longer than the processing-time trigger's interval.
    pub trigger_overrun: bool,
    /// Planning (source listing and reading) time.
    pub plan_ms: u64,
    /// Time the stages ran.
    pub operator_ms: u64,
    /// Sink time.
    pub sink_ms: u64,
    /// State commit time.
    pub commit_ms: u64,
    /// The whole batch.
    pub total_ms: u64,
    /// Files the bounded file sources have left after the batch (available-now runs
    /// whose observer counts files; `None` otherwise).
    pub files_left: Option<u64>,
}
