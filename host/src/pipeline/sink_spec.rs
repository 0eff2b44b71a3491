//! The `[sink]` table of `pipeline.toml`: the console, part files or a Kafka topic.

use std::path::Path;

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::kafka::{DEFAULT_TRANSACTION_WAIT, KafkaProperties, KafkaSinkSpec, check_properties};
use super::located::{Locator, one_of, positive_number};
use super::model::*;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawSink {
    format: Spanned<String>,
    pub(super) path: Option<Spanned<String>>,
    num_rows: Option<Spanned<u64>>,
    truncate: Option<bool>,
    topic: Option<Spanned<String>>,
    topic_column: Option<Spanned<String>>,
    key_column: Option<Spanned<String>>,
    transactional: Option<bool>,
    transaction_wait: Option<Spanned<String>>,
    kafka: Option<Spanned<toml::Table>>,
}

/// The longest `message.timeout.ms` the Kafka sink takes.
const MAX_MESSAGE_TIMEOUT_MS: u64 = 540_000;

/// The sink `raw` describes (the console when there is no `[sink]`).
pub(super) fn sink_spec(at: &Locator, base: &Path, raw: Option<&RawSink>) -> Result<SinkSpec> {
    let Some(sink) = raw else {
        return Ok(SinkSpec { format: SinkFormat::Console, path: None, num_rows: 20, truncate: true, kafka: None });
    };
    let formats = [
        ("console", SinkFormat::Console),
        ("json", SinkFormat::Json),
        ("parquet", SinkFormat::Parquet),
        ("kafka", SinkFormat::Kafka),
    ];
    let format = one_of(at, &sink.format, "sink.format", "format", &formats)?;
    let path = sink.path.as_ref().map(|p| base.join(p.get_ref()));
    if matches!(format, SinkFormat::Json | SinkFormat::Parquet) && path.is_none() {
        return Err(at.at(&sink.format, "sink.path", "a file sink needs a path (an output directory)"));
    }
    let num_rows = match &sink.num_rows {
        Some(n) => positive_number(at, n, "sink.num-rows", "number")? as usize,
        None => 20,
    };
    let kafka = match format {
        SinkFormat::Kafka => Some(kafka_sink(at, base, sink)?),
        _ => {
            let kafka_only = [
                ("topic", sink.topic.as_ref().map(Spanned::span)),
                ("topic-column", sink.topic_column.as_ref().map(Spanned::span)),
                ("key-column", sink.key_column.as_ref().map(Spanned::span)),
                ("kafka", sink.kafka.as_ref().map(Spanned::span)),
                ("transactional", sink.transactional.map(|_| sink.format.span())),
                ("transaction-wait", sink.transaction_wait.as_ref().map(Spanned::span)),
            ];
            if let Some((name, Some(span))) = kafka_only.into_iter().find(|(_, span)| span.is_some()) {
                return Err(at.error(span, &format!("sink.{name}"), "only the Kafka sink takes this key"));
            }
            None
        }
    };
    Ok(SinkSpec { format, path, num_rows, truncate: sink.truncate.unwrap_or(true), kafka })
}

fn kafka_sink(at: &Locator, base: &Path, sink: &RawSink) -> Result<KafkaSinkSpec> {
    if let Some(path) = &sink.path {
        return Err(at.at(
            path,
            "sink.path",
            "the Kafka sink writes to a topic: set topic (or topic-column), not path",
        ));
    }
    let non_empty = |value: &Option<Spanned<String>>, key: &str| match value {
        Some(text) if text.get_ref().is_empty() => Err(at.at(text, key, "expected a name")),
        Some(text) => Ok(Some(text.get_ref().clone())),
        None => Ok(None),
    };
    let topic = non_empty(&sink.topic, "sink.topic")?;
    let topic_column = non_empty(&sink.topic_column, "sink.topic-column")?;
    if topic.is_none() && topic_column.is_none() {
        return Err(at.at(
            &sink.format,
            "sink.topic",
            "the Kafka sink needs topic = \"name\" or topic-column = \"column\"",
        ));
    }
    let Some(table) = &sink.kafka else {
        return Err(at.at(
            &sink.format,
            "sink.kafka",
            "the Kafka sink needs [sink.kafka] with \"bootstrap.servers\" = \"host:port\"",
        ));
    };
    let properties =
        KafkaProperties::from_table(table.get_ref(), base).map_err(|problem| at.at(table, "sink.kafka", problem))?;
    check_properties(&properties, &["enable.idempotence", "acks", "transactional.id"])
        .map_err(|problem| at.at(table, "sink.kafka", problem))?;
    // A failed attempt's records must be delivered or given up before the batch can
    // run again and look for them (the sink waits 10 minutes for deliveries).
    for key in ["message.timeout.ms", "delivery.timeout.ms"] {
        if properties.plain(key).and_then(|v| v.parse::<u64>().ok()).is_some_and(|ms| ms > MAX_MESSAGE_TIMEOUT_MS) {
            let problem = format!(
                "'{key}' must be at most {MAX_MESSAGE_TIMEOUT_MS} (9 minutes), so that records of a failed attempt are settled before the batch runs again"
            );
            return Err(at.at(table, "sink.kafka", problem));
        }
    }
    let transaction_wait = match &sink.transaction_wait {
        Some(text) => super::duration::parse_duration(text.get_ref())
            .map_err(|problem| at.at(text, "sink.transaction-wait", problem))?,
        None => DEFAULT_TRANSACTION_WAIT,
    };
    Ok(KafkaSinkSpec {
        topic,
        topic_column,
        key_column: non_empty(&sink.key_column, "sink.key-column")?,
        transactional: sink.transactional.unwrap_or(false),
        transaction_wait,
        properties,
    })
}
