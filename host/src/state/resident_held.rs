//! One entry of the in-memory copy of the state ([`resident`](super::resident)).

use crate::util::prefetch;

/// One key of the copy: its key and committed value in one allocation (a read that
/// finds the key has its value in the same few cache lines), and whether the `state`
/// family differs.
pub(super) struct Held {
    /// `key len u32 | key | value`.
    bytes: Box<[u8]>,
    /// Whether `bytes` holds a value; not (a deletion the family has not had yet) only
    /// while `unwritten` is `Some(true)`.
    pub(super) has_value: bool,
    /// `Some` when the family's entry of the key differs from this one, telling whether
    /// the family holds the key (a key put and then deleted since it was last written
    /// needs nothing written, and is forgotten).
    pub(super) unwritten: Option<bool>,
}

impl Held {
    /// `key` held with `value` (`None`: none).
    pub(super) fn new(key: &[u8], value: Option<&[u8]>) -> Self {
        let mut bytes = Vec::with_capacity(4 + key.len() + value.map_or(0, <[u8]>::len));
        bytes.extend_from_slice(&(key.len() as u32).to_le_bytes());
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(value.unwrap_or_default());
        Held { bytes: bytes.into_boxed_slice(), has_value: value.is_some(), unwritten: None }
    }

    pub(super) fn key_len(&self) -> usize {
        let mut len = [0; 4];
        len.copy_from_slice(&self.bytes[..4]);
        u32::from_le_bytes(len) as usize
    }

    pub(super) fn key(&self) -> &[u8] {
        &self.bytes[4..4 + self.key_len()]
    }

    pub(super) fn value(&self) -> Option<&[u8]> {
        self.has_value.then(|| &self.bytes[4 + self.key_len()..])
    }

    /// Starts loading the entry's key and value into the CPU's caches.
    pub(super) fn prefetch(&self) {
        prefetch(&*self.bytes);
    }

    /// Whether the key is gone (deleted, and the family lacks it or has the deletion):
    /// kept only until the commit that deleted it settles.
    pub(super) fn is_dead(&self) -> bool {
        !self.has_value && self.unwritten.is_none()
    }

    /// Holds `value` (`None`: none) for the same key: in place when it is as long as the
    /// value held.
    pub(super) fn set_value(&mut self, value: Option<&[u8]>) {
        let start = 4 + self.key_len();
        match value {
            Some(value) if self.bytes.len() - start == value.len() => self.bytes[start..].copy_from_slice(value),
            _ => self.bytes = Held::new(self.key(), value).bytes,
        }
        self.has_value = value.is_some();
    }
}
