//! The guest's sandbox: clocks answer the batch's processing time, randomness is
//! seeded from the query, the batch and the key group, sleeps cannot block, and there is
//! no environment, argument or file system.

use std::time::{Duration, Instant};

use eddy::contract::Scalar;
use eddy::pipeline::InstanceLimits;
use eddy::state::key;
use eddy::wasm::{GuestError, GuestProblem};
use eddy_tests::{Scripted, TEST_QUERY_ID, cmd};
use serde_json::json;

fn results(rows: Vec<(String, String)>) -> Vec<String> {
    rows.into_iter().map(|(_, result)| result).collect()
}

#[test]
fn clocks_and_randomness_are_the_batch_s_and_nothing_else_is_reachable() {
    let config = json!({"time_mode": "none", "state": []});
    let mut first = Scripted::new(config.clone(), InstanceLimits::default());
    let seen = results(
        first
            .run(
                5_000,
                &[
                    cmd("k", "sandbox.random", ""),
                    cmd("k", "sandbox.clock", ""),
                    cmd("k", "sandbox.env", ""),
                    cmd("k", "sandbox.fs", "").v("/etc/passwd"),
                    cmd("k", "sandbox.fs", "").v("."),
                ],
            )
            .expect("batch 0"),
    );
    assert_eq!(seen[1], "5000000", "the wall clock is the batch's processing time");
    assert_eq!(seen[2], "[0,0]", "no environment variables, no arguments");
    assert_eq!(&seen[3..], ["false", "false"], "no file system");

    // Another instance replaying batch 0 (at another wall time) draws the same number.
    let mut replay = Scripted::new(config, InstanceLimits::default());
    let replayed = results(replay.run(9_000, &[cmd("k", "sandbox.random", "")]).expect("batch 0 again"));
    assert_eq!(replayed[0], seen[0]);
    let next = results(replay.run(9_000, &[cmd("k", "sandbox.random", "")]).expect("batch 1"));
    assert_ne!(next[0], seen[0], "another batch draws another number");
}

#[test]
fn a_sleep_fails_within_the_call_deadline_instead_of_blocking() {
    let config = json!({"time_mode": "none", "state": []});
    let limits = InstanceLimits { call_timeout: Duration::from_millis(2_000), ..InstanceLimits::default() };
    // A sleep of nothing returns: nothing is waited for.
    let mut p = Scripted::new(config.clone(), limits);
    assert_eq!(results(p.run(1_000, &[cmd("nap", "sleep", "").v("0")]).expect("no wait")), ["null"]);

    // Ten minutes: time stands still in a batch, so the call stops at once.
    let started = Instant::now();
    let error = p.run(2_000, &[cmd("nap", "sleep", "").v("600")]).expect_err("a sleep cannot end");
    assert!(started.elapsed() < limits.call_timeout, "took {:?}", started.elapsed());
    let guest = error.downcast_ref::<GuestError>().expect("a guest error");
    assert_eq!(
        guest.problem,
        GuestProblem::Waited { wait: Some(Duration::from_secs(600)), call_timeout: limits.call_timeout }
    );
    assert_eq!(
        error.to_string(),
        "module 'scripted.wasm' tried to sleep 600 s in handle-input-rows for key [\"nap\"]; time inside the sandbox \
         stands still at the batch's processing time, so no sleep or wait can end: the call was stopped rather than \
         left blocking past operator.call-timeout-ms (2000 ms); remove the sleep or wait from the processor"
    );

    // A duration past what the clock can count (wasmtime-wasi waited forever) too;
    // how the guest's libc cuts it to 64 bits of nanoseconds is its own affair.
    let mut forever = Scripted::new(config, limits);
    let started = Instant::now();
    let error = forever.run(1_000, &[cmd("nap", "sleep", "").v("1e12")]).expect_err("a sleep cannot end");
    assert!(started.elapsed() < limits.call_timeout, "took {:?}", started.elapsed());
    let GuestProblem::Waited { wait: Some(wait), .. } =
        error.downcast_ref::<GuestError>().expect("guest error").problem
    else {
        panic!("not a refused wait: {error}");
    };
    assert!(wait > Duration::from_secs(100 * 365 * 86_400), "{wait:?}");
}

/// The first random number key `key` draws in each of `batches` batches, run by the
/// shard `range` of query `query_id`.
fn draws(query_id: &str, range: std::ops::Range<u16>, key: &str, batches: usize) -> Vec<String> {
    let config = json!({"time_mode": "none", "state": []});
    let mut shard = Scripted::new_shard(config, InstanceLimits::default(), query_id, range);
    (0..batches)
        .map(|batch| {
            let rows = shard.run(1_000 + batch as i64, &[cmd(key, "sandbox.random", "")]).expect("batch runs");
            results(rows).remove(0)
        })
        .collect()
}

#[test]
fn each_key_group_query_and_batch_draws_its_own_random_numbers_and_a_replay_the_same_in_any_shard() {
    let first = draws(TEST_QUERY_ID, 0..8, "k", 2);
    assert_ne!(first[0], first[1], "another batch, another number");
    assert_eq!(draws(TEST_QUERY_ID, 0..8, "k", 2), first, "a replay draws the same numbers");
    // The shard does not matter (a replay with another parallelism draws alike).
    assert_eq!(draws(TEST_QUERY_ID, 0..16, "k", 2), first);
    assert_eq!(draws(TEST_QUERY_ID, 8..16, "k", 2), first);
    // A key of another key group (of 16), another query: other numbers.
    let group = |name: &str| key::key_group(&key::encode(&[Scalar::Utf8(name.into())]), 16);
    let other_key = (0..).map(|i| format!("k{i}")).find(|name| group(name) != group("k")).expect("a key");
    let other_group = draws(TEST_QUERY_ID, 0..8, &other_key, 2);
    assert!(other_group.iter().all(|n| !first.contains(n)), "{first:?} {other_group:?}");
    let other_query = draws("another-query", 0..8, "k", 2);
    assert!(other_query.iter().all(|n| !first.contains(n)), "{first:?} {other_query:?}");
}
