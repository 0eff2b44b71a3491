//! Sources: where input rows come from — files (JSON lines, CSV), the rate
//! generator and Kafka topics.
//!
//! A source keeps no progress of its own: what it has consumed lives only in the
//! committed state store, under meta keys `source/<index>/…` that each batch's
//! [`SourceBatch::commit`] entries write together with the batch's state. Planning the
//! next batch is therefore a function of the committed store, and a batch that failed
//! before its commit is planned again the same way.

mod dead_letter;
mod files;
mod kafka;
mod listing;
mod rate;
mod read_ahead;

use anyhow::{Result, bail};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use serde_json::Value;

use crate::checkpoint::CheckpointDir;
use crate::pipeline::{FileFormat, SourceKind, SourceSpec};
use crate::state::StateStore;

pub use rate::rate_schema;

/// One batch's worth of rows from one source.
#[derive(Debug)]
pub struct SourceBatch {
    /// The rows, in the source's schema.
    pub rows: RecordBatch,
    /// The bytes read for them (0 when the source reads none, like the rate source).
    pub bytes: u64,
    /// Records skipped or dead-lettered.
    pub bad_records: u64,
    /// A Spark-like description of where the batch starts, for progress.
    pub start_offset: Value,
    /// Where it ends; [`Source::replan_batch`] plans the same batch again from it.
    pub end_offset: Value,
    /// The newest offset available when the batch was planned (`null`: not known).
    pub latest_offset: Value,
    /// Source-specific counters for progress (e.g. Kafka's backlog).
    pub metrics: std::collections::BTreeMap<String, String>,
    /// Meta entries to write atomically with the batch's state commit (`Cf::Meta`),
    /// recording that this batch consumed these offsets. Progress lives only in the
    /// committed store.
    pub commit: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A source of rows, planned batch by batch against the committed state store.
pub trait Source: Send {
    /// The source's name, for progress and errors.
    fn name(&self) -> &str;

    /// How progress describes this source, like Spark: `FileSource[/in]`,
    /// `RateSource[rowsPerSecond=5]`.
    fn description(&self) -> String;

    /// The schema of its rows.
    fn schema(&self) -> &SchemaRef;

    /// Fixes what "available now" means (available-now and once triggers): later
    /// calls never read past it.
    fn bound_to_available_now(&mut self, store: &StateStore, now_us: i64) -> Result<()>;

    /// Drops per-batch limits — max-files-per-trigger, max-bytes-per-trigger,
    /// max-rows-per-trigger (the once trigger reads all that is available in one
    /// batch, like Spark's).
    fn lift_batch_limits(&mut self) {}

    /// The rows of the next batch given what the store has committed, or `None` when
    /// there is nothing new. A function of (committed store, files on disk, bound,
    /// `now_us`): called again after a batch failed (not committed), it plans the same
    /// batch again — as long as no new input arrived in between; for an exact replay
    /// use [`Source::replan_batch`].
    fn next_batch(&mut self, store: &StateStore, batch_id: u64, now_us: i64) -> Result<Option<SourceBatch>>;

    /// Plans again the batch whose [`SourceBatch::end_offset`] the engine recorded
    /// before running it (`offsets/<N>`), reading exactly what it read then even if
    /// new input arrived since. `Value::Null` stands for "nothing from this source"
    /// and gives `None`. Call it only while the batch is not committed.
    fn replan_batch(
        &mut self,
        store: &StateStore,
        batch_id: u64,
        now_us: i64,
        end_offset: &Value,
    ) -> Result<Option<SourceBatch>> {
        let planned = self.next_batch(store, batch_id, now_us)?;
        let planned_end = planned.as_ref().map_or(Value::Null, |batch| batch.end_offset.clone());
        if &planned_end != end_offset {
            bail!(
                "source '{}' cannot plan batch {batch_id} again: it was planned up to {end_offset} and now plans up to {planned_end}",
                self.name()
            );
        }
        Ok(planned)
    }

    /// Called once the batch just planned has run its stages (its output and commit
    /// are next, on one core): a source may start reading what the next batch will
    /// likely take (the file source does, see `read_ahead`).
    fn read_ahead(&mut self, _store: &StateStore) {}

    /// Whether everything up to the available-now bound has been committed (false
    /// when unbounded).
    fn caught_up(&self, store: &StateStore) -> Result<bool>;

    /// How many files are left up to the available-now bound (`None` when the source
    /// is unbounded or does not count in files).
    fn files_left(&self, _store: &StateStore) -> Result<Option<u64>> {
        Ok(None)
    }
}

/// Opens source number `index` of the pipeline checkpointed in `checkpoint` (its meta
/// keys are namespaced by `index`; a file source logs its batches' files in the
/// checkpoint's source log `index`, a Kafka source its offset ranges).
pub fn open(spec: &SourceSpec, index: usize, checkpoint: &CheckpointDir) -> Result<Box<dyn Source>> {
    Ok(match &spec.kind {
        SourceKind::Files { .. } => Box::new(files::FileSource::open(spec, index, checkpoint)?),
        SourceKind::Rate { .. } => Box::new(rate::RateSource::open(spec, index)?),
        SourceKind::Kafka(_) => Box::new(kafka::KafkaSource::open(spec, index, checkpoint)?),
    })
}

/// The JSON-lines files under `path`: the file itself, or a directory's `*.json` and
/// `*.jsonl` files (not hidden ones) in name order.
pub fn list_input_files(path: &std::path::Path) -> Result<Vec<std::path::PathBuf>> {
    let names = listing::list(path, &FileFormat::Json)?;
    Ok(names.iter().map(|name| listing::file_path(path, name)).collect())
}

/// The meta key `source/<index>/<rest>`.
fn meta_key(index: usize, rest: &str) -> Vec<u8> {
    format!("source/{index}/{rest}").into_bytes()
}

#[cfg(test)]
mod tests;
