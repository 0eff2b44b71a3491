"""The SDK's error type and how handler failures are reported to the host."""

from __future__ import annotations

import os
import traceback

#: How much of a traceback a handler error carries (its last part).
TRACEBACK_LIMIT = 3072


class EddyError(Exception):
    """A mistake in using the SDK (an unknown column, a value of the wrong type, state
    used outside a handler, ...) or a failure a processor raises on purpose.

    Like any exception, raising it from a handler fails the batch: the host commits
    nothing of it and shows the message with the module, the function and the key.
    """


_GLUE = {os.path.join(os.path.dirname(__file__), name) for name in ("runtime.py", "processor.py")}


def describe(error: BaseException) -> str:
    """The message a failed handler returns: type, message and the traceback's tail
    (without the SDK's own dispatching frames)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename in _GLUE:
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(error), error, tb)).rstrip()
    if len(text) > TRACEBACK_LIMIT:
        text = "...\n" + text[-TRACEBACK_LIMIT:].split("\n", 1)[-1]
    return f"{type(error).__name__}: {error}\n{text}"
