"""The base class processor authors extend, and the driver that runs it."""

from __future__ import annotations

from typing import Any

from .context import InitContext
from .errors import EddyError
from .key import Key
from .output import Output
from .rows import Rows
from .timers import ExpiredTimer, TimerValues


class StatefulProcessor:
    """Per-key stateful logic, like Spark's `StatefulProcessor` in `transformWithState`.

    The host creates one instance (with no arguments) and calls `init` once, then calls
    the handlers once per key per batch, once per expired timer and once per key with
    initial state. State and timers are scoped to the key of the current call. Raising
    any exception from a handler fails the batch: the host commits none of it.
    """

    def init(self, ctx: InitContext) -> None:
        """Reads the config, declares state (keep the handles on `self`), the output
        schema and the time mode."""

    def handle_input_rows(self, key: Key, rows: Rows, timer_values: TimerValues, output: Output) -> None:
        """Handles all of one key's new rows of a batch, appending result rows to `output`."""
        raise EddyError(f"{type(self).__name__} does not implement handle_input_rows")

    def handle_expired_timer(self, key: Key, timer_values: TimerValues, timer: ExpiredTimer, output: Output) -> None:
        """Handles one of the key's expired timers (they fire in expiry order)."""
        raise EddyError(
            f"timer {timer.expiry_time} of key {key} expired but {type(self).__name__} does not "
            "implement handle_expired_timer"
        )

    def handle_initial_state(self, key: Key, rows: Rows, timer_values: TimerValues) -> None:
        """Loads one key's initial state before the first batch."""
        raise EddyError(
            f"the query has initial state (key {key}) but {type(self).__name__} does not implement "
            "handle_initial_state"
        )

    def close(self) -> None:
        """Called once when the operator shuts down."""


class Driver:
    """A processor instance together with what its `init` declared."""

    def __init__(self, cls: type, ctx: InitContext) -> None:
        if not (isinstance(cls, type) and issubclass(cls, StatefulProcessor)):
            raise EddyError(f"{cls!r} is not a subclass of eddy_guest.StatefulProcessor")
        self.processor: Any = cls()
        self.processor.init(ctx)
        self.ctx = ctx
        self.spec = ctx.spec
        self.store = ctx._store

    def output(self) -> Output:
        return Output(self.spec.output_schema)

    def keyed(self, call, *args) -> Any:
        """Runs `call(*args)` with state and timers usable."""
        self.store.active = True
        try:
            return call(*args)
        finally:
            self.store.active = False
