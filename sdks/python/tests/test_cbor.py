"""The codec against RFC 8949 appendix A and ciborium's rules (shortest ints and floats)."""

import math
from dataclasses import dataclass
from typing import Optional

import pytest

from eddy_guest import EddyError, cbor
from eddy_guest.typed import check_type, from_plain, to_plain

# (value, hex) pairs from RFC 8949 appendix A that ciborium writes the same way.
RFC_EXAMPLES = [
    (0, "00"), (1, "01"), (10, "0a"), (23, "17"), (24, "1818"), (25, "1819"), (100, "1864"),
    (1000, "1903e8"), (1000000, "1a000f4240"), (1000000000000, "1b000000e8d4a51000"),
    (18446744073709551615, "1bffffffffffffffff"), (-18446744073709551616, "3bffffffffffffffff"),
    (-1, "20"), (-10, "29"), (-100, "3863"), (-1000, "3903e7"),
    (0.0, "f90000"), (-0.0, "f98000"), (1.0, "f93c00"), (1.1, "fb3ff199999999999a"),
    (1.5, "f93e00"), (65504.0, "f97bff"), (100000.0, "fa47c35000"),
    (3.4028234663852886e38, "fa7f7fffff"), (1.0e300, "fb7e37e43c8800759c"),
    (5.960464477539063e-8, "f90001"), (0.00006103515625, "f90400"), (-4.0, "f9c400"),
    (-4.1, "fbc010666666666666"), (math.inf, "f97c00"), (-math.inf, "f9fc00"),
    (False, "f4"), (True, "f5"), (None, "f6"),
    (b"", "40"), (b"\x01\x02\x03\x04", "4401020304"),
    ("", "60"), ("a", "6161"), ("IETF", "6449455446"), ("\"\\", "62225c"), ("\u00fc", "62c3bc"),
    ("\u6c34", "63e6b0b4"), ("\U00010151", "64f0908591"),
    ([], "80"), ([1, 2, 3], "83010203"), ([1, [2, 3], [4, 5]], "8301820203820405"),
    (list(range(1, 26)), "98190102030405060708090a0b0c0d0e0f101112131415161718181819"),
    ({}, "a0"), ({1: 2, 3: 4}, "a201020304"), ({"a": 1, "b": [2, 3]}, "a26161016162820203"),
    (["a", {"b": "c"}], "826161a161626163"),
    ({"a": "A", "b": "B", "c": "C", "d": "D", "e": "E"}, "a56161614161626142616361436164614461656145"),
]  # fmt: skip


@pytest.mark.parametrize("value,hexed", RFC_EXAMPLES)
def test_rfc_examples_encode_and_decode(value, hexed):
    assert cbor.dumps(value).hex() == hexed
    decoded = cbor.loads(bytes.fromhex(hexed))
    assert decoded == value and type(decoded) is type(value)
    if isinstance(value, float):
        assert math.copysign(1, decoded) == math.copysign(1, value)


def test_nan_is_written_as_half_precision_like_ciborium():
    assert cbor.dumps(math.nan).hex() == "f97e00"
    assert math.isnan(cbor.loads(bytes.fromhex("f97e00")))
    assert math.isnan(cbor.loads(bytes.fromhex("fa7fc00000")))
    assert math.isnan(cbor.loads(bytes.fromhex("fb7ff8000000000000")))


def test_floats_use_the_shortest_lossless_width():
    assert cbor.dumps(92.5).hex() == "f955c8"  # 1.4453125 * 2^6: exact in f16
    assert cbor.dumps(0.1).hex() == "fb3fb999999999999a"  # needs f64
    assert cbor.dumps(16777216.0).hex() == "fa4b800000"  # 2^24: exact in f32, too big for f16
    assert cbor.dumps(1e-7).hex().startswith("fb")  # f16 would round it to a subnormal
    assert cbor.dumps(65520.0).hex() == "fa477ff000"  # f16 would overflow to infinity


@pytest.mark.parametrize(
    "hexed,value",
    [
        ("1800", 0), ("190001", 1), ("1a00000001", 1), ("1b0000000000000001", 1),  # non-shortest ints
        ("5f42010243030405ff", b"\x01\x02\x03\x04\x05"),
        ("7f657374726561646d696e67ff", "streaming"),
        ("9fff", []), ("9f018202039f0405ffff", [1, [2, 3], [4, 5]]),
        ("bf61610161629f0203ffff", {"a": 1, "b": [2, 3]}),
        ("c249010000000000000000", 18446744073709551616),
        ("c349010000000000000000", -18446744073709551617),
        ("c074323031332d30332d32315432303a30343a30305a", "2013-03-21T20:04:00Z"),
        ("f93c00", 1.0), ("fa3f800000", 1.0), ("fb3ff0000000000000", 1.0),
    ],
)
def test_decoding_accepts_everything_ciborium_may_write(hexed, value):
    assert cbor.loads(bytes.fromhex(hexed)) == value


@pytest.mark.parametrize("hexed", ["", "19", "61", "82 01", "0000", "ff", "5f01ff", "1c", "62c3"])
def test_malformed_data_is_refused(hexed):
    with pytest.raises(cbor.CborError):
        cbor.loads(bytes.fromhex(hexed.replace(" ", "")))


def test_unencodable_values_are_refused():
    with pytest.raises(cbor.CborError, match="does not fit in 64 bits"):
        cbor.dumps(1 << 64)
    with pytest.raises(cbor.CborError, match="cannot encode a set"):
        cbor.dumps({1, 2})


@dataclass
class Totals:
    count: int = 0
    sum: int = 0


@dataclass
class Alert:
    suppressed: int
    timer: Optional[int]
    last_reading: float
    last_ts: int


def test_dataclasses_are_maps_in_field_order_like_serde_structs():
    data = cbor.dumps(to_plain(Totals(3, 13), Totals))
    assert data.hex() == "a2" + "65" + b"count".hex() + "03" + "63" + b"sum".hex() + "0d"
    assert from_plain(cbor.loads(data), Totals) == Totals(3, 13)


def test_declared_floats_are_written_as_floats_and_optionals_as_null():
    alert = Alert(suppressed=1, timer=None, last_reading=100, last_ts=-1)
    data = cbor.dumps(to_plain(alert, Alert))
    expected = (
        "a4" + "6a" + b"suppressed".hex() + "01" + "65" + b"timer".hex() + "f6"
        + "6c" + b"last_reading".hex() + "f95640" + "67" + b"last_ts".hex() + "20"
    )  # fmt: skip
    assert data.hex() == expected
    back = from_plain(cbor.loads(data), Alert)
    assert back == Alert(1, None, 100.0, -1) and isinstance(back.last_reading, float)


def test_typed_conversion_refuses_wrong_types_and_names_the_field():
    with pytest.raises(EddyError, match=r"expected int at count, got str"):
        to_plain(Totals("3", 0), Totals)
    with pytest.raises(EddyError, match="does not fit in 64 bits"):
        to_plain(1 << 63, int)
    with pytest.raises(EddyError, match="field `last_reading` of Alert is missing"):
        from_plain({"suppressed": 1, "last_ts": 0}, Alert)
    assert from_plain({"count": 1}, Totals) == Totals(1, 0), "fields with defaults may be missing"
    assert from_plain({"suppressed": 1, "last_reading": 2.5, "last_ts": 0, "new": 1}, Alert) == Alert(1, None, 2.5, 0)
    with pytest.raises(EddyError, match="unsupported state type set"):
        check_type(set, "state variable `x`")
    assert from_plain([1, 2], tuple[int, int]) == (1, 2)
    assert from_plain({"a": [1.5]}, dict[str, list[float]]) == {"a": [1.5]}
    assert from_plain([1, 2], bytes) == b"\x01\x02", "a Rust Vec<u8> is an array"
    assert to_plain({"x": 1}, dict[str, float]) == {"x": 1.0}
