//! A group key's encoded bytes as the window stage holds them, window after window.
//!
//! A batch touches its open windows in an order unrelated to when their keys were
//! made, so a key behind a pointer is a cache miss each time it is read (writing a
//! window's state key, ordering and building output rows). Short keys (most: a tag,
//! a length and a few dozen bytes at most) are held inline, in the window's own slot.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// Bytes held inline: the enum is then 32 bytes, as large as the longest variant.
const INLINE: usize = 30;

/// A group key's encoded bytes; compares, orders and hashes as those bytes (so a map
/// of them is looked up by `&[u8]`).
#[derive(Clone)]
pub enum GroupKey {
    /// A key of at most [`INLINE`] bytes: the first `len` of `bytes`.
    Inline { len: u8, bytes: [u8; INLINE] },
    /// A longer key.
    Shared(Arc<[u8]>),
}

impl GroupKey {
    /// The key of `encoded`.
    pub fn new(encoded: &[u8]) -> GroupKey {
        if encoded.len() <= INLINE {
            let mut bytes = [0u8; INLINE];
            bytes[..encoded.len()].copy_from_slice(encoded);
            GroupKey::Inline { len: encoded.len() as u8, bytes }
        } else {
            GroupKey::Shared(Arc::from(encoded))
        }
    }
}

impl Deref for GroupKey {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            GroupKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            GroupKey::Shared(bytes) => bytes,
        }
    }
}

impl Borrow<[u8]> for GroupKey {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl PartialEq for GroupKey {
    fn eq(&self, other: &GroupKey) -> bool {
        **self == **other
    }
}

impl Eq for GroupKey {}

impl PartialOrd for GroupKey {
    fn partial_cmp(&self, other: &GroupKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for GroupKey {
    fn cmp(&self, other: &GroupKey) -> Ordering {
        (**self).cmp(&**other)
    }
}

impl Hash for GroupKey {
    /// As `[u8]` hashes (what `Borrow<[u8]>` requires).
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl fmt::Debug for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GroupKey({:?})", &**self)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn keys_of_any_length_read_order_and_hash_as_their_bytes() {
        let short: &[u8] = b"user-012345";
        let edge = [7u8; INLINE];
        let long = [9u8; INLINE + 1];
        assert!(matches!(GroupKey::new(&edge), GroupKey::Inline { .. }));
        assert!(matches!(GroupKey::new(&long), GroupKey::Shared(_)));
        for bytes in [&b""[..], short, &edge, &long] {
            assert_eq!(&*GroupKey::new(bytes), bytes);
        }
        // Ordered as the bytes are, whichever way each is held.
        let mut keys: Vec<GroupKey> =
            [&long[..], short, &edge, &b""[..], &long[..INLINE - 1]].map(GroupKey::new).into();
        keys.sort();
        let mut expected: Vec<&[u8]> = vec![&long, short, &edge, b"", &long[..INLINE - 1]];
        expected.sort();
        assert_eq!(keys.iter().map(|k| &**k).collect::<Vec<_>>(), expected);
        // Found in a map by their bytes.
        let map: HashMap<GroupKey, usize> =
            [short, &long[..]].iter().enumerate().map(|(i, b)| (GroupKey::new(b), i)).collect();
        assert_eq!(map.get(short), Some(&0));
        assert_eq!(map.get(&long[..]), Some(&1));
        assert_eq!(map.get(&edge[..]), None);
        assert_eq!(std::mem::size_of::<GroupKey>(), 32);
    }
}
