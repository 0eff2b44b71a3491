//! The change log's chunks of either kind, and the entries of one change each, read
//! back as written.

use std::borrow::Cow;

use super::*;

#[test]
fn changes_round_trip_across_chunks() -> Result<()> {
    let mut writer = ChangeLogWriter::new(7, 0, SpareChunks::default());
    let big = vec![9u8; CHUNK_BYTES];
    let mut entries = Vec::new();
    entries.extend(writer.record(b"a", Some(b"1")));
    entries.extend(writer.record(b"b", None));
    assert!(entries.is_empty(), "the first chunk is not full yet");
    entries.extend(writer.record(b"c", Some(&big)));
    entries.extend(writer.record(b"d", Some(b"")));
    entries.extend(writer.finish_chunk());
    assert_eq!(entries.len(), 2, "the big value fills the first chunk");
    let mut all = Vec::new();
    for (key, value) in &entries {
        let (batch, changes) = decode_entry(key, value, View::Entries)?;
        assert_eq!(batch, 7);
        all.extend(changes.into_iter().map(|(k, v)| (k.into_owned(), v.map(Cow::into_owned))));
    }
    let expected = vec![
        (b"a".to_vec(), Some(b"1".to_vec())),
        (b"b".to_vec(), None),
        (b"c".to_vec(), Some(big)),
        (b"d".to_vec(), Some(Vec::new())),
    ];
    assert_eq!(all, expected);
    // Cut short: refused, not misread.
    let (key, value) = &entries[0];
    assert!(decode_entry(key, &value[..value.len() - 1], View::Entries).is_err());
    Ok(())
}

#[test]
fn each_view_has_its_records_in_order() -> Result<()> {
    let mut packed = Vec::new();
    push_record(&mut packed, b"w1", Some(b"a"));
    push_record(&mut packed, b"w2", Some(b"b"));
    let mut chunk = Vec::new();
    push_tagged(&mut chunk, Record::Stored, b"bucket-1", Some(b"packed"));
    push_tagged(&mut chunk, Record::Entry, b"w0", Some(b"z"));
    push_tagged(&mut chunk, Record::Packed, b"bucket-2", Some(&packed));
    push_tagged(&mut chunk, Record::Entry, b"w9", None);
    push_tagged(&mut chunk, Record::Stored, b"bucket-0", None);
    push_record(&mut chunk, b"plain", None);
    let key = [&5u64.to_be_bytes()[..], &0u32.to_be_bytes()[..]].concat();
    let entries: Vec<Change> =
        vec![(b"w0", Some(b"z")), (b"w1", Some(b"a")), (b"w2", Some(b"b")), (b"w9", None), (b"plain", None)];
    assert_eq!(decode_entry(&key, &chunk, View::Entries)?, (5, logged(&entries)));
    let stored: Vec<Change> =
        vec![(b"bucket-1", Some(b"packed")), (b"bucket-2", Some(&packed)), (b"bucket-0", None), (b"plain", None)];
    assert_eq!(decode_entry(&key, &chunk, View::Stored)?, (5, logged(&stored)));
    // An unknown tag, or a packed value whose records are cut short: refused.
    let mut unknown = chunk.clone();
    unknown[4 + b"bucket-1".len()] = 7;
    assert!(decode_entry(&key, &unknown, View::Stored).is_err());
    let mut cut = Vec::new();
    push_tagged(&mut cut, Record::Packed, b"bucket", Some(&packed[..packed.len() - 1]));
    assert!(decode_entry(&key, &cut, View::Entries).is_err());
    Ok(())
}

#[test]
fn entries_of_the_one_change_format_are_read() -> Result<()> {
    let key = [&3u64.to_be_bytes()[..], b"state-key-of-some-length"].concat();
    assert_eq!(
        decode_entry(&key, b"\0v", View::Stored)?,
        (3, logged(&[(&b"state-key-of-some-length"[..], Some(&b"v"[..]))]))
    );
    assert_eq!(decode_entry(&key, b"\x01", View::Entries)?, (3, logged(&[(&b"state-key-of-some-length"[..], None)])));
    Ok(())
}

fn logged<'a>(changes: &[Change<'a>]) -> Vec<LoggedChange<'a>> {
    changes.iter().map(|(key, value)| (Cow::Borrowed(*key), value.map(Cow::Borrowed))).collect()
}

/// A change with its key and value copied out.
type Owned = (Vec<u8>, Option<Vec<u8>>);

/// The changes of a writer's entries, in order, each chunk decoded on its own.
fn read_back(entries: &[(Vec<u8>, Vec<u8>)]) -> Result<Vec<Owned>> {
    let mut all = Vec::new();
    for (key, value) in entries {
        let (_, changes) = decode_entry(key, value, View::Stored)?;
        all.extend(changes.into_iter().map(|(k, v)| (k.into_owned(), v.map(Cow::into_owned))));
    }
    Ok(all)
}

/// The entries a writer makes of `changes` for batch `batch`.
fn written(batch: u64, changes: &[Owned]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut writer = ChangeLogWriter::new(batch, 0, SpareChunks::default());
    let mut entries = Vec::new();
    for (key, value) in changes {
        entries.extend(writer.record(key, value.as_deref()));
    }
    entries.extend(writer.finish_chunk());
    entries
}

/// The bytes `changes` take as records of the earlier chunk format.
fn plain_bytes(changes: &[Owned]) -> usize {
    changes.iter().map(|(k, v)| 4 + k.len() + 1 + v.as_ref().map_or(0, |v| 4 + v.len())).sum()
}

#[test]
fn keys_stored_by_what_they_share_with_the_key_before_read_back_whole() -> Result<()> {
    let long_key: Vec<u8> = (0..300u32).map(|n| n as u8).collect();
    let long_value = vec![7u8; 20_000];
    let changes: Vec<Owned> = vec![
        (b"op|kg|user-1|windows|100".to_vec(), Some(b"s1".to_vec())),
        (b"op|kg|user-1|windows|110".to_vec(), None),
        (b"op|kg|user-1|windows|110".to_vec(), Some(Vec::new())),
        (b"op|kg|user-1".to_vec(), Some(b"a prefix of the key before".to_vec())),
        (b"op|kg|user-10|windows|100".to_vec(), None),
        (Vec::new(), Some(b"an empty key".to_vec())),
        (long_key.clone(), Some(long_value)),
        ([&long_key[..], b"!"].concat(), None),
        (b"z".to_vec(), Some(b"nothing shared".to_vec())),
    ];
    let entries = written(9, &changes);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].0.len(), PREFIXED_CHUNK_KEY_LEN);
    assert_eq!(read_back(&entries)?, changes);
    let plain = plain_bytes(&changes);
    assert!(entries[0].1.len() < plain - 300, "{} bytes stored, {plain} in the plain records", entries[0].1.len());
    Ok(())
}

#[test]
fn values_stored_by_what_they_share_with_the_value_put_before_read_back_whole() -> Result<()> {
    let stamp = [0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
    let value = |tail: &[u8]| [&stamp[..], b"{min: ", tail].concat();
    let changes: Vec<Owned> = vec![
        (b"k1".to_vec(), Some(value(b"1, max: 9}"))),
        (b"k2".to_vec(), None),
        (b"k3".to_vec(), Some(value(b"2, max: 9}"))),
        (b"k4".to_vec(), Some(value(b"2"))),
        (b"k5".to_vec(), Some(value(b"2, max: 10}"))),
        (b"k6".to_vec(), Some(Vec::new())),
        (b"k7".to_vec(), Some(b"other".to_vec())),
        (b"k8".to_vec(), Some(b"other".to_vec())),
    ];
    let entries = written(1, &changes);
    assert_eq!(entries.len(), 1);
    assert_eq!(read_back(&entries)?, changes);
    let plain = plain_bytes(&changes);
    assert!(entries[0].1.len() + 60 < plain, "{} bytes stored, {plain} in the plain records", entries[0].1.len());
    Ok(())
}

#[test]
fn a_new_chunk_shares_nothing_with_the_last() -> Result<()> {
    let big = vec![1u8; CHUNK_BYTES];
    let mut writer = ChangeLogWriter::new(2, 4, SpareChunks::default());
    let mut entries = Vec::new();
    entries.extend(writer.record(b"state-key-1", Some(&big)));
    entries.extend(writer.record(b"state-key-2", Some(b"v")));
    entries.extend(writer.finish_chunk());
    assert_eq!(entries.len(), 2);
    assert!(entries[0].0 < entries[1].0, "chunk keys ascend");
    // The second chunk read alone (as a reader of that batch's later chunk would).
    assert_eq!(read_back(&entries[1..])?, vec![(b"state-key-2".to_vec(), Some(b"v".to_vec()))]);
    Ok(())
}

#[test]
fn corrupt_prefixed_records_are_refused() {
    let key = [&1u64.to_be_bytes()[..], &0u32.to_be_bytes()[..], &[PREFIXED]].concat();
    let mut chunk = Vec::new();
    Last::default().push(&mut chunk, b"abc", Some(b"v"));
    assert!(decode_entry(&key, &chunk, View::Stored).is_ok());
    // More shared than the key before has; a record or a varint cut short; an unknown tag.
    let mut too_shared = chunk.clone();
    Last { key: b"abcd".to_vec(), value: Vec::new() }.push(&mut too_shared, b"abcdx", None);
    assert!(decode_entry(&key, &too_shared, View::Stored).is_err());
    assert!(decode_entry(&key, &chunk[..chunk.len() - 1], View::Stored).is_err());
    assert!(decode_entry(&key, &[0x80], View::Stored).is_err());
    let mut unknown = chunk.clone();
    unknown[2 + 3] = 9;
    assert!(decode_entry(&key, &unknown, View::Stored).is_err());
}
