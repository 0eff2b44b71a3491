//! How state lives in RocksDB: its column families and the byte layout of their keys
//! and values.
//!
//! Every state key starts with the operator id and the key group, so that a key
//! group's state is one contiguous range (the unit of shards and of distribution):
//!
//! ```text
//! state CF:        op u16 | key group u16 | key len u32 | key | var len u16 | var | [map user key]
//! timers CF:       op u16 | key group u16 | key len u32 | key | expiry (sortable i64)
//! timer index CF:  op u16 | expiry (sortable i64) | key group u16     → its keys
//! ```
//!
//! The timer index holds every timer, packed by expiry and key group (see
//! [`timer_buckets`](super::timer_buckets); stores of an earlier eddy hold one entry
//! per timer, `… | key group u16 | key len u32 | key`, until a restart packs them); the
//! timers CF holds them by key too only for an operator whose module lists timers
//! (`list-timers`).
//!
//! Values carry their expiry (processing time, microseconds) in front: `i64::MAX`
//! means "never". A list is one value holding every element with its own expiry.

/// The column families of the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cf {
    /// Value, list and map variables.
    State = 0,
    /// Timers, keyed by grouping key then expiry (only for operators that list them).
    Timers = 1,
    /// Timers, keyed by expiry then grouping key (for firing in time order).
    TimerIndex = 2,
    /// Store metadata: the committed batch id, source progress, the watermark.
    Meta = 3,
    /// TTL'd state entries, keyed by expiry (for eviction in time order).
    TtlIndex = 4,
}

/// The column families, in [`Cf`] order.
pub const CF_NAMES: [&str; 6] = ["state", "timers", "timer_index", "meta", "ttl_index", CHANGELOG];

/// The column family holding each batch's state changes (see [`changelog`](super::changelog)).
pub const CHANGELOG: &str = "changelog";

impl Cf {
    /// The column family's name in the store.
    pub fn name(self) -> &'static str {
        CF_NAMES[self as usize]
    }
}

/// Expiry stamp of a value without TTL.
pub const NEVER: i64 = i64::MAX;

/// Maps an `i64` onto bytes whose lexicographic order is the numeric order.
pub fn sortable_i64(value: i64) -> [u8; 8] {
    ((value as u64) ^ (1 << 63)).to_be_bytes()
}

/// The inverse of [`sortable_i64`].
pub fn from_sortable_i64(bytes: &[u8]) -> Option<i64> {
    let array: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    Some((u64::from_be_bytes(array) ^ (1 << 63)) as i64)
}

/// How many bytes of a [`key_prefix`] come before the key: operator, key group and
/// the key's length.
pub const KEY_PREFIX_HEADER: usize = 8;

/// The prefix shared by every state entry and timer of one grouping key.
pub fn key_prefix(operator: u16, key_group: u16, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(KEY_PREFIX_HEADER + key.len() + 24);
    out.extend_from_slice(&operator.to_be_bytes());
    out.extend_from_slice(&key_group.to_be_bytes());
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// The RocksDB key of a state variable of one grouping key (a map's entries extend it).
pub fn variable_key(key_prefix: &[u8], variable: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(key_prefix.len() + 2 + variable.len() + 16);
    variable_key_into(key_prefix, variable, &mut out);
    out
}

/// [`variable_key`] written into `out` (cleared first), for a key only looked at.
pub fn variable_key_into(key_prefix: &[u8], variable: &str, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(key_prefix);
    out.extend_from_slice(&(variable.len() as u16).to_be_bytes());
    out.extend_from_slice(variable.as_bytes());
}

/// A state-CF key's parts: (operator, key group, grouping key, variable, rest).
pub type StateKeyParts<'a> = (u16, u16, &'a [u8], &'a str, &'a [u8]);

/// Splits a state-CF key into its parts.
pub fn split_state_key(raw: &[u8]) -> Option<StateKeyParts<'_>> {
    let (operator, key_group, key, rest) = split_key_prefix(raw)?;
    let var_len = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?) as usize;
    let variable = std::str::from_utf8(rest.get(2..2 + var_len)?).ok()?;
    Some((operator, key_group, key, variable, &rest[2 + var_len..]))
}

/// Splits a key that starts with [`key_prefix`] into (operator, key group, key, rest).
pub fn split_key_prefix(raw: &[u8]) -> Option<(u16, u16, &[u8], &[u8])> {
    let operator = u16::from_be_bytes(raw.get(..2)?.try_into().ok()?);
    let key_group = u16::from_be_bytes(raw.get(2..4)?.try_into().ok()?);
    let key_len = u32::from_be_bytes(raw.get(4..8)?.try_into().ok()?) as usize;
    let key = raw.get(8..8 + key_len)?;
    Some((operator, key_group, key, &raw[8 + key_len..]))
}

/// The timers-CF key of one timer.
pub fn timer_key(key_prefix: &[u8], expiry: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(key_prefix.len() + 8);
    out.extend_from_slice(key_prefix);
    out.extend_from_slice(&sortable_i64(expiry));
    out
}

/// The timer-index-CF key of one timer in the layout of an earlier eddy (one entry per
/// timer): ordered by expiry across all keys.
pub fn timer_index_key(operator: u16, expiry: i64, key_group: u16, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + key.len());
    out.extend_from_slice(&operator.to_be_bytes());
    out.extend_from_slice(&sortable_i64(expiry));
    out.extend_from_slice(&key_group.to_be_bytes());
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// Splits a timer-index key into (expiry, key group, key).
pub fn split_timer_index_key(raw: &[u8]) -> Option<(i64, u16, &[u8])> {
    let expiry = from_sortable_i64(raw.get(2..10)?)?;
    let key_group = u16::from_be_bytes(raw.get(10..12)?.try_into().ok()?);
    let key_len = u32::from_be_bytes(raw.get(12..16)?.try_into().ok()?) as usize;
    Some((expiry, key_group, raw.get(16..16 + key_len)?))
}

/// The TTL-index key of a state entry that expires at `expiry`: ordered by expiry
/// across all keys, with the entry's kind (see [`StateKind`](super::StateKind)) and
/// its state-CF key.
pub fn ttl_index_key(operator: u16, expiry: i64, kind: u8, state_key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(11 + state_key.len());
    out.extend_from_slice(&operator.to_be_bytes());
    out.extend_from_slice(&sortable_i64(expiry));
    out.push(kind);
    out.extend_from_slice(state_key);
    out
}

/// Splits a TTL-index key into (expiry, kind, state key).
pub fn split_ttl_index_key(raw: &[u8]) -> Option<(i64, u8, &[u8])> {
    Some((from_sortable_i64(raw.get(2..10)?)?, *raw.get(10)?, raw.get(11..)?))
}

/// A stored value with its expiry stamp in front.
pub fn stamp(expiry: i64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + payload.len());
    out.extend_from_slice(&expiry.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Splits a stamped value into (expiry, payload).
pub fn unstamp(raw: &[u8]) -> Option<(i64, &[u8])> {
    let expiry = i64::from_be_bytes(raw.get(..8)?.try_into().ok()?);
    Some((expiry, &raw[8..]))
}

/// Encodes list elements, each with its own expiry.
pub fn encode_list<'a>(elements: impl IntoIterator<Item = (i64, &'a [u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    for (expiry, payload) in elements {
        out.extend_from_slice(&expiry.to_be_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(payload);
    }
    out
}

/// Decodes list elements as (expiry, payload); `None` when the bytes are corrupt.
pub fn decode_list(mut raw: &[u8]) -> Option<Vec<(i64, &[u8])>> {
    let mut out = Vec::new();
    while !raw.is_empty() {
        let expiry = i64::from_be_bytes(raw.get(..8)?.try_into().ok()?);
        let len = u32::from_be_bytes(raw.get(8..12)?.try_into().ok()?) as usize;
        out.push((expiry, raw.get(12..12 + len)?));
        raw = &raw[12 + len..];
    }
    Some(out)
}

/// The smallest byte string greater than every string starting with `prefix`
/// (`None` when no such bound exists, i.e. the prefix is all 0xFF).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sortable_i64_keeps_numeric_order() {
        let values = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        for pair in values.windows(2) {
            assert!(sortable_i64(pair[0]) < sortable_i64(pair[1]));
            assert_eq!(from_sortable_i64(&sortable_i64(pair[0])), Some(pair[0]));
        }
    }

    #[test]
    fn state_keys_split_back() {
        let prefix = key_prefix(3, 17, b"user-1");
        let mut raw = variable_key(&prefix, "totals");
        raw.extend_from_slice(b"map-key");
        assert_eq!(split_state_key(&raw), Some((3, 17, &b"user-1"[..], "totals", &b"map-key"[..])));
        let index = timer_index_key(3, -42, 17, b"user-1");
        assert_eq!(split_timer_index_key(&index), Some((-42, 17, &b"user-1"[..])));
        let ttl = ttl_index_key(3, 99, 2, &raw);
        assert_eq!(split_ttl_index_key(&ttl), Some((99, 2, raw.as_slice())));
    }

    #[test]
    fn lists_round_trip_and_reject_truncation() {
        let raw = encode_list([(5, &b"a"[..]), (NEVER, &b"bc"[..])]);
        assert_eq!(decode_list(&raw), Some(vec![(5, &b"a"[..]), (NEVER, &b"bc"[..])]));
        assert_eq!(decode_list(&raw[..raw.len() - 1]), None);
    }

    #[test]
    fn prefix_end_is_the_next_prefix() {
        assert_eq!(prefix_end(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_end(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xFF]), None);
    }
}
