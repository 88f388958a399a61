"""Before anything is written: does each output's step produce what its table and spec need?

Partition and merge columns must exist in the step's rows; appending or merging into an
existing table needs the table's columns and types. Both are bad input (exit 2), named at the
output in the YAML, for batch and streaming runs alike.
"""

from __future__ import annotations

from typing import Any

from framework.compiler import repeated_column_problems, spelling_problem
from framework.engine.context import RunContext
from framework.engine.frames import Frames
from framework.errors import BadInput, Problem


def check_outputs(run: RunContext, frames: Frames) -> None:
    problems: list[Problem] = []
    for output in run.plan.outputs:
        produced = frames.columns_of(output.step)
        columns = {c.lower() for c in produced.columns}
        for setting, wanted in (("partition_by", output.partition_by), ("keys", output.keys)):
            missing = [c for c in wanted if c.lower() not in columns]
            if missing:
                problems.append(
                    run.problem(
                        f"output '{output.name}': {setting} column(s) {missing} not in step '{output.step}'",
                        ("outputs", output.name, setting),
                        hint=f"step '{output.step}' has columns: {', '.join(produced.columns)}",
                    )
                )
            spelled = {c.lower(): c for c in produced.columns}
            problems += [
                spelling_problem(run.problem, output.name, setting, column, spelled[column.lower()], (setting, i))
                for i, column in enumerate(wanted)
                if column.lower() in spelled and spelled[column.lower()] != column
            ]
        problems += repeated_column_problems(run.problem, output.name, output.step, list(produced.columns))
        problems += _zoned_partition_problems(run, output, produced)
        problems += _unwritable_problems(run, output, produced)
        # an interval-sliced overwrite replaces only its slice: the table's other rows keep its columns
        keeps_rows = output.mode in ("append", "merge") or output.slice_by is not None
        if not keeps_rows or run.plan.full_refresh:
            continue
        partitioned = run.store.partition_columns(output.table)
        if partitioned is not None and [c.lower() for c in partitioned] != [c.lower() for c in output.partition_by]:
            problems.append(
                run.problem(
                    f"output '{output.name}': its table is partitioned by {partitioned}, and partition_by says "
                    f"{list(output.partition_by)}; {_kept_by(output)} keeps the table's rows, laid out by its "
                    "partition columns",
                    ("outputs", output.name, "partition_by") if output.partition_by else ("outputs", output.name),
                    hint=f"keep partition_by: {partitioned}, or rebuild the table with the new partitioning (run --full-refresh)",
                )
            )
            continue
        existing = run.store.schema(output.table)
        problem = _schema_problem(output.name, output.table, existing, produced.schema) if existing is not None else None
        if problem:
            problems.append(
                run.problem(
                    problem,
                    ("outputs", output.name),
                    hint="change the step to produce the table's columns, or rebuild the table with --full-refresh",
                )
            )
    if problems:
        raise BadInput(*problems)


def _unwritable_problems(run: RunContext, output: Any, produced: Any) -> list[Problem]:
    """Columns of types a Delta table cannot hold: intervals (the run failed in Arrow's or
    delta-rs' words, naming no column) and VARIANT (the run said "written", and the table could
    not be read again: its schema and its files disagreed)."""
    return [
        run.problem(
            f"output '{output.name}': column '{field.name}' is {field.dataType.simpleString()}, which a Delta table cannot hold",
            ("outputs", output.name),
            hint=_UNWRITABLE_HINTS[kind],
        )
        for field in produced.schema.fields
        if (kind := _unwritable_kind(field.dataType)) is not None
    ]


_UNWRITABLE_HINTS = {
    "interval": "write a number instead, e.g. unix_seconds(b) - unix_seconds(a) for a duration in seconds",
    "variant": "write it as JSON text: to_json(column), which parse_json reads back",
}


def _unwritable_kind(kind: Any) -> str | None:
    """'interval' or 'variant' when `kind` holds such a type at any depth, else None."""
    from pyspark.sql.types import (
        ArrayType,
        CalendarIntervalType,
        DayTimeIntervalType,
        MapType,
        StructType,
        VariantType,
        YearMonthIntervalType,
    )

    if isinstance(kind, DayTimeIntervalType | YearMonthIntervalType | CalendarIntervalType):
        return "interval"
    if isinstance(kind, VariantType):
        return "variant"
    if isinstance(kind, ArrayType):
        return _unwritable_kind(kind.elementType)
    if isinstance(kind, MapType):
        return _unwritable_kind(kind.keyType) or _unwritable_kind(kind.valueType)
    if isinstance(kind, StructType):
        return next((found for f in kind.fields if (found := _unwritable_kind(f.dataType)) is not None), None)
    return None


#: session time zones that are UTC under another name
_UTC = frozenset({"utc", "etc/utc", "gmt", "etc/gmt", "z", "zulu", "uct", "etc/uct", "universal", "+00:00", "-00:00"})


def _zoned_partition_problems(run: RunContext, output: Any, produced: Any) -> list[Problem]:
    """A TIMESTAMP partition column in a session whose time zone is not UTC: Spark names a
    partition's folder by the local time, and Delta readers (delta-rs, DuckDB, `show`, Spark in
    another zone) take that value for UTC: the values read back were hours off (exit 0)."""
    from pyspark.sql.types import TimestampType

    zone = str(run.spark.conf.get("spark.sql.session.timeZone") or "UTC")
    if zone.lower() in _UTC:
        return []
    types = {f.name.lower(): f.dataType for f in produced.schema.fields}
    return [
        run.problem(
            f"output '{output.name}': partition_by column '{column}' is a TIMESTAMP, and the session's time zone is "
            f"{zone}: a partition's value is written as local time, and Delta readers take it for UTC",
            ("outputs", output.name, "partition_by", i),
            hint=f"partition by a DATE or STRING column made from it (e.g. to_date({column}) as day), "
            "or run with spark.sql.session.timeZone: UTC (the default)",
        )
        for i, column in enumerate(output.partition_by)
        if isinstance(types.get(column.lower()), TimestampType)
    ]


def _kept_by(output: Any) -> str:
    if output.slice_by is not None:
        return "a run of one interval"
    return "an append" if output.mode == "append" else "a merge"


def _schema_problem(output: str, table: str, existing: Any, produced: Any) -> str | None:
    have = {f.name.lower(): f.dataType.simpleString() for f in existing.fields}
    new = {f.name.lower(): f.dataType.simpleString() for f in produced.fields}
    missing = [c for c in have if c not in new]
    extra = [c for c in new if c not in have]
    changed = [f"{c} ({have[c]} → {new[c]})" for c in have if c in new and have[c] != new[c]]
    if not (missing or extra or changed):
        return None
    parts = []
    if missing:
        parts.append(f"missing columns {missing}")
    if extra:
        parts.append(f"new columns {extra}")
    if changed:
        parts.append(f"changed types {changed}")
    return f"output '{output}': the step's columns do not match the table at {table}: " + "; ".join(parts)
