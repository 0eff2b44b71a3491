//! The `[[source]]` tables of `pipeline.toml`: files, the rate generator and Kafka,
//! their schema, watermark and bad-record policy.

use std::path::Path;

use anyhow::{Result, anyhow};
use arrow::datatypes::SchemaRef;
use serde::Deserialize;
use toml::Spanned;

use super::duration::parse_duration;
use super::kafka::{
    DEFAULT_KAFKA_MAX_BYTES_PER_TRIGGER, DEFAULT_MAX_OFFSETS_PER_TRIGGER, KafkaProperties, KafkaSourceSpec,
    METADATA_COLUMNS, StartingOffsets, Subscription, check_properties,
};
use super::limits::RawSize;
use super::located::{Locator, one_of, positive, positive_number, unknown};
use super::model::*;
use super::schema::parse_schema;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawSource {
    name: Option<String>,
    pub(super) format: Spanned<String>,
    path: Option<Spanned<String>>,
    schema: Option<Spanned<String>>,
    max_files_per_trigger: Option<Spanned<u64>>,
    max_bytes_per_trigger: Option<Spanned<RawSize>>,
    max_rows_per_trigger: Option<Spanned<RawSize>>,
    header: Option<bool>,
    delimiter: Option<Spanned<String>>,
    rows_per_second: Option<Spanned<u64>>,
    start_time: Option<Spanned<String>>,
    watermark: Option<RawWatermark>,
    on_bad_record: Option<Spanned<String>>,
    pub(super) dead_letter_path: Option<Spanned<String>>,
    topics: Option<Spanned<Vec<String>>>,
    topic_pattern: Option<Spanned<String>>,
    starting_offsets: Option<Spanned<String>>,
    max_offsets_per_trigger: Option<Spanned<RawSize>>,
    fail_on_data_loss: Option<bool>,
    metadata_columns: Option<Spanned<Vec<String>>>,
    kafka: Option<Spanned<toml::Table>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawWatermark {
    column: Spanned<String>,
    delay: Spanned<String>,
}

pub(super) fn source_spec(at: &Locator, base: &Path, index: usize, raw: &RawSource) -> Result<SourceSpec> {
    let name = raw.name.clone().unwrap_or_else(|| format!("source-{index}"));
    let key = |field: &str| format!("source[{index}].{field}");
    let format = raw.format.get_ref().as_str();
    if format != "kafka" {
        let kafka_only = [
            ("topics", raw.topics.as_ref().map(Spanned::span)),
            ("topic-pattern", raw.topic_pattern.as_ref().map(Spanned::span)),
            ("starting-offsets", raw.starting_offsets.as_ref().map(Spanned::span)),
            ("max-offsets-per-trigger", raw.max_offsets_per_trigger.as_ref().map(Spanned::span)),
            ("metadata-columns", raw.metadata_columns.as_ref().map(Spanned::span)),
            ("kafka", raw.kafka.as_ref().map(Spanned::span)),
            ("fail-on-data-loss", raw.fail_on_data_loss.map(|_| raw.format.span())),
        ];
        if let Some((name, Some(span))) = kafka_only.into_iter().find(|(_, span)| span.is_some()) {
            return Err(at.error(
                span,
                &key(name),
                format!("only Kafka sources take this key, and this one is \"{format}\""),
            ));
        }
    }
    let (kind, schema) = match format {
        "json" | "csv" => file_source(at, base, raw, &key)?,
        "rate" => rate_source(at, raw, &key)?,
        "kafka" => kafka_source(at, base, index, raw)?,
        _ => return Err(unknown(at, &raw.format, &key("format"), "format", &["json", "csv", "rate", "kafka"])),
    };
    let watermark = watermark(at, raw, &key, &schema)?;
    let on_bad_record = match &raw.on_bad_record {
        None => BadRecordPolicy::Fail,
        Some(policy) => {
            match one_of(at, policy, &key("on-bad-record"), "policy", &["fail", "skip", "dead-letter"].map(|w| (w, w)))?
            {
                "fail" => BadRecordPolicy::Fail,
                "skip" => BadRecordPolicy::Skip,
                _ => {
                    let path = raw.dead_letter_path.as_ref().ok_or_else(|| {
                        at.at(
                            policy,
                            &key("dead-letter-path"),
                            "the dead-letter policy needs a dead-letter-path (a directory)",
                        )
                    })?;
                    BadRecordPolicy::DeadLetter(base.join(path.get_ref()))
                }
            }
        }
    };
    Ok(SourceSpec { name, kind, schema, watermark, on_bad_record })
}

/// A JSON-lines or CSV source: its files, schema and per-batch bounds.
fn file_source(
    at: &Locator,
    base: &Path,
    raw: &RawSource,
    key: &dyn Fn(&str) -> String,
) -> Result<(SourceKind, SchemaRef)> {
    let format = raw.format.get_ref().as_str();
    let path = raw.path.as_ref().ok_or_else(|| at.at(&raw.format, &key("path"), "a file source needs a path"))?;
    let resolved = base.join(path.get_ref());
    if !resolved.exists() {
        return Err(at.at(
            path,
            &key("path"),
            format!("{} does not exist; expected a file or a directory of {format} files", resolved.display()),
        ));
    }
    let schema_text = raw.schema.as_ref().ok_or_else(|| {
        at.at(&raw.format, &key("schema"), "a file source needs a schema, e.g. \"user STRING, amount BIGINT\"")
    })?;
    let schema = parse_schema(schema_text.get_ref()).map_err(|problem| at.at(schema_text, &key("schema"), problem))?;
    let file_format = if format == "json" {
        FileFormat::Json
    } else {
        let delimiter = match &raw.delimiter {
            None => b',',
            Some(d) if d.get_ref().len() == 1 => d.get_ref().as_bytes()[0],
            Some(d) => {
                return Err(at.at(d, &key("delimiter"), "expected one ASCII character, e.g. \",\" or \";\""));
            }
        };
        FileFormat::Csv { header: raw.header.unwrap_or(true), delimiter }
    };
    let max_files_per_trigger = match &raw.max_files_per_trigger {
        Some(n) => Some(positive_number(at, n, &key("max-files-per-trigger"), "number")? as usize),
        None => None,
    };
    if let Some(rows) = &raw.max_rows_per_trigger {
        let problem = "only the rate source takes max-rows-per-trigger; bound a file source's batches with max-bytes-per-trigger or max-files-per-trigger";
        return Err(at.at(rows, &key("max-rows-per-trigger"), problem));
    }
    let max_bytes_per_trigger = match &raw.max_bytes_per_trigger {
        Some(size) => positive(at, size, &key("max-bytes-per-trigger"), true)?,
        None => DEFAULT_MAX_BYTES_PER_TRIGGER,
    };
    let kind = SourceKind::Files {
        format: file_format,
        path: resolved,
        max_files_per_trigger,
        max_bytes_per_trigger: Some(max_bytes_per_trigger),
    };
    Ok((kind, schema))
}

/// The rate source: its rate, start and per-batch bound; its schema is fixed.
fn rate_source(at: &Locator, raw: &RawSource, key: &dyn Fn(&str) -> String) -> Result<(SourceKind, SchemaRef)> {
    let rows_per_second = match &raw.rows_per_second {
        Some(n) => positive_number(at, n, &key("rows-per-second"), "number")?,
        None => 1,
    };
    let start_us = match &raw.start_time {
        Some(text) => {
            Some(parse_timestamp(text.get_ref()).map_err(|problem| at.at(text, &key("start-time"), problem))?)
        }
        None => None,
    };
    let schema = parse_schema("timestamp TIMESTAMP NOT NULL, value BIGINT NOT NULL").map_err(|e| anyhow!(e))?;
    if let Some(given) = &raw.schema
        && parse_schema(given.get_ref()).ok().as_ref().map(|s| s.fields()) != Some(schema.fields())
    {
        return Err(at.at(given, &key("schema"), "the rate source's schema is fixed: leave it out (it is \"timestamp TIMESTAMP NOT NULL, value BIGINT NOT NULL\")"));
    }
    if let Some(bytes) = &raw.max_bytes_per_trigger {
        let problem = "only file and Kafka sources take max-bytes-per-trigger; bound the rate source's batches with max-rows-per-trigger";
        return Err(at.at(bytes, &key("max-bytes-per-trigger"), problem));
    }
    let max_rows_per_trigger = match &raw.max_rows_per_trigger {
        Some(rows) => positive(at, rows, &key("max-rows-per-trigger"), false)?,
        None => DEFAULT_MAX_ROWS_PER_TRIGGER,
    };
    Ok((SourceKind::Rate { rows_per_second, start_us, max_rows_per_trigger: Some(max_rows_per_trigger) }, schema))
}

/// The source's event-time column (a TIMESTAMP of its schema) and delay, if given.
fn watermark(
    at: &Locator,
    raw: &RawSource,
    key: &dyn Fn(&str) -> String,
    schema: &SchemaRef,
) -> Result<Option<WatermarkSpec>> {
    let Some(watermark) = &raw.watermark else { return Ok(None) };
    let column = watermark.column.get_ref();
    match schema.field_with_name(column) {
        Ok(field)
            if crate::contract::rows::contract_type(field.data_type())
                == Some(crate::contract::DataType::Timestamp) => {}
        Ok(_) => {
            return Err(at.at(
                &watermark.column,
                &key("watermark.column"),
                format!("column '{column}' is not a TIMESTAMP; event time must be a TIMESTAMP column"),
            ));
        }
        Err(_) => {
            return Err(at.at(
                &watermark.column,
                &key("watermark.column"),
                format!("column '{column}' is not in the schema"),
            ));
        }
    }
    let delay = parse_duration(watermark.delay.get_ref())
        .map_err(|problem| at.at(&watermark.delay, &key("watermark.delay"), problem))?;
    Ok(Some(WatermarkSpec { column: column.clone(), delay_us: delay.as_micros() as i64 }))
}

/// Parses an RFC 3339 timestamp into microseconds since the epoch.
fn parse_timestamp(text: &str) -> Result<i64, String> {
    arrow::compute::kernels::cast_utils::string_to_timestamp_nanos(text)
        .map(|nanos| nanos.div_euclid(1_000))
        .map_err(|_| format!("'{text}' is not a timestamp; expected RFC 3339, e.g. \"2026-11-13T08:00:00Z\""))
}

/// The kind and schema of a `format = "kafka"` source.
fn kafka_source(at: &Locator, base: &Path, index: usize, raw: &RawSource) -> Result<(SourceKind, SchemaRef)> {
    let key = |field: &str| format!("source[{index}].{field}");
    let file_only = [
        ("path", raw.path.as_ref().map(Spanned::span)),
        ("max-files-per-trigger", raw.max_files_per_trigger.as_ref().map(Spanned::span)),
        ("max-rows-per-trigger", raw.max_rows_per_trigger.as_ref().map(Spanned::span)),
        ("delimiter", raw.delimiter.as_ref().map(Spanned::span)),
        ("rows-per-second", raw.rows_per_second.as_ref().map(Spanned::span)),
        ("start-time", raw.start_time.as_ref().map(Spanned::span)),
    ];
    if let Some((name, Some(span))) = file_only.into_iter().find(|(_, span)| span.is_some()) {
        let problem = "a Kafka source does not take this key; bound its batches with max-offsets-per-trigger or max-bytes-per-trigger";
        return Err(at.error(span, &key(name), problem));
    }
    let subscription = match (&raw.topics, &raw.topic_pattern) {
        (Some(topics), None) if !topics.get_ref().is_empty() => Subscription::Topics(topics.get_ref().clone()),
        (None, Some(pattern)) => {
            regex::Regex::new(&format!("^(?:{})$", pattern.get_ref()))
                .map_err(|error| at.at(pattern, &key("topic-pattern"), format!("not a regular expression: {error}")))?;
            Subscription::Pattern(pattern.get_ref().clone())
        }
        (Some(topics), Some(_)) => {
            return Err(at.at(topics, &key("topics"), "give either topics or topic-pattern, not both"));
        }
        (Some(topics), None) => return Err(at.at(topics, &key("topics"), "expected at least one topic")),
        (None, None) => {
            return Err(at.at(
                &raw.format,
                &key("topics"),
                "a Kafka source needs topics = [\"name\", …] or topic-pattern = \"regex\"",
            ));
        }
    };
    let schema_text = raw.schema.as_ref().ok_or_else(|| {
        at.at(
            &raw.format,
            &key("schema"),
            "a Kafka source needs the schema of its JSON values, e.g. \"user STRING, amount BIGINT\"",
        )
    })?;
    let schema = parse_schema(schema_text.get_ref()).map_err(|problem| at.at(schema_text, &key("schema"), problem))?;
    let metadata_columns = match &raw.metadata_columns {
        Some(columns) => {
            if let Some(unknown) = columns.get_ref().iter().find(|c| !METADATA_COLUMNS.contains(&c.as_str())) {
                let problem =
                    format!("'{unknown}' is not Kafka metadata; expected some of {}", METADATA_COLUMNS.join(", "));
                return Err(at.at(columns, &key("metadata-columns"), problem));
            }
            if let Some(missing) = columns.get_ref().iter().find(|c| schema.index_of(c).is_err()) {
                let problem = format!("column '{missing}' is not in the schema");
                return Err(at.at(columns, &key("metadata-columns"), problem));
            }
            columns.get_ref().clone()
        }
        None => METADATA_COLUMNS.iter().filter(|c| schema.index_of(c).is_ok()).map(|c| c.to_string()).collect(),
    };
    let schema_span = schema_text;
    check_metadata_types(&schema, &metadata_columns).map_err(|problem| at.at(schema_span, &key("schema"), problem))?;
    let starting_offsets = match &raw.starting_offsets {
        Some(text) => {
            StartingOffsets::parse(text.get_ref()).map_err(|problem| at.at(text, &key("starting-offsets"), problem))?
        }
        None => StartingOffsets::Latest,
    };
    let max_offsets_per_trigger = match &raw.max_offsets_per_trigger {
        Some(n) => positive(at, n, &key("max-offsets-per-trigger"), false)?,
        None => DEFAULT_MAX_OFFSETS_PER_TRIGGER,
    };
    let max_bytes_per_trigger = match &raw.max_bytes_per_trigger {
        Some(size) => positive(at, size, &key("max-bytes-per-trigger"), true)?,
        None => DEFAULT_KAFKA_MAX_BYTES_PER_TRIGGER,
    };
    let Some(table) = &raw.kafka else {
        return Err(at.at(
            &raw.format,
            &key("kafka"),
            "a Kafka source needs [source.kafka] with \"bootstrap.servers\" = \"host:port\"",
        ));
    };
    let properties =
        KafkaProperties::from_table(table.get_ref(), base).map_err(|problem| at.at(table, &key("kafka"), problem))?;
    check_properties(
        &properties,
        &["enable.auto.commit", "enable.auto.offset.store", "auto.offset.reset", "enable.partition.eof"],
    )
    .map_err(|problem| at.at(table, &key("kafka"), problem))?;
    let spec = KafkaSourceSpec {
        subscription,
        starting_offsets,
        max_offsets_per_trigger: Some(max_offsets_per_trigger),
        max_bytes_per_trigger: Some(max_bytes_per_trigger),
        fail_on_data_loss: raw.fail_on_data_loss.unwrap_or(true),
        metadata_columns,
        properties,
    };
    Ok((SourceKind::Kafka(spec), schema))
}

/// Each metadata column must have the type its metadata has.
fn check_metadata_types(schema: &arrow::datatypes::Schema, columns: &[String]) -> Result<(), String> {
    use arrow::datatypes::{DataType, TimeUnit};
    for column in columns {
        let Ok(field) = schema.field_with_name(column) else { continue };
        let ok = match column.as_str() {
            "key" => matches!(field.data_type(), DataType::Utf8 | DataType::Binary),
            "topic" | "headers" => field.data_type() == &DataType::Utf8,
            "partition" | "offset" => field.data_type() == &DataType::Int64,
            _ => matches!(field.data_type(), DataType::Timestamp(TimeUnit::Microsecond, _)),
        };
        if !ok {
            let expected = match column.as_str() {
                "key" => "STRING or BINARY",
                "topic" => "STRING",
                "headers" => "STRING (a JSON array of {\"key\", \"value\"})",
                "partition" | "offset" => "BIGINT",
                _ => "TIMESTAMP",
            };
            return Err(format!(
                "column '{column}' holds the record's Kafka {column} and must be {expected}; rename it to read a field of the value, or set metadata-columns"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::pipeline::Pipeline;

    const SOURCE: &str = "[[source]]\nformat = \"kafka\"\ntopics = [\"in\"]\nschema = \"user STRING, key STRING\"\n\
                          [source.kafka]\n\"bootstrap.servers\" = \"b:9092\"\n\n";
    const REST: &str = "[operator]\nmodule = \"p.wasm\"\nkey = [\"user\"]\n\n\
                        [sink]\nformat = \"kafka\"\ntopic = \"out\"\n[sink.kafka]\n\"bootstrap.servers\" = \"b:9092\"\n";

    /// The spec with `from` replaced by `to`, parsed next to an (empty) module file.
    fn parse(from: &str, to: &str) -> anyhow::Result<Pipeline> {
        let spec = format!("{SOURCE}{REST}");
        assert!(spec.contains(from), "{from}");
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("p.wasm"), b"")?;
        Pipeline::parse(&dir.path().join("p.toml"), &spec.replacen(from, to, 1))
    }

    fn error(from: &str, to: &str) -> String {
        match parse(from, to) {
            Ok(_) => panic!("{to} is accepted"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn kafka_keys_are_checked_and_named() {
        let cases = [
            (
                "topics = [\"in\"]",
                "topics = [\"in\"]\ntopic-pattern = \"i.*\"",
                "source[0].topics: give either topics or topic-pattern",
            ),
            ("topics = [\"in\"]", "topic-pattern = \"(\"", "source[0].topic-pattern: not a regular expression"),
            (
                "\"bootstrap.servers\" = \"b:9092\"\n\n[operator]",
                "\"linger.ms\" = 5\n\n[operator]",
                "\"bootstrap.servers\" is missing",
            ),
            (
                "\"bootstrap.servers\" = \"b:9092\"\n\n[operator]",
                "\"bootstrap.servers\" = \"b:9092\"\n\"enable.auto.commit\" = true\n\n[operator]",
                "'enable.auto.commit' is set by eddy",
            ),
            (
                "topics = [\"in\"]",
                "topics = [\"in\"]\nstarting-offsets = \"first\"",
                "source[0].starting-offsets: 'first' is not valid",
            ),
            (
                "topics = [\"in\"]",
                "topics = [\"in\"]\npath = \"x\"",
                "source[0].path: a Kafka source does not take this key",
            ),
            (
                "user STRING, key STRING",
                "user STRING, key BIGINT",
                "column 'key' holds the record's Kafka key and must be STRING or BINARY",
            ),
            (
                "topics = [\"in\"]",
                "topics = [\"in\"]\nmetadata-columns = [\"offset\"]",
                "source[0].metadata-columns: column 'offset' is not in the schema",
            ),
            ("topic = \"out\"", "key-column = \"user\"", "sink.topic: the Kafka sink needs topic"),
            (
                "topic = \"out\"\n[sink.kafka]\n\"bootstrap.servers\" = \"b:9092\"\n",
                "topic = \"out\"\n[sink.kafka]\n\"bootstrap.servers\" = \"b:9092\"\n\"acks\" = \"1\"\n",
                "'acks' is set by eddy",
            ),
            ("topic = \"out\"", "topic = \"out\"\npath = \"o\"", "sink.path: the Kafka sink writes to a topic"),
            (
                "topic = \"out\"\n[sink.kafka]\n\"bootstrap.servers\" = \"b:9092\"\n",
                "topic = \"out\"\n[sink.kafka]\n\"bootstrap.servers\" = \"b:9092\"\n\"message.timeout.ms\" = 900000\n",
                "'message.timeout.ms' must be at most 540000",
            ),
        ];
        let valid = parse("", "").expect("the spec is valid");
        assert!(matches!(valid.sources[0].kind, crate::pipeline::SourceKind::Kafka(_)));
        for (from, to, expected) in cases {
            let error = error(from, to);
            assert!(error.contains(expected), "{to}: {error}");
        }
        let on_files = Pipeline::parse(
            Path::new("p.toml"),
            "[[source]]\nformat = \"rate\"\ntopics = [\"in\"]\n[operator]\nmodule = \"p.wasm\"\nkey = [\"value\"]\n",
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(on_files.contains("source[0].topics: only Kafka sources take this key"), "{on_files}");
    }
}
