//! Reading a batch's offset ranges into records: values one after another in one
//! buffer, metadata beside them, each partition's records in offset order and the
//! partitions in the order planned (so a re-run decodes byte-identical input).
//!
//! A batch holds at most max-bytes-per-trigger bytes of records (keys, values and
//! headers; always at least one record): a new batch's reading stops before the
//! record that would pass it, and its ranges end where reading stopped — they are
//! logged only then, so a re-run reads the same bounded records. A logged batch that
//! holds more than the budget (planned with a larger one) is refused before it is
//! held whole, naming the way out.

use std::ops::ControlFlow;

use anyhow::{Result, bail};
use rdkafka::consumer::BaseConsumer;
use rdkafka::message::Message;

use super::plan::Lost;
use crate::checkpoint::PartitionRange;
use crate::kafka::{EddyContext, Redactor, ScanRange, headers, scan};

/// What is kept of a record: its metadata and where its value is in [`Records::values`].
#[derive(Clone, Debug)]
pub(super) struct RecordMeta {
    /// Index into the batch's ranges.
    pub range: usize,
    pub offset: i64,
    /// Milliseconds since the epoch, when the record has a timestamp.
    pub timestamp_ms: Option<i64>,
    pub key: Option<Vec<u8>>,
    /// Header keys and values as bytes, when the schema asks for them.
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
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

/// How much a batch may hold.
#[derive(Clone, Copy, Debug)]
pub(super) enum Budget {
    /// A new batch: stop before the record that would pass this many bytes.
    Plan(Option<u64>),
    /// A logged batch read again: refuse it when it holds more than this many bytes.
    Replay(Option<u64>),
}

impl Budget {
    fn limit(self) -> Option<u64> {
        match self {
            Budget::Plan(limit) | Budget::Replay(limit) => limit,
        }
    }
}

/// Reads `ranges` with `consumer` for source `source` within `budget`; returns the
/// records and where each range's reading ended (its planned end when read whole).
/// A replayed batch's starts may since have been deleted.
pub(super) fn read_ranges(
    consumer: &BaseConsumer<EddyContext>,
    redactor: &Redactor,
    ranges: &[PartitionRange],
    budget: Budget,
    wanted: Wanted,
    fail_on_data_loss: bool,
    source: &str,
) -> Result<(Records, Vec<i64>)> {
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
    let mut held: u64 = 0;
    let mut over_budget = false;
    let mut visit = |i: usize, message: &rdkafka::message::BorrowedMessage<'_>| {
        let raw_headers = headers(message);
        let size = record_size(message, &raw_headers);
        if let Some(limit) = budget.limit()
            && held > 0
            && held.saturating_add(size) > limit
        {
            over_budget = true;
            return ControlFlow::Break(());
        }
        held = held.saturating_add(size);
        let records = &mut per_range[i];
        let value = message.payload().map(|payload| {
            let start = records.values.len();
            records.values.extend_from_slice(payload);
            (start, records.values.len())
        });
        let kept_headers = if wanted.headers {
            raw_headers.iter().map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec))).collect()
        } else {
            Vec::new()
        };
        records.metas.push(RecordMeta {
            range: i,
            offset: message.offset(),
            timestamp_ms: message.timestamp().to_millis(),
            key: if wanted.keys { message.key().map(<[u8]>::to_vec) } else { None },
            headers: kept_headers,
            value,
        });
        ControlFlow::Continue(())
    };
    let ends = scan(
        consumer,
        redactor,
        &scan_ranges,
        matches!(budget, Budget::Replay(_)),
        &format!("source '{source}'"),
        &mut on_lost,
        &mut visit,
    )?;
    if let (Budget::Replay(Some(limit)), true) = (budget, over_budget) {
        bail!(
            "source '{source}': the batch logged before the restart holds more than max-bytes-per-trigger ({limit} bytes) of records, so it was not read again (it was planned with a larger budget). Nothing of it is committed. Either run it with a max-bytes-per-trigger (and memory) large enough, or plan it anew as described under \"A batch too large to run again\" in the README"
        );
    }
    let mut all = concat(per_range);
    all.lost = lost;
    Ok((all, ends))
}

/// The bytes a record brings into a batch: its value, key and headers.
fn record_size(message: &rdkafka::message::BorrowedMessage<'_>, headers: &[crate::kafka::RawHeader<'_>]) -> u64 {
    let header_bytes: usize = headers.iter().map(|h| h.key.len() + h.value.map_or(0, <[u8]>::len)).sum();
    (message.payload_len() + message.key().map_or(0, <[u8]>::len) + header_bytes) as u64
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
