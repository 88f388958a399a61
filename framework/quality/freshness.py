"""Source freshness (dbt's `source freshness`): how old each source's newest data is, against the
`freshness: {warn_after, error_after}` it declares.

A run over stale input succeeds and writes stale figures; checked before a scheduled run, an
input that stopped arriving is a failure with its reason (retried like any other: the data may
come), instead of a quiet gap. Measured without Spark, so `tributary freshness` answers at once and
the scheduler checks before it starts a JVM:

- a source with a plain `event_time` column: its newest event time, from Parquet files' footer
  statistics (no rows read) or a Delta table's data (delta-rs);
- otherwise (JSON, CSV and text files, an event time that is a SQL expression, a footer without
  statistics): the newest modification time of its files, or a Delta table's last commit time;
  `measured on` says which.

A source with no file, or no row with an event time, has no age: it is an error when it declares
`error_after` (a source that never arrived is as late as one can be), else a warning.
"""

from __future__ import annotations

import glob
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from framework.io.locations import Warehouse, is_uri
from framework.project import Project

#: statuses, worst last
OK, WARN, ERROR = "ok", "warn", "error"
EVENT_TIME, FILE_TIME, COMMIT_TIME = "newest event time", "newest file time", "last commit time"


@dataclass(frozen=True)
class SourceAge:
    """One source's freshness at a moment."""

    source: str
    measured_on: str  # EVENT_TIME | FILE_TIME | COMMIT_TIME (and the column or why not)
    newest: datetime | None  # None: no data
    age_s: float | None
    warn_after: float | None
    error_after: float | None
    status: str  # OK | WARN | ERROR

    @property
    def line(self) -> str:
        """One line saying it: `calls: 2 h 5 min old (newest file time 2026-11-02T08:00Z); warn_after 1 h`."""
        if self.newest is None:
            return f"source {self.source}: no data yet ({self.measured_on})"
        age = duration_text(self.age_s or 0.0)
        limit = self.error_after if self.status == ERROR else self.warn_after
        past = ""
        if self.status != OK and limit is not None:
            past = f", past {'error_after' if self.status == ERROR else 'warn_after'} {duration_text(limit)}"
        return f"source {self.source}: {age} old ({self.measured_on} {self.newest.isoformat(timespec='seconds')}){past}"

    def as_dict(self) -> dict[str, Any]:
        found = asdict(self)
        found["newest"] = self.newest.isoformat() if self.newest is not None else None
        return found


def pipeline_ages(
    project: Project, warehouse: Warehouse, spec: Any, now: datetime, storage_options: dict[str, str] | None = None
) -> list[SourceAge]:
    """The freshness of each source of the pipeline `spec` that declares one, in its order."""
    from framework.io.sources import source_location

    found = []
    for name, source in spec.sources.items():
        freshness = getattr(source, "freshness", None)
        if freshness is None:
            continue
        measured_on, newest = _newest(source, source_location(project, warehouse, source), storage_options or {})
        age = max((now - newest).total_seconds(), 0.0) if newest is not None else None
        found.append(
            SourceAge(name, measured_on, newest, age, freshness.warn_after, freshness.error_after, _status(age, freshness))
        )
    return found


def worst(ages: list[SourceAge]) -> str:
    order = [OK, WARN, ERROR]
    return max((a.status for a in ages), key=order.index, default=OK)


def _status(age: float | None, freshness: Any) -> str:
    if age is None:
        return ERROR if freshness.error_after is not None else WARN
    if freshness.error_after is not None and age > freshness.error_after:
        return ERROR
    if freshness.warn_after is not None and age > freshness.warn_after:
        return WARN
    return OK


def _newest(spec: Any, location: str, storage_options: dict[str, str]) -> tuple[str, datetime | None]:
    column = spec.event_time if spec.event_time is not None and _plain_column(spec.event_time) else None
    if spec.format == "delta":
        return _delta_newest(location, column, storage_options)
    files = _files(location)
    if column is not None and spec.format == "parquet" and files:
        from framework.io.parquet_footers import NoStatistics, newest_micros

        try:
            micros = newest_micros(files, column)
        except NoStatistics as e:
            return f"{FILE_TIME} (the footers cannot tell {column}: {e})", _newest_mtime(files)
        return f"{EVENT_TIME} ({column}, from Parquet footers)", _from_micros(micros)
    why = "" if column is None or not files else f" ({spec.format} files: their {column} is read only by Spark)"
    return FILE_TIME + why, _newest_mtime(files)


def _delta_newest(location: str, column: str | None, storage_options: dict[str, str]) -> tuple[str, datetime | None]:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(location, storage_options=storage_options or None)
    except (TableNotFoundError, OSError):
        return COMMIT_TIME, None
    if column is not None:
        import pyarrow as pa
        import pyarrow.compute as pc

        actions = pa.table(table.get_add_actions(flatten=True))
        if f"max.{column}" in actions.column_names:  # the files' statistics in the Delta log: no rows read
            values, said = actions.column(f"max.{column}"), "from the Delta log's statistics"
        else:
            values, said = table.to_pyarrow_dataset().to_table(columns=[column]).column(column), "read with delta-rs"
        newest = pc.max(values).as_py() if len(values) else None
        if newest is not None and not isinstance(newest, datetime):
            return f"{COMMIT_TIME} ({column} is not a timestamp)", _commit_time(table)
        if newest is not None and newest.tzinfo is None:
            newest = newest.replace(tzinfo=UTC)
        return f"{EVENT_TIME} ({column}, {said})", newest
    return COMMIT_TIME, _commit_time(table)


def _commit_time(table: Any) -> datetime | None:
    history = table.history(1)
    stamp = history[0].get("timestamp") if history else None
    return datetime.fromtimestamp(stamp / 1000, UTC) if stamp is not None else None


def _files(location: str) -> list[str]:
    """The files of a file source (a file, a folder read recursively, or a glob); templated parts
    of a path ({{ interval_start }}) are read as 'any'."""
    if is_uri(location) and not location.startswith("file:"):
        return []  # object stores: measured by Spark only
    text = location.removeprefix("file://").removeprefix("file:")
    if "{{" in text or "{%" in text:
        text = text[: min(i for i in (text.find("{{"), text.find("{%")) if i >= 0)] + "*"
    path = Path(text)
    if path.is_file():
        return [str(path)]
    if path.is_dir():
        return [str(p) for p in path.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))]
    return sorted(f for f in glob.glob(text, recursive=True) if os.path.isfile(f))


def _newest_mtime(files: list[str]) -> datetime | None:
    times = [os.path.getmtime(f) for f in files]
    return datetime.fromtimestamp(max(times), UTC) if times else None


def _from_micros(micros: int | None) -> datetime | None:
    return datetime.fromtimestamp(micros / 1_000_000, UTC) if micros is not None else None


def _plain_column(text: str) -> bool:
    return text.replace("_", "a").replace(".", "a").isalnum()


def duration_text(seconds: float) -> str:
    """`1 d 2 h`, `3 h 5 min`, `42 s`: an age as read at a glance."""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    shown = [f"{n} {unit}" for n, unit in parts if n][:2]
    return " ".join(shown) or "0 s"
