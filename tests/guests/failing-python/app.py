"""A test processor that raises: a negative amount is an error (tests/tests/all/guest_languages.rs)."""

from eddy_guest import StatefulProcessor, export


def check_amount(user, amount):
    """Refuses a negative amount, deep enough in the stack to show in the traceback."""
    if amount is not None and amount < 0:
        raise ValueError(f"negative amount {amount} for {user}")


class Failing(StatefulProcessor):
    def init(self, ctx):
        ctx.set_output_schema("user STRING, amount BIGINT")

    def handle_input_rows(self, key, rows, timer_values, output):
        for amount in rows.ints("amount"):
            check_amount(key.str(0), amount)
            output.append_row([key.str(0), amount])


Handler = export(Failing)
