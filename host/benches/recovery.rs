//! Recovery after a real kill: a child process fills a store with 1 M and then 10 M
//! keys and keeps committing batches of 10 000 changed keys, like a running query,
//! until it is killed with SIGKILL. The benchmark then times reopening the store
//! (RocksDB replays its write-ahead log), checks that the last committed batch is
//! intact, and times the first commit after recovery and a clean reopen.
//!
//! Run with `cargo bench -p eddy --bench recovery` (release; the 10 M fill takes a
//! minute or two). `EDDY_BENCH_SIZES=1000000` picks the sizes.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use eddy::state::StateStore;

mod common;
use common::{changed_keys, decl, fill, scope};

const CHANGED_KEYS: u64 = 10_000;
/// How long the child runs batches before it is killed.
const RUN_BEFORE_KILL: Duration = Duration::from_secs(3);
/// The environment variable that makes this binary the child: `<store dir>:<keys>`.
const CHILD: &str = "EDDY_RECOVERY_CHILD";

/// Commits batch `batch_id` (round `round` after the fill): 10 000 keys set to `key + round`.
fn run_batch(store: &StateStore, size: u64, round: u64, batch_id: u64) {
    let decl = decl();
    let mut txn = store.begin();
    for key in changed_keys(round, CHANGED_KEYS, size) {
        scope(key).value_update(&mut txn, &decl, &(key + round).to_le_bytes());
    }
    store.commit(txn, batch_id).expect("commit");
}

/// The child: fill, then run batches until killed.
fn child(spec: &str) {
    let (dir, size) = spec.rsplit_once(':').expect("<dir>:<keys>");
    let size: u64 = size.parse().expect("a key count");
    let store = StateStore::open(std::path::Path::new(dir)).expect("store");
    fill(&store, size);
    let first = store.committed_batch().expect("readable").expect("filled") + 1;
    println!("running");
    for round in 1.. {
        run_batch(&store, size, round, first + round - 1);
    }
}

fn main() {
    if let Ok(spec) = std::env::var(CHILD) {
        return child(&spec);
    }
    let sizes: Vec<u64> = std::env::var("EDDY_BENCH_SIZES")
        .ok()
        .map(|text| text.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000_000, 10_000_000]);
    for size in sizes {
        let dir = tempfile::tempdir().expect("temp dir");
        let started = Instant::now();
        let mut running = Command::new(std::env::current_exe().expect("this binary"))
            .env(CHILD, format!("{}:{size}", dir.path().display()))
            .stdout(Stdio::piped())
            .spawn()
            .expect("child starts");
        let mut line = String::new();
        BufReader::new(running.stdout.take().expect("stdout")).read_line(&mut line).expect("child reports");
        assert_eq!(line.trim(), "running", "the child filled its store");
        eprintln!("{size} keys: filled in {:.1} s", started.elapsed().as_secs_f64());
        std::thread::sleep(RUN_BEFORE_KILL);
        running.kill().expect("SIGKILL");
        running.wait().expect("reaped");

        let reopen = Instant::now();
        let store = StateStore::open(dir.path()).expect("the store recovers");
        let recovered_ms = reopen.elapsed().as_secs_f64() * 1e3;
        let committed = store.committed_batch().expect("readable").expect("a committed batch");
        let filled = size.div_ceil(200_000);
        let round = committed + 1 - filled;
        // Every key of the last committed batch holds that batch's value.
        {
            let (decl, txn) = (decl(), store.begin());
            for key in changed_keys(round, CHANGED_KEYS, size) {
                let value = scope(key).value_get(&txn, &decl).expect("readable").expect("a value");
                assert_eq!(value, (key + round).to_le_bytes(), "key {key} after batch {committed}");
            }
        }
        let commit = Instant::now();
        run_batch(&store, size, round + 1, committed + 1);
        let commit_ms = commit.elapsed().as_secs_f64() * 1e3;
        drop(store);
        let clean = Instant::now();
        drop(StateStore::open(dir.path()).expect("reopens"));
        let clean_ms = clean.elapsed().as_secs_f64() * 1e3;
        println!(
            "{size} keys, killed after {round} batches of {CHANGED_KEYS} changed keys: recovery (open + WAL replay) \
             {recovered_ms:.0} ms, batch {committed} intact, first commit after it {commit_ms:.1} ms, \
             clean reopen {clean_ms:.0} ms"
        );
    }
}
