"""`sql:` steps: the rendered query, run by Spark over the views of sources and earlier steps.

Under the strict SQL policy the text handed to spark.sql() is judged again here, not only at
`validate`: by sqlglot and by Spark's own parser (framework.sql_policy), and Spark reads it with
`spark.sql.runSQLOnFiles` off, so `format`.`path` cannot name a file even if both checks missed
it. The setting is off only while Spark analyses this query (spark.sql() resolves its relations
there): Tributary's own Delta commands name tables by path (ALTER TABLE delta.`...`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from framework.errors import BadInput, Problem
from framework.operators.context import StepContext
from framework.operators.registry import ColumnContext, StepColumns, StepKind, register
from framework.schemas import Schema
from framework.spec.steps import SqlStep
from framework.sql_policy import Refusal, SparkPlanCheck, text_refusals

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_POSITION = re.compile(r"line (\d+),? pos (\d+)")


def build_sql(context: StepContext) -> DataFrame:
    from pyspark.errors import AnalysisException, ArithmeticException, IllegalArgumentException, ParseException

    sql = context.sql
    assert sql is not None
    try:
        if context.sql_policy != "strict":
            return context.spark.sql(sql.text)
        _check_strict(context)
        with _no_sql_on_files(context.spark):
            return context.spark.sql(sql.text)
    except (AnalysisException, ParseException, ArithmeticException, IllegalArgumentException) as e:
        # planning runs no job: each is the query's (a DECIMAL(40, 2) is an ArithmeticException)
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


def _check_strict(context: StepContext) -> None:
    """The strict policy on the exact text Spark gets: sqlglot's tree of it, then Spark's plan."""
    from pyspark.errors import ParseException

    sql = context.sql
    assert sql is not None
    reads = (*sql.refs, *sql.sources)
    udfs = tuple(context.functions.sql) if context.functions is not None else ()
    refused = text_refusals(sql.text, reads, udfs)
    columns = {c for frame in context.inputs.values() for c in frame.columns}
    try:
        check = SparkPlanCheck(context.spark, reads, udfs, columns)
    except AttributeError:  # Spark Connect: no JVM on this side; Spark's parser is not reachable
        check = None
    if check is not None:
        with suppress(ParseException):  # then spark.sql() says where the syntax is wrong, in the usual words
            refused += [r for r in check.refusals(sql.text) if r not in refused]
    if refused:
        raise BadInput(*(sql.problem(r.message, _line(sql.text, r), hint=r.full_hint) for r in refused))


def _line(text: str, refusal: Refusal) -> int:
    """The rendered line of a refusal; Spark's plan has no lines: where its name first appears."""
    if refusal.line > 1:
        return refusal.line
    name = refusal.what.rstrip("()").split(".")[-1].strip("`").lower()
    at = text.lower().find(name) if name else -1
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


@contextmanager
def _no_sql_on_files(spark: SparkSession) -> Iterator[None]:
    key = "spark.sql.runSQLOnFiles"
    before = spark.conf.get(key, "true") or "true"
    spark.conf.set(key, "false")
    try:
        yield
    finally:
        spark.conf.set(key, before)


def sql_columns(step: SqlStep, context: ColumnContext) -> StepColumns:
    """The query's output columns over the views it reads (framework.schemas.query), and its
    unknown or ungrouped columns at the template's own lines."""
    from framework.schemas.query import analyze
    from framework.schemas.query_size import query_size

    if context.statement is None or context.sql is None:
        return StepColumns(Schema.unknown("its query was not parsed"))
    sql = context.sql
    skipped = context.budget.why_not(query_size(context.statement))
    if skipped is not None:
        why, say = skipped
        if context.budget.spent:
            what, hint = (
                "this step's columns and the later steps' are",
                "split the pipeline (a schedule's after: runs one after another)",
            )
        else:
            what = "its columns, and those of the steps reading it, are"
            hint = "split it (WITH clauses, or steps of their own); a long chain of OR x = … is shorter as x IN (…)"
        note = sql.problem(f"{why}: {what} not checked; Spark checks them in the run", 1, hint=hint)
        return StepColumns(Schema.unknown(why), notes=[note] if say else [])
    analysis = analyze(context.statement, context.inputs, context.parsed_text)
    return StepColumns(analysis.schema, [sql.problem(f.message, f.line, f.hint) for f in analysis.findings])


def keeps_state(step: SqlStep, query: str | None) -> bool:
    """Whether the query keeps state on a stream: it groups, aggregates, joins or takes DISTINCT
    (a join with a static table too: which tables stream is Spark's to know, after planning)."""
    import sqlglot
    from sqlglot import exp

    from framework.sql_policy import for_sqlglot

    if query is None:
        return False
    try:
        tree = sqlglot.parse_one(for_sqlglot(query), read="spark")
    except sqlglot.errors.SqlglotError:
        return True  # cannot tell: kept, so a change is said
    return any(tree.find(node) is not None for node in (exp.Group, exp.AggFunc, exp.Distinct, exp.Join))


register(
    StepKind(SqlStep, build=build_sql, template=lambda step: step.sql, output_schema=sql_columns, keeps_spark_state=keeps_state)
)
