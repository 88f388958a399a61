"""`group:` steps: keyed stateful user functions (Satzger et al., ESC, §4).

A processing element of the paper buffers events per key until its strategy says a group is
complete, then runs the user's operator on the group's events with the key's state. Here:

- the inputs' events, tagged with the input they came from (`_input`, when there are several),
  are grouped by the step's `key:` (or `context:`) columns;
- the close rule (`close:` count, timeout, every, all_inputs) decides when a group is complete
  (framework.operators.group.runner.close_groups);
- the @group_function from udfs/ is called once per closed group: f(events, state, args), the
  events in event-time order (the total order of framework.operators.keyed_windows), the state
  kept per key between its groups;
- its rows, after the key columns, are the step's rows; their columns are the step's `returns:`
  (or the decorator's).

Spark shuffles the events by key (`partitions: N` is the paper's balancer `hash N`), sorts each
task's rows by key and order, and one mapInArrow call per task walks all its keys
(framework.operators.group.runner). A batch run starts with no state and ends its input: every
group closes. In streaming the step runs per micro-batch inside its output's sink, holding the
events of open groups and each key's state between batches (framework.operators.group.stream).

Events without a key or an event time are quarantined with the reason; so are the events of a
context that did not complete within its first event + timeout, or by the end of the input
(`incomplete context: missing <inputs>`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from framework.errors import BadInput, Problem
from framework.operators.columns import Role, field_of, lacking, missing_columns, not_a_timestamp, quoted, untimely
from framework.operators.context import REASON, Rejected, StepContext
from framework.operators.group.runner import (
    EVENT,
    EVENT_ROW,
    INPUT,
    KEY,
    MICROS,
    OUT,
    QUARANTINED,
    ROLE,
    STATE,
    GroupRunner,
    Rule,
)
from framework.operators.keyed_windows import rejection_reason, tuple_order, with_micros
from framework.operators.problems import SpecProblem
from framework.operators.registry import ColumnContext, StepColumns
from framework.schemas import Column as SchemaColumn
from framework.schemas import Schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from framework.functions.loader import Functions
    from framework.spec.steps import GroupSpec


def build_group(context: StepContext) -> DataFrame:
    """Batch: every group of the input, closed by its rule or by the end of the input."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    spec: GroupSpec = context.spec.group
    events = event_rows(context.name, spec, context.inputs, context.quarantine)
    runner = group_runner(
        context.name, spec, context.functions, events.schema, mark=_end_of_time(events, spec), end_of_input=True
    )
    grouped = run_groups(events, spec, runner)
    if spec.close.all_inputs and context.keep is not None:
        # its output and its quarantined contexts are both read from it: computed twice, every
        # group's function ran twice (356,148 calls for 178,074 groups)
        grouped = context.keep(grouped)
    observation = Observation(f"tributary_group_{context.name}")
    counted = grouped.observe(observation, F.count_if(F.col(ROLE) == QUARANTINED).alias("rejected"))
    context.rejected.append(Rejected(context.name, quarantined_events(grouped, events.schema), observation))
    return output_rows(counted, runner)


def _end_of_time(events: DataFrame, spec: GroupSpec) -> int | None:
    """How far event time went in a batch run (its newest event), for the timeout and every rules:
    a group whose first event + t is before it timed out, a group whose interval ends at or before
    it closed by `every`, as in streaming; the others end with the input. One pass over the input,
    only for those rules (a context join ends every context with the input)."""
    from pyspark.sql import functions as F

    close = spec.close
    if (close.timeout is None and close.every is None) or close.all_inputs or events.isStreaming:
        return None
    newest = events.agg(F.max(MICROS)).first()
    return newest[0] if newest is not None else None


def event_rows(step: str, spec: GroupSpec, inputs: dict[str, DataFrame], quarantine: Any) -> DataFrame:
    """The inputs' events, keyed (`keyed`), rows without a key or event time quarantined:
    `quarantine(rows, reason)` gives back the others."""
    return keyed(quarantine(tagged_inputs(step, spec, inputs), rejection_reason(spec)), spec)  # type: ignore[arg-type]


def tagged_inputs(step: str, spec: GroupSpec, inputs: dict[str, DataFrame]) -> DataFrame:
    """The inputs as one frame, each event tagged with its input when there are several (`_input`);
    exit 2 when an input lacks a named column or its event time is not a timestamp."""
    from pyspark.sql import functions as F

    frames = []
    problems: list[Problem] = []
    for name in spec.inputs:
        frame = inputs[name]
        roles = [("key", c, "") for c in spec.key_columns()] + [("event_time", spec.event_time, "")]
        roles += [("tiebreak", c, "") for c in spec.tiebreak]
        problems += missing_columns(step, name, frame, roles)
        hint = "declare it TIMESTAMP in the source's schema, or cast it in a SQL step before this one"
        problems += not_a_timestamp(step, name, frame, spec.event_time, hint)
        if len(spec.inputs) > 1:
            if field_of(frame, INPUT) is not None:
                problems.append(Problem(f"step '{step}': input '{name}' has a column '{INPUT}', which the step adds"))
            frame = frame.withColumn(INPUT, F.lit(name))
        frames.append(frame)
    if problems:
        raise BadInput(*problems)
    events = frames[0]
    for frame in frames[1:]:
        events = events.unionByName(frame, allowMissingColumns=True)
    return events


def keyed(events: DataFrame, spec: GroupSpec) -> DataFrame:
    """Events with the event time in micros (MICROS), the key as JSON text (KEY) and the event role."""
    from pyspark.sql import functions as F

    keys = F.to_json(F.struct(*[F.col(quoted(c)).alias(field_of_schema(events.schema, c)) for c in spec.key_columns()]))
    return with_micros(events, spec).withColumn(KEY, keys).withColumn(ROLE, F.lit(EVENT_ROW).cast("tinyint"))  # type: ignore[arg-type]


def group_runner(
    step: str, spec: GroupSpec, functions: Functions | None, events: StructType, mark: int | None, end_of_input: bool
) -> GroupRunner:
    """The function each task runs, with the schemas it reads and writes."""
    from pyspark.sql.pandas.types import to_arrow_schema

    _ship_runner()
    function = functions.group.get(spec.function) if functions is not None else None
    if function is None:  # validate names a missing function; this is a run without it
        raise BadInput(Problem(f"step '{step}': group function '{spec.function}' is not registered in udfs/"))
    returned = returned_schema(spec, function.returns)
    event_columns = tuple(f.name for f in events.fields if f.name not in (KEY, ROLE, STATE))
    shown = tuple(c for c in event_columns if not c.startswith("__tributary"))
    keys = tuple(field_of_schema(events, c) for c in spec.key_columns())
    shape = runner_schema(events, keys, returned)
    return GroupRunner(
        step=step,
        function=spec.function,
        fn=function.fn,
        args=dict(spec.args),
        rule=rule_of(spec),
        key_columns=keys,
        event_columns=event_columns,
        shown_columns=shown,
        returns=to_arrow_schema(returned, timezone="UTC"),
        schema=to_arrow_schema(shape, timezone="UTC"),
        spark_schema=shape,
        mark=mark,
        end_of_input=end_of_input,
        root=functions.root if functions is not None else "",
    )


def _ship_runner() -> None:
    """Executors get the runner's code by value, so they need not have `framework` installed."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[GroupRunner.__module__])


def run_groups(rows: DataFrame, spec: GroupSpec, runner: GroupRunner) -> DataFrame:
    """Shuffle by key, sort each task's rows (key, state row first, events in order), run the runner."""
    from pyspark.sql import functions as F

    spread = rows.repartition(spec.partitions, KEY) if spec.partitions else rows.repartition(KEY)
    order = [F.col(KEY), F.col(ROLE), *tuple_order(rows, spec)]  # type: ignore[arg-type]
    return spread.sortWithinPartitions(*order).mapInArrow(runner, runner.spark_schema)


def output_rows(grouped: DataFrame, runner: GroupRunner) -> DataFrame:
    from pyspark.sql import functions as F

    columns = [*runner.key_columns, *runner.returns.names]
    return grouped.where(F.col(ROLE) == OUT).select(*[quoted(c) for c in columns])


def quarantined_events(grouped: DataFrame, events: StructType) -> DataFrame:
    """The events the runner quarantined, with their own columns and the reason."""
    from pyspark.sql import functions as F

    columns = [F.col(quoted(EVENT + f.name)).alias(f.name) for f in events.fields if f.name not in (KEY, ROLE, STATE)]
    return grouped.where(F.col(ROLE) == QUARANTINED).select(*columns, F.col(REASON))


def runner_schema(events: StructType, keys: tuple[str, ...], returned: StructType) -> StructType:
    """What the runner yields: role, key, state, reason; the output's columns (key columns, the
    function's columns); every event column under EVENT (held and quarantined events)."""
    from pyspark.sql.types import StringType, StructField, StructType

    fixed = [StructField(name, StringType(), True) for name in (ROLE, KEY, STATE, REASON)]
    key_fields = [StructField(k, events[k].dataType, True) for k in keys]
    event_fields = [StructField(EVENT + f.name, f.dataType, True) for f in events.fields if f.name not in (KEY, ROLE, STATE)]
    returned_fields = [StructField(f.name, f.dataType, True) for f in returned.fields]
    return StructType(fixed + key_fields + returned_fields + event_fields)


def returned_schema(spec: GroupSpec, declared: str | None) -> StructType:
    from pyspark.sql.types import StructType

    from framework.functions.ddl import as_ddl, columns

    text = spec.returns if spec.returns is not None else declared
    assert text is not None, "validate requires returns"
    parsed = StructType.fromDDL(as_ddl(columns(text)))
    assert isinstance(parsed, StructType)
    return parsed


def field_of_schema(schema: StructType, column: str) -> str:
    """The schema's own spelling of a column named case-insensitively."""
    for f in schema.fields:
        if f.name.lower() == column.lower():
            return f.name
    return column


def rule_of(spec: GroupSpec) -> Rule:
    close = spec.close
    return Rule(
        count=close.count,
        timeout_us=None if close.timeout is None else round(close.timeout * 1_000_000),
        every_us=None if close.every is None else round(close.every * 1_000_000),
        all_inputs=tuple(spec.inputs) if close.all_inputs else (),
    )


# -- checks before Spark starts ------------------------------------------------------------------


def function_problems(step: Any, functions: Functions) -> Iterable[SpecProblem]:
    """The step names a registered function, and the columns it returns are declared and fit."""
    from framework.functions.ddl import DdlError, columns
    from framework.spec.base import did_you_mean

    spec: GroupSpec = step.group
    function = functions.group.get(spec.function)
    if function is None:
        known = set(functions.group)
        hint = did_you_mean(spec.function, known) if known else "define it in udfs/ with @group_function(returns=...)"
        yield SpecProblem(f"group function '{spec.function}' is not registered in udfs/", ("group", "function"), hint=hint)
        return
    text = spec.returns if spec.returns is not None else function.returns
    if text is None:
        yield SpecProblem(
            f"the columns '{spec.function}' returns are not declared",
            ("group", "function"),
            hint="add returns: 'name type, ...' to the step, or returns=... to @group_function",
        )
        return
    try:
        names = [name for name, _ in columns(text)]
    except DdlError as e:
        yield SpecProblem(f"returns: {e}", ("group", "returns") if spec.returns is not None else ("group", "function"))
        return
    clash = sorted({n for n in names if n.lower() in {k.lower() for k in spec.key_columns()}})
    if clash:
        yield SpecProblem(
            f"returned column(s) {clash} are key columns, which every row already starts with",
            ("group", "returns") if spec.returns is not None else ("group", "function"),
            hint="rename them in the function's rows",
        )


def group_columns(step: Any, context: ColumnContext) -> StepColumns:
    """Before Spark starts: every input has the key, event time and tiebreak columns (a timestamp
    event time, no `_input` of its own when the step adds it); the output is output_rows': the key
    columns (as the first input having each spells and types it), then the declared returns."""
    from framework.functions.ddl import DdlError, columns
    from framework.schemas.columns import spark_type

    spec: GroupSpec = step.group
    key_at = ("group", "key") if spec.key is not None else ("group", "context")
    listed = isinstance(spec.key if spec.key is not None else spec.context, list)
    roles: list[Role] = [("key", c, "", (*key_at, i) if listed else key_at) for i, c in enumerate(spec.key_columns())]
    roles += [("event_time", spec.event_time, "", ("group", "event_time"))]
    roles += [("tiebreak", c, "", ("group", "tiebreak", i)) for i, c in enumerate(spec.tiebreak)]
    problems: list[SpecProblem] = []
    hint = "declare it TIMESTAMP in the source's schema, or cast it in a SQL step before this one"
    for i, name in enumerate(spec.inputs):
        schema = context.inputs[name]
        problems += lacking(name, schema, roles)
        problems += untimely(name, schema, spec.event_time, ("group", "event_time"), hint)
        if len(spec.inputs) > 1 and schema.find(INPUT) is not None:
            problems.append(SpecProblem(f"input '{name}' has a column '{INPUT}', which the step adds", ("group", "inputs", i)))
    keys = []
    for key in spec.key_columns():
        found = next((c for c in (context.inputs[n].find(key) for n in spec.inputs) if c is not None), None)
        keys.append(found or SchemaColumn(key))
    function = context.functions.group.get(spec.function)
    text = spec.returns if spec.returns is not None else function.returns if function is not None else None
    try:
        returned = [SchemaColumn(n, spark_type(t)) for n, t in columns(text)] if text is not None else None
    except DdlError:
        returned = None
    if returned is None:  # function_problems says why
        return StepColumns(
            Schema(tuple(keys), complete=False, why_incomplete="the function's returns are not known"), list(problems)
        )
    return StepColumns(Schema((*keys, *returned)), list(problems))


def streaming_problems(step: Any) -> Iterable[SpecProblem]:
    """A context that never completes must not be held forever: on streams, all_inputs needs a timeout."""
    close = step.group.close
    if close.all_inputs and close.timeout is None:
        yield SpecProblem(
            "a context join on streams needs close.timeout: a context still missing an input is held until then, "
            "then quarantined",
            ("group", "close"),
            hint="e.g. close: {all_inputs: true, timeout: 10m}",
        )
