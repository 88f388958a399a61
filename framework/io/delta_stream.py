"""A Structured Streaming source for Delta tables, read with delta-rs and pyarrow (no Delta jars).

    reader = register_delta_stream(spark)  # "tributary_delta" (see the function for when it is not)
    spark.readStream.format(reader).option("path", "/abs/table").load()

Offsets are Delta versions ({"version": N}); a micro-batch (start, end] streams the data files
added by commits start+1..end, read straight from the `_delta_log` JSON commits. The inputs are
append-only tables: a commit that removes data (an overwrite, delete or merge) fails the query
unless `ignore_changes=true`, because its rows cannot be retracted downstream.

Options:
    path              the table (local path or a URI pyarrow.fs knows); required
    starting_version  first version to stream (default 0: the whole history); "latest" streams
                      only commits made after the query starts
    ignore_changes    "true": stream the added files of commits that also remove data
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cached_property
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow.fs import FileSelector, FileSystem
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from framework.io.locations import is_uri
from framework.io.staging import filesystem

FORMAT = "tributary_delta"

#: Files are packed into Spark tasks of about this many bytes (one Python worker round trip each).
TARGET_PARTITION_BYTES = 128 * 1024 * 1024

_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")


class DeltaStreamError(RuntimeError):
    """The table cannot be streamed as asked (not a Delta table, data removed, log gone)."""


def register_delta_stream(spark: Any) -> str:
    """Make this source available in `spark`'s session; the format name to read it by there.

    FORMAT, except in a session made by `newSession()` after its parent registered the source:
    Spark refuses the name there (DATA_SOURCE_ALREADY_EXISTS) and does not find it either, so the
    session registers it under a name of its own. Registering again in one session is harmless."""
    from pyspark.errors import AnalysisException

    try:
        spark.dataSource.register(DeltaStreamSource)
        return FORMAT
    except AnalysisException as e:
        if e.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
            raise
    own = f"{FORMAT}_{spark._jsparkSession.hashCode() & 0xFFFFFFFF:08x}"
    spark.dataSource.register(type("SessionDeltaStreamSource", (DeltaStreamSource,), {"name": classmethod(lambda cls: own)}))
    return own


class DeltaStreamSource(DataSource):
    """Pickled to Spark's Python workers: keep it to options, no open tables."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        from deltalake import DeltaTable
        from pyspark.sql.pandas.types import from_arrow_schema

        path = _table_path(self.options)
        if not DeltaTable.is_deltatable(path):
            raise DeltaStreamError(f"no Delta table at {path}")
        dt = DeltaTable(path)
        if dt.metadata().configuration.get("delta.columnMapping.mode", "none") != "none":
            raise DeltaStreamError(f"Delta table {path} uses column mapping, which this source cannot read")
        return from_arrow_schema(pa.schema(dt.schema().to_arrow()))

    def streamReader(self, schema: StructType) -> DeltaStreamReader:
        return DeltaStreamReader(_table_path(self.options), schema, dict(self.options))


class DeltaFiles(InputPartition):
    """Data files one Spark task reads: (path relative to the table or absolute URI, partition values)."""

    def __init__(self, files: list[tuple[str, dict[str, str | None]]]):
        self.files = files


class DeltaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side: offsets and planning from the log. Executor side: `read` (built there again,
    so the constructor must stay cheap and touch no storage)."""

    def __init__(self, path: str, schema: StructType, options: dict[str, str]):
        self.path = path
        self.schema = schema
        self.starting_version = options.get("starting_version")
        self.ignore_changes = str(options.get("ignore_changes", "false")).strip().lower() == "true"
        self.target: int | None = None  # AvailableNow: the last version of this run

    def initialOffset(self) -> dict:
        start = self.starting_version
        if start is None:
            return {"version": -1}
        if str(start).strip().lower() == "latest":
            return {"version": self._latest_version()}
        return {"version": int(start) - 1}

    def prepareForTriggerAvailableNow(self) -> None:
        """AvailableNow must stop at the versions that exist now, even if writers keep committing."""
        self.target = self._latest_version()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        latest = self._latest_version() if self.target is None else self.target
        return {"version": max(latest, start["version"])}

    def partitions(self, start: dict, end: dict) -> list[DeltaFiles]:
        files = []
        for version in range(start["version"] + 1, end["version"] + 1):
            files.extend(self._added_files(version))
        return _pack(files)

    def read(self, partition: DeltaFiles) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        from pyspark.sql.pandas.types import to_arrow_schema

        # Spark checks the batches against exactly this schema (types and nullability).
        target = to_arrow_schema(self.schema, timezone="UTC")
        table_fs, root = self._fs
        for path, partition_values in partition.files:
            # Add paths are URIs: relative to the table and percent-encoded, or absolute.
            fs, location = FileSystem.from_uri(path) if urlparse(path).scheme else (table_fs, f"{root}/{unquote(path)}")
            with fs.open_input_file(location) as handle:
                parquet = pq.ParquetFile(handle)
                present = set(parquet.schema_arrow.names)
                columns = [f.name for f in target if f.name in present and f.name not in partition_values]
                for batch in parquet.iter_batches(columns=columns):
                    yield _conform(batch, target, partition_values)

    # -- the log ------------------------------------------------------------------------------

    @cached_property
    def _fs(self) -> tuple[FileSystem, str]:
        return filesystem(self.path)

    def _latest_version(self) -> int:
        fs, root = self._fs
        versions = [
            int(m.group(1))
            for info in fs.get_file_info(FileSelector(f"{root}/_delta_log", allow_not_found=True))
            if (m := _COMMIT_FILE.match(info.base_name))
        ]
        if not versions:
            raise DeltaStreamError(f"no Delta table at {self.path} (no commits in _delta_log)")
        return max(versions)

    def _added_files(self, version: int) -> list[tuple[str, dict[str, str | None], int]]:
        """(path, partition values, size) of each data file the commit added; refuses removals."""
        fs, root = self._fs
        try:
            with fs.open_input_stream(f"{root}/_delta_log/{version:020d}.json") as handle:
                lines = handle.read().decode("utf-8").splitlines()
        except FileNotFoundError:
            raise DeltaStreamError(
                f"Delta table {self.path}: commit {version} is no longer in _delta_log (log cleanup?); "
                "restart with a new checkpoint and a later starting_version"
            ) from None
        actions = [json.loads(line) for line in lines if line.strip()]
        added = []
        for action in actions:
            if "metaData" in action:
                self._check_schema(version, action["metaData"]["schemaString"])
            if "remove" in action and action["remove"].get("dataChange", True) and not self.ignore_changes:
                operation = next((a["commitInfo"].get("operation") for a in actions if "commitInfo" in a), None)
                raise DeltaStreamError(
                    f"Delta table {self.path} version {version} removes data"
                    f"{f' ({operation})' if operation else ''}: a stream of it only follows appends. "
                    "Set ignore_changes: true on the source to stream the rows such commits add (rows they rewrite "
                    "come again), or read the table in a batch pipeline."
                )
            add = action.get("add")
            if add and add.get("dataChange", True):
                if add.get("deletionVector"):
                    raise DeltaStreamError(
                        f"Delta table {self.path} version {version} adds a file with a deletion vector, "
                        "which this source cannot apply"
                    )
                added.append((add["path"], add.get("partitionValues") or {}, int(add.get("size") or 0)))
        return added

    def _check_schema(self, version: int, schema_string: str) -> None:
        """Columns added later read as null from older files; a column the stream does not know
        (added after the query started) or a changed type would be dropped or mangled: stop."""
        known = {f.name: f.dataType.simpleString() for f in self.schema.fields}
        for field in StructType.fromJson(json.loads(schema_string)).fields:
            if known.get(field.name) != field.dataType.simpleString():
                raise DeltaStreamError(
                    f"Delta table {self.path} version {version} changes the schema (column {field.name}: "
                    f"{field.dataType.simpleString()}); restart the query to stream the new schema"
                )


def _pack(files: list[tuple[str, dict[str, str | None], int]]) -> list[DeltaFiles]:
    """Group files, in commit order, into tasks of about TARGET_PARTITION_BYTES."""
    partitions: list[DeltaFiles] = []
    current: list[tuple[str, dict[str, str | None]]] = []
    size = 0
    for path, values, file_size in files:
        current.append((path, values))
        size += file_size
        if size >= TARGET_PARTITION_BYTES:
            partitions.append(DeltaFiles(current))
            current, size = [], 0
    if current:
        partitions.append(DeltaFiles(current))
    return partitions


def _conform(batch: pa.RecordBatch, target: pa.Schema, partition_values: dict[str, str | None]) -> pa.RecordBatch:
    """The file's columns plus partition columns, in schema order and types; absent columns (added to
    the table after the file was written) are null."""
    arrays = []
    for field in target:
        if field.name in partition_values:
            arrays.append(_partition_column(partition_values[field.name], field.type, batch.num_rows))
        elif field.name in batch.schema.names:
            column = batch.column(field.name)
            arrays.append(pc.cast(column, options=pc.CastOptions(target_type=field.type, allow_time_truncate=True)))
        else:
            arrays.append(pa.nulls(batch.num_rows, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def _partition_column(value: str | None, type_: pa.DataType, rows: int) -> pa.Array:
    """Delta keeps partition values as strings ("" and null mean null; timestamps are UTC)."""
    if value is None or value == "":
        return pa.nulls(rows, type_)
    if pa.types.is_timestamp(type_):
        moment = datetime.fromisoformat(value)  # "2024-01-01 01:02:03.000000", ISO with or without Z
        if type_.tz and moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return pa.repeat(pa.scalar(moment, type_), rows)
    return pa.repeat(pa.array([value], pa.string()).cast(type_)[0], rows)


def _table_path(options: Any) -> str:
    path = options.get("path")
    if not path:
        raise DeltaStreamError(f'{FORMAT} needs option("path", <Delta table>)')
    path = str(path).rstrip("/")
    return path if is_uri(path) else os.path.abspath(path.removeprefix("file://"))
