//! Where a query's checkpoint keeps its state: `state/store/` (the working RocksDB
//! store, whose `changelog` column family holds each batch's changes),
//! `state/snapshots/<N>/` (the store as of batch N) and `state/_schema` (each
//! operator's state schema, for people and tools).

use std::path::{Path, PathBuf};

/// The working store of the query checkpointed in `checkpoint`.
pub fn store_dir(checkpoint: &Path) -> PathBuf {
    checkpoint.join("state").join("store")
}

/// The directory of the state snapshots.
pub fn snapshots_dir(checkpoint: &Path) -> PathBuf {
    checkpoint.join("state").join("snapshots")
}

/// The human-readable copy of the operators' state schemas.
pub fn schema_file(checkpoint: &Path) -> PathBuf {
    checkpoint.join("state").join("_schema")
}
