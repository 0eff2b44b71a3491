//! Per-sensor alerts with suppression, reminders and clearing: a state machine per key.
//!
//! Input `sensor STRING, reading DOUBLE, ts TIMESTAMP`, keyed by `sensor`; processing
//! time mode. Config (JSON, every field optional):
//!
//! | field           | default | meaning                                                  |
//! |-----------------|---------|----------------------------------------------------------|
//! | `threshold`     | 100.0   | a reading above it is an alarm reading                   |
//! | `suppress_secs` | 300     | how long repeats are suppressed after an alert          |
//! | `clear_after`   | 3       | how many readings in a row at or below it clear an alert |
//!
//! Events, one output row each
//! (`sensor STRING, event STRING, reading DOUBLE, ts TIMESTAMP, suppressed BIGINT,
//! raised_today BIGINT`, all `NOT NULL`):
//! - `RAISE`: a reading above the threshold while no alert is active. Starts a
//!   processing-time timer `suppress_secs` ahead; further alarm readings are
//!   suppressed (counted) until it fires.
//! - `REMINDER`: the timer fired and the last reading is still above the threshold;
//!   `suppressed` is how many alarm readings were held back since the last event, and
//!   the timer is started again. If the last reading is not above the threshold, the
//!   timer just stops, and the next alarm reading is reported at once as a `REMINDER`.
//! - `CLEAR`: the last `clear_after` readings are all at or below the threshold; the
//!   alert ends and its timer is deleted.
//!
//! `reading`/`ts` are those of the reading that caused the event (for `REMINDER` from a
//! timer: the last reading). `raised_today` is how many `RAISE` events the sensor had on
//! the UTC day of `ts`. Rows with a null reading are skipped; a null `ts` is taken as
//! the batch's processing time.
//!
//! State: `alert` (value: the active alert), `recent` (list: the last `clear_after`
//! readings), `raised_per_day` (map from UTC date `YYYY-MM-DD` to RAISE count, TTL 24 h
//! from each write).

use std::time::Duration;

use eddy_guest::{
    ExpiredTimer, InitContext, Key, ListState, MapState, Output, Result, Rows, Schema, StatefulProcessor, TimeMode,
    TimerValues, Timers, Ttl, ValueState, bail, export_processor,
};
use serde::{Deserialize, Serialize};

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// The operator's config.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// A reading above it is an alarm reading.
    pub threshold: f64,
    /// How long repeats are suppressed after an alert, in seconds.
    pub suppress_secs: i64,
    /// How many readings in a row at or below the threshold clear an alert.
    pub clear_after: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { threshold: 100.0, suppress_secs: 300, clear_after: 3 }
    }
}

/// The active alert of a sensor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// Alarm readings held back since the last event.
    pub suppressed: i64,
    /// The running suppression timer, if any.
    pub timer: Option<i64>,
    /// The last reading and its time.
    pub last_reading: f64,
    /// The time of the last reading (microseconds).
    pub last_ts: i64,
}

/// The processor.
pub struct AlertSuppression {
    config: Config,
    suppress_micros: i64,
    alert: ValueState<Alert>,
    recent: ListState<f64>,
    raised_per_day: MapState<String, i64>,
    timers: Timers,
}

/// The UTC date (`YYYY-MM-DD`) of `micros` since the epoch.
pub fn utc_date(micros: i64) -> String {
    // Howard Hinnant's civil-from-days.
    let z = micros.div_euclid(MICROS_PER_DAY) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// One output event.
struct Event<'a> {
    sensor: &'a str,
    kind: &'static str,
    reading: f64,
    ts: i64,
    suppressed: i64,
}

impl AlertSuppression {
    fn emit(&self, event: Event<'_>, output: &mut Output) -> Result<()> {
        let raised_today = self.raised_per_day.get(&utc_date(event.ts))?.unwrap_or(0);
        output
            .row()
            .set("sensor", event.sensor)
            .set("event", event.kind)
            .set("reading", event.reading)
            .set("ts", event.ts)
            .set("suppressed", event.suppressed)
            .set("raised_today", raised_today)
            .append()
    }

    /// Starts a suppression window at the batch's processing time.
    fn arm(&self, now: i64) -> Result<i64> {
        let expiry = now.saturating_add(self.suppress_micros);
        self.timers.register(expiry)?;
        Ok(expiry)
    }
}

impl StatefulProcessor for AlertSuppression {
    fn init(ctx: &mut InitContext) -> Result<Self> {
        let config: Config = ctx.config()?;
        if !config.threshold.is_finite() || config.suppress_secs <= 0 || config.clear_after == 0 {
            bail!(
                "invalid config {config:?}: threshold must be a number, suppress_secs > 0 and \
                 clear_after >= 1"
            );
        }
        ctx.set_time_mode(TimeMode::ProcessingTime);
        ctx.set_output_schema(Schema::parse(
            "sensor STRING NOT NULL, event STRING NOT NULL, reading DOUBLE NOT NULL, \
             ts TIMESTAMP NOT NULL, suppressed BIGINT NOT NULL, raised_today BIGINT NOT NULL",
        )?);
        Ok(AlertSuppression {
            suppress_micros: config.suppress_secs.saturating_mul(1_000_000),
            config,
            alert: ctx.value_state("alert", Ttl::NONE)?,
            recent: ctx.list_state("recent", Ttl::NONE)?,
            raised_per_day: ctx.map_state("raised_per_day", Duration::from_secs(24 * 3600))?,
            timers: ctx.timers(),
        })
    }

    fn handle_input_rows(
        &mut self,
        key: &Key,
        rows: &Rows,
        timer_values: &TimerValues,
        output: &mut Output,
    ) -> Result<()> {
        let sensor = key.str(0)?;
        let threshold = self.config.threshold;
        let mut alert = self.alert.get()?;
        let mut recent = self.recent.get()?;
        for row in rows.iter() {
            let Some(reading) = row.f64_opt("reading")? else {
                continue;
            };
            let ts = row.timestamp_opt("ts")?.unwrap_or(timer_values.processing_time);
            recent.push(reading);
            let excess = recent.len().saturating_sub(self.config.clear_after);
            recent.drain(..excess);
            let above = reading > threshold;
            match (&mut alert, above) {
                (None, true) => {
                    let day = utc_date(ts);
                    let raised = self.raised_per_day.get(&day)?.unwrap_or(0) + 1;
                    self.raised_per_day.update(&day, &raised)?;
                    let timer = Some(self.arm(timer_values.processing_time)?);
                    alert = Some(Alert { suppressed: 0, timer, last_reading: reading, last_ts: ts });
                    let event = Event { sensor, kind: "RAISE", reading, ts, suppressed: 0 };
                    self.emit(event, output)?;
                }
                (Some(active), true) => {
                    active.last_reading = reading;
                    active.last_ts = ts;
                    if active.timer.is_some() {
                        active.suppressed += 1;
                    } else {
                        let suppressed = std::mem::take(&mut active.suppressed);
                        active.timer = Some(self.arm(timer_values.processing_time)?);
                        let event = Event { sensor, kind: "REMINDER", reading, ts, suppressed };
                        self.emit(event, output)?;
                    }
                }
                (Some(active), false) => {
                    active.last_reading = reading;
                    active.last_ts = ts;
                    let cleared = recent.len() == self.config.clear_after && recent.iter().all(|r| *r <= threshold);
                    if cleared {
                        if let Some(timer) = active.timer {
                            self.timers.delete(timer)?;
                        }
                        let suppressed = active.suppressed;
                        alert = None;
                        self.emit(Event { sensor, kind: "CLEAR", reading, ts, suppressed }, output)?;
                    }
                }
                (None, false) => {}
            }
        }
        match &alert {
            Some(active) => self.alert.update(active)?,
            None => self.alert.clear()?,
        }
        self.recent.put(&recent)
    }

    fn handle_expired_timer(
        &mut self,
        key: &Key,
        timer_values: &TimerValues,
        expired_timer: &ExpiredTimer,
        output: &mut Output,
    ) -> Result<()> {
        let Some(mut active) = self.alert.get()? else {
            return Ok(());
        };
        if active.timer != Some(expired_timer.expiry_time) {
            return Ok(()); // a timer of an earlier alert
        }
        if active.last_reading > self.config.threshold {
            let suppressed = std::mem::take(&mut active.suppressed);
            let event = Event {
                sensor: key.str(0)?,
                kind: "REMINDER",
                reading: active.last_reading,
                ts: active.last_ts,
                suppressed,
            };
            self.emit(event, output)?;
            active.timer = Some(self.arm(timer_values.processing_time)?);
        } else {
            active.timer = None;
        }
        self.alert.update(&active)
    }
}

export_processor!(AlertSuppression);

#[cfg(test)]
mod tests;
