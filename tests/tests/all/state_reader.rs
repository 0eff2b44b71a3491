//! `eddy state` over a real checkpoint: values, lists, maps, timers and the change feed.

use std::path::Path;
use std::process::Command;

use eddy_tests::{eddy_bin, repo_root};
use serde_json::{Value, json};

fn eddy(args: &[&str]) -> Vec<Value> {
    let output = Command::new(eddy_bin()).args(args).env("EDDY_LOG", "warn").output().expect("eddy runs");
    assert!(output.status.success(), "eddy {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON line"))
        .collect()
}

fn command(op: &str, name: &str, k: &str, v: &str) -> String {
    format!("{}\n", json!({"key": "a", "op": op, "name": name, "k": k, "v": v}))
}

fn run_scripted(dir: &Path) -> String {
    std::fs::create_dir_all(dir.join("input")).expect("input dir");
    let far_future = "4102444800000000"; // 2100-01-01
    let first = [
        command("value.set", "v", "", "x"),
        command("list.append", "l", "", "first"),
        command("map.put", "m", "k1", "one"),
        command("map.put", "m", "k2", "two"),
        command("timer.register", "", "", far_future),
    ]
    .concat();
    let second = [command("value.set", "v", "", "y"), command("map.remove", "m", "k1", "")].concat();
    std::fs::write(dir.join("input/0.jsonl"), first).expect("file");
    std::fs::write(dir.join("input/1.jsonl"), second).expect("file");
    let wasm = repo_root().join("build/wasm/scripted.wasm");
    let spec = format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nmax-files-per-trigger = 1\nschema = \"key STRING, op STRING, name STRING, k STRING, v STRING\"\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"key\"]\n\n[operator.config]\ntime_mode = \"processing-time\"\n\
         state = [{{ name = \"v\", kind = \"value\" }}, {{ name = \"l\", kind = \"list\" }}, {{ name = \"m\", kind = \"map\" }}]\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n"
    );
    std::fs::write(dir.join("pipeline.toml"), spec).expect("spec");
    let checkpoint = dir.join("checkpoint");
    eddy(&[
        "run",
        dir.join("pipeline.toml").to_str().expect("path"),
        "--checkpoint",
        checkpoint.to_str().expect("path"),
    ]);
    checkpoint.to_str().expect("path").to_string()
}

#[test]
fn the_state_reader_shows_values_timers_and_changes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = run_scripted(dir.path());

    let values = eddy(&["state", "read", &checkpoint, "--var", "v"]);
    assert_eq!(values.len(), 1);
    assert_eq!(
        (&values[0]["key"], &values[0]["kind"], &values[0]["value"]),
        (&json!(["a"]), &json!("value"), &json!("y"))
    );
    let list = eddy(&["state", "read", &checkpoint, "--var", "l", "--key", "[\"a\"]"]);
    assert_eq!(list[0]["value"], json!(["first"]));
    let map = eddy(&["state", "read", &checkpoint, "--var", "m"]);
    assert_eq!(
        map.iter().map(|e| (e["mapKey"].clone(), e["value"].clone())).collect::<Vec<_>>(),
        vec![(json!("k2"), json!("two"))]
    );

    let timers = eddy(&["state", "read", &checkpoint, "--timers"]);
    assert_eq!(timers.len(), 1);
    assert_eq!((&timers[0]["key"], &timers[0]["expiry"]), (&json!(["a"]), &json!(4_102_444_800_000_000i64)));

    let changes = eddy(&["state", "read", &checkpoint, "--changes", "0..1"]);
    let feed: Vec<(u64, String, String, Value, Value)> = changes
        .iter()
        .map(|c| {
            (
                c["batch"].as_u64().expect("batch"),
                c["change"].as_str().expect("change").into(),
                c["var"].as_str().expect("var").into(),
                c["mapKey"].clone(),
                c["value"].clone(),
            )
        })
        .collect();
    assert_eq!(
        feed,
        vec![
            (0, "update".into(), "l".into(), Value::Null, json!(["first"])),
            (0, "update".into(), "m".into(), json!("k1"), json!("one")),
            (0, "update".into(), "m".into(), json!("k2"), json!("two")),
            (0, "update".into(), "v".into(), Value::Null, json!("x")),
            (1, "delete".into(), "m".into(), json!("k1"), Value::Null),
            (1, "update".into(), "v".into(), Value::Null, json!("y")),
        ]
    );
    assert_eq!(eddy(&["state", "read", &checkpoint, "--changes", "1"]).len(), 2);

    // A past batch: batch 0's snapshot (the default interval snapshots batch 0).
    let then = eddy(&["state", "read", &checkpoint, "--var", "v", "--batch", "0"]);
    assert_eq!(then[0]["value"], json!("x"));
    let map_then = eddy(&["state", "read", &checkpoint, "--var", "m", "--batch", "0"]);
    assert_eq!(map_then.iter().map(|e| e["mapKey"].clone()).collect::<Vec<_>>(), vec![json!("k1"), json!("k2")]);
    assert_eq!(eddy(&["state", "read", &checkpoint, "--var", "v", "--batch", "1"])[0]["value"], json!("y"));

    let metadata = eddy(&["state", "metadata", &checkpoint]);
    assert_eq!(metadata[0]["committedBatch"], 1);
}

#[test]
fn a_past_batch_is_rebuilt_from_a_snapshot_and_the_change_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("input")).expect("input dir");
    for i in 0..5 {
        std::fs::write(dir.path().join(format!("input/{i}.jsonl")), command("value.set", "v", "", &format!("v{i}")))
            .expect("file");
    }
    let wasm = repo_root().join("build/wasm/scripted.wasm");
    let spec = format!(
        "snapshot-interval = 3\n\n[[source]]\nformat = \"json\"\npath = \"input\"\nmax-files-per-trigger = 1\n\
         schema = \"key STRING, op STRING, name STRING, k STRING, v STRING\"\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"key\"]\n\n[operator.config]\nstate = [{{ name = \"v\", kind = \"value\" }}]\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n"
    );
    std::fs::write(dir.path().join("pipeline.toml"), spec).expect("spec");
    let checkpoint = dir.path().join("checkpoint");
    let cp = checkpoint.to_str().expect("path");
    eddy(&["run", dir.path().join("pipeline.toml").to_str().expect("path"), "--checkpoint", cp]);
    assert!(checkpoint.join("state/snapshots/0").is_dir() && checkpoint.join("state/snapshots/3").is_dir());
    for batch in 0..5 {
        let read = eddy(&["state", "read", cp, "--var", "v", "--batch", &batch.to_string()]);
        assert_eq!(read[0]["value"], json!(format!("v{batch}")), "batch {batch}");
    }
}

#[test]
fn the_state_of_a_running_query_is_read_while_it_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("input")).expect("input dir");
    let wasm = repo_root().join("build/wasm/scripted.wasm");
    // No trigger: as fast as possible, until stopped.
    let spec = format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nschema = \"key STRING, op STRING, name STRING, k STRING, v STRING\"\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"key\"]\n\n[operator.config]\nstate = [{{ name = \"v\", kind = \"value\" }}]\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n"
    );
    std::fs::write(dir.path().join("pipeline.toml"), spec).expect("spec");
    let checkpoint = dir.path().join("checkpoint");
    let cp = checkpoint.to_str().expect("path");
    let mut query = Command::new(eddy_bin())
        .args(["run", dir.path().join("pipeline.toml").to_str().expect("path"), "--checkpoint", cp])
        .env("EDDY_LOG", "warn")
        .spawn()
        .expect("eddy starts");
    // Waits until the running query's state shows `value` for key "a".
    let wait_for = |value: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let output = Command::new(eddy_bin()).args(["state", "read", cp, "--var", "v"]).output().expect("reads");
            let text = String::from_utf8_lossy(&output.stdout);
            if output.status.success() && text.contains(&format!("\"value\":\"{value}\"")) {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "the state never showed {value}: {text}");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    std::fs::write(dir.path().join("input/0.jsonl"), command("value.set", "v", "", "x")).expect("file");
    wait_for("x");
    std::fs::write(dir.path().join("input/1.jsonl"), command("value.set", "v", "", "y")).expect("file");
    wait_for("y");
    let changes = eddy(&["state", "read", cp, "--changes", "0..1"]);
    let values: Vec<&Value> = changes.iter().map(|change| &change["value"]).collect();
    assert_eq!(values, [&json!("x"), &json!("y")], "{changes:?}");
    assert_eq!(eddy(&["state", "metadata", cp])[0]["committedBatch"], 1);
    assert!(query.try_wait().expect("status").is_none(), "the query kept running while it was read");
    query.kill().expect("stopped");
    query.wait().expect("reaped");
}
