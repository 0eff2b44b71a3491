"""eddy-guest: write eddy processors in Python.

An eddy processor is per-key stateful logic, like a Spark `StatefulProcessor` in
`transformWithState`, built into a WebAssembly component with componentize-py. Extend
:class:`StatefulProcessor`: `init` reads the config, declares typed state
(:class:`ValueState`, :class:`ListState`, :class:`MapState`, optionally with a TTL),
the output schema and the time mode; `handle_input_rows` reads a key's :class:`Rows`
and appends rows to the :class:`Output`; `handle_expired_timer` reacts to
:class:`Timers`. In the app module, ``Handler = export(MyProcessor)`` makes it the
component's processor, and :class:`eddy_guest.testing.Harness` tests it under pytest.

State values are stored as CBOR, byte-compatible with the Rust SDK. Times are ints:
microseconds since the Unix epoch (see :mod:`eddy_guest.times`).
"""

from . import log, times
from .context import InitContext, QueryInfo
from .errors import EddyError
from .key import Key
from .output import Output
from .processor import StatefulProcessor
from .rows import Column, Row, Rows
from .runtime import export
from .schema import DataType, Field, Schema
from .state import ListState, MapState, ValueState
from .timers import ExpiredTimer, Timers, TimerValues

__version__ = "0.3.1"

__all__ = [
    "Column", "DataType", "EddyError", "ExpiredTimer", "Field", "InitContext", "Key", "ListState",
    "MapState", "Output", "QueryInfo", "Row", "Rows", "Schema", "StatefulProcessor", "TimerValues", "Timers",
    "ValueState", "export", "log", "times",
]  # fmt: skip
