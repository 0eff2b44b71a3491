//! Parquet part files, one per batch (`part-<batch:05>.parquet`, Snappy-compressed),
//! published by an atomic rename so a reader never sees half a batch.

use std::path::PathBuf;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use super::Sink;
use super::part_files::{PartFiles, SinkOwner, no_rows};

/// Writes `part-<batch>.parquet` files into a directory; a batch without rows writes
/// nothing, and a replayed batch replaces its file.
pub struct ParquetFileSink {
    parts: PartFiles,
}

impl ParquetFileSink {
    /// A sink writing into `dir` (created if missing) for `owner`.
    pub fn new(dir: PathBuf, owner: &SinkOwner) -> Result<Self> {
        Ok(Self { parts: PartFiles::create(dir, "parquet", owner)? })
    }
}

impl Sink for ParquetFileSink {
    fn write_batch(&mut self, batch_id: u64, schema: &SchemaRef, rows: &[RecordBatch]) -> Result<()> {
        if no_rows(rows) {
            return Ok(());
        }
        let bytes = encode(schema, rows).with_context(|| format!("cannot encode batch {batch_id} as Parquet"))?;
        self.parts.publish(batch_id, &bytes)?;
        Ok(())
    }

    fn description(&self) -> String {
        self.parts.description()
    }

    fn bytes_written(&self) -> u64 {
        self.parts.bytes_written()
    }
}

/// One Parquet file holding `rows`, whose columns must match `schema`.
fn encode(schema: &SchemaRef, rows: &[RecordBatch]) -> Result<Vec<u8>> {
    let properties = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    let mut writer = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(properties))?;
    for batch in rows.iter().filter(|batch| batch.num_rows() > 0) {
        if batch.schema_ref() == schema {
            writer.write(batch)?;
        } else {
            // Same columns, but e.g. different metadata: relabel them with the sink's schema.
            let relabelled = RecordBatch::try_new(schema.clone(), batch.columns().to_vec())
                .context("the output rows do not match the output schema")?;
            writer.write(&relabelled)?;
        }
    }
    Ok(writer.into_inner()?)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};
    use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;

    use crate::sink::OWNER_FILE;

    fn test_owner() -> SinkOwner {
        SinkOwner { query_id: "test-query".into(), checkpoint: "/checkpoint".into(), new_query: true }
    }

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("sensor", DataType::Utf8, false),
            Field::new("reading", DataType::Float64, true),
            Field::new("count", DataType::Int64, false),
            Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())), true),
        ]))
    }

    fn batch(
        sensors: Vec<&str>,
        readings: Vec<Option<f64>>,
        counts: Vec<i64>,
        ts: Vec<Option<i64>>,
    ) -> Result<RecordBatch> {
        Ok(RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(StringArray::from(sensors)),
                Arc::new(Float64Array::from(readings)),
                Arc::new(Int64Array::from(counts)),
                Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("+00:00")),
            ],
        )?)
    }

    fn read_back(path: &std::path::Path) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let builder = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path)?)?;
        let schema = builder.schema().clone();
        let batches = builder.build()?.collect::<Result<Vec<_>, _>>()?;
        Ok((schema, batches))
    }

    fn file_names(dir: &std::path::Path) -> Result<Vec<String>> {
        let mut names: Vec<String> = std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<Result<_, _>>()?;
        names.sort();
        Ok(names)
    }

    #[test]
    fn round_trips_every_row_of_a_batch_through_a_parquet_file() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let out = dir.path().join("out");
        let mut sink = ParquetFileSink::new(out.clone(), &test_owner())?;
        assert_eq!(sink.description(), format!("FileSink[{}]", out.display()));
        let first =
            batch(vec!["f1", "f2"], vec![Some(104.2), None], vec![1, 2], vec![Some(1_764_403_210_000_000), None])?;
        let second = batch(vec!["f3"], vec![Some(-1.5)], vec![3], vec![Some(0)])?;
        sink.write_batch(7, &schema(), &[first.clone(), RecordBatch::new_empty(schema()), second.clone()])?;

        assert_eq!(file_names(&out)?, vec![OWNER_FILE.to_string(), "part-00007.parquet".to_string()]);
        let (read_schema, batches) = read_back(&out.join("part-00007.parquet"))?;
        assert_eq!(read_schema.fields(), schema().fields());
        let all = arrow::compute::concat_batches(&read_schema, &batches)?;
        let expected = arrow::compute::concat_batches(&schema(), &[first, second])?;
        assert_eq!(all, expected);
        let readings = all.column(1).as_any().downcast_ref::<Float64Array>().ok_or_else(|| anyhow::anyhow!("f64"))?;
        assert!(readings.is_null(1));
        Ok(())
    }

    #[test]
    fn an_empty_batch_writes_nothing_and_a_replayed_batch_replaces_its_file() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let out = dir.path().join("out");
        let mut sink = ParquetFileSink::new(out.clone(), &test_owner())?;
        sink.write_batch(0, &schema(), &[])?;
        sink.write_batch(1, &schema(), &[RecordBatch::new_empty(schema())])?;
        assert_eq!(file_names(&out)?, vec![OWNER_FILE.to_string()], "no part file");

        sink.write_batch(2, &schema(), &[batch(vec!["a", "b"], vec![None, None], vec![1, 2], vec![None, None])?])?;
        sink.write_batch(2, &schema(), &[batch(vec!["c"], vec![Some(1.0)], vec![9], vec![None])?])?;
        assert_eq!(file_names(&out)?, vec![OWNER_FILE.to_string(), "part-00002.parquet".to_string()]);
        let (_, batches) = read_back(&out.join("part-00002.parquet"))?;
        assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 1);
        let counts =
            batches[0].column(2).as_any().downcast_ref::<Int64Array>().ok_or_else(|| anyhow::anyhow!("i64"))?;
        assert_eq!(counts.value(0), 9);
        Ok(())
    }

    #[test]
    fn rows_whose_schema_differs_only_in_metadata_are_written_under_the_sink_schema() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let mut sink = ParquetFileSink::new(dir.path().to_path_buf(), &test_owner())?;
        let plain = batch(vec!["a"], vec![Some(2.0)], vec![1], vec![Some(5)])?;
        let tagged_schema = Arc::new(
            schema()
                .as_ref()
                .clone()
                .with_metadata(std::collections::HashMap::from([("k".to_string(), "v".to_string())])),
        );
        let tagged = RecordBatch::try_new(tagged_schema, plain.columns().to_vec())?;
        sink.write_batch(0, &schema(), &[tagged])?;
        let (_, batches) = read_back(&dir.path().join("part-00000.parquet"))?;
        assert_eq!(batches[0].num_rows(), 1);
        Ok(())
    }
}
