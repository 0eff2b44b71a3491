//! A stage: one step of the chain between a query's sources and its sink, run once
//! per batch on the rows the step before it produced. A stateful stage keeps its state
//! under its own operator id and hands its changes back as transactions, which the
//! engine commits together with the rest of the batch — so the batch protocol does
//! not change however many stages a query has.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use crate::checkpoint::TopKeys;
use crate::state::{StateStore, StateTxn};

/// The clocks of one batch.
#[derive(Clone, Copy, Debug)]
pub struct BatchTime {
    /// The batch id (seeds the guest's randomness).
    pub batch_id: u64,
    /// The batch's processing time, microseconds since the epoch.
    pub processing_time: i64,
    /// The watermark in force, if any: it evicts state and fires event-time timers.
    pub watermark: Option<i64>,
    /// The watermark late rows are judged by: the previous batch's (Spark's
    /// `eventTimeWatermarkForLateEvents`); a row at or before it is late.
    pub late_rows_watermark: Option<i64>,
}

/// What a stage did in one batch, for progress (Spark's `stateOperators` entry).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageStats {
    /// How progress names the stage (Spark's `operatorName`).
    pub name: String,
    /// Distinct keys that had input rows.
    pub keys_with_input: u64,
    /// Timers that fired.
    pub timers_fired: u64,
    /// Expired state entries evicted.
    pub entries_evicted: u64,
    /// State entries written.
    pub state_rows_updated: u64,
    /// State entries deleted.
    pub state_rows_removed: u64,
    /// Input rows dropped as late (at or before the previous batch's watermark).
    pub rows_dropped_by_watermark: u64,
    /// Milliseconds the stage ran.
    pub run_ms: u64,
    /// Timers registered.
    pub timers_registered: u64,
    /// Processor calls and their time, per handler (`handle-input-rows`, …).
    pub handlers: BTreeMap<String, HandlerStats>,
    /// The largest linear memory any of its guest instances has had, in bytes.
    pub guest_memory_peak_bytes: u64,
    /// The batch's hottest keys.
    pub top_keys: TopKeys,
    /// The stage's own count of state entries after the batch, when it keeps one
    /// (otherwise progress shows the store's estimate).
    pub state_rows_total: Option<u64>,
}

/// Calls of one processor handler in a batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandlerStats {
    /// How many calls.
    pub calls: u64,
    /// Their total time, in microseconds.
    pub micros: u64,
}

impl HandlerStats {
    /// Adds another's calls.
    pub fn add(&mut self, other: HandlerStats) {
        self.calls += other.calls;
        self.micros += other.micros;
    }
}

/// A static table as a stage read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticTable {
    /// Its name in SQL.
    pub name: String,
    /// Its file or directory.
    pub path: PathBuf,
    /// A hash of its files' names and bytes as read (SHA-256, hex).
    pub fingerprint: String,
}

/// What a stage produced in one batch.
pub struct StageOutput {
    /// Its state changes (none for a stateless stage), committed by the engine.
    pub txns: Vec<StateTxn>,
    /// The rows it produced, in the stage's output schema.
    pub rows: Vec<RecordBatch>,
    /// What it did.
    pub stats: StageStats,
}

/// One step of a query's chain.
pub trait Stage: Send {
    /// The schema of the rows it produces.
    fn output_schema(&self) -> &SchemaRef;

    /// Whether it takes late rows (otherwise the engine drops
    /// them before the stage sees them).
    fn accepts_late_rows(&self) -> bool;

    /// Whether it keeps no state and passes late rows on (the engine then asks the
    /// next stage whether to drop late rows).
    fn is_stateless(&self) -> bool {
        false
    }

    /// Whether a batch without new input must run when the watermark moved: the stage
    /// evicts or outputs by the watermark (Spark's `shouldRunAnotherBatch`, asked of
    /// each stateful operator; a no-data batch runs when one of them says yes). A
    /// stateful stage says yes unless it says otherwise; a stateless one, no.
    fn runs_when_the_watermark_moves(&self) -> bool {
        !self.is_stateless()
    }

    /// The static tables it read when it opened: a batch records them when planned,
    /// and its re-run after a crash refuses tables that changed since.
    fn static_tables(&self) -> Vec<StaticTable> {
        Vec::new()
    }

    /// Whether one of its timers is due at `time`, so that a batch must run even
    /// without new input.
    fn timers_due(&mut self, store: &StateStore, time: BatchTime) -> Result<bool>;

    /// Runs the stage over one batch's `input`. On error nothing of the batch may be
    /// kept: the engine commits nothing.
    fn run(&mut self, store: &StateStore, input: &RecordBatch, time: BatchTime) -> Result<StageOutput>;

    /// Ends the stage when the run ends.
    fn close(&mut self) -> Result<()>;
}
