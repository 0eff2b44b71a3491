"""Read access to a columnar batch of rows: by column (lists) or by row (views)."""

from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence, Union

from .errors import EddyError
from .schema import DataType, Field, Schema

ColumnRef = Union[str, int]


class ColumnData:
    """One column's storage: values (a placeholder in null slots), or for STRING and
    BINARY the concatenated bytes with offsets (decoded on first use), plus an optional
    Arrow-layout validity bitmap (bit i%8 of byte i//8; 1 = present)."""

    __slots__ = ("data_type", "_values", "_varlen", "validity", "length")

    def __init__(self, data_type: DataType, values: Optional[list], validity: Optional[bytes],
                 varlen: Optional[tuple] = None, length: Optional[int] = None) -> None:
        self.data_type = data_type
        self._values = values
        self._varlen = varlen
        self.validity = validity
        self.length = len(values) if values is not None else len(varlen[1]) - 1  # type: ignore[index]

    @property
    def values(self) -> list:
        """Every slot's value (placeholders for nulls)."""
        if self._values is None:
            data, offsets = self._varlen  # type: ignore[misc]
            if self.data_type is DataType.UTF8:
                text = bytes(data).decode("utf-8")
                if len(text) == len(data):  # ASCII: byte offsets are char offsets
                    self._values = [text[offsets[i]:offsets[i + 1]] for i in range(self.length)]
                else:
                    self._values = [bytes(data[offsets[i]:offsets[i + 1]]).decode("utf-8") for i in range(self.length)]
            else:
                self._values = [bytes(data[offsets[i]:offsets[i + 1]]) for i in range(self.length)]
        return self._values

    def is_null(self, row: int) -> bool:
        return self.validity is not None and not (self.validity[row >> 3] >> (row & 7)) & 1

    def has_nulls(self) -> bool:
        return self.validity is not None and any(self.is_null(i) for i in range(self.length))

    def with_nulls(self) -> list:
        """Values with None in null rows (the stored list itself when none is null)."""
        values = self.values
        if not self.has_nulls():
            return values
        return [None if self.is_null(i) else v for i, v in enumerate(values)]


class Column(Sequence[Any]):
    """One column of a :class:`Rows` batch: a sequence with None for null rows."""

    def __init__(self, field: Field, data: ColumnData) -> None:
        self.field = field
        self._data = data

    @property
    def name(self) -> str:
        return self.field.name

    @property
    def data_type(self) -> DataType:
        return self.field.data_type

    def __len__(self) -> int:
        return self._data.length

    def __getitem__(self, row):  # type: ignore[override]
        if isinstance(row, slice):
            return self.to_list()[row]
        if row < 0:
            row += len(self)
        if not 0 <= row < len(self):
            raise IndexError(f"row {row} is out of range for column `{self.name}` of {len(self)} rows")
        return None if self._data.is_null(row) else self._data.values[row]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.to_list())

    def is_null(self, row: int) -> bool:
        """Whether row `row` is null."""
        return self._data.is_null(row)

    @property
    def null_count(self) -> int:
        """How many rows are null."""
        return sum(1 for i in range(len(self)) if self._data.is_null(i)) if self._data.validity else 0

    def to_list(self) -> list:
        """Every row's value, None for nulls."""
        return self._data.with_nulls()

    def raw(self) -> list:
        """Every row's value, with a placeholder (0, 0.0, False, "" or b"") for nulls."""
        return self._data.values

    def __repr__(self) -> str:
        return f"Column({self.field}, {self.to_list()!r:.200})"


class Row:
    """A view of one row: `row["amount"]` or `row[1]` (None when null)."""

    __slots__ = ("_rows", "index")

    def __init__(self, rows: Rows, index: int) -> None:
        self._rows = rows
        self.index = index

    def __getitem__(self, col: ColumnRef) -> Any:
        data = self._rows._columns[self._rows.schema.index_of(col)]
        return None if data.is_null(self.index) else data.values[self.index]

    def get(self, col: str, default: Any = None) -> Any:
        """The value of column `col`, or `default` when it is null."""
        value = self[col]
        return default if value is None else value

    def is_null(self, col: ColumnRef) -> bool:
        return self._rows._columns[self._rows.schema.index_of(col)].is_null(self.index)

    def to_list(self) -> list:
        return [None if c.is_null(self.index) else c.values[self.index] for c in self._rows._columns]

    def to_dict(self) -> dict:
        return dict(zip(self._rows.schema.names, self.to_list()))

    def __repr__(self) -> str:
        return f"Row({self.to_dict()!r})"


class Rows(Sequence[Row]):
    """A batch of rows in a schema, stored column by column.

    By column: ``rows.column("amount")`` (None for nulls), or the typed shortcuts
    ``rows.ints("amount")``, ``floats``, ``strs``, ``bools``, ``binaries``,
    ``timestamps`` (lists; None for null rows). By row: ``for row in rows:
    row["amount"]``. ``len(rows)`` is the row count.
    """

    def __init__(self, schema: Schema, num_rows: int, columns: list) -> None:
        if len(columns) != len(schema):
            raise EddyError(f"batch has {len(columns)} columns but its schema ({schema}) has {len(schema)}")
        for field, column in zip(schema, columns):
            problem = None
            if column.data_type is not field.data_type:
                problem = f"holds {column.data_type} values"
            elif column.length != num_rows:
                problem = f"holds {column.length} values for {num_rows} rows"
            elif column.validity is not None and len(column.validity) < (num_rows + 7) // 8:
                problem = f"has a validity bitmap too short for {num_rows} rows"
            if problem:
                raise EddyError(f"column `{field}` of the batch {problem}")
        self.schema = schema
        self._num_rows = num_rows
        self._columns = columns

    def __len__(self) -> int:
        return self._num_rows

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [Row(self, i) for i in range(self._num_rows)[index]]
        if index < 0:
            index += self._num_rows
        if not 0 <= index < self._num_rows:
            raise IndexError(f"row {index} is out of range for a batch of {self._num_rows} rows")
        return Row(self, index)

    def __iter__(self) -> Iterator[Row]:
        return (Row(self, i) for i in range(self._num_rows))

    def column(self, col: ColumnRef) -> Column:
        """The column named (or numbered) `col`."""
        index = self.schema.index_of(col)
        return Column(self.schema[index], self._columns[index])

    def _typed(self, col: ColumnRef, wanted: DataType, accessor: str) -> list:
        index = self.schema.index_of(col)
        field = self.schema[index]
        if field.data_type is not wanted:
            raise EddyError(
                f"column `{field.name}` is {field.data_type}, so `{accessor}` (for {wanted}) cannot read it"
            )
        return self._columns[index].with_nulls()

    def ints(self, col: ColumnRef) -> list:
        """The values of the BIGINT column `col` (None for nulls)."""
        return self._typed(col, DataType.INT64, "ints")

    def floats(self, col: ColumnRef) -> list:
        """The values of the DOUBLE column `col` (None for nulls)."""
        return self._typed(col, DataType.FLOAT64, "floats")

    def strs(self, col: ColumnRef) -> list:
        """The values of the STRING column `col` (None for nulls)."""
        return self._typed(col, DataType.UTF8, "strs")

    def bools(self, col: ColumnRef) -> list:
        """The values of the BOOLEAN column `col` (None for nulls)."""
        return self._typed(col, DataType.BOOLEAN, "bools")

    def binaries(self, col: ColumnRef) -> list:
        """The values of the BINARY column `col` (None for nulls)."""
        return self._typed(col, DataType.BINARY, "binaries")

    def timestamps(self, col: ColumnRef) -> list:
        """The values of the TIMESTAMP column `col`, microseconds since the epoch (None for nulls)."""
        return self._typed(col, DataType.TIMESTAMP, "timestamps")

    def is_null(self, col: ColumnRef, row: int) -> bool:
        """Whether column `col` is null in row `row`."""
        return self._columns[self.schema.index_of(col)].is_null(row)

    def to_list(self) -> list:
        """Every row as a list of values (handy in test assertions)."""
        columns = [c.with_nulls() for c in self._columns]
        return [[c[i] for c in columns] for i in range(self._num_rows)]

    def to_dicts(self) -> list:
        """Every row as a dict of column name to value."""
        names = self.schema.names
        return [dict(zip(names, row)) for row in self.to_list()]

    def to_pyarrow(self) -> Any:
        """The batch as a `pyarrow.RecordBatch` (needs pyarrow; timestamps in µs, UTC)."""
        try:
            import pyarrow as pa
        except ImportError:
            raise EddyError(
                "Rows.to_pyarrow needs the pyarrow module, which is not importable here; install "
                "it (natively) or read columns with rows.column(...)"
            ) from None
        types = {
            DataType.BOOLEAN: pa.bool_(), DataType.INT64: pa.int64(), DataType.FLOAT64: pa.float64(),
            DataType.UTF8: pa.string(), DataType.BINARY: pa.binary(),
            DataType.TIMESTAMP: pa.timestamp("us", tz="UTC"),
        }  # fmt: skip
        arrays = [pa.array(c.with_nulls(), type=types[f.data_type]) for f, c in zip(self.schema, self._columns)]
        fields = [pa.field(f.name, types[f.data_type], f.nullable) for f in self.schema]
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))

    def to_pandas(self) -> Any:
        """The batch as a `pandas.DataFrame` (needs pandas; timestamps stay µs ints)."""
        try:
            import pandas as pd
        except ImportError:
            raise EddyError(
                "Rows.to_pandas needs the pandas module, which is not importable here (a component "
                "cannot load it); read columns with rows.column(...) instead"
            ) from None
        return pd.DataFrame({f.name: c.with_nulls() for f, c in zip(self.schema, self._columns)})

    def __repr__(self) -> str:
        return f"Rows({self.schema}; {self.to_list()!r:.300})"
