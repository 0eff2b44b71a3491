//! What the state benchmarks share: a store filled with value entries of many keys,
//! and batches that change some of them.

use eddy::state::{KeyScope, StateKind, StateStore, VariableDecl};

/// Keys written per commit while filling.
const FILL_BATCH: u64 = 200_000;

/// The one value variable every key has.
pub fn decl() -> VariableDecl {
    VariableDecl { name: "totals".into(), kind: StateKind::Value, ttl_us: None }
}

/// The scope of key number `key`.
pub fn scope(key: u64) -> KeyScope {
    KeyScope::new(0, (key % 128) as u16, format!("user-{key:09}").as_bytes(), 1)
}

/// Writes `keys` value entries, `FILL_BATCH` per commit (batch ids from 0).
pub fn fill(store: &StateStore, keys: u64) {
    let decl = decl();
    for (batch_id, start) in (0..keys).step_by(FILL_BATCH as usize).enumerate() {
        let mut txn = store.begin();
        for key in start..(start + FILL_BATCH).min(keys) {
            scope(key).value_update(&mut txn, &decl, &key.to_le_bytes());
        }
        store.commit(txn, batch_id as u64).expect("fill commit");
    }
}

/// The keys batch `round` changes: `changed` keys spread over the whole key space.
pub fn changed_keys(round: u64, changed: u64, size: u64) -> impl Iterator<Item = u64> {
    (0..changed).map(move |i| (i * 7919 + round * 104_729) % size)
}
