//! The part-file directory shared by the file sinks: one `part-<batch:05>.<ext>` per
//! batch, published by an atomic rename so that a reader never sees half a batch, and
//! replaced atomically when a batch is replayed.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// A directory of part files with one extension.
#[derive(Clone, Debug)]
pub struct PartFiles {
    dir: PathBuf,
    extension: &'static str,
}

impl PartFiles {
    /// The part files with `extension` (no dot) in `dir`, which is created if missing.
    pub fn create(dir: PathBuf, extension: &'static str) -> Result<Self> {
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create sink directory {}", dir.display()))?;
        Ok(Self { dir, extension })
    }

    /// The output directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file that holds batch `batch_id`.
    pub fn path_of(&self, batch_id: u64) -> PathBuf {
        self.dir.join(format!("part-{batch_id:05}.{}", self.extension))
    }

    /// Publishes `bytes` as batch `batch_id`'s part file: written to a temporary file
    /// in the same directory, synced, then renamed over any earlier version.
    pub fn publish(&self, batch_id: u64, bytes: &[u8]) -> Result<PathBuf> {
        let path = self.path_of(batch_id);
        crate::util::fs::write_atomic(&path, bytes)
            .with_context(|| format!("cannot publish batch {batch_id} to {}", path.display()))?;
        Ok(path)
    }

    /// How progress names this sink: `FileSink[<dir>]`, like Spark.
    pub fn description(&self) -> String {
        format!("FileSink[{}]", self.dir.display())
    }
}

/// Whether `rows` hold no row at all.
pub fn no_rows(rows: &[arrow::array::RecordBatch]) -> bool {
    rows.iter().all(|batch| batch.num_rows() == 0)
}
