//! A file source's log, `checkpoint/sources/<index>/<N>`: the files batch N reads,
//! with their sizes, written atomically when the batch is planned (before its
//! `offsets/<N>`). A batch re-run after a crash reads exactly these files, and refuses
//! to when one is gone or changed. Old entries go with the checkpoint's retention.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use crate::fsutil::{read_json, write_atomic};

/// Version of the log entries' format.
const VERSION: u32 = 1;

/// One file a batch reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct LoggedFile {
    /// Its name in the source directory.
    pub name: String,
    /// Its size in bytes when the batch was planned.
    pub size: u64,
}

/// One batch's entry.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    version: u32,
    batch_id: u64,
    files: Vec<LoggedFile>,
}

/// The log of one file source.
pub(super) struct FileSourceLog {
    dir: PathBuf,
}

impl FileSourceLog {
    /// The log of source number `index` in `checkpoint`.
    pub fn new(checkpoint: &Path, index: usize) -> Self {
        Self { dir: checkpoint.join("sources").join(index.to_string()) }
    }

    /// Records the files batch `batch_id` reads.
    pub fn write(&self, batch_id: u64, files: Vec<LoggedFile>) -> Result<()> {
        let entry = Entry { version: VERSION, batch_id, files };
        let mut text = serde_json::to_string_pretty(&entry)?;
        text.push('\n');
        write_atomic(&self.dir.join(batch_id.to_string()), text.as_bytes())
    }

    /// The files batch `batch_id` was planned to read.
    pub fn read(&self, batch_id: u64) -> Result<Vec<LoggedFile>> {
        let path = self.dir.join(batch_id.to_string());
        let Some(entry) = read_json::<Entry>(&path, "a file source log entry")? else {
            bail!(
                "{} is missing: it lists the files batch {batch_id} was planned to read; restore it or start from a new checkpoint",
                path.display()
            );
        };
        if entry.version != VERSION || entry.batch_id != batch_id {
            bail!(
                "{} holds format version {} for batch {} (this eddy reads version {VERSION}, batch {batch_id} expected)",
                path.display(),
                entry.version,
                entry.batch_id
            );
        }
        Ok(entry.files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_a_missing_one_says_what_to_do() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = FileSourceLog::new(dir.path(), 1);
        let files = vec![LoggedFile { name: "a.jsonl".into(), size: 12 }];
        log.write(3, files.clone()).expect("written");
        assert!(dir.path().join("sources/1/3").is_file());
        assert_eq!(log.read(3).expect("read"), files);
        let missing = format!("{:#}", log.read(4).expect_err("no entry"));
        assert!(missing.contains("the files batch 4 was planned to read; restore it"), "{missing}");
    }
}
