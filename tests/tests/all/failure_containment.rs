//! A guest trap, timeout or memory cap aborts its batch with nothing committed, and the
//! batch is not skipped: a restart runs it again — exactly as planned — and, once the
//! module (or the limit) is fixed, commits it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use eddy_tests::{eddy_bin, repo_root};

fn eddy(args: &[&str]) -> Output {
    Command::new(eddy_bin()).args(args).env("EDDY_LOG", "warn").output().expect("eddy runs")
}

fn run(spec: &Path, checkpoint: &Path) -> Output {
    eddy(&["run", spec.to_str().expect("path"), "--checkpoint", checkpoint.to_str().expect("path")])
}

fn stderr_of_failure(output: &Output) -> String {
    assert!(!output.status.success(), "the run should fail; stdout: {}", String::from_utf8_lossy(&output.stdout));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn succeeded(output: &Output) {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Writes a pipeline reading the new files of `input/` into JSON-lines part files.
fn write_spec(dir: &Path, schema: &str, operator: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("input")).expect("input dir");
    let spec = format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nschema = \"{schema}\"\n\n\
         [operator]\n{operator}\n\n[sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n"
    );
    let file = dir.join("pipeline.toml");
    std::fs::write(&file, spec).expect("spec");
    file
}

/// What batch 1 left in the checkpoint after failing: its plan, no commit, no output.
fn assert_batch_1_left_nothing(dir: &Path) {
    let checkpoint = dir.join("checkpoint");
    assert!(checkpoint.join("offsets/1").is_file() && checkpoint.join("sources/0/1").is_file(), "planned");
    assert!(checkpoint.join("commits/0").is_file() && !checkpoint.join("commits/1").exists(), "not committed");
    assert!(!dir.join("out/part-00001.jsonl").exists() && !checkpoint.join("sinks/0/1").exists(), "no output");
    let metadata = eddy(&["state", "metadata", checkpoint.to_str().expect("path")]);
    let metadata: serde_json::Value = serde_json::from_slice(&metadata.stdout).expect("metadata JSON");
    assert_eq!(metadata["committedBatch"], 0, "{metadata}");
}

#[test]
fn a_trapping_batch_commits_nothing_and_runs_again_once_the_module_is_fixed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let module = |build: &str| {
        let path = repo_root().join(format!("build/wasm/invoice_totals_{build}.wasm"));
        write_spec(
            dir.path(),
            "customer STRING, amount STRING",
            &format!("module = {path:?}\nkey = [\"customer\"]\noutput-mode = \"update\""),
        )
    };
    let checkpoint = dir.path().join("checkpoint");
    let input = dir.path().join("input");
    std::fs::create_dir_all(&input).expect("input dir");
    std::fs::write(
        input.join("1.jsonl"),
        "{\"customer\":\"acme\",\"amount\":\"10\"}\n{\"customer\":\"zeta\",\"amount\":\"5\"}\n",
    )
    .expect("file");
    let buggy = module("buggy");
    succeeded(&run(&buggy, &checkpoint));
    std::fs::write(
        input.join("2.jsonl"),
        "{\"customer\":\"acme\",\"amount\":\"7\"}\n{\"customer\":\"zeta\",\"amount\":\"n/a\"}\n",
    )
    .expect("file");
    let stderr = stderr_of_failure(&run(&buggy, &checkpoint));
    // The guest logged its panic (at error level) before the batch's error.
    let (logged, failure) = stderr.split_once("\nerror: ").expect("an error line");
    assert!(logged.starts_with("[ERROR invoice_totals_buggy.wasm key=[\"zeta\"]] the processor panicked"), "{logged}");
    let failure = format!("error: {failure}");
    assert!(
        failure.starts_with(
            "error: batch 1 failed; nothing of it was committed: module 'invoice_totals_buggy.wasm' failed in \
             handle-input-rows for key [\"zeta\"]"
        ),
        "{failure}"
    );
    assert!(failure.contains("an invoice amount is a number"), "the guest's panic message is shown: {failure}");
    assert_batch_1_left_nothing(dir.path());
    assert_eq!(read(dir.path().join("out/part-00000.jsonl")).lines().count(), 2);

    // Another file arrives; the buggy module fails the same batch again (it is not skipped).
    std::fs::write(input.join("3.jsonl"), "{\"customer\":\"acme\",\"amount\":\"1\"}\n").expect("file");
    let again = stderr_of_failure(&run(&buggy, &checkpoint));
    assert!(again.contains("\nerror: batch 1 failed; nothing of it was committed"), "{again}");
    assert_batch_1_left_nothing(dir.path());

    // The fixed module (same state schema) re-runs batch 1 with exactly its file (a fresh
    // plan would take 2.jsonl and 3.jsonl together), then goes on.
    succeeded(&run(&module("fixed"), &checkpoint));
    assert_eq!(
        read(dir.path().join("out/part-00001.jsonl")),
        "{\"customer\":\"zeta\",\"invoices\":1,\"total\":5,\"rejected\":1}\n\
         {\"customer\":\"acme\",\"invoices\":2,\"total\":17,\"rejected\":0}\n"
    );
    assert_eq!(
        read(dir.path().join("out/part-00002.jsonl")),
        "{\"customer\":\"acme\",\"invoices\":3,\"total\":18,\"rejected\":0}\n"
    );
    assert!(checkpoint.join("commits/1").is_file() && checkpoint.join("commits/2").is_file());
}

/// A `scripted` pipeline with operator limits `limits` (TOML lines).
fn scripted_spec(dir: &Path, limits: &str) -> PathBuf {
    let wasm = repo_root().join("build/wasm/scripted.wasm");
    write_spec(
        dir,
        "key STRING, op STRING, name STRING, k STRING, v STRING",
        &format!(
            "module = {wasm:?}\nkey = [\"key\"]\n{limits}\n\n[operator.config]\nstate = [{{ name = \"v\", kind = \"value\" }}]"
        ),
    )
}

fn command(op: &str, v: &str) -> String {
    format!("{{\"key\":\"k\",\"op\":\"{op}\",\"name\":\"v\",\"v\":\"{v}\"}}\n")
}

#[test]
fn a_batch_over_the_memory_cap_commits_nothing_and_runs_again_under_a_raised_cap() {
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = dir.path().join("checkpoint");
    let capped = scripted_spec(dir.path(), "memory-limit-mb = 32");
    std::fs::write(dir.path().join("input/1.jsonl"), command("value.set", "before")).expect("file");
    succeeded(&run(&capped, &checkpoint));
    std::fs::write(
        dir.path().join("input/2.jsonl"),
        command("value.set", "during") + &command("alloc", "64") + &command("value.get", ""),
    )
    .expect("file");
    let failure = stderr_of_failure(&run(&capped, &checkpoint));
    assert!(
        failure.starts_with(
            "error: batch 1 failed; nothing of it was committed: module 'scripted.wasm' exceeded its memory cap of \
             32 MiB in handle-input-rows for key [\"k\"]"
        ),
        "{failure}"
    );
    assert_batch_1_left_nothing(dir.path());
    let state = eddy(&["state", "read", checkpoint.to_str().expect("path"), "--var", "v"]);
    assert!(String::from_utf8_lossy(&state.stdout).contains("\"value\":\"before\""), "batch 0's value stands");

    succeeded(&run(&scripted_spec(dir.path(), "memory-limit-mb = 128"), &checkpoint));
    assert_eq!(
        read(dir.path().join("out/part-00001.jsonl")),
        "{\"op\":\"value.set\",\"result\":\"null\"}\n{\"op\":\"alloc\",\"result\":\"null\"}\n\
         {\"op\":\"value.get\",\"result\":\"\\\"during\\\"\"}\n"
    );
}

#[test]
fn a_batch_past_its_deadline_commits_nothing_and_is_not_skipped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = dir.path().join("checkpoint");
    let spec = scripted_spec(dir.path(), "call-timeout-ms = 200");
    std::fs::write(dir.path().join("input/1.jsonl"), command("value.set", "before")).expect("file");
    succeeded(&run(&spec, &checkpoint));
    std::fs::write(dir.path().join("input/2.jsonl"), command("value.set", "during") + &command("loop", ""))
        .expect("file");
    for _ in 0..2 {
        let failure = stderr_of_failure(&run(&spec, &checkpoint));
        assert!(
            failure.starts_with(
                "error: batch 1 failed; nothing of it was committed: module 'scripted.wasm' ran past its 200 ms \
                 deadline in handle-input-rows for key [\"k\"]"
            ),
            "{failure}"
        );
        assert_batch_1_left_nothing(dir.path());
    }
}
