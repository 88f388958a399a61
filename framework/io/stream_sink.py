"""Exactly-once micro-batch commits into Delta (used through foreachBatch).

Each micro-batch is committed with the application transaction (app id, batch id). When Spark
replays a batch after a crash (the commit happened, the checkpoint did not record it), the
table already holds that transaction and the batch is skipped. A skipped batch is still run to
the `noop` sink: Spark 4.2 fails a stateful query whose foreachBatch did not execute its batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from framework.errors import RunFailed
from framework.io.delta.base import DeltaStore
from framework.io.locations import join

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType


class RepeatedKeysError(RunFailed):
    """A micro-batch of a merge output holds a key more than once: nothing of it is committed."""


@dataclass(frozen=True)
class WrittenRows:
    """What a `prepare` returns when it wrote the batch's rows itself, as Parquet files in `folder`
    (no partition folders): the sink commits those files instead of writing the rows again.

    side: rows for other tables (e.g. quarantine, late rows), by the name of the sink in the
    output sink's `side` that commits them, with this batch's id and before the output."""

    folder: str
    schema: StructType
    side: dict[str, DataFrame] = field(default_factory=dict)


@dataclass(frozen=True)
class SplitRows:
    """What a `prepare` returns when it sets some of the batch's rows aside for other tables: the
    rows to write, the rows for each side sink (as WrittenRows.side), and what to release once the
    batch is committed (e.g. the persisted batch both were read from)."""

    rows: DataFrame
    side: dict[str, DataFrame] = field(default_factory=dict)
    release: Callable[[], object] | None = None


@dataclass
class ExactlyOnceDeltaSink:
    store: DeltaStore
    name: str
    table: str
    app_id: str
    staging_root: str
    checkpoint: str = ""  # the streaming query's checkpoint folder
    run_id: str = ""  # the run whose commits these are (in each commit's metadata, as a batch run's)
    mode: str = "append"
    keys: tuple[str, ...] = ()
    partition_by: tuple[str, ...] = ()
    #: optional: turn the micro-batch into the rows to write (e.g. late rows), given the batch id
    prepare: Callable[[DataFrame, int], DataFrame | WrittenRows | SplitRows] | None = None
    on_commit: Callable[[str, int, int, int | None], None] | None = None
    #: sinks of the side tables a `prepare` may hand rows to (WrittenRows.side)
    side: dict[str, ExactlyOnceDeltaSink] = field(default_factory=dict)
    #: told each micro-batch's id and the seconds it took here (prepare and commit), once committed
    after_batch: Callable[[int, float], None] | None = None
    rows: int = 0
    batches: int = 0
    replayed: int = 0
    version: int | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        done = self.store.transaction_version(self.table, self.app_id)
        if done is not None and done >= batch_id:
            batch.write.format("noop").mode("overwrite").save()
            self.replayed += 1
            return
        began = time.perf_counter()
        prepared = self.prepare(batch, batch_id) if self.prepare else batch
        try:
            self._commit(batch.sparkSession, prepared, batch_id)
        finally:
            if isinstance(prepared, SplitRows) and prepared.release is not None:
                prepared.release()
        if self.after_batch is not None:
            self.after_batch(batch_id, time.perf_counter() - began)

    def _commit(self, spark: Any, frame: DataFrame | WrittenRows | SplitRows, batch_id: int) -> None:
        if isinstance(frame, (WrittenRows, SplitRows)):
            for table, side_rows in frame.side.items():
                self.side[table](side_rows, batch_id)
        rows = frame.rows if isinstance(frame, SplitRows) else frame
        if isinstance(rows, WrittenRows) and not self.partition_by:
            staged = self.store.staged(self.name, self.table, rows.folder, rows.schema, [])
        else:
            if isinstance(rows, WrittenRows):  # laid out again in the table's partition folders
                rows = spark.read.schema(rows.schema).parquet(rows.folder)
            staging = join(self.staging_root, f"batch-{batch_id}")
            staged = self.store.stage(rows, self.name, self.table, staging, list(self.partition_by))
        if staged.rows == 0:
            self.store.discard(staged)
            return
        if self.mode == "merge" and (repeated := self.store.repeated_keys(spark, staged, list(self.keys))):
            self.store.discard(staged)
            raise RepeatedKeysError(
                f"output '{self.name}': merge keys {list(self.keys)} are not unique in micro-batch {batch_id}'s rows "
                f"(e.g. {', '.join(str(key) for key in repeated)}): a merge takes one row per key; make the step give "
                "one row per key in each micro-batch, or write mode: append"
            )
        result = self.store.commit(spark, staged, self.mode, list(self.keys), self.app_id, batch_id, self.run_id)  # type: ignore[arg-type]
        self.batches += 1
        if not result.skipped:
            self.rows += staged.rows
        self.version = result.version
        if self.on_commit:
            self.on_commit(self.name, batch_id, staged.rows, result.version)

    def describe(self) -> dict[str, Any]:
        return {"table": self.table, "batches": self.batches, "replayed": self.replayed, "rows": self.rows}
