"""Sources as Spark DataFrames. Malformed JSON/CSV records are split off for quarantine, never dropped."""

from __future__ import annotations

import glob
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framework.errors import BadInput, Problem
from framework.io.delta_store import DeltaStore
from framework.io.locations import Warehouse, is_uri, resolve_location
from framework.project import Project
from framework.spec.models import DeltaSource, FileSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation, SparkSession

CORRUPT_COLUMN = "_corrupt_record"


@dataclass
class SourceFrame:
    """A source's good rows, and (for JSON/CSV with a schema) its bad rows and a counter of them."""

    name: str
    df: DataFrame
    bad_rows: DataFrame | None = None  # columns: file, record, reason
    bad_counter: Observation | None = None

    def bad_count(self) -> int | None:
        """Malformed records seen while the run read this source (None: the source was not read)."""
        counter = self.bad_counter
        if counter is None:
            return None
        java = getattr(counter, "_jo", None)
        if java is not None and not java.future().isCompleted():
            return None  # no action read this source; asking would block
        return int(counter.get.get("bad", 0))


def source_location(project: Project, warehouse: Warehouse, spec: FileSource | DeltaSource) -> str:
    if isinstance(spec, DeltaSource):
        return resolve_location(project, warehouse, spec.table, spec.path)
    return spec.path if is_uri(spec.path) else str(project.resolve(spec.path))


def check_source_exists(name: str, location: str, spec: FileSource | DeltaSource, store: DeltaStore) -> None:
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
    if is_uri(location):
        return
    if not glob.glob(location):
        raise BadInput(
            Problem(
                f"source '{name}': path not found: {location}", hint="check 'path' (relative paths start at the project root)"
            )
        )


def read_source(spark: SparkSession, name: str, spec: FileSource | DeltaSource, location: str, store: DeltaStore) -> SourceFrame:
    if isinstance(spec, DeltaSource):
        return SourceFrame(name, store.read(spark, location, spec.version, spec.timestamp))
    return _read_files(spark, name, spec, location)


def _read_files(spark: SparkSession, name: str, spec: FileSource, location: str) -> SourceFrame:
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    options: dict[str, Any] = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in spec.options.items()}
    if spec.format == "csv":
        options.setdefault("header", "true")
        if spec.ddl() is None:
            options.setdefault("inferSchema", "true")
    reader = spark.read.format(spec.format).options(**options)
    ddl = spec.ddl()
    if ddl is None or spec.format == "parquet":
        if ddl is not None:
            reader = reader.schema(_parse_schema(name, ddl))
        return SourceFrame(name, reader.load(location))

    declared = _parse_schema(name, ddl)
    with_corrupt = StructType([*declared.fields, StructField(CORRUPT_COLUMN, StringType(), True)])
    raw = (
        reader.schema(with_corrupt)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
        .load(location)
    )
    counter = Observation(f"tributary_source_{name}")
    corrupt = F.col(CORRUPT_COLUMN)
    observed = raw.observe(counter, F.count(F.when(corrupt.isNotNull(), 1)).alias("bad"))
    good = observed.where(corrupt.isNull()).drop(CORRUPT_COLUMN)
    bad = raw.where(corrupt.isNotNull()).select(
        F.col("_metadata.file_path").alias("file"),
        # Spark refuses queries that read only the corrupt column, so the data columns come along.
        F.coalesce(corrupt, F.to_json(F.struct(*[F.col(f"`{c}`") for c in declared.fieldNames()]))).alias("record"),
        F.lit(f"malformed {spec.format} record: does not parse or does not fit the declared schema").alias("reason"),
    )
    return SourceFrame(name, good, bad, counter)


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
