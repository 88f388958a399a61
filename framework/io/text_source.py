"""Text sources (`format: text`): one row per line, with the file and the line it came from
(framework.io.origin: how a large file is read by many tasks with exact line numbers).

With `parse:`, a line the pattern does not match, or whose value does not cast to its column's
type, goes to the quarantine with its file, its line number and why; the other lines become the
pattern's columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from framework.io.file_streams import stream_reading
from framework.io.origin import FILE, LINE, file_lines, lines, whole_files
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
        reader = whole_files(spark.readStream).options(**stream_reading(spec, {}))
        numbered = lines(reader.load(location))
    else:
        numbered = file_lines(spark.read if base is None else spark.read.option("basePath", base), location)
    return split_lines(numbered, spec, counter)


def split_lines(rows: DataFrame, spec: TextSource, counter: Any = None) -> tuple[DataFrame, DataFrame | None]:
    from pyspark.sql import functions as F

    if spec.parse is None:
        return rows, None
    pattern = spec.parse.pattern
    typed = spec.parse.typed()
    extracted = {name: F.regexp_extract("value", pattern, i + 1) for i, name in enumerate(typed)}
    casts = {name: _cast(value, typed[name]) for name, value in extracted.items()}
    matches = F.col("value").rlike(pattern)
    failed = [F.when(value.isNotNull() & (value != "") & casts[name].isNull(), F.lit(name)) for name, value in extracted.items()]
    reason = F.when(~matches, F.lit("the line does not match the pattern")).otherwise(
        F.when(
            F.concat_ws(", ", *failed) != "",
            F.concat(F.lit("value(s) of "), F.concat_ws(", ", *failed), F.lit(" do not cast to the declared type")),
        )
    )
    tagged = rows.withColumn("__reason", reason)
    read = tagged.observe(counter, F.count_if(F.col("__reason").isNotNull()).alias("bad")) if counter is not None else tagged
    good = read.where(F.col("__reason").isNull()).select(FILE, LINE, *[casts[n].alias(n) for n in typed])
    bad = tagged.where(F.col("__reason").isNotNull()).select(
        F.col(FILE).alias("file"),
        F.col(LINE).cast("long").alias("line"),
        F.col("value").alias("record"),
        F.concat(F.lit("text line: "), F.col("__reason")).alias("reason"),
    )
    return good, bad


def _cast(value: Column, type_name: str) -> Column:
    """The extracted text as the column's type (Spark's try_cast); an empty group is null."""
    from pyspark.sql import functions as F

    text = F.when(value != "", value)
    return text if type_name.strip().upper() == "STRING" else text.try_cast(type_name)
