"""`sql:` steps: the rendered query, run by Spark over the views of sources and earlier steps."""

from __future__ import annotations

import re
from typing import Any

from framework.errors import BadInput, Problem
from framework.operators.context import StepContext
from framework.operators.registry import ColumnContext, StepColumns, StepKind, register
from framework.schemas import Schema
from framework.spec.steps import SqlStep

_POSITION = re.compile(r"line (\d+),? pos (\d+)")


def build_sql(context: StepContext):  # noqa: ANN201 - a DataFrame
    from pyspark.errors import AnalysisException, ParseException

    sql = context.sql
    assert sql is not None
    try:
        return context.spark.sql(sql.text)
    except (AnalysisException, ParseException) as e:
        message = e.getMessage() if hasattr(e, "getMessage") else str(e)
        first = message.strip().splitlines()[0]
        line = None
        match = _POSITION.search(message)
        if match:
            line = sql.locate(int(match.group(1)), int(match.group(2)) + 1)[1]
        context_info: list[Any] = getattr(e, "getQueryContext", lambda: [])()
        if line is None and context_info:
            fragment_start = context_info[0].startIndex() if hasattr(context_info[0], "startIndex") else None
            if fragment_start is not None and fragment_start >= 0:
                line = sql.source_map.locate(fragment_start)[1]
        raise BadInput(
            Problem(
                f"step '{context.name}': Spark cannot run this query: {first}",
                file=sql.template,
                line=line,
                hint="fix the query; `tributary compile` shows the SQL as Spark sees it",
            )
        ) from None


def sql_columns(step: SqlStep, context: ColumnContext) -> StepColumns:
    """The query's output columns over the views it reads (framework.schemas.query), and its
    unknown or ungrouped columns at the template's own lines."""
    from framework.schemas.query import analyze

    if context.statement is None or context.sql is None:
        return StepColumns(Schema.unknown("its query was not parsed"))
    analysis = analyze(context.statement, context.inputs, context.parsed_text)
    sql = context.sql
    return StepColumns(analysis.schema, [sql.problem(f.message, f.line, f.hint) for f in analysis.findings])


register(StepKind(SqlStep, build=build_sql, template=lambda step: step.sql, output_schema=sql_columns))
