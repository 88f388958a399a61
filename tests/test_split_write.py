"""A staged write split on a column (the rows a drop expectation refuses set aside in the same pass)."""

from __future__ import annotations

import pytest

from framework.io.delta.base import _SPLIT_CONFS
from framework.io.delta.delta_rs import DeltaRsStore


def _frame(spark, refused_every: int):
    from pyspark.sql import functions as F

    mask = F.when(F.col("id") % refused_every == 0, (F.col("id") % 3 + 1).cast("long"))
    return spark.range(0, 10_000, numPartitions=2).select("id", (F.col("id") * 2).alias("twice"), mask.alias("mask"))


def test_a_split_write_keeps_every_row_once_and_leaves_the_sessions_confs_as_they_were(spark, tmp_path):
    session = spark.newSession()
    mine = {key: "true" if "plannedWrite" in key else "7" for key in _SPLIT_CONFS}
    for key, value in mine.items():
        session.conf.set(key, value)
    store = DeltaRsStore()
    write = store.stage(_frame(session, 7), "out", str(tmp_path / "t"), str(tmp_path / "staging"), [], split_by="mask")

    kept = session.read.schema(write.schema).parquet(write.staging)
    refused = store.read_split_off(session, write, _frame(session, 7).schema)
    assert write.rows == kept.count() == 10_000 - 1_429 and write.split_rows == refused.count() == 1_429
    assert sorted(r.id for r in kept.collect()) == [i for i in range(10_000) if i % 7]
    assert {r.mask for r in refused.collect()} == {1, 2, 3}  # each refused row in its own split value's folder
    assert {key: session.conf.get(key) for key in _SPLIT_CONFS} == mine


def test_a_failed_split_write_also_leaves_the_confs_as_they_were(spark, tmp_path):
    from pyspark.sql import functions as F

    session = spark.newSession()
    before = {key: session.conf.get(key) for key in _SPLIT_CONFS}
    broken = _frame(session, 7).withColumn("twice", F.when(F.col("id") == 5_000, F.raise_error(F.lit("boom"))).otherwise(1))
    with pytest.raises(Exception, match="boom"):
        DeltaRsStore().stage(broken, "out", str(tmp_path / "t"), str(tmp_path / "staging"), [], split_by="mask")
    assert {key: session.conf.get(key) for key in _SPLIT_CONFS} == before
