"""The tests a command line asks for, checked before any Spark starts, then run one by one.

All tests are read and checked first (framework.testing.suite): a malformed test anywhere is bad
input (exit 2) before a JVM is waited for, and the problems of every test are said at once. Then
one Spark session runs them in order; each test's outcome (passed, its differences, its failure)
and its time are kept for the summary and the JUnit report.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from framework.compiler import CompiledPipeline
from framework.errors import BadInput, Problem
from framework.project_context import ProjectContext
from framework.testing.suite import DeclaredTest, check_test, declared_tests

if TYPE_CHECKING:
    from framework.testing.batch import Outcome


#: Session settings for the time of the tests (set at run time, the session's own put back after):
#: a test's few rows need one task per stage (and one state store per stateful operator), and
#: adaptive execution only adds jobs to such plans: it runs each shuffle's map side as a job of its
#: own to re-plan what follows, 33 jobs (48 stages) for the example batch tests instead of 19 (32).
#: Neither changes a row of a result.
TEST_CONF = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false"}


@dataclass(frozen=True)
class PipelineTests:
    context: ProjectContext
    compiled: CompiledPipeline
    tests: list[DeclaredTest]


@dataclass
class TestRun:
    __test__ = False  # not a pytest class

    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.passed]


def tests_to_run(context: ProjectContext, pipeline: str | None, select: str | None) -> list[PipelineTests]:
    """The tests of `pipeline` (default: every pipeline's), those `select` names (test names or the
    steps they check, comma separated); BadInput with every malformed test's problems."""
    paths = [context.project.pipeline_path(pipeline)] if pipeline else context.project.all_pipelines()
    chosen = {s.strip() for s in select.split(",") if s.strip()} if select else None
    found, problems = [], []
    for path in paths:
        about = context.for_pipeline(path)
        compiled = about.selecting(None).compiled
        tests = declared_tests(compiled.loaded, context.project.root)
        if chosen is not None:
            tests = [t for t in tests if t.name in chosen or t.spec.step in chosen]
        for test in tests:
            problems += check_test(compiled, test, context.project.root)
        if tests:
            found.append(PipelineTests(about, compiled, tests))
    if problems:
        raise BadInput(*problems)
    if not found:
        what = f"named {select} " if select else ""
        where = context.project.relative(paths[0]) if pipeline else "pipelines/"
        raise BadInput(
            Problem(
                f"no tests {what}in {where}", hint="add tests: to a pipeline, or pipelines/<name>.tests.yaml (docs/testing.md)"
            )
        )
    return found


def run_tests(planned: list[PipelineTests], progress: Callable[[Outcome], None]) -> TestRun:
    """Run the tests in one Spark session; `progress` hears each outcome as it comes."""
    from framework.engine.session import guard, spark_session
    from framework.testing.batch import run_test
    from framework.testing.stream import run_scenario

    began = time.perf_counter()
    preload = threading.Thread(target=_preload, args=(planned,), name="tributary-test-preload", daemon=True)
    preload.start()  # imports while the JVM starts (a cold start), or while the first test plans
    spark = spark_session(planned[0].context.profile)
    guard(spark)
    preload.join()
    used: list[object] = []
    for one in planned:  # udfs/ registered once for the session, not once per test
        if not any(one.compiled.functions is f for f in used):
            one.compiled.functions.use(spark)
            used.append(one.compiled.functions)
    result = TestRun()
    before = {key: spark.conf.get(key, None) for key in TEST_CONF}
    for key, value in TEST_CONF.items():
        spark.conf.set(key, value)
    try:
        for one in planned:
            for test in one.tests:
                run_one = run_scenario if test.spec.then is not None else run_test
                outcome = run_one(one.context, one.compiled, test, spark)
                result.outcomes.append(outcome)
                progress(outcome)
    finally:
        for key, own in before.items():
            if own is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, own)
    result.seconds = time.perf_counter() - began
    return result


def _preload(planned: list[PipelineTests]) -> None:
    """What the tests import anyway, imported while the JVM starts: Great Expectations (seconds of
    imports) when a planned pipeline has expectations, pandas and Arrow when it has udfs/."""
    try:
        if any(one.compiled.functions.modules for one in planned):
            import pyspark.sql.pandas.functions  # noqa: F401
        if any(_has_expectations(one.compiled) for one in planned):
            import great_expectations.expectations.registry
            import great_expectations.validator.metric_configuration  # noqa: F401
    except Exception:  # noqa: BLE001 - the test that needs it imports it again and says why it fails
        pass


def _has_expectations(compiled: CompiledPipeline) -> bool:
    spec = compiled.spec
    return any(node.expectations for node in (*spec.steps.values(), *spec.outputs.values()))
