"""Text sources (`format: text`): one row per line, with the file and the line it came from
(framework.io.origin: how a large file is read by many tasks with exact line numbers).

With `parse:`, a line the pattern does not match, or whose value does not cast to its column's
type, goes to the quarantine with its file, its line number and why; the other lines become the
pattern's columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from framework.io.bad_records import bad_metrics
from framework.io.file_streams import stream_reading
from framework.io.origin import FILE, LINE, file_lines, stream_lines
from framework.spec.models import TextSource

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


def read_text(
    spark: SparkSession,
    spec: TextSource,
    location: str | list[str],
    stream: bool = False,
    counter: Any = None,
    base: str | None = None,
) -> tuple[DataFrame, DataFrame | None]:
    """(rows, bad lines as file/line/record/reason, or None without `parse:`) of the text files at
    location; `counter` (an Observation) counts the bad lines ("bad") as the rows are read; `base`:
    the source's folder when `location` lists some of its files."""
    if stream:
        assert isinstance(location, str)  # a stream reads a folder; re-reads of its files are batch reads
        numbered = stream_lines(spark, spark.readStream.options(**stream_reading(spec, {})), location)
    else:
        numbered = file_lines(spark, spark.read if base is None else spark.read.option("basePath", base), location)
    return split_lines(numbered, spec, counter)


def split_lines(rows: DataFrame, spec: TextSource, counter: Any = None) -> tuple[DataFrame, DataFrame | None]:
    from pyspark.sql import functions as F

    if spec.parse is None:
        return rows, None
    pattern = spec.parse.pattern
    typed = spec.parse.typed()
    names = list(typed)
    found = _matched(rows, pattern, len(names))
    cast = found.select("*", *[_cast(F.col(f"__text{i}"), typed[name]).alias(f"__value{i}") for i, name in enumerate(names)])
    failed = [
        F.when((F.col(f"__text{i}") != "") & F.col(f"__value{i}").isNull(), F.lit(name))
        for i, name in enumerate(names)
        if not _is_text(typed[name])
    ]
    checked = cast.withColumn("__failed", F.concat_ws(", ", *failed) if failed else F.lit(""))
    reason = F.when(~F.col("__matches"), F.lit("the line does not match the pattern")).when(
        F.col("__failed") != "", F.concat(F.lit("value(s) of "), F.col("__failed"), F.lit(" do not cast to the declared type"))
    )
    tagged = checked.withColumn("__reason", reason)
    record = {
        "file": F.col(FILE),
        "line": F.col(LINE).cast("long"),
        "record": F.col("value"),
        "reason": F.concat(F.lit("text line: "), F.col("__reason")),
    }
    read = tagged if counter is None else tagged.observe(counter, *bad_metrics(rows.sparkSession, record))
    good = read.where(F.col("__reason").isNull()).select(
        FILE, LINE, *[F.col(f"__value{i}").alias(n) for i, n in enumerate(names)]
    )
    bad = tagged.where(F.col("__reason").isNotNull()).select(*[c.alias(n) for n, c in record.items()])
    return good, bad


def _matched(rows: DataFrame, pattern: str, groups: int) -> DataFrame:
    """The rows' _file, _line and value, whether the value matches (`__matches`) and each group's
    text (`__text0`...): one match a line with the JVM function, else Spark's rlike and one
    regexp_extract per group. Either way the matches run in a projection of their own: their
    results are used several times below, and Spark inlines an expression into the projection that
    uses it only when it is cheap, so each match runs once a line."""
    from pyspark.sql import functions as F

    from framework import jvm

    found = jvm.regex_groups(rows.sparkSession, F.col("value"), pattern)
    if found is None:
        texts = [F.regexp_extract("value", pattern, i + 1).alias(f"__text{i}") for i in range(groups)]
        return rows.select(FILE, LINE, "value", F.col("value").rlike(pattern).alias("__matches"), *texts)
    matched = rows.select(FILE, LINE, "value", found.alias("__groups"))
    texts = [F.coalesce(F.col("__groups")[i], F.lit("")).alias(f"__text{i}") for i in range(groups)]
    return matched.select(FILE, LINE, "value", F.col("__groups").isNotNull().alias("__matches"), *texts)


def _cast(value: Column, type_name: str) -> Column:
    """The extracted text as the column's type (Spark's try_cast); an empty group is null."""
    from pyspark.sql import functions as F

    text = F.when(value != "", value)
    return text if _is_text(type_name) else text.try_cast(type_name)


def _is_text(type_name: str) -> bool:
    """A STRING column: every group's text is one, so it never fails to cast."""
    return type_name.strip().upper() == "STRING"
