//! The Kafka source: JSON records of one or more topics (or every topic matching a
//! pattern), read partition by partition with partitions assigned by eddy itself (no
//! consumer group).
//!
//! Each batch is planned from the brokers' offsets — the last stable offsets, for
//! the default read_committed isolation — within max-offsets-per-trigger, and its
//! per-partition ranges — cut where max-bytes-per-trigger stopped the reading — are
//! logged in `checkpoint/sources/<index>/<N>` before the batch runs, so a batch re-run
//! after a crash reads exactly the same records. Positions live
//! only in the committed store (`Cf::Meta`): `source/<index>/kafka/<topic>/<partition>`
//! → the next offset to read, written atomically with the batch's state.

mod plan;
mod read;
mod rows;

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow, bail};
use arrow::datatypes::SchemaRef;
use rdkafka::consumer::BaseConsumer;
use serde_json::Value;

use self::plan::{Lost, PartitionState, apply_limit, backlog_metrics, offsets_json, ranges, start_of};
use self::read::{Budget, Records, Wanted, read_ranges};
use super::dead_letter::DeadLetters;
use super::{Source, SourceBatch, meta_key};
use crate::checkpoint::{CheckpointDir, PartitionLog, PartitionRange};
use crate::kafka::{ClientSettings, EddyContext, Redactor, TopicListing, topic_partitions, watermarks};
use crate::pipeline::{BadRecordPolicy, KafkaSourceSpec, SourceKind, SourceSpec, Subscription};
use crate::state::{Cf, StateStore};

/// Records of Kafka topics.
pub(super) struct KafkaSource {
    name: String,
    index: usize,
    schema: SchemaRef,
    spec: KafkaSourceSpec,
    on_bad_record: BadRecordPolicy,
    consumer: BaseConsumer<EddyContext>,
    redactor: Redactor,
    description: String,
    pattern: Option<regex::Regex>,
    log: PartitionLog,
    /// Per partition, the end "available now" stands for (available-now and once).
    bound: Option<BTreeMap<(String, i32), i64>>,
}

impl KafkaSource {
    /// The Kafka source of `spec` (whose kind must be `Kafka`), number `index`, logging
    /// its batches in `checkpoint`.
    pub fn open(spec: &SourceSpec, index: usize, checkpoint: &CheckpointDir) -> Result<Self> {
        let SourceKind::Kafka(kafka) = &spec.kind else {
            bail!("source '{}' is not a Kafka source", spec.name);
        };
        let defaults = [
            ("isolation.level", "read_committed"),
            ("group.id", "eddy"),
            ("client.id", "eddy-source"),
            // The consumer is assigned only while a batch reads: no long polls.
            ("fetch.wait.max.ms", "10"),
        ];
        let mut settings =
            ClientSettings::new(&kafka.properties, &defaults).with_context(|| format!("source '{}'", spec.name))?;
        settings
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "true")
            .set("auto.offset.reset", "error");
        let consumer = settings.create(&format!("source '{}'", spec.name))?;
        let pattern = match &kafka.subscription {
            Subscription::Pattern(pattern) => Some(
                regex::Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|error| anyhow!("source '{}': topic-pattern: {error}", spec.name))?,
            ),
            Subscription::Topics(_) => None,
        };
        Ok(Self {
            name: spec.name.clone(),
            index,
            schema: spec.schema.clone(),
            description: format!("KafkaSource[{}; bootstrap={}]", kafka.subscription, settings.bootstrap()),
            spec: kafka.clone(),
            on_bad_record: spec.on_bad_record.clone(),
            consumer,
            redactor: settings.redactor(),
            pattern,
            log: checkpoint.partition_log(index),
            bound: None,
        })
    }

    fn position_key(&self, topic: &str, partition: i32) -> Vec<u8> {
        meta_key(self.index, &format!("kafka/{topic}/{partition}"))
    }

    fn started_key(&self) -> Vec<u8> {
        meta_key(self.index, "kafka-started")
    }

    fn committed_position(&self, store: &StateStore, topic: &str, partition: i32) -> Result<Option<i64>> {
        let Some(raw) = store.read(Cf::Meta, &self.position_key(topic, partition))? else { return Ok(None) };
        let text = String::from_utf8_lossy(&raw);
        text.parse().map(Some).map_err(|_| {
            anyhow!(
                "source '{}': the committed position of topic '{topic}' partition {partition} is corrupt ({text})",
                self.name
            )
        })
    }

    /// The partitions to read now, with their committed positions and offsets;
    /// `None` while a topic the source reads is unavailable (e.g. without a leader):
    /// a batch then waits for it rather than plan around it.
    fn partitions(&self, store: &StateStore) -> Result<Option<Vec<PartitionState>>> {
        let listing = match (&self.spec.subscription, &self.pattern) {
            (Subscription::Topics(topics), _) => {
                topic_partitions(&self.consumer, &self.redactor, |name| topics.iter().any(|t| t == name))?
            }
            (Subscription::Pattern(_), Some(pattern)) => {
                topic_partitions(&self.consumer, &self.redactor, |name| pattern.is_match(name))?
            }
            (Subscription::Pattern(_), None) => TopicListing::default(),
        };
        if let Some((topic, reason)) = listing.unavailable.first() {
            crate::log::warn(&format!(
                "source '{}': topic '{topic}' is not available ({reason}); waiting for it",
                self.name
            ));
            return Ok(None);
        }
        if let Subscription::Topics(topics) = &self.spec.subscription {
            let listed = |topic: &String| listing.topics.iter().any(|(name, _)| name == topic);
            if let Some(missing) = topics.iter().find(|topic| !listed(topic)) {
                let before = if self.committed_position(store, missing, 0)?.is_some() {
                    " (it was read before: was it deleted?)"
                } else {
                    ""
                };
                bail!(
                    "source '{}': topic '{missing}' does not exist{before}; create it (`eddy kafka create-topic {missing}`) or remove it from topics",
                    self.name
                );
            }
        }
        let mut states = Vec::new();
        for (topic, count) in listing.topics {
            self.check_no_partitions_lost(store, &topic, count)?;
            for partition in 0..count {
                let committed = self.committed_position(store, &topic, partition)?;
                let (low, high) = watermarks(&self.consumer, &self.redactor, &topic, partition)?;
                states.push(PartitionState { topic: topic.clone(), partition, committed, low, high });
            }
        }
        Ok(Some(states))
    }

    /// A topic has no fewer partitions than positions are committed for: Kafka only
    /// adds partitions, so fewer means the topic was deleted and made again.
    fn check_no_partitions_lost(&self, store: &StateStore, topic: &str, count: i32) -> Result<()> {
        let Some(position) = self.committed_position(store, topic, count)? else { return Ok(()) };
        let problem = format!(
            "topic '{topic}' has {count} partition(s), but partition {count} was read before (up to offset {position}): the topic was deleted and made again while the query was down, and records may have been missed"
        );
        if self.spec.fail_on_data_loss {
            bail!("source '{}': {problem}; set fail-on-data-loss = false to go on with the new topic", self.name);
        }
        crate::log::warn(&format!("source '{}': {problem}; going on (fail-on-data-loss = false)", self.name));
        Ok(())
    }

    /// Plans the ranges of the next batch (`None`: nothing to read or record).
    fn plan(&self, store: &StateStore) -> Result<Option<(Vec<PartitionRange>, Vec<Lost>)>> {
        let Some(states) = self.partitions(store)? else { return Ok(None) };
        let first = store.read(Cf::Meta, &self.started_key())?.is_none();
        let starts: Vec<i64> = states.iter().map(|s| start_of(s, &self.spec.starting_offsets, first)).collect();
        let (mut planned, lost) = ranges(&states, &starts, self.bound.as_ref());
        if self.spec.fail_on_data_loss
            && let Some(gap) = lost.first()
        {
            bail!("source '{}': {}; set fail-on-data-loss = false to skip them", self.name, gap.describe());
        }
        if let Some(limit) = self.spec.max_offsets_per_trigger {
            apply_limit(&mut planned, limit);
        }
        let reads = planned.iter().any(|range| range.end > range.start);
        // A partition without a committed position gets one even when there is
        // nothing to read yet: "latest" must not move with later triggers, and an
        // empty partition counts as caught up.
        let pins = states.iter().any(|state| state.committed.is_none());
        Ok((reads || pins || !lost.is_empty()).then_some((planned, lost)))
    }

    /// Reads `planned` within `budget`: the records and where each range's reading ended.
    fn read(&self, planned: &[PartitionRange], budget: Budget) -> Result<(Records, Vec<i64>)> {
        let wanted = Wanted {
            keys: self.spec.metadata_columns.iter().any(|c| c == "key"),
            headers: self.spec.metadata_columns.iter().any(|c| c == "headers"),
        };
        read_ranges(&self.consumer, &self.redactor, planned, budget, wanted, self.spec.fail_on_data_loss, &self.name)
    }

    /// Decodes batch `batch_id`'s `records` (read from its `planned` ranges).
    fn batch_of(
        &self,
        batch_id: u64,
        planned: Vec<PartitionRange>,
        mut lost: Vec<Lost>,
        records: Records,
    ) -> Result<SourceBatch> {
        lost.extend(records.lost.iter().cloned());
        let fail = self.on_bad_record == BadRecordPolicy::Fail;
        let decoded = rows::decode(&records, &planned, &self.schema, &self.spec.metadata_columns, fail, &self.name)?;
        let mut dead_letters = DeadLetters::new(&self.name);
        for (index, record) in &decoded.bad {
            let meta = &records.metas[*index];
            let range = &planned[meta.range];
            dead_letters.add_kafka(&range.topic, range.partition, meta.offset, record)?;
        }
        if let BadRecordPolicy::DeadLetter(dir) = &self.on_bad_record {
            dead_letters.write(dir, batch_id)?;
        }
        let mut commit: Vec<(Vec<u8>, Vec<u8>)> = planned
            .iter()
            .map(|range| (self.position_key(&range.topic, range.partition), range.end.to_string().into_bytes()))
            .collect();
        commit.push((self.started_key(), b"1".to_vec()));
        let mut metrics = backlog_metrics(&planned);
        let lost_offsets: u64 = lost.iter().map(Lost::count).sum();
        if !lost.is_empty() {
            metrics.insert("offsetsLostToRetention".to_string(), lost_offsets.to_string());
        }
        Ok(SourceBatch {
            rows: decoded.rows,
            bytes: records.values.len() as u64,
            bad_records: dead_letters.count(),
            start_offset: offsets_json(&planned, |range| range.start),
            end_offset: offsets_json(&planned, |range| range.end),
            latest_offset: offsets_json(&planned, |range| range.latest),
            metrics,
            commit,
        })
    }
}

impl Source for KafkaSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        self.description.clone()
    }

    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn bound_to_available_now(&mut self, store: &StateStore, _now_us: i64) -> Result<()> {
        let Some(states) = self.partitions(store)? else {
            bail!(
                "source '{}': a topic is not available, so what is available now cannot be fixed; try again",
                self.name
            )
        };
        self.bound = Some(states.into_iter().map(|s| ((s.topic, s.partition), s.high)).collect());
        Ok(())
    }

    fn lift_batch_limits(&mut self) {
        self.spec.max_offsets_per_trigger = None;
        self.spec.max_bytes_per_trigger = None;
    }

    fn next_batch(&mut self, store: &StateStore, batch_id: u64, _now_us: i64) -> Result<Option<SourceBatch>> {
        let Some((planned, lost)) = self.plan(store)? else { return Ok(None) };
        for gap in &lost {
            crate::log::warn(&format!(
                "source '{}': {}; skipped (fail-on-data-loss = false)",
                self.name,
                gap.describe()
            ));
        }
        // Read first, within the byte budget, and log the ranges as read: a re-run
        // then reads the same bounded records.
        let (records, ends) = self.read(&planned, Budget::Plan(self.spec.max_bytes_per_trigger))?;
        let mut planned = planned;
        for (range, end) in planned.iter_mut().zip(ends) {
            range.end = end;
        }
        self.log.write(batch_id, &planned)?;
        self.batch_of(batch_id, planned, lost, records).map(Some)
    }

    fn replan_batch(
        &mut self,
        store: &StateStore,
        batch_id: u64,
        _now_us: i64,
        end_offset: &Value,
    ) -> Result<Option<SourceBatch>> {
        if end_offset.is_null() {
            return Ok(None);
        }
        let planned = self.log.read(batch_id)?;
        if &offsets_json(&planned, |range| range.end) != end_offset {
            bail!(
                "source '{}': batch {batch_id}'s recorded end offsets {end_offset} are not its logged ranges'",
                self.name
            );
        }
        for range in &planned {
            if let Some(committed) = self.committed_position(store, &range.topic, range.partition)?
                && committed != range.start
            {
                bail!(
                    "source '{}': topic '{}' partition {} of batch {batch_id} starts at {} but {committed} is committed; the batch cannot run again",
                    self.name,
                    range.topic,
                    range.partition,
                    range.start
                );
            }
        }
        let (records, _) = self.read(&planned, Budget::Replay(self.spec.max_bytes_per_trigger))?;
        self.batch_of(batch_id, planned, Vec::new(), records).map(Some)
    }

    fn caught_up(&self, store: &StateStore) -> Result<bool> {
        let Some(bound) = &self.bound else { return Ok(false) };
        for ((topic, partition), end) in bound {
            if self.committed_position(store, topic, *partition)?.is_none_or(|position| position < *end) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
