//! Byte strings stored by what they share with the one before: a part is the length
//! of the prefix it shares with the last one, then the rest.
//!
//! ```text
//! part:  shared varint | rest len varint | rest        (varints: LEB128)
//! ```
//!
//! Keys in key order share most of their bytes (a grouping key's entries differ in
//! their last bytes), and so do the values a stage writes: the change log's chunks and
//! the timer index's buckets store theirs this way.

/// Appends `bytes` as what they share with `last` and the rest; `last` becomes `bytes`.
pub(super) fn push_part(out: &mut Vec<u8>, last: &mut Vec<u8>, bytes: &[u8]) {
    let shared = shared_prefix_len(last, bytes);
    push_varint(out, shared);
    push_varint(out, bytes.len() - shared);
    out.extend_from_slice(&bytes[shared..]);
    last.truncate(shared);
    last.extend_from_slice(&bytes[shared..]);
}

/// Reads a part (see [`push_part`]) from `raw` into `last`; the bytes after it.
pub(super) fn read_part<'a>(raw: &'a [u8], last: &mut Vec<u8>) -> Option<&'a [u8]> {
    let (shared, rest) = read_varint(raw)?;
    let (len, rest) = read_varint(rest)?;
    if shared > last.len() {
        return None;
    }
    last.truncate(shared);
    last.extend_from_slice(rest.get(..len)?);
    Some(&rest[len..])
}

/// How many bytes `a` and `b` start with alike (compared a word at a time).
pub(super) fn shared_prefix_len(a: &[u8], b: &[u8]) -> usize {
    let mut shared = 0;
    for (a, b) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        let word = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().unwrap_or_default());
        let differ = word(a) ^ word(b);
        if differ != 0 {
            return shared + differ.trailing_zeros() as usize / 8;
        }
        shared += 8;
    }
    shared + a[shared..].iter().zip(&b[shared..]).take_while(|(a, b)| a == b).count()
}

/// Appends `value` as a LEB128 varint.
fn push_varint(out: &mut Vec<u8>, mut value: usize) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The LEB128 varint `raw` starts with, and the bytes after it.
fn read_varint(raw: &[u8]) -> Option<(usize, &[u8])> {
    let mut value = 0usize;
    for (at, byte) in raw.iter().enumerate().take(10) {
        value |= usize::from(byte & 0x7f).checked_shl(7 * at as u32)?;
        if byte & 0x80 == 0 {
            return Some((value, &raw[at + 1..]));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_shared_prefixes_are_what_they_say() {
        for value in [0, 1, 127, 128, 300, 16_383, 16_384, u32::MAX as usize, usize::MAX] {
            let mut out = Vec::new();
            push_varint(&mut out, value);
            out.push(42);
            assert_eq!(read_varint(&out), Some((value, &[42u8][..])), "{value}");
        }
        let base: Vec<u8> = (0..40u8).collect();
        for len in [0, 5, 8, 17, 40] {
            for differ in 0..len {
                let mut other = base[..len].to_vec();
                other[differ] ^= 0x10;
                assert_eq!(shared_prefix_len(&base, &other), differ);
                assert_eq!(shared_prefix_len(&other, &base), differ);
            }
            assert_eq!(shared_prefix_len(&base[..len], &base), len);
            assert_eq!(shared_prefix_len(&base, &base[..len]), len);
        }
        assert_eq!(read_varint(&[0xff; 11]), None, "a varint past ten bytes");
        assert_eq!(read_varint(&[0x80]), None, "a varint cut short");
    }
}
