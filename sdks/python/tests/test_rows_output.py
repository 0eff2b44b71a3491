"""Schemas, reading rows by column and by row, and building output rows."""

import datetime
import importlib.util

import pytest

from eddy_guest import DataType, EddyError, Key, Schema
from eddy_guest.output import Output, batch
from eddy_guest.rows import ColumnData, Rows
from eddy_guest.times import from_datetime, micros, to_datetime, utc_date


def test_schemas_parse_print_and_refuse_mistakes():
    schema = Schema.parse("user STRING NOT NULL, amount bigint, ts TIMESTAMP")
    assert [f.data_type for f in schema] == [DataType.UTF8, DataType.INT64, DataType.TIMESTAMP]
    assert str(schema) == "user STRING NOT NULL, amount BIGINT, ts TIMESTAMP"
    assert schema.index_of("ts") == 2 and len(Schema.parse("  ")) == 0
    with pytest.raises(EddyError, match="unknown type `INTEGER` for column `a`"):
        Schema.parse("a INTEGER")
    with pytest.raises(EddyError, match="two fields named `a`"):
        Schema.parse("a BIGINT, a STRING")
    with pytest.raises(EddyError, match="cannot parse column `a BIGINT NULL`"):
        Schema.parse("a BIGINT NULL")
    with pytest.raises(EddyError, match=r"no column `nope` in schema \(user STRING NOT NULL"):
        schema.index_of("nope")


def test_columns_and_rows_read_values_with_none_for_nulls():
    rows = batch("user STRING, amount BIGINT, score DOUBLE", [["a", 5, 1.5], ["b", None, 2.0], {"user": "c"}])
    assert len(rows) == 3
    assert rows.ints("amount") == [5, None, None]
    assert rows.column("amount").raw() == [5, 0, 0], "null slots hold a placeholder"
    assert rows.column("amount").null_count == 2 and rows.is_null("amount", 1)
    assert rows.strs("user") == ["a", "b", "c"]
    assert [row["amount"] for row in rows] == [5, None, None]
    assert rows[0].to_dict() == {"user": "a", "amount": 5, "score": 1.5}
    assert rows[-1].get("score", 0.0) == 0.0
    assert rows.to_list() == [["a", 5, 1.5], ["b", None, 2.0], ["c", None, None]]
    with pytest.raises(EddyError, match=r"column `user` is STRING, so `ints` \(for BIGINT\) cannot read it"):
        rows.ints("user")
    with pytest.raises(EddyError, match="no column `nope`"):
        rows[0]["nope"]


def test_a_column_without_nulls_is_returned_without_copying():
    rows = batch("n BIGINT", [[1], [2]])
    assert rows.ints("n") is rows.column("n").raw()


def test_var_len_columns_decode_by_byte_offsets():
    data = "añb€".encode()
    offsets = [0, 1, 3, 4, 4, 7]  # a, ñ, b, (null), €
    column = ColumnData(DataType.UTF8, None, bytes([0b11110111]), varlen=(data, offsets))
    rows = Rows(Schema.parse("s STRING"), 5, [column])
    assert rows.strs("s") == ["a", "ñ", "b", None, "€"]
    ascii_rows = Rows(Schema.parse("b BINARY"), 2, [ColumnData(DataType.BINARY, None, None, varlen=(b"xyz", [0, 2, 3]))])
    assert ascii_rows.binaries("b") == [b"xy", b"z"]


def test_batches_are_checked_against_their_schema():
    with pytest.raises(EddyError, match=r"column `n BIGINT` of the batch holds 1 values for 2 rows"):
        Rows(Schema.parse("n BIGINT"), 2, [ColumnData(DataType.INT64, [1], None)])
    with pytest.raises(EddyError, match="holds DOUBLE values"):
        Rows(Schema.parse("n BIGINT"), 1, [ColumnData(DataType.FLOAT64, [1.0], None)])


def test_output_rows_by_position_and_by_name():
    out = Output(Schema.parse("user STRING NOT NULL, n BIGINT, t TIMESTAMP, x DOUBLE"))
    out.append_row(["a", 3, 7, 1])
    out.row(user="b", t=datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=datetime.timezone.utc))
    rows = out.finish()
    assert rows.to_list() == [["a", 3, 7, 1.0], ["b", None, 1_000_000, None]]
    assert isinstance(rows.floats("x")[0], float), "an int goes into a DOUBLE column as a float"
    assert rows._columns[1].validity == bytes([0b01])


def test_output_validity_bitmaps_follow_arrows_layout():
    out = Output(Schema.parse("n BIGINT"))
    for i in range(10):
        out.append_row([None if i in (0, 9) else i])
    assert out.finish()._columns[0].validity == bytes([0b11111110, 0b00000001])


@pytest.mark.parametrize(
    "values,message",
    [
        (["a", "3", 1, 1.0], r"column `n BIGINT` needs an int, got str '3'"),
        ([None, 3, 1, 1.0], r"column `user STRING NOT NULL` cannot hold None"),
        (["a", True, 1, 1.0], r"column `n BIGINT` needs an int, got bool"),
        (["a", 1, 1.5, 1.0], r"column `t TIMESTAMP` needs an int \(µs since the epoch\) or a datetime"),
        (["a", 1, 1, "x"], r"column `x DOUBLE` needs a float"),
        (["a", 1 << 63, 1, 1.0], r"column `n BIGINT` cannot hold 9223372036854775808: it does not fit in 64 bits"),
        (["a"], r"row has 1 values but the schema .* has 4 columns"),
    ],
)
def test_bad_output_rows_are_refused_whole(values, message):
    out = Output(Schema.parse("user STRING NOT NULL, n BIGINT, t TIMESTAMP, x DOUBLE"))
    with pytest.raises(EddyError, match="cannot append an output row: " + message):
        out.append_row(values)
    assert len(out) == 0


def test_output_by_name_refuses_unknown_and_unset_columns():
    out = Output(Schema.parse("user STRING NOT NULL, n BIGINT"))
    with pytest.raises(EddyError, match="no column `nope`"):
        out.row(user="a", nope=1)
    with pytest.raises(EddyError, match="column `user STRING NOT NULL` was not set"):
        out.row(n=1)
    assert len(out) == 0


def test_keys_check_part_types():
    key = Key(["alice", 7], [DataType.UTF8, DataType.INT64])
    assert key.str(0) == "alice" and key.int(1) == 7 and key == ["alice", 7]
    assert str(key) == "(alice, 7)" and str(Key(["bob"])) == "bob"
    with pytest.raises(EddyError, match="key \\(alice, 7\\): part 0 is STRING, not BIGINT"):
        key.int(0)
    with pytest.raises(EddyError, match="has 2 part\\(s\\); there is no part 2"):
        key.str(2)


def test_time_helpers():
    assert micros(datetime.timedelta(minutes=5)) == micros(seconds=300) == 300_000_000
    moment = datetime.datetime(2026, 11, 29, 8, 0, 10, tzinfo=datetime.timezone.utc)
    assert to_datetime(from_datetime(moment)) == moment
    assert utc_date(0) == "1970-01-01" and utc_date(-1) == "1969-12-31"
    assert utc_date(1_700_000_000_000_000) == "2023-11-14" and utc_date(951_782_400_000_000) == "2000-02-29"


def test_arrow_and_pandas_conversions_or_a_clear_error():
    rows = batch("user STRING, n BIGINT", [["a", 1], ["b", None]])
    if importlib.util.find_spec("pyarrow") is None:
        with pytest.raises(EddyError, match="needs the pyarrow module"):
            rows.to_pyarrow()
    else:
        assert rows.to_pyarrow().to_pylist() == [{"user": "a", "n": 1}, {"user": "b", "n": None}]
    if importlib.util.find_spec("pandas") is None:
        with pytest.raises(EddyError, match="needs the pandas module"):
            rows.to_pandas()
    else:
        assert list(rows.to_pandas()["user"]) == ["a", "b"]
