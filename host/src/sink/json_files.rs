//! JSON-lines part files, one per batch, published by an atomic rename so a reader
//! never sees half a batch.

use std::path::PathBuf;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::json::LineDelimitedWriter;

use super::Sink;

/// Writes `part-<batch>.jsonl` files into a directory.
pub struct JsonFileSink {
    dir: PathBuf,
}

impl JsonFileSink {
    /// A sink writing into `dir` (created if missing).
    pub fn new(dir: PathBuf) -> Result<Self> {
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create sink directory {}", dir.display()))?;
        Ok(Self { dir })
    }
}

impl Sink for JsonFileSink {
    fn write_batch(&mut self, batch_id: u64, _schema: &SchemaRef, rows: &[RecordBatch]) -> Result<()> {
        if rows.iter().all(|batch| batch.num_rows() == 0) {
            return Ok(());
        }
        let mut writer = LineDelimitedWriter::new(Vec::new());
        for batch in rows {
            writer.write(batch)?;
        }
        writer.finish()?;
        let file = self.dir.join(format!("part-{batch_id:05}.jsonl"));
        crate::fsutil::write_atomic(&file, &writer.into_inner())
    }
}
