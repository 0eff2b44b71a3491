"""Harness tests of app.py (run: python -m pytest examples/running-count/python)."""

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "sdks" / "python"))  # the SDK of this repository

from eddy_guest import cbor  # noqa: E402
from eddy_guest.testing import Harness  # noqa: E402

_spec = importlib.util.spec_from_file_location("running_count_app", HERE / "app.py")
app = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(app)


def harness(**options):
    return Harness(app.RunningCount, "user STRING, amount BIGINT", "user STRING", output_mode="update", **options)


def test_keeps_totals_across_batches():
    h = harness()
    assert h.feed("alice", [["alice", 5], ["alice", 7]]).to_list() == [["alice", 2, 12]]
    assert h.feed("alice", [["alice", 1]]).to_list() == [["alice", 3, 13]]
    assert h.value_state("totals", "alice", app.Totals) == app.Totals(count=3, sum=13)


def test_totals_are_stored_like_the_rust_module_stores_them():
    h = harness()
    h.feed("alice", [["alice", 5], ["alice", 7]])
    # serde/ciborium: {"count": 2, "sum": 12}
    assert h.raw_state("totals", "alice") == cbor.dumps({"count": 2, "sum": 12})
    assert h.raw_state("totals", "alice").hex() == "a2" + "65" + b"count".hex() + "02" + "63" + b"sum".hex() + "0c"


def test_keys_are_independent():
    h = harness()
    h.feed("alice", [["alice", 5]])
    out = h.feed("bob", [["bob", 2], ["bob", 3]])
    assert out[0]["sum"] == 5
    assert h.value_state("totals", "alice", app.Totals) == app.Totals(1, 5)
    assert h.value_state("totals", "carol", app.Totals) is None


def test_null_amounts_count_but_do_not_sum():
    out = harness().feed("alice", [["alice", None], ["alice", 4]])
    assert (out[0]["count"], out[0]["sum"]) == (2, 4)


def test_sums_wrap_like_rusts_wrapping_add():
    out = harness().feed("alice", [["alice", (1 << 63) - 1], ["alice", 2]])
    assert out[0]["sum"] == -(1 << 63) + 1


def test_continues_from_initial_state():
    h = harness(initial_state_schema="user STRING, count BIGINT, sum BIGINT")
    h.initial_state("bob", [["bob", 10, 100], ["bob", 1, 1]])
    assert h.feed("bob", [["bob", 5]]).to_list() == [["bob", 12, 106]]
