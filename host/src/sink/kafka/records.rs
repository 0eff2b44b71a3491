//! A batch's output rows as Kafka records: the JSON value of each row, its key and
//! topic, and the partition and sequence number that make a re-run write exactly the
//! records missing — a pure function of the rows and the topics' partition counts.

use std::collections::BTreeMap;

use anyhow::{Result, anyhow, bail};
use arrow::array::{Array, BinaryArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::json::LineDelimitedWriter;

use crate::kafka::partition_for_key;

/// One record to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct OutRecord {
    pub topic: String,
    pub partition: i32,
    /// Its number among the batch's records in the same topic and partition.
    pub sequence: u64,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
    /// A hash of key and value: a re-run checks that a record it finds written is the
    /// one it would write.
    pub hash: u64,
}

/// Which columns choose the topic and key.
pub(super) struct Columns<'a> {
    pub topic: Option<&'a str>,
    pub topic_column: Option<&'a str>,
    pub key_column: Option<&'a str>,
}

/// Rows before partitioning: topic, key and JSON value of each.
pub(super) struct Encoded {
    pub topics: Vec<String>,
    pub keys: Vec<Option<Vec<u8>>>,
    pub values: Vec<Vec<u8>>,
}

/// Encodes `rows` (of `schema`) as JSON values with their topics and keys.
pub(super) fn encode(schema: &SchemaRef, rows: &[RecordBatch], columns: &Columns<'_>) -> Result<Encoded> {
    let names = || schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ");
    let find = |column: &str, key: &str| {
        schema
            .index_of(column)
            .map_err(|_| anyhow!("sink.{key} '{column}' is not an output column (columns: {})", names()))
    };
    let topic_index = columns.topic_column.map(|c| find(c, "topic-column")).transpose()?;
    let key_index = columns.key_column.map(|c| find(c, "key-column")).transpose()?;
    if let Some(index) = topic_index
        && schema.field(index).data_type() != &DataType::Utf8
    {
        bail!("sink.topic-column '{}' must be a STRING column", schema.field(index).name());
    }
    let mut encoded = Encoded { topics: Vec::new(), keys: Vec::new(), values: Vec::new() };
    for batch in rows {
        let mut writer = LineDelimitedWriter::new(Vec::new());
        writer.write(batch)?;
        writer.finish()?;
        let text = writer.into_inner();
        encoded.values.extend(text.split(|b| *b == b'\n').filter(|line| !line.is_empty()).map(<[u8]>::to_vec));
        let keys = match key_index {
            Some(index) => key_bytes(batch.column(index).as_ref())?,
            None => vec![None; batch.num_rows()],
        };
        encoded.keys.extend(keys);
        for row in 0..batch.num_rows() {
            let topic = match (topic_index, columns.topic) {
                (Some(index), fallback) => {
                    let array = batch.column(index).as_any().downcast_ref::<StringArray>();
                    match array
                        .filter(|a| a.is_valid(row))
                        .map(|a| a.value(row).to_string())
                        .or(fallback.map(str::to_string))
                    {
                        Some(topic) if !topic.is_empty() => topic,
                        _ => bail!("sink.topic-column: a row has no topic (null or empty) and no sink.topic is set"),
                    }
                }
                (None, Some(topic)) => topic.to_string(),
                (None, None) => bail!("the Kafka sink has neither topic nor topic-column"),
            };
            encoded.topics.push(topic);
        }
    }
    if encoded.values.len() != encoded.topics.len() {
        bail!("the Kafka sink encoded {} values for {} rows", encoded.values.len(), encoded.topics.len());
    }
    Ok(encoded)
}

/// A key column's values as bytes: text as UTF-8, binary as is, others as their text.
fn key_bytes(column: &dyn Array) -> Result<Vec<Option<Vec<u8>>>> {
    if let Some(binary) = column.as_any().downcast_ref::<BinaryArray>() {
        return Ok((0..binary.len()).map(|i| binary.is_valid(i).then(|| binary.value(i).to_vec())).collect());
    }
    let text = arrow::compute::cast(column, &DataType::Utf8)?;
    let text =
        text.as_any().downcast_ref::<StringArray>().ok_or_else(|| anyhow!("the key column does not cast to text"))?;
    Ok((0..text.len()).map(|i| text.is_valid(i).then(|| text.value(i).as_bytes().to_vec())).collect())
}

/// Partitions and numbers the encoded rows of batch `batch_id`: a keyed record goes
/// where Kafka's default partitioner puts its key, a keyless one round-robin by its
/// row number (starting at the batch id, so small batches spread); sequences count per
/// topic and partition in row order. `partitions` holds each topic's count.
pub(super) fn assign(encoded: Encoded, partitions: &BTreeMap<String, i32>, batch_id: u64) -> Result<Vec<OutRecord>> {
    let mut next: BTreeMap<(String, i32), u64> = BTreeMap::new();
    let mut records = Vec::with_capacity(encoded.values.len());
    for (row, ((topic, key), value)) in encoded.topics.into_iter().zip(encoded.keys).zip(encoded.values).enumerate() {
        let count = *partitions.get(&topic).ok_or_else(|| anyhow!("topic '{topic}' has no known partition count"))?;
        let partition = match &key {
            Some(key) => partition_for_key(key, count),
            None => ((row as u64).wrapping_add(batch_id) % count.max(1) as u64) as i32,
        };
        let sequence = next.entry((topic.clone(), partition)).or_insert(0);
        let hash = record_hash(key.as_deref(), &value);
        records.push(OutRecord { topic, partition, sequence: *sequence, key, value, hash });
        *sequence += 1;
    }
    Ok(records)
}

/// A hash of a record's key (or its absence) and value.
pub(super) fn record_hash(key: Option<&[u8]>, value: &[u8]) -> u64 {
    let mut bytes = Vec::with_capacity(value.len() + key.map_or(1, |k| k.len() + 9));
    match key {
        Some(key) => {
            bytes.push(1);
            bytes.extend_from_slice(&(key.len() as u64).to_be_bytes());
            bytes.extend_from_slice(key);
        }
        None => bytes.push(0),
    }
    bytes.extend_from_slice(value);
    xxhash_rust::xxh3::xxh3_64(&bytes)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int64Array;
    use arrow::datatypes::{Field, Schema};

    use super::*;

    fn rows() -> (SchemaRef, RecordBatch) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("user", DataType::Utf8, true),
            Field::new("count", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec![Some("foobar"), None, Some("21")])),
                Arc::new(Int64Array::from(vec![1, 2, 3])),
            ],
        )
        .expect("batch");
        (schema, batch)
    }

    #[test]
    fn rows_become_json_values_keyed_and_partitioned_like_kafka() -> Result<()> {
        let (schema, batch) = rows();
        let columns = Columns { topic: Some("out"), topic_column: None, key_column: Some("user") };
        let encoded = encode(&schema, &[batch], &columns)?;
        assert_eq!(encoded.values[0], br#"{"user":"foobar","count":1}"#.to_vec());
        assert_eq!(encoded.values[1], br#"{"count":2}"#.to_vec());
        let records = assign(encoded, &BTreeMap::from([("out".to_string(), 4)]), 0)?;
        // Kafka: toPositive(murmur2(key)) % 4; murmur2("foobar") = -790332482, murmur2("21") = -973932308.
        // The keyless second row goes round-robin by its row number (1) plus the batch id (0).
        let expected = [(-790332482i32 & 0x7fff_ffff) % 4, 1, (-973932308i32 & 0x7fff_ffff) % 4];
        assert_eq!(records.iter().map(|r| r.partition).collect::<Vec<_>>(), expected);
        assert_eq!(records[1].key, None, "a null key stays null");
        let mut seen = BTreeMap::new();
        for record in &records {
            let next = seen.entry(record.partition).or_insert(0);
            assert_eq!(record.sequence, *next);
            *next += 1;
        }
        Ok(())
    }

    #[test]
    fn a_missing_key_column_is_named() {
        let (schema, batch) = rows();
        let columns = Columns { topic: Some("out"), topic_column: None, key_column: Some("nope") };
        let error = encode(&schema, &[batch], &columns).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("sink.key-column 'nope' is not an output column (columns: user, count)"), "{error}");
    }
}
