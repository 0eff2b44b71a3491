"""The grouping key of a handler call."""

from __future__ import annotations

from typing import Any, Sequence

from .errors import EddyError
from .schema import DataType


class Key(Sequence[Any]):
    """The current call's key: one value per key column, in key-schema order.

    `key[0]` is the first part; `key.str(0)`, `key.int(0)`, ... also check its type.
    """

    def __init__(self, parts: Sequence[Any], types: Sequence[DataType] = ()) -> None:
        self.parts = list(parts)
        self.types = list(types)

    def __getitem__(self, index):  # type: ignore[override]
        return self.parts[index]

    def __len__(self) -> int:
        return len(self.parts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Key):
            return self.parts == other.parts
        return isinstance(other, (list, tuple)) and self.parts == list(other)

    def __hash__(self) -> int:
        return hash(tuple(self.parts))

    def _part(self, index: int, wanted: DataType, pytype: type) -> Any:
        if not -len(self.parts) <= index < len(self.parts):
            raise EddyError(f"key {self} has {len(self.parts)} part(s); there is no part {index}")
        value = self.parts[index]
        actual = self.types[index] if index < len(self.types) else None
        if value is None or (actual is not None and actual is not wanted) or not isinstance(value, pytype) \
                or (pytype is int and isinstance(value, bool)):
            found = "NULL" if value is None else (actual.value if actual else type(value).__name__)
            raise EddyError(f"key {self}: part {index} is {found}, not {wanted.value}")
        return value

    def str(self, index: int = 0) -> str:
        """The STRING part at `index`."""
        return self._part(index, DataType.UTF8, str)

    def int(self, index: int = 0) -> int:
        """The BIGINT part at `index`."""
        return self._part(index, DataType.INT64, int)

    def float(self, index: int = 0) -> float:
        """The DOUBLE part at `index`."""
        return self._part(index, DataType.FLOAT64, float)

    def bool(self, index: int = 0) -> bool:
        """The BOOLEAN part at `index`."""
        return self._part(index, DataType.BOOLEAN, bool)

    def bytes(self, index: int = 0) -> bytes:
        """The BINARY part at `index`."""
        return self._part(index, DataType.BINARY, bytes)

    def timestamp(self, index: int = 0) -> int:
        """The TIMESTAMP part at `index`, µs since the epoch."""
        return self._part(index, DataType.TIMESTAMP, int)

    def __str__(self) -> str:
        shown = ["null" if p is None else (p.hex() if isinstance(p, bytes) else str(p)) for p in self.parts]
        return shown[0] if len(shown) == 1 else "(" + ", ".join(shown) + ")"

    def __repr__(self) -> str:
        return f"Key({self.parts!r})"
