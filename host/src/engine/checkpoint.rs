//! The checkpoint's batch logs: `offsets/<N>` records what batch N will read (per
//! source end offsets), its processing time and its watermark, written atomically
//! *before* the batch runs; `commits/<N>` is written once its state is committed.
//!
//! After a crash, a batch with an offsets record but no committed state is re-run
//! from that record — the same input, the same time, the same watermark — so the sink
//! (which replaces a part file it already wrote) and the state agree, and the output
//! is byte-identical. Old records beyond the retention are deleted.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::fsutil::{read_json, write_atomic};

/// Version of the records' format.
const VERSION: u32 = 1;

/// What batch N was planned as.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OffsetsRecord {
    /// The record format's version.
    pub version: u32,
    /// The batch id.
    pub batch_id: u64,
    /// The batch's processing time (microseconds since the epoch).
    pub batch_timestamp_us: i64,
    /// The watermark the batch runs with.
    pub watermark_us: Option<i64>,
    /// Per source (in spec order), where the batch ends (`null`: nothing from it).
    pub end_offsets: Vec<serde_json::Value>,
}

/// The checkpoint's `metadata` file: who the query is and what it was started with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// The record format's version.
    pub version: u32,
    /// The query's id, stable across restarts.
    pub id: String,
    /// A hash of what the pipeline's state depends on (sources' schemas, key columns,
    /// key-group count), in hex.
    pub pipeline_fingerprint: String,
    /// How many key groups keys hash into.
    pub key_groups: u16,
    /// When the checkpoint was created (ISO 8601, UTC).
    pub created: String,
}

impl Metadata {
    /// Reads `checkpoint/metadata` (None for a new query).
    pub fn read(checkpoint: &Path) -> Result<Option<Self>> {
        let path = checkpoint.join("metadata");
        let metadata: Option<Metadata> = read_json(&path, "an eddy checkpoint's metadata")?;
        check_version(&path, metadata.as_ref().map(|m| m.version))?;
        Ok(metadata)
    }

    /// Records the pipeline a query runs with — once its state was found compatible —
    /// creating the metadata of a new query (with a new id) or updating the
    /// fingerprint and key-group count of an existing one.
    pub fn record(checkpoint: &Path, existing: Option<Self>, fingerprint: String, key_groups: u16) -> Result<Self> {
        let path = checkpoint.join("metadata");
        let metadata = match existing {
            Some(metadata) if metadata.pipeline_fingerprint == fingerprint && metadata.key_groups == key_groups => {
                return Ok(metadata);
            }
            Some(metadata) => {
                crate::log::info(&format!("the pipeline changed compatibly since {} was written", path.display()));
                Metadata { pipeline_fingerprint: fingerprint, key_groups, ..metadata }
            }
            None => Metadata {
                version: VERSION,
                id: crate::progress::new_uuid_v4()?,
                pipeline_fingerprint: fingerprint,
                key_groups,
                created: crate::progress::format_micros_iso(crate::progress::now_micros()),
            },
        };
        metadata.write(&path)?;
        Ok(metadata)
    }

    fn write(&self, path: &Path) -> Result<()> {
        write_atomic(path, format!("{:#}\n", serde_json::to_value(self)?).as_bytes())
    }
}

/// The state snapshots of a checkpoint (`state/snapshots/<N>`: the store as of batch N).
pub struct Snapshots {
    dir: PathBuf,
}

impl Snapshots {
    /// The snapshots under `checkpoint`.
    pub fn new(checkpoint: &Path) -> Self {
        Self { dir: crate::state::paths::snapshots_dir(checkpoint) }
    }

    /// Where batch N's snapshot goes.
    pub fn path_of(&self, batch_id: u64) -> PathBuf {
        self.dir.join(batch_id.to_string())
    }

    /// The batch ids that have a snapshot, oldest first.
    pub fn ids(&self) -> Result<Vec<u64>> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Ok(Vec::new()) };
        let mut ids: Vec<u64> = entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str().and_then(|name| name.parse().ok()))
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// Deletes the snapshots no retained batch needs: those older than the newest
    /// snapshot at or before `oldest_kept`, which is returned (the change log must be
    /// kept from the batch after it).
    pub fn retain_from(&self, oldest_kept: u64) -> Result<Option<u64>> {
        let ids = self.ids()?;
        let base = ids.iter().copied().filter(|id| *id <= oldest_kept).max();
        for id in ids.into_iter().filter(|id| base.is_some_and(|base| *id < base)) {
            let path = self.path_of(id);
            std::fs::remove_dir_all(&path).with_context(|| format!("cannot delete snapshot {}", path.display()))?;
        }
        Ok(base)
    }
}

/// The per-batch logs of a checkpoint: `offsets/`, `commits/`, the sink's manifests
/// (`sinks/0/`) and, for retention, the sources' logs (`sources/<i>/`).
pub struct BatchLog {
    offsets: PathBuf,
    commits: PathBuf,
    sink: PathBuf,
    sources: PathBuf,
}

impl BatchLog {
    /// The logs under `checkpoint`.
    pub fn new(checkpoint: &Path) -> Self {
        Self {
            offsets: checkpoint.join("offsets"),
            commits: checkpoint.join("commits"),
            sink: checkpoint.join("sinks/0"),
            sources: checkpoint.join("sources"),
        }
    }

    /// Records batch N's plan before it runs.
    pub fn write_offsets(
        &self,
        batch_id: u64,
        timestamp_us: i64,
        watermark_us: Option<i64>,
        end_offsets: Vec<serde_json::Value>,
    ) -> Result<()> {
        let record =
            OffsetsRecord { version: VERSION, batch_id, batch_timestamp_us: timestamp_us, watermark_us, end_offsets };
        let mut text = serde_json::to_string_pretty(&record)?;
        text.push('\n');
        write_atomic(&self.offsets.join(batch_id.to_string()), text.as_bytes())
    }

    /// Batch N's plan, if one was recorded.
    pub fn read_offsets(&self, batch_id: u64) -> Result<Option<OffsetsRecord>> {
        let path = self.offsets.join(batch_id.to_string());
        let record: Option<OffsetsRecord> = read_json(&path, "an offsets record")?;
        check_version(&path, record.as_ref().map(|r| r.version))?;
        Ok(record)
    }

    /// Records that batch N committed, with the watermark for the next batch.
    pub fn write_commit(&self, batch_id: u64, next_watermark_us: Option<i64>) -> Result<()> {
        let text = serde_json::json!({"version": VERSION, "batchId": batch_id, "nextWatermarkUs": next_watermark_us});
        write_atomic(&self.commits.join(batch_id.to_string()), format!("{text:#}\n").as_bytes())
    }

    /// Records that the sink published batch N (`sinks/0/<N>`).
    pub fn write_sink_manifest(&self, batch_id: u64, sink: &str, rows: u64) -> Result<()> {
        let text = serde_json::json!({"version": VERSION, "batchId": batch_id, "sink": sink, "numOutputRows": rows});
        write_atomic(&self.sink.join(batch_id.to_string()), format!("{text:#}\n").as_bytes())
    }

    /// Whether the sink already published batch N.
    pub fn sink_has(&self, batch_id: u64) -> bool {
        self.sink.join(batch_id.to_string()).exists()
    }

    /// Deletes the records of batches older than the newest `keep`.
    pub fn retain_last(&self, newest: u64, keep: u64) -> Result<()> {
        let oldest_kept = newest.saturating_add(1).saturating_sub(keep);
        let source_logs = std::fs::read_dir(&self.sources).into_iter().flatten().flatten().map(|entry| entry.path());
        let logs = [self.offsets.clone(), self.commits.clone(), self.sink.clone()].into_iter().chain(source_logs);
        for dir in logs {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let old = entry
                    .file_name()
                    .to_str()
                    .and_then(|name| name.parse::<u64>().ok())
                    .is_some_and(|id| id < oldest_kept);
                if old {
                    std::fs::remove_file(entry.path())
                        .with_context(|| format!("cannot delete {}", entry.path().display()))?;
                }
            }
        }
        Ok(())
    }
}

/// Refuses a record of another format version than this eddy's.
fn check_version(path: &Path, version: Option<u32>) -> Result<()> {
    match version {
        Some(version) if version != VERSION => {
            anyhow::bail!("{} has format version {version}, this eddy reads {VERSION}", path.display())
        }
        _ => Ok(()),
    }
}

/// Deletes what writes interrupted by a crash left in the checkpoint's directories
/// (temporary files and half-made snapshots). Call it while holding the store.
pub fn remove_interrupted_writes(checkpoint: &Path) -> Result<()> {
    let sources = std::fs::read_dir(checkpoint.join("sources")).into_iter().flatten().flatten().map(|e| e.path());
    let fixed = ["", "offsets", "commits", "sinks/0", "progress", "state", "state/snapshots"];
    let mut removed = 0;
    for dir in fixed.iter().map(|sub| checkpoint.join(sub)).chain(sources) {
        removed += crate::fsutil::remove_leftovers(&dir)?;
    }
    if removed > 0 {
        crate::log::info(&format!(
            "removed {removed} leftovers of writes a crash interrupted in {}",
            checkpoint.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_created_once_and_keeps_the_query_id() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert_eq!(Metadata::read(dir.path()).expect("no file yet"), None);
        let first = Metadata::record(dir.path(), None, "abc".into(), 128).expect("created");
        let read = Metadata::read(dir.path()).expect("read");
        assert_eq!(read.as_ref(), Some(&first));
        let again = Metadata::record(dir.path(), read, "abc".into(), 128).expect("kept");
        assert_eq!(first, again);
        let changed = Metadata::record(dir.path(), Some(again), "def".into(), 128).expect("updated");
        assert_eq!((changed.id, changed.pipeline_fingerprint.as_str()), (first.id, "def"));
        let text = std::fs::read_to_string(dir.path().join("metadata")).expect("file");
        assert!(text.contains("\"pipelineFingerprint\": \"def\""), "{text}");
    }

    #[test]
    fn records_round_trip_and_old_ones_are_deleted() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = BatchLog::new(dir.path());
        for id in 0..5 {
            log.write_offsets(
                id,
                1_000 + id as i64,
                Some(7),
                vec![serde_json::json!({"files": ["a"]}), serde_json::Value::Null],
            )
            .expect("offsets");
            log.write_commit(id, Some(8)).expect("commit");
            crate::fsutil::write_atomic(&dir.path().join(format!("sources/0/{id}")), b"{}").expect("source log");
        }
        let record = log.read_offsets(4).expect("readable").expect("present");
        assert_eq!((record.batch_timestamp_us, record.watermark_us, record.end_offsets.len()), (1_004, Some(7), 2));
        log.retain_last(4, 2).expect("retention");
        assert!(log.read_offsets(2).expect("readable").is_none());
        assert!(log.read_offsets(3).expect("readable").is_some());
        assert!(!dir.path().join("commits/2").exists() && dir.path().join("commits/3").exists());
        assert!(!dir.path().join("sources/0/2").exists() && dir.path().join("sources/0/3").exists());
    }
}
