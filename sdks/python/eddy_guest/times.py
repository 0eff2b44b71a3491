"""Times are ints: microseconds since the Unix epoch (UTC); durations are microseconds."""

from __future__ import annotations

import datetime
from typing import Union

MICROS_PER_SECOND = 1_000_000
MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def micros(duration: Union[datetime.timedelta, int, float] = 0, *, days: float = 0, hours: float = 0,
           minutes: float = 0, seconds: float = 0, millis: float = 0) -> int:
    """A duration in microseconds: `micros(timedelta(minutes=5))` or `micros(seconds=300)`.
    An int is taken as microseconds already."""
    if isinstance(duration, datetime.timedelta):
        total = duration // datetime.timedelta(microseconds=1)
    else:
        total = int(duration)
    extra = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * MICROS_PER_SECOND + millis * 1000
    return total + round(extra)


def from_datetime(value: datetime.datetime) -> int:
    """Microseconds since the epoch of `value` (a naive datetime is taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return (value - _EPOCH) // datetime.timedelta(microseconds=1)


def to_datetime(micros_since_epoch: int) -> datetime.datetime:
    """The UTC datetime of `micros_since_epoch`."""
    return _EPOCH + datetime.timedelta(microseconds=micros_since_epoch)


def utc_date(micros_since_epoch: int) -> str:
    """The UTC date (`YYYY-MM-DD`) of `micros_since_epoch`."""
    days = micros_since_epoch // MICROS_PER_DAY
    return (datetime.date(1970, 1, 1) + datetime.timedelta(days=days)).isoformat()
