"""What `init` receives and declares."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from .errors import EddyError
from .schema import Schema
from .state import ListState, MapState, Ttl, ValueState, ttl_micros
from .store import TIME_MODES, Store
from .timers import Timers
from .typed import check_type

OUTPUT_MODES = ("append", "update", "complete")


@dataclass(frozen=True)
class QueryInfo:
    """Which query and which run of it the processor is part of (Spark's `QueryInfo`)."""

    #: The query's id: kept in the checkpoint, the same across restarts.
    id: str
    #: This run's id: new each time the query starts.
    run_id: str


@dataclass
class StateDecl:
    """A declared state variable: name, kind (value, list or map) and TTL in µs."""

    name: str
    kind: str
    ttl: Optional[int]


@dataclass
class Spec:
    """Everything `init` declared."""

    state: list = field(default_factory=list)
    output_schema: Schema = field(default_factory=Schema)
    time_mode: str = "none"
    accepts_late_rows: bool = False
    deleted_state: list = field(default_factory=list)
    initial_state_schema: Optional[Schema] = None


class InitContext:
    """What `StatefulProcessor.init` receives: the query's schemas, output mode and
    config, and where the processor declares state, output schema and time mode."""

    def __init__(self, input_schema: Schema, key_schema: Schema, output_mode: str, config_json: str,
                 store: Store, event_time_column: Optional[str] = None,
                 query_info: Optional[QueryInfo] = None) -> None:
        #: The schema of the rows handed to `handle_input_rows`.
        self.input_schema = input_schema
        #: The schema of the key (the grouping columns, in order).
        self.key_schema = key_schema
        #: The query's output mode: "append", "update" or "complete".
        self.output_mode = output_mode
        #: The input's event-time column, when the query has a watermark.
        self.event_time_column = event_time_column
        #: The operator's `config` table from the pipeline spec, as JSON text.
        self.config_json = config_json
        #: The query and run the processor is part of (Spark's `getQueryInfo`); the
        #: batch id is in each handler's `TimerValues`.
        self.query_info = query_info or QueryInfo("harness-query", "harness-run")
        self._store = store
        self.spec = Spec()

    @property
    def config(self) -> dict:
        """The operator's config table, parsed (`{}` when the spec has none)."""
        text = self.config_json if self.config_json.strip() else "{}"
        try:
            value = json.loads(text)
        except ValueError as e:
            raise EddyError(f"invalid processor config {text}: {e}; fix the operator's `config` table in the pipeline spec") from None
        if not isinstance(value, dict):
            raise EddyError(f"the processor config {text} is not a table (JSON object)")
        return value

    def _declare(self, name: str, kind: str, ttl: Ttl) -> None:
        if not isinstance(name, str) or not name:
            raise EddyError("a state variable needs a non-empty name")
        if any(d.name == name for d in self.spec.state):
            raise EddyError(f"state variable `{name}` is declared twice; give each variable its own name")
        self.spec.state.append(StateDecl(name, kind, ttl_micros(ttl, name)))

    def value_state(self, name: str, type: Any = None, ttl: Ttl = None) -> ValueState:
        """Declares a value state variable (one value of `type` per key); keep the handle.
        `type` is a plain type or a dataclass (None: any CBOR-able value); `ttl` a
        `timedelta` or microseconds, counted from each write."""
        check_type(type, f"state variable `{name}`")
        self._declare(name, "value", ttl)
        return ValueState(name, self._store, type)

    def list_state(self, name: str, type: Any = None, ttl: Ttl = None) -> ListState:
        """Declares a list state variable (an ordered list of `type` per key)."""
        check_type(type, f"state variable `{name}`")
        self._declare(name, "list", ttl)
        return ListState(name, self._store, type)

    def map_state(self, name: str, key_type: Any = None, value_type: Any = None, ttl: Ttl = None) -> MapState:
        """Declares a map state variable (a map of `key_type` to `value_type` per key)."""
        check_type(key_type, f"state variable `{name}` (key type)")
        check_type(value_type, f"state variable `{name}` (value type)")
        self._declare(name, "map", ttl)
        return MapState(name, self._store, key_type, value_type)

    def timers(self) -> Timers:
        """The timers handle; timers need a time mode other than "none"."""
        return Timers(self._store)

    def set_output_schema(self, schema: Union[str, Schema]) -> None:
        """Declares the output rows' schema, e.g. "user STRING, count BIGINT"."""
        self.spec.output_schema = Schema.of(schema)

    def set_time_mode(self, mode: str) -> None:
        """Declares how timers are driven: "none" (default), "processing-time" or "event-time"."""
        mode = getattr(mode, "value", mode)
        if mode not in TIME_MODES:
            raise EddyError(f"unknown time mode {mode!r}; use one of {', '.join(TIME_MODES)}")
        self.spec.time_mode = mode
        self._store.time_mode = mode

    def delete_if_exists(self, name: str) -> None:
        """Deletes the data of state variable `name`, which an earlier version of this
        processor declared and this one no longer does (Spark's `deleteIfExists`): the
        host deletes it with the next batch instead of refusing the checkpoint. A name
        the checkpoint does not hold is ignored; do not also declare it."""
        if name not in self.spec.deleted_state:
            self.spec.deleted_state.append(name)

    def set_accepts_late_rows(self, accepts: bool = True) -> None:
        """Asks the host to hand over late rows instead of dropping them."""
        self.spec.accepts_late_rows = bool(accepts)

    def set_initial_state_schema(self, schema: Union[str, Schema]) -> None:
        """Sets the initial-state rows' schema (the host sets it from the pipeline's
        `operator.initial-state.schema`; a call here replaces it)."""
        self.spec.initial_state_schema = Schema.of(schema)
