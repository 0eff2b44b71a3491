"""Building batches: the rows a handler outputs, validated against the output schema."""

from __future__ import annotations

import datetime
from typing import Any, Sequence, Union

from .errors import EddyError
from .rows import ColumnData, Rows
from .schema import DataType, Field, Schema
from .times import from_datetime

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
#: The output size past which a call returns before its next key or timer.
CALL_OUTPUT_BYTES = 8 << 20
_PLACEHOLDER = {
    DataType.BOOLEAN: False, DataType.INT64: 0, DataType.FLOAT64: 0.0,
    DataType.UTF8: "", DataType.BINARY: b"", DataType.TIMESTAMP: 0,
}  # fmt: skip


def _convert(field: Field, value: Any) -> Any:
    """`value` as stored in a column of `field`; fails naming the column and type."""
    t = field.data_type
    ok = False
    if t is DataType.INT64 or t is DataType.TIMESTAMP:
        if t is DataType.TIMESTAMP and isinstance(value, datetime.datetime):
            value, ok = from_datetime(value), True
        else:
            ok = isinstance(value, int) and not isinstance(value, bool)
        if ok and not _I64_MIN <= value <= _I64_MAX:
            raise EddyError(f"column `{field}` cannot hold {value}: it does not fit in 64 bits")
    elif t is DataType.FLOAT64:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif t is DataType.UTF8:
        ok = isinstance(value, str)
    elif t is DataType.BOOLEAN:
        ok = isinstance(value, bool)
    elif t is DataType.BINARY:
        ok = isinstance(value, (bytes, bytearray, memoryview))
        value = bytes(value) if ok else value
    if not ok:
        wanted = {
            DataType.INT64: "an int", DataType.TIMESTAMP: "an int (µs since the epoch) or a datetime",
            DataType.FLOAT64: "a float", DataType.UTF8: "a str", DataType.BOOLEAN: "a bool",
            DataType.BINARY: "bytes",
        }[t]  # fmt: skip
        raise EddyError(f"column `{field}` needs {wanted}, got {type(value).__name__} {value!r:.80}")
    return value


class BatchBuilder:
    """Rows appended one by one into columns of `schema`."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self._values: list[list] = [[] for _ in schema]
        self._nulls: list[list[int]] = [[] for _ in schema]
        self._len = 0
        #: About the bytes the rows hold: a string's or bytes' length, 8 per other value.
        self.bytes = 0

    def __len__(self) -> int:
        return self._len

    def append(self, values: Sequence[Any]) -> None:
        """Appends one row in schema order; appends nothing when a value does not fit."""
        if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
            raise EddyError(f"a row is a list of values in schema order ({self.schema}), not {type(values).__name__}")
        if len(values) != len(self.schema):
            raise EddyError(f"row has {len(values)} values but the schema ({self.schema}) has {len(self.schema)} columns")
        converted = []
        for field, value in zip(self.schema, values):
            if value is None:
                if not field.nullable:
                    raise EddyError(f"column `{field}` cannot hold None")
                converted.append(None)
            else:
                converted.append(_convert(field, value))
        row = self._len
        for i, (field, value) in enumerate(zip(self.schema, converted)):
            if value is None:
                self._nulls[i].append(row)
                value = _PLACEHOLDER[field.data_type]
            self._values[i].append(value)
            self.bytes += len(value) if isinstance(value, (str, bytes)) else 8
        self._len += 1

    def finish(self) -> Rows:
        columns = []
        for field, values, nulls in zip(self.schema, self._values, self._nulls):
            validity = None
            if nulls:
                bits = bytearray(b"\xff" * ((self._len + 7) // 8))
                if self._len % 8:
                    bits[-1] = (1 << (self._len % 8)) - 1
                for row in nulls:
                    bits[row >> 3] &= ~(1 << (row & 7)) & 0xFF
                validity = bytes(bits)
            columns.append(ColumnData(field.data_type, values, validity))
        return Rows(self.schema, self._len, columns)


def batch(schema: Union[str, Schema], rows: Sequence[Any]) -> Rows:
    """A batch in `schema` made of `rows` (each a list in schema order, or a dict by name)."""
    builder = BatchBuilder(Schema.of(schema))
    for i, row in enumerate(rows):
        try:
            builder.append(_ordered(builder.schema, row) if isinstance(row, dict) else row)
        except EddyError as e:
            raise EddyError(f"row {i}: {e}") from None
    return builder.finish()


def _ordered(schema: Schema, values: dict) -> list:
    unknown = [name for name in values if name not in schema.names]
    if unknown:
        raise EddyError(f"no column `{unknown[0]}` in schema ({schema})")
    missing = [f for f in schema if not f.nullable and f.name not in values]
    if missing:
        raise EddyError(f"column `{missing[0]}` was not set")
    return [values.get(name) for name in schema.names]


class Output:
    """The rows a handler outputs, in the output schema declared in `init`.

    ``output.append_row(["alice", 2, 12])`` appends values in schema order;
    ``output.row(user="bob", count=1, sum=5)`` sets columns by name (unset nullable
    columns are null). A row that does not fit the schema raises :class:`EddyError`
    naming the column and the expected type, and nothing of it is appended.
    """

    def __init__(self, schema: Schema) -> None:
        self._builder = BatchBuilder(schema)
        self._start = 0  # where the current handler's rows start (one output serves a call)

    @property
    def schema(self) -> Schema:
        return self._builder.schema

    def __len__(self) -> int:
        """How many rows this handler appended."""
        return len(self._builder) - self._start

    def _call_is_full(self) -> bool:
        """Whether the call's rows passed 8 MiB: it returns before its next key (the host
        hands the rest over in another call)."""
        return self._builder.bytes >= CALL_OUTPUT_BYTES

    def _end_handler(self) -> int:
        """Ends the current handler's rows; returns the end of the rows so far."""
        self._start = len(self._builder)
        return self._start

    def append_row(self, values: Sequence[Any]) -> None:
        """Appends a row of values in output-schema order."""
        try:
            self._builder.append(values)
        except EddyError as e:
            raise EddyError(f"cannot append an output row: {e}; the output schema is declared in init with set_output_schema") from None

    def row(self, **columns: Any) -> None:
        """Appends a row given by column name."""
        try:
            self._builder.append(_ordered(self.schema, columns))
        except EddyError as e:
            raise EddyError(f"cannot append an output row: {e}; the output schema is declared in init with set_output_schema") from None

    def finish(self) -> Rows:
        return self._builder.finish()
