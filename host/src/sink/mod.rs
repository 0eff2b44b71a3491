//! Sinks: where results go. Console tables and JSON-lines part files.

mod console;
mod json_files;

use anyhow::Result;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

pub use console::ConsoleSink;
pub use json_files::JsonFileSink;

use crate::pipeline::{SinkFormat, SinkSpec};

/// Receives each batch's output.
pub trait Sink {
    /// Writes the rows of batch `batch_id` (all of them, or none on error).
    fn write_batch(&mut self, batch_id: u64, schema: &SchemaRef, rows: &[RecordBatch]) -> Result<()>;
}

/// Opens the sink a spec describes.
pub fn open(spec: &SinkSpec) -> Result<Box<dyn Sink>> {
    Ok(match (spec.format, &spec.path) {
        (SinkFormat::Json, Some(path)) => Box::new(JsonFileSink::new(path.clone())?),
        (SinkFormat::Json, None) => anyhow::bail!("the json sink needs a path"),
        (SinkFormat::Console, _) => Box::new(ConsoleSink::new(std::io::stdout())),
    })
}
