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
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    topic: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    partition: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<i64>,
    reason: &'a str,
    record: &'a str,
}

/// One letter as a JSON line (without the line ending).
fn encode(letter: &Letter) -> Result<Vec<u8>> {
    serde_json::to_vec(letter).context("cannot encode a dead letter")
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
                file: Some(file.display().to_string()),
                line: Some(record.line),
                topic: None,
                partition: None,
                offset: None,
                reason: &record.reason,
                record: &record.record,
            };
            let line = encode(&letter)?;
            self.push(line);
        }
        Ok(())
    }

    /// Adds a bad Kafka record of `topic` `partition` at `offset`.
    pub fn add_kafka(&mut self, topic: &str, partition: i32, offset: i64, record: &BadRecord) -> Result<()> {
        let letter = Letter {
            source: &self.source,
            file: None,
            line: None,
            topic: Some(topic),
            partition: Some(partition),
            offset: Some(offset),
            reason: &record.reason,
            record: &record.record,
        };
        let line = encode(&letter)?;
        self.push(line);
        Ok(())
    }

    fn push(&mut self, line: Vec<u8>) {
        self.lines.extend_from_slice(&line);
        self.lines.push(b'\n');
        self.count += 1;
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
