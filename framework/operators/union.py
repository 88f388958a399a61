"""`union:` steps: rows of all inputs, columns matched by name, plus `_source` (the input's name)."""

from __future__ import annotations

from framework.errors import BadInput, Problem
from framework.operators.context import StepContext
from framework.operators.registry import StepKind, register
from framework.spec.steps import UnionStep

SOURCE_COLUMN = "_source"


def build_union(context: StepContext):  # noqa: ANN201 - a DataFrame
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


register(StepKind(UnionStep, build=build_union, passes_rows_through=True))
