//! A batch's output does not depend on how many shards run it: the same batches run
//! with `parallelism` 1, 2 and 3 give byte-identical output, rows from
//! `handle-input-rows` first (key by key in key-group order), then the rows of the
//! fired timers (in the same order), and the guest's random numbers are the same. So
//! a batch re-run after a crash with another `parallelism` (another machine, another
//! pod size) writes what the crashed run wrote.

use std::sync::Arc;

use arrow::array::{Float64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use eddy::contract::{OutputMode, Scalar};
use eddy::operator::{BatchTime, OperatorOptions, ShardedOperator, Stage};
use eddy::pipeline::{DEFAULT_SPILL_STATE_BYTES, InstanceLimits};
use eddy::state::{StateStore, key};
use eddy_tests::{TEST_QUERY_ID, load, scripted_schema};
use serde_json::{Value, json};

const KEY_GROUPS: u16 = 16;
const SECOND: i64 = 1_000_000;

fn options(key: &str, config: Value) -> OperatorOptions {
    OperatorOptions {
        operator_id: 0,
        key_columns: vec![key.into()],
        key_groups: KEY_GROUPS,
        output_mode: OutputMode::Append,
        config_json: config.to_string(),
        limits: InstanceLimits::default(),
        spill_state_bytes: DEFAULT_SPILL_STATE_BYTES,
        initial_state_schema: None,
        event_time_column: None,
        key_group_range: 0..KEY_GROUPS,
        query_id: TEST_QUERY_ID.into(),
        run_id: "layout-run".into(),
    }
}

/// Runs `batches` (each: processing time in seconds, input rows) through `module` on
/// `parallelism` shards over a fresh store, committing each; returns each batch's
/// output as JSON lines, as a sink would write it.
fn run(module: &str, config: Value, parallelism: usize, batches: &[(i64, RecordBatch)]) -> Vec<String> {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = StateStore::open(&dir.path().join("state")).expect("store");
    let schema = batches[0].1.schema();
    let key = schema.field(0).name().clone();
    let mut operator =
        ShardedOperator::open(&load(module), &schema, options(&key, config), parallelism).expect("operator opens");
    assert_eq!(operator.parallelism(), parallelism);
    let mut outputs = Vec::new();
    for (batch_id, (seconds, input)) in batches.iter().enumerate() {
        let time = BatchTime {
            batch_id: batch_id as u64,
            processing_time: seconds * SECOND,
            watermark: None,
            late_rows_watermark: None,
        };
        let output = operator.run(&store, input, time).expect("batch runs");
        store.commit_all(output.txns, batch_id as u64).expect("commit");
        let mut writer = arrow::json::LineDelimitedWriter::new(Vec::new());
        for rows in &output.rows {
            writer.write(rows).expect("JSON");
        }
        writer.finish().expect("JSON");
        outputs.push(String::from_utf8(writer.into_inner()).expect("UTF-8"));
    }
    outputs
}

/// The key group of a one-column string key.
fn key_group(name: &str) -> u16 {
    key::key_group(&key::encode(&[Scalar::Utf8(name.into())]), KEY_GROUPS)
}

/// `names` in (key group, key) order: the order a batch handles its keys in.
fn in_key_order(mut names: Vec<String>) -> Vec<String> {
    names.sort_by_key(|name| (key_group(name), key::encode(&[Scalar::Utf8(name.clone())])));
    names
}

fn readings_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("sensor", DataType::Utf8, true),
        Field::new("reading", DataType::Float64, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
    ]))
}

/// One reading of `value` per sensor, at `seconds`.
fn readings(sensors: &[String], value: f64, seconds: i64) -> RecordBatch {
    RecordBatch::try_new(
        readings_schema(),
        vec![
            Arc::new(StringArray::from_iter_values(sensors)),
            Arc::new(Float64Array::from(vec![value; sensors.len()])),
            Arc::new(TimestampMicrosecondArray::from(vec![seconds * SECOND; sensors.len()])),
        ],
    )
    .expect("readings")
}

fn sensors(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("s{i:02}")).collect()
}

#[test]
fn rows_from_input_and_from_timers_come_in_the_same_order_in_any_number_of_shards() {
    // alert-suppression: a reading above 100 raises an alert (RAISE, from
    // handle-input-rows) and starts a 10 s timer; when it fires and the sensor is still
    // hot, a REMINDER (from handle-expired-timers).
    let config = json!({"threshold": 100.0, "suppress_secs": 10, "clear_after": 2});
    let batches = [
        // Batch 0 at 0 s: s00–s39 raise; their timers are due at 10 s.
        (0, readings(&sensors(0..40), 150.0, 0)),
        // Batch 1 at 20 s: s00–s19 stay hot (held back), s40–s59 raise, and the 40
        // timers fire: 20 RAISE rows from the input, then 40 REMINDER rows.
        (20, readings(&[sensors(0..20), sensors(40..60)].concat(), 150.0, 20)),
    ];
    let one = run("alert_suppression", config.clone(), 1, &batches);
    for parallelism in [2, 3] {
        assert_eq!(run("alert_suppression", config.clone(), parallelism, &batches), one, "parallelism {parallelism}");
    }
    // The order written out from the rule: input rows by (key group, key), then timers'.
    let events: Vec<(String, String)> = one[1]
        .lines()
        .map(|line| {
            let row: Value = serde_json::from_str(line).expect("row");
            (row["event"].as_str().expect("event").to_string(), row["sensor"].as_str().expect("sensor").to_string())
        })
        .collect();
    let mut expected: Vec<(String, String)> =
        in_key_order(sensors(40..60)).into_iter().map(|s| ("RAISE".to_string(), s)).collect();
    expected.extend(in_key_order(sensors(0..40)).into_iter().map(|s| ("REMINDER".to_string(), s)));
    assert_eq!(events, expected);
    // The layouts put keys of both kinds in every shard.
    let groups: std::collections::BTreeSet<u16> = sensors(0..60).iter().map(|s| key_group(s)).collect();
    assert!(groups.len() > 8, "{groups:?}");
}

#[test]
fn a_key_draws_the_same_random_numbers_in_any_number_of_shards() {
    let config = json!({"time_mode": "none", "state": []});
    let keys = sensors(0..30);
    // Two draws per key, each key's rows apart in the batch.
    let rows: Vec<&String> = keys.iter().chain(&keys).collect();
    let column = |values: Vec<Option<&str>>| -> arrow::array::ArrayRef { Arc::new(StringArray::from(values)) };
    let input = RecordBatch::try_new(
        scripted_schema(),
        vec![
            column(rows.iter().map(|k| Some(k.as_str())).collect()),
            column(vec![Some("sandbox.random"); rows.len()]),
            column(vec![None; rows.len()]),
            column(vec![None; rows.len()]),
            column(vec![None; rows.len()]),
        ],
    )
    .expect("input");
    let batches = [(1, input.clone()), (2, input)];
    let one = run("scripted", config.clone(), 1, &batches);
    let numbers: std::collections::BTreeSet<&str> = one.iter().flat_map(|batch| batch.lines()).collect();
    assert_eq!(numbers.len(), 2 * 2 * keys.len(), "every draw its own number: {one:?}");
    for parallelism in [2, 3] {
        assert_eq!(run("scripted", config.clone(), parallelism, &batches), one, "parallelism {parallelism}");
    }
}
