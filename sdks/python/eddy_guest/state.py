"""Typed state variables over CBOR-encoded bytes, scoped to the current key."""

from __future__ import annotations

import datetime
from typing import Any, Generic, Iterable, Optional, TypeVar, Union

from . import cbor
from .errors import EddyError
from .store import Store
from .typed import from_plain, to_plain

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")

Ttl = Union[None, int, datetime.timedelta]


def ttl_micros(ttl: Ttl, name: str) -> Optional[int]:
    """A TTL (None, microseconds or a timedelta) in microseconds; fails when not positive."""
    if ttl is None:
        return None
    if isinstance(ttl, datetime.timedelta):
        micros = ttl // datetime.timedelta(microseconds=1)
    elif isinstance(ttl, int) and not isinstance(ttl, bool):
        micros = ttl
    else:
        raise EddyError(f"state variable `{name}`: a TTL is a datetime.timedelta or microseconds, not {ttl!r}")
    if micros <= 0:
        raise EddyError(f"state variable `{name}` has a TTL of {ttl!r}; give a positive duration, or None for no expiry")
    return min(micros, (1 << 64) - 1)  # like the Rust SDK: a longer TTL is as good as none


def encode(name: str, value: Any, tp: Any) -> bytes:
    try:
        return cbor.dumps(to_plain(value, tp))
    except (EddyError, cbor.CborError) as e:
        raise EddyError(f"state `{name}`: cannot store {value!r:.80}: {e}") from None


def decode(name: str, data: bytes, tp: Any) -> Any:
    try:
        return from_plain(cbor.loads(data), tp)
    except (EddyError, cbor.CborError) as e:
        raise EddyError(
            f"state `{name}`: cannot read the stored value as {getattr(tp, '__name__', tp)}: {e} (did the "
            "variable's type change? then give the new type a new variable name)"
        ) from None


class _Variable:
    def __init__(self, name: str, store: Store) -> None:
        self.name = name
        self._store = store

    def _backend(self):
        self._store.check_active(f"state variable `{self.name}`")
        return self._store.backend


class ValueState(_Variable, Generic[T]):
    """One value per key (Spark's `ValueState`), declared with `ctx.value_state`."""

    def __init__(self, name: str, store: Store, tp: Any) -> None:
        super().__init__(name, store)
        self.type = tp

    def get(self, default: Optional[T] = None) -> Optional[T]:
        """The current key's value, or `default` when there is none (or it expired)."""
        data = self._backend().value_get(self.name)
        return default if data is None else decode(self.name, data, self.type)

    def exists(self) -> bool:
        """Whether the current key has a live value."""
        return self._backend().value_get(self.name) is not None

    def update(self, value: T) -> None:
        """Replaces the current key's value (and restarts its TTL)."""
        data = encode(self.name, value, self.type)
        self._backend().value_update(self.name, data)

    def clear(self) -> None:
        """Removes the current key's value."""
        self._backend().value_clear(self.name)


class ListState(_Variable, Generic[T]):
    """An ordered list of values per key (Spark's `ListState`), declared with `ctx.list_state`."""

    def __init__(self, name: str, store: Store, tp: Any) -> None:
        super().__init__(name, store)
        self.type = tp

    def get(self) -> list:
        """The current key's live elements, oldest first."""
        return [decode(self.name, d, self.type) for d in self._backend().list_get(self.name)]

    def exists(self) -> bool:
        """Whether the current key has at least one live element."""
        return bool(self._backend().list_get(self.name))

    def append(self, value: T) -> None:
        """Appends one element at the end."""
        self.extend([value])

    def extend(self, values: Iterable[T]) -> None:
        """Appends elements at the end, in order."""
        data = [encode(self.name, v, self.type) for v in values]
        self._backend().list_append(self.name, data)

    def put(self, values: Iterable[T]) -> None:
        """Replaces the whole list."""
        data = [encode(self.name, v, self.type) for v in values]
        self._backend().list_put(self.name, data)

    def clear(self) -> None:
        """Removes every element."""
        self._backend().list_clear(self.name)


class MapState(_Variable, Generic[K, V]):
    """A map of user keys to values per key (Spark's `MapState`), declared with
    `ctx.map_state`. Iteration follows the byte order of the CBOR-encoded user keys."""

    def __init__(self, name: str, store: Store, key_type: Any, value_type: Any) -> None:
        super().__init__(name, store)
        self.key_type = key_type
        self.value_type = value_type

    def _key(self, key: K) -> bytes:
        return encode(self.name, key, self.key_type)

    def get(self, key: K, default: Optional[V] = None) -> Optional[V]:
        """The value for `key`, or `default` when absent (or expired)."""
        user_key = self._key(key)
        data = self._backend().map_get(self.name, user_key)
        return default if data is None else decode(self.name, data, self.value_type)

    def contains(self, key: K) -> bool:
        """Whether `key` has a live value."""
        user_key = self._key(key)
        return self._backend().map_get(self.name, user_key) is not None

    __contains__ = contains

    def update(self, key: K, value: V) -> None:
        """Sets the value for `key` (and restarts its TTL)."""
        user_key, data = self._key(key), encode(self.name, value, self.value_type)
        self._backend().map_update(self.name, user_key, data)

    def remove(self, key: K) -> None:
        """Removes `key`."""
        user_key = self._key(key)
        self._backend().map_remove(self.name, user_key)

    def exists(self) -> bool:
        """Whether the map has at least one live entry."""
        return bool(self._backend().map_keys(self.name))

    def keys(self) -> list:
        """Every live key, in order."""
        return [decode(self.name, k, self.key_type) for k in self._backend().map_keys(self.name)]

    def values(self) -> list:
        """Every live value, in key order."""
        return [decode(self.name, v, self.value_type) for v in self._backend().map_values(self.name)]

    def items(self) -> list:
        """Every live entry as (key, value), in key order."""
        return [
            (decode(self.name, k, self.key_type), decode(self.name, v, self.value_type))
            for k, v in self._backend().map_entries(self.name)
        ]

    def clear(self) -> None:
        """Removes every entry."""
        self._backend().map_clear(self.name)
