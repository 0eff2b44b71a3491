//! The file source: JSON-lines or CSV files in a directory (or one file), new files
//! discovered at every trigger and read in name order, each exactly once. A batch
//! takes at most max-files-per-trigger files and, in name order, files up to
//! max-bytes-per-trigger bytes (always at least one file).
//!
//! Progress, in the committed store (`Cf::Meta`):
//! `source/<index>/file/<name>` → `{"batch": N}` for every consumed file, and
//! `source/<index>/files` → `{"committed": count}`. The files each batch reads are
//! logged in `checkpoint/sources/<index>/<N>` when it is planned; its end offset
//! points there (`logOffset`), and a re-run reads exactly those files.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::dead_letter::DeadLetters;
use super::listing::{InputFile, file_path, list_files, read_input};
use super::read_ahead::{Decoding, READ_AHEAD_MAX_BYTES, ReadAhead};
use super::{Source, SourceBatch, meta_key};
use crate::checkpoint::{CheckpointDir, LoggedFile, SourceLog};
use crate::decode::{check_schema, decode_file};
use crate::pipeline::{BadRecordPolicy, FileFormat, SourceKind, SourceSpec};
use crate::state::{Cf, StateStore};

/// Files of one format under one path.
pub(super) struct FileSource {
    name: String,
    schema: SchemaRef,
    index: usize,
    format: FileFormat,
    path: PathBuf,
    max_files_per_trigger: Option<usize>,
    max_bytes_per_trigger: Option<u64>,
    on_bad_record: BadRecordPolicy,
    /// The names present when the source was bound to "available now".
    bound: Option<BTreeSet<String>>,
    log: SourceLog,
    /// Names the store showed committed (a committed file stays committed), so that
    /// each trigger looks up only the files it has not seen committed yet.
    seen_committed: RefCell<HashSet<String>>,
    /// The files of the batch last read (not committed yet), whose successors are the
    /// next batch's likely files.
    last_read: Vec<(InputFile, u64)>,
    /// The files the next batch will likely read, being read (see [`ReadAhead`]).
    read_ahead: Option<ReadAhead>,
}

/// The committed count of consumed files.
#[derive(Serialize, Deserialize)]
struct Count {
    committed: u64,
}

/// The batch that consumed a file.
#[derive(Serialize, Deserialize)]
struct Consumed {
    batch: u64,
}

impl FileSource {
    /// The file source of `spec` (whose kind must be `Files`), number `index`, logging
    /// its batches in `checkpoint`.
    pub fn open(spec: &SourceSpec, index: usize, checkpoint: &CheckpointDir) -> Result<Self> {
        let SourceKind::Files { format, path, max_files_per_trigger, max_bytes_per_trigger } = &spec.kind else {
            bail!("source '{}' is not a file source", spec.name);
        };
        if *max_files_per_trigger == Some(0) {
            bail!("source '{}': max-files-per-trigger must be at least 1", spec.name);
        }
        check_schema(format, &spec.schema).with_context(|| format!("source '{}'", spec.name))?;
        Ok(Self {
            name: spec.name.clone(),
            schema: spec.schema.clone(),
            index,
            format: format.clone(),
            path: path.clone(),
            max_files_per_trigger: *max_files_per_trigger,
            max_bytes_per_trigger: *max_bytes_per_trigger,
            on_bad_record: spec.on_bad_record.clone(),
            bound: None,
            log: checkpoint.source_log(index),
            seen_committed: RefCell::default(),
            last_read: Vec::new(),
            read_ahead: None,
        })
    }

    fn file_key(&self, name: &str) -> Vec<u8> {
        meta_key(self.index, &format!("file/{name}"))
    }

    fn count_key(&self) -> Vec<u8> {
        meta_key(self.index, "files")
    }

    fn is_committed(&self, store: &StateStore, name: &str) -> Result<bool> {
        if self.seen_committed.borrow().contains(name) {
            return Ok(true);
        }
        let committed = store.read(Cf::Meta, &self.file_key(name))?.is_some();
        if committed {
            self.seen_committed.borrow_mut().insert(name.to_string());
        }
        Ok(committed)
    }

    fn committed_count(&self, store: &StateStore) -> Result<u64> {
        let Some(raw) = store.read(Cf::Meta, &self.count_key())? else {
            return Ok(0);
        };
        let count: Count = serde_json::from_slice(&raw).with_context(|| {
            format!("source '{}': the committed file count in the state store is corrupt", self.name)
        })?;
        Ok(count.committed)
    }

    /// The next batch's files with their sizes: those not committed yet (nor `taken`:
    /// read by a batch not committed yet) and within the bound, in name order, at most
    /// max-files-per-trigger of them and up to max-bytes-per-trigger bytes (but at least
    /// one).
    fn pending(&self, store: &StateStore, taken: &HashSet<&str>) -> Result<Vec<(InputFile, u64)>> {
        let mut pending = Vec::new();
        let mut bytes = 0u64;
        for file in list_files(&self.path, &self.format).with_context(|| format!("source '{}'", self.name))? {
            if self.max_files_per_trigger.is_some_and(|max| pending.len() >= max) {
                break;
            }
            let in_bound = self.bound.as_ref().is_none_or(|bound| bound.contains(&file.name));
            if !in_bound || taken.contains(file.name.as_str()) || self.is_committed(store, &file.name)? {
                continue;
            }
            let size = std::fs::metadata(&file.path)
                .with_context(|| format!("source '{}': cannot read input file {}", self.name, file.path.display()))?
                .len();
            if !pending.is_empty() && self.max_bytes_per_trigger.is_some_and(|max| bytes + size > max) {
                break;
            }
            bytes += size;
            pending.push((file, size));
        }
        Ok(pending)
    }

    /// Whether bad records are left out (dead-lettered or skipped) rather than an error.
    fn tolerates_bad_records(&self) -> bool {
        self.on_bad_record != BadRecordPolicy::Fail
    }

    /// Reads and decodes `files` (with their sizes) as batch `batch_id`, applying the
    /// bad-record policy (taking what was read ahead for them, if it still holds).
    fn read_batch(&mut self, store: &StateStore, batch_id: u64, sized: Vec<(InputFile, u64)>) -> Result<SourceBatch> {
        let tolerate_bad = self.tolerates_bad_records();
        let mut dead_letters = DeadLetters::new(&self.name);
        let mut batches = Vec::with_capacity(sized.len());
        let mut bytes_read = 0;
        let names: Vec<(String, u64)> = sized.iter().map(|(file, size)| (file.name.clone(), *size)).collect();
        let mut ahead = self.read_ahead.take().and_then(|ahead| ahead.take(&names)).unwrap_or_default().into_iter();
        for (file, _) in &sized {
            let (bytes, decoded) = match ahead.next().flatten() {
                Some(read) => read,
                None => {
                    let bytes = read_input(&file.path, file.path == self.path).with_context(|| {
                        format!(
                            "source '{}': cannot read input file {}; a source reads only regular files in its \
                             directory, not symbolic links",
                            self.name,
                            file.path.display()
                        )
                    })?;
                    (bytes.len() as u64, decode_file(&self.format, &bytes, &self.schema, &file.path, tolerate_bad)?)
                }
            };
            bytes_read += bytes;
            dead_letters.add(&file.path, &decoded.bad_records)?;
            batches.push(decoded.rows);
        }
        if let BadRecordPolicy::DeadLetter(dir) = &self.on_bad_record {
            dead_letters.write(dir, batch_id)?;
        }
        let rows = concat_batches(&self.schema, &batches)?;
        let before = self.committed_count(store)?;
        let after = before + sized.len() as u64;
        let mut commit = Vec::with_capacity(sized.len() + 1);
        for (name, _) in &names {
            commit.push((self.file_key(name), serde_json::to_vec(&Consumed { batch: batch_id })?));
        }
        commit.push((self.count_key(), serde_json::to_vec(&Count { committed: after })?));
        self.last_read = sized;
        Ok(SourceBatch {
            rows,
            bytes: bytes_read,
            bad_records: dead_letters.count(),
            start_offset: json!({ "filesCommitted": before }),
            end_offset: json!({ "filesCommitted": after, "logOffset": batch_id }),
            latest_offset: Value::Null,
            metrics: Default::default(),
            commit,
        })
    }
}

impl Source for FileSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        format!("FileSource[{}]", self.path.display())
    }

    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn bound_to_available_now(&mut self, _store: &StateStore, _now_us: i64) -> Result<()> {
        let files = list_files(&self.path, &self.format).with_context(|| format!("source '{}'", self.name))?;
        self.bound = Some(files.into_iter().map(|file| file.name).collect());
        Ok(())
    }

    fn lift_batch_limits(&mut self) {
        self.max_files_per_trigger = None;
        self.max_bytes_per_trigger = None;
    }

    fn next_batch(&mut self, store: &StateStore, batch_id: u64, _now_us: i64) -> Result<Option<SourceBatch>> {
        let pending = self.pending(store, &HashSet::new())?;
        if pending.is_empty() {
            return Ok(None);
        }
        let logged = pending.iter().map(|(file, size)| LoggedFile { name: file.name.clone(), size: *size }).collect();
        self.log.write(batch_id, logged)?;
        self.read_batch(store, batch_id, pending).map(Some)
    }

    fn replan_batch(
        &mut self,
        store: &StateStore,
        batch_id: u64,
        _now_us: i64,
        end_offset: &Value,
    ) -> Result<Option<SourceBatch>> {
        if end_offset.is_null() {
            return Ok(None);
        }
        if end_offset.get("logOffset").and_then(Value::as_u64) != Some(batch_id) {
            bail!("source '{}': batch {batch_id}'s recorded end offset {end_offset} is not this batch's", self.name);
        }
        let mut files = Vec::new();
        for logged in self.log.read(batch_id)? {
            let name = &logged.name;
            if self.is_committed(store, name)? {
                bail!(
                    "source '{}': file {name} of batch {batch_id} is already committed; the batch cannot run again",
                    self.name
                );
            }
            let path = file_path(&self.path, name);
            let size = std::fs::metadata(&path).map(|m| m.len()).map_err(|_| {
                anyhow!(
                    "source '{}': input file {} of batch {batch_id} is gone; restore it to re-run the batch",
                    self.name,
                    path.display()
                )
            })?;
            if size != logged.size {
                bail!(
                    "source '{}': input file {} of batch {batch_id} changed since the batch was planned ({} bytes then, \
                     {size} now); restore it to re-run the batch exactly",
                    self.name,
                    path.display(),
                    logged.size
                );
            }
            files.push((InputFile { name: name.clone(), path }, size));
        }
        self.read_batch(store, batch_id, files).map(Some)
    }

    /// Starts reading ahead the files the batch after the one last read would take, if
    /// any and not too large. Only a guess: failing to make it is not an error.
    fn read_ahead(&mut self, store: &StateStore) {
        let last_read = std::mem::take(&mut self.last_read);
        let taken: HashSet<&str> = last_read.iter().map(|(file, _)| file.name.as_str()).collect();
        let Ok(next) = self.pending(store, &taken) else { return };
        if next.is_empty() || next.iter().map(|(_, size)| size).sum::<u64>() > READ_AHEAD_MAX_BYTES {
            return;
        }
        let decoding = Decoding {
            format: self.format.clone(),
            schema: self.schema.clone(),
            tolerate_bad: self.tolerates_bad_records(),
        };
        let files = next.into_iter().map(|(file, size)| (file.name, file.path, size)).collect();
        self.read_ahead = ReadAhead::start(files, decoding).ok();
    }

    fn caught_up(&self, store: &StateStore) -> Result<bool> {
        let Some(bound) = &self.bound else {
            return Ok(false);
        };
        for name in bound {
            if !self.is_committed(store, name)? && file_path(&self.path, name).is_file() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn files_left(&self, store: &StateStore) -> Result<Option<u64>> {
        let Some(bound) = &self.bound else {
            return Ok(None);
        };
        let mut left = 0;
        for name in bound {
            if !self.is_committed(store, name)? && file_path(&self.path, name).is_file() {
                left += 1;
            }
        }
        Ok(Some(left))
    }
}
