"""Ordering rows by event time: monotone epoch micros, sortable stand-ins for unorderable columns,
and global positions in that order computed without moving every row to one partition."""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.operators.batch_values import before

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

MAX_BUCKETS = 1024


def epoch_micros(ts: Column, ntz: bool) -> Column:
    """Microseconds since the epoch, monotone in `ts` (for TIMESTAMP_NTZ read as UTC wall time:
    a cast through the session time zone would not be monotone across a DST gap)."""
    from pyspark.sql import functions as F

    if not ntz:
        return F.unix_micros(ts)
    wall = F.make_timestamp(
        F.year(ts), F.month(ts), F.dayofmonth(ts), F.hour(ts), F.minute(ts), F.date_part(F.lit("SECOND"), ts), F.lit("UTC")
    )
    return F.unix_micros(wall)


def orderable(data_type: DataType) -> bool:
    """Whether Spark can sort by a column of this type (maps and variants cannot)."""
    from pyspark.sql.types import ArrayType, MapType, StructType, VariantType

    if isinstance(data_type, (MapType, VariantType)):
        return False
    if isinstance(data_type, ArrayType):
        return orderable(data_type.elementType)
    if isinstance(data_type, StructType):
        return all(orderable(f.dataType) for f in data_type.fields)
    return True


def bucket_of(micros: Column, bounds: list[int], lo: int = 0, hi: int | None = None) -> Column:
    """The number of bounds <= micros (a balanced CASE tree over the sorted bounds, compared as
    data: the same generated code for any bounds of the same count, framework.operators.batch_values)."""
    from pyspark.sql import functions as F

    hi = len(bounds) if hi is None else hi
    if lo == hi:
        return F.lit(lo)
    mid = (lo + hi) // 2
    return F.when(before(micros, bounds[mid]), bucket_of(micros, bounds, lo, mid)).otherwise(
        bucket_of(micros, bounds, mid + 1, hi)
    )


def bucket_count(spark: SparkSession) -> int:
    try:
        wanted = int(spark.conf.get("spark.sql.shuffle.partitions") or 200)
    except ValueError:
        wanted = 200
    return max(1, min(wanted, MAX_BUCKETS))


def time_buckets(df: DataFrame, micros: str) -> list[int]:
    """Bucket bounds: approximate quantiles of the event times, so buckets hold similar counts."""
    n = bucket_count(df.sparkSession)
    if n <= 1:
        return []
    quantiles = df.approxQuantile(micros, [i / n for i in range(1, n)], 1.0 / (4 * n))
    return sorted({int(q) for q in quantiles})


def global_positions(df: DataFrame, micros: str, order: list[Column], name: str, start: int = 0) -> tuple[DataFrame, int]:
    """`df` with column `name`, and the row count: each row's position in the order (`order` starts
    with the micros column), counted from `start`. Rows are bucketed by time range; a bucket's
    offset is `start` plus the row count of the buckets before it (one small collect, held in a map
    literal: data, not code, for a stream's batch), and positions inside a bucket come from a
    window function partitioned by bucket, so no single partition sees all rows."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    bucketed = df.withColumn("__tributary_bucket", bucket_of(F.col(micros), time_buckets(df, micros)))
    counts = sorted(bucketed.groupBy("__tributary_bucket").count().collect(), key=lambda r: r[0])
    offsets, placed = [], start
    for bucket, count in counts:
        offsets += [F.lit(bucket), F.lit(placed).cast(LongType())]
        placed += count
    offset = F.element_at(F.create_map(*offsets), F.col("__tributary_bucket")) if offsets else F.lit(start).cast(LongType())
    inside = Window.partitionBy("__tributary_bucket").orderBy(*order)
    return bucketed.withColumn(name, offset + F.row_number().over(inside) - 1).drop("__tributary_bucket"), placed - start
