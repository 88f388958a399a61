"""What a micro-batch read, known without reading its rows: the files a real streaming query's
checkpoint lists for each batch (across Spark's log compaction), and the newest timestamp their
Parquet footers record."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from framework.io.locations import from_spark_path
from framework.io.parquet_footers import BatchFooters, NoStatistics, newest_micros
from framework.io.stream_checkpoint import StreamCheckpoint

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _micros(moment: datetime.datetime) -> int:
    return (moment - EPOCH) // datetime.timedelta(microseconds=1)


def test_each_batch_lists_the_files_it_read_and_their_newest_event_time(spark, tmp_path):
    """Twelve files, one per batch: Spark folds its file log into 9.compact on the way. Inside
    foreachBatch the running batch's files are listed; afterwards every batch's still are, also
    once the logs before the compaction are gone."""
    folder, checkpoint = tmp_path / "in folder #1", tmp_path / "checkpoint"
    folder.mkdir()
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    for i in range(12):
        path = folder / f"part-{i:02d}.parquet"
        moments = [start + datetime.timedelta(seconds=10 * i + s) for s in (3, 1)]
        pq.write_table(pa.table({"n": [i, i], "ts": pa.array(moments, pa.timestamp("ms", tz="UTC"))}), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    seen: dict[int, tuple[list[str], int | None, list[int], int]] = {}

    def record(batch, batch_id):
        rows = batch.selectExpr("n", "unix_micros(ts) AS micros").collect()
        files = StreamCheckpoint(str(checkpoint)).files(batch_id, str(folder))
        newest = BatchFooters(str(checkpoint), "TS").newest(batch_id)
        seen[batch_id] = (files, newest, sorted({r.n for r in rows}), max(r.micros for r in rows))

    stream = spark.readStream.schema("n BIGINT, ts TIMESTAMP").option("maxFilesPerTrigger", 1).parquet(str(folder))
    query = stream.writeStream.foreachBatch(record).option("checkpointLocation", str(checkpoint))
    query.trigger(availableNow=True).start().awaitTermination()

    assert sorted(seen) == list(range(12))
    assert (checkpoint / "sources" / "0" / "9.compact").exists()
    for batch_id, (files, newest, numbers, latest) in seen.items():
        assert [Path(from_spark_path(f)).name for f in files] == [f"part-{batch_id:02d}.parquet"]
        assert numbers == [batch_id]
        assert newest == latest == _micros(start + datetime.timedelta(seconds=10 * batch_id + 3))
    for i in range(9):
        (checkpoint / "sources" / "0" / str(i)).unlink()  # Spark deletes logs it has compacted
    listed = [StreamCheckpoint(str(checkpoint)).files(b) for b in range(12)]
    assert listed == [files for files, *_ in (seen[b] for b in range(12))]
    assert StreamCheckpoint(str(checkpoint)).committed() == list(range(12))


def test_the_newest_timestamp_comes_from_every_row_group_of_every_file(tmp_path):
    day = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pq.write_table(
        pa.table({"ts": pa.array([day, None, day + datetime.timedelta(hours=2), None], pa.timestamp("us", tz="UTC"))}),
        a,
        row_group_size=2,
    )
    pq.write_table(pa.table({"ts": pa.array([day + datetime.timedelta(hours=1)], pa.timestamp("ms", tz="UTC"))}), b)
    assert newest_micros([str(a), str(b)], "ts") == _micros(day + datetime.timedelta(hours=2))
    assert newest_micros([str(b)], "ts") == _micros(day + datetime.timedelta(hours=1))  # milliseconds scaled
    assert newest_micros([str(a)], "other") is None  # Spark reads a missing column as null

    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"ts": pa.array([None, None], pa.timestamp("us", tz="UTC"))}), nulls)
    assert newest_micros([str(nulls)], "ts") is None


@pytest.mark.parametrize(
    "writes",
    [
        {"table": pa.table({"ts": pa.array([1], pa.timestamp("us"))})},  # local time, not an instant
        {"table": pa.table({"ts": pa.array([1], pa.timestamp("ns", tz="UTC"))}), "coerce_timestamps": None},
        {"table": pa.table({"ts": pa.array([1], pa.timestamp("us", tz="UTC"))}), "use_deprecated_int96_timestamps": True},
        {"table": pa.table({"ts": pa.array([1], pa.timestamp("us", tz="UTC"))}), "write_statistics": False},
        {
            "table": pa.table({"ts": pa.array([1], pa.timestamp("us", tz="UTC"))}).replace_schema_metadata(
                {"org.apache.spark.legacyDateTime": ""}
            )
        },
    ],
    ids=["local-time", "nanoseconds", "int96", "no-statistics", "spark-2-calendar"],
)
def test_a_footer_that_cannot_say_asks_for_the_rows(tmp_path, writes):
    path = tmp_path / "x.parquet"
    options = {k: v for k, v in writes.items() if k != "table"}
    pq.write_table(writes["table"], path, **options)
    with pytest.raises(NoStatistics):
        newest_micros([str(path)], "ts")
    with pytest.raises(NoStatistics):
        newest_micros([str(tmp_path / "gone.parquet")], "ts")
