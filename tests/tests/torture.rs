//! kill -9 torture: a pipeline with value, list and map state and event-time timers
//! runs over many one-file batches while it is killed at random points (seeded) and
//! restarted each time; its final sink output and final state must equal those of an
//! uninterrupted run — nothing lost, nothing counted twice.
//!
//! Default: 3 000 batches and at least 50 kills, each 0.1–0.9 s after a start (so they
//! land in start-up, planning, the operator, the sink and the commit alike). `EDDY_TORTURE_FILES`, `EDDY_TORTURE_KILLS`
//! and `EDDY_TORTURE_SEED` make it a longer soak.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use eddy::state::{Cf, StateStore};
use eddy_tests::{Rng, eddy_bin, env_or, repo_root};

/// Input files `from..to`, one batch each: commands over five keys that touch every
/// kind of state and register event-time timers.
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
    std::fs::create_dir_all(dir.join("input")).expect("input dir");
}

fn start(dir: &Path) -> Child {
    Command::new(eddy_bin())
        .args([
            "run",
            dir.join("pipeline.toml").to_str().expect("path"),
            "--checkpoint",
            dir.join("checkpoint").to_str().expect("path"),
        ])
        .env("EDDY_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("eddy starts")
}

/// Every part file's text, in batch order.
fn sink_output(dir: &Path) -> BTreeMap<String, String> {
    let mut parts = BTreeMap::new();
    for entry in std::fs::read_dir(dir.join("out")).expect("out dir") {
        let entry = entry.expect("entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("part-") && name.ends_with(".jsonl") {
            parts.insert(name, std::fs::read_to_string(entry.path()).expect("part"));
        }
    }
    parts
}

/// Every state and timer entry of the checkpoint.
fn final_state(dir: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let store =
        StateStore::open(&eddy::checkpoint::CheckpointDir::new(dir.join("checkpoint")).store_dir()).expect("store");
    let txn = store.begin();
    let mut entries = txn.scan_prefix(Cf::State, &[]).expect("state");
    entries.extend(txn.scan_prefix(Cf::Timers, &[]).expect("timers"));
    entries
}

/// The temporary files and directories (`.….tmp`) anywhere under `dir`, outside the
/// RocksDB store (which manages its own files).
fn temporary_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("directory").flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.ends_with(".tmp") {
            found.push(path);
        } else if path.is_dir() && name != "store" {
            found.extend(temporary_files(&path));
        }
    }
    found
}

#[test]
fn kill_9_at_random_points_loses_and_duplicates_nothing() {
    let files = env_or("EDDY_TORTURE_FILES", 3_000);
    let min_kills = env_or("EDDY_TORTURE_KILLS", 50);
    let mut rng = Rng(env_or("EDDY_TORTURE_SEED", 0x5eed));

    let reference = tempfile::tempdir().expect("temp dir");
    write_spec(reference.path());
    write_inputs(&reference.path().join("input"), 0, files);
    let output = start(reference.path()).wait_with_output().expect("uninterrupted run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    let tortured = tempfile::tempdir().expect("temp dir");
    write_spec(tortured.path());
    write_inputs(&tortured.path().join("input"), 0, files);
    let mut kills = 0;
    let started = Instant::now();
    loop {
        let mut child = start(tortured.path());
        if kills < min_kills {
            std::thread::sleep(Duration::from_millis(100 + rng.below(800)));
            if child.try_wait().expect("status").is_none() {
                child.kill().expect("kill -9");
                child.wait().expect("reaped");
                kills += 1;
                continue;
            }
        }
        let output = child.wait_with_output().expect("run");
        assert!(output.status.success(), "run after {kills} kills failed: {}", String::from_utf8_lossy(&output.stderr));
        if kills >= min_kills {
            break;
        }
        panic!("the run finished after only {kills} kills; raise EDDY_TORTURE_FILES");
    }
    eprintln!("survived {kills} kills in {:.1} s", started.elapsed().as_secs_f64());

    let expected = sink_output(reference.path());
    let got = sink_output(tortured.path());
    let rows: usize = expected.values().map(|text| text.lines().count()).sum();
    assert!(rows > files as usize * 8, "the reference run produced output ({rows} rows)");
    let reads =
        expected.values().flat_map(|text| text.lines()).filter(|line| line.contains("\"op\":\"value.get\"")).count();
    assert_eq!(reads, files as usize, "every input file was processed exactly once");
    assert_eq!(got.len(), expected.len(), "the same batches");
    for (part, text) in &expected {
        assert_eq!(got.get(part), Some(text), "{part} differs after {kills} kills");
    }
    assert_eq!(final_state(tortured.path()), final_state(reference.path()), "the final state differs");
    let mut leftovers = temporary_files(&tortured.path().join("checkpoint"));
    leftovers.extend(temporary_files(&tortured.path().join("out")));
    assert!(leftovers.is_empty(), "writes interrupted by kills left {leftovers:?}");
    eprintln!("compared {rows} output rows in {} batches and the final state", expected.len());
}
