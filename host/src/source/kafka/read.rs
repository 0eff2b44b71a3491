//! Reading a batch's offset ranges into records: values one after another in one
//! buffer, metadata beside them, each partition's records in offset order and the
//! partitions in the order planned (so a re-run decodes byte-identical input).

use anyhow::{Result, bail};
use rdkafka::consumer::BaseConsumer;
use rdkafka::message::{Headers, Message};

use super::plan::Lost;
use crate::checkpoint::PartitionRange;
use crate::kafka::{EddyContext, Redactor, ScanRange, scan};

/// What is kept of a record: its metadata and where its value is in [`Records::values`].
#[derive(Clone, Debug)]
pub(super) struct RecordMeta {
    /// Index into the batch's ranges.
    pub range: usize,
    pub offset: i64,
    /// Milliseconds since the epoch, when the record has a timestamp.
    pub timestamp_ms: Option<i64>,
    pub key: Option<Vec<u8>>,
    /// Header names and values, when the schema asks for them.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// The value's byte range in [`Records::values`] (`None`: a null value).
    pub value: Option<(usize, usize)>,
}

/// The records of a batch in range order (each partition's in offset order).
#[derive(Debug, Default)]
pub(super) struct Records {
    pub metas: Vec<RecordMeta>,
    /// Every value's bytes, one after another.
    pub values: Vec<u8>,
    /// Offsets deleted while they were being read (only when not failing on data loss).
    pub lost: Vec<Lost>,
}

/// What to keep of each record.
#[derive(Clone, Copy, Debug)]
pub(super) struct Wanted {
    pub keys: bool,
    pub headers: bool,
}

/// Reads `ranges` with `consumer` for source `source`; `replay`: the ranges were
/// planned before a crash (their starts may since have been deleted).
pub(super) fn read_ranges(
    consumer: &BaseConsumer<EddyContext>,
    redactor: &Redactor,
    ranges: &[PartitionRange],
    replay: bool,
    wanted: Wanted,
    fail_on_data_loss: bool,
    source: &str,
) -> Result<Records> {
    let scan_ranges: Vec<ScanRange> = ranges
        .iter()
        .map(|r| ScanRange { topic: r.topic.clone(), partition: r.partition, start: r.start, end: r.end })
        .collect();
    let mut per_range: Vec<Records> = ranges.iter().map(|_| Records::default()).collect();
    let mut lost = Vec::new();
    let mut on_lost = |i: usize, from: i64, to: i64| -> Result<()> {
        let gap = Lost { topic: ranges[i].topic.clone(), partition: ranges[i].partition, from, to, past_end: false };
        if fail_on_data_loss {
            bail!("source '{source}': {}; set fail-on-data-loss = false to skip them", gap.describe());
        }
        crate::log::warn(&format!("source '{source}': {}; skipped (fail-on-data-loss = false)", gap.describe()));
        lost.push(gap);
        Ok(())
    };
    let mut visit = |i: usize, message: &rdkafka::message::BorrowedMessage<'_>| {
        let records = &mut per_range[i];
        let value = message.payload().map(|payload| {
            let start = records.values.len();
            records.values.extend_from_slice(payload);
            (start, records.values.len())
        });
        let headers = match (wanted.headers, message.headers()) {
            (true, Some(headers)) => headers.iter().map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec))).collect(),
            _ => Vec::new(),
        };
        records.metas.push(RecordMeta {
            range: i,
            offset: message.offset(),
            timestamp_ms: message.timestamp().to_millis(),
            key: if wanted.keys { message.key().map(<[u8]>::to_vec) } else { None },
            headers,
            value,
        });
    };
    scan(consumer, redactor, &scan_ranges, replay, &format!("source '{source}'"), &mut on_lost, &mut visit)?;
    let mut all = concat(per_range);
    all.lost = lost;
    Ok(all)
}

/// The records of every range, one range after another.
fn concat(per_range: Vec<Records>) -> Records {
    let mut all = Records::default();
    for records in per_range {
        let base = all.values.len();
        all.values.extend_from_slice(&records.values);
        all.metas.extend(records.metas.into_iter().map(|mut meta| {
            meta.value = meta.value.map(|(start, end)| (start + base, end + base));
            meta
        }));
    }
    all
}
