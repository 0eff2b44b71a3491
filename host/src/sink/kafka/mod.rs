//! The Kafka sink: each output row a JSON record (key from `key-column`, topic fixed
//! or from `topic-column`), written by an idempotent producer with `acks=all`.
//!
//! Exactly-once without broker transactions: every record carries headers naming the
//! query, the batch and its sequence number within the batch's partition. Before a
//! batch is written the sink records an *intent* in the checkpoint
//! (`sinks/0/intents/<N>`): where each output partition ends and how many partitions
//! each topic has. A batch re-run after a crash reads its partitions from there, finds
//! which of its records are already written (checking that each is the record it
//! would write: a re-run whose output differs stops the query rather than mix two
//! outputs), and writes only the others — so the topics hold every row
//! exactly once for any consumer. With `transactional = true`
//! each batch is also one Kafka transaction (read_committed consumers see it whole).
//! The intent records whether the batch is written in a transaction, and a re-run
//! keeps to that whatever the sink's setting is now: a batch begun in a transaction
//! counts only committed records as written (and fences the crashed run's open
//! transaction), reading past other producers' open transactions once they end
//! (see [`stable`]).

mod records;
mod stable;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::ControlFlow;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use serde::{Deserialize, Serialize};

use self::records::{Columns, OutRecord, assign, encode, record_hash};
use super::{Sink, SinkOwner};
use crate::checkpoint::{CheckpointDir, RecordLog};
use crate::kafka::{
    ClientSettings, EddyContext, HEADER_BATCH, HEADER_PARTITIONS, HEADER_QUERY, HEADER_SEQUENCE, Redactor, ScanRange,
    header_value, headers, scan, topic_partitions, watermarks,
};
use crate::pipeline::KafkaSinkSpec;
use crate::util::fault;

/// How long a batch's records may take to be delivered.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(600);
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);
/// The tail reader is assigned only while it reads: no long polls.
const READ_WAIT: (&str, &str) = ("fetch.wait.max.ms", "10");

/// What the sink knew before it started writing a batch.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Intent {
    batch_id: u64,
    /// Each output topic's partition count the batch's records are partitioned by.
    partition_counts: BTreeMap<String, i32>,
    /// Where each partition ended before the batch was written.
    starts: Vec<PartitionStart>,
    /// Whether the batch is written in Kafka transactions (`None`: an intent written
    /// before this was recorded, read as the sink's setting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    transactional: Option<bool>,
}

#[derive(Debug, Serialize, Deserialize)]
struct PartitionStart {
    topic: String,
    partition: i32,
    offset: i64,
}

/// Writes each batch's rows to Kafka, exactly once.
pub struct KafkaSink {
    spec: KafkaSinkSpec,
    query_id: String,
    producer: BaseProducer<EddyContext>,
    /// A transactional producer for re-running a batch begun in a transaction when
    /// the sink is not transactional now (made when first needed).
    transactional_producer: Option<BaseProducer<EddyContext>>,
    producer_settings: ClientSettings,
    /// Reads the output partitions' tails on a re-run: every record, and only
    /// committed ones (a batch written in transactions).
    reader: BaseConsumer<EddyContext>,
    committed_reader: BaseConsumer<EddyContext>,
    redactor: Redactor,
    intents: RecordLog,
    description: String,
    bytes_written: u64,
}

impl KafkaSink {
    /// The sink `spec` describes, writing for `owner`.
    pub fn new(spec: &KafkaSinkSpec, owner: &SinkOwner) -> Result<Self> {
        let mut producer_settings =
            ClientSettings::new(&spec.properties, &[("client.id", "eddy-sink")]).context("sink")?;
        producer_settings.set("enable.idempotence", "true").set("acks", "all");
        let producer = create_producer(&producer_settings, &owner.query_id, spec.transactional)?;
        let reader_for = |isolation: &str| -> Result<BaseConsumer<EddyContext>> {
            let mut settings = ClientSettings::new(
                &spec.properties,
                &[("group.id", "eddy"), ("client.id", "eddy-sink-reader"), READ_WAIT],
            )?;
            settings
                .quiet_config_warnings()
                .set("isolation.level", isolation)
                .set("enable.auto.commit", "false")
                .set("enable.partition.eof", "true")
                .set("auto.offset.reset", "error");
            settings.create("sink")
        };
        let reader = reader_for("read_uncommitted")?;
        let committed_reader = reader_for("read_committed")?;
        let redactor = producer_settings.redactor();
        let target = match (&spec.topic, &spec.topic_column) {
            (_, Some(column)) => format!("topic-column={column}"),
            (Some(topic), None) => format!("topic={topic}"),
            (None, None) => bail!("the Kafka sink needs topic or topic-column"),
        };
        Ok(Self {
            description: format!("KafkaSink[{target}; bootstrap={}]", producer_settings.bootstrap()),
            spec: spec.clone(),
            query_id: owner.query_id.clone(),
            producer,
            transactional_producer: None,
            producer_settings,
            reader,
            committed_reader,
            redactor,
            intents: CheckpointDir::new(owner.checkpoint.clone()).sink_intents(0),
            bytes_written: 0,
        })
    }

    /// Makes the producer [`Self::producer`] returns for `transaction`, when it is
    /// not there yet.
    fn prepare_producer(&mut self, transaction: bool) -> Result<()> {
        if transaction && !self.spec.transactional && self.transactional_producer.is_none() {
            self.transactional_producer = Some(create_producer(&self.producer_settings, &self.query_id, true)?);
        }
        Ok(())
    }

    /// The producer for a batch written in a `transaction` or not: the sink's own, or
    /// (a batch begun in a transaction, the sink not transactional now) one with the
    /// sink's transactional id, which fenced the crashed run's open transaction.
    fn producer(&self, transaction: bool) -> &BaseProducer<EddyContext> {
        match (&self.transactional_producer, transaction && !self.spec.transactional) {
            (Some(producer), true) => producer,
            _ => &self.producer,
        }
    }

    /// The partition counts of `topics` now.
    fn partition_counts(&self, topics: &HashSet<&str>) -> Result<BTreeMap<String, i32>> {
        let listing = topic_partitions(&self.reader, &self.redactor, |name| topics.contains(name))?;
        if let Some((topic, reason)) = listing.unavailable.first() {
            bail!("sink: topic '{topic}' is not available ({reason}); nothing of the batch is written or committed");
        }
        let found: BTreeMap<String, i32> = listing.topics.into_iter().collect();
        if let Some(missing) = topics.iter().find(|topic| !found.contains_key(**topic)) {
            bail!(
                "sink: topic '{missing}' does not exist; create it first (e.g. `eddy kafka create-topic {missing} --bootstrap-servers …`)"
            );
        }
        Ok(found)
    }

    /// Records where every partition of the batch's topics ends, before writing.
    fn record_intent(&self, batch_id: u64, partition_counts: BTreeMap<String, i32>) -> Result<Intent> {
        // Ends as a read_uncommitted reader sees them: past every record, open
        // transactions' included, so the batch's records all lie after them.
        let mut starts = Vec::new();
        for (topic, count) in &partition_counts {
            for partition in 0..*count {
                let (_, high) = watermarks(&self.reader, &self.redactor, topic, partition)?;
                starts.push(PartitionStart { topic: topic.clone(), partition, offset: high });
            }
        }
        let intent = Intent { batch_id, partition_counts, starts, transactional: Some(self.spec.transactional) };
        self.intents.write(batch_id, &intent)?;
        Ok(intent)
    }

    /// The (topic, partition, sequence) of batch `batch_id`'s records already in the
    /// partitions `records` go to, read from the intent's starts, with the hash of
    /// each one's key and value. A batch written in transactions counts only
    /// committed records (read_committed, once other producers' open transactions
    /// before them have ended); records of other producers are skipped, whatever
    /// their headers hold.
    fn already_written(
        &self,
        intent: &Intent,
        records: &[OutRecord],
        transactional: bool,
    ) -> Result<HashMap<(String, i32, u64), u64>> {
        let targets: HashSet<(&str, i32)> = records.iter().map(|r| (r.topic.as_str(), r.partition)).collect();
        let mut ranges = Vec::new();
        for start in intent.starts.iter().filter(|s| targets.contains(&(s.topic.as_str(), s.partition))) {
            let (_, high) = watermarks(&self.reader, &self.redactor, &start.topic, start.partition)?;
            ranges.push(ScanRange {
                topic: start.topic.clone(),
                partition: start.partition,
                start: start.offset,
                end: high,
            });
        }
        let mut found = HashMap::new();
        let (query, batch) = (self.query_id.as_bytes(), intent.batch_id.to_string());
        let mut visit = |i: usize, message: &rdkafka::message::BorrowedMessage<'_>| {
            let headers = headers(message);
            let header = |name: &str| header_value(&headers, name);
            if header(HEADER_QUERY) == Some(query) && header(HEADER_BATCH) == Some(batch.as_bytes()) {
                let sequence = header(HEADER_SEQUENCE).and_then(|v| std::str::from_utf8(v).ok()?.parse().ok());
                if let Some(sequence) = sequence {
                    let hash = record_hash(message.key(), message.payload().unwrap_or_default());
                    found.insert((ranges[i].topic.clone(), ranges[i].partition, sequence), hash);
                }
            }
            ControlFlow::Continue(())
        };
        // Records deleted since the intent cannot be compared: they count as not written.
        let mut on_lost = |_: usize, _: i64, _: i64| -> Result<()> { Ok(()) };
        let reader = if transactional {
            stable::wait_for_stable_ends(
                &self.committed_reader,
                &self.redactor,
                &ranges,
                intent.batch_id,
                self.spec.transaction_wait,
            )?;
            &self.committed_reader
        } else {
            &self.reader
        };
        scan(reader, &self.redactor, &ranges, true, "sink", &mut on_lost, &mut visit)?;
        Ok(found)
    }

    /// Produces `records` with `producer` and waits until every one is delivered.
    fn produce(
        &self,
        producer: &BaseProducer<EddyContext>,
        batch_id: u64,
        records: &[&OutRecord],
        partition_counts: &BTreeMap<String, i32>,
    ) -> Result<u64> {
        let mut bytes = 0u64;
        let batch = batch_id.to_string();
        for record in records {
            let sequence = record.sequence.to_string();
            let count = partition_counts.get(&record.topic).copied().unwrap_or(0).to_string();
            let headers = OwnedHeaders::new_with_capacity(4)
                .insert(Header { key: HEADER_QUERY, value: Some(self.query_id.as_bytes()) })
                .insert(Header { key: HEADER_BATCH, value: Some(batch.as_bytes()) })
                .insert(Header { key: HEADER_SEQUENCE, value: Some(sequence.as_bytes()) })
                .insert(Header { key: HEADER_PARTITIONS, value: Some(count.as_bytes()) });
            let mut message = BaseRecord::<[u8], [u8]>::to(&record.topic)
                .partition(record.partition)
                .payload(&record.value[..])
                .headers(headers);
            if let Some(key) = &record.key {
                message = message.key(&key[..]);
            }
            loop {
                match producer.send(message) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        producer.poll(Duration::from_millis(50));
                        message = back;
                    }
                    Err((error, _)) => {
                        return Err(self
                            .redactor
                            .error(&format!("sink: batch {batch_id}: cannot send a record"), &error));
                    }
                }
            }
            bytes += record.value.len() as u64;
        }
        producer.flush(DELIVERY_TIMEOUT).map_err(|error| {
            self.redactor.error(&format!("sink: batch {batch_id}: records were not delivered"), &error)
        })?;
        let deliveries = producer.context().take_deliveries();
        if deliveries.failed > 0 || deliveries.delivered < records.len() as u64 {
            bail!(
                "sink: batch {batch_id}: {} of {} records were not delivered ({}); nothing of the batch is committed and it is written again when the query restarts",
                records.len() as u64 - deliveries.delivered.min(records.len() as u64),
                records.len(),
                deliveries.first_error.unwrap_or_else(|| "no delivery report".into())
            );
        }
        Ok(bytes)
    }
}

impl Sink for KafkaSink {
    fn write_batch(&mut self, batch_id: u64, schema: &SchemaRef, rows: &[RecordBatch]) -> Result<()> {
        let columns = Columns {
            topic: self.spec.topic.as_deref(),
            topic_column: self.spec.topic_column.as_deref(),
            key_column: self.spec.key_column.as_deref(),
        };
        let encoded = encode(schema, rows, &columns)?;
        if encoded.values.is_empty() {
            return Ok(());
        }
        let intent = match self.intents.read::<Intent>(batch_id)? {
            Some(intent) if intent.batch_id == batch_id => Some(intent),
            Some(_) => bail!("{} holds another batch's intent", self.intents.path_of(batch_id).display()),
            None => None,
        };
        let (intent, rerun) = match intent {
            Some(intent) => (intent, true),
            None => {
                let topics: HashSet<&str> = encoded.topics.iter().map(String::as_str).collect();
                let counts = self.partition_counts(&topics)?;
                (self.record_intent(batch_id, counts)?, false)
            }
        };
        // A re-run keeps to the way the batch was begun (the intent's), whatever the
        // sink's setting is now.
        let transactional = intent.transactional.unwrap_or(self.spec.transactional);
        let transaction = transactional || self.spec.transactional;
        self.prepare_producer(transaction)?;
        let records = assign(encoded, &intent.partition_counts, batch_id)?;
        let written = if rerun { self.already_written(&intent, &records, transactional)? } else { HashMap::new() };
        let mut missing: Vec<&OutRecord> = Vec::with_capacity(records.len());
        for record in &records {
            match written.get(&(record.topic.clone(), record.partition, record.sequence)) {
                None => missing.push(record),
                Some(hash) if *hash == record.hash => {}
                Some(_) => bail!(
                    "sink: batch {batch_id} ran again after a crash, but its record {} for topic '{}' partition {} differs from the one an earlier run wrote; nothing more is written and the batch is not committed. A re-run has the batch's input, time, watermark and static tables, and its output does not depend on `parallelism`, so something else changed between the runs: a processor module or a stage replaced before the batch committed (put it back until the batch has committed), a processor whose output depends on more than its rows, state, timers and the sandbox's clock and random numbers (e.g. values it keeps in memory between calls), or another query writing with this checkpoint's query id (a copy of the checkpoint)",
                    record.sequence,
                    record.topic,
                    record.partition
                ),
            }
        }
        if rerun {
            crate::log::info(&format!(
                "sink: batch {batch_id} runs again: {} of its {} records were already written, writing the other {}",
                written.len(),
                records.len(),
                missing.len()
            ));
        }
        let producer = self.producer(transaction);
        if transaction {
            producer
                .begin_transaction()
                .map_err(|error| self.redactor.error("sink: cannot begin a Kafka transaction", &error))?;
        }
        let result = self.produce(producer, batch_id, &missing, &intent.partition_counts);
        if transaction {
            fault::pause("EDDY_PAUSE_IN_TRANSACTION_MS");
            match &result {
                Ok(_) => producer.commit_transaction(TRANSACTION_TIMEOUT).map_err(|error| {
                    self.redactor.error(&format!("sink: batch {batch_id}: cannot commit the Kafka transaction"), &error)
                })?,
                Err(_) => {
                    let _ = producer.abort_transaction(TRANSACTION_TIMEOUT);
                }
            }
        }
        let bytes = result.map_err(|error| anyhow!("{error:#}"))?;
        self.bytes_written += bytes;
        Ok(())
    }

    fn description(&self) -> String {
        self.description.clone()
    }

    fn bytes_written(&self) -> u64 {
        self.bytes_written
    }
}

/// A producer with `settings` for query `query_id`, transactional (id
/// `eddy-<query id>-sink-0`, initialised: a crashed run's open transaction is
/// aborted) or not.
fn create_producer(
    settings: &ClientSettings,
    query_id: &str,
    transactional: bool,
) -> Result<BaseProducer<EddyContext>> {
    let mut settings = settings.clone();
    if transactional {
        settings.set("transactional.id", &format!("eddy-{query_id}-sink-0"));
    }
    let producer: BaseProducer<EddyContext> = settings.create("sink")?;
    if transactional {
        producer
            .init_transactions(TRANSACTION_TIMEOUT)
            .map_err(|error| settings.redactor().error("sink: cannot start Kafka transactions", &error))?;
    }
    Ok(producer)
}
