//! Kafka's default partitioner for keyed records: murmur2 of the key bytes, made
//! positive, modulo the partition count — the same partition Java and librdkafka's
//! `murmur2_random` pick, so eddy's output lands where other producers' would.

/// The partition of a record with `key` in a topic of `partitions` partitions.
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    let positive = murmur2(key) & 0x7fff_ffff;
    (positive % partitions.max(1) as u32) as i32
}

/// Kafka's murmur2 (seed 0x9747b28c), as `org.apache.kafka.common.utils.Utils.murmur2`.
pub fn murmur2(data: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len();
    let mut h = SEED ^ length as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from Apache Kafka's `UtilsTest.testMurmur2` (as signed ints there).
    #[test]
    fn murmur2_matches_kafkas_reference_values() {
        let cases: [(&str, i32); 7] = [
            ("21", -973932308),
            ("foobar", -790332482),
            ("a-little-bit-long-string", -985981536),
            ("a-little-bit-longer-string", -1486304829),
            ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
            ("abc", 479470107),
            ("", 275646681),
        ];
        for (text, expected) in cases {
            assert_eq!(murmur2(text.as_bytes()) as i32, expected, "murmur2({text:?})");
        }
    }

    #[test]
    fn partitions_are_in_range() {
        for key in ["a", "b", "user-000123", ""] {
            let partition = partition_for_key(key.as_bytes(), 4);
            assert!((0..4).contains(&partition));
        }
        // Kafka: toPositive(murmur2("foobar")) % 4.
        assert_eq!(partition_for_key(b"foobar", 4), ((-790332482i32 & 0x7fffffff) % 4));
    }
}
