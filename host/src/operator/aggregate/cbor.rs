//! The few CBOR items (RFC 8949) the aggregation stages write by hand, byte for byte
//! what serde's CBOR writer (ciborium) gives, because they are written per window.

/// Appends an item head: major type `major` (0–7) with `argument`, in its shortest form.
pub fn head(major: u8, argument: u64, out: &mut Vec<u8>) {
    let major = major << 5;
    match argument {
        0..=23 => out.push(major | argument as u8),
        24..=0xFF => out.extend_from_slice(&[major | 24, argument as u8]),
        0x100..=0xFFFF => {
            out.push(major | 25);
            out.extend_from_slice(&(argument as u16).to_be_bytes());
        }
        0x1_0000..=0xFFFF_FFFF => {
            out.push(major | 26);
            out.extend_from_slice(&(argument as u32).to_be_bytes());
        }
        _ => {
            out.push(major | 27);
            out.extend_from_slice(&argument.to_be_bytes());
        }
    }
}

/// Appends an integer (major type 0, or 1 for a negative one).
pub fn int(value: i64, out: &mut Vec<u8>) {
    if value < 0 { head(1, !(value as u64), out) } else { head(0, value as u64, out) }
}
