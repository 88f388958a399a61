"""Windows sized per head (`size: auto`, `timeout: auto` on an `swa` step): n and t learned from
history (framework.integration.learned_sizes), given to the fold as two columns of each tuple.

Why: the paper (Li et al., §5.2–5.3) chooses one n and one t for every key, yet a page's degree is
a property of the page. A window whose n is its page's own degree closes at the instance's last
tuple instead of waiting for its timeout: more instances are complete, and windows live shorter,
so less state is held.

How:
- History is a Delta table per step, <warehouse>/_tributary/window_sizes/<pipeline>/<step>: one
  row per head value (the head role's column, or `learn.by`) with the head's instances, its
  histograms of instance degree and duration (whole seconds, rounded up), and the n and t chosen
  from them: n = the smallest degree covering `learn.alpha` of its instances, t = the smallest
  whole second that at most `learn.beta` of them outlast (a tail: only from ⌈1/β⌉ instances on;
  before that the head gets the global t). Heads with fewer than `learn.min_instances` instances,
  and heads never seen, use the global fit: the paper's method
  (Erlang for the degree, hyper-Erlang for the duration; framework.integration.fitting) over all the
  history's instances.
- An instance is a value of the step's whole key (as the capacity model counts them,
  framework.integration.capacity): with head+client+time, one page view.
- A run reads the table once, at its start, and every window of the run uses those sizes, so a
  streaming run's windows do not depend on how its input was split into micro-batches, and equal
  a batch run's over the same history. A batch run adds its input to the history after it has
  committed its outputs; with no history yet it learns from its own input first.
  `tributary tune PIPELINE STEP --learn` adds a step's current input to the history (the way to
  start a streaming pipeline, which does not learn by itself).
- The sizes reach the fold as two columns of each tuple (SIZE_COLUMN, TIMEOUT_COLUMN): a broadcast join of the
  tuples with the learned table on the head column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from framework.errors import BadInput, Problem
from framework.operators.columns import field_of, quoted
from framework.spec.steps import AUTO, SwaSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SIZE_COLUMN = "__tributary_size"  # the tuple's window size n
TIMEOUT_COLUMN = "__tributary_timeout"  # the tuple's window timeout t, in micros


@dataclass(frozen=True)
class Sizes:
    """The n and t a run uses for one step, fixed at the run's start."""

    per_head: dict[str, tuple[int, int]]  # head value -> (n, t in micros)
    fallback: tuple[int, int]  # unseen heads and heads with too few instances
    instances: int  # instances in the history they were learned from
    note: str = ""  # where they came from, said in the run summary


def size_column(spec: SwaSpec) -> Column:
    """The window size n of each tuple: its column when learned, else the number."""
    from pyspark.sql import functions as F

    return F.col(SIZE_COLUMN) if spec.size == AUTO else F.lit(int(spec.size))


def timeout_column(spec: SwaSpec) -> Column:
    """The window timeout t of each tuple in micros: its column when learned, else the number."""
    from pyspark.sql import functions as F

    return F.col(TIMEOUT_COLUMN) if spec.timeout == AUTO else F.lit(spec.timeout_micros)


def with_sizes(rows: DataFrame, spec: SwaSpec, sizes: Sizes | None) -> DataFrame:
    """The tuples with SIZE_COLUMN and TIMEOUT_COLUMN from the learned table (a step that learns nothing: as is)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    if not spec.learns:
        return rows
    if sizes is None:
        raise BadInput(Problem(f"size: auto / timeout: auto: nothing learned for this step (input {spec.input})"))
    head = field_of(rows, spec.learned_by or "")
    if head is None:
        raise BadInput(
            Problem(f"learn.by column '{spec.learned_by}' is not in the input", hint=f"columns: {', '.join(rows.columns)}")
        )
    schema = StructType(
        [
            StructField("__tributary_head", StringType()),
            StructField(SIZE_COLUMN, LongType()),
            StructField(TIMEOUT_COLUMN, LongType()),
        ]
    )
    table = rows.sparkSession.createDataFrame([(h, n, t) for h, (n, t) in sorted(sizes.per_head.items())], schema)
    joined = rows.join(F.broadcast(table), F.col(quoted(head.name)).cast("string") == F.col("__tributary_head"), "left")
    n, t = sizes.fallback
    size = F.coalesce(F.col(SIZE_COLUMN), F.lit(n)) if spec.size == AUTO else F.lit(int(spec.size))
    timeout = F.coalesce(F.col(TIMEOUT_COLUMN), F.lit(t)) if spec.timeout == AUTO else F.lit(spec.timeout_micros)
    return (
        joined.drop("__tributary_head")
        .withColumn(SIZE_COLUMN, size.cast("long"))
        .withColumn(TIMEOUT_COLUMN, timeout.cast("long"))
    )
