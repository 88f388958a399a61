"""Sources as Spark DataFrames. Malformed JSON/CSV records are split off for quarantine, never dropped.

A record is malformed when it does not parse, does not fit the declared schema, or holds a number
too large for its DOUBLE or FLOAT column (JSON's 1e400 would otherwise become Infinity silently).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framework.errors import BadInput, Problem
from framework.io import sample
from framework.io.bad_records import kept_records
from framework.io.delta.base import DeltaStore
from framework.io.file_streams import stream_reading
from framework.io.locations import Warehouse, is_uri, resolve_location
from framework.io.origin import FILE, LINE, file_lines, parsed_records, stream_lines, with_row_position
from framework.io.text_source import read_text
from framework.observations import observed_count
from framework.project import Project
from framework.spec.models import DeltaSource, FileSource, TextSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation, SparkSession

CORRUPT_COLUMN = "_corrupt_record"
EVENT_TIME = "_event_time"  # a source's event time when `event_time:` is an expression over its columns
AnySource = FileSource | TextSource | DeltaSource


@dataclass
class SourceFrame:
    """A source's good rows, and (for JSON/CSV with a schema) its bad rows and a counter of them."""

    name: str
    df: DataFrame
    bad_rows: DataFrame | None = None  # columns: file, line, record, reason
    bad_counter: Observation | None = None
    #: streaming: the source as read (before its watermark)
    raw: DataFrame | None = None
    #: streaming file sources: read given files again as (good rows, malformed records; None for Parquet)
    read_files: Callable[[list[str]], tuple[DataFrame, DataFrame | None]] | None = None

    def bad_count(self) -> int | None:
        """Malformed records seen while the run read this source (None: the source was not read)."""
        return observed_count(self.bad_counter, "bad")

    def quarantined(self) -> DataFrame | None:
        """The malformed records: as the run's read kept them when it could keep them all
        (framework.io.bad_records), else read again."""
        kept = kept_records(self.df.sparkSession, self.bad_counter) if self.bad_counter is not None else None
        return self.bad_rows if kept is None else kept


def source_location(project: Project, warehouse: Warehouse, spec: AnySource) -> str:
    if isinstance(spec, DeltaSource):
        return resolve_location(project, warehouse, spec.table, spec.path)
    return spec.path if is_uri(spec.path) else str(project.resolve(spec.path))


def missing_files(location: str) -> bool:
    """A local file source's path (a file, a folder or a glob) matches nothing; a URI is not looked at."""
    return not is_uri(location) and not glob.glob(location)


def holds_no_files(location: str) -> bool:
    """A local folder (or a glob's folders) with no data file under it: Spark skips names starting
    with '.' or '_' (markers, checksums). A URI is not looked at."""
    if is_uri(location):
        return False
    for match in glob.glob(location):
        if os.path.isfile(match):
            return False
        for _, folders, files in os.walk(match):
            folders[:] = [f for f in folders if not f.startswith((".", "_"))]
            if any(not f.startswith((".", "_")) for f in files):
                return False
    return True


def check_source_exists(name: str, location: str, spec: AnySource, store: DeltaStore) -> None:
    """Fail before Spark starts when a local source is missing (bad input, exit 2)."""
    if isinstance(spec, DeltaSource):
        if store.version(location) is None:
            raise BadInput(
                Problem(
                    f"source '{name}': no Delta table at {location}",
                    hint="run the pipeline that writes it first, or fix 'path'/'table'",
                )
            )
        return
    if missing_files(location):
        raise BadInput(
            Problem(
                f"source '{name}': path not found: {location}", hint="check 'path' (relative paths start at the project root)"
            )
        )


def read_source(
    spark: SparkSession, name: str, spec: AnySource, location: str, store: DeltaStore, limit: int | None = None
) -> SourceFrame:
    """The source's rows; with `limit`, its first `limit` rows (framework.io.sample says which)."""
    if isinstance(spec, DeltaSource):
        frame = SourceFrame(name, store.read(spark, location, spec.version, spec.timestamp, limit=limit))
    else:
        files: str | list[str] = location
        base = None
        if limit is not None:
            header = spec.format == "csv" and _reader_options(spec).get("header", "true").lower() == "true"
            chosen = sample.first_files(location, spec.format, limit, header)
            if chosen is not None:
                files, base = chosen, sample.base_path(location)
        if isinstance(spec, TextSource):
            frame = _text_frame(spark, name, spec, files, stream=False, base=base)
        else:
            frame = _read_files(spark, name, spec, files, base)
    if limit is not None:
        frame.df = sample.first_rows(frame.df, limit, oldest_first=isinstance(spec, DeltaSource))
    return with_event_time(frame, spec)


def _text_frame(
    spark: SparkSession, name: str, spec: TextSource, location: str | list[str], stream: bool, base: str | None = None
) -> SourceFrame:
    from pyspark.sql import Observation

    counter = None if stream or spec.parse is None else Observation(f"tributary_source_{name}")
    good, bad = read_text(spark, spec, location, stream, counter, base)
    frame = SourceFrame(name, good, bad, counter)
    frame.read_files = lambda files: read_text(spark, spec, files)  # type: ignore[assignment]
    return frame


def with_event_time(frame: SourceFrame, spec: AnySource) -> SourceFrame:
    """A source whose event_time is an expression over its columns gets it as the column EVENT_TIME."""
    from pyspark.errors import AnalysisException, ParseException
    from pyspark.sql import functions as F

    event_time = spec.event_time
    if event_time is None or event_time in frame.df.columns or not _is_expression(event_time):
        return frame
    try:
        frame.df = frame.df.withColumn(EVENT_TIME, F.expr(event_time))
        kind = frame.df.schema[EVENT_TIME].dataType.typeName()
    except (AnalysisException, ParseException) as e:
        first = str(e).strip().splitlines()[0].split(" SQLSTATE")[0]
        raise BadInput(
            Problem(
                f"source '{frame.name}': event_time '{event_time}' is neither a column nor an expression over them: {first}",
                hint=f"columns: {', '.join(frame.df.columns)}",
            )
        ) from None
    if kind not in ("timestamp", "timestamp_ntz"):
        raise BadInput(
            Problem(
                f"source '{frame.name}': event_time '{event_time}' gives {kind}, not a timestamp",
                hint="wrap it, e.g. to_timestamp(ts_text, 'dd/MMM/yyyy:HH:mm:ss Z')",
            )
        )
    return frame


def _adding_event_time(
    read_files: Callable[[list[str]], tuple[DataFrame, DataFrame | None]], expression: str
) -> Callable[[list[str]], tuple[DataFrame, DataFrame | None]]:
    from pyspark.sql import functions as F

    def read(files: list[str]) -> tuple[DataFrame, DataFrame | None]:
        good, bad = read_files(files)
        return good.withColumn(EVENT_TIME, F.expr(expression)), bad

    return read


def event_time_column(spec: AnySource) -> str | None:
    """The column holding a source's event time: its own name, or EVENT_TIME for an expression."""
    if spec.event_time is None:
        return None
    return EVENT_TIME if _is_expression(spec.event_time) else spec.event_time


def _is_expression(text: str) -> bool:
    """Not a plain column name: a call, an operator or a quoted part."""
    return not text.replace("_", "a").replace(".", "a").isalnum()


def _read_files(
    spark: SparkSession, name: str, spec: FileSource, location: str | list[str], base: str | None = None
) -> SourceFrame:
    """base: the source's folder when `location` lists some of its files (partition values)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    options = _reader_options(spec)
    reader = spark.read.format(spec.format).options(**options)
    if base is not None:
        reader = reader.option("basePath", base)
    ddl = spec.ddl()
    if spec.format == "parquet":
        parquet = (reader.schema(_parse_schema(name, ddl)) if ddl is not None else reader).load(location)
        return SourceFrame(name, with_row_position(parquet) if spec.origin else parquet)
    if ddl is None and not spec.origin:
        return SourceFrame(name, reader.load(location))

    declared = _parse_schema(name, ddl) if ddl is not None else reader.load(location).schema
    if spec.origin:
        numbered = file_lines(spark, spark.read if base is None else spark.read.option("basePath", base), location)
        raw = parsed_records(numbered, spec.format, _with_corrupt(declared), options)
    else:
        raw = _with_corrupt_column(reader, declared).load(location)
    counter = Observation(f"tributary_source_{name}")
    observed = raw.observe(counter, F.count(F.when(_malformed(declared), 1)).alias("bad"))
    good, bad = _split_corrupt(observed, raw, spec, declared)
    return SourceFrame(name, good, bad, counter)


def _reader_options(spec: FileSource) -> dict[str, str]:
    options = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in spec.options.items()}
    if spec.format == "csv":
        options.setdefault("header", "true")
        if spec.ddl() is None:
            options.setdefault("inferSchema", "true")
    return options


def read_source_stream(spark: SparkSession, name: str, spec: AnySource, location: str) -> SourceFrame:
    """The source as a stream: new files in the folder, or new versions of the Delta table."""
    if isinstance(spec, TextSource):
        frame = _text_frame(spark, name, spec, location, stream=True)
    elif isinstance(spec, DeltaSource):
        from framework.io.delta_stream import register_delta_stream

        reader = register_delta_stream(spark)
        stream = spark.readStream.format(reader).option("path", location)
        frame = SourceFrame(name, stream.option("ignore_changes", str(spec.ignore_changes).lower()).load())
    else:
        ddl = spec.ddl()
        if ddl is None:
            raise BadInput(
                Problem(
                    f"source '{name}': a streaming source needs a 'schema'",
                    hint="declare the columns, e.g. schema: ts TIMESTAMP, n INT",
                )
            )
        frame = _file_stream(spark, name, spec, location, _parse_schema(name, ddl))
    frame = with_event_time(frame, spec)
    if frame.raw is None:
        frame.raw = frame.df  # the source as read, before its watermark
    column = event_time_column(spec)
    if column == EVENT_TIME and frame.read_files is not None:  # files read again (audits) get it too
        frame.read_files = _adding_event_time(frame.read_files, spec.event_time)  # type: ignore[arg-type]
    if column is not None and column not in frame.df.columns:
        raise BadInput(
            Problem(
                f"source '{name}': event_time column '{spec.event_time}' is not in its schema",
                hint=f"columns: {', '.join(frame.df.columns)} (or write an expression over them, e.g. to_timestamp(ts_text))",
            )
        )
    if spec.watermark is not None:
        from pyspark.sql import functions as F

        from framework.spec.durations import spark_interval

        assert column is not None  # the spec refuses a watermark without an event time
        # the oldest event time of each micro-batch: a batch whose oldest row is behind its watermark
        # had late rows, whichever operator met them (framework.io.checkpoint_audit)
        oldest = F.min(F.unix_micros(F.col(column).cast("timestamp"))).alias("oldest")  # micros: no time zone to get wrong
        frame.df = frame.df.observe(oldest_metric(name), oldest)
        frame.df = frame.df.withWatermark(column, spark_interval(spec.watermark))
    if frame.raw is None:
        frame.raw = frame.df
    return frame


def _file_stream(spark: SparkSession, name: str, spec: FileSource, location: str, declared: Any) -> SourceFrame:
    """A JSON, CSV or Parquet folder as a stream, and how to read given files of it again."""
    from pyspark.sql import functions as F

    batch_options = _reader_options(spec)
    stream_options = {**batch_options, **stream_reading(spec, batch_options)}

    def records(reader: Any, files: Any, options: dict[str, str]) -> DataFrame:
        if spec.format == "parquet":
            rows = reader.format("parquet").options(**options).schema(declared).load(files)
            return with_row_position(rows) if spec.origin else rows
        if spec.origin:
            from pyspark.sql.streaming import DataStreamReader

            streamed = isinstance(reader, DataStreamReader)
            numbered = (
                stream_lines(spark, reader.options(**options), files)
                if streamed
                else file_lines(spark, reader.options(**options), files)
            )
            return parsed_records(numbered, spec.format, _with_corrupt(declared), options)
        return _with_corrupt_column(reader.format(spec.format).options(**options), declared).load(files)

    raw = records(spark.readStream, location, stream_options)
    if spec.format == "parquet":
        frame = SourceFrame(name, raw)
        frame.read_files = lambda files: (records(spark.read, files, batch_options), None)
        return frame
    # counted as the main query reads; the files are read again only when this is > 0
    counted = raw.observe(f"tributary_bad_{name}", F.count(F.when(_malformed(declared), 1)).alias("bad"))
    good, bad = _split_corrupt(counted, raw, spec, declared)
    frame = SourceFrame(name, good, bad, raw=raw)

    def read_files(files: list[str]) -> tuple[DataFrame, DataFrame]:
        static = records(spark.read, files, batch_options)
        return _split_corrupt(static, static, spec, declared)

    frame.read_files = read_files
    return frame


def _with_corrupt(declared: Any) -> Any:
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType([*declared.fields, StructField(CORRUPT_COLUMN, StringType(), True)])


def oldest_metric(source: str) -> str:
    """The observed metric holding a streaming source's oldest event time per micro-batch."""
    return f"tributary_oldest_{source}"


def _with_corrupt_column(reader: Any, declared: Any) -> Any:
    return reader.schema(_with_corrupt(declared)).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT_COLUMN)


def _overflowed(declared: Any) -> Any:
    """The first DOUBLE or FLOAT column holding ±Infinity (a number too large for it), else null."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, FloatType

    columns = [f.name for f in declared.fields if isinstance(f.dataType, (DoubleType, FloatType))]
    infinite = [F.when(F.abs(F.col(f"`{c}`")) == float("inf"), F.lit(c)) for c in columns]
    return F.coalesce(*infinite) if infinite else F.lit(None).cast("string")


def _reads_every_column(declared: Any) -> Any:
    """True, written so that the good rows' filter reads every declared column (Spark's optimizer
    does not fold it away). Spark's JSON and CSV readers parse only the columns a query reads: a
    record whose value does not fit a column the query did not read was a good row to it, and in
    the quarantine too (whose record reads every column); and a query that reads none
    (`select count(*)`) read only the corrupt column, which Spark refuses
    (QUERY_ONLY_CORRUPT_RECORD_COLUMN)."""
    from pyspark.sql import functions as F

    return F.size(F.array(*[F.col(f"`{c}`").isNull() for c in declared.fieldNames()])) > 0


def _malformed(declared: Any) -> Any:
    from pyspark.sql import functions as F

    return F.col(CORRUPT_COLUMN).isNotNull() | _overflowed(declared).isNotNull()


def _split_corrupt(counted: DataFrame, raw: DataFrame, spec: FileSource, declared: Any) -> tuple[DataFrame, DataFrame]:
    """Good rows (without the corrupt column) and bad rows as (file, line, record, reason)."""
    from pyspark.sql import functions as F

    corrupt, overflowed = F.col(CORRUPT_COLUMN), _overflowed(declared)
    good = counted.where(~_malformed(declared) & _reads_every_column(declared)).drop(CORRUPT_COLUMN)
    numbered = spec.origin and LINE in raw.columns
    bad = raw.where(_malformed(declared)).select(
        F.col(FILE if numbered else "_metadata.file_path").alias("file"),
        (F.col(LINE) if numbered else F.lit(None)).cast("long").alias("line"),
        # Spark refuses queries that read only the corrupt column, so the data columns come along.
        F.coalesce(corrupt, F.to_json(F.struct(*[F.col(f"`{c}`") for c in declared.fieldNames()]))).alias("record"),
        F.when(corrupt.isNotNull(), F.lit(f"malformed {spec.format} record: does not parse or does not fit the declared schema"))
        .otherwise(
            F.concat(
                F.lit(f"malformed {spec.format} record: the number in column "),
                overflowed,
                F.lit(" is infinite: too large for its type, or written as Infinity"),
            )
        )
        .alias("reason"),
    )
    return good, bad


def _parse_schema(name: str, ddl: str) -> Any:
    from pyspark.sql.types import StructType, _parse_datatype_string

    try:
        parsed = _parse_datatype_string(ddl)
    except Exception as e:  # noqa: BLE001 - Spark's parser raises several types
        raise BadInput(
            Problem(
                f"source '{name}': bad schema '{ddl}': {str(e).splitlines()[0]}",
                hint="write Spark DDL, e.g. 'ts TIMESTAMP, n INT'",
            )
        ) from None
    if not isinstance(parsed, StructType):
        raise BadInput(Problem(f"source '{name}': schema must list columns, got '{ddl}'"))
    return parsed
