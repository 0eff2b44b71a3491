//! kill -9 torture through Kafka where every restart runs with another `parallelism`
//! (2, 1, 3, 2, …: another machine, another pod size), most kills landing after the
//! sink wrote a batch and before the batch committed (before its manifest, so that the
//! restart writes the batch again over what is there). The re-run must write what the
//! crashed run wrote, whatever the shard layout: read with a read_uncommitted
//! consumer, the output holds every (batch, partition, sequence) exactly once, each
//! batch's sequences without a gap, and the query goes on to the end of its input.
//! Once with running-count (output from `handle-input-rows`), once with the
//! alert-suppression example, which emits from both handlers (input rows and timers).
//!
//! `EDDY_KAFKA_TORTURE_KILLS` (default 30) and `EDDY_KAFKA_TORTURE_SEED` make it longer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use eddy_tests::kafka::{Broker, Rerun, reruns, start_quiet};
use eddy_tests::{Rng, env_or, wasm};
use serde_json::Value;

/// The shard counts the starts cycle through: each restart runs with another.
const LAYOUTS: [usize; 3] = [2, 1, 3];

/// A query to torture: its processor and input.
struct Tortured {
    module: &'static str,
    schema: &'static str,
    key: &'static str,
    output_mode: &'static str,
    config: &'static str,
}

fn write_spec(dir: &Path, broker: &Broker, query: &Tortured, parallelism: usize) {
    let (module, bootstrap) = (wasm(query.module), broker.bootstrap());
    let (schema, key, output_mode, config) = (query.schema, query.key, query.output_mode, query.config);
    let spec = format!(
        "[[source]]\nformat = \"kafka\"\ntopics = [\"input\"]\nstarting-offsets = \"earliest\"\n\
         max-offsets-per-trigger = 40\nschema = \"{schema}\"\n\
         [source.kafka]\n\"bootstrap.servers\" = \"{bootstrap}\"\n\n\
         [trigger]\navailable-now = true\n\n\
         [operator]\nmodule = {module:?}\nkey = [\"{key}\"]\noutput-mode = \"{output_mode}\"\n\
         parallelism = {parallelism}\nkey-groups = 32\n\n[operator.config]\n{config}\n\n\
         [sink]\nformat = \"kafka\"\ntopic = \"output\"\nkey-column = \"{key}\"\n\
         [sink.kafka]\n\"bootstrap.servers\" = \"{bootstrap}\"\n\"message.timeout.ms\" = \"60000\"\n"
    );
    std::fs::write(dir.join("pipeline.toml"), spec).expect("spec");
}

fn start(dir: &Path, pause_before_manifest: bool) -> Child {
    start_quiet(dir, pause_before_manifest.then_some(("EDDY_PAUSE_BEFORE_MANIFEST_MS", "1500")))
}

/// What the output topic holds, read_uncommitted: per (batch, partition), the
/// sequence numbers in offset order and the records' values.
type Output = BTreeMap<(u64, i64), Vec<(u64, Value)>>;

/// Runs `query` over `events` killed at least `min_kills` times, each start with the
/// next shard count of [`LAYOUTS`]; returns the output and the re-runs the sink logged.
fn torture(query: &Tortured, events: &[String], min_kills: u64, rng: &mut Rng) -> (Output, Vec<Rerun>) {
    let broker = Broker::start();
    broker.create_topic("input", 4);
    broker.create_topic("output", 3);
    broker.produce("input", events, Some(query.key));
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut kills, mut starts) = (0, 0);
    let mut logged = Vec::new();
    let started = Instant::now();
    loop {
        write_spec(dir.path(), &broker, query, LAYOUTS[starts % LAYOUTS.len()]);
        // Most starts wait after the sink wrote a batch, before its manifest records it
        // (the batch is published, not committed: a restart writes it again over what
        // is there), and are killed there; the last start runs to the end.
        let in_window = kills < min_kills && starts % 4 != 3;
        let published_before = last_published(dir.path());
        let mut child = start(dir.path(), in_window);
        starts += 1;
        if kills < min_kills {
            if in_window {
                let deadline = Instant::now() + Duration::from_secs(60);
                while last_published(dir.path()) == published_before
                    && Instant::now() < deadline
                    && child.try_wait().expect("status").is_none()
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                std::thread::sleep(Duration::from_millis(rng.below(1200)));
            } else {
                // Past start-up (about a second), into the batches.
                std::thread::sleep(Duration::from_millis(400 + rng.below(2600)));
            }
            if child.try_wait().expect("status").is_none() {
                child.kill().expect("kill -9");
                let output = child.wait_with_output().expect("reaped");
                logged.extend(reruns(&output.stderr));
                kills += 1;
                continue;
            }
        }
        let output = child.wait_with_output().expect("run");
        logged.extend(reruns(&output.stderr));
        assert!(
            output.status.success(),
            "the run after {kills} kills (parallelism {}) failed: {}\nbroker log:\n{}",
            LAYOUTS[(starts - 1) % LAYOUTS.len()],
            String::from_utf8_lossy(&output.stderr),
            broker.log()
        );
        assert!(kills >= min_kills, "the query finished after only {kills} kills; give it more input");
        break;
    }
    let with_records = logged.iter().filter(|rerun| rerun.already_written > 0).count();
    eprintln!(
        "{}: survived {kills} kills, each restart in another layout, in {:.1} s; {with_records} batches ran again \
         with records already written",
        query.module,
        started.elapsed().as_secs_f64()
    );
    assert!(with_records as u64 >= min_kills / 4, "kills landed between publish and commit only {with_records} times");

    let mut output: Output = BTreeMap::new();
    for record in broker.records("output") {
        let headers = &record["headers"];
        let number = |name: &str| -> u64 {
            headers[name].as_str().and_then(|text| text.parse().ok()).unwrap_or_else(|| panic!("{name}: {record}"))
        };
        let partition = record["partition"].as_i64().expect("partition");
        output
            .entry((number("eddy.batch"), partition))
            .or_default()
            .push((number("eddy.seq"), record["value"].clone()));
    }
    for ((batch, partition), records) in &output {
        let sequences: Vec<u64> = records.iter().map(|(sequence, _)| *sequence).collect();
        let expected: Vec<u64> = (0..records.len() as u64).collect();
        assert_eq!(sequences, expected, "batch {batch}, partition {partition}: each sequence once, none missing");
    }
    (output, logged)
}

/// The newest batch the Kafka sink started writing (its intent; None: none yet).
fn last_published(dir: &Path) -> Option<u64> {
    let entries = std::fs::read_dir(dir.join("checkpoint/sinks/0/intents")).ok()?;
    entries.flatten().filter_map(|entry| entry.file_name().to_str()?.parse().ok()).max()
}

fn events_of(rng: &mut Rng, count: usize, event: impl Fn(&mut Rng, usize) -> String) -> Vec<String> {
    (0..count).map(|i| event(rng, i)).collect()
}

#[test]
fn running_count_restarted_in_other_layouts_writes_every_record_once() {
    let mut rng = Rng(env_or("EDDY_KAFKA_TORTURE_SEED", 0x1a7));
    let query = Tortured {
        module: "running_count",
        schema: "user STRING, amount BIGINT",
        key: "user",
        output_mode: "update",
        config: "",
    };
    let events = events_of(&mut rng, 6000, |rng, _| {
        format!("{{\"user\":\"u-{:02}\",\"amount\":{}}}", rng.below(60), rng.below(100) + 1)
    });
    let (output, _) = torture(&query, &events, env_or("EDDY_KAFKA_TORTURE_KILLS", 30), &mut rng);
    // Every event counted once: each user's counts are 1, 2, … in some batches, each
    // once, the last its number of events.
    let mut per_user: BTreeMap<String, usize> = BTreeMap::new();
    for event in &events {
        let event: Value = serde_json::from_str(event).expect("event");
        *per_user.entry(event["user"].as_str().expect("user").to_string()).or_default() += 1;
    }
    let mut counts: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (_, records) in output.iter() {
        for (_, value) in records {
            let user = value["user"].as_str().expect("user").to_string();
            counts.entry(user).or_default().push(value["count"].as_i64().expect("count"));
        }
    }
    for (user, events) in &per_user {
        let mut seen = counts.get(user).cloned().unwrap_or_default();
        seen.sort_unstable();
        let distinct: BTreeSet<i64> = seen.iter().copied().collect();
        assert_eq!(distinct.len(), seen.len(), "{user}: a count written twice: {seen:?}");
        assert_eq!(seen.last().copied(), Some(*events as i64), "{user}: the last count is its events");
    }
}

#[test]
fn alert_suppression_restarted_in_other_layouts_writes_every_record_once() {
    let mut rng = Rng(env_or("EDDY_KAFKA_TORTURE_SEED", 0xa1e7));
    // Alerts held back for 1 s of processing time: timers fire a few batches after
    // their alert, in batches that also raise alerts from their input.
    let query = Tortured {
        module: "alert_suppression",
        schema: "sensor STRING, reading DOUBLE, ts TIMESTAMP",
        key: "sensor",
        output_mode: "append",
        config: "threshold = 100.0\nsuppress_secs = 1\nclear_after = 2",
    };
    let events = events_of(&mut rng, 6000, |rng, i| {
        format!(
            "{{\"sensor\":\"s-{:02}\",\"reading\":{}.5,\"ts\":\"2026-11-29T08:{:02}:{:02}Z\"}}",
            rng.below(60),
            rng.below(200),
            (i / 60) % 60,
            i % 60
        )
    });
    let (output, logged) = torture(&query, &events, env_or("EDDY_KAFKA_TORTURE_KILLS", 30), &mut rng);
    // Some batch re-run with records already written had rows from both handlers.
    let kinds = |batch: u64| -> BTreeSet<String> {
        output
            .range((batch, i64::MIN)..=(batch, i64::MAX))
            .flat_map(|(_, records)| records.iter().map(|(_, value)| value["event"].as_str().unwrap_or("").to_string()))
            .collect()
    };
    let mixed = logged
        .iter()
        .filter(|rerun| rerun.already_written > 0)
        .filter(|rerun| {
            let kinds = kinds(rerun.batch);
            kinds.contains("REMINDER") && (kinds.contains("RAISE") || kinds.contains("CLEAR"))
        })
        .count();
    assert!(mixed >= 1, "no re-run batch had rows from both handlers: {logged:?}");
}
