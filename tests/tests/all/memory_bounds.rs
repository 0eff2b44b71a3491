//! Hostile processors against the real `eddy` binary with every default limit: each
//! fails its batch cleanly, naming the limit and the spec key to raise, commits
//! nothing, and the process's peak resident memory (measured by `/usr/bin/time`, which
//! `make deps` installs) stays under the bound the README documents.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use eddy_tests::{eddy_bin, repo_root};

/// The README's bound on eddy's peak memory with every default limit ("Limits and
/// memory"), in KiB.
const PEAK_RSS_BOUND_KIB: u64 = 1024 * 1024;

/// Runs `eddy args` under `/usr/bin/time`; returns its output and peak RSS in KiB.
fn eddy_measured(dir: &Path, args: &[&str]) -> (Output, u64) {
    let report = dir.join("time.txt");
    let output = Command::new("/usr/bin/time")
        .arg("-o")
        .arg(&report)
        .args(["-f", "%M"])
        .arg(eddy_bin())
        .args(args)
        .env("EDDY_LOG", "warn")
        .output()
        .expect("/usr/bin/time runs eddy (make deps installs the `time` package)");
    let text = std::fs::read_to_string(&report).expect("time's report");
    // A failing command makes time write "Command exited with non-zero status N" first.
    let peak = text.lines().last().and_then(|line| line.trim().parse().ok());
    (output, peak.unwrap_or_else(|| panic!("no peak RSS in {text:?}")))
}

fn eddy(args: &[&str]) -> Output {
    Command::new(eddy_bin()).args(args).env("EDDY_LOG", "warn").output().expect("eddy runs")
}

/// A `scripted` pipeline over `input/` with default limits (plus `extra` operator lines).
fn write_spec(dir: &Path, extra: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("input")).expect("input dir");
    let wasm = repo_root().join("build/wasm/scripted.wasm");
    let spec = format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nschema = \"key STRING, op STRING, name STRING, k STRING, v STRING\"\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"key\"]\n{extra}\n\n[operator.config]\ntime_mode = \"processing-time\"\n\
         state = [{{ name = \"v\", kind = \"value\" }}, {{ name = \"m\", kind = \"map\" }}]\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n"
    );
    let file = dir.join("pipeline.toml");
    std::fs::write(&file, spec).expect("spec");
    file
}

fn command(op: &str, name: &str, v: &str) -> String {
    format!("{{\"key\":\"k\",\"op\":\"{op}\",\"name\":\"{name}\",\"v\":\"{v}\"}}\n")
}

/// Commits batch 0, then runs `hostile` as batch 1 with every default limit: checks that
/// it fails with `expected` after "nothing of it was committed: " (and `then` later in
/// the message), that the store still holds batch 0 as its last, and that the peak RSS
/// stayed under the bound.
fn hostile_batch_fails_cleanly(hostile: &str, expected: &str, then: &str) -> u64 {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = write_spec(dir.path(), "");
    let checkpoint = dir.path().join("checkpoint");
    let args = ["run", spec.to_str().expect("path"), "--checkpoint", checkpoint.to_str().expect("path")];
    std::fs::write(dir.path().join("input/1.jsonl"), command("value.set", "v", "before")).expect("file");
    assert!(eddy(&args).status.success(), "batch 0 runs");
    std::fs::write(dir.path().join("input/2.jsonl"), command("value.set", "v", "during") + hostile).expect("file");

    let (output, peak_kib) = eddy_measured(dir.path(), &args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the hostile batch fails");
    let prefix = "error: batch 1 failed; nothing of it was committed: ";
    assert!(stderr.starts_with(&format!("{prefix}{expected}")) && stderr.contains(then), "{stderr}");
    assert!(checkpoint.join("offsets/1").is_file() && !checkpoint.join("commits/1").exists(), "not committed");
    assert!(!dir.path().join("out/part-00001.jsonl").exists(), "no output published");
    let metadata = eddy(&["state", "metadata", checkpoint.to_str().expect("path")]);
    let metadata: serde_json::Value = serde_json::from_slice(&metadata.stdout).expect("metadata JSON");
    assert_eq!(metadata["committedBatch"], 0, "{metadata}");
    let state = eddy(&["state", "read", checkpoint.to_str().expect("path"), "--var", "v"]);
    assert!(String::from_utf8_lossy(&state.stdout).contains("\"value\":\"before\""), "batch 0's value stands");
    eprintln!("peak RSS of the hostile run: {} MiB", peak_kib / 1024);
    assert!(peak_kib < PEAK_RSS_BOUND_KIB, "peak RSS {} MiB is over the documented bound", peak_kib / 1024);
    peak_kib
}

#[test]
fn five_million_timers_for_one_key_stop_at_max_timers_per_batch() {
    hostile_batch_fails_cleanly(
        &command("timer.register-many", "v", "5000000"),
        "module 'scripted.wasm' trapped in handle-input-rows for key [\"k\"]: the processor registered or deleted \
         500001 timers in this batch, over the limit of 500000 per shard and batch (operator.max-timers-per-batch)",
        "",
    );
}

#[test]
fn thirty_map_entries_of_64_mib_stop_at_max_state_value_bytes() {
    hostile_batch_fails_cleanly(
        &command("map.put-many", "m", "30x67108864"),
        "module 'scripted.wasm' trapped in handle-input-rows for key [\"k\"]: a map entry of state variable 'm' \
         would hold 64.0 MiB, over the limit of 16 MiB for one state value (operator.max-state-value-bytes)",
        "",
    );
}

#[test]
fn thirty_map_entries_of_8_mib_stop_at_max_state_bytes_per_batch() {
    hostile_batch_fails_cleanly(
        &command("map.put-many", "m", "30x8388608"),
        "module 'scripted.wasm' trapped in handle-input-rows for key [\"k\"]: the state changes the processor \
         buffered in this batch reached 64.0 MiB, over the limit of 64 MiB per shard and batch \
         (operator.max-state-bytes-per-batch)",
        "",
    );
}

#[test]
fn huge_output_stops_at_max_output_bytes_per_batch() {
    // Eight keys of 40 MiB of rows each: whichever shard gets four or more passes 128 MiB.
    // (One call cannot return more than 64 MiB with the default guest memory cap: the
    // Rust SDK needs more than 256 MiB of guest memory to build that much.)
    let keys: String = (0..8)
        .map(|i| format!("{{\"key\":\"k{i}\",\"op\":\"output.many\",\"name\":\"v\",\"v\":\"40x1048576\"}}\n"))
        .collect();
    hostile_batch_fails_cleanly(
        &keys,
        "module 'scripted.wasm' returned output rows in handle-input-rows for key [\"k",
        "\"] that bring this batch to 160.0 MiB of output, over the limit of 128 MiB per shard and batch \
         (operator.max-output-bytes-per-batch)",
    );
}

#[test]
fn huge_logs_stop_at_max_log_bytes_per_call_even_when_not_shown() {
    // EDDY_LOG=warn: the info lines are not shown, and still count.
    hostile_batch_fails_cleanly(
        &command("log.many", "info", "1000x1048576"),
        "module 'scripted.wasm' trapped in handle-input-rows for key [\"k\"]: the processor logged 2 MiB in this \
         call, over the limit of 1 MiB per call (operator.max-log-bytes-per-call)",
        "",
    );
}
