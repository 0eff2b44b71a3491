"""Timers of the current key, and the clocks of a call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .errors import EddyError
from .store import Store


@dataclass(frozen=True)
class TimerValues:
    """The clocks of the current batch (µs since the epoch), constant within a batch."""

    processing_time: int
    watermark: Optional[int] = None
    #: The micro-batch's id (0, 1, 2, … across restarts; a replayed batch has its first
    #: run's id).
    batch_id: int = 0


@dataclass(frozen=True)
class ExpiredTimer:
    """The timer that fired: the time it was registered for (µs since the epoch)."""

    expiry_time: int


class Timers:
    """The current key's timers, from `ctx.timers()` in init.

    They live in the domain of the declared time mode: processing-time timers fire once
    a batch's processing time reaches them, event-time timers once the watermark does.
    Registering the same time twice keeps one timer; a timer is removed before its
    `handle_expired_timer` call, which may register it again.
    """

    def __init__(self, store: Store) -> None:
        self._store = store

    def _backend(self):
        self._store.check_active("timers")
        if self._store.time_mode == "none":
            raise EddyError(
                "timers need a time mode: call ctx.set_time_mode(\"processing-time\") (or "
                "\"event-time\") in init"
            )
        return self._store.backend

    @staticmethod
    def _check(expiry: int) -> int:
        if isinstance(expiry, bool) or not isinstance(expiry, int):
            raise EddyError(f"a timer's expiry time is an int of µs since the epoch, not {expiry!r}")
        if not -(1 << 63) <= expiry < (1 << 63):
            raise EddyError(f"a timer's expiry time must fit a signed 64-bit int of µs, not {expiry}")
        return expiry

    def register(self, expiry_time: int) -> None:
        """Registers a timer for the current key at `expiry_time`."""
        self._backend().timer_register(self._check(expiry_time))

    def delete(self, expiry_time: int) -> None:
        """Deletes the current key's timer at `expiry_time`, if there is one."""
        self._backend().timer_delete(self._check(expiry_time))

    def list(self) -> list:
        """The current key's timers, earliest first."""
        return self._backend().timer_list()
