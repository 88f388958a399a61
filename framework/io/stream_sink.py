"""Exactly-once micro-batch commits into Delta (used through foreachBatch).

Each micro-batch is committed with the application transaction (app id, batch id). When Spark
replays a batch after a crash (the commit happened, the checkpoint did not record it), the
table already holds that transaction and the batch is skipped. A skipped batch is still run to
the `noop` sink: Spark 4.2 fails a stateful query whose foreachBatch did not execute its batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framework.io.delta_store import DeltaStore
from framework.io.locations import join

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass
class ExactlyOnceDeltaSink:
    store: DeltaStore
    name: str
    table: str
    app_id: str
    staging_root: str
    checkpoint: str = ""  # the streaming query's checkpoint folder
    mode: str = "append"
    keys: tuple[str, ...] = ()
    partition_by: tuple[str, ...] = ()
    #: optional: turn the micro-batch into the rows to write (e.g. late rows), given the batch id
    prepare: Callable[[DataFrame, int], DataFrame] | None = None
    on_commit: Callable[[str, int, int, int | None], None] | None = None
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
        frame = self.prepare(batch, batch_id) if self.prepare else batch
        staged = self.store.stage(
            frame, self.name, self.table, join(self.staging_root, f"batch-{batch_id}"), list(self.partition_by)
        )
        if staged.rows == 0:
            self.store.discard(staged)
            return
        result = self.store.commit(frame.sparkSession, staged, self.mode, list(self.keys), self.app_id, batch_id)  # type: ignore[arg-type]
        self.batches += 1
        if not result.skipped:
            self.rows += staged.rows
        self.version = result.version
        if self.on_commit:
            self.on_commit(self.name, batch_id, staged.rows, result.version)

    def describe(self) -> dict[str, Any]:
        return {"table": self.table, "batches": self.batches, "replayed": self.replayed, "rows": self.rows}
