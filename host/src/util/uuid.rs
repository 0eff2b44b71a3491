//! Random (version 4) UUIDs for query and run ids, from the operating system's
//! random source.

use anyhow::{Context, Result};

/// A new random UUID, e.g. `8c1f7a52-5d0e-4f6b-9a3e-2b7c4d1e0f9a`.
pub fn new_uuid_v4() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("{e}")).context("cannot get random bytes for an id")?;
    Ok(format_uuid_v4(bytes))
}

/// Formats 16 random bytes as a version-4, RFC 4122-variant UUID (lowercase hex,
/// `8-4-4-4-12`), overwriting the version and variant bits.
pub fn format_uuid_v4(mut bytes: [u8; 16]) -> String {
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let mut text = String::with_capacity(36);
    for (index, byte) in bytes.iter().enumerate() {
        if matches!(index, 4 | 6 | 8 | 10) {
            text.push('-');
        }
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_the_version_and_variant_and_keeps_the_rest() {
        assert_eq!(format_uuid_v4([0; 16]), "00000000-0000-4000-8000-000000000000");
        assert_eq!(format_uuid_v4([0xff; 16]), "ffffffff-ffff-4fff-bfff-ffffffffffff");
        let bytes = [0x8c, 0x1f, 0x7a, 0x52, 0x5d, 0x0e, 0x1f, 0x6b, 0x1a, 0x3e, 0x2b, 0x7c, 0x4d, 0x1e, 0x0f, 0x9a];
        assert_eq!(format_uuid_v4(bytes), "8c1f7a52-5d0e-4f6b-9a3e-2b7c4d1e0f9a");
    }

    #[test]
    fn new_ids_are_well_formed_and_differ() -> Result<()> {
        let (a, b) = (new_uuid_v4()?, new_uuid_v4()?);
        assert_ne!(a, b);
        for id in [a, b] {
            let groups: Vec<usize> = id.split('-').map(str::len).collect();
            assert_eq!(groups, vec![8, 4, 4, 4, 12], "{id}");
            assert!(id.chars().all(|c| c == '-' || c.is_ascii_hexdigit() && !c.is_ascii_uppercase()), "{id}");
            assert_eq!(id.as_bytes()[14], b'4', "{id}");
            assert!(matches!(id.as_bytes()[19], b'8' | b'9' | b'a' | b'b'), "{id}");
        }
        Ok(())
    }
}
