"""Delta through Spark's own writer: used when the delta-spark jars are on the classpath (a cluster).

Staging is the same as with delta-rs; the commit reads the staged Parquet and writes it with
Delta's idempotent-write options (txnAppId/txnVersion), so a replayed commit is skipped by Delta.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from framework.io import staging as staging_files
from framework.io.delta.base import Commit, CommitResult, DeltaStore, Slice, StagedWrite, WriteMode

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


class SparkDeltaStore(DeltaStore):
    name = "spark"

    def __init__(self, spark: SparkSession):
        self.spark = spark

    def _exists(self, table: str) -> bool:
        from delta.tables import DeltaTable

        return DeltaTable.isDeltaTable(self.spark, table)

    def version(self, table: str) -> int | None:
        from delta.tables import DeltaTable

        if not self._exists(table):
            return None
        latest = DeltaTable.forPath(self.spark, table).history(1).select("version").first()
        return int(latest[0]) if latest is not None else None

    def schema(self, table: str) -> StructType | None:
        return self.spark.read.format("delta").load(table).schema if self._exists(table) else None

    def partition_columns(self, table: str) -> list[str] | None:
        from delta.tables import DeltaTable

        if not self._exists(table):
            return None
        detail = DeltaTable.forPath(self.spark, table).detail().select("partitionColumns").first()
        return list(detail[0]) if detail is not None else []

    def transaction_version(self, table: str, app_id: str) -> int | None:
        """Application transactions live in the log as `txn` actions (JSON commits and checkpoints)."""
        if not self._exists(table):
            return None
        from pyspark.sql import functions as F

        log = f"{table.rstrip('/')}/_delta_log"
        frames = [self.spark.read.json(f"{log}/*.json")]
        with contextlib.suppress(Exception):  # no checkpoint yet
            frames.append(self.spark.read.parquet(f"{log}/*.checkpoint*.parquet"))
        versions = []
        for frame in frames:
            if "txn" in frame.columns:
                row = frame.where(F.col("txn.appId") == app_id).agg(F.max("txn.version").alias("v")).first()
                if row is not None and row.v is not None:
                    versions.append(int(row.v))
        return max(versions) if versions else None

    def read(
        self, spark: SparkSession, table: str, version: int | None = None, timestamp: Any = None, limit: int | None = None
    ) -> DataFrame:
        reader = spark.read.format("delta")  # Delta's own scan; a limit is applied by the caller
        if version is not None:
            reader = reader.option("versionAsOf", version)
        elif timestamp is not None:
            reader = reader.option("timestampAsOf", str(timestamp))
        return reader.load(table)

    def last_run_id(self, table: str) -> str | None:
        from delta.tables import DeltaTable

        if not self._exists(table):
            return None
        row = DeltaTable.forPath(self.spark, table).history(1).select("userMetadata").first()
        try:
            return json.loads(row[0]).get("tributary.run_id") if row and row[0] else None
        except ValueError:
            return None

    def history(self, table: str, limit: int) -> list[Commit]:
        from delta.tables import DeltaTable

        if not self._exists(table):
            return []
        found: list[Commit] = []
        rows = (
            DeltaTable.forPath(self.spark, table)
            .history(limit)
            .select("version", "operation", "operationParameters", "userMetadata")
        )
        for row in rows.collect():
            try:
                meta = json.loads(row.userMetadata) if row.userMetadata else {}
            except ValueError:
                meta = {}
            restored = (row.operationParameters or {}).get("version") if row.operation == "RESTORE" else None
            found.append(
                Commit(
                    int(row.version),
                    meta.get("tributary.app_id"),
                    meta.get("tributary.run_id"),
                    int(restored) if restored not in (None, "", "null") else None,
                )
            )
        return found

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
        before = self.version(staged.table)
        reader = spark.read.schema(staged.schema)
        if staged.partition_by:
            reader = reader.option("basePath", staged.staging)
        frame = (
            reader.parquet(staged.staging).select(*staged.schema.fieldNames())
            if staged.files
            else spark.createDataFrame([], staged.schema)
        )
        if mode == "merge" and before is not None:
            from delta.tables import DeltaTable

            condition = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in keys)
            spark.conf.set(_TXN_APP_ID, app_id)
            spark.conf.set(_TXN_VERSION, str(txn_version))
            spark.conf.set(_USER_METADATA, json.dumps({"tributary.run_id": run_id, "tributary.app_id": app_id}))
            try:
                (
                    DeltaTable.forPath(spark, staged.table)
                    .alias("t")
                    .merge(frame.alias("s"), condition)
                    .whenMatchedUpdateAll()
                    .whenNotMatchedInsertAll()
                    .execute()
                )
            finally:
                spark.conf.unset(_TXN_APP_ID)
                spark.conf.unset(_TXN_VERSION)
                spark.conf.unset(_USER_METADATA)
        else:
            writer = frame.write.format("delta").option("txnAppId", app_id).option("txnVersion", txn_version)
            writer = writer.option("userMetadata", json.dumps({"tributary.run_id": run_id, "tributary.app_id": app_id}))
            writer = writer.mode("append" if mode == "append" else "overwrite")
            if where is not None and before is not None:  # the slice's rows replaced, in one commit
                writer = writer.option("replaceWhere", where.spark_sql(staged.schema))
            elif mode != "append":
                writer = writer.option("overwriteSchema", "true")
            if staged.partition_by:
                writer = writer.partitionBy(*staged.partition_by)
            writer.save(staged.table)
        self.discard(staged)
        after = self.version(staged.table)
        return CommitResult(after, skipped=after == before)

    def restore(self, table: str, version: int | None) -> None:
        from delta.tables import DeltaTable

        if version is None:
            staging_files.remove_tree(table)
        elif self.version(table) != version:
            DeltaTable.forPath(self.spark, table).restoreToVersion(version)

    def empty(self, table: str, schema: StructType, partition_by: list[str]) -> None:
        if not self._exists(table):
            return
        writer = self.spark.createDataFrame([], schema).write.format("delta").mode("overwrite").option("overwriteSchema", "true")
        writer.partitionBy(*partition_by).save(table)

    def add_columns(self, table: str, columns: dict[str, str]) -> None:
        added = ", ".join(f"`{name}` {kind.upper()}" for name, kind in columns.items())
        self.spark.sql(f"ALTER TABLE delta.`{table}` ADD COLUMNS ({added})")

    def append_rows(self, table: str, rows: pa.Table) -> None:
        self.spark.createDataFrame(rows.to_pandas()).write.format("delta").mode("append").save(table)

    def replace_rows(self, table: str, rows: pa.Table) -> None:
        frame = self.spark.createDataFrame(rows.to_pandas())
        frame.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(table)

    def query(self, table: str, sql: str) -> pa.Table:
        if not self._exists(table):
            return pa.table({})
        self.spark.read.format("delta").load(table).createOrReplaceTempView("t")
        return self.spark.sql(sql).toArrow()
