//! Planning a Kafka batch: where each partition starts (its committed position, or
//! the starting offsets), what was deleted before it was read, and where it ends
//! (the partition's end, within the bound and the batch's share of
//! max-offsets-per-trigger).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::checkpoint::PartitionRange;
use crate::pipeline::StartingOffsets;

/// What is known of one partition when a batch is planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct PartitionState {
    pub topic: String,
    pub partition: i32,
    /// The position the committed store holds (the next offset to read).
    pub committed: Option<i64>,
    /// The oldest offset still kept.
    pub low: i64,
    /// The end: the last stable offset for read_committed.
    pub high: i64,
}

/// Offsets a partition lost before they were read: `from..to` deleted (retention),
/// or, when `past_end`, a position `from` past the partition's end `to` (the topic
/// was deleted and made again).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Lost {
    pub topic: String,
    pub partition: i32,
    pub from: i64,
    pub to: i64,
    pub past_end: bool,
}

impl Lost {
    /// How many offsets are known lost.
    pub fn count(&self) -> u64 {
        if self.past_end { 0 } else { self.to.saturating_sub(self.from).max(0) as u64 }
    }

    /// What happened, for errors and logs.
    pub fn describe(&self) -> String {
        if self.past_end {
            format!(
                "topic '{}' partition {}: the position {} is past the partition's end {} (a starting offset past the end, a truncated log, or a topic deleted and made again); records may have been missed",
                self.topic, self.partition, self.from, self.to
            )
        } else {
            format!(
                "topic '{}' partition {}: offsets {} to {} were deleted (retention or DeleteRecords) before they were read",
                self.topic,
                self.partition,
                self.from,
                self.to - 1
            )
        }
    }
}

/// Where a partition without a committed position starts: the starting offsets for
/// the query's first batch (`first`), the earliest offset for partitions found later
/// (as Spark does).
pub(super) fn start_of(state: &PartitionState, starting: &StartingOffsets, first: bool) -> i64 {
    if let Some(committed) = state.committed {
        return committed;
    }
    let rule = if first { starting } else { &StartingOffsets::Earliest };
    let offset = match rule {
        StartingOffsets::Earliest => -2,
        StartingOffsets::Latest => -1,
        StartingOffsets::Specific(offsets) => {
            offsets.get(&state.topic).and_then(|partitions| partitions.get(&state.partition)).copied().unwrap_or(-2)
        }
    };
    match offset {
        -2 => state.low,
        -1 => state.high,
        offset => offset,
    }
}

/// The ranges of a batch before the limit: from each start (moved past deleted
/// offsets, which are returned) to the partition's end or its bound.
pub(super) fn ranges(
    states: &[PartitionState],
    starts: &[i64],
    bound: Option<&BTreeMap<(String, i32), i64>>,
) -> (Vec<PartitionRange>, Vec<Lost>) {
    let mut planned = Vec::with_capacity(states.len());
    let mut lost = Vec::new();
    for (state, start) in states.iter().zip(starts) {
        let mut start = *start;
        if start < state.low || start > state.high {
            let (topic, partition) = (state.topic.clone(), state.partition);
            if start < state.low {
                lost.push(Lost { topic, partition, from: start, to: state.low, past_end: false });
                start = state.low;
            } else {
                // Past the end (a truncated log or a topic made again): go on from the
                // end rather than read the partition's whole history again.
                lost.push(Lost { topic, partition, from: start, to: state.high, past_end: true });
                start = state.high;
            }
        }
        let limit = bound.map_or(Some(state.high), |bound| bound.get(&(state.topic.clone(), state.partition)).copied());
        let end = limit.map_or(start, |limit| limit.min(state.high).max(start));
        planned.push(PartitionRange {
            topic: state.topic.clone(),
            partition: state.partition,
            start,
            end,
            latest: state.high,
        });
    }
    (planned, lost)
}

/// Cuts the ranges to at most `limit` offsets in all, each partition's share in
/// proportion to its backlog (largest remainders get the leftover offsets), so no
/// batch reads more than `limit` offsets.
pub(super) fn apply_limit(ranges: &mut [PartitionRange], limit: u64) {
    let backlogs: Vec<u64> = ranges.iter().map(|range| range.end.saturating_sub(range.start).max(0) as u64).collect();
    let total: u64 = backlogs.iter().sum();
    if total <= limit {
        return;
    }
    let mut shares: Vec<u64> =
        backlogs.iter().map(|b| (u128::from(*b) * u128::from(limit) / u128::from(total)) as u64).collect();
    let mut left = limit - shares.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    let remainder = |i: usize| u128::from(backlogs[i]) * u128::from(limit) % u128::from(total);
    order.sort_by(|a, b| remainder(*b).cmp(&remainder(*a)).then(a.cmp(b)));
    for i in order {
        if left == 0 {
            break;
        }
        if shares[i] < backlogs[i] {
            shares[i] += 1;
            left -= 1;
        }
    }
    for (range, share) in ranges.iter_mut().zip(shares) {
        range.end = range.start.saturating_add(share as i64);
    }
}

/// Spark's offset JSON `{"topic":{"0":n,…},…}` of one value per range.
pub(super) fn offsets_json(ranges: &[PartitionRange], value: impl Fn(&PartitionRange) -> i64) -> Value {
    let mut topics: BTreeMap<&str, serde_json::Map<String, Value>> = BTreeMap::new();
    for range in ranges {
        topics.entry(&range.topic).or_default().insert(range.partition.to_string(), json!(value(range)));
    }
    Value::Object(
        topics.into_iter().map(|(topic, partitions)| (topic.to_string(), Value::Object(partitions))).collect(),
    )
}

/// Spark's backlog metrics: how far each partition's end is behind its latest offset.
pub(super) fn backlog_metrics(ranges: &[PartitionRange]) -> BTreeMap<String, String> {
    let behind: Vec<i64> = ranges.iter().map(|range| range.latest.saturating_sub(range.end).max(0)).collect();
    let mut metrics = BTreeMap::new();
    if let (Some(min), Some(max)) = (behind.iter().min(), behind.iter().max()) {
        let avg = behind.iter().sum::<i64>() as f64 / behind.len() as f64;
        metrics.insert("minOffsetsBehindLatest".to_string(), min.to_string());
        metrics.insert("maxOffsetsBehindLatest".to_string(), max.to_string());
        metrics.insert("avgOffsetsBehindLatest".to_string(), format!("{avg:.1}"));
    }
    metrics
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(partition: i32, committed: Option<i64>, low: i64, high: i64) -> PartitionState {
        PartitionState { topic: "t".into(), partition, committed, low, high }
    }

    fn range(partition: i32, start: i64, end: i64) -> PartitionRange {
        PartitionRange { topic: "t".into(), partition, start, end, latest: end }
    }

    #[test]
    fn starts_follow_the_committed_position_then_the_starting_offsets() {
        let specific = StartingOffsets::parse(r#"{"t":{"0":7,"1":-1}}"#).expect("valid");
        assert_eq!(start_of(&state(0, Some(4), 0, 10), &StartingOffsets::Latest, true), 4);
        assert_eq!(start_of(&state(0, None, 2, 10), &StartingOffsets::Latest, true), 10);
        assert_eq!(start_of(&state(0, None, 2, 10), &StartingOffsets::Earliest, true), 2);
        assert_eq!(start_of(&state(0, None, 2, 10), &specific, true), 7);
        assert_eq!(start_of(&state(1, None, 2, 10), &specific, true), 10);
        assert_eq!(start_of(&state(2, None, 2, 10), &specific, true), 2, "a partition not named starts earliest");
        assert_eq!(start_of(&state(0, None, 2, 10), &StartingOffsets::Latest, false), 2, "found later: earliest");
    }

    #[test]
    fn deleted_offsets_are_reported_and_skipped() {
        let states = [state(0, Some(3), 5, 9), state(1, Some(12), 0, 4), state(2, Some(2), 0, 4)];
        let (planned, lost) = ranges(&states, &[3, 12, 2], None);
        assert_eq!(
            lost,
            vec![
                Lost { topic: "t".into(), partition: 0, from: 3, to: 5, past_end: false },
                Lost { topic: "t".into(), partition: 1, from: 12, to: 4, past_end: true },
            ]
        );
        assert_eq!((lost[0].count(), lost[1].count()), (2, 0));
        assert!(lost[0].describe().contains("offsets 3 to 4 were deleted"), "{}", lost[0].describe());
        assert_eq!(planned.iter().map(|r| (r.start, r.end)).collect::<Vec<_>>(), vec![(5, 9), (4, 4), (2, 4)]);
    }

    #[test]
    fn the_bound_caps_ends_and_ignores_partitions_found_after_it() {
        let bound = BTreeMap::from([(("t".to_string(), 0), 6)]);
        let (planned, _) = ranges(&[state(0, Some(2), 0, 9), state(1, None, 0, 9)], &[2, 0], Some(&bound));
        assert_eq!(planned.iter().map(|r| (r.start, r.end)).collect::<Vec<_>>(), vec![(2, 6), (0, 0)]);
    }

    #[test]
    fn the_limit_is_split_in_proportion_to_backlog_and_never_exceeded() {
        let mut planned = vec![range(0, 0, 300), range(1, 10, 110), range(2, 0, 0), range(3, 5, 6)];
        apply_limit(&mut planned, 100);
        let shares: Vec<i64> = planned.iter().map(|r| r.end - r.start).collect();
        assert_eq!(shares.iter().sum::<i64>(), 100);
        // 300/401 and 100/401 of 100 offsets: 74.8 and 24.9, the leftover to the largest remainders.
        assert_eq!(shares, vec![75, 25, 0, 0]);
        let mut small = vec![range(0, 0, 5), range(1, 0, 5)];
        apply_limit(&mut small, 100);
        assert_eq!(small.iter().map(|r| r.end).collect::<Vec<_>>(), vec![5, 5], "under the limit: unchanged");
    }

    #[test]
    fn progress_json_has_sparks_shape() {
        let planned = vec![range(1, 3, 8), range(0, 0, 2)];
        assert_eq!(offsets_json(&planned, |r| r.end), json!({"t": {"0": 2, "1": 8}}));
        let metrics = backlog_metrics(&[PartitionRange { latest: 20, ..range(0, 0, 10) }, range(1, 0, 4)]);
        assert_eq!(metrics["maxOffsetsBehindLatest"], "10");
        assert_eq!(metrics["avgOffsetsBehindLatest"], "5.0");
    }
}
