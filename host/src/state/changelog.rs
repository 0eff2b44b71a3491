//! The change log: every batch's state changes, kept (for the batches a checkpoint
//! retains) so that `eddy state read --changes` and reading the state as of an earlier
//! batch work. Written in the batch's own atomic commit.
//!
//! A batch's changes are a few large entries rather than one per change (a change is
//! then a copy into a buffer, not a second insert into RocksDB's memtable):
//!
//! ```text
//! key:    batch u64 | chunk u32
//! value:  records, each  key len u32 | key | 0 | value len u32 | value   (update)
//!                     or key len u32 | key | 1                          (delete)
//! ```
//!
//! Stores written before this format have one entry per change (`batch u64 | state key`
//! → `0 | value` or `1`); they are still read.

use std::sync::{Arc, Mutex};

use anyhow::{Result, bail};

/// How large a chunk grows before the next one starts.
const CHUNK_BYTES: usize = 4 << 20;

/// The capacity a chunk is made with: room for its last record past [`CHUNK_BYTES`].
const CHUNK_CAPACITY: usize = CHUNK_BYTES + 64 * 1024;

/// How many written chunks a [`SpareChunks`] keeps (their memory stays with the process).
const SPARE_CHUNKS_KEPT: usize = 8;

/// Chunks whose records were written to the store, kept for the next batch's records:
/// a fresh chunk's pages are each zeroed by the kernel as they are first written (about
/// 3 % of the built-in window benchmark's time), a reused one's are not.
#[derive(Clone, Debug, Default)]
pub struct SpareChunks(Arc<Mutex<Vec<Vec<u8>>>>);

impl SpareChunks {
    /// An empty chunk: a spare one if there is one.
    fn take(&self) -> Vec<u8> {
        let spare = self.0.lock().ok().and_then(|mut spare| spare.pop());
        spare.unwrap_or_else(|| Vec::with_capacity(CHUNK_CAPACITY))
    }

    /// Keeps `chunk`, whose records were written, for reuse (one of another size, or
    /// past the number kept, is dropped).
    pub fn give_back(&self, mut chunk: Vec<u8>) {
        if chunk.capacity() != CHUNK_CAPACITY {
            return;
        }
        chunk.clear();
        if let Ok(mut spare) = self.0.lock()
            && spare.len() < SPARE_CHUNKS_KEPT
        {
            spare.push(chunk);
        }
    }
}

/// The length of a chunk entry's key.
const CHUNK_KEY_LEN: usize = 12;

/// One change: the state key and its new value (`None`: deleted).
pub type Change<'a> = (&'a [u8], Option<&'a [u8]>);

/// Collects one batch's changes into change-log entries.
pub struct ChangeLogWriter {
    batch_id: u64,
    /// The chunk being filled.
    chunk: Vec<u8>,
    /// How many chunks were taken.
    taken: u32,
    /// Where full chunks come from.
    spare: SpareChunks,
}

impl ChangeLogWriter {
    /// A writer for batch `batch_id`'s changes, its chunks from `spare`.
    pub fn new(batch_id: u64, spare: SpareChunks) -> Self {
        ChangeLogWriter { batch_id, chunk: Vec::new(), taken: 0, spare }
    }

    /// Records that `key` became `value` (`None`: was deleted); returns the entry of a
    /// chunk this filled, to be written now (so whole chunks are not held until the end).
    pub fn record(&mut self, key: &[u8], value: Option<&[u8]>) -> Option<(Vec<u8>, Vec<u8>)> {
        if self.chunk.capacity() == 0 {
            self.chunk = self.spare.take();
        }
        push_record(&mut self.chunk, key, value);
        (self.chunk.len() >= CHUNK_BYTES).then(|| self.take())
    }

    /// The last chunk's entry, if it holds any change.
    pub fn finish(mut self) -> Option<(Vec<u8>, Vec<u8>)> {
        (!self.chunk.is_empty()).then(|| self.take())
    }

    fn take(&mut self) -> (Vec<u8>, Vec<u8>) {
        let key = self.next_chunk_key();
        (key, std::mem::take(&mut self.chunk))
    }

    /// The key of the next chunk entry (also for chunks of records made elsewhere,
    /// see [`ChangeRecords`]).
    pub fn next_chunk_key(&mut self) -> Vec<u8> {
        let mut key = self.batch_id.to_be_bytes().to_vec();
        key.extend_from_slice(&self.taken.to_be_bytes());
        self.taken += 1;
        key
    }
}

/// Change-log records a stage makes itself (of entries it writes unlogged, e.g. packed
/// ones, see [`packed`](super::packed)), in chunks of about [`CHUNK_BYTES`].
#[derive(Debug)]
pub struct ChangeRecords {
    chunks: Vec<Vec<u8>>,
    bytes: usize,
    spare: SpareChunks,
}

impl ChangeRecords {
    /// No records yet; chunks come from `spare`.
    pub fn new(spare: SpareChunks) -> Self {
        ChangeRecords { chunks: Vec::new(), bytes: 0, spare }
    }

    /// Records that `key` became `value` (`None`: was deleted).
    pub fn push(&mut self, key: &[u8], value: Option<&[u8]>) {
        if self.chunks.last().is_none_or(|chunk| chunk.len() >= CHUNK_BYTES) {
            // A chunk is sized once: grown by doubling it would be copied each time.
            self.chunks.push(self.spare.take());
        }
        if let Some(chunk) = self.chunks.last_mut() {
            let before = chunk.len();
            push_record(chunk, key, value);
            self.bytes += chunk.len() - before;
        }
    }

    /// The bytes the records take.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The chunks, each a whole number of records.
    pub fn into_chunks(self) -> Vec<Vec<u8>> {
        self.chunks
    }
}

/// Appends one record: `key` became `value` (`None`: was deleted).
pub fn push_record(out: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    match value {
        Some(value) => {
            out.push(0);
            out.extend_from_slice(&(value.len() as u32).to_be_bytes());
            out.extend_from_slice(value);
        }
        None => out.push(1),
    }
}

/// The records of `raw` (a chunk, or a packed entry's value); `None` if one is cut short.
pub fn records(raw: &[u8]) -> Option<Vec<Change<'_>>> {
    let mut changes = Vec::new();
    let mut rest = raw;
    while !rest.is_empty() {
        let (change, after) = next_change(rest)?;
        changes.push(change);
        rest = after;
    }
    Some(changes)
}

/// The batch a change-log entry belongs to (either format).
pub fn batch_of(raw_key: &[u8]) -> Option<u64> {
    raw_key.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes)
}

/// The batch and the changes of one change-log entry (either format).
pub fn decode_entry<'a>(raw_key: &'a [u8], raw_value: &'a [u8]) -> Result<(u64, Vec<Change<'a>>)> {
    let Some(batch) = batch_of(raw_key) else {
        bail!("a change-log key is shorter than its batch id");
    };
    if raw_key.len() != CHUNK_KEY_LEN {
        // One change per entry (stores written before chunks).
        let value = match raw_value.split_first() {
            Some((0, value)) => Some(value),
            Some((1, _)) => None,
            _ => bail!("a change-log entry of batch {batch} is corrupt"),
        };
        return Ok((batch, vec![(&raw_key[8..], value)]));
    }
    match records(raw_value) {
        Some(changes) => Ok((batch, changes)),
        None => bail!("the change log of batch {batch} is corrupt (a record is cut short)"),
    }
}

fn next_change(raw: &[u8]) -> Option<(Change<'_>, &[u8])> {
    let key_len = u32::from_be_bytes(raw.get(..4)?.try_into().ok()?) as usize;
    let key = raw.get(4..4 + key_len)?;
    let rest = &raw[4 + key_len..];
    match rest.first()? {
        0 => {
            let value_len = u32::from_be_bytes(rest.get(1..5)?.try_into().ok()?) as usize;
            let value = rest.get(5..5 + value_len)?;
            Some(((key, Some(value)), &rest[5 + value_len..]))
        }
        1 => Some(((key, None), &rest[1..])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_round_trip_across_chunks() -> Result<()> {
        let mut writer = ChangeLogWriter::new(7, SpareChunks::default());
        let big = vec![9u8; CHUNK_BYTES];
        let mut entries = Vec::new();
        entries.extend(writer.record(b"a", Some(b"1")));
        entries.extend(writer.record(b"b", None));
        assert!(entries.is_empty(), "the first chunk is not full yet");
        entries.extend(writer.record(b"c", Some(&big)));
        entries.extend(writer.record(b"d", Some(b"")));
        entries.extend(writer.finish());
        assert_eq!(entries.len(), 2, "the big value fills the first chunk");
        let mut all = Vec::new();
        for (key, value) in &entries {
            let (batch, changes) = decode_entry(key, value)?;
            assert_eq!(batch, 7);
            all.extend(changes.into_iter().map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec))));
        }
        let expected = vec![
            (b"a".to_vec(), Some(b"1".to_vec())),
            (b"b".to_vec(), None),
            (b"c".to_vec(), Some(big)),
            (b"d".to_vec(), Some(Vec::new())),
        ];
        assert_eq!(all, expected);
        // Cut short: refused, not misread.
        let (key, value) = &entries[0];
        assert!(decode_entry(key, &value[..value.len() - 1]).is_err());
        Ok(())
    }

    #[test]
    fn entries_of_the_one_change_format_are_read() -> Result<()> {
        let key = [&3u64.to_be_bytes()[..], b"state-key-of-some-length"].concat();
        assert_eq!(decode_entry(&key, b"\0v")?, (3, vec![(&b"state-key-of-some-length"[..], Some(&b"v"[..]))]));
        assert_eq!(decode_entry(&key, b"\x01")?, (3, vec![(&b"state-key-of-some-length"[..], None)]));
        Ok(())
    }
}
