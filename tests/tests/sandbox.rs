//! The guest's sandbox: clocks answer the batch's processing time, randomness is
//! seeded from the batch id, and there is no environment, argument or file system.

use eddy::pipeline::InstanceLimits;
use eddy_tests::{Scripted, cmd};
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
