"""Per-sensor alerts with suppression, reminders and clearing (the Python port of
../src/lib.rs; its state has the same names and CBOR shapes, so either module can
continue the other's checkpoint).

Input `sensor STRING, reading DOUBLE, ts TIMESTAMP`, keyed by `sensor`; processing-time
mode. Config (every field optional): `threshold` (100.0; a reading above it is an alarm
reading), `suppress_secs` (300; how long repeats are suppressed after an alert),
`clear_after` (3; how many readings in a row at or below the threshold clear an alert).

Events, one output row each (`sensor, event, reading, ts, suppressed, raised_today`):
- RAISE: an alarm reading while no alert is active; starts a timer `suppress_secs`
  ahead, until which further alarm readings are suppressed (counted).
- REMINDER: the timer fired and the last reading is still an alarm reading (the timer
  starts again); if it is not, the timer stops and the next alarm reading is reported
  at once as a REMINDER.
- CLEAR: the last `clear_after` readings are all at or below the threshold.

`raised_today` is how many RAISE events the sensor had on the UTC day of `ts`. Rows with
a null reading are skipped; a null `ts` is taken as the batch's processing time.

State: `alert` (value: the active alert), `recent` (list: the last `clear_after`
readings), `raised_per_day` (map from UTC date to RAISE count, TTL 24 h from each write).
"""

from dataclasses import dataclass
from datetime import timedelta
from typing import Optional

from eddy_guest import EddyError, StatefulProcessor, export
from eddy_guest.times import utc_date

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
DEFAULTS = {"threshold": 100.0, "suppress_secs": 300, "clear_after": 3}


def _saturate(n: int) -> int:
    return max(_I64_MIN, min(_I64_MAX, n))


@dataclass
class Alert:
    """The active alert of a sensor (fields in the Rust struct's order)."""

    suppressed: int
    timer: Optional[int]
    last_reading: float
    last_ts: int


def parse_config(config: dict) -> dict:
    """The config with defaults; fails on unknown fields and invalid values."""
    unknown = sorted(set(config) - set(DEFAULTS))
    if unknown:
        raise EddyError(f"unknown field `{unknown[0]}` in the config; expected one of {', '.join(DEFAULTS)}")
    merged = {**DEFAULTS, **config}
    threshold, suppress_secs, clear_after = merged["threshold"], merged["suppress_secs"], merged["clear_after"]
    valid = (
        isinstance(threshold, (int, float)) and not isinstance(threshold, bool)
        and float("-inf") < threshold < float("inf")
        and isinstance(suppress_secs, int) and not isinstance(suppress_secs, bool) and suppress_secs > 0
        and isinstance(clear_after, int) and not isinstance(clear_after, bool) and clear_after >= 1
    )  # fmt: skip
    if not valid:
        raise EddyError(
            f"invalid config {merged}: threshold must be a number, suppress_secs > 0 and clear_after >= 1"
        )
    return {"threshold": float(threshold), "suppress_secs": suppress_secs, "clear_after": clear_after}


class AlertSuppression(StatefulProcessor):
    def init(self, ctx):
        self.config = parse_config(ctx.config)
        self.suppress_micros = _saturate(self.config["suppress_secs"] * 1_000_000)
        ctx.set_time_mode("processing-time")
        ctx.set_output_schema(
            "sensor STRING NOT NULL, event STRING NOT NULL, reading DOUBLE NOT NULL, "
            "ts TIMESTAMP NOT NULL, suppressed BIGINT NOT NULL, raised_today BIGINT NOT NULL"
        )
        self.alert = ctx.value_state("alert", Alert)
        self.recent = ctx.list_state("recent", float)
        self.raised_per_day = ctx.map_state("raised_per_day", str, int, ttl=timedelta(hours=24))
        self.timers = ctx.timers()

    def emit(self, output, sensor, kind, reading, ts, suppressed):
        raised_today = self.raised_per_day.get(utc_date(ts), 0)
        output.row(sensor=sensor, event=kind, reading=reading, ts=ts, suppressed=suppressed,
                   raised_today=raised_today)

    def arm(self, now):
        """Starts a suppression window at the batch's processing time."""
        expiry = _saturate(now + self.suppress_micros)
        self.timers.register(expiry)
        return expiry

    def handle_input_rows(self, key, rows, timer_values, output):
        sensor = key.str(0)
        threshold, clear_after = self.config["threshold"], self.config["clear_after"]
        now = timer_values.processing_time
        alert = self.alert.get()
        recent = self.recent.get()
        for reading, ts in zip(rows.floats("reading"), rows.timestamps("ts")):
            if reading is None:
                continue
            if ts is None:
                ts = now
            recent.append(reading)
            del recent[: max(0, len(recent) - clear_after)]
            above = reading > threshold
            if alert is None and above:
                day = utc_date(ts)
                self.raised_per_day.update(day, self.raised_per_day.get(day, 0) + 1)
                alert = Alert(suppressed=0, timer=self.arm(now), last_reading=reading, last_ts=ts)
                self.emit(output, sensor, "RAISE", reading, ts, 0)
            elif alert is not None and above:
                alert.last_reading, alert.last_ts = reading, ts
                if alert.timer is not None:
                    alert.suppressed += 1
                else:
                    suppressed, alert.suppressed = alert.suppressed, 0
                    alert.timer = self.arm(now)
                    self.emit(output, sensor, "REMINDER", reading, ts, suppressed)
            elif alert is not None:
                alert.last_reading, alert.last_ts = reading, ts
                if len(recent) == clear_after and all(r <= threshold for r in recent):
                    if alert.timer is not None:
                        self.timers.delete(alert.timer)
                    suppressed = alert.suppressed
                    alert = None
                    self.emit(output, sensor, "CLEAR", reading, ts, suppressed)
        if alert is not None:
            self.alert.update(alert)
        else:
            self.alert.clear()
        self.recent.put(recent)

    def handle_expired_timer(self, key, timer_values, timer, output):
        alert = self.alert.get()
        if alert is None or alert.timer != timer.expiry_time:
            return  # no alert, or a timer of an earlier alert
        if alert.last_reading > self.config["threshold"]:
            suppressed, alert.suppressed = alert.suppressed, 0
            self.emit(output, key.str(0), "REMINDER", alert.last_reading, alert.last_ts, suppressed)
            alert.timer = self.arm(timer_values.processing_time)
        else:
            alert.timer = None
        self.alert.update(alert)


Handler = export(AlertSuppression)
