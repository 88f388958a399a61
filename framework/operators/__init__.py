"""Operators: how each kind of step turns its input DataFrames into its own DataFrame.

One module per kind (sql, union, join, swa, tumbling), each ending with the kind's entry in the
step-kind registry (framework.operators.registry). SWA and the count-window join also run per
micro-batch inside their output's sink in streaming (swa_stream, count_join_stream). Operators
build DataFrames and write no tables: rows for the quarantine and late-row tables go back to the
engine, which commits them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.operators.context import REASON, Rejected, StepContext, quarantine_shape
from framework.operators.registry import check_complete, kind_of, kinds

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["REASON", "Rejected", "StepContext", "build_step", "kind_of", "kinds", "quarantine_shape"]


def build_step(kind: str, context: StepContext) -> DataFrame:
    """The step's rows, built by its kind's builder."""
    return kinds()[kind].build(context)


from framework.operators import group, join, sql, swa, tumbling, union  # noqa: E402,F401  (each registers its kind)

check_complete()
