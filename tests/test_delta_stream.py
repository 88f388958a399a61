"""The tributary_delta streaming source: Delta versions as offsets, appends only, restarts from checkpoints."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.errors import StreamingQueryException

from framework.io.delta_stream import register_delta_stream

TS = datetime(2024, 1, 1, 12, 30, 0, 123456, tzinfo=UTC)


def rows(ids: list[int], day: date = date(2024, 1, 1), kind: str = "a") -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array([TS] * n, pa.timestamp("us", tz="UTC")),
            "day": pa.array([day] * n, pa.date32()),
            "kind": pa.array([kind] * n, pa.string()),
        }
    )


def stream(spark, table: Path, checkpoint: Path, **options: str) -> list[list[dict]]:
    """One availableNow run into foreachBatch; the rows of each micro-batch, sorted by id."""
    batches: list[list[dict]] = []
    reader = spark.readStream.format(register_delta_stream(spark)).option("path", str(table))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(lambda df, _: batches.append(sorted((r.asDict() for r in df.collect()), key=lambda r: r["id"])))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return [b for b in batches if b]


def ids(batches: list[list[dict]]) -> list[list[int]]:
    return [[r["id"] for r in batch] for batch in batches]


def test_first_run_streams_all_versions_then_restart_reads_only_new_ones(spark, tmp_path: Path):
    table, checkpoint = tmp_path / "t", tmp_path / "checkpoint"
    write_deltalake(table, rows([1, 2]))
    write_deltalake(table, rows([3]), mode="append")
    write_deltalake(table, rows([4, 5]), mode="append")

    first = stream(spark, table, checkpoint)
    assert ids(first) == [[1, 2, 3, 4, 5]]  # availableNow: everything up to version 2 in one batch
    assert first[0][0] == {"id": 1, "ts": TS.replace(tzinfo=None), "day": date(2024, 1, 1), "kind": "a"}  # session tz is UTC

    assert stream(spark, table, checkpoint) == []  # nothing new
    write_deltalake(table, rows([6]), mode="append")
    assert ids(stream(spark, table, checkpoint)) == [[6]]


def test_partition_columns_keep_their_values(spark, tmp_path: Path):
    table = tmp_path / "t"
    write_deltalake(table, rows([1, 2], date(2024, 1, 1), "a"), partition_by=["day", "kind", "ts"])
    write_deltalake(table, rows([3], date(2024, 1, 2), "b"), mode="append")

    (batch,) = stream(spark, table, tmp_path / "checkpoint")
    assert [(r["id"], r["day"], r["kind"]) for r in batch] == [
        (1, date(2024, 1, 1), "a"),
        (2, date(2024, 1, 1), "a"),
        (3, date(2024, 1, 2), "b"),
    ]
    assert batch[0]["ts"] == TS.replace(tzinfo=None)


def test_overwrite_in_range_fails_unless_ignore_changes(spark, tmp_path: Path):
    table = tmp_path / "t"
    write_deltalake(table, rows([1, 2]))
    write_deltalake(table, rows([7]), mode="overwrite")

    with pytest.raises(StreamingQueryException, match=r"version 1 removes data \(WRITE\).*ignore_changes: true") as error:
        stream(spark, table, tmp_path / "checkpoint")
    assert str(table) in str(error.value)

    assert ids(stream(spark, table, tmp_path / "checkpoint2", ignore_changes="true")) == [[1, 2, 7]]


def test_starting_version(spark, tmp_path: Path):
    table = tmp_path / "t"
    write_deltalake(table, rows([1]))
    write_deltalake(table, rows([2]), mode="append")
    write_deltalake(table, rows([3]), mode="append")

    assert ids(stream(spark, table, tmp_path / "c1", starting_version="1")) == [[2, 3]]
    assert stream(spark, table, tmp_path / "c2", starting_version="latest") == []


def test_processing_time_trigger_picks_up_new_commits(spark, tmp_path: Path):
    reader = register_delta_stream(spark)
    table = tmp_path / "t"
    write_deltalake(table, rows([1]))
    seen: list[int] = []
    query = (
        spark.readStream.format(reader)
        .option("path", str(table))
        .load()
        .writeStream.foreachBatch(lambda df, _: seen.extend(r.id for r in df.collect()))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        write_deltalake(table, rows([2, 3]), mode="append")
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(seen) == [1, 2, 3]


def test_added_column_reads_null_from_older_files_and_stops_a_running_stream(spark, tmp_path: Path):
    from framework.io.delta_stream import DeltaStreamError, DeltaStreamReader

    table = tmp_path / "t"
    write_deltalake(table, rows([1]))
    old_schema = spark.readStream.format(register_delta_stream(spark)).option("path", str(table)).load().schema
    write_deltalake(table, rows([2]).append_column("extra", pa.array(["x"])), mode="append", schema_mode="merge")

    (batch,) = stream(spark, table, tmp_path / "checkpoint")
    assert [(r["id"], r["extra"]) for r in batch] == [(1, None), (2, "x")]

    # A query started before the column was added would drop it: it must restart instead.
    reader = DeltaStreamReader(str(table), old_schema, {})
    with pytest.raises(DeltaStreamError, match="version 1 changes the schema \\(column extra: string\\)"):
        reader.partitions({"version": 0}, {"version": 1})


def test_missing_table_is_named(spark, tmp_path: Path):
    reader = register_delta_stream(spark)
    with pytest.raises(Exception, match="no Delta table at .*nowhere"):
        spark.readStream.format(reader).option("path", str(tmp_path / "nowhere")).load()


def test_a_session_made_after_its_parent_registered_the_source_reads_it_too(spark, tmp_path: Path):
    """A session made by `newSession()` (each test of `tributary test`, each run of a warm engine)
    after its parent registered the source: Spark refuses the name there and does not find it
    either, so a chain could not be read there at all (DATA_SOURCE_ALREADY_EXISTS)."""
    table = tmp_path / "t"
    write_deltalake(table, rows([1, 2]))
    register_delta_stream(spark)
    child = spark.newSession()
    assert ids(stream(child, table, tmp_path / "checkpoint")) == [[1, 2]]
    write_deltalake(table, rows([3]), mode="append")
    assert ids(stream(child, table, tmp_path / "checkpoint")) == [[3]]  # registered again in the child: still its own
    assert ids(stream(child.newSession(), table, tmp_path / "checkpoint2")) == [[1, 2, 3]]
