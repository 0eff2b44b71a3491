"""CBOR (RFC 8949) encoding and decoding, byte-compatible with the Rust SDK.

The Rust SDK writes state with `ciborium` 0.2: integers and lengths in their shortest
form, definite lengths, and every float in the shortest width (half, single or double)
that holds it exactly. :func:`dumps` writes exactly that; :func:`loads` reads anything
ciborium writes, plus indefinite lengths, tags (bignums become ints, other tags are
skipped) and simple values.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from typing import Any

__all__ = ["dumps", "loads", "CborError"]

_U64 = 1 << 64


class CborError(ValueError):
    """A value cannot be encoded, or bytes are not valid CBOR."""


def _head(out: bytearray, major: int, n: int) -> None:
    """Appends a header: major type and argument, in the shortest form."""
    m = major << 5
    if n < 24:
        out.append(m | n)
    elif n < 0x100:
        out += bytes((m | 24, n))
    elif n < 0x10000:
        out.append(m | 25)
        out += n.to_bytes(2, "big")
    elif n < 0x1_0000_0000:
        out.append(m | 26)
        out += n.to_bytes(4, "big")
    else:
        out.append(m | 27)
        out += n.to_bytes(8, "big")


def _float(out: bytearray, x: float) -> None:
    """Appends the shortest float encoding that round-trips `x` bit for bit."""
    bits = struct.pack(">d", x)
    if math.isnan(x):
        # ciborium converts through f16: a quiet NaN without payload becomes 0x7e00.
        if bits[1:] == b"\xf8" + bytes(6):
            out += b"\xf9" + (b"\xfe\x00" if bits[0] & 0x80 else b"\x7e\x00")
            return
        out += b"\xfb" + bits
        return
    for tag, fmt in ((0xF9, ">e"), (0xFA, ">f")):
        try:
            packed = struct.pack(fmt, x)
        except (OverflowError, struct.error):
            continue
        if struct.pack(">d", struct.unpack(fmt, packed)[0]) == bits:
            out.append(tag)
            out += packed
            return
    out.append(0xFB)
    out += bits


def _encode(out: bytearray, value: Any, depth: int) -> None:
    if depth > 256:
        raise CborError("value is nested more than 256 levels deep (a cycle?)")
    if value is None:
        out.append(0xF6)
    elif value is True:
        out.append(0xF5)
    elif value is False:
        out.append(0xF4)
    elif isinstance(value, int):
        if 0 <= value < _U64:
            _head(out, 0, value)
        elif -_U64 <= value < 0:
            _head(out, 1, -1 - value)
        else:
            raise CborError(f"integer {value} does not fit in 64 bits")
    elif isinstance(value, float):
        _float(out, value)
    elif isinstance(value, str):
        data = value.encode("utf-8")
        _head(out, 3, len(data))
        out += data
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        _head(out, 2, len(data))
        out += data
    elif isinstance(value, (list, tuple)):
        _head(out, 4, len(value))
        for item in value:
            _encode(out, item, depth + 1)
    elif isinstance(value, dict):
        _head(out, 5, len(value))
        for k, v in value.items():
            _encode(out, k, depth + 1)
            _encode(out, v, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        _head(out, 5, len(fields))
        for field in fields:
            _encode(out, field.name, depth + 1)
            _encode(out, getattr(value, field.name), depth + 1)
    else:
        raise CborError(
            f"cannot encode a {type(value).__name__} as CBOR; use None, bool, int, float, "
            "str, bytes, list, tuple, dict or a dataclass"
        )


def dumps(value: Any) -> bytes:
    """Encodes `value` as ciborium would encode the matching Rust value.

    A dataclass becomes a map with text keys in field order (like a serde struct),
    tuples and lists arrays, None null.
    """
    out = bytearray()
    _encode(out, value, 0)
    return bytes(out)


_BREAK = object()


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        end = self.pos + n
        if end > len(self.data):
            raise CborError(f"CBOR data ends early: wanted {n} byte(s) at offset {self.pos}")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def argument(self, info: int) -> int | None:
        """The header's argument; None for an indefinite length."""
        if info < 24:
            return info
        if info <= 27:
            return int.from_bytes(self.take(1 << (info - 24)), "big")
        if info == 31:
            return None
        raise CborError(f"invalid CBOR header (additional info {info}) at offset {self.pos - 1}")

    def chunks(self, major: int, length: int | None) -> bytes:
        if length is not None:
            return bytes(self.take(length))
        parts = []
        while True:
            initial = self.take(1)[0]
            if initial == 0xFF:
                return b"".join(parts)
            if initial >> 5 != major:
                raise CborError("an indefinite-length string holds a chunk of another type")
            size = self.argument(initial & 31)
            if size is None:
                raise CborError("indefinite-length string chunks may not nest")
            parts.append(bytes(self.take(size)))

    def item(self, depth: int = 0) -> Any:
        if depth > 256:
            raise CborError("CBOR data is nested more than 256 levels deep")
        initial = self.take(1)[0]
        major, info = initial >> 5, initial & 31
        if major == 7:
            return self.simple(info)
        n = self.argument(info)
        if major == 0:
            return n if n is not None else self.fail_indefinite(major)
        if major == 1:
            return -1 - n if n is not None else self.fail_indefinite(major)
        if major == 2:
            return self.chunks(2, n)
        if major == 3:
            try:
                return self.chunks(3, n).decode("utf-8")
            except UnicodeDecodeError as e:
                raise CborError(f"CBOR text is not valid UTF-8: {e}") from None
        if major == 4:
            items = []
            while n is None or len(items) < n:
                item = self.item(depth + 1)
                if item is _BREAK:
                    if n is None:
                        break
                    raise CborError("unexpected CBOR break inside a definite array")
                items.append(item)
            return items
        if major == 5:
            result: dict = {}
            count = 0
            while n is None or count < n:
                k = self.item(depth + 1)
                if k is _BREAK:
                    if n is None:
                        break
                    raise CborError("unexpected CBOR break inside a definite map")
                v = self.item(depth + 1)
                result[_hashable(k)] = v
                count += 1
            return result
        # major 6: a tag
        if n is None:
            self.fail_indefinite(major)
        inner = self.item(depth + 1)
        if n in (2, 3) and isinstance(inner, bytes):
            value = int.from_bytes(inner, "big")
            return value if n == 2 else -1 - value
        return inner

    def simple(self, info: int) -> Any:
        if info == 20:
            return False
        if info == 21:
            return True
        if info in (22, 23):
            return None
        if info == 25:
            return struct.unpack(">e", self.take(2))[0]
        if info == 26:
            return struct.unpack(">f", self.take(4))[0]
        if info == 27:
            return struct.unpack(">d", self.take(8))[0]
        if info == 31:
            return _BREAK
        if info == 24:
            return self.take(1)[0]
        if info < 20:
            return info
        raise CborError(f"invalid CBOR simple value (additional info {info})")

    @staticmethod
    def fail_indefinite(major: int) -> Any:
        raise CborError(f"CBOR major type {major} cannot have an indefinite length")


def _hashable(key: Any) -> Any:
    if isinstance(key, list):
        return tuple(_hashable(k) for k in key)
    if isinstance(key, dict):
        return tuple((k, _hashable(v)) for k, v in key.items())
    return key


def loads(data: bytes) -> Any:
    """Decodes one CBOR item: maps become dicts (array or map keys become tuples),
    arrays lists, byte strings bytes. Fails on trailing bytes."""
    reader = _Reader(bytes(data))
    value = reader.item()
    if value is _BREAK:
        raise CborError("CBOR data starts with a break")
    if reader.pos != len(reader.data):
        raise CborError(f"{len(reader.data) - reader.pos} trailing byte(s) after the CBOR value")
    return value
