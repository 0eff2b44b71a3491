"""The component glue: the `Handler` class that componentize-py's generated bindings
call for the `eddy:processor` world's exported `handler` interface.

An app module makes its processor the component's with one line::

    Handler = eddy_guest.export(MyProcessor)

The WIT bindings (`wit_world`) only exist inside a component; natively, `export` still
returns the class (so the app module imports under pytest) but it is never called.
"""

from __future__ import annotations

import itertools
import sys
from typing import Any, Optional

from . import log
from .context import InitContext, QueryInfo
from .errors import EddyError, describe
from .key import Key
from .processor import Driver, StatefulProcessor
from .rows import ColumnData, Rows
from .schema import DataType, Field, Schema
from .store import HostBackend, Store
from .timers import ExpiredTimer, TimerValues

IN_COMPONENT = sys.platform == "wasi"

_driver: Optional[Driver] = None

#: Makes the state backend of a new instance (tests replace it with a memory backend).
backend_factory: Any = HostBackend


def _schema(fields: Any, what: str) -> Schema:
    try:
        return Schema([Field(f.name, DataType[f.data_type.name], f.nullable) for f in fields])
    except EddyError as e:
        raise EddyError(f"the host's {what}: {e}") from None


def _spec_to_wit(spec: Any) -> Any:
    from wit_world.imports import types as wit

    return wit.ProcessorSpec(
        state=[wit.StateDeclaration(d.name, wit.StateKind[d.kind.upper()], d.ttl) for d in spec.state],
        output_schema=[wit.Field(f.name, wit.DataType[f.data_type.name], f.nullable) for f in spec.output_schema],
        time_mode=wit.TimeMode[spec.time_mode.upper().replace("-", "_")],
        accepts_late_rows=spec.accepts_late_rows,
        deleted_state=list(spec.deleted_state),
    )


def _key(parts: list) -> Key:
    values, types = [], []
    for part in parts:
        name = type(part).__name__.split("_", 1)[1].upper()  # Scalar_Utf8 -> UTF8
        values.append(None if name == "NULL" else part.value)
        types.append(None if name == "NULL" else DataType[name])
    return Key(values, types)


def _columns(batch: Any, schema: Schema) -> list:
    """A WIT row batch's columns as (data type, values or (data, offsets), validity),
    checked once for every key of a call."""
    columns = []
    for field, column in zip(schema, batch.columns):
        data_type = DataType[type(column.values).__name__.split("_", 1)[1].upper()]
        value = column.values.value
        if data_type in (DataType.UTF8, DataType.BINARY):
            offsets = value.offsets
            if len(offsets) != batch.num_rows + 1 or (offsets and offsets[-1] > len(value.data)):
                raise EddyError(f"column `{field.name}`: {len(offsets)} offsets for {batch.num_rows} rows")
            value = (value.data, offsets)
        columns.append((data_type, value, column.validity))
    return columns


def _rows(columns: list, schema: Schema, num_rows: int, start: int = 0, end: Optional[int] = None) -> Rows:
    """Rows `start..end` (all by default) of a batch's `columns` (from `_columns`)."""
    end = num_rows if end is None else end
    whole = start == 0 and end == num_rows
    out = []
    for data_type, value, validity in columns:
        if not whole and validity is not None:
            validity = _bits(validity, start, end)
        if data_type is DataType.UTF8 or data_type is DataType.BINARY:
            data, offsets = value
            if not whole:
                base = offsets[start]
                data, offsets = data[base:offsets[end]], [offset - base for offset in offsets[start:end + 1]]
            out.append(ColumnData(data_type, None, validity, varlen=(data, offsets)))
        else:
            out.append(ColumnData(data_type, value if whole else value[start:end], validity))
    return Rows(schema, end - start, out)


def _bits(validity: bytes, start: int, end: int) -> bytes:
    """The validity bits of rows `start..end`, starting at bit 0."""
    out = bytearray((end - start + 7) // 8)
    for i, row in enumerate(range(start, end)):
        if (validity[row >> 3] >> (row & 7)) & 1:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def _rows_to_wit(rows: Rows) -> Any:
    from wit_world.imports import types as wit

    columns = []
    for field, data in zip(rows.schema, rows._columns):
        t = field.data_type
        if t is DataType.UTF8 or t is DataType.BINARY:
            parts = [v.encode("utf-8") for v in data.values] if t is DataType.UTF8 else data.values
            offsets = [0, *itertools.accumulate(len(p) for p in parts)]
            var = wit.VarLen(b"".join(parts), offsets)
            values = wit.ColumnValues_Utf8(var) if t is DataType.UTF8 else wit.ColumnValues_Binary(var)
        else:
            variant = {
                DataType.BOOLEAN: wit.ColumnValues_Boolean, DataType.INT64: wit.ColumnValues_Int64,
                DataType.FLOAT64: wit.ColumnValues_Float64, DataType.TIMESTAMP: wit.ColumnValues_Timestamp,
            }[t]  # fmt: skip
            values = variant(data.values)
        columns.append(wit.Column(values, data.validity))
    return wit.RowBatch(len(rows), columns)


def _timer_values(tv: Any) -> TimerValues:
    return TimerValues(tv.processing_time, tv.watermark, tv.batch_id)


def _fail(error: BaseException) -> Any:
    from componentize_py_types import Err

    return Err(describe(error))


def _driver_or_fail() -> Driver:
    if _driver is None:
        raise EddyError("the processor is not initialized: the host must call init first")
    return _driver


class _Handler:
    """The `handler` export; every method turns an exception into the WIT error."""

    processor_class: type = StatefulProcessor

    def init(self, context: Any) -> Any:
        global _driver
        try:
            store = Store(backend_factory())
            ctx = InitContext(
                _schema(context.input_schema, "input schema"),
                _schema(context.key_schema, "key schema"),
                context.output_mode.name.lower(),
                context.config,
                store,
                context.event_time_column,
                QueryInfo(context.query.id, context.query.run_id),
            )
            if context.initial_state_schema is not None:
                ctx.set_initial_state_schema(_schema(context.initial_state_schema, "initial-state schema"))
            _driver = Driver(self.processor_class, ctx)
            return _spec_to_wit(_driver.spec)
        except BaseException as e:
            raise _fail(e) from None

    def handle_input_rows(self, keys: Any, rows: Any, timer_values: Any) -> Any:
        from wit_world.imports import types as wit

        try:
            driver = _driver_or_fail()
            held = sum(k.num_rows for k in keys)
            if held != rows.num_rows:
                raise EddyError(f"the host handed over {rows.num_rows} rows for keys that hold {held}")
            tv = _timer_values(timer_values)
            columns = _columns(rows, driver.ctx.input_schema)
            output = driver.output()
            ends = []
            start = 0
            for index, key_rows in enumerate(keys):
                if output._call_is_full():
                    break  # the host hands the remaining keys over in another call
                end = start + key_rows.num_rows
                key = _key(key_rows.key)
                driver.store.backend.select_key(index, key)
                batch = _rows(columns, driver.ctx.input_schema, rows.num_rows, start, end)
                driver.keyed(driver.processor.handle_input_rows, key, batch, tv, output)
                ends.append(output._end_handler())
                start = end
            return wit.Output(_rows_to_wit(output.finish()), ends)
        except BaseException as e:
            raise _fail(e) from None

    def handle_expired_timers(self, keys: Any, timers: Any, timer_values: Any) -> Any:
        from wit_world.imports import types as wit

        try:
            driver = _driver_or_fail()
            tv = _timer_values(timer_values)
            call_keys = [_key(key) for key in keys]
            output = driver.output()
            ends = []
            for index, timer in enumerate(timers):
                if output._call_is_full():
                    break  # the host hands the remaining timers over in another call
                key = call_keys[timer.key_index]
                if driver.store.backend.take_timer_of_call(index, key, timer.expiry_time):
                    expired = ExpiredTimer(timer.expiry_time)
                    driver.keyed(driver.processor.handle_expired_timer, key, tv, expired, output)
                ends.append(output._end_handler())
            return wit.Output(_rows_to_wit(output.finish()), ends)
        except BaseException as e:
            raise _fail(e) from None

    def handle_initial_state(self, key: Any, initial_state: Any, timer_values: Any) -> None:
        try:
            driver = _driver_or_fail()
            schema = driver.spec.initial_state_schema
            if schema is None:
                raise EddyError("initial-state rows arrived but no initial-state schema is known")
            batch = _rows(_columns(initial_state, schema), schema, initial_state.num_rows)
            driver.keyed(driver.processor.handle_initial_state, _key(key), batch, _timer_values(timer_values))
        except BaseException as e:
            raise _fail(e) from None

    def close(self) -> None:
        global _driver
        driver, _driver = _driver, None
        if driver is not None:
            try:
                driver.processor.close()
            except BaseException as e:  # close cannot fail on the host; report it instead
                log.error(f"close failed: {describe(e)}")


def _host_log(level: str, message: str) -> None:
    from wit_world.imports import logging

    logging.log(logging.Level[level.upper()], message)


def export(processor_class: type) -> type:
    """Makes `processor_class` (a :class:`StatefulProcessor` subclass) the component's
    processor; assign the result to `Handler` in the app module:
    ``Handler = export(MyProcessor)``."""
    if not (isinstance(processor_class, type) and issubclass(processor_class, StatefulProcessor)):
        raise EddyError(f"export() takes a subclass of eddy_guest.StatefulProcessor, not {processor_class!r}")
    if IN_COMPONENT:
        import wit_world.imports.logging  # noqa: F401  (loaded now, into the snapshot)
        import wit_world.imports.scope  # noqa: F401
        import wit_world.imports.state  # noqa: F401
        import wit_world.imports.timers  # noqa: F401
        import wit_world.imports.types  # noqa: F401

        log.set_sink(_host_log)
    return type("Handler", (_Handler,), {"processor_class": processor_class, "__module__": __name__})
