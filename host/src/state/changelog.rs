//! The change log: every batch's state changes, kept (for the batches a checkpoint
//! retains) so that `eddy state read --changes` and reading the state as of an earlier
//! batch work. Written in the batch's own atomic commit.
//!
//! A batch's changes are a few large entries rather than one per change (a change is
//! then a copy into a buffer, not a second insert into RocksDB's memtable):
//!
//! ```text
//! key:    batch u64 | chunk u32
//! value:  records, each  key len u32 | key | tag | value len u32 | value   (tags 0, 2, 4, 5)
//!                     or key len u32 | key | tag                          (tags 1, 3, 6)
//! ```
//!
//! A record's tag says which of two views it belongs to: the entries' changes (what
//! `eddy state read --changes` shows) and the stored changes (what the `state` family
//! is written, which replaying the log repeats). Most changes are both (0 put, 1
//! delete). A stage that stores entries packed (see [`packed`](super::packed)) records
//! the packed values stored (2 put, 3 delete: stored only), each window's change (5
//! put, 6 delete: an entry's change only), and a packed value all of whose records are
//! entries' changes as one record of both (4: stored as it is; its value's records are
//! the entries' changes).
//!
//! The chunks of an entry-by-entry commit ([`ChangeLogWriter`]) hold its changes in key
//! order, each key stored as what it shares with the key before and the rest, and each
//! value as what it shares with the value put before and the rest: keys of one grouping
//! key differ in their last bytes, values of one variable often start alike (their
//! expiry, a struct's first field name), and the log is written (and synced) whole each
//! batch, so its bytes cost. Such a chunk's key has a format byte more:
//!
//! ```text
//! key:    batch u64 | chunk u32 | 1
//! value:  records, each  key part | tag | value part    (a put)
//!                     or key part | tag                 (a delete)
//! part:   shared varint | rest len varint | rest
//! ```
//!
//! (varints: LEB128; a chunk's first key and first value share nothing). Stores written
//! before have chunks of the first kind only, or one entry per change (`batch u64 |
//! state key` → `0 | value` or `1`); they are still read.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use anyhow::{Result, bail};

use super::shared_prefix::{push_part, read_part};

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

/// The length of the key of a chunk whose keys are stored by what they share with the
/// key before (its last byte is [`PREFIXED`]).
const PREFIXED_CHUNK_KEY_LEN: usize = CHUNK_KEY_LEN + 1;

/// The format byte of a chunk whose keys are stored by what they share with the key before.
const PREFIXED: u8 = 1;

/// One change: the state key and its new value (`None`: deleted).
pub type Change<'a> = (&'a [u8], Option<&'a [u8]>);

/// One change read from the log: its state key and its new value (`None`: deleted),
/// made anew when the log stores them by what they share with those before.
pub type LoggedChange<'a> = (Cow<'a, [u8]>, Option<Cow<'a, [u8]>>);

/// Collects one batch's changes into change-log entries.
pub struct ChangeLogWriter {
    batch_id: u64,
    /// The chunk being filled.
    chunk: Vec<u8>,
    /// How many chunks were taken.
    taken: u32,
    /// Where full chunks come from.
    spare: SpareChunks,
    /// The chunk's last key and value (the next are stored by what they share with them).
    last: Last,
}

impl ChangeLogWriter {
    /// A writer for batch `batch_id`'s changes from its chunk `first_chunk` on (after
    /// those written before), its chunks from `spare`.
    pub fn new(batch_id: u64, first_chunk: u32, spare: SpareChunks) -> Self {
        ChangeLogWriter { batch_id, chunk: Vec::new(), taken: first_chunk, spare, last: Last::default() }
    }

    /// The number of the next chunk.
    pub fn next_chunk(&self) -> u32 {
        self.taken
    }

    /// Records that `key` became `value` (`None`: was deleted); returns the entry of a
    /// chunk this filled, to be written now (so whole chunks are not held until the end).
    pub fn record(&mut self, key: &[u8], value: Option<&[u8]>) -> Option<(Vec<u8>, Vec<u8>)> {
        if self.chunk.capacity() == 0 {
            self.chunk = self.spare.take();
        }
        self.last.push(&mut self.chunk, key, value);
        (self.chunk.len() >= CHUNK_BYTES).then(|| self.take())
    }

    /// The last chunk's entry, if it holds any change.
    pub fn finish_chunk(&mut self) -> Option<(Vec<u8>, Vec<u8>)> {
        (!self.chunk.is_empty()).then(|| self.take())
    }

    fn take(&mut self) -> (Vec<u8>, Vec<u8>) {
        let mut key = self.next_chunk_key();
        key.push(PREFIXED);
        self.last = Last::default();
        (key, std::mem::take(&mut self.chunk))
    }

    /// The key of the next chunk entry of records made elsewhere (see [`ChangeRecords`]).
    pub fn next_chunk_key(&mut self) -> Vec<u8> {
        let mut key = self.batch_id.to_be_bytes().to_vec();
        key.extend_from_slice(&self.taken.to_be_bytes());
        self.taken += 1;
        key
    }
}

/// Change-log records a stage makes itself (of the packed entries it stores and the
/// entries they hold, see [`packed`](super::packed)), in chunks of about
/// [`CHUNK_BYTES`]; the commit stores the stored ones.
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

    /// Records that `key` became `value` (`None`: was deleted), as a record of `kind`.
    pub fn push(&mut self, kind: Record, key: &[u8], value: Option<&[u8]>) {
        if self.chunks.last().is_none_or(|chunk| chunk.len() >= CHUNK_BYTES) {
            // A chunk is sized once: grown by doubling it would be copied each time.
            self.chunks.push(self.spare.take());
        }
        if let Some(chunk) = self.chunks.last_mut() {
            let before = chunk.len();
            push_tagged(chunk, kind, key, value);
            self.bytes += chunk.len() - before;
        }
    }

    /// Takes the records out, leaving none.
    pub fn take(&mut self) -> Self {
        let chunks = std::mem::take(&mut self.chunks);
        ChangeRecords { chunks, bytes: std::mem::take(&mut self.bytes), spare: self.spare.clone() }
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

/// What a change-log record stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// A state entry's change, stored as it is (tags 0 and 1).
    Change,
    /// A change stored in the `state` family that is no entry's change of its own, e.g.
    /// of a packed value (tags 2 and 3).
    Stored,
    /// A stored packed value whose records are its entries' changes (tag 4).
    Packed,
    /// An entry's change kept in a packed value, not stored on its own (tags 5 and 6).
    Entry,
}

impl Record {
    /// The tags of a put and of a delete of this kind.
    fn tags(self) -> (u8, u8) {
        match self {
            Record::Change => (0, 1),
            Record::Stored => (2, 3),
            Record::Packed => (4, 4),
            Record::Entry => (5, 6),
        }
    }

    /// The kind and whether it puts, of `tag`.
    fn of_tag(tag: u8) -> Option<(Record, bool)> {
        Some(match tag {
            0 => (Record::Change, true),
            1 => (Record::Change, false),
            2 => (Record::Stored, true),
            3 => (Record::Stored, false),
            4 => (Record::Packed, true),
            5 => (Record::Entry, true),
            6 => (Record::Entry, false),
            _ => return None,
        })
    }
}

/// Which changes of the log a reader wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Every state entry's change (packed values seen through).
    Entries,
    /// What the `state` family is written, in order.
    Stored,
}

/// How a view shows a record.
enum Seen {
    /// As its key and value.
    Itself,
    /// As the records its value holds (a packed value's, in the entries' view).
    Through,
    /// Not at all.
    Not,
}

impl View {
    /// How this view shows a record of `kind`.
    fn sees(self, kind: Record) -> Seen {
        match (kind, self) {
            (Record::Change, _) | (Record::Stored | Record::Packed, View::Stored) | (Record::Entry, View::Entries) => {
                Seen::Itself
            }
            (Record::Packed, View::Entries) => Seen::Through,
            (Record::Stored, View::Entries) | (Record::Entry, View::Stored) => Seen::Not,
        }
    }
}

/// Appends one record: `key` became `value` (`None`: was deleted).
pub fn push_record(out: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
    push_tagged(out, Record::Change, key, value);
}

/// Appends one record of `kind` (a [`Record::Packed`] one has a value).
pub fn push_tagged(out: &mut Vec<u8>, kind: Record, key: &[u8], value: Option<&[u8]>) {
    debug_assert!(kind != Record::Packed || value.is_some(), "a packed record puts a value");
    let (put, delete) = kind.tags();
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    match value {
        Some(value) => {
            out.push(put);
            out.extend_from_slice(&(value.len() as u32).to_be_bytes());
            out.extend_from_slice(value);
        }
        None => out.push(delete),
    }
}

/// The last key and the last value put of a chunk whose records are stored by what
/// they share with them (see the module's doc).
#[derive(Default)]
struct Last {
    key: Vec<u8>,
    value: Vec<u8>,
}

impl Last {
    /// Appends one record of [`Record::Change`]: `key` became `value` (`None`: was deleted).
    fn push(&mut self, out: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
        push_part(out, &mut self.key, key);
        let (put, delete) = Record::Change.tags();
        match value {
            Some(value) => {
                out.push(put);
                push_part(out, &mut self.value, value);
            }
            None => out.push(delete),
        }
    }
}

/// The records of a chunk whose keys and values are stored by what they share with
/// those before, in `view`; `None` if one is cut short or unknown.
fn prefixed_records(raw: &[u8], view: View) -> Option<Vec<LoggedChange<'_>>> {
    let mut changes = Vec::new();
    let mut last = Last::default();
    let mut rest = raw;
    while !rest.is_empty() {
        let after = read_part(rest, &mut last.key)?;
        let (kind, puts) = Record::of_tag(*after.first()?)?;
        rest = &after[1..];
        if puts {
            rest = read_part(rest, &mut last.value)?;
        }
        let value = puts.then_some(last.value.as_slice());
        match view.sees(kind) {
            Seen::Itself => changes.push((Cow::Owned(last.key.clone()), value.map(|v| Cow::Owned(v.to_vec())))),
            Seen::Through => changes.extend(
                records(value?, View::Entries)?
                    .into_iter()
                    .map(|(k, v)| (Cow::Owned(k.to_vec()), v.map(|v| Cow::Owned(v.to_vec())))),
            ),
            Seen::Not => {}
        }
    }
    Some(changes)
}

/// The records of `raw` (a chunk, or a packed entry's value) in `view`; `None` if one
/// is cut short or unknown.
pub fn records(raw: &[u8], view: View) -> Option<Vec<Change<'_>>> {
    let mut changes = Vec::new();
    let mut rest = raw;
    while !rest.is_empty() {
        let ((kind, change), after) = next_record(rest)?;
        match view.sees(kind) {
            Seen::Itself => changes.push(change),
            Seen::Through => changes.extend(records(change.1?, View::Entries)?),
            Seen::Not => {}
        }
        rest = after;
    }
    Some(changes)
}

/// The batch a change-log entry belongs to (either format).
pub fn batch_of(raw_key: &[u8]) -> Option<u64> {
    raw_key.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes)
}

/// The batch and the changes in `view` of one change-log entry (either format).
pub fn decode_entry<'a>(raw_key: &'a [u8], raw_value: &'a [u8], view: View) -> Result<(u64, Vec<LoggedChange<'a>>)> {
    let Some(batch) = batch_of(raw_key) else {
        bail!("a change-log key is shorter than its batch id");
    };
    let changes = match (raw_key.len(), raw_key.last()) {
        (CHUNK_KEY_LEN, _) => records(raw_value, view)
            .map(|changes| changes.into_iter().map(|(k, v)| (k.into(), v.map(Cow::from))).collect()),
        (PREFIXED_CHUNK_KEY_LEN, Some(&PREFIXED)) => prefixed_records(raw_value, view),
        _ => {
            // One change per entry (stores written before chunks).
            let value = match raw_value.split_first() {
                Some((0, value)) => Some(value),
                Some((1, _)) => None,
                _ => bail!("a change-log entry of batch {batch} is corrupt"),
            };
            return Ok((batch, vec![(Cow::Borrowed(&raw_key[8..]), value.map(Cow::Borrowed))]));
        }
    };
    match changes {
        Some(changes) => Ok((batch, changes)),
        None => bail!("the change log of batch {batch} is corrupt (a record is cut short or of an unknown kind)"),
    }
}

/// The first record of `raw`, its kind, and the records after it.
fn next_record(raw: &[u8]) -> Option<((Record, Change<'_>), &[u8])> {
    let key_len = u32::from_be_bytes(raw.get(..4)?.try_into().ok()?) as usize;
    let key = raw.get(4..4 + key_len)?;
    let rest = &raw[4 + key_len..];
    let (kind, puts) = Record::of_tag(*rest.first()?)?;
    if !puts {
        return Some(((kind, (key, None)), &rest[1..]));
    }
    let value_len = u32::from_be_bytes(rest.get(1..5)?.try_into().ok()?) as usize;
    let value = rest.get(5..5 + value_len)?;
    Some(((kind, (key, Some(value))), &rest[5 + value_len..]))
}

#[cfg(test)]
#[path = "changelog_tests.rs"]
mod tests;
