//! A Kafka source's log, `sources/<index>/<N>`: the offset range batch N reads from
//! each partition, written when the batch is planned (before its `offsets/<N>`). A
//! batch re-run after a crash reads exactly these ranges, whatever arrived since.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::record_log::RecordLog;

/// The records a batch reads from one partition: offsets `start..end`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRange {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The first offset read.
    pub start: i64,
    /// Where the batch stops: the first position at or past it ends the partition's
    /// part of the batch.
    pub end: i64,
    /// The partition's newest offset when the batch was planned (progress' backlog).
    pub latest: i64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    batch_id: u64,
    partitions: Vec<PartitionRange>,
}

/// The log of one Kafka source.
#[derive(Clone, Debug)]
pub struct PartitionLog {
    log: RecordLog,
}

impl PartitionLog {
    pub(super) fn new(log: RecordLog) -> Self {
        Self { log }
    }

    /// Records the ranges batch `batch_id` reads.
    pub fn write(&self, batch_id: u64, partitions: &[PartitionRange]) -> Result<()> {
        self.log.write(batch_id, &Entry { batch_id, partitions: partitions.to_vec() })
    }

    /// The ranges batch `batch_id` was planned to read.
    pub fn read(&self, batch_id: u64) -> Result<Vec<PartitionRange>> {
        Ok(self.log.read_planned(batch_id, "the offsets", |entry: &Entry| entry.batch_id)?.partitions)
    }
}
