"""Delta through delta-rs (`deltalake`): the embedded default, no JVM jars needed.

Spark writes the Parquet files; delta-rs commits them as add actions in one transaction, so data
is written once and the commit scales with executors. Merge reads the staged files as an Arrow
stream into delta-rs' MERGE.

Writes to one table from threads of one process (the runs of a parallel backfill) take turns: a
commit reads the table's state, checks its transaction id and writes on that state, and a table
that two first writers both see missing must be created once.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa

from framework.errors import BadInput, Problem, UnreadableTable
from framework.io import staging as staging_files
from framework.io.delta.base import FILE_RANK, Commit, CommitResult, DeltaStore, Slice, StagedWrite, WriteMode
from framework.io.locations import from_spark_path

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: Reader features delta-rs may write that a plain Parquet scan would get wrong.
_FEATURES_NEEDING_DELTA_READER = {"deletionVectors", "columnMapping"}


class DeltaRsStore(DeltaStore):
    name = "delta-rs"

    def __init__(self, storage_options: dict[str, str] | None = None):
        self.storage_options = storage_options or None

    def _table(self, table: str, version: int | None = None) -> DeltaTable | None:
        from deltalake import DeltaTable

        try:
            if not DeltaTable.is_deltatable(table, storage_options=self.storage_options):
                return None
            return DeltaTable(table, version=version, storage_options=self.storage_options)
        except Exception as e:  # noqa: BLE001 - delta-rs says a damaged log with a plain exception
            raise UnreadableTable(table, e) from None

    def version(self, table: str) -> int | None:
        dt = self._table(table)
        return dt.version() if dt else None

    def schema(self, table: str) -> StructType | None:
        from pyspark.sql.pandas.types import from_arrow_schema

        dt = self._table(table)
        return from_arrow_schema(arrow_schema(dt)) if dt else None

    def transaction_version(self, table: str, app_id: str) -> int | None:
        dt = self._table(table)
        return dt.transaction_version(app_id) if dt is not None else None

    def read(
        self, spark: SparkSession, table: str, version: int | None = None, timestamp: Any = None, limit: int | None = None
    ) -> DataFrame:
        from pyspark.sql.pandas.types import from_arrow_schema

        dt = self._table(table)
        if dt is None:
            raise BadInput(
                Problem(f"no Delta table at {table}", hint="check the path or table name, or run the pipeline that writes it")
            )
        try:
            if version is not None:
                dt.load_as_version(version)
            elif timestamp is not None:
                dt.load_as_version(timestamp if isinstance(timestamp, datetime) else datetime.fromisoformat(str(timestamp)))
        except Exception as e:  # noqa: BLE001 - delta-rs raises plain exceptions for missing versions
            raise BadInput(
                Problem(f"cannot time-travel {table} to {version if version is not None else timestamp}: {e}")
            ) from None
        schema = from_arrow_schema(arrow_schema(dt))
        partition_columns = dt.metadata().partition_columns
        files = [str(p) for p in dt.file_uris()] if limit is None else _first_files(dt, limit)
        if not files:
            return spark.createDataFrame([], schema)
        features = set(dt.protocol().reader_features or [])
        if features & _FEATURES_NEEDING_DELTA_READER:
            # The Parquet files alone do not describe the rows: let delta-rs read them.
            return spark.createDataFrame(pa.table(dt.to_pyarrow_dataset().to_table()).to_pandas(), schema)
        reader = spark.read.schema(schema)
        if partition_columns:
            reader = reader.option("basePath", dt.table_uri)
        rows = reader.parquet(*files).select(*schema.fieldNames())
        return rows if limit is None else _with_file_rank(rows, files)

    def partition_columns(self, table: str) -> list[str] | None:
        dt = self._table(table)
        return list(dt.metadata().partition_columns) if dt is not None else None

    def last_run_id(self, table: str) -> str | None:
        dt = self._table(table)
        history = dt.history(1) if dt is not None else []
        return history[0].get("tributary.run_id") if history else None

    def history(self, table: str, limit: int) -> list[Commit]:
        dt = self._table(table)
        return [_commit(h) for h in (dt.history(limit) if dt is not None else [])]

    def commit(
        self,
        spark: SparkSession,
        staged: StagedWrite,
        mode: WriteMode,
        keys: list[str],
        app_id: str,
        txn_version: int = 0,
        run_id: str = "",
        where: Slice | None = None,
    ) -> CommitResult:
        with _writing(staged.table):
            try:
                return self._commit(spark, staged, mode, keys, app_id, txn_version, run_id, where)
            except Exception as e:
                landed = self._landed(staged, app_id, txn_version)
                if landed is None:
                    raise
                said = _one_line(e)
                log.warning("%s: version %s committed, then delta-rs failed: %s", staged.table, landed.version, said)
                return replace(landed, note=f"the commit landed, then delta-rs failed ({said}): the commit stands")

    def _landed(self, staged: StagedWrite, app_id: str, txn_version: int) -> CommitResult | None:
        """The commit, when delta-rs raised after it had landed, else None.

        delta-rs writes a checkpoint after some commits (every `delta.checkpointInterval`) and raises
        when that fails (a full disk, a storage error), though the commit itself is in the log. The
        transaction is recorded with the commit, atomically, so the table shows whether this one
        landed (`_commit` returned early when it was there before). A commit that landed stands, as
        Delta's own writers treat a failed checkpoint: the log is complete without it, readers read
        the commits after the last checkpoint, and the next checkpoint covers them."""
        try:
            dt = self._table(staged.table)
            done = dt.transaction_version(app_id) if dt is not None else None
        except Exception:  # noqa: BLE001 - the table cannot be read now: the commit's error stands
            return None
        if dt is None or done is None or done < txn_version:
            return None
        try:
            self.discard(staged)
        except OSError:
            log.warning("%s: staged files left at %s", staged.table, staged.staging)
        return CommitResult(dt.version())

    def _commit(
        self,
        spark: SparkSession,
        staged: StagedWrite,
        mode: WriteMode,
        keys: list[str],
        app_id: str,
        txn_version: int,
        run_id: str,
        where: Slice | None = None,
    ) -> CommitResult:
        from deltalake import CommitProperties, Schema, Transaction
        from deltalake.exceptions import DeltaError
        from deltalake.transaction import AddAction, create_table_with_add_actions

        dt = self._table(staged.table)
        done = dt.transaction_version(app_id) if dt is not None else None
        if dt is not None and done is not None and done >= txn_version:
            # delta-rs does not refuse an old transaction version itself, so the check is ours.
            self.discard(staged)
            return CommitResult(dt.version(), skipped=True)
        properties = CommitProperties(
            app_transactions=[Transaction(app_id, txn_version)],
            custom_metadata={"tributary.app_id": app_id, "tributary.run_id": run_id},
        )
        if mode == "merge" and dt is not None:
            self._merge(dt, staged, keys, properties)
        elif where is not None and dt is not None:
            self._replace_slice(dt, staged, where, properties)
        elif mode == "overwrite" and dt is not None and list(dt.metadata().partition_columns) != list(staged.partition_by):
            self._repartition(dt, staged, properties)
        else:
            schema = Schema.from_arrow(spark_to_arrow(staged.schema))
            staging_files.move_into(staged.staging, staged.files, staged.table)
            actions: list[Any] = [  # AddAction (delta-rs types this list as adds and removes)
                AddAction(f["path"], f["size"], f["partition_values"], f["mtime_ms"], True, json.dumps({"numRecords": f["rows"]}))
                for f in staged.files
            ]
            if dt is None:
                try:
                    create_table_with_add_actions(
                        staged.table,
                        schema,
                        actions,
                        mode="error",
                        partition_by=staged.partition_by or None,
                        storage_options=self.storage_options,
                        commit_properties=properties,
                    )
                except DeltaError as e:
                    # streaming queries share the quarantine and late-row tables: another one may
                    # have created the table first; then this is an append like any other
                    dt = self._table(staged.table)
                    if "already exists" not in str(e) or dt is None or mode != "append":
                        raise
            if dt is not None:
                if mode != "append":
                    _allow_timestamp_ntz(dt, spark_to_arrow(staged.schema))
                dt.create_write_transaction(
                    actions,
                    mode="append" if mode == "append" else "overwrite",
                    schema=dt.schema() if mode == "append" else schema,
                    partition_by=staged.partition_by or None,
                    commit_properties=properties,
                )
        self.discard(staged)
        return CommitResult(self.version(staged.table))

    def _replace_slice(self, dt: DeltaTable, staged: StagedWrite, where: Slice, properties: Any) -> None:
        """The slice's rows deleted and the staged rows added, in one commit (delta-rs' overwrite
        with a predicate: Delta's replaceWhere). delta-rs refuses rows outside the slice itself."""
        from deltalake import write_deltalake

        write_deltalake(
            dt,
            _staged_dataset(staged).scanner().to_reader(),
            mode="overwrite",
            predicate=where.datafusion_sql(staged.schema),
            partition_by=staged.partition_by or None,
            commit_properties=properties,
        )

    def _repartition(self, dt: DeltaTable, staged: StagedWrite, properties: Any) -> None:
        """An overwrite whose partitioning differs from the table's: the table's metadata must say
        the new partition columns, which a commit of the staged files cannot change (delta-rs kept
        the old ones, and the new partition column read as null), so delta-rs writes the rows."""
        from deltalake import write_deltalake

        write_deltalake(
            dt,
            _staged_dataset(staged).scanner().to_reader(),
            mode="overwrite",
            schema_mode="overwrite",
            partition_by=list(staged.partition_by),  # [] unpartitions (None would keep the old columns)
            commit_properties=properties,
        )

    def _merge(self, dt: DeltaTable, staged: StagedWrite, keys: list[str], properties: Any) -> None:
        source = _staged_dataset(staged)
        predicate = " AND ".join(f'(t."{k}" IS NOT DISTINCT FROM s."{k}")' for k in keys)
        (
            dt.merge(
                source.scanner().to_reader(),
                predicate=predicate,
                source_alias="s",
                target_alias="t",
                commit_properties=properties,
            )
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )

    def restore(self, table: str, version: int | None) -> None:
        if version is None:
            staging_files.remove_tree(table)
            return
        dt = self._table(table)
        if dt is None or dt.version() == version:
            return
        before = dt.version()
        try:
            dt.restore(version)
        except Exception as e:
            # as in `commit`: a restore is a commit, and delta-rs raises when the checkpoint it
            # writes after it fails, though the restore landed
            after = self._table(table)
            last = after.history(1)[0] if after is not None and after.version() == before + 1 else {}
            if _commit(last).restored_to != version:
                raise
            log.warning("%s: restored version %s, then delta-rs failed: %s", table, version, _one_line(e))

    def empty(self, table: str, schema: StructType, partition_by: list[str]) -> None:
        from deltalake import write_deltalake

        if self._table(table) is None:
            return
        rows = spark_to_arrow(schema).empty_table()
        write_deltalake(
            table,
            rows,
            mode="overwrite",
            schema_mode="overwrite",
            partition_by=partition_by or None,
            storage_options=self.storage_options,
        )

    def add_columns(self, table: str, columns: dict[str, str]) -> None:
        from deltalake import Field

        dt = self._table(table)
        assert dt is not None, table
        dt.alter.add_columns([Field(name, kind, nullable=True) for name, kind in columns.items()])  # type: ignore[arg-type]

    def append_rows(self, table: str, rows: pa.Table) -> None:
        from deltalake import write_deltalake

        with _writing(table):
            write_deltalake(table, rows, mode="append", storage_options=self.storage_options)

    def replace_rows(self, table: str, rows: pa.Table) -> None:
        from deltalake import write_deltalake

        with _writing(table):
            write_deltalake(table, rows, mode="overwrite", schema_mode="overwrite", storage_options=self.storage_options)

    def query(self, table: str, sql: str) -> pa.Table:
        from deltalake import QueryBuilder

        dt = self._table(table)
        if dt is None:
            return pa.table({})
        result = QueryBuilder().register("t", dt).execute(sql).read_all()
        return _plain_strings(pa.table(result))


def _allow_timestamp_ntz(dt: DeltaTable, schema: pa.Schema) -> None:
    """A table's new schema with a TIMESTAMP_NTZ column needs the table's timestampNtz feature
    first: delta-rs committed such a schema to a table without it, and the table could not be read
    again, by any run (a pandas-written Parquet source's times are TIMESTAMP_NTZ)."""
    from deltalake import TableFeatures

    if any(_holds_ntz(field.type) for field in schema) and "timestampNtz" not in (dt.protocol().writer_features or []):
        dt.alter.add_feature(TableFeatures.TimestampWithoutTimezone, allow_protocol_versions_increase=True)


def _holds_ntz(kind: pa.DataType) -> bool:
    """A timestamp without a time zone, at any depth."""
    if pa.types.is_timestamp(kind):
        return kind.tz is None
    if pa.types.is_struct(kind):
        return any(_holds_ntz(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _holds_ntz(kind.value_type)
    if pa.types.is_map(kind):
        return _holds_ntz(kind.key_type) or _holds_ntz(kind.item_type)
    return False


def _staged_dataset(staged: StagedWrite) -> Any:
    """The staged Parquet files as an Arrow dataset (a partitioned write's folders as columns)."""
    import pyarrow.dataset as ds

    full = spark_to_arrow(staged.schema)
    partitioning = None
    if staged.partition_by:
        partitioning = ds.partitioning(pa.schema([full.field(c) for c in staged.partition_by]), flavor="hive")
    fs, root = staging_files.filesystem(staged.staging)
    return ds.dataset(root, filesystem=fs, format="parquet", schema=full, partitioning=partitioning)


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


@contextmanager
def _writing(table: str) -> Iterator[None]:
    """One writer at a time per table in this process (see the module's docstring)."""
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(table.rstrip("/"), threading.Lock())
    with lock:
        yield


def _one_line(error: Exception) -> str:
    """delta-rs' error as one line: its chain of causes (lines marked ↳, coloured) joined."""
    parts = [re.sub(r"\x1b\[[0-9;]*m|↳", "", line).strip() for line in str(error).splitlines()]
    return f"{type(error).__name__}: " + ": ".join(p for p in parts if p)


def _commit(entry: dict[str, Any]) -> Commit:
    restored = (entry.get("operationParameters") or {}).get("version") if entry.get("operation") == "RESTORE" else None
    return Commit(
        int(entry.get("version", -1)),
        entry.get("tributary.app_id"),
        entry.get("tributary.run_id"),
        int(restored) if restored is not None else None,
    )


def _first_files(dt: DeltaTable, rows: int) -> list[str]:
    """The table's files, oldest first, until their row counts (the log's statistics) reach
    `rows`; a file without a count is taken and counted as enough. Oldest: the commit that added
    it (a local table's log; files written in one millisecond are told apart), then the write time."""
    actions = pa.RecordBatchReader.from_stream(dt.get_add_actions(flatten=True)).read_all()
    paths = actions.column("path").to_pylist()
    times = actions.column("modification_time").to_pylist()
    counts = actions.column("num_records").to_pylist() if "num_records" in actions.column_names else [None] * len(paths)
    root = from_spark_path(dt.table_uri).rstrip("/")  # a local table's folder as a path
    added = _added_in(root) if "://" not in root else {}
    chosen, held = [], 0
    order = sorted(zip(paths, times, counts, strict=True), key=lambda f: (added.get(unquote(f[0]), -1), f[1] or 0, f[0]))
    for path, _, count in order:
        if held >= rows:
            break
        chosen.append(path if "://" in path else f"{root}/{unquote(path)}")
        held += count if count is not None else rows
    return chosen


def _with_file_rank(rows: DataFrame, files: list[str]) -> DataFrame:
    """Each row with its file's place in `files` (FILE_RANK): write times can tie, names cannot."""
    from pyspark.sql import functions as F

    places = F.create_map(*[part for i, f in enumerate(files) for part in (F.lit(f.rsplit("/", 1)[-1]), F.lit(i))])
    name = F.element_at(F.split(F.col("_metadata.file_path"), "/"), -1)
    return rows.withColumn(FILE_RANK, F.element_at(places, name))


def _added_in(root: str) -> dict[str, int]:
    """Which commit of a local table's log added each file (commits the log still keeps as JSON)."""
    found: dict[str, int] = {}
    for commit in sorted(Path(root, "_delta_log").glob("*.json")):
        if not commit.stem.isdigit():
            continue
        for line in commit.read_text().splitlines():
            add = json.loads(line).get("add") if line.strip() else None
            if add:
                found[unquote(add["path"])] = int(commit.stem)
    return found


def arrow_schema(dt: DeltaTable) -> pa.Schema:
    return pa.schema(dt.schema().to_arrow())


def spark_to_arrow(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def _plain_strings(table: pa.Table) -> pa.Table:
    """DataFusion returns string_view columns; plain strings are what the rest of the code expects."""
    columns = []
    for column in table.columns:
        if pa.types.is_string_view(column.type):
            column = column.cast(pa.string())
        columns.append(column)
    return pa.table(columns, names=table.column_names)


def now_utc() -> datetime:
    return datetime.now(UTC)
