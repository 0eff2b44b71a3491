//! The engine under each trigger, with several sources and their watermarks.

use std::path::Path;

use eddy::contract::Scalar;
use eddy::engine::{BatchMetrics, RunOptions, RunSummary, run_pipeline};
use eddy::pipeline::Pipeline;
use eddy_tests::repo_root;

fn running_count_spec(trigger: &str, extra_source: &str) -> String {
    let wasm = repo_root().join("build/wasm/running_count.wasm");
    format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nschema = \"user STRING, amount BIGINT\"\n{extra_source}\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"user\"]\noutput-mode = \"update\"\nparallelism = 2\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n{trigger}\n"
    )
}

/// Runs `spec` in `dir`; returns the summary and every batch's metrics.
fn run(dir: &Path, spec: &str, options: RunOptions) -> (RunSummary, Vec<BatchMetrics>) {
    let file = dir.join("pipeline.toml");
    std::fs::write(&file, spec).expect("spec");
    let pipeline = Pipeline::load(&file).expect("valid spec");
    let options = RunOptions { checkpoint: Some(dir.join("checkpoint")), ..options };
    let mut batches = Vec::new();
    let summary = run_pipeline(&pipeline, &options, |metrics, _| {
        batches.push(metrics.clone());
        Ok(())
    })
    .expect("the query runs");
    (summary, batches)
}

fn purchases(dir: &Path, files: usize) {
    std::fs::create_dir_all(dir.join("input")).expect("input dir");
    for i in 0..files {
        let lines = format!("{{\"user\":\"u{i}\",\"amount\":1}}\n{{\"user\":\"shared\",\"amount\":{i}}}\n");
        std::fs::write(dir.join(format!("input/{i:03}.jsonl")), lines).expect("file");
    }
}

#[test]
fn once_runs_a_single_batch_of_everything_available() {
    let dir = tempfile::tempdir().expect("temp dir");
    purchases(dir.path(), 3);
    // Like Spark's Once, the one batch ignores max-files-per-trigger.
    let spec = running_count_spec("[trigger]\nonce = true", "max-files-per-trigger = 1");
    let (summary, batches) = run(dir.path(), &spec, RunOptions::default());
    assert_eq!((summary.batches, summary.input_rows), (1, 6));
    assert_eq!(batches[0].batch_id, 0);
}

#[test]
fn available_now_drains_what_is_there_in_limited_batches_then_stops() {
    let dir = tempfile::tempdir().expect("temp dir");
    purchases(dir.path(), 5);
    let spec = running_count_spec("[trigger]\navailable-now = true", "max-files-per-trigger = 2");
    let (summary, batches) = run(dir.path(), &spec, RunOptions::default());
    assert_eq!(summary.batches, 3);
    assert_eq!(batches.iter().map(|b| b.input_rows).collect::<Vec<_>>(), vec![4, 4, 2]);
    // Nothing new: a second run commits nothing.
    let (again, _) = run(dir.path(), &spec, RunOptions::default());
    assert_eq!(again.batches, 0);
}

#[test]
fn as_fast_as_possible_picks_up_files_that_arrive_while_it_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    purchases(dir.path(), 1);
    let file = dir.path().join("pipeline.toml");
    std::fs::write(&file, running_count_spec("", "")).expect("spec");
    let pipeline = Pipeline::load(&file).expect("valid spec");
    let options =
        RunOptions { checkpoint: Some(dir.path().join("checkpoint")), max_batches: Some(2), ..RunOptions::default() };
    let late_file = dir.path().join("input/late.jsonl");
    let mut inputs = Vec::new();
    let summary = run_pipeline(&pipeline, &options, |metrics, _| {
        inputs.push(metrics.input_rows);
        // A file arrives while the query is running (after its first batch).
        if metrics.batch_id == 0 {
            std::fs::write(&late_file, "{\"user\":\"late\",\"amount\":7}\n")?;
        }
        Ok(())
    })
    .expect("the query runs");
    assert_eq!(summary.batches, 2);
    assert_eq!(inputs, vec![2, 1], "the late file is the second batch");
}

#[test]
fn processing_time_batches_start_an_interval_apart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let wasm = repo_root().join("build/wasm/noop.wasm");
    // A rate source makes new rows all the time.
    let spec = format!(
        "[[source]]\nformat = \"rate\"\nrows-per-second = 200\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"value\"]\noutput-mode = \"update\"\n\n\
         [trigger]\nprocessing-time = \"300 ms\"\n"
    );
    let file = dir.path().join("pipeline.toml");
    std::fs::write(&file, &spec).expect("spec");
    let error = Pipeline::load(&file).err();
    assert!(error.is_none(), "{error:?}");
    let (summary, batches) = run(dir.path(), &spec, RunOptions { max_batches: Some(3), ..RunOptions::default() });
    assert_eq!(summary.batches, 3);
    for pair in batches.windows(2) {
        let gap = pair[1].processing_time - pair[0].processing_time;
        assert!(gap >= 290_000, "batches {} µs apart", gap);
    }
}

fn alert_spec(policy: &str) -> String {
    let wasm = repo_root().join("build/wasm/alert_suppression.wasm");
    let source = |name: &str| {
        format!(
            "[[source]]\nname = \"{name}\"\nformat = \"json\"\npath = \"{name}\"\nmax-files-per-trigger = 1\n\
             schema = \"sensor STRING, reading DOUBLE, ts TIMESTAMP\"\n\
             watermark = {{ column = \"ts\", delay = \"0 s\" }}\n\n"
        )
    };
    format!(
        "watermark-policy = \"{policy}\"\n\n{}{}[operator]\nmodule = {wasm:?}\nkey = [\"sensor\"]\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n",
        source("fast"),
        source("slow")
    )
}

fn two_sources(dir: &Path) {
    for name in ["fast", "slow"] {
        std::fs::create_dir_all(dir.join(name)).expect("dir");
    }
    let reading =
        |sensor: &str, ts: &str| format!("{{\"sensor\":\"{sensor}\",\"reading\":1.0,\"ts\":\"2026-11-13T{ts}Z\"}}\n");
    std::fs::write(dir.join("fast/1.jsonl"), reading("a", "10:00:00")).expect("file");
    std::fs::write(dir.join("fast/2.jsonl"), reading("a", "09:30:00")).expect("file");
    std::fs::write(dir.join("fast/3.jsonl"), reading("a", "09:45:00")).expect("file");
    std::fs::write(dir.join("slow/1.jsonl"), reading("b", "09:00:00")).expect("file");
}

#[test]
fn the_query_watermark_is_the_slowest_source_s() {
    let dir = tempfile::tempdir().expect("temp dir");
    two_sources(dir.path());
    let (summary, batches) = run(dir.path(), &alert_spec("min"), RunOptions::default());
    assert_eq!(summary.rows_dropped_by_watermark, 0, "09:30 and 09:45 are not late for a 09:00 watermark");
    let nine = 1_794_560_400_000_000; // 2026-11-13T09:00:00Z
    assert_eq!(batches[1].watermark, Some(nine));
}

#[test]
fn with_the_max_policy_the_fastest_source_sets_the_watermark() {
    let dir = tempfile::tempdir().expect("temp dir");
    two_sources(dir.path());
    let (summary, batches) = run(dir.path(), &alert_spec("max"), RunOptions::default());
    let ten = 1_794_564_000_000_000; // 2026-11-13T10:00:00Z
    assert_eq!(batches[1].watermark, Some(ten));
    // Batch 1 judges late rows by batch 0's watermark (none): 09:30 is kept. Batch 2
    // judges them by batch 1's, 10:00: 09:45 is late.
    assert_eq!(batches.iter().map(|b| b.rows_dropped_by_watermark).collect::<Vec<_>>()[..3], [0, 0, 1]);
    assert_eq!(summary.rows_dropped_by_watermark, 1);
}

/// Spark's late-row rule: a row is late when its event time is at or before the
/// previous batch's watermark; the current batch's watermark only evicts and fires.
#[test]
fn late_rows_are_judged_by_the_previous_batch_s_watermark_and_include_the_watermark_itself() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("input")).expect("dir");
    let reading = |ts: &str| format!("{{\"sensor\":\"a\",\"reading\":1.0,\"ts\":\"2026-11-13T{ts}Z\"}}\n");
    let files = [vec!["10:00:00"], vec!["09:00:00"], vec!["10:00:00", "10:00:00.000001", "11:00:00"], vec!["10:30:00"]];
    for (i, times) in files.iter().enumerate() {
        let lines: String = times.iter().map(|ts| reading(ts)).collect();
        std::fs::write(dir.path().join(format!("input/{i}.jsonl")), lines).expect("file");
    }
    let wasm = repo_root().join("build/wasm/alert_suppression.wasm");
    let spec = format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nmax-files-per-trigger = 1\n\
         schema = \"sensor STRING, reading DOUBLE, ts TIMESTAMP\"\n\
         watermark = {{ column = \"ts\", delay = \"0 s\" }}\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"sensor\"]\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n"
    );
    let (_, batches) = run(dir.path(), &spec, RunOptions::default());
    let dropped: Vec<u64> = batches.iter().map(|b| b.rows_dropped_by_watermark).collect();
    // Batch 0: no watermark yet. Batch 1 runs with 10:00 but judges by batch 0's (none):
    // 09:00 is kept. Batch 2 judges by 10:00: the row exactly at 10:00 is late, one
    // microsecond after is not. Batch 3 judges by batch 2's 10:00, not its own 11:00:
    // 10:30 is kept.
    assert_eq!(dropped[..4], [0, 0, 1, 0]);
    let hour = |h: i64| Some(1_794_528_000_000_000 + h * 3_600_000_000); // 2026-11-13T<h>:00Z
    assert_eq!(batches.iter().map(|b| b.watermark).collect::<Vec<_>>()[..4], [None, hour(10), hour(10), hour(11)]);
}

#[test]
fn every_batch_leaves_a_progress_record_with_spark_s_fields() {
    let dir = tempfile::tempdir().expect("temp dir");
    two_sources(dir.path());
    let (_, batches) = run(dir.path(), &alert_spec("max"), RunOptions::default());
    let log = eddy::checkpoint::CheckpointDir::new(dir.path().join("checkpoint"))
        .progress()
        .open_existing()
        .expect("progress");
    let records = log.all().expect("records");
    assert_eq!(records.len(), batches.len());
    let second: serde_json::Value = serde_json::to_value(&records[1]).expect("json");
    assert_eq!(second["batchId"], 1);
    assert_eq!(second["numInputRows"], 1);
    assert_eq!(second["stateOperators"][0]["numRowsDroppedByWatermark"], 0);
    let third: serde_json::Value = serde_json::to_value(&records[2]).expect("json");
    assert_eq!(third["stateOperators"][0]["numRowsDroppedByWatermark"], 1, "09:45 is late for batch 1's 10:00");
    assert_eq!(second["sources"][0]["numInputRows"], 1);
    assert_eq!(second["sources"][1]["numInputRows"], 0);
    assert_eq!(second["eventTime"]["watermark"], "2026-11-13T10:00:00.000Z");
    assert_eq!(second["sink"]["numOutputRows"], batches[1].output_rows);
    assert_eq!(records[0].id, records[1].id, "one query id");
    let first: serde_json::Value = serde_json::to_value(&records[0]).expect("json");
    assert_eq!(first["numInputRows"], 2);
    assert_eq!(first["eventTime"]["max"], "2026-11-13T10:00:00.000Z");
    assert!(first["durationMs"]["triggerExecution"].is_u64());
    // `eddy progress` prints the last record.
    let printed = std::process::Command::new(eddy_tests::eddy_bin())
        .args(["progress", dir.path().join("checkpoint").to_str().expect("path"), "--last", "1"])
        .output()
        .expect("eddy progress runs");
    let line: serde_json::Value = serde_json::from_slice(&printed.stdout).expect("one JSON record");
    assert_eq!(line["batchId"], records.last().expect("records").batch_id);
}

#[test]
fn a_due_processing_time_timer_runs_a_batch_without_input() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("input")).expect("dir");
    std::fs::write(
        dir.path().join("input/1.jsonl"),
        "{\"sensor\":\"s1\",\"reading\":150.0,\"ts\":\"2026-11-13T08:00:00Z\"}\n",
    )
    .expect("file");
    let wasm = repo_root().join("build/wasm/alert_suppression.wasm");
    let spec = format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nschema = \"sensor STRING, reading DOUBLE, ts TIMESTAMP\"\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"sensor\"]\n\n[operator.config]\nsuppress_secs = 1\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\nprocessing-time = \"200 ms\"\n"
    );
    let (summary, batches) = run(dir.path(), &spec, RunOptions { max_batches: Some(2), ..RunOptions::default() });
    assert_eq!(summary.batches, 2);
    assert_eq!((batches[0].input_rows, batches[0].output_rows), (1, 1), "RAISE");
    let second = &batches[1];
    assert_eq!(
        (second.input_rows, second.stages[0].timers_fired, second.output_rows),
        (0, 1, 1),
        "REMINDER from the timer alone"
    );
    assert!(second.processing_time - batches[0].processing_time >= 1_000_000, "not before the timer is due");
    let reminder = std::fs::read_to_string(dir.path().join("out/part-00001.jsonl")).expect("part");
    assert!(reminder.contains("\"event\":\"REMINDER\""), "{reminder}");
}

#[test]
fn the_checkpoint_keeps_only_the_retained_batches() {
    let dir = tempfile::tempdir().expect("temp dir");
    purchases(dir.path(), 6);
    let spec = format!(
        "min-batches-to-retain = 2\nsnapshot-interval = 2\n{}",
        running_count_spec("[trigger]\navailable-now = true", "max-files-per-trigger = 1")
    );
    let (summary, _) = run(dir.path(), &spec, RunOptions::default());
    assert_eq!(summary.batches, 6);
    let names = |sub: &str| {
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join("checkpoint").join(sub))
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|name| !name.starts_with('.'))
            .collect();
        names.sort();
        names
    };
    assert_eq!(names("offsets"), ["4", "5"]);
    assert_eq!(names("commits"), ["4", "5"]);
    assert_eq!(names("sinks/0"), ["4", "5"], "sink manifests");
    assert_eq!(names("sources/0"), ["4", "5"], "the files each batch read");
    assert_eq!(names("progress"), ["4.json", "5.json"]);
    assert_eq!(names("state/snapshots"), ["4"], "the newest snapshot at or before the oldest retained batch");
    let metadata = std::fs::read_to_string(dir.path().join("checkpoint/metadata")).expect("metadata");
    assert!(metadata.contains("\"keyGroups\": 128"), "{metadata}");
}

/// A pipeline of the `scripted` processor keyed by `key`, reading `input/` (with
/// `source_lines`) and writing JSON to `out/`; `operator_lines` go into `[operator]`.
fn scripted_spec(source_lines: &str, operator_lines: &str, trigger: &str) -> String {
    let wasm = repo_root().join("build/wasm/scripted.wasm");
    format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\n{source_lines}\n\
         schema = \"key STRING, op STRING, name STRING, k STRING, v STRING\"\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"key\"]\noutput-mode = \"update\"\n{operator_lines}\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\n{trigger}\n"
    )
}

/// Every (op, result) row of output part `batch` in `dir`, sorted.
fn scripted_results(dir: &Path, batch: u64) -> Vec<(String, String)> {
    let part = std::fs::read_to_string(dir.join(format!("out/part-{batch:05}.jsonl"))).expect("part");
    let mut rows: Vec<(String, String)> = part
        .lines()
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).expect("json");
            (row["op"].as_str().expect("op").to_string(), row["result"].as_str().expect("result").to_string())
        })
        .collect();
    rows.sort();
    rows
}

/// The random numbers the `scripted` processor drew, one per key, in a query of its
/// own (checkpoint in `dir`) with two shards.
fn random_draws(dir: &Path, keys: &[&str]) -> Vec<String> {
    std::fs::create_dir_all(dir.join("input")).expect("input dir");
    let lines: String = keys.iter().map(|key| format!("{{\"key\":\"{key}\",\"op\":\"sandbox.random\"}}\n")).collect();
    std::fs::write(dir.join("input/commands.jsonl"), lines).expect("file");
    let spec = scripted_spec("", "parallelism = 2", "once = true");
    let (summary, _) = run(dir, &spec, RunOptions::default());
    assert_eq!(summary.input_rows, keys.len() as u64);
    let part = std::fs::read_to_string(dir.join("out/part-00000.jsonl")).expect("part");
    let rows: Vec<serde_json::Value> = part.lines().map(|line| serde_json::from_str(line).expect("json")).collect();
    rows.iter().map(|row| row["result"].as_str().expect("a result").to_string()).collect()
}

#[test]
fn shards_and_queries_draw_different_random_numbers() {
    // Each shard (key groups 0..64 and 64..128) draws one number per key of its own.
    let keys = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    let groups: Vec<u16> = keys
        .iter()
        .map(|key| eddy::state::key::key_group(&eddy::state::key::encode(&[Scalar::Utf8(key.to_string())]), 128))
        .collect();
    assert!(groups.iter().any(|g| *g < 64) && groups.iter().any(|g| *g >= 64), "both shards get keys: {groups:?}");
    let first = tempfile::tempdir().expect("temp dir");
    let drawn = random_draws(first.path(), &keys);
    assert_eq!(drawn.len(), keys.len());
    let mut distinct = drawn.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), drawn.len(), "two shards drew the same number: {drawn:?}");
    let second = tempfile::tempdir().expect("temp dir");
    let other_query = random_draws(second.path(), &keys);
    assert!(other_query.iter().all(|n| !drawn.contains(n)), "{drawn:?} {other_query:?}");
}

/// Spark's `getQueryInfo`: the processor is told the query's id (the checkpoint's,
/// kept across restarts), the run's id (new each run, the progress records' `runId`)
/// and each batch's id.
#[test]
fn the_processor_is_told_its_query_run_and_batch() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("input")).expect("input dir");
    let spec = scripted_spec("max-files-per-trigger = 1", "", "available-now = true");
    let commands = "{\"key\":\"a\",\"op\":\"query.info\"}\n{\"key\":\"b\",\"op\":\"batch.id\"}\n";
    for file in ["0", "1"] {
        std::fs::write(dir.path().join(format!("input/{file}.jsonl")), commands).expect("file");
    }
    assert_eq!(run(dir.path(), &spec, RunOptions::default()).0.batches, 2);
    std::fs::write(dir.path().join("input/2.jsonl"), commands).expect("file");
    assert_eq!(run(dir.path(), &spec, RunOptions::default()).0.batches, 1);

    let checkpoint = dir.path().join("checkpoint");
    let metadata: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(checkpoint.join("metadata")).expect("metadata")).expect("json");
    let query_id = metadata["id"].as_str().expect("an id");
    for batch in 0..3 {
        let progress: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(checkpoint.join(format!("progress/{batch}.json"))).expect("progress"),
        )
        .expect("json");
        let results = scripted_results(dir.path(), batch);
        let told = serde_json::json!([query_id, progress["runId"]]).to_string();
        let expected = vec![("batch.id".to_string(), batch.to_string()), ("query.info".to_string(), told)];
        assert_eq!(results, expected, "batch {batch}");
    }
    let run_of = |batch: u64| {
        let text = std::fs::read_to_string(checkpoint.join(format!("progress/{batch}.json"))).expect("progress");
        serde_json::from_str::<serde_json::Value>(&text).expect("json")["runId"].clone()
    };
    assert_eq!(run_of(0), run_of(1), "one run");
    assert_ne!(run_of(1), run_of(2), "a new run after the restart");
}

/// Due timers' index entries go at the commit as one range per batch: a timer a
/// handler registers while the pass runs (already due) survives it and fires in the
/// next batch, and one an earlier handler deleted never fires.
#[test]
fn a_timer_registered_while_timers_fire_survives_the_commit_and_fires_next() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("input")).expect("input dir");
    let spec = scripted_spec(
        "max-files-per-trigger = 1",
        "parallelism = 2\n\n[operator.config]\ntime_mode = \"processing-time\"",
        "available-now = true",
    );
    // 1001's handler deletes a's 1002 and registers 1003 (scripted's rule for expiries
    // ending in 1); every expiry is long past, so all are due in the batch that makes them.
    let register = |key: &str, at: &str| format!("{{\"key\":\"{key}\",\"op\":\"timer.register\",\"v\":\"{at}\"}}\n");
    let first: String = [("a", "1001"), ("a", "1002"), ("b", "1500"), ("c", "2000")]
        .iter()
        .map(|(key, at)| register(key, at))
        .collect();
    std::fs::write(dir.path().join("input/0.jsonl"), first).expect("file");
    for file in ["1", "2"] {
        std::fs::write(dir.path().join(format!("input/{file}.jsonl")), "{\"key\":\"a\",\"op\":\"timer.list\"}\n")
            .expect("file");
    }
    let (summary, _) = run(dir.path(), &spec, RunOptions::default());
    assert_eq!(summary.batches, 3);
    let results = |batch: u64| -> Vec<String> {
        let rows = scripted_results(dir.path(), batch).into_iter().filter(|(op, _)| op != "timer.register");
        rows.map(|(op, result)| format!("{op} {result}")).collect()
    };
    assert_eq!(results(0), ["timer.fired 1001", "timer.fired 1500", "timer.fired 2000"]);
    assert_eq!(results(1), ["timer.fired 1003", "timer.list [1003]"]);
    assert_eq!(results(2), ["timer.list []"]);
}

#[test]
fn state_reads_alike_from_memory_from_rocksdb_and_from_a_copy_dropped_mid_run() {
    // "shared" buys in every batch (amount = the batch's index), one new user per batch.
    for setting in ["", "state-in-memory = 0", "state-in-memory = \"600\""] {
        let dir = tempfile::tempdir().expect("temp dir");
        purchases(dir.path(), 6);
        let spec = running_count_spec("[trigger]\navailable-now = true", "max-files-per-trigger = 1");
        let (summary, _) = run(dir.path(), &format!("{setting}\n{spec}"), RunOptions::default());
        assert_eq!(summary.batches, 6, "{setting}");
        for batch in 0..6i64 {
            let part = std::fs::read_to_string(dir.path().join(format!("out/part-{batch:05}.jsonl"))).expect("part");
            let mut rows: Vec<serde_json::Value> =
                part.lines().map(|line| serde_json::from_str(line).expect("json")).collect();
            rows.sort_by_key(|row| row["user"].as_str().map(str::to_owned));
            let expected = vec![
                serde_json::json!({"user": "shared", "count": batch + 1, "sum": batch * (batch + 1) / 2}),
                serde_json::json!({"user": format!("u{batch}"), "count": 1, "sum": 1}),
            ];
            assert_eq!(rows, expected, "{setting}, batch {batch}");
        }
    }
}
