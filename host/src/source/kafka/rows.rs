//! A batch's Kafka records into rows of the source's schema: values decoded as JSON
//! lines by the file decoder (so the same strict rules and bad-record reasons apply),
//! metadata columns (`key`, `topic`, `partition`, `offset`, `timestamp`, `headers`)
//! filled from the records.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use arrow::array::{
    ArrayRef, BinaryArray, Int64Array, RecordBatch, RecordBatchOptions, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Schema, SchemaRef};

use super::read::{RecordMeta, Records};
use crate::checkpoint::PartitionRange;
use crate::decode::{BadRecord, decode_file, describe_schema};
use crate::kafka::escape_bytes;
use crate::pipeline::FileFormat;

/// The rows of a batch and its bad records (with the record each came from).
pub(super) struct Decoded {
    pub rows: RecordBatch,
    pub bad: Vec<(usize, BadRecord)>,
}

/// Decodes `records` against `schema`, whose `metadata` columns come from the
/// records' metadata and the others from their JSON values. With `fail`, the first bad
/// record is an error naming its topic, partition and offset.
pub(super) fn decode(
    records: &Records,
    ranges: &[PartitionRange],
    schema: &SchemaRef,
    metadata: &[String],
    fail: bool,
    source: &str,
) -> Result<Decoded> {
    let value_schema: SchemaRef = Arc::new(Schema::new(
        schema.fields().iter().filter(|f| !metadata.contains(f.name())).cloned().collect::<Vec<_>>(),
    ));
    let (lines, mut known_bad) = value_lines(records, schema, metadata);
    let decoded = if value_schema.fields().is_empty() {
        // Only metadata is read: a record is bad only for its metadata.
        let mut bad_records: Vec<BadRecord> = known_bad
            .iter()
            .filter(|(_, known)| known.metadata)
            .map(|(index, known)| BadRecord { line: index + 1, reason: known.reason.clone(), record: String::new() })
            .collect();
        bad_records.sort_by_key(|record| record.line);
        crate::decode::Decoded { rows: RecordBatch::new_empty(value_schema.clone()), bad_records }
    } else {
        decode_file(&FileFormat::Json, &lines, &value_schema, Path::new("kafka"), true)?
    };
    let mut bad: Vec<(usize, BadRecord)> = Vec::new();
    for mut record in decoded.bad_records {
        let index = record.line - 1;
        if let Some(known) = known_bad.remove(&index) {
            record.reason = known.reason;
        }
        record.record = value_text(records, &records.metas[index]);
        bad.push((index, record));
    }
    if fail && let Some((index, record)) = bad.first() {
        let meta = &records.metas[*index];
        let range = &ranges[meta.range];
        return Err(anyhow!(
            "source '{source}': topic '{}' partition {} offset {}: bad record: {}; expected a JSON object matching the schema ({})",
            range.topic,
            range.partition,
            meta.offset,
            record.reason,
            describe_schema(&value_schema)
        ));
    }
    let bad_indices: std::collections::HashSet<usize> = bad.iter().map(|(i, _)| *i).collect();
    let good: Vec<&RecordMeta> =
        records.metas.iter().enumerate().filter(|(i, _)| !bad_indices.contains(i)).map(|(_, m)| m).collect();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let column = if metadata.contains(field.name()) {
            metadata_column(field.name(), field.data_type(), &good, ranges)
        } else {
            let index = value_schema.index_of(field.name())?;
            decoded.rows.column(index).clone()
        };
        columns.push(column);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(good.len()));
    let rows = RecordBatch::try_new_with_options(schema.clone(), columns, &options)?;
    Ok(Decoded { rows, bad })
}

/// Why a record is bad, found before its value is decoded.
struct KnownBad {
    reason: String,
    /// Bad for its metadata (whatever its value).
    metadata: bool,
}

/// Every record's value as one JSON line (a null value as `null`), and the records
/// known bad before decoding with their reasons.
fn value_lines(records: &Records, schema: &Schema, metadata: &[String]) -> (Vec<u8>, HashMap<usize, KnownBad>) {
    let mut lines = Vec::with_capacity(records.values.len() + records.metas.len());
    let mut known_bad = HashMap::new();
    let key_field = metadata.iter().any(|c| c == "key").then(|| schema.field_with_name("key").ok()).flatten();
    let key_required = key_field.is_some_and(|f| !f.is_nullable());
    let key_is_text = key_field.is_some_and(|f| f.data_type() == &DataType::Utf8);
    let mut bad = |index: usize, reason: String, metadata: bool| {
        known_bad.insert(index, KnownBad { reason, metadata });
    };
    for (index, meta) in records.metas.iter().enumerate() {
        if let Some(reason) = metadata_problem(meta, key_required, key_is_text) {
            bad(index, reason, true);
            lines.extend_from_slice(b"null\n");
            continue;
        }
        let value = meta.value.map(|(start, end)| &records.values[start..end]);
        match value {
            None => {
                bad(index, "the record has no value (null)".to_string(), false);
                lines.extend_from_slice(b"null");
            }
            Some(bytes) if bytes.contains(&b'\n') || bytes.contains(&b'\r') => {
                // Line breaks are whitespace in valid JSON (a raw one inside a string
                // is invalid): make the value one line, or leave it out as bad.
                match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                    Ok(_) => lines.extend(bytes.iter().map(|b| if *b == b'\n' || *b == b'\r' { b' ' } else { *b })),
                    Err(error) => {
                        bad(index, format!("not valid JSON: {error}"), false);
                        lines.extend_from_slice(b"null");
                    }
                }
            }
            Some(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => {
                bad(index, "the record's value is empty".to_string(), false);
                lines.extend_from_slice(b"null");
            }
            Some(bytes) => lines.extend_from_slice(bytes),
        }
        lines.push(b'\n');
    }
    (lines, known_bad)
}

/// What makes a record's metadata unreadable into its columns: a missing key for a
/// NOT NULL `key`, a key that is not UTF-8 for a STRING `key` (reading it lossily
/// would merge distinct keys), a header key that is not UTF-8 (headers are read).
fn metadata_problem(meta: &RecordMeta, key_required: bool, key_is_text: bool) -> Option<String> {
    match &meta.key {
        None if key_required => return Some("the record has no key and column 'key' is NOT NULL".to_string()),
        Some(key) if key_is_text && std::str::from_utf8(key).is_err() => {
            return Some(format!(
                "the record's key is not UTF-8 text ({}); declare column 'key' BINARY to read binary keys",
                escape_bytes(key)
            ));
        }
        _ => {}
    }
    let (position, (key, _)) =
        meta.headers.iter().enumerate().find(|(_, (key, _))| std::str::from_utf8(key).is_err())?;
    Some(format!(
        "header {} of the record has a key that is not UTF-8 ({}); column 'headers' holds keys as text",
        position + 1,
        escape_bytes(key)
    ))
}

/// A record's value as text (for errors and dead letters).
fn value_text(records: &Records, meta: &RecordMeta) -> String {
    meta.value
        .map_or_else(String::new, |(start, end)| String::from_utf8_lossy(&records.values[start..end]).into_owned())
}

/// The column of metadata `name` for `good` records.
fn metadata_column(name: &str, data_type: &DataType, good: &[&RecordMeta], ranges: &[PartitionRange]) -> ArrayRef {
    match name {
        "key" if data_type == &DataType::Binary => {
            Arc::new(good.iter().map(|m| m.key.as_deref()).collect::<BinaryArray>())
        }
        // Keys are UTF-8 here: a record with another key is bad before this.
        "key" => Arc::new(
            good.iter()
                .map(|m| m.key.as_deref().map(|k| String::from_utf8_lossy(k).into_owned()))
                .collect::<StringArray>(),
        ),
        "topic" => Arc::new(good.iter().map(|m| Some(ranges[m.range].topic.as_str())).collect::<StringArray>()),
        "partition" => {
            Arc::new(good.iter().map(|m| Some(i64::from(ranges[m.range].partition))).collect::<Int64Array>())
        }
        "offset" => Arc::new(good.iter().map(|m| Some(m.offset)).collect::<Int64Array>()),
        "headers" => Arc::new(good.iter().map(|m| Some(headers_json(m))).collect::<StringArray>()),
        _ => {
            let timezone = match data_type {
                DataType::Timestamp(_, timezone) => timezone.clone(),
                _ => None,
            };
            let micros = good.iter().map(|m| m.timestamp_ms.map(|ms| ms.saturating_mul(1000)));
            Arc::new(micros.collect::<TimestampMicrosecondArray>().with_timezone_opt(timezone))
        }
    }
}

/// A record's headers as a JSON array of `{"key", "value"}` (values as text).
fn headers_json(meta: &RecordMeta) -> String {
    let headers: Vec<serde_json::Value> = meta
        .headers
        .iter()
        .map(|(key, value)| {
            // Keys are UTF-8 here: a record with another key is bad before this.
            let key = String::from_utf8_lossy(key);
            serde_json::json!({"key": key, "value": value.as_deref().map(|v| String::from_utf8_lossy(v).into_owned())})
        })
        .collect();
    serde_json::Value::Array(headers).to_string()
}
