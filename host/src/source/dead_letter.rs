//! Dead letters: the bad records a batch left out, one JSON line each, in
//! `<dir>/batch-<id>.jsonl`.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::decode::BadRecord;
use crate::util::fs::write_atomic;

/// The bad records of one batch of one source.
pub(super) struct DeadLetters {
    source: String,
    lines: Vec<u8>,
    count: u64,
}

/// One dead-letter line (field order as written).
#[derive(Serialize)]
struct Letter<'a> {
    source: &'a str,
    file: String,
    line: usize,
    reason: &'a str,
    record: &'a str,
}

impl DeadLetters {
    /// No bad records yet, for the source named `source`.
    pub fn new(source: &str) -> Self {
        Self { source: source.to_string(), lines: Vec::new(), count: 0 }
    }

    /// Adds the bad records of `file`.
    pub fn add(&mut self, file: &Path, records: &[BadRecord]) -> Result<()> {
        for record in records {
            let letter = Letter {
                source: &self.source,
                file: file.display().to_string(),
                line: record.line,
                reason: &record.reason,
                record: &record.record,
            };
            serde_json::to_writer(&mut self.lines, &letter).context("cannot encode a dead letter")?;
            self.lines.push(b'\n');
            self.count += 1;
        }
        Ok(())
    }

    /// How many bad records were added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Writes the batch's dead-letter file `dir/batch-<batch_id:05>.jsonl` atomically
    /// (a replayed batch rewrites the same file); nothing when there are no bad
    /// records.
    pub fn write(&self, dir: &Path, batch_id: u64) -> Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let path = dir.join(format!("batch-{batch_id:05}.jsonl"));
        write_atomic(&path, &self.lines)
            .with_context(|| format!("source '{}': cannot write dead letters to {}", self.source, path.display()))
    }
}
