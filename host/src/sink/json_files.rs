//! JSON-lines part files, one per batch, published by an atomic rename so a reader
//! never sees half a batch.

use std::path::PathBuf;

use anyhow::Result;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::json::LineDelimitedWriter;

use super::Sink;
use super::part_files::{PartFiles, SinkOwner, no_rows};

/// Writes `part-<batch>.jsonl` files into a directory; a batch without rows writes
/// nothing, and a replayed batch replaces its file.
pub struct JsonFileSink {
    parts: PartFiles,
}

impl JsonFileSink {
    /// A sink writing into `dir` (created if missing) for `owner`.
    pub fn new(dir: PathBuf, owner: &SinkOwner) -> Result<Self> {
        Ok(Self { parts: PartFiles::create(dir, "jsonl", owner)? })
    }
}

impl Sink for JsonFileSink {
    fn write_batch(&mut self, batch_id: u64, _schema: &SchemaRef, rows: &[RecordBatch]) -> Result<()> {
        if no_rows(rows) {
            return Ok(());
        }
        let mut writer = LineDelimitedWriter::new(Vec::new());
        for batch in rows {
            writer.write(batch)?;
        }
        writer.finish()?;
        self.parts.publish(batch_id, &writer.into_inner())?;
        Ok(())
    }

    fn description(&self) -> String {
        self.parts.description()
    }

    fn bytes_written(&self) -> u64 {
        self.parts.bytes_written()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn test_owner() -> SinkOwner {
        SinkOwner { query_id: "test-query".into(), checkpoint: "/checkpoint".into(), new_query: true }
    }

    #[test]
    fn writes_one_file_per_batch_with_rows_and_replaces_a_replayed_batch() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let out = dir.path().join("out");
        let schema = Arc::new(Schema::new(vec![
            Field::new("user", DataType::Utf8, false),
            Field::new("n", DataType::Int64, false),
        ]));
        let batch = |users: Vec<&str>, ns: Vec<i64>| {
            RecordBatch::try_new(
                schema.clone(),
                vec![Arc::new(StringArray::from(users)), Arc::new(Int64Array::from(ns))],
            )
        };
        let mut sink = JsonFileSink::new(out.clone(), &test_owner())?;
        assert_eq!(sink.description(), format!("FileSink[{}]", out.display()));
        sink.write_batch(0, &schema, &[batch(vec!["a"], vec![1])?])?;
        sink.write_batch(1, &schema, &[RecordBatch::new_empty(schema.clone())])?;
        sink.write_batch(0, &schema, &[batch(vec!["b", "c"], vec![2, 3])?])?;
        let mut names: Vec<String> = std::fs::read_dir(&out)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<Result<_, _>>()?;
        names.sort();
        assert_eq!(names, vec![crate::sink::OWNER_FILE.to_string(), "part-00000.jsonl".to_string()]);
        assert_eq!(
            std::fs::read_to_string(out.join("part-00000.jsonl"))?,
            "{\"user\":\"b\",\"n\":2}\n{\"user\":\"c\",\"n\":3}\n"
        );
        Ok(())
    }
}
