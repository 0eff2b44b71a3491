"""The shared state and timer cases (`sdks/conformance/*.json`, checked against the host
by `tests/tests/conformance.rs`) played by the harness: a Python port of the `scripted`
test guest's state and timer commands runs each step as one `Harness.run_batch`."""

import json
from pathlib import Path

import pytest

from eddy_guest import StatefulProcessor
from eddy_guest.testing import Harness

CASES = Path(__file__).resolve().parents[2] / "conformance"


class Interpreter(StatefulProcessor):
    """Runs one command per input row (`key, op, name, k, v[, at]`); outputs `key, op,
    result` for reads (the result as JSON) and for fired timers."""

    def init(self, ctx):
        config = ctx.config
        ctx.set_time_mode(config.get("time_mode", "none"))
        ctx.set_accepts_late_rows(config.get("accepts_late_rows", False))
        ctx.set_output_schema("key STRING, op STRING, result STRING")
        self.vars = {}
        for decl in config.get("state", []):
            ttl = decl.get("ttl_ms")
            ttl = None if ttl is None else ttl * 1000
            declare = {"value": ctx.value_state, "list": ctx.list_state}.get(decl["kind"])
            if declare is None:
                self.vars[decl["name"]] = ctx.map_state(decl["name"], str, str, ttl=ttl)
            else:
                self.vars[decl["name"]] = declare(decl["name"], str, ttl=ttl)
        self.timers = ctx.timers()
        self.batch_id = 0

    def run(self, op, name, k, v):
        """Runs one command: its result for a read, `...` for a write."""
        var = self.vars.get(name)
        as_list = (lambda: json.loads(v) if v.lstrip().startswith("[") else [v])
        commands = {
            "value.get": lambda: var.get(),
            "value.exists": lambda: var.exists(),
            "value.set": lambda: var.update(v),
            "value.clear": lambda: var.clear(),
            "list.get": lambda: var.get(),
            "list.exists": lambda: var.exists(),
            "list.append": lambda: var.extend(as_list()),
            "list.put": lambda: var.put(as_list()),
            "list.clear": lambda: var.clear(),
            "map.get": lambda: var.get(k),
            "map.contains": lambda: var.contains(k),
            "map.keys": lambda: var.keys(),
            "map.values": lambda: var.values(),
            "map.exists": lambda: var.exists(),
            "map.put": lambda: var.update(k, v),
            "map.remove": lambda: var.remove(k),
            "map.clear": lambda: var.clear(),
            "timer.register": lambda: self.timers.register(int(v)),
            "timer.delete": lambda: self.timers.delete(int(v)),
            "timer.list": lambda: self.timers.list(),
            "batch.id": lambda: self.batch_id,
        }
        if op == "fail":
            raise RuntimeError(v or "scripted failure")
        result = commands[op]()
        writes = ("set", "clear", "append", "put", "remove", "register", "delete")
        return ... if op.split(".")[1] in writes else result

    def handle_input_rows(self, key, rows, timer_values, output):
        self.batch_id = timer_values.batch_id
        for row in rows.to_dicts():
            result = self.run(row["op"], row["name"], row["k"], row["v"])
            if result is not ...:
                output.append_row([key.str(), row["op"], json.dumps(result)])

    def handle_expired_timer(self, key, timer_values, timer, output):
        at = timer.expiry_time
        if at % 10 == 1:
            self.timers.delete(at + 1)
            self.timers.register(at + 2)
        elif at % 10 in (7, 8):
            raise RuntimeError(f"timer {at} failed")
        output.append_row([key.str(), "timer.fired", str(at)])


def cases():
    for path in sorted(CASES.glob("*.json")):
        for case in json.loads(path.read_text())["cases"]:
            yield pytest.param(case, id=f"{path.stem}:{case['name']}")


def test_the_shared_cases_are_found():
    assert len(list(cases())) >= 10, f"{CASES} holds the shared cases"


def check_state(at, h, case, step):
    kinds = {d["name"]: d["kind"] for d in case["config"].get("state", [])}
    for key, variables in step.get("state", {}).items():
        for name, expected in variables.items():
            if kinds[name] == "value":
                seen = h.value_state(name, key, str)
            elif kinds[name] == "list":
                seen = h.list_state(name, key, str)
            else:
                seen = [list(entry) for entry in h.map_state(name, key, str, str)]
            assert seen == expected, f"{at}: key {key}'s `{name}`"
    for key, expected in step.get("timers", {}).items():
        assert h.timers(key) == expected, f"{at}: key {key}'s timers"


@pytest.mark.parametrize("case", cases())
def test_the_harness_plays_the_shared_case(case):
    event_time = case.get("event_time", False)
    schema = "key STRING, op STRING, name STRING, k STRING, v STRING" + (", at TIMESTAMP" if event_time else "")
    h = Harness(Interpreter, schema, "key STRING", config=case["config"],
                event_time_column="at" if event_time else None)
    for i, step in enumerate(case["steps"]):
        at = f"{case['name']} step {i}"
        rows = {
            key: [[key, c["op"], c.get("name"), c.get("k"), c.get("v")] + ([c.get("at")] if event_time else [])
                  for c in commands]
            for key, commands in step.get("rows", {}).items()
        }
        try:
            out = h.run_batch(rows, processing_time=step["processing_time"], watermark=step.get("watermark"))
        except Exception as e:  # noqa: BLE001 - any failure of the batch is compared with the case
            assert "error" in step, f"{at}: the batch failed: {e!r}"
            assert step["error"] in str(e), f"{at}: `{e}` does not say `{step['error']}`"
        else:
            assert "error" not in step, f"{at}: expected the error `{step['error']}`"
            seen = {}
            for key, op, result in out.to_list():
                seen.setdefault(key, []).append([op, json.loads(result)])
            expected = {key: rows for key, rows in step.get("output", {}).items() if rows}
            assert seen == expected, f"{at}: output"
        check_state(at, h, case, step)
