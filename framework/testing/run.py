"""The tests a command line asks for, checked before any Spark starts, then run two at a time.

All tests are read and checked first (framework.testing.suite): a malformed test anywhere is bad
input (exit 2) before a JVM is waited for, and the problems of every test are said at once. Then
they run over one JVM; each test's outcome (passed, its differences, its failure) and its time are
kept for the summary and the JUnit report, in the order the tests are declared.

Why two at a time: a test's few rows leave Spark's cores idle most of its time, while the driver
plans, starts and stops streaming queries, writes checkpoints and commits. A second test runs in
those gaps: over the examples' tests, a warm engine's second run took 18.2 s instead of 32.6 s, a
cold one 49.3 s instead of 63.9 s (docs/testing.md). Each worker has a session of its own
(`newSession()`, as `backfill --parallel`): its temporary views (a step's frame is a view named
after the step: two tests of one pipeline would replace each other's), its SQL confs (TEST_CONF,
set on the workers' sessions only, so the caller's session is left as it was) and its udfs/.
The scenarios go first, the longest work. Spark Connect has no second session of a client
(`newSession`): there the tests run one by one on the session, its confs put back after.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from framework.compiler import CompiledPipeline
from framework.engine import preload
from framework.engine.jit import FIRST_TIER_ONLY
from framework.errors import BadInput, Problem
from framework.project_context import ProjectContext
from framework.testing.suite import DeclaredTest, check_test, declared_tests

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from framework.testing.batch import Outcome


#: Session settings for the time of the tests (on the workers' sessions; run one by one, on the
#: caller's, its own put back after):
#: a test's few rows need one task per stage (and one state store per stateful operator), and
#: adaptive execution only adds jobs to such plans: it runs each shuffle's map side as a job of its
#: own to re-plan what follows, 33 jobs (48 stages) for the example batch tests instead of 19 (32).
#: Neither changes a row of a result.
TEST_CONF = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false"}

#: tests running side by side (see the module's docstring); more than two gained nothing on 2 cores
TEST_WORKERS = 2

#: The JIT of a JVM started for the tests (`tributary test --no-engine`): its first tier only. Tests
#: run a few rows through many plans, so no code runs long enough for the second tier's optimised
#: compile to pay back, while its compiler threads take a core of two. Over the examples' tests, in
#: one process with the class archive: 33.5 s from the start of the JVM to the end of the tests,
#: against 44.7 s with both tiers (and 55.7 s without the archive). Results do not change: it is
#: the same code, compiled less.
TEST_JAVA_OPTIONS = FIRST_TIER_ONLY  # with a code cache that does not fill (framework.engine.jit)


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
    context = context.across(paths)
    chosen = {s.strip() for s in select.split(",") if s.strip()} if select else None
    found, problems, compiled_all = [], [], []
    for path in paths:
        about = context.for_pipeline(path)
        compiled = about.selecting(None).compiled
        compiled_all.append(compiled)
        tests = declared_tests(compiled.loaded, context.project.root)
        if chosen is not None:
            tests = [t for t in tests if t.name in chosen or t.spec.step in chosen]
        for test in tests:
            problems += check_test(compiled, test, context.project.root)
        if tests:
            found.append(PipelineTests(about, compiled, tests))
    problems += context.vars_none_has(compiled_all)
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


def run_tests(planned: list[PipelineTests], progress: Callable[[Outcome], None], java_options: str = "") -> TestRun:
    """Run the tests over one JVM, TEST_WORKERS at a time; `progress` hears each outcome as it
    comes (from the worker that ran it, one at a time). A JVM started here gets `java_options` (the
    class archive's) and TEST_JAVA_OPTIONS; a running one (a warm engine's) is used as it is."""
    from framework.engine.session import guard, spark_session

    began = time.perf_counter()
    with preload.meanwhile(one.compiled for one in planned):  # while the JVM starts
        spark = spark_session(planned[0].context.profile, java_options=f"{java_options} {TEST_JAVA_OPTIONS}".strip())
    guard(spark)
    tests = [(one, test) for one in planned for test in one.tests]
    outcomes: dict[int, Outcome] = {}
    heard = threading.Lock()

    def run(index: int, session: SparkSession) -> Outcome:
        one, test = tests[index]
        return _run_one(one, test, session)

    def report(index: int, outcome: Outcome) -> None:
        with heard:
            outcomes[index] = outcome
            progress(outcome)

    order = sorted(range(len(tests)), key=lambda i: tests[i][1].spec.then is None)  # scenarios first
    workers = min(TEST_WORKERS, len(tests))
    with _scenario_folders(planned):
        if workers > 1 and hasattr(spark, "newSession"):
            _side_by_side(spark, order, run, report, workers)
        else:
            with _test_settings(spark):
                for index in order:
                    report(index, run(index, spark))
    return TestRun([outcomes[i] for i in sorted(outcomes)], time.perf_counter() - began)


@contextmanager
def _scenario_folders(planned: list[PipelineTests]) -> Iterator[None]:
    """While the tests run; after them, the folders above the scenarios' own that were not there
    before (`.tributary/scratch/tests` and up) are removed again, when empty. Here and not in each
    scenario: side by side, a scenario that starts while another runs finds them made, and one
    that ends first cannot know whether the other still needs them."""
    from framework.testing.stream import scenarios_folder

    roots = {scenarios_folder(one.context) for one in planned if any(t.spec.then is not None for t in one.tests)}
    made = {folder for root in roots if root is not None for folder in (root, *root.parents) if not folder.exists()}
    try:
        yield
    finally:
        for folder in sorted(made, key=lambda f: len(f.parts), reverse=True):  # the deepest first
            with suppress(OSError):  # not empty: something else is there now, and stays
                folder.rmdir()


def _run_one(one: PipelineTests, test: DeclaredTest, spark: SparkSession) -> Outcome:
    from framework.testing.batch import run_test
    from framework.testing.stream import run_scenario

    one.compiled.functions.use(spark)  # once per session (framework.functions.loader)
    run_one = run_scenario if test.spec.then is not None else run_test
    return run_one(one.context, one.compiled, test, spark)


def _side_by_side(
    spark: SparkSession,
    order: list[int],
    run: Callable[[int, SparkSession], Outcome],
    report: Callable[[int, Outcome], None],
    workers: int,
) -> None:
    """`run` each test on one of `workers` threads, each with a session of its own over `spark`'s
    JVM, and `report` its outcome; their jobs in the caller's job group (a warm engine cancels a
    run's jobs by it). On Ctrl-C: no test starts, the running ones' jobs are cancelled and their
    queries stopped, and they are not reported (a failure under a cancel is not the test's own)."""
    from framework.engine.session import guard

    context = spark.sparkContext
    group = context.getLocalProperty("spark.jobGroup.id")
    local = threading.local()
    sessions: list[SparkSession] = []
    stopping = threading.Event()

    def work(index: int) -> None:
        if stopping.is_set():
            return
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = spark.newSession()
            sessions.append(session)
            guard(session)
            for key, value in TEST_CONF.items():
                session.conf.set(key, value)
            if group is not None:
                context.setJobGroup(group, "tributary test", interruptOnCancel=True)
        outcome = run(index, session)
        if not stopping.is_set():
            report(index, outcome)

    pool = ThreadPoolExecutor(workers, thread_name_prefix="tributary-test")
    futures = [pool.submit(work, i) for i in order]
    try:
        pending = set(futures)
        while pending:  # woken twice a second: a Ctrl-C (a warm engine's too) is heard at once
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
            for done in finished:
                done.result()  # a test's own failure is its outcome: this raises only what went wrong here
    except BaseException:
        stopping.set()
        pool.shutdown(wait=False, cancel_futures=True)
        while True:  # until the running tests give up: a scenario cancelled between two of its
            # runs starts the next one, whose jobs and queries are then stopped as they come
            if group is not None:
                context.cancelJobGroup(group)
            else:
                context.cancelAllJobs()
            for session in sessions:
                for query in session.streams.active:
                    query.stop()
            if all(f.done() for f in futures):  # done: run, or never started (cancelled)
                break
            time.sleep(0.2)
        raise
    finally:
        pool.shutdown(wait=True)


@contextmanager
def _test_settings(spark: SparkSession) -> Iterator[None]:
    """TEST_CONF on `spark` while the tests run one by one on it, its own settings put back after."""
    before = {key: spark.conf.get(key, None) for key in TEST_CONF}
    for key, value in TEST_CONF.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, own in before.items():
            if own is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, own)
