//! What a Kafka source makes of records and topics it cannot read as they are, against
//! a real Kafka-protocol broker: header keys and record keys that are not UTF-8, topics
//! that do not exist or were made again, and batches bounded in bytes.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use eddy_tests::kafka::{Broker, eddy_run, progress};
use serde_json::Value;

/// A pipeline reading Kafka `source` (its keys after `format`) with `schema` into the
/// JSON files of `out/`, by a SQL stage that passes every row.
fn spec(dir: &Path, broker: &Broker, schema: &str, source: &str) -> PathBuf {
    let text = format!(
        "[[source]]\nformat = \"kafka\"\nschema = \"{schema}\"\nstarting-offsets = \"earliest\"\n{source}\n\
         [source.kafka]\n\"bootstrap.servers\" = \"{}\"\n\n\
         [trigger]\navailable-now = true\n\n\
         [[stage]]\nsql = \"SELECT * FROM input\"\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n",
        broker.bootstrap()
    );
    let file = dir.join("pipeline.toml");
    std::fs::write(&file, text).expect("spec");
    file
}

fn run(spec: &Path, checkpoint: &Path) -> Output {
    eddy_run(spec, checkpoint).output().expect("eddy runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_ok(output: &Output) {
    assert!(output.status.success(), "eddy failed: {}", stderr(output));
}

/// Every row the JSON sink wrote under `dir/out`, as JSON values.
fn output_rows(dir: &Path) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir.join("out")).map(|e| e.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    files.sort();
    for file in files.iter().filter(|f| f.file_name().is_some_and(|n| n.to_string_lossy().starts_with("part-"))) {
        let text = std::fs::read_to_string(file).expect("part file");
        rows.extend(text.lines().map(|line| serde_json::from_str::<Value>(line).expect("a JSON row")));
    }
    rows
}

fn source_stats(checkpoint: &Path) -> (u64, u64) {
    progress(checkpoint).iter().fold((0, 0), |(rows, bad), batch| {
        let source = &batch["sources"][0];
        let bad_here: u64 = source["metrics"]["numBadRecords"].as_str().and_then(|n| n.parse().ok()).unwrap_or(0);
        (rows + source["numInputRows"].as_u64().unwrap_or(0), bad + bad_here)
    })
}

#[test]
fn a_header_key_that_is_not_utf8_is_a_bad_record_when_headers_are_read() {
    let broker = Broker::start();
    broker.create_topic("in", 1);
    broker.produce("in", &[r#"{"user":"a","amount":1}"#.to_string()], None);
    broker.produce_raw("in", 0, None, Some(b"\xff\xfetrace"), r#"{"user":"b","amount":2}"#);
    broker.produce("in", &[r#"{"user":"c","amount":3}"#.to_string()], None);
    let schema = "user STRING, amount BIGINT, headers STRING";

    let dir = tempfile::tempdir().expect("temp dir");
    let failed = run(&spec(dir.path(), &broker, schema, "topics = [\"in\"]"), &dir.path().join("cp"));
    assert!(!failed.status.success(), "on-bad-record = fail stops the query");
    let error = stderr(&failed);
    assert!(
        error.contains("topic 'in' partition 0 offset 1: bad record: header 1 of the record has a key that is not UTF-8 (\\xff\\xfetrace)"),
        "{error}"
    );
    assert!(!error.contains("panicked"), "{error}");

    let dir = tempfile::tempdir().expect("temp dir");
    let skip = spec(dir.path(), &broker, schema, "topics = [\"in\"]\non-bad-record = \"skip\"");
    assert_ok(&run(&skip, &dir.path().join("cp")));
    assert_eq!(source_stats(&dir.path().join("cp")), (2, 1), "two rows, one bad record");
    let users: Vec<String> =
        output_rows(dir.path()).iter().map(|row| row["user"].as_str().expect("user").to_string()).collect();
    assert_eq!(users, ["a", "c"]);

    // Without a headers column the headers are not read: the record is good.
    let dir = tempfile::tempdir().expect("temp dir");
    assert_ok(&run(
        &spec(dir.path(), &broker, "user STRING, amount BIGINT", "topics = [\"in\"]"),
        &dir.path().join("cp"),
    ));
    assert_eq!(source_stats(&dir.path().join("cp")), (3, 0));
}

#[test]
fn consume_with_metadata_shows_a_header_key_that_is_not_utf8_escaped() {
    let broker = Broker::start();
    broker.create_topic("in", 1);
    broker.produce_raw("in", 0, None, Some(b"\xff\xfetrace"), r#"{"user":"b"}"#);
    let records = broker.records("in");
    assert_eq!(records.len(), 1);
    // Each byte that is not UTF-8 as \xNN: JSON "\\xff\\xfetrace".
    assert_eq!(records[0]["headers"], serde_json::json!({"\\xff\\xfetrace": "raw"}), "{}", records[0]);
}

#[test]
fn a_binary_key_read_into_a_string_column_is_a_bad_record() {
    let broker = Broker::start();
    broker.create_topic("in", 1);
    // Two keys that differ only in bytes that are not UTF-8: read lossily as text,
    // both would become "k\u{fffd}" and merge.
    broker.produce_raw("in", 0, Some(b"k\xff"), None, r#"{"amount":1}"#);
    broker.produce_raw("in", 0, Some(b"k\xfe"), None, r#"{"amount":2}"#);
    broker.produce_raw("in", 0, Some(b"k1"), None, r#"{"amount":3}"#);

    let dir = tempfile::tempdir().expect("temp dir");
    let text_key =
        spec(dir.path(), &broker, "key STRING, amount BIGINT", "topics = [\"in\"]\non-bad-record = \"skip\"");
    assert_ok(&run(&text_key, &dir.path().join("cp")));
    assert_eq!(source_stats(&dir.path().join("cp")), (1, 2), "the two binary keys are bad records");
    assert_eq!(output_rows(dir.path()), vec![serde_json::json!({"key": "k1", "amount": 3})]);

    let dir = tempfile::tempdir().expect("temp dir");
    let failed =
        run(&spec(dir.path(), &broker, "key STRING, amount BIGINT", "topics = [\"in\"]"), &dir.path().join("cp"));
    let error = stderr(&failed);
    assert!(
        error
            .contains("offset 0: bad record: the record's key is not UTF-8 text (k\\xff); declare column 'key' BINARY"),
        "{error}"
    );

    let dir = tempfile::tempdir().expect("temp dir");
    assert_ok(&run(
        &spec(dir.path(), &broker, "key BINARY, amount BIGINT", "topics = [\"in\"]"),
        &dir.path().join("cp"),
    ));
    assert_eq!(source_stats(&dir.path().join("cp")), (3, 0), "BINARY keys read every record");
}

#[test]
fn a_listed_topic_that_does_not_exist_is_an_error_naming_it() {
    let broker = Broker::start();
    broker.create_topic("in", 1);
    broker.produce("in", &[r#"{"user":"a","amount":1}"#.to_string()], None);
    let schema = "user STRING, amount BIGINT";
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = dir.path().join("cp");

    let failed = run(&spec(dir.path(), &broker, schema, "topics = [\"in\", \"nope\"]"), &checkpoint);
    assert!(!failed.status.success(), "a missing topic is not skipped");
    assert!(
        stderr(&failed).contains("source 'source-0': topic 'nope' does not exist; create it"),
        "{}",
        stderr(&failed)
    );

    let only_in = spec(dir.path(), &broker, schema, "topics = [\"in\"]");
    assert_ok(&run(&only_in, &checkpoint));
    broker.eddy_kafka(&["delete-topic", "in"], None);
    let failed = run(&only_in, &checkpoint);
    assert!(!failed.status.success(), "a deleted topic is not skipped");
    assert!(
        stderr(&failed).contains("topic 'in' does not exist (it was read before: was it deleted?)"),
        "{}",
        stderr(&failed)
    );
}

#[test]
fn a_topic_made_again_while_the_query_was_down_is_reported() {
    let broker = Broker::start();
    broker.create_topic("in", 2);
    let lines: Vec<String> = (0..20).map(|i| format!("{{\"user\":\"u{i}\",\"amount\":{i}}}")).collect();
    broker.produce("in", &lines, None);
    let schema = "user STRING, amount BIGINT";
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = dir.path().join("cp");
    assert_ok(&run(&spec(dir.path(), &broker, schema, "topics = [\"in\"]"), &checkpoint));
    assert_eq!(source_stats(&checkpoint), (20, 0));

    // Made again with fewer partitions and fewer records than were read.
    broker.eddy_kafka(&["delete-topic", "in"], None);
    broker.create_topic("in", 1);
    broker.produce("in", &lines[..3], None);
    let failed = run(&spec(dir.path(), &broker, schema, "topics = [\"in\"]"), &checkpoint);
    assert!(!failed.status.success());
    let error = stderr(&failed);
    assert!(
        error.contains("topic 'in' has 1 partition(s), but partition 1 was read before (up to offset 10): the topic was deleted and made again"),
        "{error}"
    );

    // Made again with as many partitions: partition 0's position (10) is past the new end (3).
    broker.eddy_kafka(&["delete-topic", "in"], None);
    broker.create_topic("in", 2);
    broker.produce("in", &lines[..3], None);
    let failed = run(&spec(dir.path(), &broker, schema, "topics = [\"in\"]"), &checkpoint);
    let error = stderr(&failed);
    assert!(
        error.contains("topic 'in' partition 0: the position 10 is past the partition's end")
            && error.contains("a topic deleted and made again"),
        "{error}"
    );
}

/// `count` records of `size` bytes each (a JSON value with a padding field).
fn padded(count: usize, size: usize) -> Vec<String> {
    (0..count)
        .map(|i| {
            let head = format!("{{\"user\":\"u{i:04}\",\"amount\":{i},\"pad\":\"");
            format!("{head}{}\"}}", "x".repeat(size - head.len() - 2))
        })
        .collect()
}

#[test]
fn a_kafka_batch_holds_at_most_max_bytes_per_trigger() {
    let broker = Broker::start();
    broker.create_topic("in", 2);
    broker.produce("in", &padded(40, 10_000), None);
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = dir.path().join("cp");
    let source = "topics = [\"in\"]\nmax-bytes-per-trigger = \"50 KiB\"";
    assert_ok(&run(&spec(dir.path(), &broker, "user STRING, amount BIGINT, pad STRING", source), &checkpoint));
    let batches = progress(&checkpoint);
    let rows: Vec<u64> = batches.iter().map(|b| b["sources"][0]["numInputRows"].as_u64().unwrap_or(0)).collect();
    // 50 KiB = 51 200 bytes holds five records of 10 000 bytes, never a sixth.
    assert!(rows.iter().all(|n| (1..=5).contains(n)), "{rows:?}");
    assert_eq!(rows.iter().sum::<u64>(), 40, "every record once: {rows:?}");
    let read = batches.iter().map(|b| {
        b["sources"][0]["metrics"]["numInputBytes"].as_str().and_then(|n| n.parse::<u64>().ok()).expect("bytes")
    });
    assert!(read.clone().all(|bytes| bytes <= 51_200), "{:?}", read.collect::<Vec<_>>());
    let mut users: Vec<String> =
        output_rows(dir.path()).iter().map(|row| row["user"].as_str().expect("user").to_string()).collect();
    users.sort();
    assert_eq!(users, (0..40).map(|i| format!("u{i:04}")).collect::<Vec<_>>());
}

/// Waits until `path` exists (at most 60 s).
fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} did not appear within 60 s", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_logged_batch_larger_than_the_byte_budget_is_refused_and_planned_anew_after_the_documented_steps() {
    let broker = Broker::start();
    broker.create_topic("in", 1);
    broker.produce("in", &padded(20, 10_000), None);
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = dir.path().join("cp");
    let schema = "user STRING, amount BIGINT, pad STRING";
    // Batch 0 is planned with a budget that holds all 20 records, published, and
    // killed before its commit.
    let large = spec(dir.path(), &broker, schema, "topics = [\"in\"]\nmax-bytes-per-trigger = \"1 MB\"");
    let mut child = eddy_run(&large, &checkpoint)
        .env("EDDY_PAUSE_AFTER_PUBLISH_MS", "60000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("eddy starts");
    wait_for(&checkpoint.join("sinks/0/0"));
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    assert!(!checkpoint.join("commits/0").exists());

    // The restart with a smaller budget refuses the batch instead of holding it.
    let small = spec(dir.path(), &broker, schema, "topics = [\"in\"]\nmax-bytes-per-trigger = \"50 KiB\"");
    let failed = run(&small, &checkpoint);
    assert!(!failed.status.success());
    let error = stderr(&failed);
    assert!(
        error.contains("the batch logged before the restart holds more than max-bytes-per-trigger (51200 bytes)")
            && error.contains("A batch too large to run again"),
        "{error}"
    );

    // The way out the README gives: remove the uncommitted batch's records, then
    // start again — it is planned anew within the budget.
    for record in ["offsets/0", "sources/0/0", "sinks/0/0"] {
        std::fs::remove_file(checkpoint.join(record)).expect("a record of batch 0");
    }
    assert_ok(&run(&small, &checkpoint));
    let rows: Vec<u64> =
        progress(&checkpoint).iter().map(|b| b["sources"][0]["numInputRows"].as_u64().unwrap_or(0)).collect();
    assert!(rows.iter().all(|n| (1..=5).contains(n)), "{rows:?}");
    let mut users: Vec<String> =
        output_rows(dir.path()).iter().map(|row| row["user"].as_str().expect("user").to_string()).collect();
    users.sort();
    assert_eq!(users, (0..20).map(|i| format!("u{i:04}")).collect::<Vec<_>>(), "every record once");
}
