//! A static table that changed between a crash and the re-run of the batch the crash
//! interrupted is refused: the batch's offsets record keeps each table's fingerprint,
//! and the re-run says which table changed and what to do. Restored, the batch runs
//! again as it first did; once it committed, the changed table is read at the next
//! start as before.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use eddy_tests::eddy_bin;

const SPEC: &str = r#"
[[source]]
format = "json"
path = "input"
max-files-per-trigger = 1
schema = "user STRING, amount BIGINT"

[[table]]
name = "tiers"
format = "csv"
path = "tiers.csv"
schema = "user STRING, tier STRING"

[trigger]
available-now = true

[[stage]]
sql = "SELECT input.user, amount, tier FROM input JOIN tiers ON input.user = tiers.user"

[sink]
format = "json"
path = "out"
"#;

fn command(dir: &Path) -> Command {
    let mut command = Command::new(eddy_bin());
    command.args([
        "run",
        dir.join("pipeline.toml").to_str().expect("path"),
        "--checkpoint",
        dir.join("checkpoint").to_str().expect("path"),
    ]);
    command
}

fn run(dir: &Path) -> Output {
    command(dir).output().expect("eddy runs")
}

/// Runs the query until batch 0 is published, then kills it before the commit.
fn crash_after_publishing_batch_0(dir: &Path) {
    let mut child = command(dir)
        .env("EDDY_PAUSE_AFTER_PUBLISH_MS", "60000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("eddy starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("checkpoint/sinks/0/0").exists() {
        assert!(Instant::now() < deadline, "batch 0 was not published within 60 s");
        assert!(child.try_wait().expect("status").is_none(), "eddy ended before publishing batch 0");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    assert!(!dir.join("checkpoint/commits/0").exists(), "batch 0 is not committed");
}

fn rows(dir: &Path, batch: u64) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join(format!("out/part-{batch:05}.jsonl"))).unwrap_or_default();
    let mut rows: Vec<String> = text.lines().map(str::to_string).collect();
    rows.sort();
    rows
}

#[test]
fn a_static_table_changed_before_a_batch_runs_again_is_refused_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    std::fs::write(dir.join("pipeline.toml"), SPEC).expect("spec");
    std::fs::create_dir(dir.join("input")).expect("input");
    std::fs::write(
        dir.join("input/part-0.jsonl"),
        "{\"user\":\"ann\",\"amount\":3}\n{\"user\":\"bob\",\"amount\":5}\n",
    )
    .expect("input");
    let tiers = "user,tier\nann,gold\nbob,silver\n";
    std::fs::write(dir.join("tiers.csv"), tiers).expect("table");
    crash_after_publishing_batch_0(dir);
    let published = rows(dir, 0);
    assert_eq!(
        published,
        [r#"{"user":"ann","amount":3,"tier":"gold"}"#, r#"{"user":"bob","amount":5,"tier":"silver"}"#]
    );

    // The table changes while the query is down: the re-run of batch 0 is refused.
    std::fs::write(dir.join("tiers.csv"), "user,tier\nann,platinum\nbob,silver\n").expect("table");
    let refused = run(dir);
    assert!(!refused.status.success(), "the re-run with another table ran");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    let table = dir.join("tiers.csv");
    for part in [
        format!(
            "batch 0 cannot run again: static table 'tiers' ({}) changed since the batch was planned",
            table.display()
        ),
        "put the table's files back as they were until batch 0 has committed, then change them".to_string(),
    ] {
        assert!(stderr.contains(&part), "missing {part:?} in: {stderr}");
    }
    assert!(!dir.join("checkpoint/commits/0").exists(), "nothing committed");

    // Put back, the batch runs again and commits what it published.
    std::fs::write(dir.join("tiers.csv"), tiers).expect("table");
    let output = run(dir);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(dir.join("checkpoint/commits/0").exists());
    assert_eq!(rows(dir, 0), published);

    // Committed, the table may change: the next start reads it for the next batch.
    std::fs::write(dir.join("tiers.csv"), "user,tier\nann,platinum\nbob,silver\n").expect("table");
    std::fs::write(dir.join("input/part-1.jsonl"), "{\"user\":\"ann\",\"amount\":7}\n").expect("input");
    let output = run(dir);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(rows(dir, 1), [r#"{"user":"ann","amount":7,"tier":"platinum"}"#]);
}
