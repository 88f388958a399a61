"""What an operator gets and gives back: its StepContext, and the rows it turned away (Rejected).

A step's builder reads its inputs from the context and returns its DataFrame. Rows it cannot use
(no key, no event time) leave through `context.quarantine` with a reason; the engine writes them
to the quarantine table with the step's outputs, so a bad record is never silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import Column, DataFrame, SparkSession

    from framework.functions.loader import Functions
    from framework.operators.window_sizes import Sizes
    from framework.templating import RenderedSql


REASON = "__tributary_reason"
EXPECTATION = "__tributary_expectation"  # the expectation(s) a row failed, without its values


@dataclass
class Rejected:
    """Rows a step turned away, with a `__tributary_reason` column, and the count of them observed
    while the step ran (batch), so the rows are only recomputed when there are some."""

    step: str
    rows: DataFrame
    observation: Any = None
    known: int | None = None  # counted otherwise (e.g. from the files a split write made)

    def count(self) -> int | None:
        from framework.observations import observed_count

        return self.known if self.known is not None else observed_count(self.observation, "rejected")


@dataclass(frozen=True)
class StepContext:
    """What a step gets: the session, its spec, its inputs by name and (SQL) its rendered query.

    `rejected` collects rows the step quarantines; the runner writes them to the quarantine table
    with the step's outputs, so a bad record is never silently dropped."""

    spark: SparkSession
    name: str
    spec: Any
    inputs: dict[str, DataFrame]
    sql: RenderedSql | None = None
    rejected: list[Rejected] = field(default_factory=list)
    functions: Functions | None = None  # the project's udfs/ (framework.functions.loader)
    sizes: Sizes | None = None  # swa with size: auto / timeout: auto: the run's learned sizes
    sql_policy: str = "default"  # the profile's: "strict" checks the SQL again before Spark gets it
    #: keeps a frame computed once for the run (persisted, released at its end); None: recomputed
    keep: Callable[[DataFrame], DataFrame] | None = None

    def quarantine(self, rows: DataFrame, reason: Column) -> DataFrame:
        """Rows for which `reason` is not null leave the step (quarantined); the others are returned."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        tagged = rows.withColumn(REASON, reason)
        observation = None
        if not rows.isStreaming:
            observation = Observation(f"tributary_rejected_{self.name}_{len(self.rejected)}")
            tagged = tagged.observe(observation, F.count_if(F.col(REASON).isNotNull()).alias("rejected"))
        self.rejected.append(Rejected(self.name, rows.withColumn(REASON, reason).where(F.col(REASON).isNotNull()), observation))
        return tagged.where(F.col(REASON).isNull()).drop(REASON)


def quarantine_shape(rows: DataFrame, step: str) -> DataFrame:
    """Rejected rows as quarantine records: the step, the row as JSON and the reason; the file and
    line the row came from when it carries them (a text source, or a source with `origin: true`)."""
    from pyspark.sql import functions as F

    from framework.io.origin import FILE, LINE

    columns = [F.col(f"`{c}`") for c in rows.columns if not c.startswith("__tributary")]
    return rows.select(
        F.lit(step).alias("source"),
        (F.col(FILE) if FILE in rows.columns else F.lit(None)).cast("string").alias("file"),
        (F.col(LINE) if LINE in rows.columns else F.lit(None)).cast("long").alias("line"),
        F.to_json(F.struct(*columns), {"ignoreNullFields": "false"}).alias("record"),
        F.col(REASON).alias("reason"),
        (F.col(EXPECTATION) if EXPECTATION in rows.columns else F.lit(None)).cast("string").alias("expectation"),
    )


def quarantine_records(rows: DataFrame, run_id: str, pipeline: str) -> DataFrame:
    """Rows shaped as (source, file, line, record, reason[, expectation]) as the quarantine table
    holds them: each row says which run wrote it (run_id), and, when expectations turned it away,
    which ones without its values (`expectation`, what the report groups by; null otherwise)."""
    from pyspark.sql import functions as F

    return rows.select(
        F.lit(run_id).alias("run_id"),
        F.lit(pipeline).alias("pipeline"),
        "source",
        "file",
        "line",
        "record",
        "reason",
        (F.col("expectation") if "expectation" in rows.columns else F.lit(None)).cast("string").alias("expectation"),
        F.current_timestamp().alias("quarantined_at"),
    )
