"""`schedule:` in a pipeline: when `tributary scheduler` runs it, how it retries, what it tells.

A batch pipeline's run covers the interval from the schedule's previous fire to the fire that
started it (framework.spec.intervals); a streaming pipeline's run processes what is new (available
now) and has no interval. Only the scheduler, `next` and `backfill` read this block, and they read
it from the YAML alone (framework.schedule), so a pipeline whose other parts break between two
fires still has its failed run logged at its fire.

What would make the scheduler's arithmetic fail is refused here, at the line that says it: a
`start:` or `end:` out of range (framework.spec.intervals.EARLIEST / LATEST). How many runs a
schedule has left to catch up is not a property of the spec: it depends on the run history and
the clock, so the scheduler bounds it (framework.schedule.due) and `validate` asks it there.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator, model_validator

from framework.spec.base import Name, SpecModel, problem_at
from framework.spec.durations import Duration
from framework.spec.intervals import EARLIEST, LATEST, MAX_CATCH_UP, Cron, instant, zone


class Retries(SpecModel):
    """A failed run is tried again `count` times; the n-th retry waits delay × backoff^(n-1), at most max_delay."""

    count: int = Field(0, ge=0, le=100, description="How many times a failed run is tried again.")
    delay: Duration = Field(60.0, description="Wait before the first retry, e.g. 30s, 5min.")
    backoff: float = Field(2.0, ge=1.0, le=10.0, description="Each further retry waits this many times longer.")
    max_delay: Duration = Field(3600.0, description="The longest wait between two attempts.")

    def wait(self, failures: int) -> float:
        """Seconds to wait after the `failures`-th failed attempt."""
        return min(self.delay * self.backoff ** max(failures - 1, 0), self.max_delay)


def _retries(value: Any) -> Any:
    """`retries: 3` is short for `retries: {count: 3}`."""
    if isinstance(value, bool):
        raise ValueError("retries is a count (retries: 3) or a mapping (retries: {count: 3, delay: 1min, backoff: 2})")
    return {"count": value} if isinstance(value, int) else value


def _count_or_retries(schema: dict[str, Any]) -> None:
    """In the JSON Schema, `retries` is a count or the mapping (as the validator reads it)."""
    ref = schema.pop("$ref", None) or schema.pop("allOf")[0]["$ref"]
    schema["anyOf"] = [{"type": "integer", "minimum": 0, "maximum": 100}, {"$ref": ref}]


def _command(value: Any) -> Any:
    if isinstance(value, str) and not value.strip():
        raise ValueError("an alert command cannot be empty")
    if isinstance(value, list) and (not value or not all(isinstance(v, str) and v for v in value)):
        raise ValueError("an alert command as a list is the program and its arguments, all text")
    return value


Command = Annotated[str | list[str], BeforeValidator(_command)]


def _catch_up(value: Any) -> Any:
    """`catch_up: all` is `true`, `latest` is `false`; a number N is the N latest missed intervals."""
    if isinstance(value, str) and value.strip().lower() in ("all", "latest"):
        return value.strip().lower() == "all"
    if isinstance(value, bool) or (isinstance(value, int) and 1 <= value <= MAX_CATCH_UP):
        return value
    raise ValueError(
        f"catch_up is all (or true), latest (or false), or how many of the latest missed intervals to run "
        f"(1 to {MAX_CATCH_UP:,}), not {value!r}"
    )


def _catch_up_schema(schema: dict[str, Any]) -> None:
    """In the JSON Schema, `catch_up` is what the validator reads."""
    schema.pop("anyOf", None)
    schema["anyOf"] = [
        {"type": "boolean"},
        {"enum": ["all", "latest"]},
        {"type": "integer", "minimum": 1, "maximum": MAX_CATCH_UP},
    ]


CatchUp = Annotated[bool | int, BeforeValidator(_catch_up)]


class Schedule(SpecModel):
    """When the pipeline runs by itself (`tributary scheduler`), and what a run may take."""

    cron: str = Field(description="Five cron fields (minute hour day month weekday) or @hourly/@daily/..., e.g. '0 * * * *'.")
    timezone: str = Field(
        "UTC", description="IANA timezone the cron is read in (and intervals are shown in), e.g. Europe/Berlin."
    )
    start: datetime | date | None = Field(
        None,
        description="No interval starts before this (naive: in `timezone`); with catch_up, the scheduler runs every interval "
        f"since. Between {EARLIEST.date()} and {LATEST.date()}.",
    )
    end: datetime | date | None = Field(
        None, description=f"No interval ends after this (naive: in `timezone`). Between {EARLIEST.date()} and {LATEST.date()}."
    )
    catch_up: CatchUp = Field(
        True,
        description="Which missed intervals (since `start`, else since the newest one the scheduler ran) a batch schedule "
        "runs, oldest first: all (true, the default), latest (false: the latest only), or a number N: at most the N latest "
        f"(older ones are for `tributary backfill`). With all, more than {MAX_CATCH_UP:,} intervals left to run (not "
        "yet run or failed out, per the run log) is refused: set catch_up: N.",
        json_schema_extra=_catch_up_schema,
    )
    retries: Annotated[Retries, BeforeValidator(_retries)] = Field(
        default_factory=Retries,
        description="A count (retries: 3) or how to retry: {count: 3, delay: 1min, backoff: 2, max_delay: 1h}.",
        json_schema_extra=_count_or_retries,
    )
    timeout: Duration | None = Field(None, gt=0, description="Abandon a run (its Spark jobs are cancelled) after this long.")
    on_failure: Command | None = Field(
        None,
        description="Command run when a run failed and has no retry left, the run's summary as JSON on stdin "
        "(text: through /bin/sh; a list: the program and its arguments).",
    )
    on_success: Command | None = Field(None, description="Command run after each successful run, its summary as JSON on stdin.")
    after: list[Name] = Field(
        default_factory=list,
        description="Pipelines (by name) whose intervals this one waits for: an interval runs once each of them has "
        "committed intervals that together cover it (the same interval, a longer one holding it, or shorter ones tiling "
        "it). Until then the scheduler waits, and `tributary next` says for what.",
    )

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        Cron(value)  # ValueError names what is wrong with it
        return value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        zone(value)
        return value

    @field_validator("after")
    @classmethod
    def _each_once(cls, value: list[str]) -> list[str]:
        twice = sorted({name for name in value if value.count(name) > 1})
        if twice:
            raise ValueError(f"after names {', '.join(twice)} more than once")
        return value

    @model_validator(mode="after")
    def _in_range_and_ordered(self) -> Schedule:
        start, end = self._instant("start"), self._instant("end")
        if start is not None and end is not None and start >= end:
            raise ValueError("'end' must come after 'start'")
        return self

    def _instant(self, key: str) -> datetime | None:
        value = getattr(self, key)
        try:
            return instant(value, self.timezone) if value is not None else None
        except ValueError as e:
            later = " or leave end: out (the schedule runs on)" if key == "end" else ""
            raise problem_at(key, str(e), hint=f"write a {key} between {EARLIEST.date()} and {LATEST.date()}{later}") from None

    def catch_up_limit(self) -> int | None:
        """How many of the latest missed intervals the scheduler runs (None: all of them)."""
        return None if self.catch_up is True else 1 if self.catch_up is False else int(self.catch_up)

    def parsed(self) -> Cron:
        return Cron(self.cron, self.timezone)

    def start_at(self) -> datetime | None:
        return instant(self.start, self.timezone) if self.start is not None else None

    def end_at(self) -> datetime | None:
        return instant(self.end, self.timezone) if self.end is not None else None
