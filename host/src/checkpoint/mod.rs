//! The checkpoint: every file a query keeps between runs, named in one place.
//!
//! ```text
//! <checkpoint>/
//!   metadata              who the query is (id, pipeline fingerprint, key groups)
//!   offsets/<N>           what batch N reads, its time and watermark (before it runs)
//!   sources/<i>/<N>       what source i reads in batch N (its files, or Kafka offset ranges)
//!   sinks/<i>/intents/<N> where a Kafka sink i starts writing batch N (before it writes)
//!   sinks/<i>/<N>         that sink i published batch N
//!   commits/<N>           that batch N's state is committed
//!   progress/<N>.json     batch N's progress record (Spark's field names)
//!   state/store/          the RocksDB store (state, timers, change log, source progress)
//!   state/snapshots/<N>/  the store as of batch N
//!   state/_schema         every operator's state schema, for people and tools
//! ```
//!
//! The engine keeps the protocol (when to plan, publish, commit); this room keeps the
//! files: where they are, their format and version, and how long they are kept.

mod partition_log;
mod progress_log;
mod progress_record;
mod record_log;
mod records;
mod source_log;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub use partition_log::{PartitionLog, PartitionRange};
pub use progress_log::{FOLLOW_POLL, Follower, ProgressLog};
pub use progress_record::{
    EventTimeProgress, HotKey, QueryProgress, SinkProgress, SourceProgress, StateOperatorProgress, TopKeys,
    rows_per_second,
};
pub use record_log::{FORMAT_VERSION, RecordLog};
pub use records::{CommitRecord, Metadata, OffsetsRecord, SinkManifest, check_source_order};
pub use source_log::{LoggedFile, SourceLog};

/// A query's checkpoint directory.
#[derive(Clone, Debug)]
pub struct CheckpointDir {
    root: PathBuf,
}

impl CheckpointDir {
    /// The checkpoint at `root` (nothing is created until written).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The checkpoint's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The `metadata` file.
    pub fn metadata_file(&self) -> PathBuf {
        self.root.join("metadata")
    }

    /// The offsets log: what each batch reads, written before it runs.
    pub fn offsets(&self) -> RecordLog {
        RecordLog::versioned(self.root.join("offsets"), "an offsets record")
    }

    /// The commits log: which batches' state is committed.
    pub fn commits(&self) -> RecordLog {
        RecordLog::versioned(self.root.join("commits"), "a commit record")
    }

    /// Sink `index`'s manifests: which batches it published.
    pub fn sink_manifests(&self, index: usize) -> RecordLog {
        RecordLog::versioned(self.sinks_dir().join(index.to_string()), "a sink manifest")
    }

    /// Source `index`'s log: what each batch reads from it (file sources).
    pub fn source_log(&self, index: usize) -> SourceLog {
        SourceLog::new(RecordLog::versioned(self.sources_dir().join(index.to_string()), "a source log entry"))
    }

    /// Source `index`'s log when it is a Kafka source: the offset ranges each batch reads.
    pub fn partition_log(&self, index: usize) -> PartitionLog {
        PartitionLog::new(RecordLog::versioned(self.sources_dir().join(index.to_string()), "a source log entry"))
    }

    /// Sink `index`'s intents: where a Kafka sink's output partitions ended before it
    /// wrote each batch, so that a re-run finds what of the batch is already there.
    pub fn sink_intents(&self, index: usize) -> RecordLog {
        RecordLog::versioned(self.sinks_dir().join(index.to_string()).join("intents"), "a sink intent")
    }

    /// The progress records.
    pub fn progress(&self) -> ProgressLog {
        ProgressLog::new(RecordLog::plain(self.root.join("progress"), ".json", "a progress record"))
    }

    /// The working RocksDB store.
    pub fn store_dir(&self) -> PathBuf {
        self.state_dir().join("store")
    }

    /// The directory of the state snapshots (`<N>/`: the store as of batch N).
    pub fn snapshots_dir(&self) -> PathBuf {
        self.state_dir().join("snapshots")
    }

    /// Where batch N's snapshot goes.
    pub fn snapshot_of(&self, batch_id: u64) -> PathBuf {
        self.snapshots_dir().join(batch_id.to_string())
    }

    /// The human-readable copy of the operators' state schemas.
    pub fn schema_file(&self) -> PathBuf {
        self.state_dir().join("_schema")
    }

    fn state_dir(&self) -> PathBuf {
        self.root.join("state")
    }

    fn sources_dir(&self) -> PathBuf {
        self.root.join("sources")
    }

    fn sinks_dir(&self) -> PathBuf {
        self.root.join("sinks")
    }

    /// The batch ids that have a snapshot, oldest first.
    pub fn snapshot_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = numbered_entries(&self.snapshots_dir()).into_iter().map(|(id, _)| id).collect();
        ids.sort_unstable();
        ids
    }

    /// Deletes what the checkpoint no longer needs once batch `newest` committed and
    /// the newest `keep` batches are retained: the older records of every per-batch log
    /// and the snapshots no retained batch needs. Returns the first batch whose state
    /// changes must still be kept (every retained batch can be rebuilt from a snapshot
    /// and the changes after it).
    pub fn retain(&self, newest: u64, keep: u64) -> Result<u64> {
        let oldest_kept = newest.saturating_add(1).saturating_sub(keep);
        for log in self.per_batch_logs() {
            log.retain_from(oldest_kept)?;
        }
        let ids = self.snapshot_ids();
        let base = ids.iter().copied().filter(|id| *id <= oldest_kept).max();
        for id in ids.into_iter().filter(|id| base.is_some_and(|base| *id < base)) {
            let path = self.snapshot_of(id);
            std::fs::remove_dir_all(&path).with_context(|| format!("cannot delete snapshot {}", path.display()))?;
        }
        Ok(base.map_or(oldest_kept, |base| (base + 1).min(oldest_kept)))
    }

    fn per_batch_logs(&self) -> Vec<RecordLog> {
        let mut logs = vec![self.offsets(), self.commits(), self.progress().log().clone()];
        for (index, _) in numbered_entries(&self.sinks_dir()) {
            logs.push(self.sink_manifests(index as usize));
            logs.push(self.sink_intents(index as usize));
        }
        for (index, _) in numbered_entries(&self.sources_dir()) {
            logs.push(self.source_log(index as usize).log().clone());
        }
        logs
    }

    /// Deletes what writes interrupted by a crash left in the checkpoint (temporary
    /// files and half-made snapshots). Call it while holding the store.
    pub fn remove_interrupted_writes(&self) -> Result<()> {
        let mut dirs = vec![self.root.clone(), self.state_dir(), self.snapshots_dir()];
        dirs.extend(self.per_batch_logs().iter().map(|log| log.dir().to_path_buf()));
        let mut removed = 0;
        for dir in dirs {
            removed += crate::util::fs::remove_leftovers(&dir)?;
        }
        if removed > 0 {
            crate::log::info(&format!(
                "removed {removed} leftovers of writes a crash interrupted in {}",
                self.root.display()
            ));
        }
        Ok(())
    }
}

/// The entries of `dir` named by a number, with their paths (none when it is missing).
fn numbered_entries(dir: &Path) -> Vec<(u64, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.flatten().filter_map(|entry| Some((entry.file_name().to_str()?.parse().ok()?, entry.path()))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_keeps_the_newest_batches_of_every_log_and_the_snapshot_they_need() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let checkpoint = CheckpointDir::new(dir.path());
        for id in 0..5 {
            let offsets = OffsetsRecord {
                batch_id: id,
                batch_timestamp_us: 1_000 + id as i64,
                watermark_us: Some(7),
                end_offsets: vec![serde_json::json!({"files": ["a"]}), serde_json::Value::Null],
                static_tables: Default::default(),
            };
            checkpoint.offsets().write(id, &offsets)?;
            checkpoint.commits().write(id, &CommitRecord { batch_id: id, next_watermark_us: Some(8) })?;
            checkpoint.source_log(0).write(id, vec![])?;
            checkpoint
                .sink_manifests(0)
                .write(id, &SinkManifest { batch_id: id, sink: "s".into(), num_output_rows: 1 })?;
            checkpoint.progress().log().write(id, &serde_json::json!({"batchId": id}))?;
        }
        for id in [0, 2, 4] {
            std::fs::create_dir_all(checkpoint.snapshot_of(id))?;
        }
        let record: OffsetsRecord = checkpoint.offsets().read(4)?.expect("present");
        assert_eq!((record.batch_timestamp_us, record.watermark_us, record.end_offsets.len()), (1_004, Some(7), 2));
        // Batches 3 and 4 are kept; snapshot 2 is the base they are rebuilt from.
        assert_eq!(checkpoint.retain(4, 2)?, 3);
        for name in ["offsets", "commits", "sources/0", "sinks/0"] {
            assert!(!dir.path().join(format!("{name}/2")).exists(), "{name}/2 deleted");
            assert!(dir.path().join(format!("{name}/3")).exists(), "{name}/3 kept");
        }
        assert!(!dir.path().join("progress/2.json").exists() && dir.path().join("progress/3.json").exists());
        assert_eq!(checkpoint.snapshot_ids(), vec![2, 4]);
        Ok(())
    }

    #[test]
    fn leftovers_of_interrupted_writes_are_removed_everywhere() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let checkpoint = CheckpointDir::new(dir.path());
        checkpoint.commits().write(0, &CommitRecord { batch_id: 0, next_watermark_us: None })?;
        checkpoint.source_log(1).write(0, vec![])?;
        let leftovers = [
            dir.path().join(".metadata.1-0.tmp"),
            dir.path().join("commits/.1.1-0.tmp"),
            dir.path().join("sources/1/.1.1-0.tmp"),
        ];
        for leftover in &leftovers {
            std::fs::write(leftover, "half")?;
        }
        std::fs::create_dir_all(checkpoint.snapshots_dir().join(".5.tmp"))?;
        checkpoint.remove_interrupted_writes()?;
        assert!(leftovers.iter().all(|path| !path.exists()));
        assert!(!checkpoint.snapshots_dir().join(".5.tmp").exists());
        assert!(checkpoint.commits().has(0));
        Ok(())
    }
}
