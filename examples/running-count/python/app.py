"""A running count and sum per user (the Python port of ../src/lib.rs).

Input `user STRING, amount BIGINT`, keyed by `user`. Per key a value state `totals`
holds `{count, sum}` (the same CBOR as the Rust module's, so either can continue the
other's checkpoint); every batch emits the key's new totals as one row
`user STRING, count BIGINT, sum BIGINT` (meant for the `update` output mode). Rows
with a null amount count but add nothing to the sum. A query may start from initial
state `user STRING, count BIGINT, sum BIGINT`.
"""

from dataclasses import dataclass

from eddy_guest import StatefulProcessor, export

_I64 = 1 << 64


def _wrap(n: int) -> int:
    """`n` wrapped to a signed 64-bit integer, like Rust's `wrapping_add`."""
    return (n + (1 << 63)) % _I64 - (1 << 63)


@dataclass
class Totals:
    """The per-user totals kept in state."""

    count: int = 0
    sum: int = 0


class RunningCount(StatefulProcessor):
    def init(self, ctx):
        ctx.set_output_schema("user STRING, count BIGINT, sum BIGINT")
        self.totals = ctx.value_state("totals", Totals)

    def handle_input_rows(self, key, rows, timer_values, output):
        totals = self.totals.get(Totals())
        amounts = rows.ints("amount")
        totals.count += len(rows)
        totals.sum = _wrap(totals.sum + sum(a for a in amounts if a is not None))
        self.totals.update(totals)
        output.append_row([key.str(0), totals.count, totals.sum])

    def handle_initial_state(self, key, rows, timer_values):
        """Seeds a user's totals from initial-state rows `user, count, sum` (several rows add up)."""
        totals = self.totals.get(Totals())
        totals.count += sum(c for c in rows.ints("count") if c is not None)
        totals.sum += sum(s for s in rows.ints("sum") if s is not None)
        self.totals.update(totals)


Handler = export(RunningCount)
