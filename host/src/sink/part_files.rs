//! The part-file directory shared by the file sinks: one `part-<batch:05>.<ext>` per
//! batch, published by an atomic rename so that a reader never sees half a batch, and
//! replaced atomically when a batch is replayed.
//!
//! A directory belongs to one query (a sink's, and a source's dead-letter directory
//! too): `_eddy_query` (JSON: the query id and its
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

/// What a directory owned by one query holds, for [`claim`] and its errors.
pub struct OwnedDir {
    /// What it is, e.g. "sink directory".
    pub what: &'static str,
    /// The spec key that names it, e.g. "[sink] path".
    pub key: &'static str,
    /// The prefix of the files a query writes there, e.g. "part-".
    pub file_prefix: &'static str,
}

/// A sink's directory of part files.
pub const SINK_DIR: OwnedDir = OwnedDir { what: "sink directory", key: "[sink] path", file_prefix: "part-" };

/// A source's directory of dead letters (`batch-<id>.jsonl`).
pub const DEAD_LETTER_DIR: OwnedDir =
    OwnedDir { what: "dead-letter directory", key: "the source's dead-letter-path", file_prefix: "batch-" };

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
        claim(&dir, owner, &SINK_DIR)?;
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

/// Makes sure `dir` (created if missing), a directory of `role`, is `owner`'s: its
/// marker names `owner`, or there is none yet and no file of an unknown writer (then
/// the marker is written).
pub fn claim(dir: &Path, owner: &SinkOwner, role: &OwnedDir) -> Result<()> {
    let OwnedDir { what, key, file_prefix } = role;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {what} {}", dir.display()))?;
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
                    "the {what} {} holds the output of another query (id {}, checkpoint {}); this query is {} \
                     (checkpoint {}). Point {key} at another directory, or delete {} if that output is no \
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
        && let Some(file) = first_file(dir, file_prefix)?
    {
        bail!(
            "the {what} {} already holds {} from another writer; this new query would replace such files. \
             Point {key} at an empty or new directory, or empty {} first",
            dir.display(),
            file,
            dir.display()
        );
    }
    let text = serde_json::to_string_pretty(owner)?;
    crate::util::fs::write_atomic(&marker, format!("{text}\n").as_bytes())
}

/// The name of a file in `dir` whose name starts with `prefix`, if any.
fn first_file(dir: &Path, prefix: &str) -> Result<Option<String>> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    Ok(entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).find(|n| n.starts_with(prefix)))
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
    fn a_dead_letter_directory_belongs_to_one_query_too() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let bad = dir.path().join("bad");
        claim(&bad, &owner("q1", true), &DEAD_LETTER_DIR)?;
        assert!(bad.join(OWNER_FILE).is_file(), "the marker is written with the directory");
        claim(&bad, &owner("q1", false), &DEAD_LETTER_DIR)?;
        let error = claim(&bad, &owner("q2", true), &DEAD_LETTER_DIR).err().map(|e| format!("{e:#}"));
        let error = error.unwrap_or_default();
        assert!(
            error.contains("the dead-letter directory")
                && error.contains("holds the output of another query (id q1")
                && error.contains("Point the source's dead-letter-path at another directory"),
            "{error}"
        );
        let unknown = dir.path().join("unknown");
        std::fs::create_dir(&unknown)?;
        std::fs::write(unknown.join("batch-00000.jsonl"), "{}\n")?;
        let error = claim(&unknown, &owner("q3", true), &DEAD_LETTER_DIR).err().map(|e| format!("{e:#}"));
        assert!(format!("{error:?}").contains("already holds batch-00000.jsonl from another writer"), "{error:?}");
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
