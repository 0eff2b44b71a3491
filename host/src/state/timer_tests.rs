//! Timers kept by key and in the timer index, or in the index only
//! ([`KeyScope::with_timers_by_key`]): both ways register, delete and fire alike, and
//! a store converts from one to the other ([`Timers::keep_by_key`]).

use std::collections::BTreeSet;

use super::tests::Draws;
use super::*;
use crate::state::{KeyScope, Timers, layout};

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
        .map(|(raw, _)| {
            let (expiry, _, key) = layout::split_timer_index_key(raw).expect("an index key");
            (key.to_vec(), expiry)
        })
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

/// 40 batches of random registrations and deletions, then a pass over the due timers
/// whose handlers delete and register timers (also due ones of keys later in the
/// pass), go to two stores: one keeps timers by key, one in the index only. Each
/// batch, both fire the same timers, and both indexes hold what a plain set of live
/// timers says (the by-key family too, for the first).
#[test]
fn timers_in_the_index_only_register_delete_and_fire_like_timers_kept_by_key() -> Result<()> {
    let dirs = (tempfile::tempdir()?, tempfile::tempdir()?);
    let stores = [StateStore::open(dirs.0.path())?, StateStore::open(dirs.1.path())?];
    let mut live: BTreeSet<(u64, i64)> = BTreeSet::new();
    let mut draws = Draws(0x9e37_79b9_7f4a_7c15);
    for batch in 0..40u64 {
        let deadline = batch as i64 * 10;
        let mut txns = [stores[0].begin(), stores[1].begin()];
        for _ in 0..30 {
            let (key, expiry) = (draws.below(12), deadline + draws.below(30) as i64 - 5);
            let register = draws.below(3) > 0;
            for (txn, keep) in txns.iter_mut().zip([true, false]) {
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
        }
        let mut fired = [Vec::new(), Vec::new()];
        let mut due_lists = Vec::new();
        for txn in &mut txns {
            Timers::drop_fired_index(txn, OPERATOR, deadline)?;
            let mut due = Timers::due(txn, OPERATOR, deadline, |_| true)?;
            due.sort_by_key();
            due_lists.push(due.iter().map(|timer| (timer.key.to_vec(), timer.expiry)).collect::<Vec<_>>());
        }
        assert_eq!(due_lists[0], due_lists[1], "batch {batch}: the due timers");
        let due: Vec<(u64, i64)> = live.iter().copied().filter(|(_, expiry)| *expiry <= deadline).collect();
        assert_eq!(due_lists[0].len(), due.len(), "batch {batch}: as many due timers as the model has");
        // The handlers' draws, the same for both stores.
        let handlers: Vec<(u64, u64, i64)> =
            due.iter().map(|_| (draws.below(4), draws.below(12), deadline + draws.below(20) as i64 - 10)).collect();
        for ((txn, keep), fired) in txns.iter_mut().zip([true, false]).zip(&mut fired) {
            for (&(key, expiry), &(action, other, at)) in due.iter().zip(&handlers) {
                let fires = scope(key, keep).timer_fire(txn, expiry)?;
                fired.push(fires);
                if !fires {
                    continue;
                }
                match action {
                    0 => scope(other, keep).timer_delete(txn, at),
                    1 => scope(other, keep).timer_register(txn, at),
                    _ => {}
                }
            }
        }
        assert_eq!(fired[0], fired[1], "batch {batch}: which due timers fired");
        // The model: a due timer fires unless a handler before it deleted it (and did
        // not register it again); a timer at or before the deadline registered in the
        // pass stays for the next batch.
        let mut deleted_in_pass = BTreeSet::new();
        for (index, (&(key, expiry), &(action, other, at))) in due.iter().zip(&handlers).enumerate() {
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
        let [first, second] = txns;
        stores[0].commit(first, batch)?;
        stores[1].commit(second, batch)?;
        let want: BTreeSet<(Vec<u8>, i64)> =
            live.iter().map(|&(key, expiry)| (format!("key-{key}").into_bytes(), expiry)).collect();
        for store in &stores {
            let found: BTreeSet<_> = indexed(store)?.into_iter().collect();
            assert_eq!(found, want, "batch {batch}: the timer index");
        }
        assert_eq!(by_key(&stores[0])?, want, "batch {batch}: the timers kept by key");
        assert!(by_key(&stores[1])?.is_empty(), "batch {batch}: none kept by key in the index-only store");
    }
    Ok(())
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
