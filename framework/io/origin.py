"""Where each row came from: `_file` and `_line`, right for any number of files and partitions.

Text sources always have them; JSON-lines and CSV sources with `origin: true` are read the same
way. Why whole files: Spark's line-based readers split a large file between tasks by bytes, and a
task then cannot know how many lines came before its part, so no line number would be right for
every file size and partitioning. Each file is read whole (`wholetext`) and cut into lines in the
same task, and each line is then parsed against the schema (`from_json` / `from_csv`, permissive:
a line that does not parse keeps its text for the quarantine). The cost is that one file is one
task and must fit in a task's memory (a file up to a few hundred MB).

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
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

FILE, LINE = "_file", "_line"
_NOT_PARSER_OPTIONS = {"header", "inferschema", "multiline", "maxfilespertrigger", "wholetext", "pathglobfilter"}


def lines(files: DataFrame) -> DataFrame:
    """One row per line of each whole-file row: _file, _line, value."""
    from pyspark.sql import functions as F

    cut = files.select(F.col("_metadata.file_path").alias(FILE), F.split(F.col("value"), "\n").alias("__lines"))
    exploded = cut.select(FILE, F.size("__lines").alias("__count"), F.posexplode("__lines").alias("__pos", "value"))
    kept = exploded.where(~((F.col("__pos") == F.col("__count") - 1) & (F.col("value") == "")))
    return kept.select(FILE, (F.col("__pos") + 1).alias(LINE), F.regexp_replace("value", "\r$", "").alias("value"))


def parsed_records(files: DataFrame, file_format: str, schema: StructType, options: dict[str, str]) -> DataFrame:
    """The records of whole-file rows (JSON lines or CSV) as `schema`'s columns, then _file and
    _line. `schema` may hold a corrupt-record column: it gets the text of a line that does not parse."""
    from pyspark.sql import functions as F

    rows = lines(files).where(F.trim("value") != "")
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
