//! Parquet part files, one per batch (`part-<batch:05>.parquet`, Snappy-compressed),
//! published by an atomic rename so a reader never sees half a batch.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{ArrowLeafColumn, compute_leaves};
use parquet::basic::Compression;
use parquet::file::properties::{DEFAULT_MAX_ROW_GROUP_ROW_COUNT, WriterProperties};
use rayon::prelude::*;

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

/// Rows per row group (the Parquet writer's default): more rows make several groups.
const ROW_GROUP_ROWS: usize = DEFAULT_MAX_ROW_GROUP_ROW_COUNT;

/// One Parquet file holding `rows`, whose columns must match `schema`.
fn encode(schema: &SchemaRef, rows: &[RecordBatch]) -> Result<Vec<u8>> {
    encode_in_groups(schema, rows, ROW_GROUP_ROWS)
}

/// [`encode`] with row groups of at most `group_rows` rows. The columns of each row
/// group are encoded in parallel: dictionary encoding and compression are most of a
/// sink's work, and the query waits for it.
fn encode_in_groups(schema: &SchemaRef, rows: &[RecordBatch], group_rows: usize) -> Result<Vec<u8>> {
    let properties = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    // The Arrow writer puts the Arrow schema into the file's metadata; its parts then
    // write the row groups.
    let (mut file, columns) =
        ArrowWriter::try_new(Vec::new(), schema.clone(), Some(properties))?.into_serialized_writer()?;
    let mut batches = Vec::with_capacity(rows.len());
    for batch in rows.iter().filter(|batch| batch.num_rows() > 0) {
        if batch.schema_ref() == schema {
            batches.push(batch.clone());
        } else {
            // Same columns, but e.g. different metadata: relabel them with the sink's schema.
            batches.push(
                RecordBatch::try_new(schema.clone(), batch.columns().to_vec())
                    .context("the output rows do not match the output schema")?,
            );
        }
    }
    for (index, group) in row_groups(&batches, group_rows).into_iter().enumerate() {
        let writers = columns.create_column_writers(index)?;
        // Each writer's leaf column (a nested column has several) of every batch.
        let mut leaves: Vec<Vec<ArrowLeafColumn>> = writers.iter().map(|_| Vec::new()).collect();
        for batch in &group {
            let mut batch_leaves = Vec::with_capacity(leaves.len());
            for (field, column) in schema.fields().iter().zip(batch.columns()) {
                batch_leaves.extend(compute_leaves(field, column)?);
            }
            if batch_leaves.len() != leaves.len() {
                bail!("the output rows have {} leaf columns where the schema has {}", batch_leaves.len(), leaves.len());
            }
            for (column, leaf) in leaves.iter_mut().zip(batch_leaves) {
                column.push(leaf);
            }
        }
        let chunks = writers
            .into_par_iter()
            .zip(leaves)
            .map(|(mut writer, leaves)| {
                for leaf in &leaves {
                    writer.write(leaf)?;
                }
                writer.close()
            })
            .collect::<parquet::errors::Result<Vec<_>>>()?;
        let mut row_group = file.next_row_group()?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
    }
    Ok(file.into_inner()?)
}

/// `batches` cut into groups of at most `max_rows` rows (at least one; slices, not
/// copies).
fn row_groups(batches: &[RecordBatch], max_rows: usize) -> Vec<Vec<RecordBatch>> {
    let max_rows = max_rows.max(1);
    let (mut groups, mut group, mut room) = (Vec::new(), Vec::new(), max_rows);
    for batch in batches {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let take = room.min(batch.num_rows() - offset);
            group.push(batch.slice(offset, take));
            offset += take;
            room -= take;
            if room == 0 {
                groups.push(std::mem::take(&mut group));
                room = max_rows;
            }
        }
    }
    if !group.is_empty() {
        groups.push(group);
    }
    groups
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
    fn rows_past_a_row_group_fill_several_groups_in_order() -> Result<()> {
        let first = batch(vec!["a", "b", "c"], vec![Some(1.0), None, Some(3.0)], vec![1, 2, 3], vec![None; 3])?;
        let second = batch(vec!["d", "e"], vec![None, Some(5.0)], vec![4, 5], vec![Some(4), Some(5)])?;
        let bytes = encode_in_groups(&schema(), &[first.clone(), second.clone()], 2)?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))?;
        let groups: Vec<i64> = builder.metadata().row_groups().iter().map(|group| group.num_rows()).collect();
        assert_eq!(groups, vec![2, 2, 1]);
        let read = builder.build()?.collect::<Result<Vec<_>, _>>()?;
        let all = arrow::compute::concat_batches(&schema(), &read)?;
        assert_eq!(all, arrow::compute::concat_batches(&schema(), &[first, second])?);
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
