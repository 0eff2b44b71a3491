//! Reading the next batch's files ahead: while a batch runs, a thread reads and decodes
//! the files the next batch will most likely take (the file source's guess), so that
//! batch finds them decoded — the decoding then fills a core the batch leaves idle
//! (its commit and sink write on one). Nothing is planned or recorded by the guess: a
//! batch takes the files read ahead only when it planned exactly those (names and
//! sizes), and a file whose size or modification time changed since, or that the
//! thread could not read or decode, is read again by the batch itself,
//! so that its error is the batch's own. The thread decodes on its one core (the batch
//! running beside it has the others).

use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::SystemTime;

use arrow::datatypes::SchemaRef;

use super::listing::read_input;
use crate::decode::{Cores, Decoded, decode_file_on};
use crate::pipeline::FileFormat;

/// A batch reads ahead only files of at most this many bytes in total: the decoded
/// rows are held beside the running batch's.
pub const READ_AHEAD_MAX_BYTES: u64 = 64 << 20;

/// One file as read ahead: its bytes' count and its records.
pub type ReadFile = (u64, Decoded);

/// A file as read ahead, with its modification time seen before it was read.
type Read = (ReadFile, SystemTime);

/// How the files are decoded.
#[derive(Clone)]
pub struct Decoding {
    pub format: FileFormat,
    pub schema: SchemaRef,
    pub tolerate_bad: bool,
}

/// Files being read ahead on a thread of their own.
pub struct ReadAhead {
    /// The files' names, paths and sizes, in order.
    files: Vec<(String, PathBuf, u64)>,
    thread: JoinHandle<Vec<Option<Read>>>,
}

impl ReadAhead {
    /// Starts reading `files` (name, path, size), in order.
    pub fn start(files: Vec<(String, PathBuf, u64)>, decoding: Decoding) -> std::io::Result<ReadAhead> {
        let paths: Vec<PathBuf> = files.iter().map(|(_, path, _)| path.clone()).collect();
        let thread = std::thread::Builder::new().name("eddy-read-ahead".into()).spawn(move || {
            paths
                .iter()
                .map(|path| {
                    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
                    let bytes = read_input(path, false).ok()?;
                    let (format, schema) = (&decoding.format, &decoding.schema);
                    let decoded =
                        decode_file_on(Cores::One, format, &bytes, schema, path, decoding.tolerate_bad).ok()?;
                    Some(((bytes.len() as u64, decoded), modified))
                })
                .collect()
        })?;
        Ok(ReadAhead { files, thread })
    }

    /// Each of `files` (name, size) as read ahead (`None`: to be read by the batch), if
    /// they are exactly the files read ahead; `None` (the guess dropped) otherwise. A
    /// file whose size or modification time is not what it was when read ahead is
    /// read by the batch.
    pub fn take(self, files: &[(String, u64)]) -> Option<Vec<Option<ReadFile>>> {
        let same = self.files.len() == files.len()
            && self
                .files
                .iter()
                .zip(files)
                .all(|((name, _, size), (planned, planned_size))| name == planned && size == planned_size);
        if !same {
            return None;
        }
        let read = self.thread.join().ok()?;
        Some(
            read.into_iter()
                .zip(&self.files)
                .map(|(file, (_, path, size))| {
                    let ((bytes, decoded), modified) = file?;
                    let now = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
                    (bytes == *size && now == modified).then_some((bytes, decoded))
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::parse_schema;

    fn decoding() -> Decoding {
        let schema = parse_schema("user STRING").expect("schema");
        Decoding { format: FileFormat::Json, schema, tolerate_bad: false }
    }

    fn users(read: &Option<ReadFile>) -> Option<usize> {
        read.as_ref().map(|(_, decoded)| decoded.rows.num_rows())
    }

    #[test]
    fn files_are_taken_as_read_ahead_unless_other_files_or_changed() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
        std::fs::write(&a, "{\"user\":\"a\"}\n{\"user\":\"a\"}\n")?;
        std::fs::write(&b, "{\"user\":\"b\"}\n")?;
        let files = || vec![("a".to_string(), a.clone(), 26), ("b".to_string(), b.clone(), 13)];
        let planned = [("a".to_string(), 26), ("b".to_string(), 13)];
        // As planned: both taken, decoded.
        let taken = ReadAhead::start(files(), decoding())?.take(&planned).expect("the files read ahead");
        assert_eq!(taken.iter().map(users).collect::<Vec<_>>(), [Some(2), Some(1)]);
        // Other files planned: the guess is dropped.
        assert!(ReadAhead::start(files(), decoding())?.take(&planned[..1]).is_none());
        // Modified after it was read (same size): that file is read by the batch.
        let ahead = ReadAhead::start(files(), decoding())?;
        std::thread::sleep(std::time::Duration::from_millis(100));
        std::fs::write(&b, "{\"user\":\"c\"}\n")?;
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options().write(true).open(&b)?.set_modified(later)?;
        let taken = ahead.take(&planned).expect("the files read ahead");
        assert_eq!(taken.iter().map(users).collect::<Vec<_>>(), [Some(2), None]);
        Ok(())
    }
}
