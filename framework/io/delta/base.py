"""One interface over the two Delta implementations a run may use.

A run first *stages* every output (Spark computes it and writes Parquet under the warehouse's
staging folder), then *commits* them one after another. Nothing is visible to readers before
the commit, so a failure while computing leaves every table at its previous version; a failure
during the commits is undone by restoring the tables already committed.

Each commit carries a Delta application transaction (app id, version): batch runs use app id =
tributary/<pipeline>/<output>/<run key> at version 0, streaming runs app id =
tributary/<pipeline>/<output> at version = micro-batch id. A replayed commit finds its
transaction in the log and is skipped, so nothing is written twice.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, time
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

WriteMode = Literal["append", "overwrite", "merge"]
#: commits read back to find which run wrote what (a table's log may be longer)
HISTORY_LIMIT = 1000


#: read(limit=...): the place of each row's file among the table's first files, oldest first
FILE_RANK = "__tributary_file_rank"


#: open Parquet writers per task for a split write (one per split value: the output's rows and
#: each combination of failed drop expectations); past it, Spark sorts the task's other rows
SPLIT_WRITERS = 4
#: a split write's confs (see `unsorted_split`)
_SPLIT_CONFS = {
    "spark.sql.optimizer.plannedWrite.enabled": "false",
    "spark.sql.maxConcurrentOutputFileWriters": str(SPLIT_WRITERS),
}


@contextmanager
def unsorted_split(spark: SparkSession) -> Iterator[None]:
    """A write partitioned on its split column without sorting its rows first.

    Spark writes a partitioned folder from rows sorted by the partition columns, and plans that
    sort into every such write. A split puts nearly every row in one partition (the refused few
    go to the others), so the sort buys nothing. With the planned sort off and
    `maxConcurrentOutputFileWriters` set, each task keeps a Parquet writer open per split value
    and sorts only the rows past SPLIT_WRITERS values. Measured on 1M rows, local[2], medians:
    16 columns read from Parquet, unpartitioned 1.44 s, split with the sort 1.97 s, split
    without it 1.59 s; the same rows after a window (as in benchmarks/bench_quality.py's
    step), 3.57 s with the sort, 3.40 s without (7 alternated rounds).

    The confs are the session's, set for this write only: a run's session is its own
    (framework.warm.isolation), and it stages its outputs one at a time."""
    before = {key: spark.conf.get(key) for key in _SPLIT_CONFS}
    for key, value in _SPLIT_CONFS.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, was in before.items():
            if was is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, was)


@dataclass(frozen=True)
class Commit:
    """One entry of a table's history, as far as Tributary reads it."""

    version: int
    app_id: str | None = None  # made by Tributary: tributary/<pipeline>/<output>/<run key>
    run_id: str | None = None
    restored_to: int | None = None  # a RESTORE: the version it put the table back to


UNDONE = "undone"


def _applied(history: list[Commit], match: Callable[[Commit], bool]) -> Commit | str | None:
    """The newest commit that `match`es: the Commit while it still holds, UNDONE when a later
    RESTORE went back before it, None when none in `history` matches."""
    undone_below: int | None = None  # the lowest version a newer RESTORE went back to
    for commit in history:
        if match(commit):
            return UNDONE if undone_below is not None and undone_below < commit.version else commit
        if commit.restored_to is not None:
            undone_below = commit.restored_to if undone_below is None else min(undone_below, commit.restored_to)
    return None


def _first_instant(at: datetime, zone: ZoneInfo) -> datetime:
    """The first instant of `at`'s local date: its midnight, or, where the clocks skip midnight
    (Santiago on 6 September 2026: 00:00 becomes 01:00), the time the day begins at."""
    midnight = datetime.combine(at.date(), time(0), tzinfo=zone)
    return midnight.astimezone(UTC).astimezone(zone)


def whole_days(start: datetime, end: datetime, timezone: str) -> bool:
    """Whether [start, end) begins and ends where local days begin in `timezone` (what a DATE
    slice needs)."""
    zone = ZoneInfo(timezone)
    return all(t == _first_instant(t, zone) for t in (start.astimezone(zone), end.astimezone(zone)))


@dataclass(frozen=True)
class Slice:
    """The rows of one interval in an interval-sliced output: `column` within [start, end).

    A TIMESTAMP column is compared with the interval's instants (UTC), a TIMESTAMP_NTZ column with
    its wall-clock times in the schedule's timezone, a DATE column with its local dates (then the
    interval must start and end where local days do: at midnight, or where the clocks skip it)."""

    column: str
    start: datetime  # UTC
    end: datetime  # UTC
    timezone: str = "UTC"

    def bounds(self, schema: StructType) -> tuple[str, str, str]:
        """(kind, start, end) as literal text for the column's type: kind is DATE or TIMESTAMP."""
        from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

        field = next((f for f in schema.fields if f.name.lower() == self.column.lower()), None)
        if field is None:
            raise ValueError(f"it has no column '{self.column}' (its columns: {', '.join(schema.fieldNames())})")
        zone = ZoneInfo(self.timezone)
        start, end = self.start.astimezone(zone), self.end.astimezone(zone)
        if isinstance(field.dataType, DateType):
            if not whole_days(self.start, self.end, self.timezone):
                raise ValueError(
                    f"'{self.column}' is a DATE, and this interval ({start.isoformat()} / {end.isoformat()}) is not whole days"
                )
            return "DATE", start.date().isoformat(), end.date().isoformat()
        if isinstance(field.dataType, TimestampNTZType):
            return "TIMESTAMP_NTZ", start.replace(tzinfo=None).isoformat(), end.replace(tzinfo=None).isoformat()
        if isinstance(field.dataType, TimestampType):
            utc = [t.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z" for t in (self.start, self.end)]
            return "TIMESTAMP", utc[0], utc[1]
        raise ValueError(
            f"its column '{self.column}' is {field.dataType.simpleString()}: an interval slices a DATE or TIMESTAMP column"
        )

    def spark_sql(self, schema: StructType) -> str:
        """The slice as a Spark SQL condition (Delta's replaceWhere)."""
        kind, start, end = self.bounds(schema)
        column = f"`{self.column}`"
        return f"{column} >= {kind} '{start}' AND {column} < {kind} '{end}'"

    def datafusion_sql(self, schema: StructType) -> str:
        """The slice as a delta-rs (DataFusion) predicate: string literals cast to the column's type."""
        _, start, end = self.bounds(schema)
        column = '"' + self.column.replace('"', '""') + '"'
        return f"{column} >= '{start}' AND {column} < '{end}'"


@dataclass
class StagedWrite:
    """An output computed and written to staging, not yet visible in its table."""

    output: str
    table: str  # table location
    staging: str  # staging folder
    schema: StructType
    partition_by: list[str]
    rows: int = 0
    files: list[dict[str, Any]] = field(default_factory=list)  # path (relative), size, partition_values, rows
    split_by: str | None = None  # a column the write was split on: rows where it is null are the output
    split_off: str | None = None  # the folder (base path) of the rows split off
    split_rows: int = 0


@dataclass(frozen=True)
class CommitResult:
    version: int | None  # table version after the commit (None: skipped and table absent)
    skipped: bool = False  # the same run's transaction was already in the table
    #: what failed after the commit landed (e.g. the checkpoint delta-rs writes after it), for the user
    note: str = ""


class DeltaStore(ABC):
    """Reads and writes Delta tables for one run."""

    name: str

    @abstractmethod
    def version(self, table: str) -> int | None:
        """Current version, or None when there is no table."""

    @abstractmethod
    def schema(self, table: str) -> StructType | None:
        """Current schema as Spark types, or None when there is no table."""

    @abstractmethod
    def partition_columns(self, table: str) -> list[str] | None:
        """The columns the table is partitioned by, or None when there is no table."""

    @abstractmethod
    def transaction_version(self, table: str, app_id: str) -> int | None:
        """The highest version committed under this application id (None: never)."""

    def has_transaction(self, table: str, app_id: str, version: int = 0) -> bool:
        done = self.transaction_version(table, app_id)
        return done is not None and done >= version

    @abstractmethod
    def read(
        self, spark: SparkSession, table: str, version: int | None = None, timestamp: Any = None, limit: int | None = None
    ) -> DataFrame:
        """The table (optionally as of a version or time) as a Spark DataFrame; with `limit`, at
        least its first files that hold `limit` rows, each row with its file's place among them
        (FILE_RANK) where the store knows it (framework.io.sample keeps the first rows)."""

    def stage(
        self, df: DataFrame, output: str, table: str, staging: str, partition_by: list[str], split_by: str | None = None
    ) -> StagedWrite:
        """Compute the output and write it as Parquet under `staging`.

        split_by: a column whose non-null rows are not the output's (e.g. rows a quality check
        quarantines). The write is partitioned on it first, so one pass writes both: the output
        is the null partition's folder; `read_split_off` reads the others."""
        from framework.io import staging as staging_files
        from framework.observations import keep_sent_back

        writer = df.write.mode("overwrite")
        partitions = [split_by, *partition_by] if split_by else list(partition_by)
        if partitions:
            writer = writer.partitionBy(*partitions)
        with unsorted_split(df.sparkSession) if split_by else nullcontext():
            writer.parquet(staging)
        keep_sent_back(df)  # Spark Connect: what the steps' views counted (framework.observations)
        if not split_by:
            return self.staged(output, table, staging, df.schema, partition_by)
        kept = f"{staging.rstrip('/')}/{split_by}={staging_files.HIVE_NULL}"
        staged = StagedWrite(output, table, kept, df.drop(split_by).schema, list(partition_by), split_by=split_by)
        staged.split_off = staging
        written = staging_files.list_parquet(staging)
        off = [f for f in written if f["partition_values"].get(split_by) is not None]
        staged.split_rows = sum(f["rows"] for f in off)
        staged.files = [
            {
                **f,
                "path": f["path"].split("/", 1)[1],
                "partition_values": {k: v for k, v in f["partition_values"].items() if k != split_by},
            }
            for f in written
            if f["partition_values"].get(split_by) is None
        ]
        staged.rows = sum(f["rows"] for f in staged.files)
        return staged

    @staticmethod
    def staged(output: str, table: str, folder: str, schema: StructType, partition_by: list[str]) -> StagedWrite:
        """The Parquet files in `folder` (col=value folders for `partition_by`) as a staged write."""
        from framework.io import staging as staging_files

        staged = StagedWrite(output, table, folder, schema, list(partition_by))
        staged.files = staging_files.list_parquet(folder)
        staged.rows = sum(f["rows"] for f in staged.files)
        return staged

    @staticmethod
    def repeated_keys(spark: SparkSession, staged: StagedWrite, keys: list[str], limit: int = 3) -> list[dict[str, Any]]:
        """Up to `limit` keys that more than one staged row holds: a merge takes one row per key
        (delta-rs inserted both rows of a new key, and failed on an existing one)."""
        if not staged.files:
            return []
        reader = spark.read.schema(staged.schema)
        if staged.partition_by:
            reader = reader.option("basePath", staged.staging)
        repeated = reader.parquet(staged.staging).groupBy(*keys).count().where("count > 1").limit(limit).collect()
        return [{k: row[k] for k in keys} for row in repeated]

    @staticmethod
    def read_split_off(spark: SparkSession, staged: StagedWrite, schema: StructType) -> DataFrame:
        """The rows a split write set aside (`schema`: the staged frame's, with the split column)."""
        from pyspark.sql import functions as F

        assert staged.split_by and staged.split_off
        reader = spark.read.schema(schema).option("basePath", staged.split_off)
        return reader.parquet(staged.split_off).where(F.col(staged.split_by).isNotNull())

    @abstractmethod
    def last_run_id(self, table: str) -> str | None:
        """The Tributary run that made the table's latest commit (from its commit metadata)."""

    @abstractmethod
    def history(self, table: str, limit: int) -> list[Commit]:
        """The table's newest `limit` commits, newest first (empty when there is no table)."""

    def commits(self, table: str, limit: int) -> list[tuple[str | None, str | None]]:
        """(app id, run id) of the table's newest `limit` commits, newest first (None where a
        commit was not made by Tributary)."""
        return [(c.app_id, c.run_id) for c in self.history(table, limit)]

    def written_by(self, table: str, app_id: str, latest_only: bool) -> str | None:
        """The run whose commit carries `app_id`: the table's latest commit only (an overwrite's or
        a merge's values are current only while nothing came after them), or any commit that no
        RESTORE undid since (an append's rows stay). None when there is none; "an identical run"
        when its run id is not found."""
        if latest_only:
            newest = self.commits(table, 1)
            return (newest[0][1] or "an identical run") if newest and newest[0][0] == app_id else None
        if not self.has_transaction(table, app_id):
            return None
        found = _applied(self.history(table, HISTORY_LIMIT), lambda c: c.app_id == app_id)
        if found is UNDONE:
            return None
        return (found.run_id if isinstance(found, Commit) else None) or "an identical run"

    def written_by_slice(self, table: str, app_id: str, slice_prefix: str) -> str | None:
        """An interval-sliced output: the run whose commit carries `app_id`, when it is the newest
        commit of that interval (app ids starting `slice_prefix`) that no RESTORE undid. A later
        rerun of the interval with other input replaced the slice, so an old run never masks it."""
        if not self.has_transaction(table, app_id):
            return None
        found = _applied(self.history(table, HISTORY_LIMIT), lambda c: (c.app_id or "").startswith(slice_prefix))
        if not isinstance(found, Commit) or found.app_id != app_id:
            return None
        return found.run_id or "an identical run"

    def holds_run(self, table: str, run_id: str) -> bool:
        """Whether a commit of run `run_id` is in the table's newest commits and no RESTORE undid it."""
        return isinstance(_applied(self.history(table, HISTORY_LIMIT), lambda c: c.run_id == run_id), Commit)

    @abstractmethod
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
        """Make a staged write visible in its table, atomically, tagged (app_id, txn_version).
        Skipped when the table already holds that app id at txn_version or later. `where`: an
        overwrite replaces only the rows of that slice (in the same one commit)."""

    def discard(self, staged: StagedWrite) -> None:
        from framework.io import staging as staging_files

        staging_files.remove_tree(staged.staging)
        if staged.split_off:
            staging_files.remove_tree(staged.split_off)

    @abstractmethod
    def restore(self, table: str, version: int | None) -> None:
        """Put the table back to `version` (None: the table did not exist; remove it)."""

    @abstractmethod
    def empty(self, table: str, schema: StructType, partition_by: list[str]) -> None:
        """An existing table gets a new version with no rows and `schema` (its history stays);
        nothing happens to a table that does not exist."""

    @abstractmethod
    def add_columns(self, table: str, columns: dict[str, str]) -> None:
        """Add nullable columns (name: Delta type, e.g. 'long') to an existing table, in one new version."""

    def ensure_columns(self, table: str, columns: dict[str, str]) -> None:
        """An existing table written by an earlier Tributary gets the columns it lacks (nullable)."""
        schema = self.schema(table)
        if schema is not None:
            have = {f.name.lower() for f in schema.fields}
            missing = {name: kind for name, kind in columns.items() if name.lower() not in have}
            if missing:
                self.add_columns(table, missing)

    @abstractmethod
    def append_rows(self, table: str, rows: pa.Table) -> None:
        """Append a small Arrow table (run events, quality results) to a Delta table."""

    @abstractmethod
    def replace_rows(self, table: str, rows: pa.Table) -> None:
        """Replace a small table's rows (and schema) with an Arrow table, in one new version."""

    @abstractmethod
    def query(self, table: str, sql: str) -> pa.Table:
        """Run a small SQL query over a table (named `t`) without a JVM, for the CLI's listings."""
