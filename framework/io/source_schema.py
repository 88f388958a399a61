"""The schema of a Parquet or Delta source from its files' footers or its Delta log, without a JVM.

Why: a streaming source needs its schema before any file is read, and a Parquet file carries it;
typing a wide schema by hand is where mistakes come from. Every file present is read for its
footer only (a few KB each): they must agree, else the first file that differs is named with the
column, so a file written later with another schema is a clear error at the next validate or run,
not a column of nulls. The schema found is written as Spark DDL on the source for the run (and
so recorded with the run's spec in the run log). A Delta table's schema is its log's (delta-rs),
at the version the source reads; the run log keeps it too, and a stream resumed over a table
whose columns changed since its checkpoints were written stops with the difference
(framework.engine.streaming).
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from framework.errors import BadInput, Problem


def footer_schema(source: str, location: str) -> str | None:
    """Spark DDL of the Parquet files at `location` (a file, folder or glob), None when there is
    none yet. Raises BadInput when two files disagree or a type has no Spark equivalent."""
    files = _parquet_files(location)
    if not files:
        return None
    first = _schema(source, files[0])
    wanted = arrow_ddl(source, first)
    for other in files[1:]:
        schema = _schema(source, other)
        # as Spark reads them: a column that may hold nulls in one file and not in another is one
        # column, and so are a string and a large string
        if not schema.equals(first) and arrow_ddl(source, schema) != wanted:
            raise BadInput(
                Problem(
                    f"source '{source}': {other} has another schema than {files[0]}: {_difference(first, schema)}",
                    hint="write the files with one schema, or declare schema: to read them all with it",
                )
            )
    return wanted


def delta_log_schema(source: str, location: str, version: int | None = None, timestamp: Any = None) -> str | None:
    """Spark DDL of the Delta table at `location` (at a version or time), None when there is no table yet."""
    from deltalake import DeltaTable

    try:
        if not DeltaTable.is_deltatable(location):
            return None
        table = DeltaTable(location)
        if version is not None and version > table.version():
            raise BadInput(
                Problem(
                    f"source '{source}': version {version} of {location} does not exist: its latest is {table.version()}",
                    hint=f"pin a version from 0 to {table.version()} (tributary history lists them), or leave version: out",
                )
            )
        latest = table.version()
        if version is not None or timestamp is not None:
            table.load_as_version(version if version is not None else timestamp)
            _check_files_kept(source, location, table, latest)
    except BadInput:
        raise
    except Exception as e:  # noqa: BLE001 - delta-rs raises plain exceptions (a missing version, a file, a damaged log)
        said = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__  # not delta-rs' backtrace
        raise BadInput(Problem(f"source '{source}': cannot read the Delta table at {location}: {said}")) from None
    return arrow_ddl(source, pa.schema(table.schema().to_arrow()))


def _check_files_kept(source: str, location: str, table: Any, latest: int) -> None:
    """A past version whose data files VACUUM removed cannot be read (Spark: PATH_NOT_FOUND, a
    failed run that a schedule retries for ever): said here, as bad input. Local tables only."""
    uris = table.file_uris()
    local = [u.removeprefix("file://") for u in uris if "://" not in u or u.startswith("file://")]
    gone = [path for path in local if not os.path.exists(path)]
    if gone:
        raise BadInput(
            Problem(
                f"source '{source}': version {table.version()} of {location} needs {len(gone):,} data file(s) that are gone "
                f"(e.g. {os.path.basename(gone[0])}): VACUUM removed them, as it does for versions older than its retention",
                hint=f"pin a version whose files VACUUM kept (tributary history lists them; the latest is {latest}), "
                "or leave version: out",
            )
        )


def arrow_ddl(source: str, schema: pa.Schema) -> str:
    return ", ".join(f"`{f.name}` {_spark_type(source, f.name, f.type)}" for f in schema)


def _parquet_files(location: str) -> list[str]:
    path = Path(location)
    if path.is_dir():
        found = [
            str(p)
            for p in sorted(path.rglob("*.parquet"))
            if not any(part.startswith(("_", ".")) for part in p.parts[len(path.parts) :])
        ]
    else:
        found = sorted(glob.glob(location))
    return [f for f in found if os.path.isfile(f)]


def _schema(source: str, file: str) -> pa.Schema:
    try:
        return pq.read_schema(file).remove_metadata()
    except (OSError, pa.ArrowInvalid) as e:
        raise BadInput(Problem(f"source '{source}': {file} is not a readable Parquet file: {e}")) from None


def _difference(a: pa.Schema, b: pa.Schema) -> str:
    for field in a:
        if field.name not in b.names:
            return f"it lacks column '{field.name}'"
        if not b.field(field.name).type.equals(field.type):
            return f"column '{field.name}' is {b.field(field.name).type}, not {field.type}"
    extra = [n for n in b.names if n not in a.names]
    return f"it has column(s) {extra} more" if extra else "its columns are in another order"


def _spark_type(source: str, column: str, t: pa.DataType) -> str:
    simple = {
        pa.bool_(): "BOOLEAN",
        pa.int8(): "TINYINT",
        pa.int16(): "SMALLINT",
        pa.int32(): "INT",
        pa.int64(): "BIGINT",
        pa.float32(): "FLOAT",
        pa.float64(): "DOUBLE",
        pa.string(): "STRING",
        pa.large_string(): "STRING",
        pa.binary(): "BINARY",
        pa.large_binary(): "BINARY",
        pa.date32(): "DATE",
    }
    if t in simple:
        return simple[t]
    if pa.types.is_timestamp(t):
        return "TIMESTAMP" if t.tz is not None else "TIMESTAMP_NTZ"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"ARRAY<{_spark_type(source, column, t.value_type)}>"
    if pa.types.is_map(t):
        return f"MAP<{_spark_type(source, column, t.key_type)}, {_spark_type(source, column, t.item_type)}>"
    if pa.types.is_struct(t):
        return "STRUCT<" + ", ".join(f"`{f.name}`: {_spark_type(source, column, f.type)}" for f in t) + ">"
    raise BadInput(
        Problem(
            f"source '{source}': column '{column}' is {t} in the Parquet files, which Tributary cannot map to a Spark type",
            hint="declare schema: for this source",
        )
    )
