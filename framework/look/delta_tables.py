"""A Delta table as a person at a terminal looks at it: its rows now or at an older version, and its
history, read with delta-rs alone (no JVM: `tributary show` answers in well under a second).

Rows come from `DeltaTable.to_pyarrow_dataset()`: the files of the chosen version, read lazily,
so the first rows cost one file's first batch, not the table. A table with reader features the
Arrow dataset cannot honour (deletion vectors, column mapping: written by Spark's Delta on a
cluster) is read through delta-rs' own scan instead.

History comes from the Delta log. Row counts per version: delta-rs and Spark record logical
counts for merges, deletes and plain writes (`operationMetrics`); Tributary's own commits add the
Parquet files Spark staged (framework.io.delta.delta_rs) and record none, so for a local table the
commits are replayed from the log itself: each added file's `numRecords`, each removed file's
count from the commit that added it, and the table's rows after each version. A commit's
Tributary run id is its commit metadata `tributary.run_id` (delta-rs) or `userMetadata` (Spark).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from framework.errors import BadInput, Problem, UnreadableTable
from framework.io.locations import is_uri
from framework.look.tables import TableRef

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

#: Reader features an Arrow dataset over the table's files would get wrong
_NEEDS_DELTA_SCAN = {"deletionVectors", "columnMapping"}


def open_table(
    ref: TableRef, storage_options: dict[str, str] | None, version: int | None = None, timestamp: str | None = None
) -> DeltaTable:
    """The table at its latest version, or at `version` / the version current at `timestamp`."""
    from deltalake import DeltaTable

    options = storage_options or None
    try:
        exists = DeltaTable.is_deltatable(ref.location, storage_options=options)
    except Exception as e:  # noqa: BLE001 - an unreachable object store, bad credentials
        raise BadInput(
            Problem(f"cannot open {ref.location}: {_first_line(e)}", hint="check the profile's storage_options")
        ) from None
    if not exists:
        hint = f"run the pipeline first: tributary run {ref.pipeline}" if ref.pipeline else "check the name or path"
        if ref.internal:
            hint = "Tributary creates it with the first run that has rows for it (tributary runs lists the runs)"
        if ref.pipeline and "scratch" in ref.about:
            hint = f"try the pipeline first: tributary run {ref.pipeline} --limit 100"
        raise BadInput(Problem(f"'{ref.name}' ({ref.about}) has no Delta table yet at {ref.location}", hint=hint))
    try:
        table = DeltaTable(ref.location, storage_options=options)
    except Exception as e:  # noqa: BLE001 - delta-rs says a damaged log with a plain exception
        raise UnreadableTable(ref.location, e) from None
    latest = table.version()
    if version is not None:
        if not 0 <= version <= latest:
            raise BadInput(
                Problem(
                    f"'{ref.name}' has no version {version}",
                    hint=f"its versions are 0 to {latest} (tributary history {ref.name})",
                )
            )
        try:
            table.load_as_version(version)
        except Exception as e:  # noqa: BLE001 - a version whose log files were cleaned up
            raise BadInput(Problem(f"'{ref.name}': version {version} cannot be read: {_first_line(e)}")) from None
    elif timestamp is not None:
        when = parse_timestamp(timestamp)
        commits = sorted((h["version"], _utc(h["timestamp"])) for h in table.history(None) if "timestamp" in h)
        current = [v for v, at in commits if at <= when]
        if not current:
            first = commits[0][1].isoformat() if commits else "?"
            raise BadInput(
                Problem(
                    f"'{ref.name}' has no version at {when.isoformat()}: the table did not exist yet",
                    hint=f"its first version was committed at {first} (tributary history {ref.name})",
                )
            )
        table.load_as_version(current[-1])
    return table


def parse_timestamp(text: str) -> datetime:
    """An ISO date or time; without a zone it is UTC (as the warehouse's timestamps are)."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(
            Problem(f"--timestamp '{text}' is not a date or time", hint="write ISO 8601, e.g. 2026-11-02 or 2026-11-02T08:00:00Z")
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


@contextlib.contextmanager
def reading(location: Callable[[], str]) -> Iterator[None]:
    """Reading a table's data files: one its log names but that is missing or damaged is bad
    input naming the table (`location()`: its place, asked when it happens), not a crash."""
    import pyarrow as pa

    try:
        yield
    except (OSError, pa.ArrowException) as e:  # ArrowInvalid: a truncated file; OSError: a missing one
        raise UnreadableTable(location(), e) from None


def rows(table: DeltaTable, location: str, limit: int | None = None) -> pa.Table:
    """The chosen version's first `limit` rows (all with None), in the log's file order.

    A local table whose files say all there is (no deletion vectors, no column mapping) is read
    file by file with pyarrow.parquet, stopping at `limit`: no query engine to start, and none of
    pyarrow.dataset's imports (~0.3 s with the pandas it pulls in). Anything else goes through
    delta-rs' own scan."""
    features = set(table.protocol().reader_features or [])
    if not is_uri(location) and not features & _NEEDS_DELTA_SCAN:
        try:
            return _read_files(table, location, limit)
        except Exception:  # noqa: BLE001 - a file pyarrow reads differently than Delta means: let delta-rs read it
            pass
    return _delta_scan(table, limit)


def dataset(table: DeltaTable, location: str) -> ds.Dataset | pa.Table:
    """The chosen version's rows for DuckDB: a small local table read whole (quicker to start), a
    larger one as delta-rs' lazy Arrow dataset, so DuckDB reads only the files and columns it needs."""
    features = set(table.protocol().reader_features or [])
    if features & _NEEDS_DELTA_SCAN:
        return _delta_scan(table, None)
    if not is_uri(location) and sum(_actions(table).column("size_bytes").to_pylist()) <= SMALL_TABLE_BYTES:
        return rows(table, location)
    return table.to_pyarrow_dataset()


#: A table up to this size (its files, compressed) is read whole for DuckDB
SMALL_TABLE_BYTES = 64 * 1024 * 1024


def _read_files(table: DeltaTable, location: str, limit: int | None) -> pa.Table:
    """Arrow conversions here avoid building arrays from Python values, which makes pyarrow
    import pandas (~0.3 s): partition values are repeated from the log's own Arrow scalars."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(table.schema().to_arrow())
    actions = _actions(table)
    parts: list[pa.Table] = []
    left = limit
    for i, path in enumerate(actions.column("path").to_pylist()):
        if left is not None and left <= 0:
            break
        file = pq.ParquetFile(_local_file(location, path))
        present = [f.name for f in schema if f.name in file.schema_arrow.names]
        for batch in file.iter_batches(batch_size=min(left, 65_536) if left else 65_536, columns=present):
            if left is not None:
                batch = batch.slice(0, left)
            columns = []
            for field in schema:
                if field.name in present:  # cast only when needed: casting imports pyarrow.compute (~0.06 s)
                    column = batch.column(field.name)
                    columns.append(column if column.type == field.type else column.cast(field.type))
                elif f"partition.{field.name}" in actions.column_names:
                    value = actions.column(f"partition.{field.name}")[i].cast(field.type)
                    columns.append(pa.repeat(value, batch.num_rows))
                else:  # a column added to the table after this file was written
                    columns.append(pa.nulls(batch.num_rows, field.type))
            parts.append(pa.Table.from_arrays(columns, schema=schema))
            if left is not None:
                left -= batch.num_rows
                if left <= 0:
                    break
    if not parts:
        return pa.Table.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
    return pa.concat_tables(parts)


def _local_file(location: str, path: str) -> str:
    if "://" in path:  # an absolute path in the log
        return unquote(path.removeprefix("file://"))
    return str(Path(location) / unquote(path))


def _delta_scan(table: DeltaTable, limit: int | None) -> pa.Table:
    import pyarrow as pa
    from deltalake import QueryBuilder

    sql = "SELECT * FROM t" + (f" LIMIT {int(limit)}" if limit is not None else "")
    scanned = pa.RecordBatchReader.from_stream(QueryBuilder().register("t", table).execute(sql)).read_all()
    schema = pa.schema(table.schema().to_arrow())
    return scanned.cast(schema) if scanned.schema.names == schema.names else scanned  # string_view -> string


def _actions(table: DeltaTable) -> pa.Table:
    """The version's add actions (path, size_bytes, num_records, partition.<column>), pandas-free."""
    import pyarrow as pa

    return pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()


def row_count(table: DeltaTable) -> int | None:
    """The version's rows, from the log's file statistics (no data read); None when a file has none."""
    actions = _actions(table)
    if "num_records" not in actions.column_names:
        return 0 if actions.num_rows == 0 else None
    counts = actions.column("num_records").to_pylist()
    return None if any(c is None for c in counts) else int(sum(counts))


def describe_version(table: DeltaTable, location: str, storage_options: dict[str, str] | None) -> str:
    """'version 3, committed 2026-11-25 02:43:09 UTC'. The commit is looked up in the table's
    history as of its latest version: delta-rs numbers the history of a table loaded at an older
    version from that version down (version 0 got the latest commit's time)."""
    from deltalake import DeltaTable

    latest = DeltaTable(location, storage_options=storage_options or None)
    entry = next((h for h in latest.history(None) if h.get("version") == table.version()), None)
    if entry is None or "timestamp" not in entry:
        return f"version {table.version()}"
    return f"version {table.version()}, committed {_utc(entry['timestamp']).strftime('%Y-%m-%d %H:%M:%S')} UTC"


def history(ref: TableRef, table: DeltaTable, limit: int) -> pa.Table:
    """The table's newest `limit` versions, newest first: when, what, which Tributary run, and
    rows added, removed, updated (merges) and held after it, where the log says."""
    import pyarrow as pa

    entries = sorted(table.history(limit), key=lambda h: h["version"])
    replayed = _replay(ref.location, table, entries) if entries and not is_uri(ref.location) else {}
    rows: list[dict[str, Any]] = []
    for entry in entries:
        version = entry["version"]
        metrics = entry.get("operationMetrics") or {}
        from_log = replayed.get(version, {})
        operation = entry.get("operation", "")
        mode = (entry.get("operationParameters") or {}).get("mode")
        if mode and operation == "WRITE":
            operation += f" ({str(mode).lower()})"
        rows.append(
            {
                "version": version,
                "committed": _utc(entry["timestamp"]).strftime("%Y-%m-%dT%H:%M:%SZ") if "timestamp" in entry else None,
                "operation": operation,
                "run_id": run_id_of(entry),
                "rows_added": _metric(
                    metrics, "num_added_rows", "num_target_rows_inserted", "numOutputRows", "numTargetRowsInserted"
                )
                if metrics
                else from_log.get("added"),
                "rows_removed": _metric(
                    metrics, "num_deleted_rows", "num_target_rows_deleted", "numDeletedRows", "numTargetRowsDeleted"
                )
                if metrics and operation.split(" ")[0] in ("MERGE", "DELETE")
                else from_log.get("removed"),
                "rows_updated": _metric(
                    metrics, "num_target_rows_updated", "numTargetRowsUpdated", "num_updated_rows", "numUpdatedRows"
                ),
                "rows": from_log.get("rows"),
            }
        )
    rows.reverse()
    schema = pa.schema(
        [
            pa.field("version", pa.int64()),
            pa.field("committed", pa.timestamp("s", tz="UTC")),
            pa.field("operation", pa.string()),
            pa.field("run_id", pa.string()),
            pa.field("rows_added", pa.int64()),
            pa.field("rows_removed", pa.int64()),
            pa.field("rows_updated", pa.int64()),
            pa.field("rows", pa.int64()),
        ]
    )
    return _arrow_rows(rows, schema)


def _arrow_rows(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Python rows as an Arrow table through pyarrow's JSON reader: pyarrow's constructors from
    Python values import pandas first (~0.3 s, most of a `tributary history`)."""
    import io

    import pyarrow as pa
    import pyarrow.json as pajson

    if not rows:
        return pa.Table.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
    text = "".join(json.dumps(row) + "\n" for row in rows).encode("utf-8")
    return pajson.read_json(io.BytesIO(text), parse_options=pajson.ParseOptions(explicit_schema=schema))


def run_id_of(entry: dict[str, Any]) -> str | None:
    """The Tributary run that made a commit: delta-rs commit metadata, or Spark's userMetadata."""
    if entry.get("tributary.run_id"):
        return str(entry["tributary.run_id"])
    meta = entry.get("userMetadata")
    if isinstance(meta, str) and meta.startswith("{"):
        try:
            return json.loads(meta).get("tributary.run_id")
        except ValueError:
            return None
    return None


def _replay(location: str, table: DeltaTable, entries: list[dict[str, Any]]) -> dict[int, dict[str, int | None]]:
    """Rows added, removed and held per version, replaying the local log's commits from the
    version before the oldest shown (its files and counts from delta-rs); {} when the log's commit
    files are gone (cleaned up after a checkpoint)."""
    from deltalake import DeltaTable

    first = entries[0]["version"]
    live: dict[str, int | None] = {}
    if first > 0:
        try:
            before = DeltaTable(location, version=first - 1)
        except Exception:  # noqa: BLE001 - that version's log is gone
            return {}
        live = _live_files(before)
    log = Path(location) / "_delta_log"
    found: dict[int, dict[str, int | None]] = {}
    for entry in entries:
        version = entry["version"]
        commit = log / f"{version:020d}.json"
        if not commit.is_file():
            return found
        added: int | None = 0
        removed: int | None = 0
        for line in commit.read_text(encoding="utf-8").splitlines():
            action = json.loads(line) if line.strip() else {}
            if "add" in action:
                count = _records(action["add"])
                live[_path_key(action["add"]["path"])] = count
                added = None if added is None or count is None else added + count
            elif "remove" in action:
                count = live.pop(_path_key(action["remove"]["path"]), None)
                removed = None if removed is None or count is None else removed + count
        counts = list(live.values())
        found[version] = {
            "added": added,
            "removed": removed,
            "rows": None if any(c is None for c in counts) else sum(c for c in counts if c is not None),
        }
    return found


def _live_files(table: DeltaTable) -> dict[str, int | None]:
    actions = _actions(table)
    paths = actions.column("path").to_pylist()
    counts = actions.column("num_records").to_pylist() if "num_records" in actions.column_names else [None] * len(paths)
    return {_path_key(p): (int(c) if c is not None else None) for p, c in zip(paths, counts, strict=True)}


def _records(add: dict[str, Any]) -> int | None:
    stats = add.get("stats")
    if not stats:
        return None
    try:
        value = json.loads(stats).get("numRecords")
    except ValueError:
        return None
    return int(value) if value is not None else None


def _path_key(path: str) -> str:
    """Log paths are percent-encoded relative paths; compared decoded."""
    return unquote(path)


def _metric(metrics: dict[str, Any], *names: str) -> int | None:
    for name in names:
        if metrics.get(name) is not None:
            return int(metrics[name])
    return None


def _utc(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, UTC)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
