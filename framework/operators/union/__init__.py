"""`union:` steps: rows of all inputs, columns matched by name, plus `_source` (the input's name)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.errors import BadInput, Problem
from framework.operators.context import StepContext
from framework.operators.problems import SpecProblem
from framework.operators.registry import ColumnContext, StepColumns, StepKind, register
from framework.schemas import Column as SchemaColumn
from framework.schemas import Schema
from framework.schemas.columns import shown
from framework.spec.steps import UnionStep

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SOURCE_COLUMN = "_source"


def build_union(context: StepContext) -> DataFrame:
    from pyspark.sql import functions as F

    names = list(context.spec.union)
    seen: dict[str, tuple[str, object]] = {}  # column (case-insensitive) -> (first input, type)
    for name in names:
        for field in context.inputs[name].schema.fields:
            key = field.name.lower()
            if key in seen and seen[key][1] != field.dataType:
                first, first_type = seen[key]
                raise BadInput(
                    Problem(
                        f"step '{context.name}': column '{field.name}' is {first_type.simpleString()} in '{first}' "  # type: ignore[attr-defined]
                        f"but {field.dataType.simpleString()} in '{name}'",
                        hint="cast it to one type in a SQL step before the union",
                    )
                )
            seen.setdefault(key, (name, field.dataType))
    frames = [context.inputs[name].withColumn(SOURCE_COLUMN, F.lit(name)) for name in names]
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame, allowMissingColumns=True)
    return result


def union_columns(step: UnionStep, context: ColumnContext) -> StepColumns:
    """As unionByName(allowMissingColumns) builds them: the first input's columns with `_source`
    after them, then each later input's new columns; a column two inputs type differently is an
    error, as build_union says at run time."""
    columns: dict[str, SchemaColumn] = {}  # lower-case name -> column, in order
    first: dict[str, str] = {}  # lower-case name -> the first input that has it
    problems: list[SpecProblem] = []
    why = ""
    for i, name in enumerate(step.union):
        schema = context.inputs[name]
        if not schema.complete:
            why = why or f"input '{name}': {schema.why_incomplete}"
        tag = SchemaColumn(SOURCE_COLUMN, "STRING")  # withColumn: in place of an input's own _source, else last
        own = [tag if c.name.lower() == SOURCE_COLUMN else c for c in schema.columns]
        own += [] if schema.find(SOURCE_COLUMN) else [tag]
        for column in own:
            key = column.name.lower()
            if key not in columns:
                columns[key], first[key] = column, name
                continue
            had = columns[key]
            if had.known_type and column.known_type and had.known_type != column.known_type:
                problems.append(
                    SpecProblem(
                        f"column '{column.name}' is {shown(had.known_type)} in '{first[key]}' but {shown(column.known_type)} in '{name}'",
                        ("union", i),
                        hint="cast it to one type in a SQL step before the union",
                    )
                )
    return StepColumns(Schema(tuple(columns.values()), complete=not why, why_incomplete=why), list(problems))


register(StepKind(UnionStep, build=build_union, passes_rows_through=True, output_schema=union_columns))
