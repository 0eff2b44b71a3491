"""{{name}}: a running count and sum of amounts per user.

Input `user STRING, amount BIGINT`, keyed by `user`; outputs the user's new totals
`user STRING, count BIGINT, sum BIGINT` for every batch the user appears in.
"""

from dataclasses import dataclass

from eddy_guest import StatefulProcessor, export


@dataclass
class Totals:
    """The per-user totals kept in state."""

    count: int = 0
    sum: int = 0


class Processor(StatefulProcessor):
    def init(self, ctx):
        ctx.set_output_schema("user STRING, count BIGINT, sum BIGINT")
        self.totals = ctx.value_state("totals", Totals)

    def handle_input_rows(self, key, rows, timer_values, output):
        totals = self.totals.get(Totals())
        totals.count += len(rows)
        totals.sum += sum(amount for amount in rows.ints("amount") if amount is not None)
        self.totals.update(totals)
        output.append_row([key.str(0), totals.count, totals.sum])


Handler = export(Processor)
