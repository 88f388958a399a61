"""Rows written in YAML (or a small CSV / JSON file) as Spark rows, and rows compared.

A test's rows are typed by the columns they fill, as a run types them: every value goes to Spark
as text and is cast there to the column's type (a source's declared schema, a step's known or
inferred columns, the checked step's actual columns), so `2026-11-02 08:00:00` reads as a
timestamp in the session's timezone exactly as a JSON source's text would, and a value the type
cannot hold is a malformed test at its line (`misfit`, cast by Spark's own rules). A column whose type no one knows before Spark
starts is typed from its values (whole numbers, numbers, true/false, dates, text).

Rows are compared as Python values after both sides went through Spark the same way; doubles are
compared to SIGNIFICANT digits (an average of 1/3 is written 0.333333).
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.errors import BadInput, Problem
from framework.schemas import Schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SIGNIFICANT = 6  # digits of a double compared
COMPLEX = ("ARRAY", "MAP", "STRUCT")
SHOWN = 5  # rows of each kind a difference shows
MAX_ROWS_FILE = 10 * 2**20  # bytes: a test's rows file is read whole, on the driver


def read_rows_file(path: Path, shown: str) -> list[dict[str, Any]]:
    """The rows of a CSV file (its header names the columns; every value is text, typed later) or a
    JSON file (an array of objects, or one object per line)."""
    if not path.is_file():
        if path.exists():  # a folder, a named pipe, a device
            raise BadInput(Problem(f"rows file {shown} is not a regular file", hint="give a CSV or JSON file"))
        raise BadInput(Problem(f"rows file not found: {shown}", hint="a path relative to the file holding the tests"))
    if path.stat().st_size > MAX_ROWS_FILE:
        hint = "a test gives a few rows; keep its file small (a run reads the real data)"
        raise BadInput(
            Problem(f"rows file too large: {shown} ({path.stat().st_size:,} bytes, at most {MAX_ROWS_FILE:,})", hint=hint)
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadInput(Problem(f"{shown}: not UTF-8 text", hint="a rows file is CSV or JSON text")) from None
    if path.suffix.lower() == ".csv":
        return [{k: (v if v != "" else None) for k, v in row.items()} for row in csv.DictReader(text.splitlines())]
    try:
        data = (
            json.loads(text)
            if text.lstrip().startswith("[")
            else [json.loads(line) for line in text.splitlines() if line.strip()]
        )
    except json.JSONDecodeError as e:
        raise BadInput(Problem(f"{shown}: not JSON: {e.msg}", file=shown, line=e.lineno)) from None
    if not all(isinstance(row, dict) for row in data):
        raise BadInput(Problem(f"{shown}: each row is a JSON object", file=shown, line=1))
    return list(data)


def column_types(schema: Schema | None, rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The (column, Spark type) of given rows: the node's columns in order (when it can list them),
    then names only the rows use; a type no one knows is typed from the values."""
    columns: list[tuple[str, str | None]] = [(c.name, c.type) for c in schema.columns] if schema is not None else []
    known = {name.lower() for name, _ in columns}
    for row in rows:
        for name in row:
            if name.lower() not in known:
                known.add(name.lower())
                columns.append((name, None))
    return [(name, type_ or _type_of([_value(row, name) for row in rows])) for name, type_ in columns]


def frame_of(spark: SparkSession, rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> DataFrame:
    """The rows as a DataFrame with these columns and types (a column a row leaves out is null)."""
    raw = _texts(spark, rows, [name for name, _ in columns])
    return raw.select(*[_typed(f"c{i}", type_).alias(name) for i, (name, type_) in enumerate(columns)])


def _texts(spark: SparkSession, rows: list[dict[str, Any]], names: list[str]) -> DataFrame:
    """The rows' values of `names` as text, in columns c0, c1, … (Spark casts them)."""
    from pyspark.sql.types import StringType, StructField, StructType

    texts = [tuple(_text(_value(row, name)) for name in names) for row in rows]
    return spark.createDataFrame(texts, StructType([StructField(f"c{i}", StringType()) for i in range(len(names))]))


def _typed(column: str, type_: str, tolerant: bool = False) -> Any:
    """A text column as `type_`: JSON for nested types; else a cast (`tolerant`: null where the
    text does not cast, instead of failing)."""
    from pyspark.sql import functions as F

    text = F.col(column)
    if type_.upper().startswith(COMPLEX):
        return F.from_json(text, type_)
    return text.try_cast(type_) if tolerant else text.cast(type_)


def misfit(spark: SparkSession, rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> tuple[int, str, str] | None:
    """The first given value its column's type cannot hold, as (row index, the row's key, type).

    Spark casts a test's values only where the query reads them, so such a value failed the test in
    Spark's words when the checked step read its column, and was null when it did not."""
    from pyspark.sql import functions as F

    typed = [(name, type_) for name, type_ in columns if type_.upper() != "STRING"]
    if not rows or not typed:
        return None
    raw = _texts(spark, rows, [name for name, _ in typed])
    refused = [(F.col(f"c{i}").isNotNull() & _typed(f"c{i}", t, tolerant=True).isNull()) for i, (_, t) in enumerate(typed)]
    flags = raw.select(*[flag.alias(f"c{i}") for i, flag in enumerate(refused)]).collect()
    for r, flagged in enumerate(flags):
        for i, (name, type_) in enumerate(typed):
            if flagged[i]:
                key = next((k for k in rows[r] if k.lower() == name.lower()), name)
                return r, key, type_
    return None


def _value(row: dict[str, Any], name: str) -> Any:
    """A row's value of a column; Spark compares names without case, and so do tests."""
    if name in row:
        return row[name]
    lowered = name.lower()
    return next((v for k, v in row.items() if k.lower() == lowered), None)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return str(value)


def _type_of(values: list[Any]) -> str:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "BOOLEAN"
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "BIGINT"
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return "DOUBLE"
    if present and all(isinstance(v, datetime) for v in present):
        return "TIMESTAMP"
    if present and all(isinstance(v, date) for v in present):
        return "DATE"
    return "STRING"


# -- comparing -------------------------------------------------------------------------------------


def comparable(value: Any) -> Any:
    """A collected value in a form that compares and hashes: doubles to SIGNIFICANT digits, lists,
    maps and structs as tuples."""
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT}g}")
    if isinstance(value, Decimal):
        return value.normalize()
    if isinstance(value, dict):
        return tuple(sorted((str(k), comparable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(comparable(v) for v in value)
    if hasattr(value, "asDict"):
        return comparable(value.asDict())
    return value


def shown_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, tuple):
        return "[" + ", ".join(shown_value(v) for v in value) + "]"
    return str(value)


@dataclass
class Difference:
    """How actual rows differ from the expected ones (empty: they match)."""

    columns: list[str]
    expected: int
    actual: int
    missing: list[tuple[Any, ...]] = field(default_factory=list)  # expected, not produced (with repeats)
    unexpected: list[tuple[Any, ...]] = field(default_factory=list)  # produced, not expected
    order: tuple[int, tuple[Any, ...], tuple[Any, ...]] | None = None  # exact: first row out of place

    @property
    def matches(self) -> bool:
        return not self.missing and not self.unexpected and self.order is None

    def lines(self, what: str = "rows") -> list[str]:
        """The difference in words and rows: counts first, then the first SHOWN rows of each kind."""
        out = [
            f"{what}: expected {self.expected}, got {self.actual}; {len(self.missing)} missing, {len(self.unexpected)} unexpected"
        ]
        for label, rows in (
            ("missing (expected, not produced)", self.missing),
            ("unexpected (produced, not expected)", self.unexpected),
        ):
            if rows:
                out.append(f"  {label}:")
                out += [f"    - {self.row_text(row)}" for row in rows[:SHOWN]]
                if len(rows) > SHOWN:
                    out.append(f"    … and {len(rows) - SHOWN} more")
        if self.order is not None:
            at, wanted, got = self.order
            out.append(f"  the same rows in another order (match: exact): row {at + 1} is")
            out.append(f"    {self.row_text(got)}")
            out.append(f"  expected {self.row_text(wanted)}")
        return out

    def row_text(self, row: tuple[Any, ...]) -> str:
        return "{" + ", ".join(f"{c}: {shown_value(v)}" for c, v in zip(self.columns, row, strict=True)) + "}"


def compare(columns: list[str], expected: list[tuple[Any, ...]], actual: list[tuple[Any, ...]], exact: bool) -> Difference:
    """Expected against actual rows (already comparable): as multisets, and in order when `exact`."""
    wanted, got = Counter(expected), Counter(actual)
    difference = Difference(columns, len(expected), len(actual))
    difference.missing = [row for row in expected if _take(wanted, got, row)]
    wanted, got = Counter(expected), Counter(actual)
    difference.unexpected = [row for row in actual if _take(got, wanted, row)]
    if exact and difference.matches:
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            if e != a:
                difference.order = (i, e, a)
                break
    return difference


def _take(mine: Counter[Any], theirs: Counter[Any], row: tuple[Any, ...]) -> bool:
    """Whether `row` (one of `mine`) is one too many: more of it in mine than in theirs."""
    mine[row] -= 1
    return mine[row] >= theirs[row]
