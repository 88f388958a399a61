"""Durations written the way analysts write them: 30s, 5 min, 1.5h, 500ms, '10 seconds'."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

_UNITS = {
    "ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
}  # fmt: skip
_PATTERN = re.compile(r"^\s*(\d{1,15}(?:\.\d{1,9})?)\s*([a-zA-Z]+)?\s*$")
#: Longer than this is surely a mistake, and longer still overflows Spark's intervals.
MAX_SECONDS = 10 * 366 * 86400


def parse_seconds(value: Any) -> float:
    """Seconds in a duration; a bare number means seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number with a unit, e.g. 30s")
    if isinstance(value, (int, float)):
        seconds = float(value) if abs(value) <= MAX_SECONDS else math.inf
    else:
        match = _PATTERN.match(str(value))
        unit = (match.group(2) or "s").lower() if match else None
        if not match or unit not in _UNITS:
            raise ValueError(f"'{value}' is not a duration; write e.g. 500ms, 30s, 5min, 2h")
        seconds = float(match.group(1)) * _UNITS[unit]
    if math.isnan(seconds):
        raise ValueError("a duration must be a number of seconds, not NaN")
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    if seconds > MAX_SECONDS:
        raise ValueError("a duration longer than 10 years is surely a mistake; write e.g. 30s, 5min, 2h, 7d")
    return seconds


def spark_interval(seconds: float) -> str:
    """The form Spark's withWatermark / trigger accept."""
    millis = round(seconds * 1000)
    return f"{millis // 1000} seconds" if millis % 1000 == 0 else f"{millis} milliseconds"


Duration = Annotated[
    float,
    BeforeValidator(parse_seconds),
    PlainSerializer(lambda s: spark_interval(s), return_type=str),
    WithJsonSchema({"type": ["string", "number"], "description": "A duration: 500ms, 30s, 5min, 2h (a bare number is seconds)."}),
]
