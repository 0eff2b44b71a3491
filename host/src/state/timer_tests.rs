//! Timers kept by key and in the timer index, or in the index only
//! ([`KeyScope::with_timers_by_key`]): both ways register, delete and fire alike, and
//! a store converts from one to the other ([`Timers::keep_by_key`]).

use std::collections::BTreeSet;

use super::*;
use crate::state::{KeyScope, Timers, layout, timer_buckets};
use crate::util::draws::Draws;

const OPERATOR: u16 = 3;
const KEY_GROUPS: u16 = 4;

/// Key `index` of the test, its key group and its scope at `now`.
fn scope(index: u64, by_key: bool) -> KeyScope {
    let key = format!("key-{index}").into_bytes();
    KeyScope::new(OPERATOR, (index % u64::from(KEY_GROUPS)) as u16, &key, 0).with_timers_by_key(by_key)
}

/// The (key, expiry) of every timer in the store's timer index, in index order.
fn indexed(store: &StateStore) -> Result<Vec<(Vec<u8>, i64)>> {
    let entries = store.begin().scan_prefix(Cf::TimerIndex, &OPERATOR.to_be_bytes())?;
    Ok(entries
        .iter()
        .flat_map(|(raw, value)| timer_buckets::entry_timers(raw, value).expect("an index entry"))
        .map(|(expiry, _, key)| (key, expiry))
        .collect())
}

/// The (key, expiry) of every timer the store keeps by key, sorted.
fn by_key(store: &StateStore) -> Result<BTreeSet<(Vec<u8>, i64)>> {
    let entries = store.begin().scan_prefix(Cf::Timers, &OPERATOR.to_be_bytes())?;
    Ok(entries
        .iter()
        .map(|(raw, _)| {
            let (_, _, key, rest) = layout::split_key_prefix(raw).expect("a timer key");
            (key.to_vec(), layout::from_sortable_i64(rest).expect("an expiry"))
        })
        .collect())
}

/// The draws of a model run: how many keys, how many expiries a timer is registered
/// at (and a handler registers at), how far apart, and how many changes a batch makes.
struct Model {
    keys: u64,
    expiries: u64,
    handler_expiries: u64,
    step: i64,
    changes: usize,
    batches: u64,
}

/// Few keys at many expiries: buckets of one chunk.
#[test]
fn timers_in_the_index_only_register_delete_and_fire_like_timers_kept_by_key() -> Result<()> {
    run_model(Model { keys: 12, expiries: 30, handler_expiries: 20, step: 1, changes: 30, batches: 40 }).map(drop)
}

/// Thousands of keys at a few expiries: buckets of many chunks, which changes split,
/// merge and empty.
#[test]
fn timers_in_buckets_of_many_chunks_register_delete_and_fire_like_timers_kept_by_key() -> Result<()> {
    let tail_chunks =
        run_model(Model { keys: 3000, expiries: 4, handler_expiries: 2, step: 10, changes: 1500, batches: 12 })?;
    assert!(tail_chunks > 20, "buckets of more than one chunk ({tail_chunks} chunks past buckets' first)");
    Ok(())
}

/// Batches of random registrations and deletions, then a pass over the due timers
/// whose handlers delete and register timers (also due ones of keys later in the
/// pass), go to three stores: one keeps timers by key, one in the (packed) index only
/// (packing its timers ahead of the commit every other batch), and one in the index
/// only writing its changes ahead of the commit at random points.
/// Each batch, all fire the same timers, and every index holds what a plain set of
/// live timers says (the by-key family too, for the first). Returns how many chunks
/// past their bucket's first the index-only store held, summed over the batches.
fn run_model(model: Model) -> Result<usize> {
    let mut tail_chunks = 0;
    let dirs = [tempfile::tempdir()?, tempfile::tempdir()?, tempfile::tempdir()?];
    let stores =
        [StateStore::open(dirs[0].path())?, StateStore::open(dirs[1].path())?, StateStore::open(dirs[2].path())?];
    const KEEP: [bool; 3] = [true, false, false];
    let mut live: BTreeSet<(u64, i64)> = BTreeSet::new();
    let mut draws = Draws(0x9e37_79b9_7f4a_7c15);
    let mut wrote_ahead = 0;
    for batch in 0..model.batches {
        let deadline = batch as i64 * 10;
        let mut txns = stores.each_ref().map(StateStore::begin);
        for _ in 0..model.changes {
            let (key, expiry) =
                (draws.below(model.keys), deadline - 5 + draws.below(model.expiries) as i64 * model.step);
            let register = draws.below(3) > 0;
            for (txn, keep) in txns.iter_mut().zip(KEEP) {
                if register {
                    scope(key, keep).timer_register(txn, expiry);
                } else {
                    scope(key, keep).timer_delete(txn, expiry);
                }
            }
            if register {
                live.insert((key, expiry));
            } else {
                live.remove(&(key, expiry));
            }
            if draws.below(10) == 0 {
                wrote_ahead += usize::from(stores[2].write_ahead_over(&mut txns[2], batch, 0)?);
            }
        }
        let mut fired = [Vec::new(), Vec::new(), Vec::new()];
        let mut due_lists = Vec::new();
        for txn in &mut txns {
            Timers::drop_fired_index(txn, OPERATOR, deadline)?;
            let mut due = Timers::due(txn, OPERATOR, deadline, |_| true)?;
            due.sort_by_key();
            due_lists.push(due.iter().map(|timer| (timer.key.to_vec(), timer.expiry)).collect::<Vec<_>>());
        }
        assert_eq!(due_lists[0], due_lists[1], "batch {batch}: the due timers");
        assert_eq!(due_lists[0], due_lists[2], "batch {batch}: the due timers, written ahead");
        let due: Vec<(u64, i64)> = live.iter().copied().filter(|(_, expiry)| *expiry <= deadline).collect();
        assert_eq!(due_lists[0].len(), due.len(), "batch {batch}: as many due timers as the model has");
        // The handlers' draws, the same for every store.
        let handlers: Vec<(u64, u64, i64, bool)> = due
            .iter()
            .map(|_| {
                let at = deadline - 10 + draws.below(model.handler_expiries) as i64 * model.step;
                (draws.below(4), draws.below(model.keys), at, draws.below(8) == 0)
            })
            .collect();
        for (((txn, keep), fired), store) in txns.iter_mut().zip(KEEP).zip(&mut fired).zip(&stores) {
            for (&(key, expiry), &(action, other, at, spill)) in due.iter().zip(&handlers) {
                let fires = scope(key, keep).timer_fire(txn, expiry)?;
                fired.push(fires);
                if fires {
                    match action {
                        0 => scope(other, keep).timer_delete(txn, at),
                        1 => scope(other, keep).timer_register(txn, at),
                        _ => {}
                    }
                }
                if spill && std::ptr::eq(store, &stores[2]) {
                    wrote_ahead += usize::from(store.write_ahead_over(txn, batch, 0)?);
                }
            }
        }
        assert_eq!(fired[0], fired[1], "batch {batch}: which due timers fired");
        assert_eq!(fired[0], fired[2], "batch {batch}: which due timers fired, written ahead");
        // The model: a due timer fires unless a handler before it deleted it (and did
        // not register it again); a timer at or before the deadline registered in the
        // pass stays for the next batch.
        let mut deleted_in_pass = BTreeSet::new();
        for (index, (&(key, expiry), &(action, other, at, _))) in due.iter().zip(&handlers).enumerate() {
            let fires = !deleted_in_pass.contains(&(key, expiry));
            assert_eq!(fired[0][index], fires, "batch {batch}: timer {key}@{expiry}");
            live.remove(&(key, expiry));
            deleted_in_pass.insert((key, expiry));
            if fires {
                match action {
                    0 => {
                        deleted_in_pass.insert((other, at));
                        live.remove(&(other, at));
                    }
                    1 => {
                        deleted_in_pass.remove(&(other, at));
                        live.insert((other, at));
                    }
                    _ => {}
                }
            }
        }
        for (at, (store, mut txn)) in stores.iter().zip(txns).enumerate() {
            // Every other batch the index-only store packs its timers before the commit,
            // as a sharded stage does on its shards' threads.
            if at == 1 && batch % 2 == 0 {
                txn.pack_timers_for_commit()?;
            }
            store.commit(txn, batch)?;
        }
        let want: BTreeSet<(Vec<u8>, i64)> =
            live.iter().map(|&(key, expiry)| (format!("key-{key}").into_bytes(), expiry)).collect();
        let index = indexed(&stores[1])?;
        assert_eq!(index.len(), want.len(), "batch {batch}: each timer once in the index");
        let entries = stores[1].begin().scan_prefix(Cf::TimerIndex, &OPERATOR.to_be_bytes())?;
        tail_chunks += entries.iter().filter(|(raw, _)| raw.len() > timer_buckets::BUCKET_KEY_LEN).count();
        for store in &stores {
            let found: BTreeSet<_> = indexed(store)?.into_iter().collect();
            assert_eq!(found, want, "batch {batch}: the timer index");
        }
        assert_eq!(by_key(&stores[0])?, want, "batch {batch}: the timers kept by key");
        assert!(by_key(&stores[1])?.is_empty(), "batch {batch}: none kept by key in the index-only store");
    }
    assert!(wrote_ahead as u64 > model.batches / 2, "changes were written ahead in most batches ({wrote_ahead})");
    Ok(tail_chunks)
}

/// A store that kept timers by key drops them (the index stays); one that kept them in
/// the index only gets them by key, for the converting shard's key groups only.
#[test]
fn a_store_converts_its_timers_between_the_two_ways() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = StateStore::open(dir.path())?;
    let mut txn = store.begin();
    for key in 0..10 {
        scope(key, false).timer_register(&mut txn, key as i64 * 7);
        scope(key, false).timer_register(&mut txn, 100);
    }
    store.commit(txn, 0)?;
    let index = indexed(&store)?;
    assert_eq!(index.len(), 20);
    assert!(by_key(&store)?.is_empty());

    // Key groups 0 and 1 (keys 0, 1, 4, 5, 8, 9) first, then the rest.
    let mut txn = store.begin();
    Timers::keep_by_key(&mut txn, OPERATOR, 0..2, true)?;
    store.commit(txn, 1)?;
    let low: BTreeSet<_> =
        index.iter().filter(|(key, _)| [b'0', b'1', b'4', b'5', b'8', b'9'].contains(&key[4])).cloned().collect();
    assert_eq!(by_key(&store)?, low);
    let mut txn = store.begin();
    Timers::keep_by_key(&mut txn, OPERATOR, 2..KEY_GROUPS, true)?;
    store.commit(txn, 2)?;
    assert_eq!(by_key(&store)?, index.iter().cloned().collect::<BTreeSet<_>>());
    assert_eq!(scope(3, true).timer_list(&store.begin())?, vec![21, 100], "listed by key");

    let mut txn = store.begin();
    Timers::keep_by_key(&mut txn, OPERATOR, 0..KEY_GROUPS, false)?;
    store.commit(txn, 3)?;
    assert!(by_key(&store)?.is_empty());
    assert_eq!(indexed(&store)?, index, "the index stays");
    let listed = scope(3, false).timer_list(&store.begin());
    assert!(listed.is_err_and(|error| error.to_string().contains("list-timers")));
    Ok(())
}

/// A store of an earlier eddy, with one timer-index entry per timer, is packed by
/// bucket for the converting shard's key groups only; the due timers stay the same
/// before, in the converting batch (which also registers and deletes) and after.
#[test]
fn a_store_packs_a_timer_index_of_one_entry_per_timer() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = StateStore::open(dir.path())?;
    let mut txn = store.begin();
    let mut want = BTreeSet::new();
    for key in 0..10u64 {
        for expiry in [key as i64 * 7, 100] {
            let (group, name) = ((key % u64::from(KEY_GROUPS)) as u16, format!("key-{key}").into_bytes());
            txn.put(Cf::TimerIndex, layout::timer_index_key(OPERATOR, expiry, group, &name), Vec::new());
            want.insert((name, expiry));
        }
    }
    store.commit(txn, 0)?;
    let due_keys = |txn: &StateTxn, deadline: i64| -> Result<Vec<(Vec<u8>, i64)>> {
        let due = Timers::due(txn, OPERATOR, deadline, |_| true)?;
        Ok(due.iter().map(|timer| (timer.key.to_vec(), timer.expiry)).collect())
    };
    let all_due = due_keys(&store.begin(), 100)?;
    assert_eq!(all_due.iter().cloned().collect::<BTreeSet<_>>(), want, "one entry per timer reads as before");
    // Whether each entry of the index is one timer of the earlier layout.
    let entries = |store: &StateStore| -> Result<Vec<bool>> {
        let index = store.begin().scan_prefix(Cf::TimerIndex, &OPERATOR.to_be_bytes())?;
        Ok(index.iter().map(|(raw, value)| timer_buckets::is_single(raw, value)).collect())
    };

    // Key groups 0 and 1 (keys 0, 1, 4, 5, 8, 9) in one batch, which also registers a
    // timer of key 0 and deletes one of key 1.
    let mut txn = store.begin();
    Timers::pack_index(&mut txn, OPERATOR, 0..2)?;
    assert_eq!(due_keys(&txn, 100)?, all_due, "the converting batch sees the same due timers");
    scope(0, false).timer_register(&mut txn, 50);
    scope(1, false).timer_delete(&mut txn, 7);
    store.commit(txn, 1)?;
    want.insert((b"key-0".to_vec(), 50));
    want.remove(&(b"key-1".to_vec(), 7));
    assert_eq!(indexed(&store)?.into_iter().collect::<BTreeSet<_>>(), want);
    let singles_left = entries(&store)?.iter().filter(|single| **single).count();
    assert_eq!(singles_left, 8, "the timers of keys 2, 3, 6 and 7 stay one entry each");
    let mut txn = store.begin();
    Timers::pack_index(&mut txn, OPERATOR, 2..KEY_GROUPS)?;
    store.commit(txn, 2)?;
    assert!(entries(&store)?.iter().all(|single| !single), "all packed");
    assert_eq!(indexed(&store)?.into_iter().collect::<BTreeSet<_>>(), want);
    let due: BTreeSet<_> = due_keys(&store.begin(), 100)?.into_iter().collect();
    assert_eq!(due, want);
    // Expiry 100 holds one bucket per key group; the earlier expiries one key each. (A
    // bucket may be more than one chunk: where it is cut depends on the process's seed.)
    let index = store.begin().scan_prefix(Cf::TimerIndex, &OPERATOR.to_be_bytes())?;
    let buckets: BTreeSet<&[u8]> = index.iter().map(|(raw, _)| &raw[..timer_buckets::BUCKET_KEY_LEN]).collect();
    assert_eq!(buckets.len(), 10 - 1 + 1 + usize::from(KEY_GROUPS));
    Ok(())
}
