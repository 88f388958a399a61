"""Where each row came from: `_file` and `_line`, right for any number of files and partitions.

Text sources always have them; JSON-lines and CSV sources with `origin: true` are read the same
way. Spark's line reader splits a large file between tasks by bytes (`maxPartitionBytes`, 128 MB),
and a task cannot know how many lines came before its part. So each task counts them itself: once
per split, it reads the file up to the split's first byte and counts its lines, then numbers its
own lines on from there (`tributary.LineNumber`, a JVM function, framework/jvm). One scan, in
batch and in a stream alike, and a file of any size reads in memory bounded by the split size.
Why not whole files (`wholetext`), as before: one file was one task and one string, and a 200 MB
log killed the JVM.

Without the JVM functions (no JDK, TRIBUTARY_JVM=0):
- a batch read counts first: each line is tagged with its file, its split's first byte
  (`_metadata.file_block_start`) and its position in the task's output
  (`monotonically_increasing_id`, consecutive within a split); one aggregate gives each split's
  line count and first position, a running sum over a file's splits the lines before each, and a
  broadcast join turns positions into line numbers. The files are read twice.
- a stream cannot run that counting pass before it reads, so it reads each new file whole, in one
  task, as one string: a file landing in a streamed folder must then fit a task's memory.

Lines end at `\\n` (a `\\r` before it is dropped); a file's final newline does not make an empty
last line. JSON and CSV skip blank lines as Spark's readers do, and a CSV header (header: true,
the default) is line 1, not a row. A record spanning lines (multiLine) has no single line; the
spec refuses `origin` with it.

Parquet has no lines: its `_line` is the row's 1-based position in its file (Spark's
`_metadata.row_index`), at no extra cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

FILE, LINE = "_file", "_line"
_NOT_PARSER_OPTIONS = {"header", "inferschema", "multiline", "maxfilespertrigger", "wholetext", "pathglobfilter"}


def file_lines(spark: SparkSession, reader: Any, location: str | list[str]) -> DataFrame:
    """One row per line of the files at `location`, read split by split (a batch read): _file,
    _line, value."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    numbered = _numbered_by_tasks(spark, reader, location)
    if numbered is not None:
        return numbered
    raw = reader.format("text").option("lineSep", "\n").load(location)
    tagged = raw.select(
        F.col("_metadata.file_path").alias(FILE),
        F.col("_metadata.file_block_start").alias("__split"),
        F.monotonically_increasing_id().alias("__position"),
        "value",
    )
    splits = tagged.groupBy(FILE, "__split").agg(F.count(F.lit(1)).alias("__lines"), F.min("__position").alias("__first"))
    earlier = Window.partitionBy(FILE).orderBy("__split").rowsBetween(Window.unboundedPreceding, -1)
    before = F.coalesce(F.sum("__lines").over(earlier), F.lit(0)).alias("__before")
    offsets = splits.select(FILE, "__split", "__first", before)
    numbered = tagged.join(F.broadcast(offsets), [FILE, "__split"])
    line = F.col("__before") + F.col("__position") - F.col("__first") + 1
    # an int, as a whole file's line numbers were (tables written before keep their schema)
    return numbered.select(FILE, line.cast("int").alias(LINE), F.regexp_replace("value", "\r$", "").alias("value"))


def stream_lines(spark: SparkSession, stream_reader: Any, location: str) -> DataFrame:
    """One row per line of each file a stream reads (see above): _file, _line, value."""
    numbered = _numbered_by_tasks(spark, stream_reader, location)
    return lines(whole_files(stream_reader).load(location)) if numbered is None else numbered


def _numbered_by_tasks(spark: SparkSession, reader: Any, location: str | list[str]) -> DataFrame | None:
    """The lines read by Spark's line reader, each task numbering its own (see above); None when
    the session has no JVM functions."""
    from pyspark.sql import functions as F

    from framework import jvm

    path = F.col("_metadata.file_path")
    number = jvm.line_number(spark, path, F.col("_metadata.file_block_start"))
    if number is None:
        return None
    raw = reader.format("text").option("lineSep", "\n").load(location)
    return raw.select(path.alias(FILE), number.alias(LINE), F.regexp_replace("value", "\r$", "").alias("value"))


def lines(files: DataFrame) -> DataFrame:
    """One row per line of each whole-file row: _file, _line, value."""
    from pyspark.sql import functions as F

    cut = files.select(F.col("_metadata.file_path").alias(FILE), F.split(F.col("value"), "\n").alias("__lines"))
    exploded = cut.select(FILE, F.size("__lines").alias("__count"), F.posexplode("__lines").alias("__pos", "value"))
    kept = exploded.where(~((F.col("__pos") == F.col("__count") - 1) & (F.col("value") == "")))
    return kept.select(FILE, (F.col("__pos") + 1).alias(LINE), F.regexp_replace("value", "\r$", "").alias("value"))


def parsed_records(numbered: DataFrame, file_format: str, schema: StructType, options: dict[str, str]) -> DataFrame:
    """The records of numbered lines (JSON lines or CSV; `file_lines`, `stream_lines`) as
    `schema`'s columns, then _file and _line. `schema` may hold a corrupt-record column: it gets
    the text of a line that does not parse."""
    from pyspark.sql import functions as F

    rows = numbered.where(F.trim("value") != "")
    if file_format == "csv" and options.get("header", "true").lower() == "true":
        rows = rows.where(F.col(LINE) > 1)
    parser = {k: v for k, v in options.items() if k.lower() not in _NOT_PARSER_OPTIONS} | {"mode": "PERMISSIVE"}
    corrupt = [f.name for f in schema.fields if f.name == "_corrupt_record"]
    if corrupt:
        parser["columnNameOfCorruptRecord"] = corrupt[0]
    ddl = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)
    parse = F.from_json if file_format == "json" else F.from_csv
    parsed = rows.select(parse(F.col("value"), ddl, parser).alias("__record"), FILE, LINE)  # type: ignore[operator]
    return parsed.select("__record.*", FILE, LINE)


def with_row_position(parquet: DataFrame) -> DataFrame:
    """A Parquet read with _file and _line (the row's 1-based position in its file)."""
    from pyspark.sql import functions as F

    return parquet.select("*", F.col("_metadata.file_path").alias(FILE), (F.col("_metadata.row_index") + 1).alias(LINE))


def whole_files(reader: Any) -> Any:
    """A DataFrame(Stream)Reader set to read each file as one row."""
    return reader.format("text").option("wholetext", "true")
