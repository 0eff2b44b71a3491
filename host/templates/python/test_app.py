"""Unit tests of app.py, natively (no WebAssembly): `python -m pytest`."""

from app import Processor, Totals
from eddy_guest.testing import Harness


def test_totals_add_up_across_batches():
    harness = Harness(Processor, "user STRING, amount BIGINT", "user STRING", output_mode="update")
    harness.feed("alice", [["alice", 5], ["alice", 7]])
    assert harness.feed("alice", [["alice", 1], ["alice", None]]).to_list() == [["alice", 4, 13]]
    assert harness.value_state("totals", "alice", Totals) == Totals(count=4, sum=13)
