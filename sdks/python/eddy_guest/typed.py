"""Type-directed conversion between Python values and the plain values CBOR holds.

A state variable's type fixes how its values are written, so that Python writes what
the Rust SDK's serde types would (a `float` field holding `3` is written as the float
`3.0`, not the integer `3`) and reads them back as that type (a map becomes the
declared dataclass). Supported: `int`, `float`, `bool`, `str`, `bytes`, `None`,
`Optional[T]`, `list[T]`, `tuple[...]`, `dict[K, V]`, `typing.Any`/no type, and
dataclasses whose fields use these types.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from typing import Any

from .errors import EddyError

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_NoneType = type(None)


def _name(tp: Any) -> str:
    if tp is None or tp is _NoneType:
        return "None"
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _args(tp: Any) -> tuple:
    return typing.get_args(tp)


def _is_union(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return origin is typing.Union or (sys.version_info >= (3, 10) and origin is types.UnionType)


_HINTS: dict = {}


def _hints(cls: type) -> dict:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls)
        _HINTS[cls] = hints
    return hints


def check_type(tp: Any, where: str) -> None:
    """Fails with a clear message when `tp` is not a supported state type."""
    if tp is None or tp is Any or tp in (int, float, bool, str, bytes, _NoneType, list, dict, tuple):
        return
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        try:
            hints = _hints(tp)
        except Exception as e:  # an unresolvable annotation
            raise EddyError(f"{where}: cannot read the field types of dataclass {tp.__name__}: {e}") from None
        for field in dataclasses.fields(tp):
            check_type(hints.get(field.name, Any), f"{where}, field `{field.name}` of {tp.__name__}")
        return
    origin = typing.get_origin(tp)
    if _is_union(tp) or origin in (list, tuple, dict):
        for arg in _args(tp):
            if arg is not Ellipsis:
                check_type(arg, where)
        return
    raise EddyError(
        f"{where}: unsupported state type {_name(tp)}; use int, float, bool, str, bytes, "
        "None, Optional[T], list[T], tuple[...], dict[K, V] or a dataclass of these"
    )


def _mismatch(tp: Any, value: Any, path: str) -> EddyError:
    at = f" at {path}" if path else ""
    return EddyError(f"expected {_name(tp)}{at}, got {type(value).__name__} {value!r:.80}")


def to_plain(value: Any, tp: Any, path: str = "") -> Any:
    """`value` (of type `tp`) as plain CBOR-ready values; floats forced where declared."""
    if tp is None or tp is Any:
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _mismatch(tp, value, path)
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _mismatch(tp, value, path)
        if not _I64_MIN <= value <= _I64_MAX:
            raise EddyError(f"integer {value}{' at ' + path if path else ''} does not fit in 64 bits (i64)")
        return value
    if tp in (bool, str):
        if not isinstance(value, tp):
            raise _mismatch(tp, value, path)
        return value
    if tp is bytes:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise _mismatch(tp, value, path)
        return bytes(value)
    if tp is _NoneType:
        if value is not None:
            raise _mismatch(tp, value, path)
        return None
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, tp):
            raise _mismatch(tp, value, path)
        hints = _hints(tp)
        return {
            f.name: to_plain(getattr(value, f.name), hints.get(f.name, Any), f"{path}.{f.name}" if path else f.name)
            for f in dataclasses.fields(tp)
        }
    if _is_union(tp):
        options = _args(tp)
        if value is None and _NoneType in options:
            return None
        for option in options:
            if option is not _NoneType:
                try:
                    return to_plain(value, option, path)
                except EddyError:
                    continue
        raise _mismatch(tp, value, path)
    origin = typing.get_origin(tp) or tp
    args = _args(tp)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise _mismatch(tp, value, path)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise EddyError(f"expected {len(args)} items at {path or 'the value'}, got {len(value)}")
            return [to_plain(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args))]
        item = args[0] if args else Any
        return [to_plain(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise _mismatch(tp, value, path)
        kt, vt = args if args else (Any, Any)
        return {to_plain(k, kt, path): to_plain(v, vt, f"{path}[{k!r}]") for k, v in value.items()}
    return value


def from_plain(value: Any, tp: Any, path: str = "") -> Any:
    """Decoded CBOR `value` as the type `tp` (dataclasses rebuilt, ints read as floats)."""
    if tp is None or tp is Any:
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _mismatch(tp, value, path)
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _mismatch(tp, value, path)
        return value
    if tp in (bool, str, _NoneType):
        if tp is _NoneType and value is None:
            return None
        if tp is not _NoneType and isinstance(value, tp):
            return value
        raise _mismatch(tp, value, path)
    if tp is bytes:
        if isinstance(value, bytes):
            return value
        if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
            return bytes(value)  # a Rust Vec<u8> is written as an array
        raise _mismatch(tp, value, path)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            raise _mismatch(tp, value, path)
        hints = _hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            sub = f"{path}.{f.name}" if path else f.name
            if f.name in value:
                kwargs[f.name] = from_plain(value[f.name], hints.get(f.name, Any), sub)
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                if _is_union(hints.get(f.name)) and _NoneType in _args(hints[f.name]):
                    kwargs[f.name] = None  # serde reads a missing Option field as None
                else:
                    raise EddyError(f"field `{sub}` of {tp.__name__} is missing from the stored value")
        return tp(**kwargs)
    if _is_union(tp):
        options = _args(tp)
        if value is None and _NoneType in options:
            return None
        for option in options:
            if option is not _NoneType:
                try:
                    return from_plain(value, option, path)
                except EddyError:
                    continue
        raise _mismatch(tp, value, path)
    origin = typing.get_origin(tp) or tp
    args = _args(tp)
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise _mismatch(tp, value, path)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise EddyError(f"expected {len(args)} items at {path or 'the value'}, got {len(value)}")
            return tuple(from_plain(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
        item = args[0] if args else Any
        items = [from_plain(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise _mismatch(tp, value, path)
        kt, vt = args if args else (Any, Any)
        return {from_plain(k, kt, path): from_plain(v, vt, f"{path}[{k!r}]") for k, v in value.items()}
    return value
