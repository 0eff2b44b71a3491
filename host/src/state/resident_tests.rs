//! Tests of the in-memory copy of the state entries.

use std::collections::BTreeMap;

use super::*;

/// Commits of random puts, deletes and range drops — in key order, out of it, in
/// chunks, deferring or not, with the family written every few — against a model:
/// every key reads its committed value (searched from a finger, in order and not),
/// and every key whose family entry differs from it is unwritten, with that value.
#[test]
fn commits_keep_the_copy_equal_to_the_committed_state() {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % bound
    };
    let key = |k: u64| format!("k{k:04}").into_bytes();
    let mut copy = ResidentState { budget: usize::MAX, ..ResidentState::default() };
    let (mut model, mut family) = (BTreeMap::new(), BTreeMap::new());
    for batch in 0..400u64 {
        let defer = next(4) != 0;
        let lagging = copy.unwritten_from().is_some();
        if lagging && (!defer || next(5) == 0) {
            for held in copy.marked() {
                match held.value() {
                    Some(value) => family.insert(held.key().to_vec(), value.to_vec()),
                    None => family.remove(held.key()),
                };
            }
            copy.mark_written(None);
        }
        if defer && copy.unwritten_from().is_none() {
            copy.mark_written(Some(batch));
        }
        copy.set_deferring(defer);
        let mut changes = Vec::new();
        let (base, ordered) = (next(600), next(3) != 0);
        for i in 0..next(120) {
            let k = if ordered { base + i * (1 + next(3)) } else { next(800) };
            let value = (batch * 1_000 + i).to_be_bytes()[..1 + next(8) as usize].to_vec();
            changes.push(if next(3) == 0 {
                ResidentChange::Delete(key(k))
            } else {
                ResidentChange::Put(key(k), value)
            });
        }
        if !defer && next(6) == 0 {
            let start = next(800);
            changes.insert(0, ResidentChange::DropRange(key(start), key(start + next(40))));
        }
        for change in &changes {
            let target = if defer { vec![&mut model] } else { vec![&mut model, &mut family] };
            for map in target {
                match change {
                    ResidentChange::Put(k, v) => drop(map.insert(k.clone(), v.clone())),
                    ResidentChange::Delete(k) => drop(map.remove(k)),
                    ResidentChange::DropRange(start, end) => map.retain(|k, _| k < start || k >= end),
                }
            }
        }
        while !changes.is_empty() {
            let rest = changes.split_off((1 + next(50) as usize).min(changes.len()));
            copy.apply(std::mem::replace(&mut changes, rest));
        }
        copy.settle();
        copy.set_deferring(false);
        assert_eq!(copy.len(), model.len(), "batch {batch}");
        let finger = Cell::new(0);
        for k in (0..900).chain((0..300).map(|_| next(900))) {
            let want = model.get(&key(k)).map(Vec::as_slice);
            assert_eq!(copy.get(&key(k)), want, "batch {batch}, key {k}");
            assert_eq!(copy.get_near(&key(k), &finger), want, "batch {batch}, key {k} from a finger");
        }
        let unwritten = copy.unwritten_in(b"k0100", Some(b"k0700"));
        assert!(unwritten.windows(2).all(|pair| pair[0].0 < pair[1].0), "in key order");
        for (k, value) in &unwritten {
            assert_eq!(*value, model.get(*k).map(Vec::as_slice), "batch {batch}");
        }
        for k in 100..700 {
            if family.get(&key(k)) != model.get(&key(k)) {
                assert!(unwritten.iter().any(|(u, _)| *u == key(k)), "batch {batch}: k{k:04} differs, unmarked");
            }
        }
        let marked: Vec<&[u8]> = copy.marked().map(Held::key).collect();
        assert!(marked.windows(2).all(|pair| pair[0] < pair[1]), "marked keys in key order");
    }
}
