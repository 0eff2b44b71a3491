//! A batch's changes written to the store ahead of its commit, when they outgrow the
//! memory a transaction may hold them in (`operator.spill-state-bytes`).
//!
//! Before the first of batch N's changes goes to RocksDB, the store takes a RocksDB
//! checkpoint of its committed state (hard links to its files) into the directory
//! `<store>.before-<N>`, published by a rename. The changes then go to their families
//! as they are, with the write-ahead log but unsynced: the commit's synced write syncs
//! the log up to and with it. The commit writes the rest and the batch id as before,
//! then deletes the copy. Opening a store next to such a copy finishes the batch's
//! story: committed (the store's batch is N or later) — the copy goes; not — the copy
//! takes the store's place ([`recover`]), so the batch leaves nothing behind and is
//! run again. A reader opens the copy when there is one (the committed state).
//!
//! The store's in-memory copy of the state is set aside at the first such write (its
//! unwritten entries written first): it would not see the changes written ahead. It
//! is loaded again after the batch's commit, when the state still fits its budget.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::{Context, Result, bail};
use rocksdb::DB;

/// The name a store's copy before batch `batch_id` takes next to it.
const BEFORE: &str = ".before-";

/// Whether some batch's changes were written ahead, and where its change log goes on.
#[derive(Debug, Default)]
pub struct AheadState {
    /// The batch whose changes are in the families before its commit, if any.
    pub batch: Option<u64>,
    /// The number of that batch's next change-log chunk.
    pub next_chunk: u32,
}

/// The store's record of changes written ahead, shared by its clones and transactions.
#[derive(Clone, Debug)]
pub struct WriteAhead {
    path: PathBuf,
    state: Arc<Mutex<AheadState>>,
}

impl WriteAhead {
    /// For the store in `path`.
    pub fn new(path: &Path) -> Self {
        WriteAhead { path: path.to_path_buf(), state: Arc::default() }
    }

    /// Readies `db` for batch `batch_id`'s changes to be written ahead and returns the
    /// state to write them under (held: one writer at a time). The first time in the
    /// batch, `before_first` runs, then the committed state is copied.
    pub fn begin(
        &self,
        db: &DB,
        batch_id: u64,
        before_first: impl FnOnce() -> Result<()>,
    ) -> Result<MutexGuard<'_, AheadState>> {
        let mut state = self.lock();
        match state.batch {
            Some(batch) if batch == batch_id => return Ok(state),
            Some(batch) => bail!(uncommitted(&self.path, batch)),
            None => {}
        }
        before_first()?;
        let copy = before_dir(&self.path, batch_id);
        let temporary = temporary_dir(&copy);
        remove_half_made(&self.path)?;
        rocksdb::checkpoint::Checkpoint::new(db)?
            .create_checkpoint(&temporary)
            .with_context(|| format!("cannot copy the committed state into {}", temporary.display()))?;
        std::fs::rename(&temporary, &copy).with_context(|| format!("cannot publish {}", copy.display()))?;
        crate::util::fs::sync_parent(&copy)?;
        crate::log::debug(&format!(
            "batch {batch_id}'s state changes outgrew the memory for them: written to the store ahead of the commit \
             (the committed state kept in {}); state reads go to RocksDB until the batch commits",
            copy.display()
        ));
        *state = AheadState { batch: Some(batch_id), next_chunk: 0 };
        Ok(state)
    }

    /// The number of batch `batch_id`'s first change-log chunk its commit writes: after
    /// those written ahead. Fails when another batch's changes were written ahead and
    /// not committed.
    pub fn first_chunk(&self, batch_id: u64) -> Result<u32> {
        let state = self.lock();
        match state.batch {
            None => Ok(0),
            Some(batch) if batch == batch_id => Ok(state.next_chunk),
            Some(batch) => bail!(uncommitted(&self.path, batch)),
        }
    }

    /// After batch `batch_id` committed durably: its copy of the state before it goes
    /// (a copy that cannot be removed now goes when the store next opens).
    pub fn committed(&self, batch_id: u64) {
        let mut state = self.lock();
        if state.batch != Some(batch_id) {
            return;
        }
        *state = AheadState::default();
        let copy = before_dir(&self.path, batch_id);
        if let Err(error) = std::fs::remove_dir_all(&copy) {
            crate::log::warn(&format!(
                "cannot remove {} after batch {batch_id} committed ({error}); it goes when the query next starts",
                copy.display()
            ));
        }
    }

    fn lock(&self) -> MutexGuard<'_, AheadState> {
        // The state is replaced whole: a panic elsewhere leaves it consistent.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn uncommitted(path: &Path, batch: u64) -> String {
    format!(
        "the state store in {} holds changes of batch {batch} written ahead of a commit that did not happen; \
         run the query again: opening the store rolls them back",
        path.display()
    )
}

/// Where the copy of the store in `path` before batch `batch_id` goes.
fn before_dir(path: &Path, batch_id: u64) -> PathBuf {
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!("{name}{BEFORE}{batch_id}"))
}

/// The copy of the store in `path` from before a batch whose changes were written ahead,
/// if there is one: its batch and directory.
pub fn copy_before(path: &Path) -> Result<Option<(u64, PathBuf)>> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else { return Ok(None) };
    let prefix = format!("{}{BEFORE}", name.to_string_lossy());
    let Some(entries) = listing(parent)? else { return Ok(None) };
    let mut found = None;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", parent.display()))?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if let Some(batch) = file_name.strip_prefix(&prefix).and_then(|rest| rest.parse::<u64>().ok()) {
            if found.is_some() {
                bail!("{} holds two copies of the state store from before a batch; keep the older", parent.display());
            }
            found = Some((batch, entry.path()));
        }
    }
    Ok(found)
}

/// Where the copy `copy` is made before a rename publishes it (RocksDB makes it in
/// this name with `.tmp` added, then renames it here).
fn temporary_dir(copy: &Path) -> PathBuf {
    let name = copy.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    copy.with_file_name(format!(".{name}.tmp"))
}

/// Removes the copies a run stopped making (`.<store>.before-<N>.tmp`, and RocksDB's
/// own `….tmp.tmp`): only while the store is open (its lock held), so that another
/// run's copy in the making is never touched.
pub fn remove_half_made(path: &Path) -> Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else { return Ok(()) };
    let prefix = format!(".{}{BEFORE}", name.to_string_lossy());
    let Some(entries) = listing(parent)? else { return Ok(()) };
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", parent.display()))?;
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let half_made = entry.path();
            std::fs::remove_dir_all(&half_made)
                .with_context(|| format!("cannot remove the half-made copy {}", half_made.display()))?;
        }
    }
    Ok(())
}

/// The entries of the directory `dir`; `None` when it does not exist.
fn listing(dir: &Path) -> Result<Option<std::fs::ReadDir>> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(Some(entries)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("cannot list {}", dir.display())),
    }
}

/// Where the store goes while its copy takes its place.
fn discarded_dir(path: &Path) -> PathBuf {
    path.with_extension("discarded")
}

/// Finishes a copy's taking the place of the store in `path` ([`restore`]) that a run
/// stopped in the middle of, before the store opens.
pub fn finish_interrupted(path: &Path) -> Result<()> {
    let discarded = discarded_dir(path);
    if discarded.exists() {
        if !path.exists() {
            let Some((_, copy)) = copy_before(path)? else {
                bail!(
                    "the state store {} is missing and {} holds a store being discarded; restore it by hand",
                    path.display(),
                    discarded.display()
                );
            };
            std::fs::rename(&copy, path).with_context(|| format!("cannot move {} back", copy.display()))?;
        }
        std::fs::remove_dir_all(&discarded).with_context(|| format!("cannot remove {}", discarded.display()))?;
    }
    Ok(())
}

/// Puts the copy `copy` in the place of the store in `path` (whose batch did not commit).
pub fn restore(path: &Path, copy: &Path) -> Result<()> {
    let discarded = discarded_dir(path);
    std::fs::rename(path, &discarded).with_context(|| format!("cannot move {} aside", path.display()))?;
    std::fs::rename(copy, path).with_context(|| format!("cannot move {} into place", copy.display()))?;
    crate::util::fs::sync_parent(path)?;
    std::fs::remove_dir_all(&discarded).with_context(|| format!("cannot remove {}", discarded.display()))?;
    crate::log::info(&format!(
        "the state store in {} held changes of a batch that did not commit: rolled back to the state before it",
        path.display()
    ));
    Ok(())
}
