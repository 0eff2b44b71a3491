//! A Kafka sink's batch run again after a crash, against a real Kafka-protocol broker,
//! with other producers writing to its output topic: records whose header keys are not
//! UTF-8, a transaction left open before the batch's committed records, and the
//! sink's `transactional` setting changed between the crash and the restart.
//!
//! The test broker shows aborted records to read_committed consumers (Apache Kafka
//! does not), so these tests check what it shows honestly — records per (batch,
//! partition, seq) for a read_uncommitted consumer, and the last stable offset — and
//! check read_committed output only with `EDDY_KAFKA_TRANSACTIONS_VERIFIED=1`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use eddy_tests::kafka::{Broker, assert_ok, eddy_run, progress, purchases};
use eddy_tests::wasm;
use serde_json::Value;

/// running-count from topic `purchases` to topic `totals`; `sink` adds sink keys.
fn spec(dir: &Path, broker: &Broker, sink: &str) -> PathBuf {
    let bootstrap = broker.bootstrap();
    let text = format!(
        "[[source]]\nformat = \"kafka\"\ntopics = [\"purchases\"]\nstarting-offsets = \"earliest\"\n\
         schema = \"user STRING, amount BIGINT\"\n[source.kafka]\n\"bootstrap.servers\" = \"{bootstrap}\"\n\n\
         [trigger]\navailable-now = true\n\n\
         [operator]\nmodule = {:?}\nkey = [\"user\"]\noutput-mode = \"update\"\n\n\
         [sink]\nformat = \"kafka\"\ntopic = \"totals\"\nkey-column = \"user\"\n{sink}\n\
         [sink.kafka]\n\"bootstrap.servers\" = \"{bootstrap}\"\n",
        wasm("running_count")
    );
    let file = dir.join("pipeline.toml");
    std::fs::write(&file, text).expect("spec");
    file
}

/// Starts eddy with `env` set; it runs until killed or done.
fn start(spec: &Path, checkpoint: &Path, env: (&str, &str)) -> Child {
    eddy_run(spec, checkpoint)
        .env(env.0, env.1)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("eddy starts")
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn kill(mut child: Child) {
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
}

/// eddy's records in `totals` (read_uncommitted) per (batch, partition, seq): how
/// many times each is there.
fn eddy_records(broker: &Broker) -> BTreeMap<(u64, i64, u64), usize> {
    let mut seen = BTreeMap::new();
    for record in broker.records("totals") {
        let headers = &record["headers"];
        let Some(batch) = headers["eddy.batch"].as_str() else { continue };
        let seq = headers["eddy.seq"].as_str().expect("seq").parse().expect("number");
        let key = (batch.parse().expect("number"), record["partition"].as_i64().expect("partition"), seq);
        *seen.entry(key).or_default() += 1;
    }
    seen
}

/// How many users `lines` name: running-count writes one row per user a batch saw.
fn users_in(lines: &[String]) -> usize {
    let users: std::collections::BTreeSet<String> = lines
        .iter()
        .map(|line| serde_json::from_str::<Value>(line).expect("JSON")["user"].as_str().expect("user").to_string())
        .collect();
    users.len()
}

/// How many rows the batches of `checkpoint` wrote (from progress).
fn rows_written(checkpoint: &Path) -> usize {
    progress(checkpoint).iter().map(|b| b["sink"]["numOutputRows"].as_u64().unwrap_or(0) as usize).sum()
}

#[test]
fn a_rerun_skips_other_producers_records_whose_header_key_is_not_utf8() {
    let broker = Broker::start();
    broker.create_topic("purchases", 1);
    broker.create_topic("totals", 1);
    broker.produce("purchases", &purchases(100, 10, 21), Some("user"));
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = dir.path().join("checkpoint");
    let spec = spec(dir.path(), &broker, "");
    // Batch 0's records are written; another producer writes a record whose header
    // key is not UTF-8 after them; the query is killed before batch 0 is recorded as
    // published, so its re-run reads the partition to find what it wrote.
    let child = start(&spec, &checkpoint, ("EDDY_PAUSE_BEFORE_MANIFEST_MS", "60000"));
    let expected = users_in(&purchases(100, 10, 21));
    wait_until("batch 0's records", || eddy_records(&broker).len() == expected);
    broker.produce_raw("totals", 0, None, Some(b"\xff\xfetrace"), r#"{"other":"producer"}"#);
    kill(child);
    assert!(!checkpoint.join("sinks/0/0").exists());

    let output = eddy_run(&spec, &checkpoint).output().expect("eddy runs");
    assert_ok(&output, &broker);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let records = eddy_records(&broker);
    assert!(records.values().all(|n| *n == 1), "each record once: {records:?}");
    assert_eq!(records.len(), rows_written(&checkpoint), "every row of the batch written");
    assert_eq!(broker.records("totals").len(), records.len() + 1, "and the other producer's record");
}

#[test]
fn a_transactional_rerun_finds_its_committed_records_past_another_producers_open_transaction() {
    let broker = Broker::start();
    broker.create_topic("purchases", 1);
    broker.create_topic("totals", 1);
    broker.produce("purchases", &purchases(100, 10, 22), Some("user"));
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = dir.path().join("checkpoint");
    // Another producer's transaction is open on the output partition before batch 0
    // is written: the last stable offset stays before batch 0's committed records.
    let other = broker.open_transaction("totals", 0, r#"{"other":"open"}"#);
    let transactional = spec(dir.path(), &broker, "transactional = true");
    let child = start(&transactional, &checkpoint, ("EDDY_PAUSE_BEFORE_MANIFEST_MS", "60000"));
    let expected = users_in(&purchases(100, 10, 22));
    wait_until("batch 0's records", || eddy_records(&broker).len() == expected);
    // Its transaction commits right after its records are delivered; then the pause.
    std::thread::sleep(Duration::from_secs(2));
    kill(child);
    assert!(!checkpoint.join("sinks/0/0").exists(), "batch 0 is not recorded as published");
    let (stable, end) = broker.stable_and_end("totals", 0);
    assert!(stable < end, "the other transaction holds the last stable offset back ({stable} < {end})");

    // A bounded wait, then a clear error, while the transaction stays open.
    let impatient = spec(dir.path(), &broker, "transactional = true\ntransaction-wait = \"2 s\"");
    let failed = eddy_run(&impatient, &checkpoint).output().expect("eddy runs");
    assert!(!failed.status.success(), "the re-run cannot tell which records were committed");
    let error = String::from_utf8_lossy(&failed.stderr);
    assert!(
        error.contains("topic 'totals' partition 0 has a transaction open since offset 0")
            && error.contains("transaction-wait (2 s)"),
        "{error}"
    );

    // The transaction ends while the re-run waits: batch 0's records are found.
    let mut child = eddy_run(&transactional, &checkpoint)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("eddy starts");
    std::thread::sleep(Duration::from_secs(2));
    other.commit();
    let output = {
        let status = child.wait().expect("eddy exits");
        let mut stderr = String::new();
        use std::io::Read;
        child.stderr.take().map(|mut pipe| pipe.read_to_string(&mut stderr));
        (status, stderr)
    };
    assert!(output.0.success(), "eddy failed: {}", output.1);
    let records = eddy_records(&broker);
    assert!(records.values().all(|n| *n == 1), "each record once: {records:?}");
    assert_eq!(records.len(), rows_written(&checkpoint));
}

#[test]
fn a_batch_begun_in_a_transaction_is_ended_by_a_restart_without_transactions() {
    let broker = Broker::start();
    broker.create_topic("purchases", 1);
    broker.create_topic("totals", 1);
    broker.produce("purchases", &purchases(100, 10, 23), Some("user"));
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = dir.path().join("checkpoint");
    // Batch 0's records are delivered in a transaction that the crash leaves open.
    let child = start(
        &spec(dir.path(), &broker, "transactional = true"),
        &checkpoint,
        ("EDDY_PAUSE_IN_TRANSACTION_MS", "60000"),
    );
    wait_until("batch 0's records", || broker.stable_and_end("totals", 0).1 > 0);
    kill(child);
    assert_eq!(broker.stable_and_end("totals", 0).0, 0, "batch 0's transaction is open");

    // Restarted with transactional = false: the re-run keeps to the way batch 0 was
    // begun — it ends (aborts) the open transaction with the sink's transactional id
    // and counts only committed records as written.
    let output = eddy_run(&spec(dir.path(), &broker, ""), &checkpoint).output().expect("eddy runs");
    assert_ok(&output, &broker);
    let (stable, end) = broker.stable_and_end("totals", 0);
    assert_eq!(stable, end, "no transaction is left open");
    if std::env::var("EDDY_KAFKA_TRANSACTIONS_VERIFIED").as_deref() == Ok("1") {
        // With a broker that hides aborted records: batch 0 once for read_committed.
        let committed = broker.eddy_kafka(&["consume", "totals", "--metadata", "--isolation", "read_committed"], None);
        let records: Vec<Value> = committed.lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
        assert_eq!(records.len(), rows_written(&checkpoint), "each row once, read_committed");
    }
}
