"""A CSV source read with `header: true` (Spark's default here) whose files have no header.

Why: Spark takes each file's first line for its header and drops it, so a file without one loses
its first row, silently. Spark's `enforceSchema: false` would compare the header with the declared
names, but it also refuses a header that merely names the columns otherwise, which Spark reads
fine by position. So the first line of each local file is looked at before Spark starts (by
`validate`, and by the run): a line that names no declared column and holds, under a typed column
(a number, a date, a boolean), a value of that type is a row of data, not a header.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import lzma
import os
import re
from collections.abc import Callable
from typing import Any

from framework.io.sample import source_files
from framework.schemas import Schema
from framework.schemas.columns import from_ddl
from framework.spec.models import FileSource

#: files looked at per source, the newest first (a stream's new files): a first line is read from
#: each, through its decompressor when it is compressed (bounded, so validate stays fast: about
#: 50 ms for 1,000 local files)
MAX_FILES = 1000
#: compressions whose first line Python reads here; others Spark reads are not looked at
_OPENERS: dict[str, Callable[..., Any]] = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
_COMPRESSED = (".gz", ".bz2", ".zst", ".lz4", ".snappy", ".deflate", ".xz", ".zip")

_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|NaN|[+-]?Infinity")
_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}")
_TYPED: list[tuple[tuple[str, ...], Callable[[str], bool]]] = [
    (("TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "LONG", "SHORT", "BYTE"), lambda v: bool(_INTEGER.fullmatch(v))),
    (("FLOAT", "DOUBLE", "REAL", "DECIMAL", "DEC", "NUMERIC"), lambda v: bool(_NUMBER.fullmatch(v))),
    (("DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ"), lambda v: bool(_DATE.match(v))),
    (("BOOLEAN", "BOOL"), lambda v: v.lower() in ("true", "false")),
]


def reads_header(spec: FileSource) -> bool:
    options = {str(k).lower(): str(v).lower() for k, v in spec.options.items()}
    return spec.format == "csv" and options.get("header", "true") == "true"


def data_row_for_header(spec: FileSource, location: str) -> tuple[str, str] | None:
    """(file, its first line) when a local file's first line is a row of data that a header-
    reading CSV source would drop; None when each looks like a header, or nothing can be said
    (no declared schema, no typed column, remote files, a compression read only by Spark)."""
    layout = _layout(spec)
    if layout is None:
        return None
    schema, delimiter, quote = layout
    names = {c.name.lower() for c in schema.columns}
    checks = [_check_of(c.type) for c in schema.columns]
    if not any(checks):
        return None  # only text columns: a header and a row look alike
    for file in _newest_files(location):
        line = _first_line(file)
        if not line:
            continue
        fields = next(csv.reader([line], delimiter=delimiter, quotechar=quote), [])
        fields = [f.strip() for f in fields]
        if any(f.lower() in names for f in fields):
            continue  # it names a declared column: a header
        if any(check is not None and f and check(f) for f, check in zip(fields, checks, strict=False)):
            return file, line
    return None


def header_out_of_order(spec: FileSource, location: str) -> tuple[str, str, int, int] | None:
    """(file, a column, its place in the file's header, its place in the schema) when a header
    names a declared column at another place: Spark reads a CSV file's columns by position, so the
    values would land in the wrong columns (`amount,name,id` under `id INT, name STRING, amount
    INT` stored amount 30 as the id). None when every header names its columns in the schema's
    order or names them otherwise (read by position, as Spark does)."""
    layout = _layout(spec)
    if layout is None:
        return None
    schema, delimiter, quote = layout
    places = {c.name.lower(): n for n, c in enumerate(schema.columns)}
    for file in _newest_files(location):
        fields = next(csv.reader([_first_line(file)], delimiter=delimiter, quotechar=quote), [])
        for n, field in enumerate(f.strip().lower() for f in fields):
            if field in places and places[field] != n:
                return file, schema.columns[places[field]].name, n + 1, places[field] + 1
    return None


def _layout(spec: FileSource) -> tuple[Schema, str, str] | None:
    """(the declared columns, the delimiter, the quote) of a CSV source read with a header and a
    complete declared schema; None when its files' first lines cannot be compared with it."""
    ddl = spec.ddl()
    if not reads_header(spec) or ddl is None:
        return None
    schema = from_ddl(ddl)
    if not schema.complete:
        return None
    options = {str(k).lower(): str(v) for k, v in spec.options.items()}
    delimiter, quote = options.get("sep", options.get("delimiter", ",")), options.get("quote", '"')
    if len(delimiter) != 1 or len(quote) != 1:
        return None
    return schema, delimiter, quote


def _check_of(spark_type: str | None) -> Callable[[str], bool] | None:
    base = (spark_type or "").upper().split("(")[0].strip()
    return next((check for types, check in _TYPED if base in types), None)


def _newest_files(location: str) -> list[str]:
    """The source's files to look at: the MAX_FILES newest (a stream's new files are among them;
    by name, a file landing after 64 others was never looked at)."""

    def modified(file: str) -> float:
        try:
            return os.stat(file).st_mtime
        except OSError:
            return 0.0

    return sorted(source_files(location), key=lambda f: (-modified(f), f))[:MAX_FILES]


def _first_line(file: str) -> str:
    """The file's first line ("" when it cannot be read here: a compression Python does not read).
    A compressed file's through its decompressor: `amount,name,id` in a .csv.gz put the amounts
    in the id column, and a .csv.gz without a header lost its first row."""
    suffix = next((s for s in _COMPRESSED if file.endswith(s)), None)
    opener = open if suffix is None else _OPENERS.get(suffix)
    if opener is None:
        return ""
    try:
        with opener(file, "rb") as f:
            head = f.readline(65536)
    except (OSError, EOFError, lzma.LZMAError):
        return ""
    return head.decode("utf-8", errors="replace").lstrip("\ufeff").rstrip("\r\n")
