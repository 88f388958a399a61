"""A source's first N rows, for trying a pipeline (`tributary run --limit N`), and what "first" means.

A try should answer in seconds and give the same rows every time (so a change's effect is the
change's alone), whatever the source's size. So "first" is defined by the files, not by Spark's
scheduling:

- Files on a local disk (JSON, CSV, text, Parquet): the source's files in the order of their
  paths (Python's `sorted`), and in each file its lines in order (Parquet: its rows). Tributary
  counts lines here (Parquet: the row counts in the footers, no data read) and hands Spark only
  the first files that hold N of them, so trying a pipeline over a folder of a thousand files
  reads one or two. Lines are not always rows: a CSV header, blank lines, records spanning lines
  and malformed records (quarantined as in any run) make a try get fewer than N rows.
  Compressed files are counted in full (gzip, bz2, xz) or taken whole.
- Files on an object store: the same order, but Spark lists and reads the whole source to find it.
- Delta sources: the files of the version read, oldest first (by the write time the log records
  for each), until their row counts (the log's statistics) reach N; rows in file order.

The rows are then ordered by (file, position in the file) and the first N kept: Spark's own
`limit` would take whichever rows its tasks return first.
"""

from __future__ import annotations

import bz2
import glob
import gzip
import lzma
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.io.delta.base import FILE_RANK
from framework.io.locations import is_uri
from framework.io.origin import FILE, LINE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_CHUNK = 1 << 20
_OPENERS: dict[str, Any] = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
_UNCOUNTABLE = (".zst", ".lz4", ".snappy", ".deflate", ".zstd")


def first_files(location: str, file_format: str, rows: int, header: bool = False) -> list[str] | None:
    """The source's first files (path order) that hold `rows` rows, or None when the files
    cannot be listed here (an object store) or there are none: then Spark reads the location."""
    if is_uri(location):
        return None
    files = sorted(source_files(location))
    chosen: list[str] = []
    held = 0
    for file in files:
        if held >= rows:
            break
        chosen.append(file)
        held += _rows_in(file, file_format, rows - held, header)
    return chosen or None


def source_files(location: str) -> list[str]:
    """The data files Spark reads at a local location: the files a glob or folder holds (folders
    searched through, as Spark's partition discovery does), without hidden or _-prefixed names.
    Regular files only: reading a named pipe would wait for a writer (special_files)."""
    return [path for path in _listed(location) if os.path.isfile(path)]


def special_files(location: str, most: int = 3) -> list[tuple[str, int]]:
    """Up to `most` of the names at a local location that are neither files nor folders (named
    pipes, devices, sockets), with their modes: Spark would list them as files and wait on them
    for ever."""
    found = []
    for path in _listed(location):
        try:
            mode = os.stat(path).st_mode
        except OSError:  # a dangling link, or gone meanwhile
            continue
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            found.append((path, mode))
            if len(found) == most:
                break
    return found


def _listed(location: str) -> Iterator[str]:
    for match in glob.glob(location):
        if not os.path.isdir(match):
            yield match
            continue
        for folder, subfolders, names in os.walk(match):
            subfolders[:] = sorted(d for d in subfolders if not d.startswith(("_", ".")))
            yield from (os.path.join(folder, n) for n in names if not n.startswith(("_", ".")))


def base_path(location: str) -> str | None:
    """The folder partition values are read from when only some of its files are given to Spark."""
    return location if not is_uri(location) and os.path.isdir(location) else None


def _rows_in(file: str, file_format: str, wanted: int, header: bool) -> int:
    """Rows `file` holds, counted up to `wanted` (more is not needed)."""
    if file_format == "parquet":
        import pyarrow.parquet as pq

        try:
            return pq.ParquetFile(file).metadata.num_rows
        except Exception:  # noqa: BLE001 - not Parquet after all: Spark says so when it reads it
            return wanted
    suffix = Path(file).suffix.lower()
    if suffix in _UNCOUNTABLE:
        return wanted  # cannot count here: take the file whole, it may hold them all
    opener = _OPENERS.get(suffix, open)
    lines = -1 if header else 0
    last = b"\n"
    with opener(file, "rb") as stream:
        while lines < wanted:
            chunk = stream.read(_CHUNK)
            if not chunk:
                break
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    if last != b"\n":
        lines += 1  # a last line without its newline
    return max(lines, 0)


def first_rows(df: DataFrame, rows: int, oldest_first: bool = False) -> DataFrame:
    """The frame's first `rows` rows by file and position: (_file, _line) where the source has
    them, else the file (its place among a Delta table's first files when the store gave it,
    FILE_RANK; else with `oldest_first` its modification time; then its path), the part of the
    file a task read and the row's order in it."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    if FILE in df.columns and LINE in df.columns:
        return df.orderBy(FILE, LINE).limit(rows)
    keys = ["__tributary_age", "__tributary_file", "__tributary_block", "__tributary_row"]
    if FILE_RANK in df.columns:  # the store knows which of its files comes first
        age = F.col(FILE_RANK)
    elif oldest_first:
        age = F.col("_metadata.file_modification_time")
    else:
        age = F.lit(0)
    try:
        positioned = df.select(
            "*",
            age.alias(keys[0]),
            F.col("_metadata.file_path").alias(keys[1]),
            F.col("_metadata.file_block_start").alias(keys[2]),
            F.monotonically_increasing_id().alias(keys[3]),  # increases along a task's rows
        )
    except AnalysisException:  # no file behind the frame (rows made in memory): their own order
        return df.limit(rows)
    return positioned.orderBy(*keys).limit(rows).drop(*keys, FILE_RANK)
