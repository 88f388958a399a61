"""What SWA and the tumbling baseline share: the key, the checks on the input, quarantine of
tuples without a key or event time, the total order of tuples, and the output columns.

Output of both: the key columns, `window_start` and `window_end` (event times of the unit's first
and last tuple), `tuple_count`, `closed_by` (count | timeout | end_of_input), then the aggregates.

Total order of tuples (what "in event-time order" means when event times tie): event time, then
the `tiebreak` columns, then every other column of the input in its order (columns Spark cannot
order, such as maps, by their JSON text). Rows equal on all of these are identical, so which of
them comes first cannot change any output.

The units only show the key, the event time and the columns the aggregates read, so the other
columns are dropped before the shuffle (`used_columns`); rows that tie on every kept column
cannot be told apart in any output either.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from framework.errors import BadInput, Problem
from framework.operators.columns import Role, field_of, is_timestamp, lacking, missing_columns, quoted, untimely
from framework.operators.context import StepContext
from framework.operators.ordering import epoch_micros, orderable
from framework.operators.problems import SpecProblem
from framework.operators.registry import ColumnContext, StepColumns
from framework.schemas import Column as SchemaColumn
from framework.schemas import Schema

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from framework.spec.steps import KeyedWindowSpec

FIXED_COLUMNS = ("window_start", "window_end", "tuple_count", "closed_by")
CLOSED_BY = ("count", "timeout", "end_of_input")
COUNT, TIMEOUT, END_OF_INPUT = range(3)
MICROS = "__tributary_micros"  # event time as microseconds since the epoch
UNIT = "__tributary_unit"  # which unit of its key a tuple belongs to
CLOSED = "__tributary_closed"  # how that unit closed: an index into CLOSED_BY


def aggregate_problems(step: Any) -> list[SpecProblem]:
    """Each aggregate is one Spark SQL expression (syntax only, before Spark starts; Spark checks
    the columns when it plans the step)."""
    import sqlglot
    from sqlglot import exp

    kind, problems = step.kind, []
    for column, expression in getattr(step, kind).aggregates.items():
        at = (kind, "aggregates", column)
        try:
            parsed = sqlglot.parse(f"SELECT {expression}", read="spark")
        except sqlglot.errors.SqlglotError as e:
            reason = str(e).split(". Line ")[0].splitlines()[0]
            problems.append(
                SpecProblem(
                    f"aggregate '{column}' is not a SQL expression: {reason}",
                    at,
                    hint="write one aggregate expression, e.g. sum(response_ms) or collect_set(requested_service)",
                )
            )
            continue
        if len(parsed) != 1 or not isinstance(parsed[0], exp.Select) or len(parsed[0].expressions) != 1:
            problems.append(
                SpecProblem(
                    f"aggregate '{column}' must be one expression, got '{expression}'",
                    at,
                    hint="one aggregate per output column, e.g. total_ms: sum(response_ms)",
                )
            )
    return problems


def keyed_window_columns(step: Any, context: ColumnContext) -> StepColumns:
    """Before Spark starts: the columns the step names are in its input (key, event time,
    tiebreak, truth, the column learned sizes are kept by), the event time is a timestamp, the
    aggregates read columns the input has; the output is unit_rows': key, FIXED_COLUMNS, aggregates."""

    kind = step.kind
    spec: KeyedWindowSpec = getattr(step, kind)
    schema = context.inputs[spec.input]
    if isinstance(spec.key, str):
        from framework.spec.steps import STRATEGIES

        note = f" (strategy '{spec.key}')"
        roles: list[Role] = [("key", getattr(spec.columns, r), note, (kind, "columns", r)) for r in STRATEGIES[spec.key]]
    else:
        roles = [("key", c, "", (kind, "key", i)) for i, c in enumerate(spec.key)]
    roles += [("event_time", spec.event_time, "", (kind, "event_time"))]
    roles += [("tiebreak", c, "", (kind, "tiebreak", i)) for i, c in enumerate(spec.tiebreak)]
    if spec.truth is not None:
        roles += [("truth.instance", spec.truth.instance, "", (kind, "truth", "instance"))]
        roles += [("truth.primary", spec.truth.primary, "", (kind, "truth", "primary"))]
    learn = getattr(spec, "learn", None)
    if getattr(spec, "learns", False) and learn is not None and learn.by is not None:
        roles += [("learn.by", learn.by, "", (kind, "learn", "by"))]
    problems = lacking(spec.input, schema, roles)
    hint = "declare it TIMESTAMP in the source's schema, or cast it in a SQL step before this one"
    problems += untimely(spec.input, schema, spec.event_time, (kind, "event_time"), hint, name_input=False)
    fixed = {c.lower() for c in (*spec.key_columns(), *FIXED_COLUMNS)}
    clash = [name for name in spec.aggregates if name.lower() in fixed]
    if clash:
        problems.append(
            SpecProblem(
                f"aggregate name(s) {clash} clash with the key or the fixed output columns",
                (kind, "aggregates", clash[0]),
                hint=f"every unit already has {', '.join(FIXED_COLUMNS)}; rename the aggregate",
            )
        )
    event_time = schema.find(spec.event_time)
    columns = [schema.find(c) or SchemaColumn(c) for c in spec.key_columns()]
    columns += [
        SchemaColumn(n, event_time.type if event_time else None, event_time.inferred if event_time else False)
        for n in FIXED_COLUMNS[:2]
    ]
    columns += [SchemaColumn("tuple_count", "BIGINT"), SchemaColumn("closed_by", "STRING")]
    for name, (column, findings) in _aggregate_columns(spec.input, schema, tuple(spec.aggregates.items())).items():
        columns.append(column)
        expression = spec.aggregates[name]
        problems += [
            SpecProblem(f"aggregate '{name}: {expression}' cannot run: {f.message}", (kind, "aggregates", name), hint=f.hint)
            for f in findings
        ]
    return StepColumns(Schema(tuple(columns), complete=True), list(problems))


@functools.lru_cache(maxsize=64)
def _aggregate_columns(input_name: str, schema: Schema, aggregates: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """name -> (its output column, what is wrong with the columns it reads), the aggregates read
    as one query over the input, one per line (an SWA step and its tumbling baseline often share
    them, hence the cache). An aggregate that is not one expression gets an untyped column
    (aggregate_problems says why)."""
    import sqlglot
    from sqlglot import exp

    from framework.schemas.query import analyze

    result: dict[str, Any] = {name: (SchemaColumn(name), []) for name, _ in aggregates}
    readable = [(n, e) for n, e in aggregates if _one_expression(e)]
    if not readable:
        return result
    text, first_lines = "SELECT", []
    for name, expression in readable:
        first_lines.append(text.count("\n") + 2)
        text += f"\n{expression} AS {quoted(name)}" + ("," if len(first_lines) < len(readable) else "")
    try:
        parsed = sqlglot.parse_one(f"{text}\nFROM {quoted(input_name)}", read="spark")
    except sqlglot.errors.SqlglotError:
        return result
    if not isinstance(parsed, exp.Select) or len(parsed.selects) != len(readable):
        return result
    analysis = analyze(parsed, {input_name: schema})
    typed = {c.name.lower(): c for c in analysis.schema.columns}
    ends = [*first_lines[1:], text.count("\n") + 2]
    for (name, _), first, end in zip(readable, first_lines, ends, strict=True):
        found = typed.get(name.lower())
        column = SchemaColumn(name, found.type if found else None, inferred=True)
        result[name] = (column, [f for f in analysis.findings if first <= f.line < end])
    return result


def _one_expression(expression: str) -> bool:
    import sqlglot
    from sqlglot import exp

    try:
        parsed = sqlglot.parse(f"SELECT {expression}", read="spark")
    except sqlglot.errors.SqlglotError:
        return False
    return len(parsed) == 1 and isinstance(parsed[0], exp.Select) and len(parsed[0].expressions) == 1


def spec_of(context: StepContext) -> KeyedWindowSpec:
    return getattr(context.spec, context.spec.kind)


def checked_input(context: StepContext) -> DataFrame:
    """The input with every named column present and a timestamp event time (else exit 2),
    tuples without a key or an event time quarantined, and the event time in microseconds."""
    spec = spec_of(context)
    df = context.inputs[spec.input]
    strategy = f" (strategy '{spec.key}')" if isinstance(spec.key, str) else ""
    roles = [("key", c, strategy) for c in spec.key_columns()] + [("event_time", spec.event_time, "")]
    roles += [("tiebreak", c, "") for c in spec.tiebreak]
    if spec.truth is not None:
        roles += [("truth.instance", spec.truth.instance, ""), ("truth.primary", spec.truth.primary, "")]
    problems = missing_columns(context.name, spec.input, df, roles)
    event_time = field_of(df, spec.event_time)
    if event_time is not None and not is_timestamp(event_time):
        problems.append(
            Problem(
                f"step '{context.name}': event_time column '{spec.event_time}' is {event_time.dataType.simpleString()}, not a timestamp",
                hint="declare it TIMESTAMP in the source's schema, or cast it in a SQL step before this one",
            )
        )
    clash = [name for name in spec.aggregates if name.lower() in {c.lower() for c in (*spec.key_columns(), *FIXED_COLUMNS)}]
    if clash:
        problems.append(
            Problem(
                f"step '{context.name}': aggregate name(s) {clash} clash with the key or the fixed output columns",
                hint=f"every unit already has {', '.join(FIXED_COLUMNS)}; rename the aggregate",
            )
        )
    if problems:
        raise BadInput(*problems)

    kept = context.quarantine(df, rejection_reason(spec))
    return with_micros(kept, spec)


def used_columns(rows: DataFrame, spec: KeyedWindowSpec) -> DataFrame:
    """Only the columns the units show or the order needs: key, event time, tiebreak, the columns
    the aggregates name (all columns if an aggregate cannot be read, or reads `*`)."""
    import sqlglot
    from sqlglot import exp

    named: set[str] = set()
    for expression in spec.aggregates.values():
        try:
            parsed = sqlglot.parse_one(f"SELECT {expression}", read="spark")
        except sqlglot.errors.SqlglotError:
            return rows
        if any(isinstance(star, exp.Star) and not isinstance(star.parent, exp.Count) for star in parsed.find_all(exp.Star)):
            return rows
        named |= {part.name.lower() for column in parsed.find_all(exp.Column) for part in column.parts}  # s.x: s and x
    wanted = {c.lower() for c in (*spec.key_columns(), spec.event_time, *spec.tiebreak)} | named
    kept = [quoted(c) for c in rows.columns if c.lower() in wanted or c.startswith("__tributary")]
    return rows.select(*kept) if len(kept) < len(rows.columns) else rows


def rejection_reason(spec: KeyedWindowSpec) -> Column:
    """Why a tuple cannot enter a window (null when it can): no event time, or a null key column."""
    from pyspark.sql import functions as F

    missing = [F.when(F.col(quoted(c)).isNull(), F.lit(c)) for c in spec.key_columns()]
    return F.when(F.col(quoted(spec.event_time)).isNull(), F.lit(f"event_time {spec.event_time} is null")).otherwise(
        F.when(
            F.concat_ws(", ", *missing) != "",
            F.concat(F.lit("key column(s) "), F.concat_ws(", ", *missing), F.lit(" null: the tuple has no instance key")),
        )
    )


def with_micros(rows: DataFrame, spec: KeyedWindowSpec) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampNTZType

    ntz = isinstance(field_of(rows, spec.event_time).dataType, TimestampNTZType)
    return rows.withColumn(MICROS, epoch_micros(F.col(quoted(spec.event_time)), ntz))


def tuple_order(df: DataFrame, spec: KeyedWindowSpec) -> list[Column]:
    """The total order of tuples (module docstring), as sort columns after the event time."""
    from pyspark.sql import functions as F

    first = {spec.event_time.lower(), *(c.lower() for c in spec.tiebreak)}
    rest = [
        F.col(quoted(f.name)) if orderable(f.dataType) else F.to_json(F.struct(F.col(quoted(f.name))))
        for f in df.schema.fields
        if f.name.lower() not in first and not f.name.startswith("__tributary")
    ]
    return [F.col(MICROS), *[F.col(quoted(c)) for c in spec.tiebreak], *rest]


def unit_rows(
    step: str,
    spec: KeyedWindowSpec,
    assigned: DataFrame,
    group: list[str],
    closed: Column | None = None,
    hidden: dict[str, Column] | None = None,
    order: str | list[Column] | None = None,
) -> DataFrame:
    """One row per unit: tuples grouped by key and `group` (the hidden unit columns). How a unit
    closed is its tuples' CLOSED, or the aggregate `closed` (an index into CLOSED_BY). `hidden`
    aggregates are computed in the same pass and kept after the output columns, by name.

    `order`: the rows are already partitioned by the key and in each key's tuple order, and this
    column numbers each unit's tuples in that order (SWA's fold). They are then sorted by
    (`group`, key, `order`), which leaves them where they are, so each unit's tuples come one
    after another, in order. Spark then aggregates each unit as its tuples stream past (one sort
    aggregate: framework.engine.session), not twice through a hash map (a partial and a final
    aggregation in the same task, the buffers serialised between them), and every aggregate
    that depends on order (collect_list, first) sees the unit's tuples in their total order.

    `order` as columns (`tuple_order`: tumbling windows): the rows are in no order yet. They are
    partitioned by (`group`, key) and sorted by those and the tuple order, so that each unit's
    tuples reach its aggregation in their total order too. Grouped as they came, across
    partitions, `first`, `last` and `collect_list` of a unit whose tuples sat in several
    partitions took them in whatever order the shuffle delivered (10,333 of 611,708 units wrong
    over 1M keys)."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    keys = [field_of(assigned, c).name for c in spec.key_columns()]
    ts = F.col(quoted(spec.event_time))
    closed = F.element_at(F.array(*[F.lit(c) for c in CLOSED_BY]), (F.first(CLOSED) if closed is None else closed) + 1)
    fixed = [
        F.min(ts).alias("window_start"),
        F.max(ts).alias("window_end"),
        F.count(F.lit(1)).alias("tuple_count"),
        closed.alias("closed_by"),
    ]
    key = [F.col(quoted(k)) for k in keys]
    if order is None:
        grouped = assigned.groupBy(*key, *group)
    elif isinstance(order, str):
        grouped = assigned.sortWithinPartitions(*group, *key, order).groupBy(*group, *key)
    else:
        placed = assigned.repartition(*[F.col(g) for g in group], *key).sortWithinPartitions(*group, *key, *order)
        grouped = placed.groupBy(*group, *key)
    try:
        aggregates = [F.expr(expression).alias(name) for name, expression in spec.aggregates.items()]
        extra = [column.alias(name) for name, column in (hidden or {}).items()]
        units = grouped.agg(*fixed, *aggregates, *extra)
    except AnalysisException as e:
        raise _aggregate_problem(step, spec, grouped, fixed, e) from None
    return units.select(*[quoted(k) for k in keys], *FIXED_COLUMNS, *[quoted(n) for n in spec.aggregates], *(hidden or {}))


def _aggregate_problem(step: str, spec: KeyedWindowSpec, grouped: Any, fixed: Any, error: Exception) -> BadInput:
    from pyspark.errors import AnalysisException, ParseException
    from pyspark.sql import functions as F

    for name, expression in spec.aggregates.items():
        try:
            grouped.agg(*fixed, F.expr(expression).alias(name))
        except (AnalysisException, ParseException) as e:
            first = (e.getMessage() if hasattr(e, "getMessage") else str(e)).strip().splitlines()[0].split(" SQLSTATE")[0]
            return BadInput(
                Problem(
                    f"step '{step}': aggregate '{name}: {expression}' cannot run: {first}",
                    hint="write a Spark SQL aggregate over the input's columns, e.g. sum(response_ms)",
                )
            )
    first = str(error).strip().splitlines()[0]
    return BadInput(Problem(f"step '{step}': the aggregates cannot run: {first}"))
