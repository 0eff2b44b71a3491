//! A file backlog bigger than max-bytes-per-trigger is read in several bounded batches
//! (by default too), and a batch killed with SIGKILL is replayed with exactly the files
//! it was planned with, even when a new file would now sort into it.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use eddy_tests::{eddy_bin, repo_root};

fn eddy(args: &[&str]) -> Output {
    Command::new(eddy_bin()).args(args).env("EDDY_LOG", "warn").output().expect("eddy runs")
}

fn succeeded(output: &Output) {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// The files each batch of `checkpoint` read, from its source log `sources/0/<N>`.
fn logged_batches(checkpoint: &Path) -> Vec<Vec<String>> {
    let mut batches = Vec::new();
    while let Ok(text) = std::fs::read_to_string(checkpoint.join(format!("sources/0/{}", batches.len()))) {
        let entry: serde_json::Value = serde_json::from_str(&text).expect("source log JSON");
        let files = entry["files"].as_array().expect("files");
        batches.push(files.iter().map(|file| file["name"].as_str().expect("name").to_string()).collect());
    }
    batches
}

/// The reference packing: files in name order, each batch up to `budget` bytes and
/// at least one file.
fn packed(dir: &Path, budget: u64) -> Vec<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("input")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    names.sort();
    let mut batches: Vec<Vec<String>> = Vec::new();
    let mut used = 0;
    for name in names {
        let size = dir.join(&name).metadata().expect("size").len();
        match batches.last_mut() {
            Some(batch) if used + size <= budget => batch.push(name),
            _ => {
                batches.push(vec![name]);
                used = 0;
            }
        }
        used += size;
    }
    batches
}

#[test]
fn a_backlog_over_the_default_max_bytes_per_trigger_is_read_in_bounded_batches() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("input");
    std::fs::create_dir(&input).expect("input dir");
    // Three files of 12 MiB (rows padded with a field outside the schema) and a small one.
    let pad = "p".repeat(1 << 20);
    for (name, user) in [("a", "ann"), ("b", "bob"), ("c", "cy")] {
        let row = format!("{{\"user\":\"{user}\",\"amount\":1,\"pad\":\"{pad}\"}}\n");
        std::fs::write(input.join(format!("{name}.jsonl")), row.repeat(12)).expect("file");
    }
    std::fs::write(input.join("d.jsonl"), "{\"user\":\"ann\",\"amount\":5}\n").expect("file");
    let wasm = repo_root().join("build/wasm/running_count.wasm");
    let spec = format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nschema = \"user STRING, amount BIGINT\"\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"user\"]\noutput-mode = \"update\"\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n"
    );
    std::fs::write(dir.path().join("pipeline.toml"), spec).expect("spec");
    let checkpoint = dir.path().join("checkpoint");
    succeeded(&eddy(&[
        "run",
        dir.path().join("pipeline.toml").to_str().expect("path"),
        "--checkpoint",
        checkpoint.to_str().expect("path"),
    ]));
    let expected = packed(&input, 32 << 20);
    assert_eq!(expected, [vec!["a.jsonl", "b.jsonl"], vec!["c.jsonl", "d.jsonl"]]);
    assert_eq!(logged_batches(&checkpoint), expected);
    assert!(checkpoint.join("commits/1").is_file() && !checkpoint.join("commits/2").exists(), "two batches");
    let part = |n: u32| std::fs::read_to_string(dir.path().join(format!("out/part-{n:05}.jsonl"))).expect("part");
    let mut first: Vec<String> = part(0).lines().map(str::to_string).collect();
    first.sort();
    assert_eq!(first, ["{\"user\":\"ann\",\"count\":12,\"sum\":12}", "{\"user\":\"bob\",\"count\":12,\"sum\":12}"]);
    let mut second: Vec<String> = part(1).lines().map(str::to_string).collect();
    second.sort();
    assert_eq!(second, ["{\"user\":\"ann\",\"count\":13,\"sum\":17}", "{\"user\":\"cy\",\"count\":12,\"sum\":12}"]);
}

fn command(key: &str, op: &str, v: &str) -> String {
    format!("{{\"key\":\"{key}\",\"op\":\"{op}\",\"name\":\"v\",\"v\":\"{v}\"}}\n")
}

#[test]
fn a_bounded_batch_killed_midway_replays_exactly_its_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("input");
    std::fs::create_dir(&input).expect("input dir");
    let wasm = repo_root().join("build/wasm/scripted.wasm");
    let spec = format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nmax-bytes-per-trigger = 200\n\
         schema = \"key STRING, op STRING, name STRING, k STRING, v STRING\"\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"key\"]\n\n[operator.config]\ntime_mode = \"processing-time\"\n\
         state = [{{ name = \"v\", kind = \"value\" }}]\n\n[sink]\nformat = \"json\"\npath = \"out\"\n\n\
         [trigger]\navailable-now = true\n"
    );
    let pipeline = dir.path().join("pipeline.toml");
    std::fs::write(&pipeline, spec).expect("spec");
    // a alone (141 bytes; b's 62 would pass 200), then b and c; b makes its batch slow.
    std::fs::write(input.join("a.jsonl"), command("a", "value.set", "a").repeat(3)).expect("file");
    std::fs::write(input.join("b.jsonl"), command("b", "timer.register-many", "300000")).expect("file");
    std::fs::write(input.join("c.jsonl"), command("c", "value.set", "c")).expect("file");
    assert_eq!(packed(&input, 200), [vec!["a.jsonl"], vec!["b.jsonl", "c.jsonl"]]);
    let checkpoint = dir.path().join("checkpoint");
    let args = ["run", pipeline.to_str().expect("path"), "--checkpoint", checkpoint.to_str().expect("path")];

    let mut child =
        Command::new(eddy_bin()).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("eddy starts");
    let started = Instant::now();
    while !checkpoint.join("offsets/1").is_file() {
        assert!(started.elapsed() < Duration::from_secs(120), "batch 1 was never planned");
        assert!(child.try_wait().expect("waits").is_none(), "eddy ended before batch 1 was planned");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    assert!(!checkpoint.join("commits/1").exists(), "the kill came after batch 1 committed; make b.jsonl slower");
    assert_eq!(logged_batches(&checkpoint), [vec!["a.jsonl"], vec!["b.jsonl", "c.jsonl"]]);

    // A file arrives that a fresh plan would put into batch 1 (b, bb and c).
    std::fs::write(input.join("bb.jsonl"), command("bb", "value.set", "bb")).expect("file");
    succeeded(&eddy(&args));
    assert_eq!(logged_batches(&checkpoint), [vec!["a.jsonl"], vec!["b.jsonl", "c.jsonl"], vec!["bb.jsonl"]]);
    let part = |n: u32| std::fs::read_to_string(dir.path().join(format!("out/part-{n:05}.jsonl"))).expect("part");
    let mut replayed: Vec<String> = part(1).lines().map(str::to_string).collect();
    replayed.sort();
    assert_eq!(
        replayed,
        ["{\"op\":\"timer.register-many\",\"result\":\"null\"}", "{\"op\":\"value.set\",\"result\":\"null\"}"]
    );
    assert_eq!(part(2), "{\"op\":\"value.set\",\"result\":\"null\"}\n");
    let timers = eddy(&["state", "read", checkpoint.to_str().expect("path"), "--timers"]);
    assert_eq!(String::from_utf8_lossy(&timers.stdout).lines().count(), 300_000, "batch 1's timers, once");
}
