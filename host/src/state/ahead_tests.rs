//! Tests of changes written to the store ahead of their batch's commit.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

use rocksdb::IteratorMode;

use super::*;
use crate::util::draws::Draws;

/// Every entry of `cf` in the family itself.
fn family(store: &StateStore, cf: Cf) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let handle = store.cf_handle(cf.name())?;
    store
        .db
        .iterator_cf(handle, IteratorMode::Start)
        .map(|item| Ok(item.map(|(k, v)| (k.into_vec(), v.into_vec()))?))
        .collect()
}

/// Each batch's changes by key (`None`: deleted).
type ChangesByBatch = BTreeMap<u64, BTreeMap<Vec<u8>, Option<Vec<u8>>>>;

/// Each batch's changes as the change log has them (`eddy state read --changes`), the
/// last change of each key.
fn logged_changes(store: &StateStore) -> Result<ChangesByBatch> {
    let handle = store.cf_handle(CHANGELOG)?;
    let mut batches = ChangesByBatch::new();
    for item in store.db.iterator_cf(handle, IteratorMode::Start) {
        let (key, value) = item?;
        let (batch, changes) = changelog::decode_entry(&key, &value, View::Entries)?;
        let changed = batches.entry(batch).or_default();
        for (key, value) in changes {
            changed.insert(key.into_owned(), value.map(Cow::into_owned));
        }
    }
    Ok(batches)
}

fn key(n: u64) -> Vec<u8> {
    format!("key-{n:03}").into_bytes()
}

/// The timer index key of a timer at `expiry` of key `n`: expiry first, as the index's.
fn index_key(expiry: u64, n: u64) -> Vec<u8> {
    format!("t{expiry:04}-{n:03}").into_bytes()
}

#[test]
fn changes_written_ahead_commit_as_if_held_until_the_commit() -> Result<()> {
    let dir = tempfile::tempdir()?;
    // Both hold their state in memory; the one that writes ahead sets its copy aside
    // until the commit, and loads it again after.
    let held = StateStore::open(&dir.path().join("held"))?;
    let ahead = StateStore::open(&dir.path().join("ahead"))?;
    assert!(held.hold_state_in_memory(1 << 20)? && ahead.hold_state_in_memory(1 << 20)?);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut timers: BTreeMap<Vec<u8>, ()> = BTreeMap::new();
    let mut draws = Draws(0x2545_f491_4f6c_dd1d);
    let mut wrote_ahead = 0;
    for batch in 0..40u64 {
        let mut txns = [held.begin(), ahead.begin()];
        // Timers up to the deadline fire: their index entries go with a dropped range,
        // as the operator drops them; a timer registered in the batch below it stays.
        let deadline = batch * 10;
        let (start, end) = (b"t".to_vec(), index_key(deadline + 1, 0));
        for txn in &mut txns {
            txn.drop_committed_range(Cf::TimerIndex, start.clone(), end.clone());
        }
        let due: Vec<Vec<u8>> = timers.range(start.clone()..end.clone()).map(|(k, _)| k.clone()).collect();
        for step in 0..60 {
            let k = key(draws.below(60));
            let value = vec![b'v'; 1 + draws.below(200) as usize];
            let timer = index_key(deadline + draws.below(30), draws.below(60));
            let choice = draws.below(5);
            for txn in &mut txns {
                match choice {
                    0 | 1 => txn.put(Cf::State, k.clone(), value.clone()),
                    2 => txn.delete(Cf::State, k.clone()),
                    3 => {
                        txn.put(Cf::TimerIndex, timer.clone(), Vec::new());
                        txn.put(Cf::Timers, timer.clone(), Vec::new());
                    }
                    _ => txn.put(Cf::Meta, b"progress".to_vec(), value.clone()),
                }
            }
            match choice {
                0 | 1 => drop(model.insert(k.clone(), value)),
                2 => drop(model.remove(&k)),
                3 => drop(timers.insert(timer, ())),
                _ => {}
            }
            if step == 30 {
                // Half-way, the batch's due timers fire, each once; a third of them were
                // deleted before their turn (by another timer's handler).
                for timer in &due {
                    let deleted = draws.below(3) == 0;
                    if deleted {
                        txns.iter_mut().for_each(|txn| txn.delete(Cf::Timers, timer.clone()));
                        wrote_ahead += usize::from(ahead.write_ahead_over(&mut txns[1], batch, 0)?);
                    }
                    for txn in &mut txns {
                        assert_eq!(txn.delete_once(Cf::Timers, timer.clone())?, deleted, "batch {batch}: {timer:?}");
                        txn.forget(Cf::TimerIndex, timer);
                    }
                    timers.remove(timer);
                }
            }
            if draws.below(8) == 0 {
                wrote_ahead += usize::from(ahead.write_ahead_over(&mut txns[1], batch, 0)?);
            }
            for n in [draws.below(60), draws.below(60)] {
                let expected = model.get(&key(n)).cloned();
                for txn in &txns {
                    assert_eq!(txn.get(Cf::State, &key(n))?, expected, "batch {batch}, key {n}, in the transaction");
                }
            }
        }
        let expected: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(txns[1].scan_prefix(Cf::State, b"key")?, expected, "batch {batch}: a range read");
        // A key changed again after it was written ahead counts twice.
        let (counted, counted_ahead) = (txns[0].change_counts(Cf::State), txns[1].change_counts(Cf::State));
        assert!(counted_ahead.0 >= counted.0 && counted_ahead.1 >= counted.1, "batch {batch}: counts");
        let [first, second] = txns;
        held.commit(first, batch)?;
        ahead.commit(second, batch)?;
        assert!(ahead.holds_state_in_memory(), "batch {batch}: the copy is loaded again after the commit");
        for cf in [Cf::Timers, Cf::TimerIndex, Cf::Meta] {
            // Either may leave state changes unwritten in the family for a while.
            let entries = |store: &StateStore| -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
                Ok(family(store, cf)?.into_iter().filter(|(k, _)| k.as_slice() != unwritten::UNWRITTEN_FROM).collect())
            };
            assert_eq!(entries(&ahead)?, entries(&held)?, "batch {batch}: family {}", cf.name());
        }
        assert_eq!(ahead.begin().scan_prefix(Cf::State, b"")?, expected, "batch {batch}: the committed state");
        assert_eq!(held.begin().scan_prefix(Cf::State, b"")?, expected, "batch {batch}: the state held in memory");
    }
    assert!(wrote_ahead > 20, "changes were written ahead in most batches ({wrote_ahead})");
    assert_eq!(logged_changes(&ahead)?, logged_changes(&held)?, "every batch's changes in the change log");
    let store = ahead.path().to_path_buf();
    drop(ahead);
    assert_eq!(ahead::copy_before(&store)?, None, "no copy of the state is left");
    Ok(())
}

/// A store in `dir` with `a = 1` committed as batch 0, and a transaction of batch 1
/// whose changes (`a = 2`, `b = 3`) were written ahead.
fn written_ahead(dir: &Path) -> Result<(StateStore, StateTxn)> {
    let store = StateStore::open(dir)?;
    let mut first = store.begin();
    first.put(Cf::State, b"a".to_vec(), b"1".to_vec());
    store.commit(first, 0)?;
    let mut txn = store.begin();
    txn.put(Cf::State, b"a".to_vec(), b"2".to_vec());
    txn.put(Cf::State, b"b".to_vec(), b"3".to_vec());
    assert!(!store.write_ahead_over(&mut txn, 1, 1 << 20)?, "under the limit: held");
    assert!(store.write_ahead_over(&mut txn, 1, 0)?);
    assert_eq!(txn.buffered_bytes(), 0);
    assert_eq!(txn.get(Cf::State, b"a")?, Some(b"2".to_vec()), "the transaction reads what it wrote ahead");
    Ok((store, txn))
}

#[test]
fn a_batch_written_ahead_that_does_not_commit_is_rolled_back_when_the_store_opens() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("store");
    let (store, txn) = written_ahead(&path)?;
    assert!(ahead::copy_before(&path)?.is_some_and(|(batch, _)| batch == 1));
    let error = store.commit(store.begin(), 2).expect_err("batch 1 did not commit").to_string();
    assert!(error.contains("holds changes of batch 1 written ahead"), "{error}");
    drop((txn, store));

    let store = StateStore::open(&path)?;
    assert_eq!(store.committed_batch()?, Some(0));
    assert_eq!(store.read(Cf::State, b"a")?, Some(b"1".to_vec()), "rolled back");
    assert_eq!(store.read(Cf::State, b"b")?, None, "rolled back");
    assert_eq!(ahead::copy_before(&path)?, None);
    // The batch runs again; the change log has only what it did this time.
    let mut again = store.begin();
    again.put(Cf::State, b"c".to_vec(), b"4".to_vec());
    store.commit(again, 1)?;
    let logged = logged_changes(&store)?;
    assert_eq!(logged.get(&1), Some(&BTreeMap::from([(b"c".to_vec(), Some(b"4".to_vec()))])));
    Ok(())
}

#[test]
fn a_copy_a_finished_commit_left_behind_goes_when_the_store_opens() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("store");
    let (store, txn) = written_ahead(&path)?;
    let (_, copy) = ahead::copy_before(&path)?.expect("a copy");
    // As if the run died right after the commit: the copy is still there.
    let kept = dir.path().join("kept");
    std::fs::create_dir(&kept)?;
    for entry in std::fs::read_dir(&copy)? {
        let entry = entry?;
        std::fs::copy(entry.path(), kept.join(entry.file_name()))?;
    }
    store.commit(txn, 1)?;
    assert_eq!(ahead::copy_before(&path)?, None, "the commit removes the copy");
    drop(store);
    std::fs::rename(&kept, &copy)?;

    let store = StateStore::open(&path)?;
    assert_eq!(store.committed_batch()?, Some(1));
    assert_eq!(store.read(Cf::State, b"a")?, Some(b"2".to_vec()), "batch 1 stays");
    assert_eq!(ahead::copy_before(&path)?, None);
    Ok(())
}

#[test]
fn a_rollback_cut_short_is_finished_when_the_store_opens() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("store");
    let (store, txn) = written_ahead(&path)?;
    drop((txn, store));
    // As if the run died between moving the store aside and moving the copy in.
    std::fs::rename(&path, path.with_extension("discarded"))?;

    let store = StateStore::open(&path)?;
    assert_eq!(store.read(Cf::State, b"a")?, Some(b"1".to_vec()));
    assert!(!path.with_extension("discarded").exists());
    assert_eq!(ahead::copy_before(&path)?, None);
    Ok(())
}
