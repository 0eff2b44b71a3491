//! kill -9 torture through Kafka: running-count reads a 4-partition topic in many small
//! batches and writes a 3-partition topic while it is killed at random points (seeded),
//! half the time while it waits between publishing a batch and committing it, and the
//! broker itself is killed and restarted once mid-run. The output topic (key and value
//! of every record, per partition, in order) and the final state must equal an
//! uninterrupted run's: nothing lost, nothing written twice — for a read_uncommitted
//! consumer, without broker transactions.
//!
//! `EDDY_KAFKA_TORTURE_KILLS` (default 30) and `EDDY_KAFKA_TORTURE_SEED` make it longer.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use eddy_tests::kafka::{Broker, reruns, start_quiet};
use eddy_tests::torture::final_state;
use eddy_tests::{Rng, env_or, wasm};
use serde_json::Value;

fn write_spec(dir: &Path, broker: &Broker, output: &str) {
    let module = wasm("running_count");
    let bootstrap = broker.bootstrap();
    let spec = format!(
        "[[source]]\nformat = \"kafka\"\ntopics = [\"purchases\"]\nstarting-offsets = \"earliest\"\n\
         max-offsets-per-trigger = 40\nschema = \"user STRING, amount BIGINT\"\n\
         [source.kafka]\n\"bootstrap.servers\" = \"{bootstrap}\"\n\n\
         [trigger]\navailable-now = true\n\n\
         [operator]\nmodule = {module:?}\nkey = [\"user\"]\noutput-mode = \"update\"\nparallelism = 2\n\n\
         [sink]\nformat = \"kafka\"\ntopic = \"{output}\"\nkey-column = \"user\"\n\
         [sink.kafka]\n\"bootstrap.servers\" = \"{bootstrap}\"\n\"message.timeout.ms\" = \"60000\"\n"
    );
    std::fs::write(dir.join("pipeline.toml"), spec).expect("spec");
}

fn start(dir: &Path, pause_after_publish: bool) -> Child {
    start_quiet(dir, pause_after_publish.then_some(("EDDY_PAUSE_AFTER_PUBLISH_MS", "300")))
}

/// How many re-runs in `stderr` found records of their batch already written.
fn count_reruns_with_records(stderr: &[u8]) -> usize {
    reruns(stderr).iter().filter(|rerun| rerun.already_written > 0).count()
}

/// Per partition, the (key, value) of every record in offset order.
fn topic_contents(broker: &Broker, topic: &str) -> BTreeMap<i64, Vec<(String, String)>> {
    let mut contents: BTreeMap<i64, Vec<(String, String)>> = BTreeMap::new();
    for record in broker.records(topic) {
        let partition = record["partition"].as_i64().expect("partition");
        let key = record["key"].as_str().unwrap_or_default().to_string();
        contents.entry(partition).or_default().push((key, record["value"].to_string()));
    }
    contents
}

#[test]
fn kill_9_and_a_broker_restart_lose_and_duplicate_nothing_in_the_output_topic() {
    let min_kills = env_or("EDDY_KAFKA_TORTURE_KILLS", 30);
    let mut rng = Rng(env_or("EDDY_KAFKA_TORTURE_SEED", 0xca7));
    let mut broker = Broker::start();
    broker.create_topic("purchases", 4);
    broker.create_topic("reference", 3);
    broker.create_topic("tortured", 3);
    // Enough batches (40 records each) that the query outlives every kill.
    let event_count = 6000;
    let events: Vec<String> = (0..event_count)
        .map(|_| format!("{{\"user\":\"u-{:02}\",\"amount\":{}}}", rng.below(60), rng.below(100) + 1))
        .collect();
    broker.produce("purchases", &events, Some("user"));

    let reference = tempfile::tempdir().expect("temp dir");
    write_spec(reference.path(), &broker, "reference");
    let output = start(reference.path(), false).wait_with_output().expect("uninterrupted run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    let tortured = tempfile::tempdir().expect("temp dir");
    write_spec(tortured.path(), &broker, "tortured");
    let mut kills = 0;
    let mut broker_restarted = false;
    // Re-runs of a batch that found some of its records already written: the
    // windows where a sink without the header protocol would duplicate.
    let mut reruns_with_records = 0;
    let started = Instant::now();
    loop {
        let mut child = start(tortured.path(), kills % 2 == 1);
        if kills < min_kills {
            // Past start-up (about a second), into the batches.
            std::thread::sleep(Duration::from_millis(300 + rng.below(2700)));
            if !broker_restarted && kills == min_kills / 2 {
                broker.restart();
                broker_restarted = true;
                std::thread::sleep(Duration::from_millis(500 + rng.below(1000)));
            }
            if child.try_wait().expect("status").is_none() {
                child.kill().expect("kill -9");
                let output = child.wait_with_output().expect("reaped");
                reruns_with_records += count_reruns_with_records(&output.stderr);
                kills += 1;
                continue;
            }
        }
        let output = child.wait_with_output().expect("run");
        reruns_with_records += count_reruns_with_records(&output.stderr);
        assert!(
            output.status.success(),
            "run after {kills} kills failed: {}\nbroker log:\n{}",
            String::from_utf8_lossy(&output.stderr),
            broker.log()
        );
        if kills >= min_kills {
            break;
        }
        panic!("the query finished after only {kills} kills; give it more input");
    }
    assert!(broker_restarted);
    eprintln!(
        "survived {kills} kills and a broker restart in {:.1} s; {reruns_with_records} batches ran again with records already written",
        started.elapsed().as_secs_f64()
    );

    let expected = topic_contents(&broker, "reference");
    let got = topic_contents(&broker, "tortured");
    let records: usize = expected.values().map(Vec::len).sum();
    assert!(records > 1000, "the reference run wrote its output ({records} records)");
    let mut last_counts: BTreeMap<String, i64> = BTreeMap::new();
    for (key, value) in expected.values().flatten() {
        let value: Value = serde_json::from_str(value).expect("JSON value");
        let count = last_counts.entry(key.clone()).or_default();
        *count = (*count).max(value["count"].as_i64().expect("count"));
    }
    assert_eq!(last_counts.values().sum::<i64>(), event_count, "the reference counted every event once");
    for (partition, records) in &expected {
        let tortured_records = got.get(partition).cloned().unwrap_or_default();
        assert_eq!(tortured_records.len(), records.len(), "partition {partition}: record count after {kills} kills");
        assert_eq!(&tortured_records, records, "partition {partition} differs after {kills} kills");
    }
    assert_eq!(final_state(tortured.path()), final_state(reference.path()), "the final state differs");
    assert!(reruns_with_records >= 2, "kills landed between publish and commit only {reruns_with_records} times");
}
