"""Messages to the operator's log: `log.info("...")`, `log.warn(...)`, ...

In a component the host tags each message with the module and the current key; under
the test harness messages are captured (`Harness.logs`); elsewhere they go to stderr.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, List, Optional

LEVELS = ("trace", "debug", "info", "warn", "error")


@dataclass(frozen=True)
class LogRecord:
    """One captured message."""

    level: str
    message: str


#: Where messages go instead of stderr: the component's host, or the harness's list.
_sink: Optional[Callable[[str, str], None]] = None
_captured: Optional[List[LogRecord]] = None


def set_sink(sink: Optional[Callable[[str, str], None]]) -> None:
    """Routes messages to `sink(level, message)` (used by the component glue)."""
    global _sink
    _sink = sink


def capture_start() -> None:
    global _captured
    _captured = []


def capture_take() -> List[LogRecord]:
    global _captured
    records, _captured = _captured or [], None
    return records


def log(level: str, message: object) -> None:
    """Writes `message` at `level` (one of trace, debug, info, warn, error)."""
    if level not in LEVELS:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LEVELS)}")
    text = str(message)
    if _captured is not None:
        _captured.append(LogRecord(level, text))
    elif _sink is not None:
        _sink(level, text)
    else:
        print(f"[{level.upper()}] {text}", file=sys.stderr)


def trace(message: object) -> None:
    log("trace", message)


def debug(message: object) -> None:
    log("debug", message)


def info(message: object) -> None:
    log("info", message)


def warn(message: object) -> None:
    log("warn", message)


def error(message: object) -> None:
    log("error", message)
