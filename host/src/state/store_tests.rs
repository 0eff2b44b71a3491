//! Tests of the state store and its transactions.

use std::borrow::Cow;
use std::collections::BTreeMap;

use rocksdb::IteratorMode;

use super::*;
use crate::pipeline::CHANGE_OVERHEAD_BYTES;
use crate::util::draws::Draws;

/// A change's key and new value (`None`: deleted).
type Logged = (Vec<u8>, Option<Vec<u8>>);

/// The change log's entries (chunks), each as its batch and changes.
fn logged(store: &StateStore) -> Result<Vec<(u64, Vec<Logged>)>> {
    let handle = store.cf_handle(CHANGELOG)?;
    let mut entries = Vec::new();
    for item in store.db.iterator_cf(handle, IteratorMode::Start) {
        let (key, value) = item?;
        let (batch, changes) = super::super::changelog::decode_entry(&key, &value, View::Entries)?;
        entries.push((batch, changes.into_iter().map(|(k, v)| (k.into_owned(), v.map(Cow::into_owned))).collect()));
    }
    Ok(entries)
}

#[test]
fn prefetched_values_are_read_like_gets_and_the_transaction_writes_win() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = StateStore::open(dir.path())?;
    let mut committed = store.begin();
    committed.put(Cf::State, b"a".to_vec(), b"1".to_vec());
    committed.put(Cf::State, b"b".to_vec(), b"2".to_vec());
    store.commit(committed, 0)?;

    let mut txn = store.begin();
    txn.put(Cf::State, b"b".to_vec(), b"3".to_vec());
    txn.prefetch_state(vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()])?;
    // Committed behind the transaction's back: the prefetched value is what it read.
    let mut other = store.begin();
    other.put(Cf::State, b"a".to_vec(), b"changed".to_vec());
    store.commit(other, 1)?;
    assert_eq!(txn.get(Cf::State, b"a")?, Some(b"1".to_vec()), "prefetched");
    assert_eq!(txn.get(Cf::State, b"b")?, Some(b"3".to_vec()), "the transaction's own write");
    assert_eq!(txn.get(Cf::State, b"c")?, None, "absent");
    txn.delete(Cf::State, b"a".to_vec());
    assert_eq!(txn.get(Cf::State, b"a")?, None, "deleted in the transaction");
    // A later prefetch replaces the earlier one; other keys are read from the store.
    txn.prefetch_state(vec![b"c".to_vec()])?;
    assert_eq!(txn.get(Cf::State, b"b")?, Some(b"3".to_vec()));
    let fresh = store.begin();
    assert_eq!(fresh.get(Cf::State, b"a")?, Some(b"changed".to_vec()));
    Ok(())
}

#[test]
fn the_transaction_counts_what_it_buffers() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = StateStore::open(dir.path())?;
    let mut txn = store.begin();
    assert_eq!(txn.buffered_bytes(), 0);
    txn.put(Cf::State, b"key".to_vec(), vec![0; 100]);
    assert_eq!(txn.buffered_bytes(), 103 + CHANGE_OVERHEAD_BYTES);
    // Overwriting replaces what the key held; a delete keeps only the key.
    txn.put(Cf::State, b"key".to_vec(), vec![0; 10]);
    assert_eq!(txn.buffered_bytes(), 13 + CHANGE_OVERHEAD_BYTES);
    txn.delete(Cf::State, b"key".to_vec());
    assert_eq!(txn.buffered_bytes(), 3 + CHANGE_OVERHEAD_BYTES);
    txn.put(Cf::Timers, b"t".to_vec(), Vec::new());
    assert_eq!(txn.buffered_bytes(), 4 + 2 * CHANGE_OVERHEAD_BYTES);
    assert_eq!((txn.changes(Cf::State), txn.changes(Cf::Timers), txn.changes(Cf::Meta)), (1, 1, 0));
    // The commit (which drains the buffer) writes the last change and its log entry.
    txn.put(Cf::State, b"other".to_vec(), b"v".to_vec());
    store.commit(txn, 4)?;
    assert_eq!(store.read(Cf::State, b"other")?, Some(b"v".to_vec()));
    assert_eq!(store.read(Cf::State, b"key")?, None);
    assert_eq!(store.read(Cf::Timers, b"t")?, Some(Vec::new()));
    // One chunk.
    assert_eq!(logged(&store)?, vec![(4, vec![(b"key".to_vec(), None), (b"other".to_vec(), Some(b"v".to_vec()))])]);
    Ok(())
}

#[test]
fn blind_changes_are_committed_in_key_order_and_the_last_change_of_a_key_wins() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = StateStore::open(dir.path())?;
    let mut txn = store.begin();
    txn.put(Cf::State, b"b".to_vec(), b"indexed".to_vec());
    txn.blind_put(Cf::State, b"c".to_vec(), b"first".to_vec());
    txn.blind_put(Cf::State, b"a".to_vec(), b"1".to_vec());
    txn.blind_put(Cf::State, b"c".to_vec(), b"last".to_vec());
    txn.blind_put(Cf::State, b"d".to_vec(), b"1".to_vec());
    assert_eq!(txn.get(Cf::State, b"a")?, None, "blind writes are not read back");
    assert_eq!(txn.change_counts(Cf::State), (5, 0));
    store.commit(txn, 0)?;
    for (key, value) in
        [(&b"a"[..], Some(&b"1"[..])), (b"b", Some(b"indexed")), (b"c", Some(b"last")), (b"d", Some(b"1"))]
    {
        assert_eq!(store.read(Cf::State, key)?.as_deref(), value, "{}", String::from_utf8_lossy(key));
    }
    let (_, changes) = logged(&store)?.into_iter().next().context("a change-log entry")?;
    let keys: Vec<Vec<u8>> = changes.into_iter().map(|(key, _)| key).collect();
    assert_eq!(keys, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]);
    Ok(())
}

#[test]
fn a_range_scan_merges_the_transaction_s_changes_into_the_committed_entries() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = StateStore::open(dir.path())?;
    let mut committed = store.begin();
    for key in ["k1", "k3", "k5", "k7"] {
        committed.put(Cf::Timers, key.as_bytes().to_vec(), b"old".to_vec());
    }
    store.commit(committed, 0)?;
    let mut txn = store.begin();
    for (key, change) in
        [("k0", Some("new")), ("k3", Some("new")), ("k5", None), ("k4", Some("new")), ("k9", Some("new"))]
    {
        match change {
            Some(value) => txn.put(Cf::Timers, key.as_bytes().to_vec(), value.as_bytes().to_vec()),
            None => txn.delete(Cf::Timers, key.as_bytes().to_vec()),
        }
    }
    let scan = |start: &str, end: Option<&str>| -> Result<Vec<(String, String)>> {
        Ok(txn
            .scan_range(Cf::Timers, start.as_bytes(), end.map(str::as_bytes))?
            .into_iter()
            .map(|(k, v)| (String::from_utf8_lossy(&k).into_owned(), String::from_utf8_lossy(&v).into_owned()))
            .collect())
    };
    let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    assert_eq!(scan("k1", Some("k9"))?, pairs(&[("k1", "old"), ("k3", "new"), ("k4", "new"), ("k7", "old")]));
    assert_eq!(
        scan("", None)?,
        pairs(&[("k0", "new"), ("k1", "old"), ("k3", "new"), ("k4", "new"), ("k7", "old"), ("k9", "new")])
    );
    assert_eq!(scan("k5", Some("k7"))?, pairs(&[]));
    // A visit that stops sees the merged entries up to where it stopped, committed
    // (k1, k7) and the transaction's (k0, k3, k4, k9) alike.
    for wanted in 0..=6 {
        let mut seen = Vec::new();
        txn.visit_range(Cf::Timers, b"", None, |key, _| {
            seen.push(String::from_utf8_lossy(key).into_owned());
            Ok(seen.len() < wanted)
        })?;
        let all = ["k0", "k1", "k3", "k4", "k7", "k9"];
        assert_eq!(seen, all[..wanted.max(1)], "stopping after {wanted}");
    }
    Ok(())
}

#[test]
fn packed_entries_are_stored_and_their_entries_changes_logged() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = StateStore::open(dir.path())?;
    let mut txn = store.begin();
    txn.put_stored(b"packed", b"many entries");
    txn.delete_stored(b"gone");
    txn.log_change(b"entry-1", Some(b"v"));
    txn.log_change(b"entry-2", None);
    store.commit(txn, 4)?;
    assert_eq!(store.read(Cf::State, b"packed")?.as_deref(), Some(&b"many entries"[..]));
    // The entries' changes, not the packed values.
    let expected = vec![(b"entry-1".to_vec(), Some(b"v".to_vec())), (b"entry-2".to_vec(), None)];
    assert_eq!(logged(&store)?, vec![(4, expected)]);
    // A replay stores the packed values, not the entries.
    let mut stored = Vec::new();
    unwritten::for_each_logged_change(&store.db, store.cf_handle(CHANGELOG)?, 4, |key, value| {
        stored.push((key.to_vec(), value.map(<[u8]>::to_vec)));
        Ok(())
    })?;
    assert_eq!(stored, vec![(b"packed".to_vec(), Some(b"many entries".to_vec())), (b"gone".to_vec(), None)]);
    Ok(())
}

#[test]
fn a_packed_entry_is_stored_and_its_records_logged_as_they_are() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = StateStore::open(dir.path())?;
    let mut records = Vec::new();
    super::super::changelog::push_record(&mut records, b"window-1", Some(b"a"));
    super::super::changelog::push_record(&mut records, b"window-2", Some(b"bb"));
    let mut txn = store.begin();
    txn.put_packed(b"bucket", &records);
    txn.log_change(b"window-0", None);
    store.commit(txn, 7)?;
    assert_eq!(store.read(Cf::State, b"bucket")?, Some(records));
    // The entries' changes: the packed value's records, then the other.
    let entries = vec![
        (b"window-1".to_vec(), Some(b"a".to_vec())),
        (b"window-2".to_vec(), Some(b"bb".to_vec())),
        (b"window-0".to_vec(), None),
    ];
    assert_eq!(logged(&store)?, vec![(7, entries)]);
    Ok(())
}

/// Commits 60 batches of random state changes, of every kind a transaction makes, to
/// a store holding its state in memory (within `budget`); after each, every key reads
/// as a plain map of the same changes says — through a new transaction (one key at a
/// time and as a range), from the store's committed state, and after the store is
/// reopened as after a crash (its `state` family then has every change, brought up
/// from the change log). Most batches make only changes with change-log records of
/// their own, which the commit leaves unwritten for a while. Returns whether the
/// in-memory copy was still held at the end, and after how many batches the `state`
/// family lacked changes.
fn reads_match_a_model(budget: usize) -> Result<(bool, usize)> {
    let dir = tempfile::tempdir()?;
    let mut store = StateStore::open(dir.path())?;
    assert!(store.hold_state_in_memory(budget)?, "an empty store fits");
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut draws = Draws(0x9e37_79b9_7f4a_7c15);
    let key = |n: u64| format!("key-{n:03}").into_bytes();
    let mut deferred = 0;
    for batch in 0..60 {
        let mut txn = store.begin();
        let mut ways = HashMap::new();
        if batch % 7 == 3 {
            let (start, end) = (draws.below(100), draws.below(100));
            let (start, end) = (key(start.min(end)), key(start.max(end)));
            txn.drop_committed_range(Cf::State, start.clone(), end.clone());
            model.retain(|k, _| k < &start || k >= &end);
        }
        for _ in 0..40 {
            let k = key(draws.below(100));
            let value = vec![b'v'; 1 + draws.below(300) as usize];
            // One batch in four also makes changes the change log records otherwise.
            let kind = draws.below(if batch % 4 == 0 { 6 } else { 3 });
            // A transaction changes a key one way only (put/delete, blind, stored or
            // packed): the commit writes the ways in a fixed order.
            let way = [0, 0, 1, 2, 2, 3][kind as usize];
            if *ways.entry(k.clone()).or_insert(way) != way {
                continue;
            }
            match kind {
                0 => txn.put(Cf::State, k.clone(), value.clone()),
                1 => txn.delete(Cf::State, k.clone()),
                2 => txn.blind_put(Cf::State, k.clone(), value.clone()),
                3 => txn.put_stored(&k, &value),
                4 => txn.delete_stored(&k),
                _ => txn.put_packed(&k, &value),
            }
            match kind {
                1 | 4 => model.remove(&k),
                _ => model.insert(k, value),
            };
        }
        store.commit(txn, batch)?;
        deferred += usize::from(store.read_meta(UNWRITTEN_FROM)?.is_some());
        if let Some(held) = store.resident.inspect(ResidentState::len) {
            assert_eq!(held, model.len(), "batch {batch}: entries the in-memory copy counts");
        }
        let reader = store.begin();
        for n in 0..100 {
            let expected = model.get(&key(n)).cloned();
            assert_eq!(reader.get(Cf::State, &key(n))?, expected, "batch {batch}, key {n}, read in a transaction");
            assert_eq!(store.read(Cf::State, &key(n))?, expected, "batch {batch}, key {n}, committed");
        }
        let (from, to) = (key(draws.below(100)), key(draws.below(100)));
        let (from, to) = (from.clone().min(to.clone()), from.max(to));
        let expected: Vec<(Vec<u8>, Vec<u8>)> =
            model.range(from.clone()..to.clone()).map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(reader.scan_range(Cf::State, &from, Some(&to))?, expected, "batch {batch}, a range");
        drop(reader);
        if batch % 9 == 8 {
            // Reopened as after a crash: what the family lacked comes from the change log.
            let held = store.resident.bytes() > 0;
            drop(store);
            store = StateStore::open(dir.path())?;
            assert!(store.read_meta(UNWRITTEN_FROM)?.is_none(), "batch {batch}: caught up");
            let family = store.cf_handle(Cf::State.name())?;
            let stored: BTreeMap<Vec<u8>, Vec<u8>> = store
                .db
                .iterator_cf(family, IteratorMode::Start)
                .map(|item| item.map(|(k, v)| (k.into_vec(), v.into_vec())))
                .collect::<Result<_, _>>()?;
            assert_eq!(stored, model, "batch {batch}: the state family after reopening");
            if held {
                assert!(store.hold_state_in_memory(budget)?);
            }
        }
    }
    Ok((store.resident.bytes() > 0, deferred))
}

#[test]
fn state_held_in_memory_reads_as_committed_under_every_kind_of_change() -> Result<()> {
    let (held, deferred) = reads_match_a_model(1 << 20)?;
    assert!(held, "about 100 entries of up to 300 bytes fit in 1 MiB");
    assert!(deferred > 20, "most batches leave their changes unwritten ({deferred} did)");
    Ok(())
}

#[test]
fn state_that_outgrows_its_memory_budget_is_read_from_rocksdb() -> Result<()> {
    // 100 keys of ~150 bytes plus overhead each: past 8 KiB after the first batches.
    assert!(!reads_match_a_model(8 << 10)?.0, "the copy was dropped");
    let dir = tempfile::tempdir()?;
    let store = StateStore::open(dir.path())?;
    let mut txn = store.begin();
    txn.put(Cf::State, b"big".to_vec(), vec![0; 4096]);
    store.commit(txn, 0)?;
    assert!(!store.hold_state_in_memory(1024)?, "a store larger than the budget is not copied");
    assert_eq!(store.begin().get(Cf::State, b"big")?.map(|v| v.len()), Some(4096));
    assert!(store.hold_state_in_memory(1 << 20)?);
    assert_eq!(store.begin().get(Cf::State, b"big")?.map(|v| v.len()), Some(4096), "loaded from RocksDB");
    Ok(())
}

#[test]
fn a_transaction_alive_across_a_commit_keeps_reading_what_it_began_with() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = StateStore::open(dir.path())?;
    store.hold_state_in_memory(1 << 20)?;
    let mut first = store.begin();
    first.put(Cf::State, b"a".to_vec(), b"1".to_vec());
    store.commit(first, 0)?;
    let old = store.begin();
    let mut second = store.begin();
    second.put(Cf::State, b"a".to_vec(), b"2".to_vec());
    store.commit(second, 1)?;
    assert_eq!(old.get(Cf::State, b"a")?, Some(b"1".to_vec()), "its copy is the one before the commit");
    // The copy it still held could not be changed by the commit: it is dropped, and
    // reads go to RocksDB.
    assert_eq!(store.resident.bytes(), 0);
    assert_eq!(store.begin().get(Cf::State, b"a")?, Some(b"2".to_vec()));
    Ok(())
}

#[test]
fn an_entry_is_deleted_once_and_a_forgotten_change_under_a_dropped_range_is_not_written() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = StateStore::open(dir.path())?;
    let mut committed = store.begin();
    for key in [b"t1", b"t2", b"t9"] {
        committed.put(Cf::TimerIndex, key.to_vec(), Vec::new());
    }
    store.commit(committed, 0)?;

    let mut txn = store.begin();
    assert!(!txn.delete_once(Cf::Timers, b"k1".to_vec())?, "not deleted before");
    assert!(txn.delete_once(Cf::Timers, b"k1".to_vec())?, "deleted by this transaction already");
    txn.put(Cf::Timers, b"k2".to_vec(), Vec::new());
    assert!(!txn.delete_once(Cf::Timers, b"k2".to_vec())?, "put in this transaction, not deleted");
    assert_eq!(txn.get(Cf::Timers, b"k2")?, None);
    // t3 (put in this batch) and t1 (committed) are forgotten, t4 is put and kept, t2
    // goes with the dropped range, t9 lies outside it.
    let before = txn.buffered_bytes();
    txn.put(Cf::TimerIndex, b"t3".to_vec(), Vec::new());
    txn.forget(Cf::TimerIndex, b"t3");
    txn.forget(Cf::TimerIndex, b"t1");
    assert_eq!(txn.buffered_bytes(), before, "a forgotten change no longer counts");
    txn.put(Cf::TimerIndex, b"t4".to_vec(), Vec::new());
    txn.drop_committed_range(Cf::TimerIndex, b"t".to_vec(), b"t5".to_vec());
    assert_eq!(txn.changes(Cf::TimerIndex), 1);
    store.commit(txn, 1)?;
    let left: Vec<Vec<u8>> = store.begin().scan_prefix(Cf::TimerIndex, b"t")?.into_iter().map(|(key, _)| key).collect();
    assert_eq!(left, vec![b"t4".to_vec(), b"t9".to_vec()]);
    Ok(())
}

#[test]
fn a_snapshot_is_published_by_a_rename_synced_to_disk() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = StateStore::open(&dir.path().join("store"))?;
    let snapshots = dir.path().join("snapshots");
    crate::util::fs::SYNCED_DIRS.with(|synced| synced.borrow_mut().clear());
    store.snapshot(&snapshots.join("7"))?;
    assert!(snapshots.join("7").is_dir() && !snapshots.join(".7.tmp").exists());
    let synced = crate::util::fs::SYNCED_DIRS.with(|synced| synced.borrow().clone());
    assert!(synced.contains(&snapshots), "the directory holding the rename was synced: {synced:?}");
    Ok(())
}
