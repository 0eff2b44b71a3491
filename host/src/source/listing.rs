//! Discovering a file source's input files.
//!
//! Files are expected to appear whole (written elsewhere, then moved in): a file is
//! read once, the first time a batch picks it up.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::pipeline::FileFormat;

/// One input file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct InputFile {
    /// Its name (the source's progress key; invalid UTF-8 replaced).
    pub name: String,
    /// Where it is.
    pub path: PathBuf,
}

/// The input files under `path`, in name order: the file itself when `path` is a file
/// (whatever its extension), else the directory's regular files of `format` (`.json`
/// and `.jsonl` for JSON, `.csv` for CSV), hidden files and symbolic links left out.
pub(super) fn list_files(path: &Path, format: &FileFormat) -> Result<Vec<InputFile>> {
    if path.is_file() {
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        return Ok(vec![InputFile { name, path: path.to_path_buf() }]);
    }
    if !path.exists() {
        bail!("source path {} does not exist; create the directory or fix the source's path", path.display());
    }
    let mut files = Vec::new();
    let entries =
        std::fs::read_dir(path).with_context(|| format!("cannot list source directory {}", path.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list source directory {}", path.display()))?;
        let file = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        // The directory entry's type is free. A symbolic link is not followed: it
        // could make the source read any file the process may read (into the output
        // or a dead letter), e.g. /proc/self/environ.
        let is_file = match entry.file_type() {
            Ok(kind) => kind.is_file(),
            Err(_) => std::fs::symlink_metadata(&file).is_ok_and(|meta| meta.is_file()),
        };
        if name.starts_with('.') || !has_extension_of(&file, format) || !is_file {
            continue;
        }
        files.push(InputFile { name, path: file });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// The bytes of the input file `file`, if it is a regular file. A file listed in a
/// directory is read with `follow_link` false: refused if it is a symbolic link (it
/// may have been replaced by one since it was listed). A source whose path is the
/// file itself reads it wherever its links lead.
pub(super) fn read_input(file: &Path, follow_link: bool) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let flags = if follow_link { 0 } else { libc::O_NOFOLLOW };
    let mut opened = std::fs::OpenOptions::new().read(true).custom_flags(flags).open(file)?;
    let meta = opened.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    opened.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The names of [`list_files`].
pub(super) fn list(path: &Path, format: &FileFormat) -> Result<Vec<String>> {
    Ok(list_files(path, format)?.into_iter().map(|file| file.name).collect())
}

/// Where the input file `name` of the source at `path` is.
pub(super) fn file_path(path: &Path, name: &str) -> PathBuf {
    if path.is_file() { path.to_path_buf() } else { path.join(name) }
}

fn has_extension_of(file: &Path, format: &FileFormat) -> bool {
    let extension = file.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match format {
        FileFormat::Json => matches!(extension.as_deref(), Some("json" | "jsonl")),
        FileFormat::Csv { .. } => extension.as_deref() == Some("csv"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_files_of_the_format_in_name_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["b.jsonl", "a.json", ".hidden.json", "c.csv", "d.txt", "e.JSON"] {
            std::fs::write(dir.path().join(name), "").expect("write");
        }
        std::fs::create_dir(dir.path().join("sub.json")).expect("mkdir");
        assert_eq!(list(dir.path(), &FileFormat::Json).expect("lists"), ["a.json", "b.jsonl", "e.JSON"]);
        let csv = FileFormat::Csv { header: false, delimiter: b',' };
        assert_eq!(list(dir.path(), &csv).expect("lists"), ["c.csv"]);
        let single = dir.path().join("d.txt");
        assert_eq!(list(&single, &csv).expect("lists"), ["d.txt"]);
        assert_eq!(file_path(&single, "d.txt"), single);
        let missing = list(&dir.path().join("nope"), &csv).unwrap_err().to_string();
        assert!(missing.contains("does not exist"), "{missing}");
    }

    #[test]
    fn symbolic_links_in_a_source_directory_are_neither_listed_nor_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.json"), "{}").expect("write");
        std::os::unix::fs::symlink("/proc/self/environ", dir.path().join("environ.json")).expect("symlink");
        std::os::unix::fs::symlink(dir.path().join("a.json"), dir.path().join("b.json")).expect("symlink");
        assert_eq!(list(dir.path(), &FileFormat::Json).expect("lists"), ["a.json"]);
        // A listed file replaced by a link before it is read is refused.
        let error = read_input(&dir.path().join("environ.json"), false).expect_err("a link is refused");
        assert_eq!(error.raw_os_error(), Some(libc::ELOOP), "{error}");
        assert_eq!(read_input(&dir.path().join("a.json"), false).expect("a regular file"), b"{}");
        // A source whose path is itself a link to a file reads it.
        let link = dir.path().join("b.json");
        assert_eq!(read_input(&link, true).expect("the configured file"), b"{}");
    }
}
