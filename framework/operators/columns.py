"""Finding the columns a step names in its inputs: case-insensitive lookup, quoting, and one
problem per named column an input lacks (listing what the input has)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.errors import Problem

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def field_of(df: DataFrame, column: str):  # noqa: ANN201 - a StructField or None
    for field in df.schema.fields:
        if field.name.lower() == column.lower():
            return field
    return None


def quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def is_timestamp(field) -> bool:  # noqa: ANN001 - a StructField
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
