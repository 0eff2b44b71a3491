//! Reading a static table (`[[table]]`) when a SQL stage opens, and its fingerprint: a
//! hash of exactly the bytes read, which the batch's offsets record keeps so that a
//! batch re-run after a crash refuses a table that changed in between.

use std::path::Path;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use sha2::{Digest, Sha256};

use crate::decode::decode_file;
use crate::operator::stage::StaticTable;
use crate::pipeline::{FileFormat, TableFormat, TableSpec};
use crate::source::list_input_files;

/// Every row of a static table, and what was read.
pub(super) fn read_table(table: &TableSpec) -> Result<(Vec<RecordBatch>, StaticTable)> {
    let mut batches = Vec::new();
    let mut hasher = Sha256::new();
    hasher.update(b"eddy static table v1\0");
    for file in list_input_files(&table.path)? {
        let bytes = std::fs::read(&file).with_context(|| format!("cannot read table file {}", file.display()))?;
        // The file's name within the table's directory and its bytes, each with its length.
        let name = file.strip_prefix(&table.path).unwrap_or(&file).to_string_lossy().into_owned();
        for part in [name.as_bytes(), &bytes[..]] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
        match table.format {
            TableFormat::Parquet => batches.extend(read_parquet(&file, bytes, &table.schema)?),
            TableFormat::Csv | TableFormat::Json => {
                let format = match table.format {
                    TableFormat::Csv => FileFormat::Csv { header: true, delimiter: b',' },
                    _ => FileFormat::Json,
                };
                batches.push(decode_file(&format, &bytes, &table.schema, &file, false)?.rows);
            }
        }
    }
    let fingerprint = hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect();
    Ok((batches, StaticTable { name: table.name.clone(), path: table.path.clone(), fingerprint }))
}

/// The rows of Parquet file `file` (its `bytes`), its columns those of `schema`.
fn read_parquet(file: &Path, bytes: Vec<u8>, schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
        .with_context(|| format!("{} is not a Parquet file", file.display()))?;
    let mut batches = Vec::new();
    for batch in builder.build()? {
        let batch = batch?;
        let columns = schema
            .fields()
            .iter()
            .map(|field| {
                let column = batch.column_by_name(field.name()).with_context(|| {
                    format!("{} has no column '{}' (the table's schema names it)", file.display(), field.name())
                })?;
                arrow::compute::cast(column, field.data_type()).with_context(|| {
                    format!("{}: column '{}' cannot be read as {}", file.display(), field.name(), field.data_type())
                })
            })
            .collect::<Result<Vec<_>>>()?;
        batches.push(RecordBatch::try_new(schema.clone(), columns)?);
    }
    Ok(batches)
}
