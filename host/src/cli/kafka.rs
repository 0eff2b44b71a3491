//! `eddy kafka`: small tools around a Kafka cluster for examples, tests and users —
//! create or delete a topic, load JSON lines into it, read it back, delete old records.

use std::io::{BufRead, Write};
use std::ops::ControlFlow;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use rdkafka::consumer::BaseConsumer;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use crate::kafka::{
    ClientSettings, EddyContext, ScanRange, create_topic, delete_records_before, delete_topic, headers,
    partition_for_key, scan, topic_partitions, watermarks,
};
use crate::pipeline::KafkaProperties;

/// The arguments of `eddy kafka`.
#[derive(Args, Debug)]
pub struct KafkaArgs {
    #[command(subcommand)]
    command: KafkaCommand,
    /// The brokers, `host:port[,host:port…]`.
    #[arg(long, global = true, default_value = "127.0.0.1:9092")]
    bootstrap_servers: String,
    /// Any other librdkafka property, `key=value` (repeatable); give credentials as
    /// `key=${env:NAME}` or `key=${file:PATH}` to keep them off the command line.
    #[arg(long = "property", global = true, value_name = "KEY=VALUE")]
    properties: Vec<String>,
}

#[derive(Subcommand, Debug)]
enum KafkaCommand {
    /// Creates a topic.
    CreateTopic {
        /// The topic.
        topic: String,
        /// How many partitions it has.
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        /// Succeed when the topic exists already.
        #[arg(long)]
        if_not_exists: bool,
    },
    /// Deletes a topic and its records.
    DeleteTopic {
        /// The topic.
        topic: String,
    },
    /// Writes JSON lines (a file, or stdin) into a topic, one record per line.
    Produce {
        /// The topic.
        topic: String,
        /// The file to read (default: stdin).
        file: Option<std::path::PathBuf>,
        /// A field of each line whose value (as text) becomes the record key; keyed
        /// records go where Kafka's default partitioner puts them, others round-robin.
        #[arg(long)]
        key_field: Option<String>,
    },
    /// Prints a topic's records from the oldest kept to the current end, as JSON lines.
    Consume {
        /// The topic.
        topic: String,
        /// Print each record as {"partition","offset","key","timestamp","headers","value"}
        /// instead of its value alone.
        #[arg(long)]
        metadata: bool,
        /// read_committed (default) or read_uncommitted.
        #[arg(long, default_value = "read_committed")]
        isolation: String,
    },
    /// Deletes a partition's records before an offset (what retention does).
    DeleteRecords {
        /// The topic.
        topic: String,
        /// The partition.
        #[arg(long)]
        partition: i32,
        /// The first offset kept.
        #[arg(long)]
        before: i64,
    },
}

/// Runs `eddy kafka …`.
pub fn run(args: &KafkaArgs) -> Result<()> {
    // Values may be references (`${env:NAME}`, `${file:PATH}`), kept off the command line.
    let mut table = toml::Table::new();
    table.insert("bootstrap.servers".into(), toml::Value::String(args.bootstrap_servers.clone()));
    for property in &args.properties {
        let (key, value) =
            property.split_once('=').ok_or_else(|| anyhow!("--property {property}: expected key=value"))?;
        table.insert(key.trim().to_string(), toml::Value::String(value.trim().to_string()));
    }
    let properties = KafkaProperties::from_table(&table, std::path::Path::new("."))
        .map_err(|problem| anyhow!("--property {problem}"))?;
    match &args.command {
        KafkaCommand::CreateTopic { topic, partitions, if_not_exists } => {
            create_topic(&ClientSettings::new(&properties, &[])?, topic, *partitions, *if_not_exists)
        }
        KafkaCommand::DeleteTopic { topic } => delete_topic(&ClientSettings::new(&properties, &[])?, topic),
        KafkaCommand::Produce { topic, file, key_field } => {
            produce(&properties, topic, file.as_deref(), key_field.as_deref())
        }
        KafkaCommand::Consume { topic, metadata, isolation } => consume(&properties, topic, *metadata, isolation),
        KafkaCommand::DeleteRecords { topic, partition, before } => {
            delete_records_before(&ClientSettings::new(&properties, &[])?, topic, *partition, *before)
        }
    }
}

/// The partition count of `topic`.
fn partition_count(consumer: &BaseConsumer<EddyContext>, settings: &ClientSettings, topic: &str) -> Result<i32> {
    let listing = topic_partitions(consumer, &settings.redactor(), |name| name == topic)?;
    if let Some((_, reason)) = listing.unavailable.first() {
        bail!("topic '{topic}' is not available: {reason}");
    }
    listing
        .topics
        .first()
        .map(|(_, count)| *count)
        .ok_or_else(|| anyhow!("topic '{topic}' does not exist; create it with `eddy kafka create-topic {topic}`"))
}

fn produce(
    properties: &KafkaProperties,
    topic: &str,
    file: Option<&std::path::Path>,
    key_field: Option<&str>,
) -> Result<()> {
    let mut settings = ClientSettings::new(properties, &[("linger.ms", "5")])?;
    settings.set("enable.idempotence", "true").set("acks", "all");
    let producer: BaseProducer<EddyContext> = settings.create("eddy kafka produce")?;
    let consumer: BaseConsumer<EddyContext> =
        ClientSettings::new(properties, &[("group.id", "eddy")])?.create("eddy kafka")?;
    let partitions = partition_count(&consumer, &settings, topic)?;
    let input: Box<dyn BufRead> = match file {
        Some(path) => Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?,
        )),
        None => Box::new(std::io::stdin().lock()),
    };
    let mut sent = 0u64;
    for (number, line) in input.lines().enumerate() {
        let line = line.context("cannot read the input")?;
        if line.trim().is_empty() {
            continue;
        }
        let key = match key_field {
            Some(field) => {
                let value: serde_json::Value =
                    serde_json::from_str(&line).with_context(|| format!("line {}: not JSON", number + 1))?;
                match value.get(field) {
                    Some(serde_json::Value::String(text)) => Some(text.clone()),
                    Some(serde_json::Value::Null) | None => None,
                    Some(other) => Some(other.to_string()),
                }
            }
            None => None,
        };
        let partition = match &key {
            Some(key) => partition_for_key(key.as_bytes(), partitions),
            None => (sent % partitions as u64) as i32,
        };
        let mut record = BaseRecord::<str, str>::to(topic).partition(partition).payload(line.as_str());
        if let Some(key) = &key {
            record = record.key(key.as_str());
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((
                    rdkafka::error::KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                    back,
                )) => {
                    producer.poll(Duration::from_millis(50));
                    record = back;
                }
                Err((error, _)) => return Err(settings.redactor().error("cannot send a record", &error)),
            }
        }
        sent += 1;
    }
    producer
        .flush(Duration::from_secs(300))
        .map_err(|error| settings.redactor().error("records were not delivered", &error))?;
    let deliveries = producer.context().take_deliveries();
    if deliveries.failed > 0 {
        bail!(
            "{} of {sent} records were not delivered: {}",
            deliveries.failed,
            deliveries.first_error.unwrap_or_default()
        );
    }
    eprintln!("produced {sent} records to topic '{topic}'");
    Ok(())
}

fn consume(properties: &KafkaProperties, topic: &str, metadata: bool, isolation: &str) -> Result<()> {
    if !["read_committed", "read_uncommitted"].contains(&isolation) {
        bail!("--isolation {isolation}: expected read_committed or read_uncommitted");
    }
    let mut settings = ClientSettings::new(properties, &[("group.id", "eddy"), ("fetch.wait.max.ms", "10")])?;
    settings
        .set("isolation.level", isolation)
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "error");
    let consumer: BaseConsumer<EddyContext> = settings.create("eddy kafka consume")?;
    let redactor = settings.redactor();
    let partitions = partition_count(&consumer, &settings, topic)?;
    let mut ranges = Vec::new();
    for partition in 0..partitions {
        let (low, high) = watermarks(&consumer, &redactor, topic, partition)?;
        ranges.push(ScanRange { topic: topic.to_string(), partition, start: low, end: high });
    }
    let mut per_partition: Vec<Vec<String>> = vec![Vec::new(); ranges.len()];
    let mut on_lost = |_: usize, _: i64, _: i64| -> Result<()> { Ok(()) };
    let mut visit = |i: usize, message: &rdkafka::message::BorrowedMessage<'_>| {
        let value = message.payload().map(|v| String::from_utf8_lossy(v).into_owned());
        let line = if metadata {
            // Keys that are not UTF-8 are shown escaped (`\xNN`), never lossily.
            let headers: serde_json::Map<String, serde_json::Value> = headers(message)
                .iter()
                .map(|h| (h.key_text(), h.value.map(|v| String::from_utf8_lossy(v).into_owned()).into()))
                .collect();
            serde_json::json!({
                "partition": message.partition(),
                "offset": message.offset(),
                "key": message.key().map(|k| String::from_utf8_lossy(k).into_owned()),
                "timestamp": message.timestamp().to_millis(),
                "headers": headers,
                "value": value.as_deref().map(|v| serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()))),
            })
            .to_string()
        } else {
            value.unwrap_or_else(|| "null".into())
        };
        per_partition[i].push(line);
        ControlFlow::Continue(())
    };
    scan(&consumer, &redactor, &ranges, false, "eddy kafka consume", &mut on_lost, &mut visit)?;
    super::print_to_stdout(|out| {
        for line in per_partition.iter().flatten() {
            writeln!(out, "{line}")?;
        }
        Ok(())
    })
}
