"""Harness tests of app.py: raise, suppress, reminder, clear, per-day counts (the
Rust module's tests, ported)."""

import importlib.util
import sys
from datetime import timedelta
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "sdks" / "python"))  # the SDK of this repository

from eddy_guest import EddyError, cbor  # noqa: E402
from eddy_guest.testing import Harness  # noqa: E402
from eddy_guest.times import utc_date  # noqa: E402

_spec = importlib.util.spec_from_file_location("alert_suppression_app", HERE / "app.py")
app = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(app)

SEC = 1_000_000
T0 = 1_700_000_000 * SEC  # 2023-11-14T22:13:20Z
SCHEMA = "sensor STRING, reading DOUBLE, ts TIMESTAMP"


def harness():
    config = {"threshold": 100.0, "suppress_secs": 60, "clear_after": 2}
    return Harness(app.AlertSuppression, SCHEMA, "sensor STRING", config=config, processing_time=T0)


def events(rows):
    """(event, reading, suppressed, raised_today) of every output row."""
    return [(r["event"], r["reading"], r["suppressed"], r["raised_today"]) for r in rows]


def test_raises_once_and_suppresses_repeats():
    h = harness()
    out = h.feed("s1", [["s1", 50.0, T0], ["s1", 120.0, T0 + SEC], ["s1", 130.0, T0 + 2 * SEC]])
    assert events(out) == [("RAISE", 120.0, 0, 1)]
    assert out[0]["sensor"] == "s1" and out[0]["ts"] == T0 + SEC
    assert h.timers("s1") == [T0 + 60 * SEC]
    assert len(h.feed("s1", [["s1", 140.0, T0 + 3 * SEC]])) == 0, "repeats are suppressed"
    alert = h.value_state("alert", "s1", app.Alert)
    assert (alert.suppressed, alert.last_reading) == (2, 140.0)


def test_reminds_when_the_timer_fires_above_threshold():
    h = harness()
    h.feed("s1", [["s1", 120.0, T0], ["s1", 150.0, T0], ["s1", 110.0, T0]])
    assert len(h.advance_processing_time(timedelta(seconds=59))) == 0
    assert events(h.advance_processing_time(timedelta(seconds=1))) == [("REMINDER", 110.0, 2, 1)]
    assert h.timers("s1") == [T0 + 120 * SEC], "suppression starts again"
    assert events(h.advance_processing_time(timedelta(seconds=60))) == [("REMINDER", 110.0, 0, 1)]


def test_a_quiet_window_ends_and_the_next_alarm_reminds_at_once():
    h = harness()
    h.feed("s1", [["s1", 120.0, T0], ["s1", 90.0, T0]])
    assert len(h.advance_processing_time(60 * SEC)) == 0
    assert h.timers("s1") == []
    assert events(h.feed("s1", [["s1", 130.0, T0 + 61 * SEC]])) == [("REMINDER", 130.0, 0, 1)]
    assert h.timers("s1") == [T0 + 120 * SEC]


def test_clears_after_enough_readings_under_threshold():
    h = harness()
    h.feed("s1", [["s1", 120.0, T0], ["s1", 125.0, T0]])
    assert len(h.feed("s1", [["s1", 80.0, T0 + SEC]])) == 0, "one is not enough"
    assert events(h.feed("s1", [["s1", 100.0, T0 + 2 * SEC]])) == [("CLEAR", 100.0, 1, 1)]
    assert h.timers("s1") == [], "the timer is deleted"
    assert h.value_state("alert", "s1", app.Alert) is None
    assert h.list_state("recent", "s1", float) == [80.0, 100.0]
    assert len(h.advance_processing_time(120 * SEC)) == 0
    out = h.feed("s1", [["s1", 101.0, T0 + 3 * SEC]])
    assert events(out) == [("RAISE", 101.0, 0, 2)], "second raise of the day"


def test_sensors_are_independent():
    h = harness()
    h.feed("s1", [["s1", 120.0, T0]])
    assert events(h.feed("s2", [["s2", 120.0, T0]])) == [("RAISE", 120.0, 0, 1)]


def test_daily_counts_expire_after_a_day():
    h = harness()
    h.feed("s1", [["s1", 120.0, T0]])
    assert h.map_state("raised_per_day", "s1", str, int) == [(utc_date(T0), 1)]
    h.feed("s1", [["s1", 10.0, T0], ["s1", 10.0, T0]])
    h.set_processing_time(T0 + 24 * 3600 * SEC)
    assert h.map_state("raised_per_day", "s1", str, int) == []


def test_null_readings_are_skipped_and_null_times_use_processing_time():
    out = harness().feed("s1", [["s1", None, T0], ["s1", 120.0, None]])
    assert len(out) == 1 and out[0]["ts"] == T0


def test_state_has_the_rust_modules_shapes():
    h = harness()
    h.feed("s1", [["s1", 120.0, T0 + SEC]])
    expected = {"suppressed": 0, "timer": T0 + 60 * SEC, "last_reading": 120.0, "last_ts": T0 + SEC}
    assert cbor.loads(h.raw_state("alert", "s1")) == expected
    assert list(cbor.loads(h.raw_state("alert", "s1"))) == ["suppressed", "timer", "last_reading", "last_ts"]


def test_config_has_defaults_and_is_checked():
    Harness(app.AlertSuppression, SCHEMA, "sensor STRING")  # {} uses the defaults
    with pytest.raises(EddyError, match="clear_after >= 1"):
        Harness(app.AlertSuppression, SCHEMA, "sensor STRING", config={"clear_after": 0})
    with pytest.raises(EddyError, match="unknown field `treshold`"):
        Harness(app.AlertSuppression, SCHEMA, "sensor STRING", config={"treshold": 5})
