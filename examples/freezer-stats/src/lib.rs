//! Ten-minute temperature statistics per freezer unit, on event time.
//!
//! Input `unit STRING, temperature DOUBLE, ts TIMESTAMP`, keyed by `unit`, with a
//! watermark on `ts`. Readings fall into tumbling windows of `window_minutes` (config,
//! default 10; or `window_seconds`). The config can name other columns
//! (`value_column`, `time_column`, and `key_name` for the output's first column), so
//! the same processor computes any per-key tumbling-window min/max/avg/count. Per unit a `MapState` holds each open window's min, max, sum and
//! count; an event-time timer at the window's end emits the window once (append mode)
//! when the watermark passes it, and forgets it.
//!
//! The processor takes late rows: a reading is dropped only when its window has
//! already ended at or before the watermark (the window's result is final), which is
//! the rule of Spark's windowed aggregations — a reading older than the watermark
//! still counts while its window is open. Dropped readings are counted in the
//! `late_readings` value state.
//!
//! Output: `unit STRING, window_start TIMESTAMP, window_end TIMESTAMP, min DOUBLE,
//! max DOUBLE, avg DOUBLE, count BIGINT`.

use eddy_guest::{
    DataType, ExpiredTimer, InitContext, Key, MapState, Output, Result, Rows, Schema, StatefulProcessor, TimeMode,
    TimerValues, Timers, Ttl, ValueState, bail, export_processor, row,
};
use serde::{Deserialize, Serialize};

/// The operator's config.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The window length in minutes.
    pub window_minutes: i64,
    /// The window length in seconds (instead of minutes).
    pub window_seconds: Option<i64>,
    /// The DOUBLE or BIGINT column the statistics are of.
    pub value_column: String,
    /// The event-time column.
    pub time_column: String,
    /// The name of the output's key column.
    pub key_name: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            window_minutes: 10,
            window_seconds: None,
            value_column: "temperature".into(),
            time_column: "ts".into(),
            key_name: "unit".into(),
        }
    }
}

/// The running statistics of one window.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// The lowest reading.
    pub min: f64,
    /// The highest reading.
    pub max: f64,
    /// The sum of the readings.
    pub sum: f64,
    /// How many readings.
    pub count: i64,
}

impl Stats {
    /// No readings yet.
    const EMPTY: Stats = Stats { min: f64::INFINITY, max: f64::NEG_INFINITY, sum: 0.0, count: 0 };

    fn add(&mut self, reading: f64) {
        self.min = self.min.min(reading);
        self.max = self.max.max(reading);
        self.sum += reading;
        self.count += 1;
    }

    fn merge(self, other: Stats) -> Stats {
        Stats {
            min: self.min.min(other.min),
            max: self.max.max(other.max),
            sum: self.sum + other.sum,
            count: self.count + other.count,
        }
    }
}

/// The processor.
pub struct FreezerStats {
    window_micros: i64,
    value_column: String,
    time_column: String,
    windows: MapState<i64, Stats>,
    late_readings: ValueState<i64>,
    timers: Timers,
}

impl StatefulProcessor for FreezerStats {
    fn init(ctx: &mut InitContext) -> Result<Self> {
        let config: Config = ctx.config()?;
        let window_micros = match config.window_seconds {
            Some(seconds) if seconds > 0 => seconds.saturating_mul(1_000_000),
            Some(seconds) => bail!("invalid config: window_seconds must be positive, not {seconds}"),
            None if config.window_minutes > 0 => config.window_minutes.saturating_mul(60_000_000),
            None => bail!("invalid config: window_minutes must be positive, not {}", config.window_minutes),
        };
        ctx.set_time_mode(TimeMode::EventTime);
        ctx.set_accepts_late_rows(true);
        ctx.set_output_schema(Schema::parse(&format!(
            "{} STRING NOT NULL, window_start TIMESTAMP NOT NULL, window_end TIMESTAMP NOT NULL, \
             min DOUBLE NOT NULL, max DOUBLE NOT NULL, avg DOUBLE NOT NULL, count BIGINT NOT NULL",
            config.key_name
        ))?);
        Ok(FreezerStats {
            window_micros,
            value_column: config.value_column,
            time_column: config.time_column,
            windows: ctx.map_state("windows", Ttl::NONE)?,
            late_readings: ctx.value_state("late_readings", Ttl::NONE)?,
            timers: ctx.timers(),
        })
    }

    fn handle_input_rows(
        &mut self,
        _key: &Key,
        rows: &Rows,
        timer_values: &TimerValues,
        _output: &mut Output,
    ) -> Result<()> {
        // The rows' windows in order of their start: a key's rows of one batch mostly
        // fall in one or two windows, where a sorted list costs less than a map.
        let mut batch: Vec<(i64, Stats)> = Vec::new();
        let mut late = 0;
        let values = rows.column(self.value_column.as_str())?;
        // By the column's type, not by trying `f64s` first: its error (a formatted
        // message) would be built and dropped for every key of a BIGINT column.
        let (integers, doubles) = match values.field().data_type {
            DataType::Int64 => (values.i64s()?, &[][..]),
            _ => (&[][..], values.f64s()?),
        };
        let reading = |row: usize| match integers.get(row) {
            Some(integer) => Some(*integer as f64),
            None => doubles.get(row).copied(),
        };
        let times = rows.column(self.time_column.as_str())?;
        for (row, ts) in times.timestamps()?.iter().enumerate() {
            if values.is_null(row) || times.is_null(row) {
                continue;
            }
            let Some(reading) = reading(row) else { continue };
            let start = ts.div_euclid(self.window_micros) * self.window_micros;
            let end = start + self.window_micros;
            if timer_values.watermark.is_some_and(|watermark| end <= watermark) {
                late += 1;
                continue;
            }
            match batch.binary_search_by_key(&start, |(open, _)| *open) {
                Ok(at) => batch[at].1.add(reading),
                Err(at) => {
                    let mut stats = Stats::EMPTY;
                    stats.add(reading);
                    batch.insert(at, (start, stats));
                }
            }
        }
        for (start, stats) in batch {
            let merged = match self.windows.get(&start)? {
                Some(previous) => previous.merge(stats),
                None => {
                    self.timers.register(start + self.window_micros)?;
                    stats
                }
            };
            self.windows.update(&start, &merged)?;
        }
        if late > 0 {
            let total = self.late_readings.get()?.unwrap_or(0) + late;
            self.late_readings.update(&total)?;
        }
        Ok(())
    }

    fn handle_expired_timer(
        &mut self,
        key: &Key,
        _timer_values: &TimerValues,
        timer: &ExpiredTimer,
        output: &mut Output,
    ) -> Result<()> {
        let start = timer.expiry_time - self.window_micros;
        let Some(stats) = self.windows.get(&start)? else {
            return Ok(());
        };
        self.windows.remove(&start)?;
        let avg = stats.sum / stats.count as f64;
        output.append_row(&row![key.str(0)?, start, timer.expiry_time, stats.min, stats.max, avg, stats.count])
    }
}

export_processor!(FreezerStats);

#[cfg(test)]
mod tests {
    use eddy_guest::testing::Harness;
    use eddy_guest::{Value, row};

    use super::*;

    const MINUTE: i64 = 60_000_000;

    #[test]
    fn a_window_is_emitted_once_the_watermark_passes_its_end() -> Result<()> {
        let mut h = Harness::<FreezerStats>::builder("unit STRING, temperature DOUBLE, ts TIMESTAMP", "unit STRING")
            .event_time_column("ts")
            .build()?;
        let out = h.feed(
            &row!["u1"],
            &[row!["u1", -18.0, 0], row!["u1", -20.0, 5 * MINUTE], row!["u1", -19.0, 11 * MINUTE]],
        )?;
        assert!(out.is_empty());
        let out = h.set_watermark(10 * MINUTE)?;
        assert_eq!(
            out.to_values(),
            vec![vec![
                Value::from("u1"),
                Value::Timestamp(0),
                Value::Timestamp(10 * MINUTE),
                Value::from(-20.0),
                Value::from(-18.0),
                Value::from(-19.0),
                Value::from(2)
            ]]
        );
        // The 0–10 window is final: a reading for it is dropped; 10–20 still counts.
        h.feed(&row!["u1"], &[row!["u1", -30.0, 9 * MINUTE], row!["u1", -21.0, 12 * MINUTE]])?;
        assert_eq!(h.value_state::<i64>("late_readings", &row!["u1"])?, Some(1));
        let out = h.set_watermark(20 * MINUTE)?;
        assert_eq!(out.to_values()[0][6], Value::from(2));
        Ok(())
    }

    #[test]
    fn bigint_rows_out_of_time_order_fold_into_their_windows() -> Result<()> {
        const SECOND: i64 = 1_000_000;
        let mut h = Harness::<FreezerStats>::builder("user STRING, amount BIGINT, ts TIMESTAMP", "user STRING")
            .config(r#"{"window_seconds": 10, "value_column": "amount", "key_name": "user"}"#)
            .event_time_column("ts")
            .build()?;
        // (amount, second): out of time order, over the windows 0, 10, 20 and 30 s.
        let readings = [(5, 31), (7, 2), (-3, 25), (4, 9), (11, 12), (6, 0), (2, 39), (9, 15), (1, 21), (8, 3)];
        let rows: Vec<_> = readings.iter().map(|(amount, second)| row!["u", *amount, second * SECOND]).collect();
        assert!(h.feed(&row!["u"], &rows)?.is_empty());
        let out = h.set_watermark(40 * SECOND)?;
        // The reference: each window's readings gathered naively.
        let expected: Vec<Vec<Value>> = (0..4)
            .map(|window| {
                let of_window: Vec<f64> = readings
                    .iter()
                    .filter(|(_, second)| second / 10 == window)
                    .map(|(amount, _)| *amount as f64)
                    .collect();
                let sum: f64 = of_window.iter().sum();
                vec![
                    Value::from("u"),
                    Value::Timestamp(window * 10 * SECOND),
                    Value::Timestamp((window + 1) * 10 * SECOND),
                    Value::from(of_window.iter().copied().fold(f64::INFINITY, f64::min)),
                    Value::from(of_window.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
                    Value::from(sum / of_window.len() as f64),
                    Value::from(of_window.len() as i64),
                ]
            })
            .collect();
        assert_eq!(out.to_values(), expected);
        Ok(())
    }
}
