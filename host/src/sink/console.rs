//! A readable table per batch, like Spark's console sink.

use std::io::Write;

use anyhow::Result;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::util::pretty::pretty_format_batches;

use super::Sink;

/// Prints each batch as a table.
pub struct ConsoleSink<W: Write> {
    out: W,
}

impl<W: Write> ConsoleSink<W> {
    /// A console sink writing to `out`.
    pub fn new(out: W) -> Self {
        Self { out }
    }
}

impl<W: Write> Sink for ConsoleSink<W> {
    fn write_batch(&mut self, batch_id: u64, schema: &SchemaRef, rows: &[RecordBatch]) -> Result<()> {
        let rule = "-".repeat(43);
        writeln!(self.out, "{rule}\nBatch: {batch_id}\n{rule}")?;
        if rows.iter().all(|batch| batch.num_rows() == 0) {
            let empty = RecordBatch::new_empty(schema.clone());
            writeln!(self.out, "{}", pretty_format_batches(&[empty])?)?;
        } else {
            writeln!(self.out, "{}", pretty_format_batches(rows)?)?;
        }
        writeln!(self.out)?;
        self.out.flush()?;
        Ok(())
    }
}
