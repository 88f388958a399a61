"""The newest value of a timestamp column in Parquet files, read from their footers' statistics
(each row group records its column's min and max), so nothing scans the rows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from framework.io.locations import from_spark_path
from framework.io.staging import filesystem
from framework.io.stream_checkpoint import StreamCheckpoint

LEGACY_CALENDAR = b"org.apache.spark.legacyDateTime"
_MICROS_PER_UNIT = {"milliseconds": 1_000, "microseconds": 1}


class NoStatistics(Exception):
    """A file's footer cannot tell the column's newest value (no statistics, INT96, nanoseconds,
    a local-time column): the rows must be read."""


def newest_micros(files: list[str], column: str) -> int | None:
    """The newest instant (microseconds since the epoch, as Spark holds a TIMESTAMP) in `column` of
    `files`; None when no row has one. Raises NoStatistics when a footer cannot say."""
    newest: int | None = None
    for file in files:
        fs, path = filesystem(from_spark_path(file))
        try:
            metadata = pq.read_metadata(path, filesystem=fs)
        except (OSError, ValueError) as e:
            raise NoStatistics(f"{file}: {e}") from None
        if LEGACY_CALENDAR in (metadata.metadata or {}):
            raise NoStatistics(f"{file}: written by Spark 2 (its old dates are rebased on reading)")
        for value in _row_group_maxima(metadata, column, file):
            newest = value if newest is None else max(newest, value)
    return newest


def _row_group_maxima(metadata: Any, column: str, file: str) -> list[int]:
    index = _column_index(metadata.schema.names, column)
    if index is None:
        return []  # Spark reads the missing column as null
    scale = _micros_per_unit(metadata.schema.column(index), file)
    maxima = []
    for group in range(metadata.num_row_groups):
        chunk = metadata.row_group(group).column(index)
        stats = chunk.statistics
        if stats is not None and stats.has_min_max:
            maxima.append(stats.max_raw * scale)
        elif stats is None or stats.null_count != chunk.num_values:
            raise NoStatistics(f"{file}: row group {group} has no statistics for '{column}'")
    return maxima


def _column_index(names: list[str], column: str) -> int | None:
    """Spark matches Parquet columns by name, ignoring case unless spark.sql.caseSensitive."""
    if column in names:
        return names.index(column)
    matches = [i for i, name in enumerate(names) if name.lower() == column.lower()]
    return matches[0] if len(matches) == 1 else None


def _micros_per_unit(schema_column: Any, file: str) -> int:
    """INT64 instants only: UTC-adjusted milli- or microseconds (or the older converted types,
    which are UTC by definition)."""
    logical = json.loads(schema_column.logical_type.to_json()) if schema_column.logical_type else {}
    if logical.get("Type") == "Timestamp" and logical.get("isAdjustedToUTC"):
        unit = logical.get("timeUnit")
    else:
        unit = {"TIMESTAMP_MILLIS": "milliseconds", "TIMESTAMP_MICROS": "microseconds"}.get(schema_column.converted_type)
    if schema_column.physical_type != "INT64" or unit not in _MICROS_PER_UNIT:
        raise NoStatistics(f"{file}: '{schema_column.name}' is not a UTC timestamp in milli- or microseconds")
    return _MICROS_PER_UNIT[unit]


@dataclass(frozen=True)
class BatchFooters:
    """The newest event time a micro-batch of Parquet file sources read, from the footers of the
    files its checkpoint lists (every file source of the query)."""

    checkpoint: str
    column: str

    def newest(self, batch_id: int) -> int | None:
        files = StreamCheckpoint(self.checkpoint).files(batch_id)
        if not files:
            raise NoStatistics(f"batch {batch_id}: the checkpoint lists no files")
        return newest_micros(files, self.column)
