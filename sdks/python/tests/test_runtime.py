"""The component glue, driven through componentize-py's generated binding types with an
in-memory state backend (the real imports only exist inside a component)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import eddy_guest
from eddy_guest import EddyError, StatefulProcessor, export, runtime
from eddy_guest.store import MemoryBackend

SDK = Path(eddy_guest.__file__).resolve().parent
REPO_WIT = SDK.parents[2] / "wit" / "processor.wit"


def test_the_packaged_wit_is_the_repositorys():
    if not REPO_WIT.exists():
        pytest.skip("not running from the eddy repository")
    assert (SDK / "wit" / "processor.wit").read_bytes() == REPO_WIT.read_bytes(), (
        "copy wit/processor.wit to sdks/python/eddy_guest/wit/"
    )
    assert 'wit_directory = "wit"' in (SDK / "componentize-py.toml").read_text()


@pytest.fixture(scope="module")
def wit(tmp_path_factory):
    tool = shutil.which("componentize-py") or str(Path(sys.executable).with_name("componentize-py"))
    if not Path(tool).exists():
        pytest.skip("componentize-py is not installed")
    out = tmp_path_factory.mktemp("bindings")
    subprocess.run([tool, "-d", str(SDK / "wit"), "-w", "processor", "bindings", str(out)], check=True,
                   capture_output=True)
    sys.path.insert(0, str(out))
    try:
        from wit_world.imports import types

        yield types
    finally:
        sys.path.remove(str(out))


@pytest.fixture
def memory(monkeypatch):
    backend = MemoryBackend()
    monkeypatch.setattr(runtime, "backend_factory", lambda: backend)
    return backend


class Sum(StatefulProcessor):
    def init(self, ctx):
        ctx.set_output_schema("user STRING NOT NULL, total DOUBLE, note STRING")
        ctx.set_time_mode("processing-time")
        self.total = ctx.value_state("total", float, ttl=60_000_000)
        self.config = ctx.config

    def handle_input_rows(self, key, rows, timer_values, output):
        if key.str(0) == "crash":
            raise KeyError("no such thing")
        total = self.total.get(0.0) + sum(v for v in rows.floats("v") if v is not None)
        self.total.update(total)
        output.row(user=key.str(0), total=total, note=None if total < 10 else "big ü")


def context(wit, config="{}"):
    field = wit.Field
    return wit.InitContext(
        input_schema=[field("user", wit.DataType.UTF8, True), field("v", wit.DataType.FLOAT64, True)],
        key_schema=[field("user", wit.DataType.UTF8, True)],
        output_mode=wit.OutputMode.UPDATE, initial_state_schema=None, event_time_column=None, config=config,
        query=wit.QueryInfo("query-1", "run-1"),
    )


def test_init_declares_the_spec(wit, memory):
    spec = export(Sum)().init(context(wit))
    assert spec.state == [wit.StateDeclaration("total", wit.StateKind.VALUE, 60_000_000)]
    assert [(f.name, f.data_type, f.nullable) for f in spec.output_schema] == [
        ("user", wit.DataType.UTF8, False), ("total", wit.DataType.FLOAT64, True), ("note", wit.DataType.UTF8, True),
    ]
    assert spec.time_mode == wit.TimeMode.PROCESSING_TIME and spec.accepts_late_rows is False


def test_rows_cross_the_boundary_in_columnar_form(wit, memory):
    handler = export(Sum)()
    handler.init(context(wit))
    users = wit.ColumnValues_Utf8(wit.VarLen(b"aaa", [0, 1, 2, 3]))
    values = wit.ColumnValues_Float64([4.0, 0.0, 7.5])
    batch = wit.RowBatch(3, [wit.Column(users, None), wit.Column(values, bytes([0b101]))])
    out = handler.handle_input_rows([wit.KeyRows([wit.Scalar_Utf8("a")], 3)], batch, wit.TimerValues(0, 0, None))
    assert out.ends == [1]
    out = out.rows
    assert out.num_rows == 1
    assert out.columns[0] == wit.Column(wit.ColumnValues_Utf8(wit.VarLen(b"a", [0, 1])), None)
    assert out.columns[1] == wit.Column(wit.ColumnValues_Float64([11.5]), None)
    assert out.columns[2] == wit.Column(wit.ColumnValues_Utf8(wit.VarLen("big ü".encode(), [0, 6])), None)
    empty = wit.RowBatch(0, [wit.Column(wit.ColumnValues_Utf8(wit.VarLen(b"", [0])), None),
                             wit.Column(wit.ColumnValues_Float64([]), None)])
    memory.key = b"b"  # the host scopes state to the key; the test backend needs telling
    out = handler.handle_input_rows([wit.KeyRows([wit.Scalar_Utf8("b")], 0)], empty, wit.TimerValues(0, 0, None)).rows
    assert out.columns[2] == wit.Column(wit.ColumnValues_Utf8(wit.VarLen(b"", [0, 0])), bytes([0])), "one null row"


def test_exceptions_become_the_handlers_error_with_type_and_traceback(wit, memory):
    from componentize_py_types import Err

    handler = export(Sum)()
    handler.init(context(wit))
    batch = wit.RowBatch(0, [wit.Column(wit.ColumnValues_Utf8(wit.VarLen(b"", [0])), None),
                             wit.Column(wit.ColumnValues_Float64([]), None)])
    with pytest.raises(Err) as failure:
        handler.handle_input_rows([wit.KeyRows([wit.Scalar_Utf8("crash")], 0)], batch, wit.TimerValues(0, 0, None))
    message = failure.value.value
    assert message.startswith("KeyError: 'no such thing'\nTraceback (most recent call last):")
    assert 'raise KeyError("no such thing")' in message and len(message) < 3300
    assert "eddy_guest/runtime.py" not in message and "eddy_guest/processor.py" not in message, "the SDK's own frames are left out"

    with pytest.raises(Err) as failure:
        export(Sum)().init(context(wit, config="{not json"))
    assert "invalid processor config {not json" in failure.value.value

    with pytest.raises(Err) as failure:
        handler.handle_input_rows([wit.KeyRows([wit.Scalar_Utf8("a")], 1)], wit.RowBatch(1, []), wit.TimerValues(0, 0, None))
    assert "batch has 0 columns but its schema (user STRING, v DOUBLE) has 2" in failure.value.value


class Windows(StatefulProcessor):
    """Per key: counts its rows, registers a timer per row's `v`, and on a timer deletes
    the key's next timer (so that one is skipped) and outputs what it saw."""

    def init(self, ctx):
        ctx.set_output_schema("user STRING NOT NULL, seen BIGINT, info STRING")
        ctx.set_time_mode("event-time")
        self.info = f"{ctx.query_info.id}/{ctx.query_info.run_id}"
        self.timers = ctx.timers()
        ctx.delete_if_exists("retired")

    def handle_input_rows(self, key, rows, timer_values, output):
        assert len(output) == 0, "each key starts with no rows of its own"
        values = [int(v) for v in rows.column("v") if v is not None]
        for v in values:
            self.timers.register(v)
        output.row(user=key.str(0), seen=len(values), info=f"{self.info}@{timer_values.batch_id}")

    def handle_expired_timer(self, key, timer_values, timer, output):
        self.timers.delete(timer.expiry_time + 1)
        output.row(user=key.str(0), seen=timer.expiry_time, info=None)


def test_one_call_handles_several_keys_and_their_timers(wit, memory):
    handler = export(Windows)()
    assert handler.init(context(wit)).deleted_state == ["retired"]
    users = wit.ColumnValues_Utf8(wit.VarLen(b"aabbb", [0, 1, 2, 3, 4, 5]))
    values = wit.ColumnValues_Float64([10.0, 11.0, 20.0, 0.0, 22.0])
    batch = wit.RowBatch(5, [wit.Column(users, None), wit.Column(values, bytes([0b10111]))])
    keys = [wit.KeyRows([wit.Scalar_Utf8("a")], 2), wit.KeyRows([wit.Scalar_Utf8("b")], 3)]
    out = handler.handle_input_rows(keys, batch, wit.TimerValues(7, 0, None))
    assert out.ends == [1, 2]
    assert out.rows.columns[1] == wit.Column(wit.ColumnValues_Int64([2, 2]), None), "b's null row is not a value"
    assert out.rows.columns[2].values.value.data == b"query-1/run-1@7query-1/run-1@7"
    assert memory.timers == {repr(["a"]).encode(): [10, 11], repr(["b"]).encode(): [20, 22]}

    due = [wit.DueTimer(0, 10), wit.DueTimer(1, 20), wit.DueTimer(0, 11), wit.DueTimer(1, 22)]
    out = handler.handle_expired_timers([[wit.Scalar_Utf8("a")], [wit.Scalar_Utf8("b")]], due,
                                        wit.TimerValues(8, 0, 30))
    assert out.ends == [1, 2, 2, 3], "a's 11 was deleted by the handler of its 10, so it does not fire"
    assert out.rows.columns[1] == wit.Column(wit.ColumnValues_Int64([10, 20, 22]), None)
    assert memory.timers == {repr(["a"]).encode(): [], repr(["b"]).encode(): []}


class Big(StatefulProcessor):
    def init(self, ctx):
        ctx.set_output_schema("user STRING NOT NULL, blob STRING")

    def handle_input_rows(self, key, rows, timer_values, output):
        output.row(user=key.str(0), blob="x" * (5 << 20))


def test_a_call_returns_before_its_next_key_once_its_output_passes_8_mib(wit, memory):
    handler = export(Big)()
    handler.init(context(wit))
    users = wit.ColumnValues_Utf8(wit.VarLen(b"abc", [0, 1, 2, 3]))
    batch = wit.RowBatch(3, [wit.Column(users, None), wit.Column(wit.ColumnValues_Float64([0.0] * 3), None)])
    keys = [wit.KeyRows([wit.Scalar_Utf8(user)], 1) for user in "abc"]
    out = handler.handle_input_rows(keys, batch, wit.TimerValues(0, 0, None))
    assert out.ends == [1, 2], "a and b make 10 MiB: c is left for the next call"
    out = handler.handle_input_rows(keys[2:], wit.RowBatch(1, [
        wit.Column(wit.ColumnValues_Utf8(wit.VarLen(b"c", [0, 1])), None),
        wit.Column(wit.ColumnValues_Float64([0.0]), None)]), wit.TimerValues(0, 0, None))
    assert out.ends == [1]


def test_export_checks_its_argument():
    with pytest.raises(EddyError, match="export\\(\\) takes a subclass of eddy_guest.StatefulProcessor"):
        export(object)
    assert export(Sum).processor_class is Sum and export(Sum).__name__ == "Handler"
