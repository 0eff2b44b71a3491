"""A native test harness: run a processor under pytest, no WASM.

:class:`Harness` runs a :class:`StatefulProcessor` against an in-memory store with the
host's semantics: state and timers per key, TTL counted from each write in processing
time (a value whose expiry ≤ the processing time is invisible), map entries in byte
order of their encoded keys, timers deduplicated and firing in expiry order once their
clock reaches them — processing-time timers when the processing time does
(:meth:`Harness.advance_processing_time`), event-time timers when the watermark does
(:meth:`Harness.set_watermark`). A timer is removed before its handler runs. Like a
failed batch on the host, a handler call that raises leaves state and timers as they
were before it (the exception propagates to the test).

:meth:`Harness.run_batch` runs one micro-batch exactly as the host does (rows, then due
timers, all or nothing); the shared cases in `sdks/conformance/` check it against the host.
"""

from __future__ import annotations

import datetime
import json
from typing import Any, Optional, Sequence, Union

from . import cbor, log
from .context import OUTPUT_MODES, InitContext, QueryInfo
from .errors import EddyError
from .key import Key
from .log import LogRecord
from .output import batch
from .processor import Driver
from .rows import Rows
from .schema import DataType, Schema
from .state import decode
from .store import MemoryBackend, Store
from .times import micros
from .timers import ExpiredTimer, TimerValues

__all__ = ["Harness", "batch"]

# How the Rust SDK's harness encodes a key part (serde's externally tagged enum).
_VARIANTS = {
    DataType.BOOLEAN: "Boolean", DataType.INT64: "Int64", DataType.FLOAT64: "Float64",
    DataType.UTF8: "Utf8", DataType.BINARY: "Binary", DataType.TIMESTAMP: "Timestamp",
}  # fmt: skip


class Harness:
    """Runs one processor natively with in-memory state and controllable clocks.

    ``Harness(RunningCount, "user STRING, amount BIGINT", "user STRING")`` runs `init`;
    then ``h.feed("alice", [["alice", 5]])`` calls `handle_input_rows` and returns the
    output :class:`Rows` (``.to_list()`` for assertions).
    """

    def __init__(self, processor_class: type, input_schema: Union[str, Schema], key_schema: Union[str, Schema], *,
                 output_mode: str = "append", config: Union[None, str, dict] = None, processing_time: int = 0,
                 watermark: Optional[int] = None, initial_state_schema: Union[None, str, Schema] = None,
                 event_time_column: Optional[str] = None, query_info: Optional[QueryInfo] = None) -> None:
        if output_mode not in OUTPUT_MODES:
            raise EddyError(f"unknown output mode {output_mode!r}; use one of {', '.join(OUTPUT_MODES)}")
        config_json = config if isinstance(config, str) else json.dumps(config or {})
        self._memory = MemoryBackend()
        self._memory.now = processing_time
        store = Store(self._memory)
        self._key_schema = Schema.of(key_schema)
        ctx = InitContext(Schema.of(input_schema), self._key_schema, output_mode, config_json, store, event_time_column,
                          query_info)
        if initial_state_schema is not None:
            ctx.set_initial_state_schema(initial_state_schema)
        self.processing_time = processing_time
        self.watermark = watermark
        #: The batch id handlers see in `TimerValues.batch_id`; set it as the host's next
        #: batch would.
        self.batch_id = 0
        self._event_time_column = event_time_column
        self._ran_batch = False  # the first run_batch judges late rows by its own watermark
        log.capture_start()
        try:
            self._driver = Driver(processor_class, ctx)
        finally:
            self.logs: list[LogRecord] = log.capture_take()
        self._memory.ttls = {d.name: d.ttl for d in self._driver.spec.state}

    @property
    def processor(self) -> Any:
        """The processor under test."""
        return self._driver.processor

    def _key(self, key: Any) -> tuple[Key, bytes]:
        parts = list(key) if isinstance(key, (list, tuple, Key)) else [key]
        rows = batch(self._key_schema, [parts])
        values = rows.to_list()[0]
        encoded = [
            "Null" if v is None else {_VARIANTS[f.data_type]: v} for f, v in zip(self._key_schema, values)
        ]
        return Key(values, [f.data_type for f in self._key_schema]), cbor.dumps(encoded)

    def _call(self, key_bytes: bytes, snapshot: dict, call, *args) -> Any:
        self._memory.key = key_bytes
        self._memory.now = self.processing_time
        log.capture_start()
        try:
            return self._driver.keyed(call, *args)
        except BaseException:
            self._memory.restore(snapshot)
            raise
        finally:
            self.logs.extend(log.capture_take())

    def _timer_values(self) -> TimerValues:
        return TimerValues(self.processing_time, self.watermark, self.batch_id)

    def feed(self, key: Any, rows: Sequence[Any]) -> Rows:
        """Calls `handle_input_rows` for `key` (a value or list of key parts) with `rows`
        (lists in input-schema order, or dicts) and returns its output. As on the host,
        late rows (event time at or before the watermark) are dropped first unless the
        processor accepts late rows; when none is left the processor is not called."""
        rows = list(rows)
        on_time = self._on_time(rows, self.watermark)
        if rows and not on_time:
            return self._driver.output().finish()
        input_rows = batch(self._driver.ctx.input_schema, on_time)
        key_obj, key_bytes = self._key(key)
        output = self._driver.output()
        snapshot = self._memory.snapshot()
        self._call(key_bytes, snapshot, self.processor.handle_input_rows, key_obj, input_rows,
                   self._timer_values(), output)
        return output.finish()

    def _on_time(self, rows: list, watermark: Optional[int]) -> list:
        column = self._event_time_column
        if column is None or watermark is None or self._driver.spec.accepts_late_rows:
            return rows
        schema = self._driver.ctx.input_schema
        index = schema.index_of(column)
        kept = []
        for row in rows:
            at = row.get(column) if isinstance(row, dict) else row[index]
            if isinstance(at, datetime.datetime):
                at = micros(at - datetime.datetime(1970, 1, 1, tzinfo=at.tzinfo))
            if not (isinstance(at, int) and at <= watermark):
                kept.append(row)
        return kept

    def initial_state(self, key: Any, rows: Sequence[Any]) -> None:
        """Calls `handle_initial_state` for `key` with `rows` in the initial-state schema."""
        schema = self._driver.spec.initial_state_schema
        if schema is None:
            raise EddyError("no initial-state schema: pass initial_state_schema=... to Harness to feed initial state")
        state_rows = batch(schema, list(rows))
        key_obj, key_bytes = self._key(key)
        snapshot = self._memory.snapshot()
        self._call(key_bytes, snapshot, self.processor.handle_initial_state, key_obj, state_rows, self._timer_values())

    def advance_processing_time(self, by: Union[int, datetime.timedelta]) -> Rows:
        """Moves the processing time forward by `by` (µs or a timedelta) and fires the
        processing-time timers it reached; returns their output."""
        return self.set_processing_time(self.processing_time + micros(by))

    def set_processing_time(self, at: int) -> Rows:
        """Sets the processing time (it never goes back) and fires the processing-time
        timers with expiry ≤ `at`, in expiry order; returns their output."""
        if at < self.processing_time:
            raise EddyError(f"processing time cannot go back from {self.processing_time} to {at}")
        self.processing_time = at
        self._memory.now = at
        return self._fire("processing-time", at)

    def set_watermark(self, at: int) -> Rows:
        """Sets the watermark (it never goes back) and fires the event-time timers with
        expiry ≤ `at`, in expiry order; returns their output."""
        if self.watermark is not None and at < self.watermark:
            raise EddyError(f"the watermark cannot go back from {self.watermark} to {at}")
        self.watermark = at
        return self._fire("event-time", at)

    def _fire(self, mode: str, clock: int) -> Rows:
        output = self._driver.output()
        self._fire_into(mode, clock, self._memory.snapshot(), output)
        return output.finish()

    def _fire_into(self, mode: str, clock: Optional[int], snapshot: dict, output) -> None:
        if self._driver.spec.time_mode != mode or clock is None:
            return
        for expiry, key_bytes in self._memory.due_timers(clock):
            if not self._memory.take_timer(expiry, key_bytes):
                continue  # deleted by an earlier handler
            parts = [None if p == "Null" else next(iter(p.values())) for p in cbor.loads(key_bytes)]
            key = Key(parts, [f.data_type for f in self._key_schema])
            self._call(key_bytes, snapshot, self.processor.handle_expired_timer, key, self._timer_values(),
                       ExpiredTimer(expiry), output)

    def run_batch(self, rows_by_key: Any, *, processing_time: int, watermark: Optional[int] = None) -> Rows:
        """Runs one micro-batch as the host does, at `processing_time` with `watermark`
        (neither goes back), and returns its output. `rows_by_key` maps each key (a
        value or list of key parts) to its rows (a dict, or a list of (key, rows)).

        Each key's rows go to one `handle_input_rows` call — late rows dropped first,
        judged by the previous batch's watermark (the first batch's own), unless the
        processor accepts late rows; a key left without rows is not called — then every
        timer due at the batch's clock (the processing time, or the watermark for
        event-time timers) fires, in expiry order. A timer a handler registers that is
        already due fires in the next batch. Like the host, a batch with a failing call
        keeps nothing: state, timers, clocks and `batch_id` stay as they were (the
        exception propagates). `batch_id` counts the batches that went through."""
        if processing_time < self.processing_time:
            raise EddyError(f"processing time cannot go back from {self.processing_time} to {processing_time}")
        if self.watermark is not None and (watermark is None or watermark < self.watermark):
            raise EddyError(f"the watermark cannot go back from {self.watermark} to {watermark}")
        late_rows_watermark = self.watermark if self._ran_batch else watermark
        clocks = (self.processing_time, self.watermark)
        self.processing_time, self.watermark = processing_time, watermark
        self._memory.now = processing_time
        snapshot = self._memory.snapshot()
        try:
            output = self._driver.output()
            pairs = rows_by_key.items() if isinstance(rows_by_key, dict) else rows_by_key
            for key, rows in pairs:
                on_time = self._on_time(list(rows), late_rows_watermark)
                if not on_time:
                    continue
                input_rows = batch(self._driver.ctx.input_schema, on_time)
                key_obj, key_bytes = self._key(key)
                self._call(key_bytes, snapshot, self.processor.handle_input_rows, key_obj, input_rows,
                           self._timer_values(), output)
            clock = watermark if self._driver.spec.time_mode == "event-time" else processing_time
            self._fire_into(self._driver.spec.time_mode, clock, snapshot, output)
        except BaseException:
            self._memory.restore(snapshot)
            self.processing_time, self.watermark = clocks
            self._memory.now = clocks[0]
            raise
        self.batch_id += 1
        self._ran_batch = True
        return output.finish()

    def value_state(self, name: str, key: Any, type: Any = None) -> Any:
        """`key`'s live value of the value state variable `name`, decoded as `type`."""
        data = self._memory.value_get(name, self._key(key)[1])
        return None if data is None else decode(name, data, type)

    def list_state(self, name: str, key: Any, type: Any = None) -> list:
        """`key`'s live elements of the list state variable `name`, oldest first."""
        return [decode(name, d, type) for d in self._memory.list_get(name, self._key(key)[1])]

    def map_state(self, name: str, key: Any, key_type: Any = None, value_type: Any = None) -> list:
        """`key`'s live entries of the map state variable `name` as (key, value), in key order."""
        entries = self._memory.map_entries(name, self._key(key)[1])
        return [(decode(name, k, key_type), decode(name, v, value_type)) for k, v in entries]

    def raw_state(self, name: str, key: Any) -> Optional[bytes]:
        """`key`'s live value of the value state variable `name` as stored (CBOR bytes)."""
        return self._memory.value_get(name, self._key(key)[1])

    def timers(self, key: Any) -> list:
        """`key`'s registered timers, earliest first."""
        return self._memory.timer_list(self._key(key)[1])

    def close(self) -> None:
        """Calls the processor's `close`."""
        self.processor.close()
