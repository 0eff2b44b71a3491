"""The native harness beyond the shared cases (`sdks/conformance/`, played by
test_conformance.py: state, TTL, map order, timers, late rows, rollback): clocks moved
by hand, timers registered while firing, encodings, initial state, logs and misuse."""

from dataclasses import dataclass
from datetime import timedelta

import pytest

from eddy_guest import EddyError, StatefulProcessor, log
from eddy_guest.testing import Harness

SEC = 1_000_000


@dataclass
class Seen:
    count: int
    last: str


class Probe(StatefulProcessor):
    """Records what it sees."""

    def init(self, ctx):
        self.mode = ctx.config.get("mode", "processing-time")
        ctx.set_time_mode(self.mode)
        ctx.set_output_schema("k STRING, what STRING, at BIGINT")
        self.seen = ctx.value_state("seen", Seen)
        self.words = ctx.list_state("words", str, ttl=timedelta(seconds=10))
        self.by_word = ctx.map_state("by_word", str, int, ttl=5 * SEC)
        self.timers = ctx.timers()
        log.info("init done")

    def handle_input_rows(self, key, rows, timer_values, output):
        seen = self.seen.get(Seen(0, ""))
        for word, at in zip(rows.strs("word"), rows.ints("at")):
            seen = Seen(seen.count + 1, word)
            self.words.append(word)
            self.by_word.update(word, self.by_word.get(word, 0) + 1)
            if at is not None:
                self.timers.register(at)
        self.seen.update(seen)
        log.warn(f"{key.str()} saw {len(rows)}")
        output.append_row([key.str(), "rows", len(rows)])

    def handle_expired_timer(self, key, timer_values, timer, output):
        output.append_row([key.str(), f"timer {self.timers.list()}", timer.expiry_time])
        if timer.expiry_time == 5 * SEC:
            self.timers.register(7 * SEC)  # a handler may register again

    def handle_initial_state(self, key, rows, timer_values):
        self.seen.update(Seen(sum(rows.ints("n")), "initial"))


def probe(**options):
    return Harness(Probe, "k STRING, word STRING, at BIGINT", "k STRING", **options)


def test_state_is_per_key_and_readable():
    h = probe()
    h.feed("a", [["a", "x", None], ["a", "y", None]])
    h.feed("b", [["b", "z", None]])
    assert h.value_state("seen", "a", Seen) == Seen(2, "y")
    assert h.list_state("words", "b", str) == ["z"]
    assert h.value_state("seen", "c", Seen) is None
    assert h.raw_state("seen", "b") == bytes.fromhex("a2 65") + b"count" + b"\x01" + b"\x64last" + b"\x61z"


def test_timers_are_deduplicated_fire_in_expiry_order_and_are_removed_first():
    h = probe()
    h.feed("b", [["b", "x", 5 * SEC], ["b", "x", 5 * SEC]])
    h.feed("a", [["a", "x", 5 * SEC], ["a", "y", 3 * SEC], ["a", "z", 9 * SEC]])
    assert h.timers("a") == [3 * SEC, 5 * SEC, 9 * SEC] and h.timers("b") == [5 * SEC]
    out = h.set_processing_time(8 * SEC)
    assert out.to_list() == [
        ["a", f"timer {[5 * SEC, 9 * SEC]}", 3 * SEC],
        ["a", f"timer {[9 * SEC]}", 5 * SEC],
        ["b", "timer []", 5 * SEC],
    ]
    # Timers registered while firing (7 s) wait for the next time the clock moves, as in the Rust harness.
    assert h.timers("a") == [7 * SEC, 9 * SEC] and h.timers("b") == [7 * SEC]
    assert [r[2] for r in h.advance_processing_time(0).to_list()] == [7 * SEC, 7 * SEC]
    assert h.set_watermark(100 * SEC).to_list() == [], "event-time clock: no processing-time timer fires"


def test_event_time_timers_fire_on_the_watermark_and_late_rows_are_dropped():
    h = Harness(Probe, "k STRING, word STRING, at BIGINT", "k STRING", config={"mode": "event-time"},
                watermark=10, event_time_column="at")
    assert h.feed("a", [["a", "late", 10]]).to_list() == [], "all rows late: no call"
    h.feed("a", [["a", "late", 5], ["a", "ok", 20]])
    assert h.list_state("words", "a", str) == ["ok"]
    assert h.advance_processing_time(100).to_list() == []
    assert h.set_watermark(25).to_list() == [["a", "timer []", 20]]
    with pytest.raises(EddyError, match="the watermark cannot go back from 25 to 24"):
        h.set_watermark(24)


def test_initial_state_and_logs():
    h = probe(initial_state_schema="k STRING, n BIGINT")
    h.initial_state("a", [["a", 2], ["a", 3]])
    assert h.value_state("seen", "a", Seen) == Seen(5, "initial")
    h.feed("a", [["a", "x", None]])
    assert [(r.level, r.message) for r in h.logs] == [("info", "init done"), ("warn", "a saw 1")]
    with pytest.raises(EddyError, match="no initial-state schema"):
        probe().initial_state("a", [])


def test_sdk_misuse_is_reported_clearly():
    class Misuse(StatefulProcessor):
        def init(self, ctx):
            self.v = ctx.value_state("v", int)
            self.v.get()  # no key yet

    with pytest.raises(EddyError, match="state variable `v` can only be used inside handle_input_rows"):
        Harness(Misuse, "n BIGINT", "n BIGINT")

    class NoTimeMode(StatefulProcessor):
        def init(self, ctx):
            ctx.set_output_schema("n BIGINT")
            self.timers = ctx.timers()

        def handle_input_rows(self, key, rows, timer_values, output):
            self.timers.register(1)

    with pytest.raises(EddyError, match="timers need a time mode"):
        Harness(NoTimeMode, "n BIGINT", "n BIGINT").feed(1, [[1]])

    class Twice(StatefulProcessor):
        def init(self, ctx):
            ctx.value_state("v", int)
            ctx.list_state("v", int)

    with pytest.raises(EddyError, match="state variable `v` is declared twice"):
        Harness(Twice, "n BIGINT", "n BIGINT")

    class ZeroTtl(StatefulProcessor):
        def init(self, ctx):
            ctx.value_state("v", int, ttl=timedelta(0))

    with pytest.raises(EddyError, match="has a TTL of .*give a positive duration"):
        Harness(ZeroTtl, "n BIGINT", "n BIGINT")

    class WrongType(StatefulProcessor):
        def init(self, ctx):
            ctx.set_output_schema("n BIGINT")
            self.v = ctx.value_state("v", int)

        def handle_input_rows(self, key, rows, timer_values, output):
            self.v.update("three")

    with pytest.raises(EddyError, match="state `v`: cannot store 'three': expected int, got str"):
        Harness(WrongType, "n BIGINT", "n BIGINT").feed(1, [[1]])


def test_clocks_never_go_back_and_keys_are_checked():
    h = probe(processing_time=10)
    with pytest.raises(EddyError, match="processing time cannot go back from 10 to 9"):
        h.set_processing_time(9)
    with pytest.raises(EddyError, match="column `k STRING` needs a str, got int"):
        h.feed(3, [])
