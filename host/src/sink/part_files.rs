//! The part-file directory shared by the file sinks: one `part-<batch:05>.<ext>` per
//! batch, published by an atomic rename so that a reader never sees half a batch, and
//! replaced atomically when a batch is replayed.
//!
//! A directory belongs to one query: `_eddy_query` (JSON: the query id and its
//! checkpoint) is written when a query first writes there, and another query is
//! refused, so that a new checkpoint pointed at an old output directory cannot replace
//! its part files. On opening, what interrupted writes left (`.….tmp`) is removed.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// The owner marker's file name (a leading `_`: Spark, pandas and eddy's own sources
/// skip it when reading the directory).
pub const OWNER_FILE: &str = "_eddy_query";

/// The query that writes a sink's directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SinkOwner {
    /// The query's id (from its checkpoint's metadata).
    pub query_id: String,
    /// The query's checkpoint directory, to name it in errors.
    pub checkpoint: PathBuf,
    /// Whether the query has committed nothing yet (then part files of an unknown
    /// writer are refused too; a query that has committed adopts a directory it wrote
    /// before owner markers existed).
    #[serde(skip)]
    pub new_query: bool,
}

/// A directory of part files with one extension.
#[derive(Clone, Debug)]
pub struct PartFiles {
    dir: PathBuf,
    extension: &'static str,
    bytes_written: u64,
}

impl PartFiles {
    /// The part files with `extension` (no dot) in `dir` (created if missing), written by
    /// `owner`: refused when the directory belongs to another query.
    pub fn create(dir: PathBuf, extension: &'static str, owner: &SinkOwner) -> Result<Self> {
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create sink directory {}", dir.display()))?;
        claim(&dir, owner)?;
        crate::util::fs::remove_leftovers(&dir)?;
        Ok(Self { dir, extension, bytes_written: 0 })
    }

    /// The output directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file that holds batch `batch_id`.
    pub fn path_of(&self, batch_id: u64) -> PathBuf {
        self.dir.join(format!("part-{batch_id:05}.{}", self.extension))
    }

    /// Publishes `bytes` as batch `batch_id`'s part file: written to a temporary file
    /// in the same directory, synced, then renamed over any earlier version.
    pub fn publish(&mut self, batch_id: u64, bytes: &[u8]) -> Result<PathBuf> {
        let path = self.path_of(batch_id);
        crate::util::fs::write_atomic(&path, bytes)
            .with_context(|| format!("cannot publish batch {batch_id} to {}", path.display()))?;
        self.bytes_written += bytes.len() as u64;
        Ok(path)
    }

    /// The bytes of every part file published so far.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// How progress names this sink: `FileSink[<dir>]`, like Spark.
    pub fn description(&self) -> String {
        format!("FileSink[{}]", self.dir.display())
    }
}

/// Whether `rows` hold no row at all.
pub fn no_rows(rows: &[arrow::array::RecordBatch]) -> bool {
    rows.iter().all(|batch| batch.num_rows() == 0)
}

/// Makes sure `dir` is `owner`'s: its marker names `owner`, or there is none yet and no
/// part file of an unknown writer (then the marker is written).
fn claim(dir: &Path, owner: &SinkOwner) -> Result<()> {
    let marker = dir.join(OWNER_FILE);
    match std::fs::read(&marker) {
        Ok(raw) => {
            let recorded: SinkOwner = serde_json::from_slice(&raw).with_context(|| {
                format!(
                    "{} is not an eddy sink owner record; delete it if {} is yours",
                    marker.display(),
                    dir.display()
                )
            })?;
            if recorded.query_id != owner.query_id {
                bail!(
                    "the sink directory {} holds the output of another query (id {}, checkpoint {}); this query is {} \
                     (checkpoint {}). Point [sink] path at another directory, or delete {} if that output is no \
                     longer wanted",
                    dir.display(),
                    recorded.query_id,
                    recorded.checkpoint.display(),
                    owner.query_id,
                    owner.checkpoint.display(),
                    dir.display()
                );
            }
            return Ok(());
        }
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            return Err(error).with_context(|| format!("cannot read {}", marker.display()));
        }
        Err(_) => {}
    }
    if owner.new_query
        && let Some(part) = first_part_file(dir)?
    {
        bail!(
            "the sink directory {} already holds {} from another writer; this new query would replace such files. \
             Point [sink] path at an empty or new directory, or empty {} first",
            dir.display(),
            part,
            dir.display()
        );
    }
    let text = serde_json::to_string_pretty(owner)?;
    crate::util::fs::write_atomic(&marker, format!("{text}\n").as_bytes())
}

/// The name of a `part-*` file in `dir`, if any.
fn first_part_file(dir: &Path) -> Result<Option<String>> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    Ok(entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).find(|n| n.starts_with("part-")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(id: &str, new_query: bool) -> SinkOwner {
        SinkOwner { query_id: id.into(), checkpoint: PathBuf::from(format!("/cp/{id}")), new_query }
    }

    #[test]
    fn a_directory_belongs_to_the_query_that_first_wrote_it() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let out = dir.path().join("out");
        let mut parts = PartFiles::create(out.clone(), "jsonl", &owner("q1", true))?;
        parts.publish(0, b"{}\n")?;
        // The same query, restarted: fine.
        PartFiles::create(out.clone(), "jsonl", &owner("q1", false))?;
        // Another query (a new checkpoint pointed at the same output): refused, naming both.
        let error = PartFiles::create(out.clone(), "jsonl", &owner("q2", true)).err().map(|e| format!("{e:#}"));
        let expected = format!(
            "the sink directory {} holds the output of another query (id q1, checkpoint /cp/q1); this query is q2 \
             (checkpoint /cp/q2). Point [sink] path at another directory, or delete {} if that output is no longer wanted",
            out.display(),
            out.display()
        );
        assert_eq!(error, Some(expected));
        assert_eq!(std::fs::read_to_string(out.join("part-00000.jsonl"))?, "{}\n", "nothing replaced");
        Ok(())
    }

    #[test]
    fn a_new_query_refuses_part_files_of_an_unknown_writer_and_leftovers_are_removed() -> Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("part-00000.parquet"), "old")?;
        let error = PartFiles::create(dir.path().to_path_buf(), "parquet", &owner("q1", true)).err();
        assert!(format!("{error:?}").contains("already holds part-00000.parquet from another writer"), "{error:?}");
        // An existing query (written before owner markers existed) adopts its directory.
        std::fs::write(dir.path().join(".part-00001.parquet.77-0.tmp"), "half")?;
        PartFiles::create(dir.path().to_path_buf(), "parquet", &owner("q1", false))?;
        assert!(dir.path().join(OWNER_FILE).is_file());
        assert!(!dir.path().join(".part-00001.parquet.77-0.tmp").exists(), "an interrupted write's leftover");
        Ok(())
    }
}
