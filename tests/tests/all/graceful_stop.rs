//! Stopping `eddy run` with a signal, as a person or a service manager does: the first
//! SIGTERM/SIGINT lets the batch in flight finish and commit, then eddy prints a
//! one-line summary and exits 0; a batch that runs past the grace period is abandoned
//! (nothing of it committed, exit code 75); a second signal stops at once.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use eddy_tests::{eddy_bin, repo_root};

/// A scripted pipeline under the as-fast-as-possible trigger (it never ends by itself),
/// whose processor may run for up to a minute per call.
fn write_spec(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("input")).expect("input dir");
    let wasm = repo_root().join("build/wasm/scripted.wasm");
    let spec = format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nschema = \"key STRING, op STRING, name STRING, k STRING, v STRING\"\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"key\"]\ncall-timeout-ms = 60000\n\n\
         [operator.config]\nstate = [{{ name = \"v\", kind = \"value\" }}]\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n"
    );
    let file = dir.join("pipeline.toml");
    std::fs::write(&file, spec).expect("spec");
    file
}

fn command(op: &str, v: &str) -> String {
    format!("{{\"key\":\"k\",\"op\":\"{op}\",\"name\":\"v\",\"v\":\"{v}\"}}\n")
}

fn start(dir: &Path, extra: &[&str]) -> Child {
    let spec = write_spec(dir);
    let checkpoint = dir.join("checkpoint");
    Command::new(eddy_bin())
        .args(["run", spec.to_str().expect("path"), "--checkpoint", checkpoint.to_str().expect("path")])
        .args(extra)
        .env("EDDY_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("eddy starts")
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill").args([&format!("-{name}"), &child.id().to_string()]).status().expect("kill");
    assert!(status.success(), "kill -{name}");
}

/// Waits until `path` exists (the query reached that point), at most a minute.
fn wait_for(path: &Path) {
    let started = Instant::now();
    while !path.exists() {
        assert!(started.elapsed() < Duration::from_secs(60), "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for the child to exit, at most `limit`; returns its output and how long it took.
fn finish(child: Child, limit: Duration) -> (Output, Duration) {
    let started = Instant::now();
    let id = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output().expect("eddy exits"));
    while !waiter.is_finished() {
        if started.elapsed() > limit {
            let _ = Command::new("kill").args(["-KILL", &id.to_string()]).status();
            panic!("eddy did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    (waiter.join().expect("waiter"), started.elapsed())
}

#[test]
fn sigterm_between_batches_stops_cleanly_with_a_summary() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("input")).expect("input");
    std::fs::write(dir.path().join("input/1.jsonl"), command("value.set", "a")).expect("file");
    let child = start(dir.path(), &[]);
    wait_for(&dir.path().join("checkpoint/commits/0"));
    signal(&child, "TERM");
    let (output, took) = finish(child, Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(took < Duration::from_secs(2), "an idle query stops at once, took {took:?}");
    let summary = stderr.lines().last().expect("a summary line");
    assert!(summary.ends_with("stopped: 1 batches, 1 input rows, 1 output rows; last committed batch 0"), "{stderr}");
    assert!(!dir.path().join("checkpoint/offsets/1").exists(), "no batch was started after the signal");
}

#[test]
fn sigint_during_a_batch_lets_it_finish_and_commit() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("input")).expect("input");
    // Batch 0 allocates and fills 48 MiB a hundred times: seconds of work it must finish.
    let busy: String = (0..100).map(|_| command("alloc", "48")).collect();
    std::fs::write(dir.path().join("input/1.jsonl"), busy + &command("value.set", "done")).expect("file");
    let child = start(dir.path(), &[]);
    wait_for(&dir.path().join("checkpoint/offsets/0"));
    signal(&child, "INT");
    assert!(!dir.path().join("checkpoint/commits/0").exists(), "the signal came while the batch ran");
    let (output, _) = finish(child, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(dir.path().join("checkpoint/commits/0").is_file(), "the batch in flight committed: {stderr}");
    assert!(stderr.contains("last committed batch 0"), "{stderr}");
}

#[test]
fn a_batch_past_the_grace_period_is_abandoned_with_nothing_committed() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("input")).expect("input");
    std::fs::write(dir.path().join("input/1.jsonl"), command("loop", "")).expect("file");
    let child = start(dir.path(), &["--stop-grace", "1"]);
    wait_for(&dir.path().join("checkpoint/offsets/0"));
    signal(&child, "TERM");
    let (output, took) = finish(child, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Not a clean stop: EX_TEMPFAIL (75), so that a service manager or script sees it.
    assert_eq!(output.status.code(), Some(75), "{stderr}");
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(10), "after the grace period: {took:?}");
    assert!(stderr.contains("ran past the 1 s grace period and was abandoned"), "{stderr}");
    assert!(!dir.path().join("checkpoint/commits/0").exists(), "nothing committed");
    assert!(dir.path().join("checkpoint/offsets/0").is_file(), "still planned: the next start runs it");
}

#[test]
fn a_second_signal_stops_at_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("input")).expect("input");
    std::fs::write(dir.path().join("input/1.jsonl"), command("loop", "")).expect("file");
    let child = start(dir.path(), &[]);
    wait_for(&dir.path().join("checkpoint/offsets/0"));
    signal(&child, "INT");
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, "INT");
    let (output, took) = finish(child, Duration::from_secs(10));
    assert_eq!(output.status.code(), Some(130), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(took < Duration::from_secs(3), "at once, took {took:?}");
    assert!(!dir.path().join("checkpoint/commits/0").exists(), "nothing committed");
}
