"""`tumbling:` steps: the paper's baseline (Li et al., Table 6): count windows of W tuples over the
whole input in its total order (window = advance = W), grouped by key inside each window.

A unit is one key group inside one window. `closed_by` is `count` for a full window and
`end_of_input` for the last, shorter one. On streams it runs per micro-batch
(framework.operators.tumbling.stream). Global positions come from time buckets
(framework.operators.ordering), so no single partition has to hold the input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.operators.context import StepContext
from framework.operators.keyed_windows import (
    CLOSED,
    COUNT,
    END_OF_INPUT,
    MICROS,
    UNIT,
    checked_input,
    tuple_order,
    unit_rows,
    used_columns,
)
from framework.operators.ordering import global_positions

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from framework.spec.steps import TumblingSpec

POSITION = "__tributary_position"


def build_tumbling(context: StepContext) -> DataFrame:
    spec = context.spec.tumbling
    windows = assign_count_windows(used_columns(checked_input(context), spec), spec)
    return unit_rows(context.name, spec, windows, [UNIT], order=tuple_order(windows, spec))


def assign_count_windows(rows: DataFrame, spec: TumblingSpec) -> DataFrame:
    """Every tuple with UNIT = its count window's number and CLOSED = how that window closed."""
    from pyspark.sql import functions as F

    positioned, total = global_positions(rows, MICROS, tuple_order(rows, spec), POSITION)
    full_windows = total // spec.size
    window = F.floor(F.col(POSITION) / F.lit(spec.size)).cast("long")
    return (
        positioned.withColumn(UNIT, window)
        .withColumn(CLOSED, F.when(window < F.lit(full_windows), F.lit(COUNT)).otherwise(F.lit(END_OF_INPUT)))
        .drop(POSITION)
    )


def units(rows: DataFrame, spec: TumblingSpec) -> tuple[DataFrame, Column, Column]:
    """Each tuple with its unit (UNIT: its count window), open from the window's first tuple to
    its last: the whole window is held until then (framework.integration)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    assigned = assign_count_windows(rows, spec)
    window = Window.partitionBy(F.col(UNIT))
    return assigned, F.min(MICROS).over(window), F.max(MICROS).over(window)
