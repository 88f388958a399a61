"""Finding the columns a step names in its inputs: case-insensitive lookup, quoting, and one
problem per named column an input lacks (listing what the input has); on DataFrames when the step
runs, and on the inputs' schemas when `validate` checks it (framework.schemas)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from framework.errors import Problem
from framework.operators.problems import SpecProblem
from framework.schemas import Schema
from framework.schemas.columns import is_timestamp as is_timestamp_type
from framework.schemas.columns import shown

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructField


def field_of(df: DataFrame, column: str) -> Any:  # a StructField, or None (callers that checked the column take it as one)
    for field in df.schema.fields:
        if field.name.lower() == column.lower():
            return field
    return None


def quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def is_timestamp(field: StructField) -> bool:
    from pyspark.sql.types import TimestampNTZType, TimestampType

    return isinstance(field.dataType, (TimestampType, TimestampNTZType))


def missing_columns(step: str, input_name: str, df: DataFrame, roles: list[tuple[str, str, str]]) -> list[Problem]:
    """One problem per (role, column, note) whose column `df` lacks; `note` follows the column name."""
    have = ", ".join(df.columns)
    return [
        Problem(
            f"step '{step}': {role} column '{column}'{note} is not in input '{input_name}'", hint=f"'{input_name}' has: {have}"
        )
        for role, column, note in roles
        if field_of(df, column) is None
    ]


def not_a_timestamp(step: str, input_name: str, df: DataFrame, column: str, hint: str) -> list[Problem]:
    """A problem when the event time column `df` has is not a timestamp (none when it lacks it:
    missing_columns says that)."""
    field = field_of(df, column)
    if field is None or is_timestamp(field):
        return []
    kind = field.dataType.simpleString()
    return [Problem(f"step '{step}': event_time column '{column}' of input '{input_name}' is {kind}, not a timestamp", hint=hint)]


# -- the same, before Spark starts: against the inputs' schemas (framework.schemas) -------------------


Role = tuple[str, str, str, tuple[str | int, ...]]  # (role, column, note after the column, YAML path)


def lacking(input_name: str, schema: Schema, roles: list[Role]) -> list[SpecProblem]:
    """One problem per role whose column the input certainly lacks (said as missing_columns says it)."""
    return [
        SpecProblem(
            f"{role} column '{column}'{note} is not in input '{input_name}'", at, hint=schema.hint(column, f"'{input_name}'")
        )
        for role, column, note, at in roles
        if schema.lacks(column)
    ]


def untimely(
    input_name: str, schema: Schema, column: str, at: tuple[str | int, ...], hint: str, name_input: bool = True
) -> list[SpecProblem]:
    """A problem when the event time column's certain type is not a timestamp (said as the run says it)."""
    found = schema.find(column)
    if found is None or found.known_type is None or is_timestamp_type(found.known_type):
        return []
    of_input = f" of input '{input_name}'" if name_input else ""
    return [SpecProblem(f"event_time column '{column}'{of_input} is {shown(found.known_type)}, not a timestamp", at, hint=hint)]
