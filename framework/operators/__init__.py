"""Operators: how each step kind turns its input DataFrames into its own DataFrame.

Each kind registers a builder under the same name as its spec class (framework.spec.steps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from framework.templating import RenderedSql


@dataclass(frozen=True)
class StepContext:
    """What a step gets: the session, its spec, its inputs by name and (SQL) its rendered query."""

    spark: SparkSession
    name: str
    spec: Any
    inputs: dict[str, DataFrame]
    sql: RenderedSql | None = None


Builder = Callable[[StepContext], "DataFrame"]
OPERATORS: dict[str, Builder] = {}


def operator(kind: str) -> Callable[[Builder], Builder]:
    def register(fn: Builder) -> Builder:
        OPERATORS[kind] = fn
        return fn

    return register


def build_step(kind: str, context: StepContext) -> DataFrame:
    return OPERATORS[kind](context)


from framework.operators import join, sql, union  # noqa: E402,F401  (registers the built-in kinds)
