//! Sinks: where results go. Console tables, JSON-lines and Parquet part files, and
//! Kafka topics.

mod console;
mod json_files;
mod kafka;
mod parquet_files;
mod part_files;

use anyhow::Result;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

pub use console::{ConsoleSink, DEFAULT_NUM_ROWS, TRUNCATE_WIDTH};
pub use json_files::JsonFileSink;
pub use kafka::KafkaSink;
pub use parquet_files::ParquetFileSink;
pub use part_files::{DEAD_LETTER_DIR, OWNER_FILE, OwnedDir, PartFiles, SinkOwner, claim};

use crate::pipeline::{SinkFormat, SinkSpec};

/// Receives each batch's output.
pub trait Sink {
    /// Writes the rows of batch `batch_id` (all of them, or none on error). Writing a
    /// batch id again (a replayed batch) replaces what the first write left.
    fn write_batch(&mut self, batch_id: u64, schema: &SchemaRef, rows: &[RecordBatch]) -> Result<()>;

    /// Batch `batch_id` was re-run after a crash although the sink's manifest says it
    /// was already published: file sinks keep what they have (the default); the
    /// console shows it again, marked as a replay.
    fn replay_batch(&mut self, batch_id: u64, schema: &SchemaRef, rows: &[RecordBatch]) -> Result<()> {
        let _ = (batch_id, schema, rows);
        Ok(())
    }

    /// How progress names this sink, e.g. `FileSink[/out]` or `ConsoleSink`.
    fn description(&self) -> String;

    /// The bytes this sink has written since it was opened (0 when it does not count).
    fn bytes_written(&self) -> u64 {
        0
    }
}

/// Opens the sink a spec describes, for the query `owner`.
pub fn open(spec: &SinkSpec, owner: &SinkOwner) -> Result<Box<dyn Sink>> {
    Ok(match (spec.format, &spec.path) {
        (SinkFormat::Console, _) => {
            Box::new(ConsoleSink::with_options(std::io::stdout(), spec.num_rows, spec.truncate))
        }
        (SinkFormat::Json, Some(path)) => Box::new(JsonFileSink::new(path.clone(), owner)?),
        (SinkFormat::Parquet, Some(path)) => Box::new(ParquetFileSink::new(path.clone(), owner)?),
        (SinkFormat::Kafka, _) => match &spec.kafka {
            Some(kafka) => Box::new(KafkaSink::new(kafka, owner)?),
            None => anyhow::bail!("the Kafka sink needs [sink.kafka] with \"bootstrap.servers\""),
        },
        (SinkFormat::Json | SinkFormat::Parquet, None) => {
            anyhow::bail!("the {} sink needs a path: set [sink] path to an output directory", format_name(spec.format))
        }
    })
}

fn format_name(format: SinkFormat) -> &'static str {
    match format {
        SinkFormat::Console => "console",
        SinkFormat::Json => "json",
        SinkFormat::Parquet => "parquet",
        SinkFormat::Kafka => "kafka",
    }
}
