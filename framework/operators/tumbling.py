"""`tumbling:` steps: the paper's baseline (Li et al., Table 6): count windows of W tuples over the
whole input in its total order (window = advance = W), grouped by key inside each window.

A unit is one key group inside one window. `closed_by` is `count` for a full window and
`end_of_input` for the last, shorter one. Global positions come from time buckets
(framework.operators.ordering), so no single partition has to hold the input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.operators import StepContext, operator
from framework.operators.keyed_windows import (
    CLOSED,
    COUNT,
    END_OF_INPUT,
    MICROS,
    UNIT,
    checked_input,
    spec_of,
    tuple_order,
    unit_rows,
    used_columns,
)
from framework.operators.ordering import global_positions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from framework.spec.steps import TumblingSpec

POSITION = "__tributary_position"


@operator("tumbling")
def build_tumbling(context: StepContext):  # noqa: ANN201 - a DataFrame
    spec = spec_of(context)
    return unit_rows(context.name, spec, assign_count_windows(used_columns(checked_input(context), spec), spec), [UNIT])


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
