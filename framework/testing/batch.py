"""One test run in batch: the checked step built over the given rows, nothing written anywhere.

The run is the engine's own (framework.engine.frames), over a plan cut down to the test: the
checked step and the steps between it and the given nodes, each given node read as a source
whose rows are the test's. So a step is built by the same code, with the same expectations
attached, as in a run; what differs is only where the rows come from and that the rows of the
checked step are collected instead of staged and committed. The plan's warehouse is the scratch
one (`run --limit`'s), so even what a kind might write would not reach a real table.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from framework.errors import BadInput, TributaryError
from framework.project_context import ProjectContext
from framework.spec.tests import RowsFile
from framework.testing.rows import Difference, column_types, comparable, compare, frame_of, misfit
from framework.testing.suite import DeclaredTest, checked_node, needed_nodes

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

    from framework.compiler import CompiledPipeline
    from framework.engine.context import RunContext
    from framework.plan.model import RunPlan

ACTUAL = "__tributary_test_actual"  # which side of the comparison a collected row is
#: the split the checked step's drop expectations write to (its refused rows, for `quarantined:`)
REFUSED = "__tributary_test_refused"


@dataclass
class Outcome:
    """What a test found: nothing wrong (passed), differences, or an unexpected failure."""

    test: DeclaredTest
    seconds: float = 0.0
    differences: list[tuple[str, Difference]] = field(default_factory=list)  # (what, how) that did not match
    failure: str | None = None  # the run stopped, and the test did not expect it (or expected another)

    @property
    def passed(self) -> bool:
        return self.failure is None and not self.differences

    def lines(self) -> list[str]:
        found = [line for what, difference in self.differences for line in difference.lines(what)]
        return found + ([self.failure] if self.failure is not None else [])


def test_context(context: ProjectContext, test: DeclaredTest, step: str) -> ProjectContext:
    """The context of a test's run: its vars over the command line's, its interval, its step."""
    variables = {**context.variables, **test.spec.vars}
    interval = test.spec.interval if test.spec.interval is not None else context.interval_text
    return replace(context, variables=variables, interval_text=interval, select=f"+{step}")


def run_test(context: ProjectContext, compiled_all: CompiledPipeline, test: DeclaredTest, spark: SparkSession) -> Outcome:
    """Run one batch test; BadInput when the test itself is malformed."""
    began = time.perf_counter()
    step, output = checked_node(compiled_all, test)
    about = test_context(context, test, step)
    compiled = _compiled(about, compiled_all, test, step)
    if compiled.uses_interval and compiled.interval is None:
        raise BadInput(test.problem(f"'{step}' reads interval_start / interval_end", "step", hint="add interval: START/END"))
    root = context.project.root
    given = {name: test.rows(rows, root, "given", name) for name, rows in test.spec.given.items()}
    outcome = Outcome(test)
    run = _run_context(about, compiled, step, output, set(given), spark)
    try:
        with run.cleanup:
            frames = _frames(run, compiled, test, given, spark)
            actual = frames.output_frame(run.plan.output(output)) if output else frames.frames[step]
            from framework.quality.gate import MASK

            if MASK in actual.columns:
                from pyspark.sql import functions as F

                actual = actual.where(F.col(MASK).isNull()).drop(MASK)
            expect = test.spec.expected
            if expect is not None:
                expected = test.rows(expect.rows, root, "expect", "rows")
                columns = expect.columns or actual.columns
                inline = not isinstance(expect.rows, RowsFile)
                fits = partial(_check_values, spark, test, expected, what="expected row {}", at=("expect", "rows"), inline=inline)
                difference = compare_frame(spark, actual, expected, columns, expect.match == "exact", fits)
                if not difference.matches:
                    outcome.differences.append(("rows", difference))
            else:
                actual.write.format("noop").mode("overwrite").save()
            run.quality.check_rows()
            if expect is not None and expect.quarantined is not None:
                refused = _refused(run, frames, step, output)
                wanted = test.rows(expect.quarantined, root, "expect", "quarantined")
                named = list(dict.fromkeys(c for row in wanted for c in row)) or refused.columns
                inline = not isinstance(expect.quarantined, RowsFile)
                fits = partial(
                    _check_values,
                    spark,
                    test,
                    wanted,
                    what="expected quarantined row {}",
                    at=("expect", "quarantined"),
                    inline=inline,
                )
                difference = compare_frame(spark, refused, wanted, named, False, fits)
                if not difference.matches:
                    outcome.differences.append(("quarantined", difference))
    except BadInput:
        raise
    except Exception as e:  # noqa: BLE001 - a run that stops is what a `fails:` test expects
        outcome.failure = _failure(run, e)
    outcome = _judge_failure(outcome, test)
    outcome.seconds = time.perf_counter() - began
    return outcome


def _compiled(about: ProjectContext, compiled_all: CompiledPipeline, test: DeclaredTest, step: str) -> CompiledPipeline:
    """The pipeline compiled for the test: the whole pipeline's, with the test's selection, when the
    test sets no vars or interval of its own (else compiled again with them)."""
    if test.spec.vars or test.spec.interval is not None:
        return about.compiled
    return replace(compiled_all, selected=compiled_all.graph.select(f"+{step}"))


def _run_context(
    about: ProjectContext, compiled: CompiledPipeline, step: str, output: str | None, given: set[str], spark: SparkSession
) -> RunContext:
    from framework.engine.context import RunContext
    from framework.engine.results import RunResult, new_run_id
    from framework.io.delta import choose_store

    store = choose_store(spark, about.profile.delta_writer, about.profile.storage_options)
    plan = _test_plan(about, compiled, step, output, given)  # udfs/ are registered once, by run_tests
    return RunContext(compiled, plan, about.profile, spark, store, RunResult(new_run_id(), plan.pipeline, store=store.name))


def _test_plan(about: ProjectContext, compiled: CompiledPipeline, step: str, output: str | None, given: set[str]) -> RunPlan:
    """The run's plan cut down to the test: given nodes as sources, no other source, the checked
    step's refused rows split off for `quarantined:`, the checked output alone (if any)."""
    from framework.plan import plan_run
    from framework.plan.model import PlannedSource, RunMode

    scratch = about.warehouse(scratch=True)
    plan = plan_run(compiled, scratch)
    needed = needed_nodes(compiled, step, given)
    sources = tuple(
        PlannedSource(n, compiled.spec.sources.get(n), "", tuple(s.name for s in plan.steps if n in s.inputs)) for n in given
    )
    steps = tuple(
        replace(s, split_by=REFUSED if s.name == step and s.drops_rows and not output else s.split_by, chain=None)
        for s in plan.steps
        if s.name in needed and s.name not in given
    )
    outputs = tuple(o for o in plan.outputs if o.name == output)
    return replace(plan, mode=RunMode.BATCH, sources=sources, steps=steps, outputs=outputs, order=tuple(needed))


def _frames(
    run: RunContext, compiled: CompiledPipeline, test: DeclaredTest, given: dict[str, list[dict[str, Any]]], spark: SparkSession
) -> Any:
    from framework.engine.frames import BatchReading, build_frames
    from framework.io.sources import EVENT_TIME, SourceFrame, with_event_time

    class GivenReading(BatchReading):
        """Each given node's rows are the test's, typed by the node's known columns."""

        def source(self, run: RunContext, source: Any) -> SourceFrame:
            rows = given[source.name]
            columns = column_types(compiled.schemas.get(source.name), rows)
            spec = source.spec
            derived = spec is not None and spec.event_time is not None and not any(EVENT_TIME in r for r in rows)
            if derived:  # the source's event time is an expression over its columns: computed as a run does
                columns = [(n, t) for n, t in columns if n != EVENT_TIME]
            _check_given_values(spark, test, source.name, rows, columns)
            frame = SourceFrame(source.name, frame_of(spark, rows, columns))
            return with_event_time(frame, spec) if derived else frame

    return build_frames(run, GivenReading())


def _check_given_values(
    spark: SparkSession, test: DeclaredTest, name: str, rows: list[dict[str, Any]], columns: list[tuple[str, str]]
) -> None:
    inline = not isinstance(test.spec.given[name], RowsFile)
    _check_values(spark, test, rows, columns, f"given row {{}} of '{name}'", ("given", name), inline)


def _check_values(
    spark: SparkSession,
    test: DeclaredTest,
    rows: list[dict[str, Any]],
    columns: list[tuple[str, str]],
    what: str,
    at: tuple[str, ...],
    inline: bool,
) -> None:
    """A given or expected value its column's type cannot hold is a malformed test, said at its
    line (an expected one failed the test in Spark's words, CAST_INVALID_INPUT, with no line)."""
    found = misfit(spark, rows, columns)
    if found is None:
        return
    index, key, type_ = found
    type_ = type_ if "<" in type_ else type_.upper()  # as Spark SQL writes a plain type
    raise BadInput(
        test.problem(
            f"{what.format(index + 1)}: {key} {rows[index][key]!r} does not fit its type {type_}",
            *((*at, index, key) if inline else (*at, "file")),
            hint=f"write a {type_} value for {key} (a TIMESTAMP as 2026-11-02 08:00:00, a DATE as 2026-11-02), or null",
        )
    )


def _refused(run: RunContext, frames: Any, step: str, output: str | None) -> DataFrame:
    """The rows the checked step's (or output's) drop expectations refused, without their mask."""
    from pyspark.sql import functions as F

    from framework.quality.gate import MASK

    split = frames.staged.get(output or REFUSED)
    if split is None or MASK not in split.columns:
        return run.spark.createDataFrame([], frames.frames[step].schema)
    return split.where(F.col(MASK).isNotNull()).drop(MASK)


def compare_frame(
    spark: SparkSession,
    actual: DataFrame,
    expected: list[dict[str, Any]],
    columns: list[str],
    exact: bool,
    fits: Callable[[list[tuple[str, str]]], None] | None = None,
) -> Difference:
    """Actual rows (their `columns`) against expected ones typed as the actual columns are;
    `fits` checks the expected values against those types first (it raises BadInput)."""
    types = {f.name.lower(): f.dataType.simpleString() for f in actual.schema.fields}
    named = [next((f.name for f in actual.schema.fields if f.name.lower() == c.lower()), c) for c in columns]
    missing = [c for c in named if c.lower() not in types]
    if missing:
        raise BadInput(f"no column(s) {', '.join(missing)} in the rows produced: {', '.join(actual.columns)}")
    from pyspark.sql import functions as F

    typed = [(c, types[c.lower()]) for c in named]
    if fits is not None and expected:
        fits(typed)
    both = actual.select(*named, F.lit(True).alias(ACTUAL))
    if expected:  # typed by Spark as the actual rows are, in the same job
        both = both.unionByName(frame_of(spark, expected, typed).withColumn(ACTUAL, F.lit(False)))
    rows = both.collect()
    return compare(
        named,
        [tuple(comparable(v) for v in row[:-1]) for row in rows if not row[-1]],
        [tuple(comparable(v) for v in row[:-1]) for row in rows if row[-1]],
        exact,
    )


def _failure(run: RunContext, error: BaseException) -> str:
    from framework.engine.failures import is_spark_error, spark_failure

    if is_spark_error(error):
        return spark_failure(run, error)
    if isinstance(error, TributaryError):
        return str(error)
    return f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"


def _judge_failure(outcome: Outcome, test: DeclaredTest) -> Outcome:
    """A `fails:` test passes when the run stopped (with its text, when it gives one)."""
    fails = test.spec.fails
    if fails is False:
        return outcome
    if outcome.failure is None:
        outcome.failure = "the run did not stop, and the test expects it to (fails:)"
    elif isinstance(fails, str) and fails.lower() not in outcome.failure.lower():
        outcome.failure = f"the run stopped, but not with '{fails}':\n{outcome.failure}"
    else:
        outcome.failure = None
    return outcome
