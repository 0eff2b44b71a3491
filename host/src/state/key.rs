//! Grouping keys: the bytes a key is stored under, its key group, and its values.
//!
//! A key part is a tag byte and a payload; integers and timestamps are big-endian
//! with the sign bit flipped, so keys of one type sort in value order.

use arrow::array::{Array, ArrayRef, Int64Array, StringArray};
use xxhash_rust::xxh3::xxh3_64;

use super::layout::{from_sortable_i64, sortable_i64};
use crate::contract::Scalar;
use crate::contract::rows::scalar_at;

const NULL: u8 = 0;
const BOOLEAN: u8 = 1;
const INT64: u8 = 2;
const FLOAT64: u8 = 3;
const UTF8: u8 = 4;
const BINARY: u8 = 5;
const TIMESTAMP: u8 = 6;

/// Appends the encoding of row `row` of the key columns to `out` (strings and
/// integers straight from the arrays, without building scalars).
pub fn encode_row(columns: &[ArrayRef], row: usize, out: &mut Vec<u8>) {
    for column in columns {
        if column.is_null(row) {
            out.push(NULL);
        } else if let Some(strings) = column.as_any().downcast_ref::<StringArray>() {
            var_len(UTF8, strings.value(row).as_bytes(), out);
        } else if let Some(integers) = column.as_any().downcast_ref::<Int64Array>() {
            out.push(INT64);
            out.extend_from_slice(&sortable_i64(integers.value(row)));
        } else {
            encode_scalar(&scalar_at(column, row), out);
        }
    }
}

/// The hash of an encoded key; its key group is this modulo the key-group count.
pub fn hash(encoded: &[u8]) -> u64 {
    xxh3_64(encoded)
}

/// Encodes a whole key.
pub fn encode(key: &[Scalar]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in key {
        encode_scalar(part, &mut out);
    }
    out
}

fn encode_scalar(value: &Scalar, out: &mut Vec<u8>) {
    match value {
        Scalar::Null => out.push(NULL),
        Scalar::Boolean(b) => out.extend_from_slice(&[BOOLEAN, u8::from(*b)]),
        Scalar::Int64(v) => {
            out.push(INT64);
            out.extend_from_slice(&sortable_i64(*v));
        }
        Scalar::Float64(v) => {
            out.push(FLOAT64);
            out.extend_from_slice(&v.to_bits().to_be_bytes());
        }
        Scalar::Utf8(s) => var_len(UTF8, s.as_bytes(), out),
        Scalar::Binary(b) => var_len(BINARY, b, out),
        Scalar::Timestamp(v) => {
            out.push(TIMESTAMP);
            out.extend_from_slice(&sortable_i64(*v));
        }
    }
}

fn var_len(tag: u8, bytes: &[u8], out: &mut Vec<u8>) {
    out.push(tag);
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// Decodes an encoded key back into its values; `None` when the bytes are not a key.
pub fn decode(mut raw: &[u8]) -> Option<Vec<Scalar>> {
    let mut parts = Vec::new();
    while let Some((&tag, rest)) = raw.split_first() {
        let fixed = |rest: &[u8]| -> Option<[u8; 8]> { rest.get(..8)?.try_into().ok() };
        let (part, used) = match tag {
            NULL => (Scalar::Null, 0),
            BOOLEAN => (Scalar::Boolean(*rest.first()? != 0), 1),
            INT64 => (Scalar::Int64(from_sortable_i64(rest)?), 8),
            FLOAT64 => (Scalar::Float64(f64::from_bits(u64::from_be_bytes(fixed(rest)?))), 8),
            TIMESTAMP => (Scalar::Timestamp(from_sortable_i64(rest)?), 8),
            UTF8 | BINARY => {
                let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
                let bytes = rest.get(4..4 + len)?;
                let part = if tag == UTF8 {
                    Scalar::Utf8(String::from_utf8(bytes.to_vec()).ok()?)
                } else {
                    Scalar::Binary(bytes.to_vec())
                };
                (part, 4 + len)
            }
            _ => return None,
        };
        parts.push(part);
        raw = &rest[used..];
    }
    Some(parts)
}

/// The string at part `index` of an encoded key, borrowed from it (no decoding of the
/// other parts into values): `Some(None)` when that part is not a string or the key
/// has fewer parts; `None` when the bytes up to it are not a key.
pub fn str_part(mut raw: &[u8], index: usize) -> Option<Option<&str>> {
    let mut position = 0;
    while let Some((&tag, rest)) = raw.split_first() {
        let used = match tag {
            NULL => 0,
            BOOLEAN => 1,
            INT64 | FLOAT64 | TIMESTAMP => 8,
            UTF8 | BINARY => 4 + u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize,
            _ => return None,
        };
        let part = rest.get(..used)?;
        if position == index {
            return Some(if tag == UTF8 { Some(std::str::from_utf8(&part[4..]).ok()?) } else { None });
        }
        raw = &rest[used..];
        position += 1;
    }
    Some(None)
}

/// The key group an encoded key belongs to (stable across runs and versions).
pub fn key_group(encoded: &[u8], key_groups: u16) -> u16 {
    group_of_hash(hash(encoded), key_groups)
}

/// The key group of a key with hash `hash`.
pub fn group_of_hash(hash: u64, key_groups: u16) -> u16 {
    (hash % u64::from(key_groups.max(1))) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        let key = vec![
            Scalar::Utf8("alice".into()),
            Scalar::Int64(-3),
            Scalar::Null,
            Scalar::Boolean(true),
            Scalar::Float64(2.5),
            Scalar::Binary(vec![0, 255]),
            Scalar::Timestamp(1_700_000_000_000_000),
        ];
        let encoded = encode(&key);
        assert_eq!(decode(&encoded), Some(key));
        assert_eq!(decode(&encoded[..encoded.len() - 1]), None);
        assert_eq!(str_part(&encoded, 0), Some(Some("alice")));
        for not_a_string in [1, 2, 5, 7] {
            assert_eq!(str_part(&encoded, not_a_string), Some(None), "part {not_a_string}");
        }
        assert_eq!(str_part(&encoded[..3], 0), None, "a cut string");
        assert_eq!(str_part(&encoded[..encoded.len() - 1], 6), None, "a cut timestamp");
        let second = encode(&[Scalar::Int64(7), Scalar::Utf8("bob".into())]);
        assert_eq!(str_part(&second, 1), Some(Some("bob")));
    }

    #[test]
    fn integer_keys_sort_by_value() {
        assert!(encode(&[Scalar::Int64(-1)]) < encode(&[Scalar::Int64(1)]));
        assert_eq!(crate::contract::rows::key_label(&[Scalar::Utf8("a".into()), Scalar::Int64(2)]), r#"["a",2]"#);
    }
}
