//! Sources: where input records come from. Today: JSON-lines files.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The input files under `path`: the file itself, or a directory's `*.json` and
/// `*.jsonl` files (not hidden ones) in name order.
pub fn list_input_files(path: &Path) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let entries = std::fs::read_dir(path).with_context(|| format!("cannot list source directory {}", path.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list source directory {}", path.display()))?;
        let file = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_json = matches!(file.extension().and_then(|e| e.to_str()), Some("json" | "jsonl"));
        if is_json && !name.starts_with('.') && file.is_file() {
            files.push(file);
        }
    }
    files.sort();
    Ok(files)
}
