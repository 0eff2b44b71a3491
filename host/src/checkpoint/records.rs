//! The records of the batch protocol: `offsets/<N>` says what batch N will read (per
//! source end offsets), its processing time and its watermark, written *before* the
//! batch runs; `sinks/<i>/<N>` says the sink published it; `commits/<N>` says its
//! state is committed; `metadata` says who the query is.
//!
//! After a crash, a batch with an offsets record but no committed state is re-run
//! from that record — the same input, the same time, the same watermark — so the
//! sink and the state agree and the output is byte-identical.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::record_log::{read_versioned, write_versioned};

/// What batch N was planned as (`offsets/<N>`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OffsetsRecord {
    /// The batch id.
    pub batch_id: u64,
    /// The batch's processing time (microseconds since the epoch).
    pub batch_timestamp_us: i64,
    /// The watermark the batch runs with.
    pub watermark_us: Option<i64>,
    /// Per source (in spec order), where the batch ends (`null`: nothing from it).
    pub end_offsets: Vec<serde_json::Value>,
    /// Each static table's fingerprint (by name) as the batch read it: a re-run of the
    /// batch refuses tables that changed since (absent in records of earlier eddys).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub static_tables: BTreeMap<String, String>,
}

/// That batch N committed (`commits/<N>`), with the watermark for the next batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitRecord {
    /// The batch id.
    pub batch_id: u64,
    /// The watermark batch N + 1 runs with.
    pub next_watermark_us: Option<i64>,
}

/// That a sink published batch N (`sinks/<i>/<N>`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SinkManifest {
    /// The batch id.
    pub batch_id: u64,
    /// The sink's description, e.g. `FileSink[/out]`.
    pub sink: String,
    /// How many rows it published.
    pub num_output_rows: u64,
}

/// The checkpoint's `metadata` file: who the query is and what it was started with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// The query's id, stable across restarts.
    pub id: String,
    /// A hash of what the pipeline's state depends on (sources' schemas, key columns,
    /// key-group count), in hex.
    pub pipeline_fingerprint: String,
    /// How many key groups keys hash into.
    pub key_groups: u16,
    /// When the checkpoint was created (ISO 8601, UTC).
    pub created: String,
    /// What each source reads, in spec order ([`SourceSpec::identity`]): sources keep
    /// their progress by position, so a source may not move (empty: not recorded).
    ///
    /// [`SourceSpec::identity`]: crate::pipeline::SourceSpec::identity
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
}

impl Metadata {
    /// Reads the metadata file at `path` (None for a new query).
    pub fn read(path: &Path) -> Result<Option<Self>> {
        read_versioned(path, "an eddy checkpoint's metadata")
    }

    /// Records the pipeline a query runs with — once its state was found compatible —
    /// creating the metadata of a new query (with id `new_id`) or updating the
    /// fingerprint and key-group count of an existing one.
    pub fn record(
        path: &Path,
        existing: Option<Self>,
        new_id: &str,
        fingerprint: String,
        key_groups: u16,
        sources: Vec<String>,
    ) -> Result<Self> {
        let metadata = match existing {
            Some(metadata)
                if metadata.pipeline_fingerprint == fingerprint
                    && metadata.key_groups == key_groups
                    && metadata.sources == sources =>
            {
                return Ok(metadata);
            }
            Some(metadata) => {
                crate::log::info(&format!("the pipeline changed compatibly since {} was written", path.display()));
                Metadata { pipeline_fingerprint: fingerprint, key_groups, sources, ..metadata }
            }
            None => Metadata {
                id: new_id.to_string(),
                pipeline_fingerprint: fingerprint,
                key_groups,
                created: crate::util::format_micros_iso(crate::util::now_micros()),
                sources,
            },
        };
        write_versioned(path, &metadata)?;
        Ok(metadata)
    }
}

/// Refuses `current` sources (identities in spec order) when one the checkpoint
/// recorded (`recorded`) now stands at another position: each source's progress is
/// kept by its position, so a moved source would take another's. Sources added at the
/// end, or changed in place, are accepted.
pub fn check_source_order(recorded: &[String], current: &[String], checkpoint: &Path) -> Result<()> {
    for (index, identity) in current.iter().enumerate() {
        if recorded.get(index) == Some(identity) {
            continue;
        }
        if let Some(before) = recorded.iter().position(|r| r == identity) {
            anyhow::bail!(
                "the checkpoint {} recorded [[source]] {before} as \"{identity}\", which is now [[source]] {index}: \
                 sources keep their progress by position, so reordering [[source]] entries is an incompatible change. \
                 Restore their order (add new sources at the end), or start from a new checkpoint",
                checkpoint.display()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_that_moved_is_refused_and_one_added_at_the_end_is_not() {
        let recorded = vec!["kafka topics=a".to_string(), "json /in".to_string()];
        let dir = Path::new("/cp");
        assert!(check_source_order(&recorded, &recorded, dir).is_ok());
        let added = vec![recorded[0].clone(), recorded[1].clone(), "rate".to_string()];
        assert!(check_source_order(&recorded, &added, dir).is_ok(), "a source added at the end");
        let changed = vec!["kafka topics=a,b".to_string(), recorded[1].clone()];
        assert!(check_source_order(&recorded, &changed, dir).is_ok(), "a source changed in place");
        assert!(check_source_order(&[], &added, dir).is_ok(), "nothing recorded yet");
        let swapped = vec![recorded[1].clone(), recorded[0].clone()];
        let error = check_source_order(&recorded, &swapped, dir).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("recorded [[source]] 1 as \"json /in\", which is now [[source]] 0"), "{error}");
        let removed = vec![recorded[1].clone()];
        assert!(check_source_order(&recorded, &removed, dir).is_err(), "a source removed before another moves it");
    }

    #[test]
    fn metadata_is_created_once_and_keeps_the_query_id() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("metadata");
        assert_eq!(Metadata::read(&path).expect("no file yet"), None);
        let first = Metadata::record(&path, None, "q1", "abc".into(), 128, vec![]).expect("created");
        let read = Metadata::read(&path).expect("read");
        assert_eq!(read.as_ref(), Some(&first));
        assert_eq!(first.id, "q1");
        let again = Metadata::record(&path, read, "q2", "abc".into(), 128, vec![]).expect("kept");
        assert_eq!(first, again);
        let changed = Metadata::record(&path, Some(again), "q3", "def".into(), 128, vec![]).expect("updated");
        assert_eq!((changed.id, changed.pipeline_fingerprint.as_str()), (first.id, "def"));
        let text = std::fs::read_to_string(&path).expect("file");
        assert!(text.starts_with("{\n  \"version\": 1,\n"), "{text}");
        assert!(text.contains("\"pipelineFingerprint\": \"def\""), "{text}");
    }
}
