//! State commit cost as the store grows: one batch changing 10 000 keys, committed
//! (one atomic, synced RocksDB write), when the store already holds 1 M and 10 M keys.
//! The commit writes only the changes, so the two should be close. Also: how long
//! reopening the store takes at each size.
//!
//! Run with `cargo bench -p eddy --bench state_commit` (release; the 10 M fill takes a
//! minute or two). `EDDY_BENCH_SIZES=1000000` picks the sizes.

use std::time::Instant;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use eddy::state::StateStore;

mod common;
use common::{changed_keys, decl, fill, scope};

const CHANGED_KEYS: u64 = 10_000;

fn commits(c: &mut Criterion) {
    let sizes: Vec<u64> = std::env::var("EDDY_BENCH_SIZES")
        .ok()
        .map(|text| text.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000_000, 10_000_000]);
    let mut group = c.benchmark_group("state-commit");
    group.sample_size(20);
    for size in sizes {
        let dir = tempfile::tempdir().expect("temp dir");
        let started = Instant::now();
        {
            let store = StateStore::open(dir.path()).expect("store");
            fill(&store, size);
        }
        eprintln!("filled {size} keys in {:.1} s", started.elapsed().as_secs_f64());
        let reopen = Instant::now();
        let store = StateStore::open(dir.path()).expect("store reopens");
        eprintln!("reopened the store with {size} keys in {} ms", reopen.elapsed().as_millis());
        let decl = decl();
        let mut round = 0u64;
        group.bench_function(format!("10k-changed-keys/{size}-keys"), |b| {
            b.iter_batched(
                || {
                    // A batch's changes: 10 000 keys spread over the whole key space.
                    round += 1;
                    let mut txn = store.begin();
                    for key in changed_keys(round, CHANGED_KEYS, size) {
                        scope(key).value_update(&mut txn, &decl, &(key + round).to_le_bytes());
                    }
                    (txn, 1_000_000 + round)
                },
                |(txn, batch_id)| store.commit(txn, batch_id).expect("commit"),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, commits);
criterion_main!(benches);
