//! A per-batch record log: one JSON file per batch id in one directory, each written
//! atomically (a reader sees the old file or the whole new one), read back with its
//! format version checked, listed by id and pruned by id. The offsets, commits, sink
//! manifests, source logs and progress records are all such logs.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::util::fs::write_atomic;

/// Version of the checkpoint's record formats.
pub const FORMAT_VERSION: u32 = 1;

/// The records of one log.
#[derive(Clone, Debug)]
pub struct RecordLog {
    dir: PathBuf,
    suffix: &'static str,
    versioned: bool,
    what: &'static str,
}

impl RecordLog {
    /// A log of versioned records named `<batchId>` in `dir`; `what` names a record in
    /// errors ("an offsets record").
    pub(super) fn versioned(dir: PathBuf, what: &'static str) -> Self {
        Self { dir, suffix: "", versioned: true, what }
    }

    /// A log of records named `<batchId><suffix>` whose format has no version field
    /// (the progress records keep Spark's shape).
    pub(super) fn plain(dir: PathBuf, suffix: &'static str, what: &'static str) -> Self {
        Self { dir, suffix, versioned: false, what }
    }

    /// The log's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of batch `batch_id`'s record.
    pub fn path_of(&self, batch_id: u64) -> PathBuf {
        self.dir.join(format!("{batch_id}{}", self.suffix))
    }

    /// Writes batch `batch_id`'s record, replacing an earlier one (a replayed batch).
    pub fn write<T: Serialize>(&self, batch_id: u64, record: &T) -> Result<()> {
        let path = self.path_of(batch_id);
        if self.versioned { write_versioned(&path, record) } else { write_json(&path, record) }
    }

    /// Batch `batch_id`'s record, `None` when it has none.
    pub fn read<T: DeserializeOwned>(&self, batch_id: u64) -> Result<Option<T>> {
        let path = self.path_of(batch_id);
        if self.versioned { read_versioned(&path, self.what) } else { read_json(&path, self.what) }
    }

    /// The record a batch was planned with, which must be there: a missing one is an
    /// error saying it lists `lists` and what to do; one whose `id_of` is another
    /// batch's is refused.
    pub fn read_planned<T: DeserializeOwned>(
        &self,
        batch_id: u64,
        lists: &str,
        id_of: impl Fn(&T) -> u64,
    ) -> Result<T> {
        let path = self.path_of(batch_id);
        let Some(record) = self.read::<T>(batch_id)? else {
            anyhow::bail!(
                "{} is missing: it lists {lists} batch {batch_id} was planned to read; restore it or start from a new checkpoint",
                path.display()
            );
        };
        if id_of(&record) != batch_id {
            anyhow::bail!("{} holds batch {}, not batch {batch_id}", path.display(), id_of(&record));
        }
        Ok(record)
    }

    /// Whether batch `batch_id` has a record.
    pub fn has(&self, batch_id: u64) -> bool {
        self.path_of(batch_id).exists()
    }

    /// The batch ids that have a record, in order (none when the directory is missing).
    pub fn ids(&self) -> Result<Vec<u64>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot list {}", self.dir.display())),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot list {}", self.dir.display()))?;
            let name = entry.file_name();
            let id = name
                .to_str()
                .and_then(|name| name.strip_suffix(self.suffix))
                .filter(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|id| id.parse::<u64>().ok());
            ids.extend(id);
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// Deletes the records of batches before `oldest_kept`; returns how many.
    pub fn retain_from(&self, oldest_kept: u64) -> Result<usize> {
        let mut removed = 0;
        for id in self.ids()?.into_iter().take_while(|id| *id < oldest_kept) {
            let path = self.path_of(id);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("cannot delete {}", path.display()));
                }
                _ => removed += 1,
            }
        }
        Ok(removed)
    }
}

/// A record with the format version in front of its own fields.
#[derive(Serialize)]
struct Versioned<'a, T> {
    version: u32,
    #[serde(flatten)]
    record: &'a T,
}

/// Writes `record` to `path` atomically as pretty JSON with `"version"` first.
pub fn write_versioned<T: Serialize>(path: &Path, record: &T) -> Result<()> {
    write_json(path, &Versioned { version: FORMAT_VERSION, record })
}

/// Reads the versioned record at `path` (`None` when there is none), refusing another
/// format version than this eddy's; `what` names it in errors.
pub fn read_versioned<T: DeserializeOwned>(path: &Path, what: &str) -> Result<Option<T>> {
    let Some(value) = read_json::<serde_json::Value>(path, what)? else { return Ok(None) };
    match value.get("version").and_then(serde_json::Value::as_u64) {
        Some(version) if version == u64::from(FORMAT_VERSION) => {}
        Some(version) => bail!("{} has format version {version}, this eddy reads {FORMAT_VERSION}", path.display()),
        None => bail!(
            "{} is not {what}: it has no format version; restore it or start from a new checkpoint",
            path.display()
        ),
    }
    let record = serde_json::from_value(value)
        .with_context(|| format!("{} is not {what}; restore it or start from a new checkpoint", path.display()))?;
    Ok(Some(record))
}

fn write_json<T: Serialize>(path: &Path, record: &T) -> Result<()> {
    let mut text = serde_json::to_string_pretty(record).context("cannot serialize a checkpoint record")?;
    text.push('\n');
    write_atomic(path, text.as_bytes())
}

/// Reads the JSON record at `path`, `None` when there is none.
fn read_json<T: DeserializeOwned>(path: &Path, what: &str) -> Result<Option<T>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let record = serde_json::from_str(&text)
        .with_context(|| format!("{} is not {what}; restore it or start from a new checkpoint", path.display()))?;
    Ok(Some(record))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Sample {
        batch_id: u64,
        note: String,
    }

    #[test]
    fn versioned_records_round_trip_with_the_version_first() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let log = RecordLog::versioned(dir.path().join("samples"), "a sample record");
        log.write(3, &Sample { batch_id: 3, note: "x".into() })?;
        let text = std::fs::read_to_string(dir.path().join("samples/3"))?;
        assert_eq!(text, "{\n  \"version\": 1,\n  \"batchId\": 3,\n  \"note\": \"x\"\n}\n");
        assert_eq!(log.read::<Sample>(3)?, Some(Sample { batch_id: 3, note: "x".into() }));
        assert_eq!(log.read::<Sample>(4)?, None);
        std::fs::write(log.path_of(5), "{\"version\": 2, \"batchId\": 5, \"note\": \"\"}")?;
        let error = format!("{:#}", log.read::<Sample>(5).expect_err("another version"));
        assert!(error.ends_with("samples/5 has format version 2, this eddy reads 1"), "{error}");
        std::fs::write(log.path_of(6), "{ not json")?;
        let error = format!("{:#}", log.read::<Sample>(6).expect_err("corrupt"));
        assert!(error.contains("samples/6 is not a sample record; restore it"), "{error}");
        Ok(())
    }

    #[test]
    fn ids_skip_foreign_and_temporary_files_and_retention_deletes_the_oldest() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let log = RecordLog::plain(dir.path().join("records"), ".json", "a sample record");
        for id in [2, 0, 10, 1, 9] {
            log.write(id, &Sample { batch_id: id, note: String::new() })?;
        }
        std::fs::write(log.dir().join("notes.txt"), "not a record")?;
        std::fs::write(log.dir().join(".3.json.123-0.tmp"), "{")?;
        std::fs::write(log.dir().join(".json"), "{}")?;
        assert_eq!(log.ids()?, vec![0, 1, 2, 9, 10]);
        assert_eq!(log.retain_from(9)?, 3);
        assert_eq!(log.ids()?, vec![9, 10]);
        assert!(log.has(9) && !log.has(2));
        assert!(RecordLog::plain(dir.path().join("missing"), "", "x").ids()?.is_empty());
        Ok(())
    }
}
