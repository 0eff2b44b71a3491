//! The shared state and timer cases (`sdks/conformance/*.json`, checked against the
//! host by `tests/tests/conformance.rs`) played by the harness: a native port of the
//! `scripted` test guest's state and timer commands runs each step as one
//! [`Harness::run_batch`].

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use eddy_guest::testing::Harness;
use eddy_guest::{
    Datum, Error, ExpiredTimer, InitContext, Key, ListState, MapState, Output, Result, Rows, Schema, StatefulProcessor,
    TimeMode, TimerValues, Timers, Ttl, ValueState, bail, row,
};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct Config {
    #[serde(default)]
    time_mode: Option<String>,
    #[serde(default)]
    state: Vec<Declaration>,
    #[serde(default)]
    accepts_late_rows: bool,
}

#[derive(Deserialize)]
struct Declaration {
    name: String,
    kind: String,
    ttl_ms: Option<u64>,
}

/// Runs the `scripted` guest's state and timer commands, one per input row
/// (`key, op, name, k, v[, at]`); outputs `key, op, result` for reads (the result as
/// JSON) and for fired timers.
struct Interpreter {
    values: HashMap<String, ValueState<String>>,
    lists: HashMap<String, ListState<String>>,
    maps: HashMap<String, MapState<String, String>>,
    timers: Timers,
    batch_id: u64,
}

fn find<'s, T>(vars: &'s HashMap<String, T>, name: Option<&str>) -> Result<&'s T> {
    let name = name.ok_or_else(|| Error::msg("the command needs `name`"))?;
    vars.get(name).ok_or_else(|| Error::msg(format!("no state `{name}` of that kind is declared")))
}

fn need<'a>(field: &str, value: Option<&'a str>) -> Result<&'a str> {
    value.ok_or_else(|| Error::msg(format!("the command needs `{field}`")))
}

fn micros(v: Option<&str>) -> Result<i64> {
    need("v", v)?.parse().map_err(|_| Error::msg("v is not microseconds"))
}

/// v as the scripted guest reads a list: a JSON array of strings, or one string.
fn list(v: Option<&str>) -> Result<Vec<String>> {
    let v = need("v", v)?;
    if v.trim_start().starts_with('[') { Ok(serde_json::from_str(v)?) } else { Ok(vec![v.to_string()]) }
}

impl Interpreter {
    /// Runs one command; the result as JSON for a read, `None` for a write.
    fn run(&self, op: &str, name: Option<&str>, k: Option<&str>, v: Option<&str>) -> Result<Option<Value>> {
        let k = || need("k", k).map(str::to_string);
        let read = |value: Value| Ok(Some(value));
        match op {
            "value.get" => read(json!(find(&self.values, name)?.get()?)),
            "value.exists" => read(json!(find(&self.values, name)?.exists()?)),
            "value.set" => find(&self.values, name)?.update(&need("v", v)?.to_string()).map(|()| None),
            "value.clear" => find(&self.values, name)?.clear().map(|()| None),
            "list.get" => read(json!(find(&self.lists, name)?.get()?)),
            "list.exists" => read(json!(find(&self.lists, name)?.exists()?)),
            "list.append" => find(&self.lists, name)?.append_list(&list(v)?).map(|()| None),
            "list.put" => find(&self.lists, name)?.put(&list(v)?).map(|()| None),
            "list.clear" => find(&self.lists, name)?.clear().map(|()| None),
            "map.get" => read(json!(find(&self.maps, name)?.get(&k()?)?)),
            "map.contains" => read(json!(find(&self.maps, name)?.contains(&k()?)?)),
            "map.keys" => read(json!(find(&self.maps, name)?.keys()?)),
            "map.values" => read(json!(find(&self.maps, name)?.values()?)),
            "map.exists" => read(json!(find(&self.maps, name)?.exists()?)),
            "map.put" => find(&self.maps, name)?.update(&k()?, &need("v", v)?.to_string()).map(|()| None),
            "map.remove" => find(&self.maps, name)?.remove(&k()?).map(|()| None),
            "map.clear" => find(&self.maps, name)?.clear().map(|()| None),
            "timer.register" => self.timers.register(micros(v)?).map(|()| None),
            "timer.delete" => self.timers.delete(micros(v)?).map(|()| None),
            "timer.list" => read(json!(self.timers.list()?)),
            "batch.id" => read(json!(self.batch_id)),
            "fail" => Err(Error::msg(v.unwrap_or("scripted failure"))),
            other => bail!("unknown op `{other}`"),
        }
    }
}

impl StatefulProcessor for Interpreter {
    fn init(ctx: &mut InitContext) -> Result<Self> {
        let config: Config = ctx.config()?;
        ctx.set_time_mode(match config.time_mode.as_deref().unwrap_or("none") {
            "processing-time" => TimeMode::ProcessingTime,
            "event-time" => TimeMode::EventTime,
            _ => TimeMode::None,
        });
        ctx.set_accepts_late_rows(config.accepts_late_rows);
        ctx.set_output_schema(Schema::parse("key STRING, op STRING, result STRING")?);
        let mut this = Interpreter {
            values: HashMap::new(),
            lists: HashMap::new(),
            maps: HashMap::new(),
            timers: ctx.timers(),
            batch_id: 0,
        };
        for decl in config.state {
            let ttl = decl.ttl_ms.map_or(Ttl::NONE, |ms| Ttl::after(Duration::from_millis(ms)));
            match decl.kind.as_str() {
                "value" => drop(this.values.insert(decl.name.clone(), ctx.value_state(&decl.name, ttl)?)),
                "list" => drop(this.lists.insert(decl.name.clone(), ctx.list_state(&decl.name, ttl)?)),
                _ => drop(this.maps.insert(decl.name.clone(), ctx.map_state(&decl.name, ttl)?)),
            }
        }
        Ok(this)
    }

    fn handle_input_rows(&mut self, key: &Key, rows: &Rows, tv: &TimerValues, out: &mut Output) -> Result<()> {
        self.batch_id = tv.batch_id;
        for row in rows.iter() {
            let op = row.str("op")?;
            let result = self.run(op, row.str_opt("name")?, row.str_opt("k")?, row.str_opt("v")?)?;
            if let Some(result) = result {
                out.append_row(&row![key.str(0)?, op, result.to_string().as_str()])?;
            }
        }
        Ok(())
    }

    fn handle_expired_timer(
        &mut self,
        key: &Key,
        _: &TimerValues,
        timer: &ExpiredTimer,
        out: &mut Output,
    ) -> Result<()> {
        let at = timer.expiry_time;
        match at % 10 {
            1 => {
                self.timers.delete(at + 1)?;
                self.timers.register(at + 2)?;
            }
            7 | 8 => bail!("timer {at} failed"),
            _ => {}
        }
        out.append_row(&row![key.str(0)?, "timer.fired", at.to_string().as_str()])
    }
}

/// Every case of every file in `sdks/conformance/`, as (file, case).
fn cases() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdks/conformance");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("sdks/conformance/ is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for path in files {
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("readable")).expect("JSON");
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        for case in file["cases"].as_array().expect("a `cases` list") {
            cases.push((name.clone(), case.clone()));
        }
    }
    cases
}

/// A step's rows, per key, as the input rows `key, op, name, k, v[, at]`.
fn step_rows(step: &Value, event_time: bool) -> Vec<([Datum<'_>; 1], Vec<Vec<Datum<'_>>>)> {
    fn text(v: &Value) -> Datum<'_> {
        v.as_str().map_or(Datum::Null, Datum::Utf8)
    }
    let Some(keys) = step["rows"].as_object() else { return Vec::new() };
    keys.iter()
        .map(|(key, cmds)| {
            let rows = cmds.as_array().expect("a key's rows are a list").iter().map(|cmd| {
                let mut row =
                    vec![Datum::Utf8(key), text(&cmd["op"]), text(&cmd["name"]), text(&cmd["k"]), text(&cmd["v"])];
                if event_time {
                    row.push(cmd["at"].as_i64().map_or(Datum::Null, Datum::Timestamp));
                }
                row
            });
            ([Datum::Utf8(key)], rows.collect())
        })
        .collect()
}

/// The output per key, as (op, result as JSON).
fn output_by_key(rows: &Rows) -> BTreeMap<String, Vec<Value>> {
    let mut by_key: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for row in rows.iter() {
        let result: Value = serde_json::from_str(row.str("result").expect("a result")).expect("JSON");
        let entry = json!([row.str("op").expect("an op"), result]);
        by_key.entry(row.str("key").expect("a key").to_string()).or_default().push(entry);
    }
    by_key
}

fn check_state(at: &str, h: &Harness<Interpreter>, case: &Value, step: &Value) -> Result<()> {
    let declared = case["config"]["state"].as_array().cloned().unwrap_or_default();
    for (key, vars) in step["state"].as_object().into_iter().flatten() {
        let key = [Datum::Utf8(key)];
        for (name, expected) in vars.as_object().expect("a key's state is an object") {
            let kind = declared.iter().find(|d| d["name"] == *name).map(|d| d["kind"].clone());
            let seen = match kind.as_ref().and_then(Value::as_str) {
                Some("value") => json!(h.value_state::<String>(name, &key)?),
                Some("list") => json!(h.list_state::<String>(name, &key)?),
                _ => json!(h.map_state::<String, String>(name, &key)?),
            };
            assert_eq!(&seen, expected, "{at}: key {:?}'s `{name}`", key[0]);
        }
    }
    for (key, expected) in step["timers"].as_object().into_iter().flatten() {
        assert_eq!(&json!(h.timers(&[Datum::Utf8(key)])?), expected, "{at}: key {key}'s timers");
    }
    Ok(())
}

/// Every shared case holds in the harness, as on the host.
#[test]
fn the_harness_plays_every_shared_state_and_timer_case() -> Result<()> {
    let cases = cases();
    assert!(cases.len() >= 10, "sdks/conformance/ holds the shared cases ({} found)", cases.len());
    for (file, case) in &cases {
        let name = case["name"].as_str().expect("a case has a name");
        let event_time = case["event_time"].as_bool().unwrap_or(false);
        let input = if event_time {
            "key STRING, op STRING, name STRING, k STRING, v STRING, at TIMESTAMP"
        } else {
            "key STRING, op STRING, name STRING, k STRING, v STRING"
        };
        let builder = Harness::<Interpreter>::builder(input, "key STRING").config(case["config"].to_string());
        let mut h = if event_time { builder.event_time_column("at") } else { builder }.build()?;
        for (i, step) in case["steps"].as_array().expect("steps").iter().enumerate() {
            let at = format!("{file} {name} step {i}");
            let rows = step_rows(step, event_time);
            let processing_time = step["processing_time"].as_i64().expect("a processing_time");
            match (h.run_batch(processing_time, step["watermark"].as_i64(), &rows), step["error"].as_str()) {
                (Ok(out), None) => {
                    let expected: BTreeMap<String, Vec<Value>> =
                        serde_json::from_value(step["output"].clone()).unwrap_or_default();
                    let expected: BTreeMap<_, _> = expected.into_iter().filter(|(_, rows)| !rows.is_empty()).collect();
                    assert_eq!(output_by_key(&out), expected, "{at}: output");
                }
                (Ok(out), Some(error)) => {
                    panic!("{at}: expected the error `{error}`, the batch output {:?}", out.to_values())
                }
                (Err(e), Some(error)) => assert!(e.to_string().contains(error), "{at}: `{e}` does not say `{error}`"),
                (Err(e), None) => panic!("{at}: the batch failed: {e}"),
            }
            check_state(&at, &h, case, step)?;
        }
    }
    Ok(())
}
