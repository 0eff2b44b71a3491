//! Harness tests: raise, suppress, reminder, clear, per-day counts.

use std::time::Duration;

use eddy_guest::testing::Harness;
use eddy_guest::{Rows, Value, row};

use super::*;

const SEC: i64 = 1_000_000;
/// 2023-11-14T22:13:20Z.
const T0: i64 = 1_700_000_000 * SEC;

fn harness() -> Harness<AlertSuppression> {
    Harness::builder("sensor STRING, reading DOUBLE, ts TIMESTAMP", "sensor STRING")
        .config(r#"{"threshold": 100.0, "suppress_secs": 60, "clear_after": 2}"#)
        .processing_time(T0)
        .build()
        .expect("the processor initializes")
}

/// (event, reading, suppressed, raised_today) of every output row.
fn events(rows: &Rows) -> Vec<(String, f64, i64, i64)> {
    rows.iter()
        .map(|r| {
            let event = r.str("event").expect("event").to_string();
            let reading = r.f64("reading").expect("reading");
            (event, reading, r.i64("suppressed").expect("suppressed"), r.i64("raised_today").expect("count"))
        })
        .collect()
}

fn ev(event: &str, reading: f64, suppressed: i64, raised_today: i64) -> (String, f64, i64, i64) {
    (event.to_string(), reading, suppressed, raised_today)
}

#[test]
fn raises_once_and_suppresses_repeats() -> Result<()> {
    let mut h = harness();
    let out =
        h.feed(&row!["s1"], &[row!["s1", 50.0, T0], row!["s1", 120.0, T0 + SEC], row!["s1", 130.0, T0 + 2 * SEC]])?;
    assert_eq!(events(&out), vec![ev("RAISE", 120.0, 0, 1)]);
    let first = out.row(0).expect("one row");
    assert_eq!(first.to_values()[0], Value::from("s1"));
    assert_eq!(first.timestamp("ts")?, T0 + SEC);
    assert_eq!(h.timers(&row!["s1"])?, vec![T0 + 60 * SEC]);

    let out = h.feed(&row!["s1"], &[row!["s1", 140.0, T0 + 3 * SEC]])?;
    assert!(out.is_empty(), "repeats are suppressed");
    let alert = h.value_state::<Alert>("alert", &row!["s1"])?.expect("an active alert");
    assert_eq!((alert.suppressed, alert.last_reading), (2, 140.0));
    Ok(())
}

#[test]
fn reminds_when_the_timer_fires_above_threshold() -> Result<()> {
    let mut h = harness();
    h.feed(&row!["s1"], &[row!["s1", 120.0, T0], row!["s1", 150.0, T0], row!["s1", 110.0, T0]])?;
    assert!(h.advance_processing_time(Duration::from_secs(59))?.is_empty());
    let out = h.advance_processing_time(Duration::from_secs(1))?;
    assert_eq!(events(&out), vec![ev("REMINDER", 110.0, 2, 1)]);
    assert_eq!(h.timers(&row!["s1"])?, vec![T0 + 120 * SEC], "suppression starts again");

    let out = h.advance_processing_time(Duration::from_secs(60))?;
    assert_eq!(events(&out), vec![ev("REMINDER", 110.0, 0, 1)]);
    Ok(())
}

#[test]
fn a_quiet_window_ends_and_the_next_alarm_reminds_at_once() -> Result<()> {
    let mut h = harness();
    h.feed(&row!["s1"], &[row!["s1", 120.0, T0], row!["s1", 90.0, T0]])?;
    assert!(h.advance_processing_time(Duration::from_secs(60))?.is_empty());
    assert!(h.timers(&row!["s1"])?.is_empty());
    let out = h.feed(&row!["s1"], &[row!["s1", 130.0, T0 + 61 * SEC]])?;
    assert_eq!(events(&out), vec![ev("REMINDER", 130.0, 0, 1)]);
    assert_eq!(h.timers(&row!["s1"])?, vec![T0 + 120 * SEC]);
    Ok(())
}

#[test]
fn clears_after_enough_readings_under_threshold() -> Result<()> {
    let mut h = harness();
    h.feed(&row!["s1"], &[row!["s1", 120.0, T0], row!["s1", 125.0, T0]])?;
    assert!(h.feed(&row!["s1"], &[row!["s1", 80.0, T0 + SEC]])?.is_empty(), "one is not enough");
    let out = h.feed(&row!["s1"], &[row!["s1", 100.0, T0 + 2 * SEC]])?;
    assert_eq!(events(&out), vec![ev("CLEAR", 100.0, 1, 1)]);
    assert!(h.timers(&row!["s1"])?.is_empty(), "the timer is deleted");
    assert_eq!(h.value_state::<Alert>("alert", &row!["s1"])?, None);
    assert_eq!(h.list_state::<f64>("recent", &row!["s1"])?, vec![80.0, 100.0]);
    assert!(h.advance_processing_time(Duration::from_secs(120))?.is_empty());

    let out = h.feed(&row!["s1"], &[row!["s1", 101.0, T0 + 3 * SEC]])?;
    assert_eq!(events(&out), vec![ev("RAISE", 101.0, 0, 2)], "second raise of the day");
    Ok(())
}

#[test]
fn sensors_are_independent() -> Result<()> {
    let mut h = harness();
    h.feed(&row!["s1"], &[row!["s1", 120.0, T0]])?;
    let out = h.feed(&row!["s2"], &[row!["s2", 120.0, T0]])?;
    assert_eq!(events(&out), vec![ev("RAISE", 120.0, 0, 1)]);
    Ok(())
}

#[test]
fn daily_counts_expire_after_a_day() -> Result<()> {
    let mut h = harness();
    h.feed(&row!["s1"], &[row!["s1", 120.0, T0]])?;
    let day = utc_date(T0);
    assert_eq!(h.map_state::<String, i64>("raised_per_day", &row!["s1"])?, vec![(day, 1)]);
    h.feed(&row!["s1"], &[row!["s1", 10.0, T0], row!["s1", 10.0, T0]])?;
    h.set_processing_time(T0 + 24 * 3600 * SEC)?;
    assert!(h.map_state::<String, i64>("raised_per_day", &row!["s1"])?.is_empty());
    Ok(())
}

#[test]
fn null_readings_are_skipped_and_null_times_use_processing_time() -> Result<()> {
    let mut h = harness();
    let out = h.feed(&row!["s1"], &[row!["s1", None::<f64>, T0], row!["s1", 120.0, None::<i64>]])?;
    assert_eq!(out.len(), 1);
    assert_eq!(out.row(0).expect("one row").timestamp("ts")?, T0);
    Ok(())
}

#[test]
fn config_has_defaults_and_is_checked() {
    let schema = "sensor STRING, reading DOUBLE, ts TIMESTAMP";
    let h = Harness::<AlertSuppression>::builder(schema, "sensor STRING").build();
    assert!(h.is_ok(), "{{}} uses the defaults");
    let err = Harness::<AlertSuppression>::builder(schema, "sensor STRING")
        .config(r#"{"clear_after": 0}"#)
        .build()
        .err()
        .expect("clear_after 0 is refused");
    assert!(err.message().contains("clear_after >= 1"), "{err}");
    let err = Harness::<AlertSuppression>::builder(schema, "sensor STRING")
        .config(r#"{"treshold": 5}"#)
        .build()
        .err()
        .expect("a misspelt field is refused");
    assert!(err.message().contains("unknown field `treshold`"), "{err}");
}

#[test]
fn utc_dates() {
    assert_eq!(utc_date(0), "1970-01-01");
    assert_eq!(utc_date(T0), "2023-11-14");
    assert_eq!(utc_date(-1), "1969-12-31");
    assert_eq!(utc_date(951_782_400 * SEC), "2000-02-29");
}
