//! Packed entries: many state entries of one key group kept as one RocksDB value, for a
//! stage that rewrites them together. The window stage keeps its windows packed by
//! end: a batch writes a few large values rather than one entry per window, and
//! closing the windows of an end deletes one. Readers see through them: a packed entry
//! is read as the entries it holds (their keys and values as they would be stored one
//! by one), and the change log records those entries' changes, not the packed values.
//! An entry may also be stored on its own (a stage that changed few of a packed
//! entry's entries writes just those): the entry of its own is then the newer one.
//!
//! ```text
//! key:    op u16 | key group u16 | 0u32 (no grouping key) | var len u16 | PACKED | bucket
//! value:  records as the change log writes them: key len u32 | key | 0 | value len u32 | value
//! ```

use anyhow::{Result, bail};

use super::changelog::{self, Change};
use super::layout;

/// The variable name of packed entries (no processor's variable: names are identifiers).
pub const PACKED: &str = "(packed)";

/// The key of the packed entry `bucket` of `operator` in `key_group`.
pub fn packed_key(operator: u16, key_group: u16, bucket: &[u8]) -> Vec<u8> {
    let mut key = layout::variable_key(&layout::key_prefix(operator, key_group, b""), PACKED);
    key.extend_from_slice(bucket);
    key
}

/// Whether the state key `raw` is a packed entry's.
pub fn is_packed(raw: &[u8]) -> bool {
    layout::split_state_key(raw).is_some_and(|(_, _, key, variable, _)| key.is_empty() && variable == PACKED)
}

/// Appends an entry (`key`, `value`) to a packed value being built.
pub fn pack(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    changelog::push_record(out, key, Some(value));
}

/// The entries a packed value holds, as (state key, value).
pub fn unpack(raw: &[u8]) -> Result<Vec<(&[u8], &[u8])>> {
    let Some(records) = changelog::records(raw, changelog::View::Entries) else {
        bail!("a packed state entry is corrupt (an entry is cut short)");
    };
    records
        .into_iter()
        .map(|(key, value): Change<'_>| match value {
            Some(value) => Ok((key, value)),
            None => bail!("a packed state entry is corrupt (it holds a deletion)"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_entries_unpack_to_what_was_packed() -> Result<()> {
        let window = layout::variable_key(&layout::key_prefix(3, 5, b"user-1"), "windows");
        let mut value = Vec::new();
        pack(&mut value, &window, b"first");
        pack(&mut value, b"another key", b"");
        let key = packed_key(3, 5, &7i64.to_be_bytes());
        assert!(is_packed(&key));
        assert!(!is_packed(&window));
        assert_eq!(unpack(&value)?, vec![(&window[..], &b"first"[..]), (&b"another key"[..], &b""[..])]);
        assert!(unpack(&value[..value.len() - 1]).is_err(), "cut short: refused");
        Ok(())
    }
}
