//! File-system helpers.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};

/// Writes `bytes` to `path` atomically: a temporary file in the same directory,
/// fsync, rename over `path`, fsync of the directory. A reader sees the old file or
/// the whole new one, never a part.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create directory {}", dir.display()))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let unique = NEXT.fetch_add(1, Ordering::Relaxed);
    let temp = dir.join(format!(".{name}.{}-{unique}.tmp", std::process::id()));
    let mut file = std::fs::File::create(&temp).with_context(|| format!("cannot create {}", temp.display()))?;
    file.write_all(bytes).with_context(|| format!("cannot write {}", temp.display()))?;
    file.sync_all().with_context(|| format!("cannot sync {}", temp.display()))?;
    drop(file);
    std::fs::rename(&temp, path).with_context(|| format!("cannot rename {} to {}", temp.display(), path.display()))?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("cannot sync {}", dir.display()))?;
    Ok(())
}
