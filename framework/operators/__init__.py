"""Operators: how each kind of step turns its input DataFrames into its own DataFrame.

One package per kind (sql, union, join, swa, tumbling, group), whose __init__ is the kind's one
entry in the step-kind registry (framework.operators.registry); a kind that runs per micro-batch
inside its output's sink in streaming has its operator in `<kind>/stream.py` (a PerBatchOperator,
framework.operators.micro_batch). The modules beside them are shared by several kinds. Operators
build DataFrames and write no tables: rows for the quarantine and late-row tables go back to the
engine, which commits them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.operators.context import EXPECTATION, REASON, Rejected, StepContext, quarantine_shape
from framework.operators.registry import check_complete, kind_of, kinds

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["EXPECTATION", "REASON", "Rejected", "StepContext", "build_step", "kind_of", "kinds", "quarantine_shape"]


def build_step(kind: str, context: StepContext) -> DataFrame:
    """The step's rows, built by its kind's builder."""
    return kinds()[kind].build(context)


from framework.operators import group, join, sql, swa, tumbling, union  # noqa: E402,F401  (each package registers its kind)

check_complete()
