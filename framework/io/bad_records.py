"""A text source's bad lines, counted and kept as the run reads them.

The run's Observation of the source counts them (`bad`) and, with the JVM functions, keeps them
too (`kept`, `tributary.BadRecords`, framework/jvm), up to 10,000 rows or 16 MB. The quarantine
then takes the kept rows, and reads the source again only when the read could not keep them all
(or has no JVM functions). That second read parsed every line again, for the handful of bad lines
a log usually holds.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from framework.observations import observed

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

BAD, KEPT = "bad", "kept"
#: the columns of a source's bad records, as the quarantine takes them
SCHEMA = "file STRING, line BIGINT, record STRING, reason STRING"


def bad_metrics(spark: SparkSession, record: dict[str, Column]) -> list[Column]:
    """The Observation's aggregates over a source's rows: how many are bad (those with a
    `reason`), and the bad ones themselves while they are few; `record`: file, line, record, reason."""
    from pyspark.sql import functions as F

    from framework import jvm

    counted = F.count_if(record["reason"].isNotNull()).alias(BAD)
    kept = jvm.bad_records(spark, record["file"], record["line"], record["record"], record["reason"])
    return [counted] if kept is None else [counted, kept.alias(KEPT)]


def kept_records(spark: SparkSession, counter: Any) -> DataFrame | None:
    """The bad records the read kept, when it kept them all; None when it did not, or has not run."""
    metrics = observed(counter) or {}
    kept = metrics.get(KEPT)
    if kept is None:
        return None
    rows = [tuple(r) for r in json.loads(kept)]
    return spark.createDataFrame(rows, SCHEMA) if len(rows) == int(metrics.get(BAD) or 0) else None
