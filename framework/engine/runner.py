"""Run a compiled pipeline: plan it, then execute the plan in batch or streaming, and log the run.

What every run does around its driver (framework.engine.batch or framework.engine.streaming):
check that local inputs exist before Spark starts (bad input, exit 2), take the pipeline's run
lock, log the run's start at once (so a crashed run still shows up, with the time interval it
covers and the tables it plans to write) and its steps, outputs, quality results and end when it
finishes, whatever happened, then undo what the run left (views, caches, staging files).

A caller may hold the pipeline's lock itself (`concurrent`): the scheduler, which checks whether
an interval is still to run under the lock, and a parallel backfill, whose runs share it. Each
run adds its id to the caller's set and leaves it there when it ends, and recovery leaves the runs
named there alone: a run that ends while another run reads the run log would otherwise be gone
from the set before its end is in the log the other one read, and be logged as interrupted.
"""

from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from framework.compiler import CompiledPipeline, source_file_problems
from framework.engine import connect_server, preload
from framework.engine.batch import run_batch
from framework.engine.context import Reporter, RunContext, Silent
from framework.engine.events import EventLog, record_result
from framework.engine.failures import is_spark_error, one_line, spark_failure
from framework.engine.frames import Frames, static_frames
from framework.engine.lock import RunLock
from framework.engine.results import OutputStatus, RunResult, RunStatus, new_run_id
from framework.engine.streaming import KeptFrames, run_streaming
from framework.engine.transaction import definition_key, run_key
from framework.errors import BadInput, Problem, RunFailed, TributaryError
from framework.io.delta import DeltaStore, choose_store, local_store
from framework.io.locations import (
    EVENTS_TABLE,
    LOCKS_DIR,
    QUALITY_TABLE,
    QUARANTINE_TABLE,
    STAGING_DIR,
    Warehouse,
    is_uri,
)
from framework.io.sources import check_source_exists, holds_no_files
from framework.plan import RunPlan, plan_for, plan_run
from framework.profiles import Profile
from framework.quality.results import record as record_quality
from framework.spec.models import DeltaSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Columns the quarantine table gained after its first release, added to an older table before a run writes
QUARANTINE_ADDED_COLUMNS = {"line": "long", "expectation": "string"}


def run_pipeline(
    compiled: CompiledPipeline,
    profile: Profile,
    *,
    full_refresh: bool = False,
    continuous: bool = False,
    stop: threading.Event | None = None,
    reporter: Reporter | None = None,
    spark: SparkSession | None = None,
    concurrent: set[str] | None = None,
    limit: int | None = None,
    kept: KeptFrames | None = None,
    java_options: str = "",
) -> RunResult:
    """Run the pipeline's selected steps and outputs; raises BadInput or RunFailed on failure,
    with every output table at its previous version. With `limit`, a try: each source's first
    `limit` rows, in batch, into the scratch warehouse (framework.plan.model.Sample).

    concurrent: the caller holds the pipeline's run lock; this run adds its id to the set (and
    leaves it there), and recovery leaves the runs in it alone (see the module's docstring).
    kept: a stream's frames, built by the first run that gets it and used by the next ones
    (framework.engine.streaming.KeptFrames).
    java_options: for the driver's JVM when this run starts it (the class archive of the CLI's runs)."""
    started = time.perf_counter()
    check_interval(compiled)
    plan = plan_for(compiled, profile, full_refresh, limit)
    if continuous and plan.sample is not None:
        raise BadInput("--limit runs once over the first rows, as one batch; --continuous keeps a stream running: give one")
    refused, _ = source_file_problems(compiled, profile)  # at the source's line, as validate says it
    if refused:
        raise BadInput(*refused)
    check_inputs_exist(plan, profile, compiled.interval_sources)
    from framework.engine.session import default_log_file, guard, spark_log_file, spark_session

    run_id = new_run_id()
    if spark is None:  # this run may start the JVM: what it will import, meanwhile
        with preload.meanwhile([compiled]):
            spark = spark_session(profile, default_log_file().with_name(f"{plan.pipeline}-{run_id}.log"), java_options)
    guard(spark)
    compiled.functions.use(spark)
    store = choose_store(spark, profile.delta_writer, profile.storage_options)
    result = RunResult(run_id, plan.pipeline, store=store.name, log_file=spark_log_file(spark))
    if plan.sample is not None:
        result.limit, result.scratch = plan.sample.rows, plan.warehouse.root
    result.started_at = time.time() - (time.perf_counter() - started)  # Spark's start counts
    run = RunContext(compiled, plan, profile, spark, store, result, reporter or Silent(), continuous, stop or threading.Event())
    run.kept = kept
    if concurrent is not None:
        concurrent.add(run.run_id)
        run.siblings = concurrent
    drive = run_streaming if plan.streaming else run_batch
    if not plan.streaming:
        _fingerprint_inputs(run)
    events = EventLog(store, run.internal(EVENTS_TABLE), run.run_id, plan.pipeline)
    events.record("run_start", status=RunStatus.RUNNING, details=_start_details(run))
    events.flush()
    local = plan.warehouse.is_local()
    lock = (
        RunLock(Path(run.internal(f"{LOCKS_DIR}/{plan.pipeline}.lock")), run.run_id)
        if local and concurrent is None
        else nullcontext()
    )
    try:
        with run.cleanup, lock:
            run.on_exit(lambda: _remove_staging(run))
            # a quarantine written before records carried their line (or their expectation) gets the column
            store.ensure_columns(run.internal(QUARANTINE_TABLE), QUARANTINE_ADDED_COLUMNS)
            drive(run)
        result.status, result.exit_code = RunStatus.OK, 0
    except BaseException as e:  # noqa: BLE001 - recorded in the result, then raised again
        result.status = RunStatus.FAILED
        for output in result.outputs:
            if output.status == OutputStatus.PENDING:  # staged (or not even that): nothing reached its table
                output.status = OutputStatus.NOT_COMMITTED
        lost = connect_server.lost(spark)  # the call failed because its server stopped answering
        if lost is not None and not isinstance(e, KeyboardInterrupt):
            error: BaseException = RunFailed(lost)
        else:
            error = RunFailed(spark_failure(run, e)) if is_spark_error(e) else _as_run_error(e)
        result.error = one_line(error)
        result.exit_code = (
            error.exit_code if isinstance(error, TributaryError) else 130 if isinstance(error, KeyboardInterrupt) else 1
        )
        if isinstance(error, TributaryError):
            error.result = result
        raise error from (None if isinstance(e, TributaryError) else e)
    finally:
        result.duration_s = time.perf_counter() - started
        _record_quality(run)
        _record_events(run, events)
    return result


def plan_frames(compiled: CompiledPipeline, profile: Profile, spark: SparkSession) -> Frames:
    """Static DataFrames of every needed source and step, without writing anything (to evaluate or
    measure steps: their contexts are in `contexts`)."""
    plan = plan_run(compiled, Warehouse.of(compiled.project, profile))
    check_inputs_exist(plan, profile)
    from framework.engine.session import guard

    guard(spark)
    compiled.functions.use(spark)
    store = choose_store(spark, profile.delta_writer, profile.storage_options)
    run = RunContext(compiled, plan, profile, spark, store, RunResult(new_run_id(), plan.pipeline, store=store.name))
    return static_frames(run)


def check_interval(compiled: CompiledPipeline) -> None:
    """A run whose SQL or source paths read interval_start / interval_end, or whose outputs are
    sliced by interval, needs an interval (bad input, exit 2)."""
    sliced = [o for o in compiled.spec.outputs if compiled.spec.sliced_by(o)]
    if (compiled.uses_interval or sliced) and compiled.interval is None:
        steps = ", ".join(name for name, sql in compiled.sql.items() if sql.interval_used)
        readers = [f"step(s) {steps}"] if steps else []
        readers += [f"source(s) {', '.join(compiled.interval_sources)}"] if compiled.interval_sources else []
        readers += [f"output(s) {', '.join(sliced)} (sliced by interval)"] if sliced else []
        raise BadInput(
            compiled.loaded.problem(
                f"{'; '.join(readers)} read interval_start / interval_end, and this run has no time interval",
                ("name",),
                hint="pass --interval START/END (e.g. --interval 2026-11-01/2026-11-02), "
                "or add schedule: {cron: ...} to run the schedule's latest interval",
            )
        )


def check_inputs_exist(plan: RunPlan, profile: Profile, per_interval: tuple[str, ...] = ()) -> None:
    """Fail before Spark starts when a local source is missing (bad input, exit 2). A source whose
    path names the interval's files (`per_interval`) may not have landed yet: its run fails, and is
    retried like any failed run (exit 1, "waiting for ...")."""
    problems, waiting = [], []
    store = local_store(profile.storage_options)
    for source in plan.sources:
        if isinstance(source.spec, DeltaSource) and (is_uri(source.location) or profile.delta_writer == "spark"):
            continue
        try:
            check_source_exists(source.name, source.location, source.spec, store)
            if source.name in per_interval and holds_no_files(source.location):  # the folder made, its files not yet
                raise BadInput(Problem(f"source '{source.name}': no files at {source.location}"))
        except BadInput as e:
            if source.name in per_interval:
                waiting.append(f"{getattr(source.spec, 'path', None) or source.location} (source '{source.name}')")
            else:
                problems += e.problems
    if problems:
        raise BadInput(*problems)
    if waiting:
        raise RunFailed(
            f"waiting for {'; '.join(waiting)}: the interval's input has not landed; the scheduler retries the run "
            "(retries: in the schedule), or run it again when it is there"
        )


def show_rows(store: DeltaStore, table: str, limit: int) -> pa.Table:
    return store.query(table, f"SELECT * FROM t LIMIT {int(limit)}")


def _fingerprint_inputs(run: RunContext) -> None:
    """A batch run's key and its inputs' hash (framework.engine.transaction.run_key) before it
    starts, so its `run_start` names what it reads: a run killed after its commit, before logging
    its end, is then logged ok by the next one with the inputs it committed, and `tributary runs`
    does not take its interval for stale. Where the inputs cannot be listed now, the run computes
    them when it stages, and fails there if it must (with its end logged)."""
    try:
        run_key(run)
    except Exception:  # noqa: BLE001 - see the docstring
        run.key = run.result.inputs_key = None


def _start_details(run: RunContext) -> dict[str, object]:
    return {
        "profile": run.profile.name,
        "writer": run.store.name,
        "select": run.compiled.selected,
        "outputs": [o.name for o in run.plan.outputs],
        "vars": run.compiled.variables,
        "interval": run.compiled.interval.as_dict() if run.compiled.interval is not None else None,
        "tables": {o.name: o.table for o in run.plan.outputs},  # which tables this run may commit to
        "source_schemas": run.compiled.source_schemas,  # Parquet sources typed from their footers, Delta from their logs
        **({"limit": run.plan.sample.rows} if run.plan.sample is not None else {}),
        **({"inputs_key": run.result.inputs_key} if run.result.inputs_key is not None else {}),
        **({"definition_key": definition_key(run.compiled)} if run.compiled.interval is not None else {}),
    }


def _remove_staging(run: RunContext) -> None:
    from framework.io import staging as staging_files

    staging_files.remove_tree(run.internal(f"{STAGING_DIR}/{run.run_id}"))


def _record_quality(run: RunContext) -> None:
    """Every expectation's outcome, passed or failed, goes to <warehouse>/_tributary/quality."""
    if not run.quality.results:
        return
    try:
        record_quality(run.store, run.internal(QUALITY_TABLE), run.quality.results, run.run_id, run.pipeline)
    except Exception as e:  # as with the run log: the run's own error matters more
        if run.result.status is RunStatus.OK:
            run.result.status = RunStatus.FAILED
            raise RunFailed(f"the run finished but its quality results could not be written: {one_line(e)}") from e


def _record_events(run: RunContext, events: EventLog) -> None:
    record_result(events, run.result)
    try:
        events.flush()
    except Exception as e:  # the run's own outcome matters more than its log line
        if run.result.status is RunStatus.OK:
            raise RunFailed(f"the run finished but its events could not be written: {one_line(e)}") from e


def _as_run_error(error: BaseException) -> BaseException:
    if isinstance(error, (TributaryError, KeyboardInterrupt)):
        return error
    return RunFailed(one_line(error))
