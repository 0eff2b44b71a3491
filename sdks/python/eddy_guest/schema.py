"""Column types, fields and schemas (the DDL of the Rust SDK: `name TYPE [NOT NULL], ...`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterator, Sequence, Union

from .errors import EddyError


class DataType(enum.Enum):
    """The logical type of a column or key part; the value is its SQL name."""

    BOOLEAN = "BOOLEAN"
    INT64 = "BIGINT"
    FLOAT64 = "DOUBLE"
    UTF8 = "STRING"
    BINARY = "BINARY"
    TIMESTAMP = "TIMESTAMP"

    def __str__(self) -> str:
        return self.value


_ALIASES = {
    "BOOLEAN": DataType.BOOLEAN, "BOOL": DataType.BOOLEAN,
    "BIGINT": DataType.INT64, "LONG": DataType.INT64, "INT64": DataType.INT64,
    "DOUBLE": DataType.FLOAT64, "FLOAT64": DataType.FLOAT64,
    "STRING": DataType.UTF8, "UTF8": DataType.UTF8,
    "BINARY": DataType.BINARY, "BYTES": DataType.BINARY,
    "TIMESTAMP": DataType.TIMESTAMP,
}  # fmt: skip


@dataclass(frozen=True)
class Field:
    """One named, typed column."""

    name: str
    data_type: DataType
    nullable: bool = True

    def __str__(self) -> str:
        return f"{self.name} {self.data_type}" + ("" if self.nullable else " NOT NULL")


class Schema(Sequence[Field]):
    """An ordered list of fields with unique names."""

    def __init__(self, fields: Sequence[Field] = ()) -> None:
        self._fields = tuple(fields)
        self._index: dict[str, int] = {}
        for i, field in enumerate(self._fields):
            if not field.name:
                raise EddyError(f"schema field {i} has an empty name")
            if field.name in self._index:
                raise EddyError(f"schema has two fields named `{field.name}`; give each column a unique name")
            self._index[field.name] = i

    @classmethod
    def parse(cls, ddl: str) -> Schema:
        """Parses `name TYPE [NOT NULL], ...` (types STRING, BIGINT, DOUBLE, BOOLEAN,
        BINARY, TIMESTAMP, case-insensitive); an empty string is the empty schema."""
        if not ddl.strip():
            return cls()
        fields = []
        for part in ddl.split(","):
            words = part.split()
            if len(words) == 2:
                name, type_name, nullable = words[0], words[1], True
            elif len(words) == 4 and words[2].lower() == "not" and words[3].lower() == "null":
                name, type_name, nullable = words[0], words[1], False
            else:
                raise EddyError(
                    f"cannot parse column `{part.strip()}` in schema `{ddl}`: expected `name TYPE` "
                    "or `name TYPE NOT NULL`"
                )
            data_type = _ALIASES.get(type_name.upper())
            if data_type is None:
                raise EddyError(
                    f"unknown type `{type_name}` for column `{name}` in schema `{ddl}`; use one of "
                    "STRING, BIGINT, DOUBLE, BOOLEAN, BINARY, TIMESTAMP"
                )
            fields.append(Field(name, data_type, nullable))
        return cls(fields)

    @classmethod
    def of(cls, schema: Union[str, Schema]) -> Schema:
        """`schema` itself, or parsed when it is DDL text."""
        if isinstance(schema, Schema):
            return schema
        if isinstance(schema, str):
            return cls.parse(schema)
        raise EddyError(f"a schema is DDL text like \"user STRING, n BIGINT\" or a Schema, not {type(schema).__name__}")

    @property
    def names(self) -> list[str]:
        """The column names, in order."""
        return [f.name for f in self._fields]

    def index_of(self, col: Union[str, int]) -> int:
        """The position of column `col` (a name or a position); fails when absent."""
        if isinstance(col, str):
            index = self._index.get(col)
            if index is None:
                raise EddyError(f"no column `{col}` in schema ({self})")
            return index
        if isinstance(col, int) and not isinstance(col, bool) and 0 <= col < len(self._fields):
            return col
        raise EddyError(f"column {col!r} is out of range for schema ({self}) of {len(self._fields)} columns")

    def __getitem__(self, index):  # type: ignore[override]
        return self._fields[index]

    def __len__(self) -> int:
        return len(self._fields)

    def __iter__(self) -> Iterator[Field]:
        return iter(self._fields)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self._fields == other._fields

    def __hash__(self) -> int:
        return hash(self._fields)

    def __str__(self) -> str:
        return ", ".join(str(f) for f in self._fields)

    def __repr__(self) -> str:
        return f"Schema.parse({str(self)!r})"
