//! File-system helpers: atomic writes, and removing what interrupted ones left.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};

/// Writes `bytes` to `path` atomically: a temporary file in the same directory,
/// fsync, rename over `path`, fsync of the directory. A reader sees the old file or
/// the whole new one, never a part.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with_mode(path, bytes, 0o666)
}

/// [`write_atomic`] of a file created with the permission bits `mode` (less the
/// process's umask), e.g. `0o600` for a file only its owner may read.
pub fn write_atomic_with_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create directory {}", dir.display()))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let unique = NEXT.fetch_add(1, Ordering::Relaxed);
    let temp = dir.join(format!(".{name}.{}-{unique}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&temp)
        .with_context(|| format!("cannot create {}", temp.display()))?;
    file.write_all(bytes).with_context(|| format!("cannot write {}", temp.display()))?;
    file.sync_all().with_context(|| format!("cannot sync {}", temp.display()))?;
    drop(file);
    std::fs::rename(&temp, path).with_context(|| format!("cannot rename {} to {}", temp.display(), path.display()))?;
    sync_parent(path)
}

/// Syncs the directory that holds `path`, so that a rename or creation of `path` in it
/// survives a crash of the machine (the rename itself is only in the directory).
pub fn sync_parent(path: &Path) -> Result<()> {
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|handle| handle.sync_all())
        .with_context(|| format!("cannot sync the directory {}", dir.display()))?;
    #[cfg(test)]
    SYNCED_DIRS.with(|synced| synced.borrow_mut().push(dir.to_path_buf()));
    Ok(())
}

#[cfg(test)]
thread_local! {
    /// The directories this thread synced, for tests to check that a rename is made durable.
    pub static SYNCED_DIRS: std::cell::RefCell<Vec<std::path::PathBuf>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Deletes what interrupted atomic writes left in `dir` (a crash between writing and
/// renaming): hidden entries named `.….tmp`, files or directories. Returns how many.
/// Call it only on directories no other process writes (a checkpoint's, under its
/// store's lock).
pub fn remove_leftovers(dir: &Path) -> Result<usize> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(0) };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with('.') && name.ends_with(".tmp")) {
            continue;
        }
        let path = entry.path();
        let result = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        result.with_context(|| format!("cannot delete the leftover {}", path.display()))?;
        removed += 1;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_of_interrupted_writes_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().expect("temp dir");
        write_atomic(&dir.path().join("3"), b"kept").expect("written");
        std::fs::write(dir.path().join(".4.123-0.tmp"), "half").expect("leftover file");
        std::fs::create_dir(dir.path().join(".10.tmp")).expect("leftover snapshot");
        std::fs::write(dir.path().join(".hidden"), "kept").expect("other hidden file");
        assert_eq!(remove_leftovers(dir.path()).expect("cleaned"), 2);
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into())
            .collect();
        names.sort();
        assert_eq!(names, [".hidden", "3"]);
        assert_eq!(remove_leftovers(&dir.path().join("missing")).expect("no dir, nothing to do"), 0);
    }
}
