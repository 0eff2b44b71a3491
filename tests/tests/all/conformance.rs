//! The shared state and timer cases (`sdks/conformance/*.json`) played by the host: the
//! `scripted` component on a real RocksDB store, one committed batch per step, late
//! rows dropped as the engine's input step drops them. The SDK harnesses play the same
//! cases; the host is their reference.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use eddy::contract::OutputMode;
use eddy::operator::{BatchTime, OperatorOptions, WasmOperator};
use eddy::pipeline::{DEFAULT_SPILL_STATE_BYTES, InstanceLimits};
use eddy::state::StateStore;
use eddy::wasm::{Module, WasmRuntime};
use eddy_tests::{TEST_QUERY_ID, repo_root, wasm};
use serde_json::{Value, json};

/// The commands whose output rows only acknowledge a write (left out of `output`).
const WRITES: [&str; 10] = [
    "value.set",
    "value.clear",
    "list.append",
    "list.put",
    "list.clear",
    "map.put",
    "map.remove",
    "map.clear",
    "timer.register",
    "timer.delete",
];

/// One output row: the command (or `timer.fired`) and its result as JSON.
type Out = (String, Value);

/// The `scripted` component (`make guests` builds it).
fn scripted() -> Module {
    WasmRuntime::new(WasmRuntime::default_cache_dir()).expect("runtime").load(&wasm("scripted")).expect("module loads")
}

/// Every case of every file in `sdks/conformance/`, as (file, case).
fn cases() -> Vec<(String, Value)> {
    let dir = repo_root().join("sdks/conformance");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("sdks/conformance/ is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("a case file is readable");
        let file: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        for case in file["cases"].as_array().unwrap_or_else(|| panic!("{name} has no `cases` list")) {
            cases.push((name.clone(), case.clone()));
        }
    }
    cases
}

/// The scripted processor's input: the key, a command, and the event time when asked.
fn input_schema(event_time: bool) -> SchemaRef {
    let mut fields: Vec<Field> =
        ["key", "op", "name", "k", "v"].iter().map(|name| Field::new(*name, DataType::Utf8, true)).collect();
    if event_time {
        fields.push(Field::new("at", DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())), true));
    }
    Arc::new(Schema::new(fields))
}

/// The rows of a step, key after key, as one input batch.
fn input_batch(schema: &SchemaRef, rows: &[(String, Value)]) -> RecordBatch {
    let text = |field: &str| -> ArrayRef {
        Arc::new(StringArray::from(
            rows.iter()
                .map(
                    |(key, cmd)| if field == "key" { Some(key.clone()) } else { cmd[field].as_str().map(String::from) },
                )
                .collect::<Vec<_>>(),
        ))
    };
    let mut columns: Vec<ArrayRef> = ["key", "op", "name", "k", "v"].into_iter().map(text).collect();
    if schema.fields().len() == 6 {
        let at: TimestampMicrosecondArray = rows.iter().map(|(_, cmd)| cmd["at"].as_i64()).collect();
        columns.push(Arc::new(at.with_timezone("+00:00")));
    }
    RecordBatch::try_new(schema.clone(), columns).expect("a valid input batch")
}

/// The (op, result) rows a batch output, in order.
fn output_rows(batches: &[RecordBatch]) -> Vec<Out> {
    let mut rows = Vec::new();
    for batch in batches {
        let ops = batch.column(0).as_any().downcast_ref::<StringArray>().expect("op is a string");
        let results = batch.column(1).as_any().downcast_ref::<StringArray>().expect("result is a string");
        for i in 0..batch.num_rows() {
            let result =
                if results.is_null(i) { Value::Null } else { serde_json::from_str(results.value(i)).expect("JSON") };
            rows.push((ops.value(i).to_string(), result));
        }
    }
    rows
}

/// The scripted processor over a store of its own, played a case's steps.
struct Host {
    module: Module,
    store: StateStore,
    operator: WasmOperator,
    schema: SchemaRef,
    config: Value,
    event_time: bool,
    next_batch: u64,
    /// The processing time of the last committed batch (0 before any).
    clock: i64,
    /// The watermark of the last committed batch, and whether one committed.
    last_watermark: Option<Option<i64>>,
    _dir: tempfile::TempDir,
}

impl Host {
    fn new(case: &Value) -> Host {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = StateStore::open(&dir.path().join("state")).expect("store opens");
        let event_time = case["event_time"].as_bool().unwrap_or(false);
        let schema = input_schema(event_time);
        let module = scripted();
        let config = case["config"].clone();
        let operator = open(&module, &schema, &config, event_time);
        Host {
            module,
            store,
            operator,
            schema,
            config,
            event_time,
            next_batch: 0,
            clock: 0,
            last_watermark: None,
            _dir: dir,
        }
    }

    /// Runs a step's rows as one batch; commits it when it succeeds.
    fn run(&mut self, step: &Value) -> anyhow::Result<Vec<Out>> {
        let rows = step_rows(step);
        let time = step_time(step, self.next_batch);
        let mut input = input_batch(&self.schema, &rows);
        // The engine's input step (`engine/input.rs`, Spark's rule), which runs before the
        // stage: rows at or before the previous batch's watermark (the first batch: its
        // own) are dropped unless the processor takes late rows (rows without an event
        // time are kept).
        let late_rows_watermark = self.last_watermark.unwrap_or(time.watermark);
        if let (true, Some(watermark), false) =
            (self.event_time, late_rows_watermark, self.operator.accepts_late_rows())
        {
            let keep: BooleanArray =
                rows.iter().map(|(_, cmd)| Some(cmd["at"].as_i64().is_none_or(|at| at > watermark))).collect();
            input = filter_record_batch(&input, &keep)?;
        }
        let time = BatchTime { late_rows_watermark, ..time };
        let output = self.operator.run_batch(&self.store, self.store.begin(), &input, time)?;
        self.store.commit(output.txn, self.next_batch)?;
        self.next_batch += 1;
        self.clock = time.processing_time;
        self.last_watermark = Some(time.watermark);
        Ok(output_rows(&output.rows))
    }

    /// `key`'s state and timers at the last committed batch's processing time, read by
    /// a batch that is not committed, of an instance whose timers do not fire (event
    /// time, no watermark).
    fn read(&self, key: &str, reads: &[Value]) -> Vec<Out> {
        let mut config = self.config.clone();
        config["time_mode"] = json!("event-time");
        let mut probe = open(&self.module, &self.schema, &config, self.event_time);
        let rows: Vec<(String, Value)> = reads.iter().map(|cmd| (key.to_string(), cmd.clone())).collect();
        let time = BatchTime {
            batch_id: self.next_batch,
            processing_time: self.clock,
            watermark: None,
            late_rows_watermark: None,
        };
        let output = probe
            .run_batch(&self.store, self.store.begin(), &input_batch(&self.schema, &rows), time)
            .unwrap_or_else(|e| panic!("reading {key}'s state: {e:#}"));
        output_rows(&output.rows)
    }
}

fn open(module: &Module, schema: &SchemaRef, config: &Value, event_time: bool) -> WasmOperator {
    let options = OperatorOptions {
        operator_id: 0,
        key_columns: vec!["key".into()],
        key_groups: 16,
        output_mode: OutputMode::Update,
        config_json: config.to_string(),
        limits: InstanceLimits::default(),
        spill_state_bytes: DEFAULT_SPILL_STATE_BYTES,
        initial_state_schema: None,
        event_time_column: event_time.then(|| "at".to_string()),
        key_group_range: 0..16,
        query_id: TEST_QUERY_ID.to_string(),
        run_id: "conformance-run".into(),
    };
    WasmOperator::open(module, schema, options).expect("the scripted processor opens")
}

/// A step's rows as (key, command), key after key.
fn step_rows(step: &Value) -> Vec<(String, Value)> {
    let Some(keys) = step["rows"].as_object() else { return Vec::new() };
    keys.iter()
        .flat_map(|(key, cmds)| {
            cmds.as_array().expect("a key's rows are a list").iter().map(|cmd| (key.clone(), cmd.clone()))
        })
        .collect()
}

fn step_time(step: &Value, batch_id: u64) -> BatchTime {
    BatchTime {
        batch_id,
        processing_time: step["processing_time"].as_i64().expect("a step has a processing_time"),
        watermark: step["watermark"].as_i64(),
        late_rows_watermark: None,
    }
}

/// Whether `seen` is the expected keys' blocks one after the other, in some key order
/// (the host groups a batch's output by key but promises no order of the keys).
fn is_blocks_in_some_order(seen: &[Out], blocks: &[Vec<Out>]) -> bool {
    if blocks.is_empty() {
        return seen.is_empty();
    }
    (0..blocks.len()).any(|i| {
        let block = &blocks[i];
        seen.starts_with(block) && {
            let rest: Vec<Vec<Out>> =
                blocks.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, b)| b.clone()).collect();
            is_blocks_in_some_order(&seen[block.len()..], &rest)
        }
    })
}

/// Checks a successful step's output: reads in each key's order, then the fired timers.
fn check_output(at: &str, step: &Value, seen: Vec<Out>) {
    let expected: BTreeMap<String, Vec<Out>> = step["output"]
        .as_object()
        .map(|keys| {
            keys.iter()
                .map(|(key, rows)| {
                    let rows = rows.as_array().expect("a key's output is a list").iter().map(|row| {
                        (row[0].as_str().expect("an output row starts with its op").to_string(), row[1].clone())
                    });
                    (key.clone(), rows.collect())
                })
                .collect()
        })
        .unwrap_or_default();
    let seen: Vec<Out> = seen.into_iter().filter(|(op, _)| !WRITES.contains(&op.as_str())).collect();
    let fired = |rows: &[Out], timers: bool| -> Vec<Out> {
        rows.iter().filter(|(op, _)| (op == "timer.fired") == timers).cloned().collect()
    };
    for timers in [false, true] {
        let blocks: Vec<Vec<Out>> =
            expected.values().map(|rows| fired(rows, timers)).filter(|rows| !rows.is_empty()).collect();
        let phase = fired(&seen, timers);
        assert!(
            is_blocks_in_some_order(&phase, &blocks),
            "{at}: the {} output {phase:?} is not the expected keys' {blocks:?} in some key order",
            if timers { "timers'" } else { "rows'" }
        );
    }
}

/// Checks `state` and `timers` after a step.
fn check_state(at: &str, host: &Host, step: &Value) {
    let declared = host.config["state"].as_array().cloned().unwrap_or_default();
    let kind_of = |name: &str| {
        let decl = declared.iter().find(|d| d["name"] == name);
        decl.and_then(|d| d["kind"].as_str()).unwrap_or_else(|| panic!("{at}: `{name}` is not declared")).to_string()
    };
    let mut keys: Vec<&String> = step["state"].as_object().map(|s| s.keys().collect()).unwrap_or_default();
    keys.extend(step["timers"].as_object().map(|t| t.keys().collect::<Vec<_>>()).unwrap_or_default());
    keys.sort();
    keys.dedup();
    for key in keys {
        let vars = step["state"][key].as_object().cloned().unwrap_or_default();
        let mut reads = Vec::new();
        for name in vars.keys() {
            match kind_of(name).as_str() {
                "value" => reads.push(json!({"op": "value.get", "name": name})),
                "list" => reads.push(json!({"op": "list.get", "name": name})),
                _ => reads.extend([json!({"op": "map.keys", "name": name}), json!({"op": "map.values", "name": name})]),
            }
        }
        let timers = step["timers"].get(key);
        if timers.is_some() {
            reads.push(json!({"op": "timer.list"}));
        }
        let mut seen = host.read(key, &reads).into_iter().map(|(_, result)| result);
        let mut next = || seen.next().expect("a result per read");
        for (name, expected) in &vars {
            let value = match kind_of(name).as_str() {
                // A map as [[key, value], …] from its keys and its values.
                "map" => {
                    let (keys, values) = (next(), next());
                    let pairs = keys.as_array().into_iter().flatten().zip(values.as_array().into_iter().flatten());
                    Value::Array(pairs.map(|(k, v)| json!([k, v])).collect())
                }
                _ => next(),
            };
            assert_eq!(&value, expected, "{at}: key {key}'s `{name}`");
        }
        if let Some(expected) = timers {
            assert_eq!(&next(), expected, "{at}: key {key}'s timers");
        }
    }
}

/// Every shared case holds on the host.
#[test]
fn the_host_plays_every_shared_state_and_timer_case() {
    let cases = cases();
    assert!(cases.len() >= 10, "sdks/conformance/ holds the shared cases ({} found)", cases.len());
    for (file, case) in cases {
        let name = case["name"].as_str().expect("a case has a name");
        let mut host = Host::new(&case);
        for (i, step) in case["steps"].as_array().expect("a case has steps").iter().enumerate() {
            let at = format!("{file} {name} step {i}");
            match (host.run(step), step["error"].as_str()) {
                (Ok(seen), None) => check_output(&at, step, seen),
                (Ok(seen), Some(error)) => panic!("{at}: expected the error `{error}`, the batch output {seen:?}"),
                (Err(e), Some(error)) => {
                    let message = format!("{e:#}");
                    assert!(message.contains(error), "{at}: the error `{message}` does not say `{error}`");
                }
                (Err(e), None) => panic!("{at}: the batch failed: {e:#}"),
            }
            check_state(&at, &host, step);
        }
    }
}
