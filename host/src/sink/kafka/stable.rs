//! Waiting for the last stable offset. A batch begun in a Kafka transaction and run
//! again after a crash counts as written only its committed records, which a
//! read_committed reader returns only up to the partition's last stable offset (the
//! first offset of the oldest transaction still open). Another producer's open
//! transaction on an output partition holds that offset back, possibly before the
//! batch's committed records: the re-run waits for it to move past the log's end as
//! it was when the re-run began — a bounded wait (`transaction-wait`) that ends in an
//! error saying which partition is held back and what to do.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use rdkafka::consumer::BaseConsumer;

use crate::kafka::{EddyContext, Redactor, ScanRange, watermarks};

const POLL: Duration = Duration::from_millis(200);

/// Waits until every range's end is at or before its partition's last stable offset
/// (`committed_reader` is a read_committed client), for at most `wait`.
pub(super) fn wait_for_stable_ends(
    committed_reader: &BaseConsumer<EddyContext>,
    redactor: &Redactor,
    ranges: &[ScanRange],
    batch_id: u64,
    wait: Duration,
) -> Result<()> {
    let started = Instant::now();
    let mut told = false;
    for range in ranges.iter().filter(|range| range.end > range.start) {
        loop {
            let (_, stable) = watermarks(committed_reader, redactor, &range.topic, range.partition)?;
            if stable >= range.end {
                break;
            }
            if started.elapsed() >= wait {
                bail!(
                    "sink: batch {batch_id} runs again after a crash and must find which of its records were committed, \
                     but topic '{}' partition {} has a transaction open since offset {stable} (its last stable offset; \
                     the log ends at {}) that did not end within transaction-wait ({} s). Nothing more is written and \
                     the batch is not committed: end or abort that producer's transaction (the broker aborts it after \
                     its transaction timeout) and start the query again, or raise the sink's transaction-wait",
                    range.topic,
                    range.partition,
                    range.end,
                    wait.as_secs()
                );
            }
            if !told {
                crate::log::info(&format!(
                    "sink: batch {batch_id} runs again: waiting for an open transaction on topic '{}' partition {} \
                     (last stable offset {stable}, end {}) to end",
                    range.topic, range.partition, range.end
                ));
                told = true;
            }
            std::thread::sleep(POLL);
        }
    }
    Ok(())
}
