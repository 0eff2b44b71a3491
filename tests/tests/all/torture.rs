//! kill -9 torture: a pipeline with value, list and map state and event-time timers
//! runs over many one-file batches while it is killed at random points (seeded) and
//! restarted each time; its final sink output and final state must equal those of an
//! uninterrupted run — nothing lost, nothing counted twice.
//!
//! Default: 3 000 batches and at least 50 kills, each 0.1–0.9 s after a start (so they
//! land in start-up, planning, the operator, the sink and the commit alike). `EDDY_TORTURE_FILES`, `EDDY_TORTURE_KILLS`
//! and `EDDY_TORTURE_SEED` make it a longer soak.

use std::path::Path;

use eddy_tests::torture::{Outcome, Tortured, torture};
use eddy_tests::{Rng, env_or, repo_root};

/// Input files `from..to`, one batch each: commands over five keys that touch every
/// kind of state and register event-time timers.
struct Scripted;

impl Tortured for Scripted {
    fn write_spec(&self, dir: &Path) {
        write_spec(dir);
    }

    fn write_inputs(&self, input: &Path, from: u64, to: u64) {
        write_inputs(input, from, to);
    }
}

fn write_inputs(input: &Path, from: u64, to: u64) {
    for i in from..to {
        let key = format!("k{}", i % 5);
        let ts = format!("2026-11-13T{:02}:{:02}:{:02}Z", 8 + i / 3600, (i / 60) % 60, i % 60);
        let row = |op: &str, name: &str, k: &str, v: &str| {
            let record = serde_json::json!({"key": key, "op": op, "name": name, "k": k, "v": v, "ts": ts});
            format!("{record}\n")
        };
        let expiry = (1_794_556_800 + i as i64 + 4) * 1_000_000; // ts + 4 s, in micros
        let mut lines = String::new();
        lines += &row("value.get", "v", "", "");
        lines += &row("value.set", "v", "", &i.to_string());
        if i % 10 == 0 {
            lines += &row("list.put", "l", "", &format!("[\"reset-{i}\"]"));
        } else {
            lines += &row("list.append", "l", "", &i.to_string());
        }
        lines += &row("map.put", "m", &format!("f{}", i % 7), &i.to_string());
        if i % 3 == 0 {
            lines += &row("map.remove", "m", &format!("f{}", (i + 1) % 7), "");
        }
        lines += &row("timer.register", "", "", &expiry.to_string());
        lines += &row("list.get", "l", "", "");
        lines += &row("map.entries", "m", "", "");
        lines += &row("timer.list", "", "", "");
        std::fs::write(input.join(format!("batch-{i:06}.jsonl")), lines).expect("input file");
    }
}

/// The same query, its batches' changes written to the store ahead of the commit
/// (`spill-state-bytes` of one byte: after nearly every call); its reference run holds
/// them until the commit.
struct ScriptedWrittenAhead;

impl Tortured for ScriptedWrittenAhead {
    fn write_spec(&self, dir: &Path) {
        write_spec(dir);
        let spec = std::fs::read_to_string(dir.join("pipeline.toml")).expect("spec");
        let spec = spec.replace("parallelism = 2\n", "parallelism = 2\nspill-state-bytes = 1\n");
        std::fs::write(dir.join("pipeline.toml"), spec).expect("spec");
    }

    fn write_reference_spec(&self, dir: &Path) {
        write_spec(dir);
    }

    /// Each batch waits between its output and its commit, its changes written ahead:
    /// most kills land there, and the next run rolls the batch back.
    fn tortured_env(&self) -> Vec<(&'static str, &'static str)> {
        vec![("EDDY_PAUSE_AFTER_PUBLISH_MS", "20")]
    }

    fn write_inputs(&self, input: &Path, from: u64, to: u64) {
        write_inputs(input, from, to);
    }
}

fn write_spec(dir: &Path) {
    let wasm = repo_root().join("build/wasm/scripted.wasm");
    let spec = format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nmax-files-per-trigger = 1\n\
         schema = \"key STRING, op STRING, name STRING, k STRING, v STRING, ts TIMESTAMP\"\n\
         watermark = {{ column = \"ts\", delay = \"0 s\" }}\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"key\"]\nparallelism = 2\n\n\
         [operator.config]\ntime_mode = \"event-time\"\n\
         state = [{{ name = \"v\", kind = \"value\" }}, {{ name = \"l\", kind = \"list\" }}, {{ name = \"m\", kind = \"map\" }}]\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n"
    );
    std::fs::write(dir.join("pipeline.toml"), spec).expect("spec");
}

#[test]
fn kill_9_at_random_points_loses_and_duplicates_nothing() {
    let files = env_or("EDDY_TORTURE_FILES", 3_000);
    let min_kills = env_or("EDDY_TORTURE_KILLS", 50);
    let mut rng = Rng(env_or("EDDY_TORTURE_SEED", 0x5eed));

    let Outcome { expected, kills, .. } = torture(&Scripted, files, min_kills, &mut rng);
    let rows: usize = expected.values().map(|text| text.lines().count()).sum();
    assert!(rows > files as usize * 8, "the reference run produced output ({rows} rows)");
    let reads =
        expected.values().flat_map(|text| text.lines()).filter(|line| line.contains("\"op\":\"value.get\"")).count();
    assert_eq!(reads, files as usize, "every input file was processed exactly once");
    eprintln!("compared {rows} output rows in {} batches and the final state after {kills} kills", expected.len());
}

#[test]
fn kill_9_while_batches_write_their_changes_ahead_of_the_commit_loses_and_duplicates_nothing() {
    let files = env_or("EDDY_TORTURE_AHEAD_FILES", 1_500);
    let min_kills = env_or("EDDY_TORTURE_AHEAD_KILLS", 25);
    let mut rng = Rng(env_or("EDDY_TORTURE_SEED", 0xa7ead));

    let Outcome { expected, kills, kills_written_ahead } = torture(&ScriptedWrittenAhead, files, min_kills, &mut rng);
    // How many kills land amid changes written ahead depends on the build's speed (a
    // third in release, a fifth to a third in debug): at least one must.
    assert!(kills_written_ahead >= 1, "none of {kills} kills rolled a batch back");
    let reads =
        expected.values().flat_map(|text| text.lines()).filter(|line| line.contains("\"op\":\"value.get\"")).count();
    assert_eq!(reads, files as usize, "every input file was processed exactly once");
    eprintln!(
        "compared the output of {} batches and the final state after {kills} kills, {kills_written_ahead} of them \
         amid changes written ahead",
        expected.len()
    );
}
