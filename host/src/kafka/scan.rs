//! Reading offset ranges of partitions with an assigned consumer: the Kafka source
//! reads its batches this way and the Kafka sink the tail it may already have
//! written. A partition is done at the first position at or past its range's end —
//! positions, not record counts, because transaction markers and aborted records
//! occupy offsets a read_committed consumer never returns.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};

use super::client::{EddyContext, Redactor, watermarks};

/// How long a scan may make no progress before it fails.
const STALL_TIMEOUT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(10);

/// Offsets `start..end` of one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanRange {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The first offset read.
    pub start: i64,
    /// The end (exclusive).
    pub end: i64,
}

/// Reads every range, calling `visit(range index, record)` for each record in it, in
/// offset order per partition, until every range is read or `visit` breaks (the
/// record it was given is then not taken). Returns where each range's reading got
/// to: its end when read whole, otherwise the position after the last record taken
/// (or skipped as a transaction marker or an aborted record). When a range's next offsets were deleted (retention),
/// `on_lost(range index, position, oldest kept)` decides: an error stops the scan,
/// `Ok` skips to the oldest offset kept. A deleted position is found when the broker
/// reports it, and — with `recheck_starts`, for ranges planned earlier (a re-run after
/// a crash) — by asking each partition's oldest offset before reading. `label` names
/// the reader in errors.
pub fn scan(
    consumer: &BaseConsumer<EddyContext>,
    redactor: &Redactor,
    ranges: &[ScanRange],
    recheck_starts: bool,
    label: &str,
    on_lost: &mut dyn FnMut(usize, i64, i64) -> Result<()>,
    visit: &mut dyn FnMut(usize, &BorrowedMessage<'_>) -> ControlFlow<()>,
) -> Result<Vec<i64>> {
    let mut position: Vec<i64> = ranges.iter().map(|range| range.start).collect();
    let index: HashMap<(&str, i32), usize> =
        ranges.iter().enumerate().map(|(i, range)| ((range.topic.as_str(), range.partition), i)).collect();
    let done = |position: &[i64], i: usize| position[i] >= ranges[i].end;
    if (0..ranges.len()).all(|i| done(&position, i)) {
        return Ok(ends_reached(ranges, &position));
    }
    let open: Vec<usize> = (0..ranges.len()).filter(|i| recheck_starts && !done(&position, *i)).collect();
    for i in open {
        let (low, _) = watermarks(consumer, redactor, &ranges[i].topic, ranges[i].partition)?;
        if low > position[i] {
            on_lost(i, position[i], low.min(ranges[i].end))?;
            position[i] = low.min(ranges[i].end);
        }
    }
    assign(consumer, redactor, ranges, &position)?;
    let mut last_progress = Instant::now();
    while !(0..ranges.len()).all(|i| done(&position, i)) {
        match consumer.poll(POLL) {
            Some(Ok(message)) => {
                let Some(&i) = index.get(&(message.topic(), message.partition())) else { continue };
                let offset = message.offset();
                if offset < position[i] || done(&position, i) {
                    continue;
                }
                if offset < ranges[i].end && visit(i, &message).is_break() {
                    break;
                }
                position[i] = offset.saturating_add(1);
                last_progress = Instant::now();
            }
            Some(Err(KafkaError::PartitionEOF(_))) | None => {
                if catch_up(consumer, ranges, &index, &mut position) {
                    last_progress = Instant::now();
                }
            }
            // With auto.offset.reset=error librdkafka reports a deleted position as
            // AutoOffsetReset (older brokers' answer: OffsetOutOfRange).
            Some(Err(KafkaError::MessageConsumption(
                RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange,
            ))) => {
                let mut moved = false;
                let open: Vec<usize> = (0..ranges.len()).filter(|i| !done(&position, *i)).collect();
                for i in open {
                    let (low, _) = watermarks(consumer, redactor, &ranges[i].topic, ranges[i].partition)?;
                    if low > position[i] {
                        on_lost(i, position[i], low.min(ranges[i].end))?;
                        position[i] = low.min(ranges[i].end);
                        moved = true;
                    }
                }
                if moved {
                    assign(consumer, redactor, ranges, &position)?;
                    last_progress = Instant::now();
                }
            }
            Some(Err(error)) => crate::log::debug(&format!("{label}: {}", redactor.clean(&error.to_string()))),
        }
        if last_progress.elapsed() > STALL_TIMEOUT {
            let i = (0..ranges.len()).find(|i| !done(&position, *i)).unwrap_or(0);
            let range = &ranges[i];
            bail!(
                "{label}: topic '{}' partition {}: reading stopped at offset {} before the end {} for {} s; check that the brokers are reachable",
                range.topic,
                range.partition,
                position[i],
                range.end,
                STALL_TIMEOUT.as_secs()
            );
        }
    }
    let _ = consumer.unassign();
    Ok(ends_reached(ranges, &position))
}

/// Each range's position, never past its end.
fn ends_reached(ranges: &[ScanRange], position: &[i64]) -> Vec<i64> {
    ranges.iter().zip(position).map(|(range, at)| (*at).min(range.end)).collect()
}

/// Assigns the partitions not done yet at their positions.
fn assign(
    consumer: &BaseConsumer<EddyContext>,
    redactor: &Redactor,
    ranges: &[ScanRange],
    position: &[i64],
) -> Result<()> {
    let mut assignment = TopicPartitionList::new();
    for (range, at) in ranges.iter().zip(position) {
        if *at < range.end {
            assignment
                .add_partition_offset(&range.topic, range.partition, Offset::Offset(*at))
                .map_err(|error| redactor.error("cannot assign a partition", &error))?;
        }
    }
    consumer.assign(&assignment).map_err(|error| redactor.error("cannot assign partitions", &error))
}

/// Moves positions forward to the consumer's own, which pass markers and aborted
/// records without returning a message; whether any moved.
fn catch_up(
    consumer: &BaseConsumer<EddyContext>,
    ranges: &[ScanRange],
    index: &HashMap<(&str, i32), usize>,
    position: &mut [i64],
) -> bool {
    let Ok(positions) = consumer.position() else { return false };
    let mut moved = false;
    for element in positions.elements() {
        let Some(&i) = index.get(&(element.topic(), element.partition())) else { continue };
        if let Offset::Offset(at) = element.offset()
            && at > position[i]
        {
            position[i] = at.min(ranges[i].end);
            moved = true;
        }
    }
    moved
}
