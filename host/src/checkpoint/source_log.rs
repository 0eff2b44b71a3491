//! A file source's log, `sources/<index>/<N>`: the files batch N reads, with their
//! sizes, written when the batch is planned (before its `offsets/<N>`). A batch re-run
//! after a crash reads exactly these files, and refuses to when one is gone or changed.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::record_log::RecordLog;

/// One file a batch reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedFile {
    /// Its name in the source directory.
    pub name: String,
    /// Its size in bytes when the batch was planned.
    pub size: u64,
}

/// One batch's entry.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    batch_id: u64,
    files: Vec<LoggedFile>,
}

/// The log of one file source.
#[derive(Clone, Debug)]
pub struct SourceLog {
    log: RecordLog,
}

impl SourceLog {
    pub(super) fn new(log: RecordLog) -> Self {
        Self { log }
    }

    /// The records underneath.
    pub fn log(&self) -> &RecordLog {
        &self.log
    }

    /// Records the files batch `batch_id` reads.
    pub fn write(&self, batch_id: u64, files: Vec<LoggedFile>) -> Result<()> {
        self.log.write(batch_id, &Entry { batch_id, files })
    }

    /// The files batch `batch_id` was planned to read.
    pub fn read(&self, batch_id: u64) -> Result<Vec<LoggedFile>> {
        Ok(self.log.read_planned(batch_id, "the files", |entry: &Entry| entry.batch_id)?.files)
    }
}

#[cfg(test)]
mod tests {
    use super::super::CheckpointDir;
    use super::*;

    #[test]
    fn entries_round_trip_and_a_missing_one_says_what_to_do() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = CheckpointDir::new(dir.path()).source_log(1);
        let files = vec![LoggedFile { name: "a.jsonl".into(), size: 12 }];
        log.write(3, files.clone()).expect("written");
        assert!(dir.path().join("sources/1/3").is_file());
        assert_eq!(log.read(3).expect("read"), files);
        let missing = format!("{:#}", log.read(4).expect_err("no entry"));
        assert!(missing.contains("the files batch 4 was planned to read; restore it"), "{missing}");
    }
}
