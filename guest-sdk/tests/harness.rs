//! The test harness beyond the shared cases (`sdks/conformance/`, played by
//! `conformance.rs`: state, TTL, map order, timers, late rows, rollback): clocks moved
//! by hand, a timer re-registered while firing, schemas, logs, initial state.

use std::time::Duration;

use eddy_guest::testing::Harness;
use eddy_guest::{
    ExpiredTimer, InitContext, Key, Output, Result, Rows, Schema, StatefulProcessor, TimeMode, TimerValues, Timers,
    Value, ValueState, bail, info, row,
};
use serde::Deserialize;

const SEC: i64 = 1_000_000;

#[derive(Deserialize, Default)]
#[serde(default)]
struct Config {
    time_mode: String,
}

/// Runs one command per row: `op STRING, k STRING, v BIGINT`.
struct Probe {
    last: ValueState<i64>,
    timers: Timers,
    state_in_init_failed: bool,
}

impl StatefulProcessor for Probe {
    fn init(ctx: &mut InitContext) -> Result<Self> {
        let config: Config = ctx.config()?;
        ctx.set_time_mode(match config.time_mode.as_str() {
            "processing" => TimeMode::ProcessingTime,
            "event" => TimeMode::EventTime,
            _ => TimeMode::None,
        });
        ctx.set_output_schema(Schema::parse("event STRING NOT NULL, value BIGINT")?);
        ctx.set_initial_state_schema(Schema::parse("v BIGINT")?);
        let last = ctx.value_state("last", Duration::from_secs(10))?;
        let state_in_init_failed = last.get().is_err();
        Ok(Probe { last, timers: ctx.timers(), state_in_init_failed })
    }

    fn handle_input_rows(&mut self, key: &Key, rows: &Rows, _: &TimerValues, out: &mut Output) -> Result<()> {
        for row in rows.iter() {
            let k = row.str_opt("k")?.unwrap_or_default();
            let v = row.i64_opt("v")?.unwrap_or_default();
            match row.str("op")? {
                "set" => self.last.update(&v)?,
                "timer" => self.timers.register(v)?,
                "del" => self.timers.delete(v)?,
                "log" => info!("key {key}: {k}"),
                "bad-output" => out.append_row(&row!["x", "not a number"])?,
                other => bail!("unknown op {other}"),
            }
        }
        Ok(())
    }

    fn handle_expired_timer(
        &mut self,
        key: &Key,
        tv: &TimerValues,
        timer: &ExpiredTimer,
        out: &mut Output,
    ) -> Result<()> {
        out.row().set("event", key.str(0)?).set("value", timer.expiry_time).append()?;
        if timer.expiry_time == 7 * SEC {
            // Re-registering the firing timer keeps it for a later pass.
            self.timers.register(timer.expiry_time)?;
        }
        assert!(tv.processing_time >= 0);
        Ok(())
    }

    fn handle_initial_state(&mut self, _: &Key, rows: &Rows, _: &TimerValues) -> Result<()> {
        self.last.update(&rows.i64s("v")?.iter().sum())
    }
}

fn harness(time_mode: &str) -> Harness<Probe> {
    Harness::builder("op STRING, k STRING, v BIGINT", "id STRING")
        .config(format!(r#"{{"time_mode": "{time_mode}"}}"#))
        .build()
        .expect("probe initializes")
}

fn fired(rows: &Rows) -> Vec<(String, i64)> {
    rows.iter().map(|r| (r.str("event").unwrap().to_string(), r.i64("value").unwrap())).collect()
}

#[test]
fn state_is_unusable_in_init() {
    assert!(harness("none").processor().state_in_init_failed);
}

#[test]
fn processing_timers_fire_in_expiry_order_across_keys() -> Result<()> {
    let mut h = harness("processing");
    let x = [row!["timer", "", 3 * SEC], row!["timer", "", SEC], row!["timer", "", SEC], row!["timer", "", 2 * SEC]];
    h.feed(&row!["x"], &x)?;
    h.feed(&row!["y"], &[row!["timer", "", 1_500_000]])?;
    assert_eq!(h.timers(&row!["x"])?, vec![SEC, 2 * SEC, 3 * SEC], "deduplicated and sorted");

    assert!(h.set_watermark(100 * SEC)?.is_empty(), "the watermark does not fire processing timers");
    let out = h.set_processing_time(2 * SEC)?;
    let want = vec![("x".to_string(), SEC), ("y".to_string(), 1_500_000), ("x".to_string(), 2 * SEC)];
    assert_eq!(fired(&out), want);
    assert_eq!(h.timers(&row!["x"])?, vec![3 * SEC]);
    assert!(h.set_processing_time(2 * SEC)?.is_empty(), "a timer fires once");
    Ok(())
}

#[test]
fn deleted_timers_do_not_fire_and_refiring_timers_wait() -> Result<()> {
    let mut h = harness("processing");
    h.feed(&row!["x"], &[row!["timer", "", 5 * SEC], row!["timer", "", 7 * SEC], row!["del", "", 5 * SEC]])?;
    let out = h.set_processing_time(8 * SEC)?;
    assert_eq!(fired(&out), vec![("x".to_string(), 7 * SEC)]);
    assert_eq!(h.timers(&row!["x"])?, vec![7 * SEC], "re-registered while firing");
    Ok(())
}

#[test]
fn event_timers_fire_with_the_watermark() -> Result<()> {
    let mut h = harness("event");
    h.feed(&row!["x"], &[row!["timer", "", 5 * SEC]])?;
    assert!(h.set_processing_time(100 * SEC)?.is_empty());
    assert!(h.set_watermark(5 * SEC - 1)?.is_empty());
    assert_eq!(fired(&h.set_watermark(5 * SEC)?), vec![("x".to_string(), 5 * SEC)]);
    assert!(h.set_watermark(SEC).is_err(), "the watermark never goes back");
    Ok(())
}

#[test]
fn output_values_are_checked_against_the_schema() {
    let mut h = harness("none");
    let err = h.feed(&row!["a"], &[row!["bad-output", "", 0]]).unwrap_err();
    assert!(err.message().contains("column `value BIGINT` cannot hold the STRING value"), "{err}");
}

#[test]
fn inputs_and_keys_are_checked_against_their_schemas() {
    let mut h = harness("none");
    let err = h.feed(&row!["a"], &[row!["set", "k"]]).unwrap_err();
    assert!(err.message().contains("row has 2 values"), "{err}");
    let err = h.feed(&row![5], &[row!["set", "", 1]]).unwrap_err();
    assert!(err.message().starts_with("key"), "{err}");
}

#[test]
fn logs_are_captured() -> Result<()> {
    let mut h = harness("none");
    h.feed(&row!["a"], &[row!["log", "hello", 0]])?;
    assert_eq!(h.logs().len(), 1);
    assert_eq!(h.logs()[0].message, "key a: hello");
    Ok(())
}

#[test]
fn initial_state_is_loaded() -> Result<()> {
    let mut h = harness("none");
    h.initial_state(&row!["a"], &[row![3], row![4]])?;
    assert_eq!(h.value_state::<i64>("last", &row!["a"])?, Some(7));
    Ok(())
}

#[test]
fn config_errors_name_the_config() {
    let result =
        Harness::<Probe>::builder("op STRING, k STRING, v BIGINT", "id STRING").config(r#"{"time_mode": 5}"#).build();
    let err = result.err().expect("a number is not a time mode");
    assert!(err.message().contains("invalid processor config"), "{err}");
}

#[test]
fn rows_read_by_row_and_by_column() -> Result<()> {
    let rows = eddy_guest::testing::batch(
        "s STRING, n BIGINT, f DOUBLE, t TIMESTAMP, b BOOLEAN, x BINARY",
        &[row!["a", 1, 0.5, 10, true, &b"\x01"[..]], row![None::<&str>, None::<i64>, 1.5, 20, false, None::<&[u8]>]],
    )?;
    let second = rows.row(1).expect("two rows");
    assert!(second.is_null("s")? && second.is_null(1)?);
    assert_eq!(second.str_opt("s")?, None);
    assert!(second.i64("n").unwrap_err().message().contains("use `i64_opt`"));
    assert!(second.f64("n").unwrap_err().message().contains("is BIGINT"));
    assert_eq!(rows.timestamps("t")?, &[10, 20]);
    assert_eq!(rows.f64s("f")?, &[0.5, 1.5]);
    assert_eq!(rows.strs("s")?.iter().collect::<Vec<_>>(), vec![Some("a"), None]);
    assert_eq!(rows.column("x")?.binaries()?.get(0), Some(&b"\x01"[..]));
    assert!(rows.column("nope").unwrap_err().message().contains("no column `nope`"));
    assert_eq!(rows.to_values()[0][3], Value::Timestamp(10));
    Ok(())
}

/// Counts the rows each call gets; `{"late": true}` makes it accept late rows.
struct RowCounter;

#[derive(Deserialize, Default)]
#[serde(default)]
struct CounterConfig {
    late: bool,
}

impl StatefulProcessor for RowCounter {
    fn init(ctx: &mut InitContext) -> Result<Self> {
        let config: CounterConfig = ctx.config()?;
        ctx.set_time_mode(TimeMode::EventTime);
        ctx.set_accepts_late_rows(config.late);
        ctx.set_output_schema(Schema::parse("rows BIGINT")?);
        Ok(RowCounter)
    }

    fn handle_input_rows(&mut self, _: &Key, rows: &Rows, _: &TimerValues, out: &mut Output) -> Result<()> {
        out.append_row(&row![rows.len() as i64])
    }
}

fn counter(config: &str, event_time_column: bool) -> Result<Harness<RowCounter>> {
    let builder =
        Harness::<RowCounter>::builder("k STRING, ts TIMESTAMP", "k STRING").config(config).watermark(10 * SEC);
    if event_time_column { builder.event_time_column("ts") } else { builder }.build()
}

#[test]
fn rows_at_or_before_the_watermark_are_dropped_like_the_host_does() -> Result<()> {
    let counted = |h: &mut Harness<RowCounter>, times: &[i64]| -> Result<Vec<Vec<Value>>> {
        let rows: Vec<_> = times.iter().map(|t| row!["a", eddy_guest::Datum::Timestamp(*t)]).collect();
        Ok(h.feed(&row!["a"], &rows)?.to_values())
    };
    let mut dropping = counter("{}", true)?;
    let late = "5 s and 10 s are late for a 10 s watermark (at or before it, as in Spark)";
    assert_eq!(counted(&mut dropping, &[5 * SEC, 10 * SEC, 15 * SEC])?, vec![vec![Value::from(1)]], "{late}");
    assert!(counted(&mut dropping, &[9 * SEC])?.is_empty(), "only late rows: the processor is not called");
    let mut accepting = counter("{\"late\": true}", true)?;
    assert_eq!(counted(&mut accepting, &[5 * SEC, 15 * SEC])?, vec![vec![Value::from(2)]]);
    let mut without_event_time = counter("{}", false)?;
    assert_eq!(counted(&mut without_event_time, &[5 * SEC])?, vec![vec![Value::from(1)]]);
    Ok(())
}
