//! The host-side limits of a processor, one by one at their edges, through the real
//! `scripted` component on a real RocksDB store: what fits passes, one more fails the
//! batch with a message naming the module, the handler, the key, the limit and the
//! spec key to raise, nothing of the batch is committed, and the same batch passes
//! under a raised limit.

use eddy::pipeline::{InstanceLimits, Limit};
use eddy::state::StateStore;
use eddy_tests::{Cmd, Scripted, cmd, load};
use serde_json::json;

fn config() -> serde_json::Value {
    json!({"time_mode": "processing-time", "state": [
        {"name": "v", "kind": "value"}, {"name": "l", "kind": "list"}, {"name": "m", "kind": "map"}
    ]})
}

fn limited(limit: Limit, value: u64) -> InstanceLimits {
    let mut limits = InstanceLimits::default();
    limit.set(&mut limits, value);
    limits
}

/// Runs `commands` as batch 1 after a committed batch 0, under `limit` = `value`;
/// returns the error, after checking that nothing of batch 1 was committed.
fn fails(limit: Limit, value: u64, commands: &[Cmd]) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = StateStore::open(&dir.path().join("state")).expect("store");
    let mut p = Scripted::open(&load("scripted"), store.clone(), config(), limited(limit, value));
    p.run(1_000, &[cmd("before", "value.set", "v").v("kept")]).expect("batch 0");
    let error = format!("{:#}", p.run(2_000, commands).expect_err("over the limit"));
    assert_eq!(store.committed_batch().expect("readable"), Some(0), "nothing of batch 1 is committed");
    let mut raised = Scripted::open(&load("scripted"), store, config(), limited(limit, value * 1000));
    raised.run(3_000, commands).expect("the same batch passes under a raised limit");
    error
}

fn passes(limit: Limit, value: u64, commands: &[Cmd]) -> Vec<(String, String)> {
    Scripted::new(config(), limited(limit, value)).run(1_000, commands).expect("within the limit")
}

fn assert_names(error: &str, prefix: &str, limit: Limit) {
    assert!(error.starts_with(prefix), "{error}");
    let key = format!("(operator.{}); ", limit.key());
    assert!(error.contains(&key) && error.ends_with(&format!("or raise operator.{}", limit.key())), "{error}");
}

#[test]
fn timers_per_batch_count_distinct_registrations_and_deletions() {
    let limit = Limit::TimersPerBatch;
    let timer = |key, op, at| cmd(key, op, "v").v(at);
    // The same timer twice is one change; three distinct changes fit a limit of 3.
    let three = [
        timer("a", "timer.register", "5000"),
        timer("a", "timer.register", "5000"),
        timer("a", "timer.register", "6000"),
        timer("a", "timer.delete", "7000"),
    ];
    passes(limit, 3, &three);
    let mut four = three.to_vec();
    four.push(timer("a", "timer.register", "8000"));
    let error = fails(limit, 3, &four);
    assert_names(
        &error,
        "module 'scripted.wasm' trapped in handle-input-rows for key [\"a\"]: the processor registered or \
         deleted 4 timers in this batch, over the limit of 3 per shard and batch (operator.max-timers-per-batch)",
        limit,
    );
    // The count is per batch, not per key: two keys of one shard share it.
    let error = fails(limit, 3, &[timer("a", "timer.register-many", "2"), timer("b", "timer.register-many", "2")]);
    assert!(error.contains("deleted 4 timers in this batch"), "{error}");
}

#[test]
fn one_state_value_is_held_to_max_state_value_bytes() {
    let limit = Limit::StateValueBytes;
    // A string of 24..=255 bytes is stored as CBOR with a 2-byte header.
    let (fits, over) = ("x".repeat(98), "x".repeat(99));
    passes(limit, 100, &[cmd("a", "value.set", "v").v(&fits)]);
    let error = fails(limit, 100, &[cmd("a", "value.set", "v").v(&over)]);
    assert_names(
        &error,
        "module 'scripted.wasm' trapped in handle-input-rows for key [\"a\"]: a value of state variable 'v' \
         would hold 101 bytes, over the limit of 100 bytes for one state value (operator.max-state-value-bytes); \
         keep large data out of state",
        limit,
    );
    // A map entry counts its key (CBOR "k": 2 bytes) and its value.
    let (fits, over) = ("x".repeat(96), "x".repeat(97));
    passes(limit, 100, &[cmd("a", "map.put", "m").k("k").v(&fits)]);
    let error = fails(limit, 100, &[cmd("a", "map.put", "m").k("k").v(&over)]);
    assert!(error.contains("a map entry of state variable 'm' would hold 101 bytes"), "{error}");
    // A list counts as a whole, however it grows.
    let element = "y".repeat(30);
    passes(limit, 100, &[cmd("a", "list.append", "l").v(&element)]);
    let appends = vec![cmd("a", "list.append", "l").v(&element); 4];
    let error = fails(limit, 100, &appends);
    assert!(error.contains("the list of state variable 'l' would hold"), "{error}");
}

#[test]
fn state_bytes_per_batch_count_what_the_batch_buffers() {
    let limit = Limit::StateBytesPerBatch;
    let kib = "z".repeat(1024);
    // Overwriting one value a thousand times buffers one value.
    let overwrites = vec![cmd("a", "value.set", "v").v(&kib); 1000];
    passes(limit, 64 << 10, &overwrites);
    // A hundred distinct map entries of 1 KiB do not fit in 64 KiB.
    let error = fails(limit, 64 << 10, &[cmd("a", "map.put-many", "m").v("100x1024")]);
    assert_names(
        &error,
        "module 'scripted.wasm' trapped in handle-input-rows for key [\"a\"]: the state changes the processor \
         buffered in this batch reached ",
        limit,
    );
    assert!(error.contains(", over the limit of 64 KiB per shard and batch"), "{error}");
    passes(limit, 64 << 10, &[cmd("a", "map.put-many", "m").v("50x1024")]);
}

#[test]
fn log_bytes_are_counted_per_call() {
    let limit = Limit::LogBytesPerCall;
    let ten = "0123456789";
    // Ten bytes in each of two calls (two keys) fit a limit of 10 per call.
    passes(limit, 10, &[cmd("a", "log", "debug").v(ten), cmd("b", "log", "debug").v(ten)]);
    let error = fails(limit, 10, &[cmd("a", "log", "debug").v(ten), cmd("a", "log", "debug").v("!")]);
    assert_names(
        &error,
        "module 'scripted.wasm' trapped in handle-input-rows for key [\"a\"]: the processor logged 11 bytes in \
         this call, over the limit of 10 bytes per call (operator.max-log-bytes-per-call); log less",
        limit,
    );
}

#[test]
fn output_rows_and_bytes_are_limited_per_call_and_per_batch() {
    let many = |key, v| cmd(key, "output.many", "v").v(v);
    passes(Limit::OutputRowsPerCall, 3, &[many("a", "3x1")]);
    let error = fails(Limit::OutputRowsPerCall, 3, &[many("a", "4x1")]);
    assert_names(
        &error,
        "module 'scripted.wasm' returned 4 output rows in handle-input-rows for key [\"a\"], over the limit of 3 \
         per call (operator.max-output-rows-per-call); return fewer or smaller rows per call",
        Limit::OutputRowsPerCall,
    );
    // Rows of 100 bytes: three are about 370 bytes (with the op column and offsets), ten about 1.2 KiB.
    passes(Limit::OutputBytesPerCall, 1000, &[many("a", "3x100")]);
    let error = fails(Limit::OutputBytesPerCall, 1000, &[many("a", "10x100")]);
    assert!(error.starts_with("module 'scripted.wasm' returned 1.2 KiB of output rows in handle-input-rows for key [\"a\"], over the limit of 1000 bytes per call"), "{error}");
    // Per batch: each call fits, the batch does not.
    passes(Limit::OutputRowsPerBatch, 6, &[many("a", "3x1"), many("b", "3x1")]);
    let error = fails(Limit::OutputRowsPerBatch, 5, &[many("a", "3x1"), many("b", "3x1")]);
    assert!(error.contains(" that bring this batch to 6 rows, over the limit of 5 per shard and batch (operator.max-output-rows-per-batch)"), "{error}");
    let error = fails(Limit::OutputBytesPerBatch, 1000, &[many("a", "5x100"), many("b", "5x100")]);
    assert!(error.contains(" that bring this batch to 1.2 KiB of output, over the limit of 1000 bytes per shard and batch (operator.max-output-bytes-per-batch)"), "{error}");
}
