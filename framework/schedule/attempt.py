"""One attempt at a due run, made in this process, under the pipeline's lock, logged.

Runs are made in this process, one after another, on one SparkSession: a JVM start costs
several seconds on a small machine (most of a small pipeline's run), and consecutive runs of one
profile need nothing a fresh JVM would give them (each run drops its views and caches, and
`udfs/` is re-imported when its files change). The session is replaced when its JVM died.

A run is abandoned at its `timeout:`, or when the scheduler is stopped (SIGTERM, Ctrl-C), by
cancelling its Spark jobs, which run in a job group of their own (a job that starts later is
cancelled too, every half second), and stopping its streaming queries (on Spark Connect: by
interrupting its operations on the server, and letting go of a server that does not answer:
`Abandon`). The run then fails at its next Spark action, before its commits, and every table
stays as it was. A task that ignores the
interrupt (Java code such as a slow regex) would hold its core for every later run, which then
timed out too: when one still runs a grace period after the run, the session's JVM is ended and
the next run starts a new one (framework.engine.leftover_tasks). Its Delta commits are not
Spark work: a commit already under way finishes, and what a run killed between two commits
leaves is undone by the pipeline's next run (framework.engine.recovery). A subprocess per run
could be killed outright, but would start a JVM for every run.

Under the lock, the attempt first asks the run log again whether its interval is done: another
scheduler (a second crontab line) may have run it meanwhile. Then, before any Spark, it checks
the freshness its sources declare (framework.quality.freshness): a source past its error_after
fails the attempt with exit 1 and the stale source as its error (a try used, retried after the
retry wait: the data may still come); past warn_after, it says so and runs. Either way each
declared source's age is logged as the run's `freshness` event (`runs`, the HTML report). A pipeline whose spec no longer
validates fails with exit 2, logged like any run (run_start, run_end, and the attempt's
`schedule` event), and uses up a try.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext, suppress
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from framework import cluster_auth
from framework.engine import leftover_tasks
from framework.engine.context import quietly
from framework.engine.events import EventLog
from framework.engine.failures import one_line
from framework.engine.lock import LockBusy, RunLock, lock_file
from framework.engine.results import RunResult, RunStatus, new_run_id
from framework.errors import BadInput, TributaryError
from framework.io.delta import local_store
from framework.io.locations import EVENTS_TABLE, Warehouse
from framework.profiles import Profile
from framework.project import Project
from framework.project_context import ProjectContext
from framework.quality.freshness import ERROR, WARN, SourceAge, pipeline_ages, worst
from framework.schedule import alerts
from framework.schedule.clock import Clock
from framework.schedule.due import Due
from framework.schedule.history import ABANDONED, FAILED, FAILURES, INVALID, OK, SCHEDULE, TIMED_OUT, RunLog, Slot

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: what an attempt came to when it made no run
BUSY, ALREADY_DONE = "busy", "already done"


class StaleInput(Exception):
    """A source is past its freshness error_after: the attempt fails before it starts Spark."""


class Say(Protocol):
    def __call__(self, line: str) -> None: ...


class Sessions:
    """The SparkSession consecutive runs share: started by the first run that needs one (a
    pipeline that fails validation needs none), replaced when its JVM died."""

    def __init__(self, profile: Profile, given: SparkSession | None = None, started: Callable[[], Any] | None = None):
        """`started`: called after a session starts here (Spark installs its own SIGINT handler)."""
        self.profile, self.given, self.session, self.started = profile, given, given, started

    def get(self) -> SparkSession:
        if self.session is not None and not _alive(self.session, self.profile):
            self.close()
            self.given = None  # a session handed in whose JVM died is not handed out again
        if self.session is None:
            from framework.engine.session import spark_session

            self.session = self.given or spark_session(self.profile)
            if self.started is not None:
                self.started()
        return self.session

    def end_stuck(self) -> None:
        """The session's JVM runs a task that cannot be stopped: end the JVM, so the next run gets
        a new one with free cores."""
        from framework.engine import session

        leftover_tasks.end_jvm()
        session.started_here = None
        self.session = self.given = None

    def close(self) -> None:
        """Stop a session started here (one handed in belongs to its caller)."""
        if self.session is not None and self.session is not self.given:
            from framework.engine.session import stop_started_session

            stop_started_session()
        self.session = None


def _alive(spark: SparkSession, profile: Profile) -> bool:
    if profile.spark.remote:
        return not spark.is_stopped  # type: ignore[attr-defined]  # Abandon closed a stuck server's client
    try:
        return not spark.sparkContext._jsc.sc().isStopped()  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - a dead JVM answers with any error
        return False


#: on Spark Connect: how long an abandoned run gets to end once its operations were interrupted,
#: before the client lets go of a server that does not answer
CONNECT_ANSWER_S = 10.0


class Abandon(AbstractContextManager["Abandon"]):
    """Cancels a run's Spark work once its time is up or the scheduler stops (module docstring).

    On Spark Connect the run's operations are interrupted on the server. A server that stopped
    answering (a frozen process, a network dropping its packets) answers neither the run nor the
    interrupt, and the run waited for ever inside gRPC: if the run still runs `CONNECT_ANSWER_S`
    later, the client's connection is closed, which ends every call waiting on it, and the
    session is replaced for the next run."""

    def __init__(self, spark: SparkSession, timeout_s: float | None, stopping: threading.Event):
        self.spark, self.timeout_s, self.stopping = spark, timeout_s, stopping
        self.group = f"tributary-{uuid.uuid4().hex[:12]}"
        self.reason: str | None = None  # "timeout" | "stop"
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="tributary-abandon", daemon=True)
        self._interrupting: threading.Thread | None = None  # Spark Connect: the interrupt under way
        self._interrupted_at = 0.0  # ... and when it was sent
        self.let_go = False  # Spark Connect: the server did not answer the interrupt; its client was closed

    def __enter__(self) -> Abandon:
        with suppress(Exception):  # Spark Connect has no SparkContext here: _cancel interrupts all instead
            self.spark.sparkContext.setJobGroup(self.group, "tributary scheduled run", interruptOnCancel=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        with suppress(Exception):
            self.spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]

    def _watch(self) -> None:
        deadline = time.monotonic() + self.timeout_s if self.timeout_s else None
        while not self._done.is_set():
            if self.reason is None:
                if self.stopping.is_set():
                    self.reason = "stop"
                elif deadline is not None and time.monotonic() >= deadline:
                    self.reason = "timeout"
            if self.reason is not None:
                self._cancel()
            self._done.wait(0.5 if self.reason else 0.1)

    def _cancel(self) -> None:
        try:
            context = self.spark.sparkContext
        except Exception:  # noqa: BLE001 - Spark Connect: no SparkContext in this process
            self._cancel_on_connect()
            return
        with suppress(Exception):  # a JVM that died has nothing left to cancel
            context.cancelJobGroup(self.group)
        with suppress(Exception):  # a query may stop by itself meanwhile
            for query in self.spark.streams.active:
                query.stop()

    def _cancel_on_connect(self) -> None:
        """Interrupt the session's operations, again every half second as the server answers (an
        operation may start later), each time from a thread of its own (a call to a server that
        does not answer never returns); close the client when an interrupt goes unanswered for
        `CONNECT_ANSWER_S`. Streams do not run on Spark Connect."""
        if self._interrupting is None or not self._interrupting.is_alive():  # the server answered the last one
            self._interrupted_at = time.monotonic()
            interrupt = partial(quietly, self.spark.interruptAll)
            self._interrupting = threading.Thread(target=interrupt, name="tributary-interrupt", daemon=True)
            self._interrupting.start()
        elif time.monotonic() - self._interrupted_at >= CONNECT_ANSWER_S and not self.let_go:
            self.let_go = True
            quietly(self.spark.client.close)  # type: ignore[attr-defined]


@dataclass
class Attempted:
    """What an attempt came to."""

    due: Due
    outcome: str  # history's OK, FAILED, INVALID, TIMED_OUT, ABANDONED; or BUSY, ALREADY_DONE
    trigger: str = SCHEDULE
    run_id: str | None = None
    result: RunResult | None = None
    error: str | None = None
    exit_code: int | None = None
    seconds: float = 0.0
    alert: dict[str, Any] | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    freshness: list[SourceAge] = field(default_factory=list)  # the declared sources' ages before the run

    @property
    def ran(self) -> bool:
        return self.outcome not in (BUSY, ALREADY_DONE)


@dataclass
class Attempts:
    """What every attempt of one scheduler or backfill shares."""

    context: ProjectContext  # the project, profile and vars every run compiles with
    clock: Clock
    sessions: Sessions
    stopping: threading.Event
    say: Say

    @property
    def project(self) -> Project:
        return self.context.project

    @property
    def profile(self) -> Profile:
        return self.context.profile

    @property
    def warehouse(self) -> Warehouse:
        return self.context.warehouse()

    @property
    def runlog(self) -> RunLog:
        return RunLog(local_store(self.profile.storage_options), self.warehouse.internal(EVENTS_TABLE))

    def lock(self, name: str, holder: str) -> AbstractContextManager[Any]:
        warehouse = self.warehouse
        return RunLock(lock_file(warehouse, name), holder) if warehouse.is_local() else nullcontext()

    def attempt(
        self,
        due: Due,
        trigger: str = SCHEDULE,
        *,
        spark: SparkSession | None = None,
        concurrent: set[str] | None = None,
        final: bool | None = None,
    ) -> Attempted:
        """Make the run. `concurrent`: the caller holds the pipeline's lock (a backfill), else it
        is taken here; `spark`: the session to run on (default: the shared one); `final`: whether
        a failure is the last try (default: the schedule's retries say)."""
        pipeline = due.pipeline
        if concurrent is None:
            try:
                with self.lock(pipeline.name, f"scheduler-{os.getpid()}"):
                    slot = self.runlog.slots(pipeline.name, pipeline.streaming).get(due.key)
                    if slot is not None and slot.done:
                        self.close_committed(slot)
                        return Attempted(due, ALREADY_DONE, trigger)
                    return self._run(due, trigger, spark, set(), final)
            except LockBusy as e:
                return Attempted(due, BUSY, trigger, error=str(e))
        return self._run(due, trigger, spark, concurrent, final)

    def _run(self, due: Due, trigger: str, spark: SparkSession | None, concurrent: set[str], final: bool | None) -> Attempted:
        pipeline, schedule = due.pipeline, due.pipeline.schedule
        began, started_at = time.perf_counter(), self.clock.now()
        done = Attempted(due, OK, trigger)
        try:
            about = self.context.for_pipeline(pipeline.path)
            compiled = about.compile(interval=due.interval)
            done.freshness = pipeline_ages(
                self.project, self.warehouse, compiled.spec, self.clock.now(), self.profile.storage_options or None
            )
            for age in done.freshness:
                if age.status == WARN:
                    self.say(f"{pipeline.name} {due.label()}: warning: {age.line}")
            stale = [age for age in done.freshness if age.status == ERROR]
            if stale:
                raise StaleInput("stale input: " + "; ".join(age.line for age in stale))
            session = spark or self.sessions.get()
            with Abandon(session, schedule.timeout, self.stopping) as watch:
                try:
                    done.result = about.run(compiled, spark=session, concurrent=concurrent)
                    done.run_id, done.exit_code = done.result.run_id, 0
                except TributaryError as e:
                    done.result, done.exit_code, done.error = e.result, e.exit_code, one_line(e)
                    done.run_id = e.result.run_id if e.result is not None else None
                    done.outcome = INVALID if isinstance(e, BadInput) else FAILED
            if watch.let_go:  # what the run failed with is the closed connection's gRPC text
                done.error = (
                    f"the Spark Connect server at {cluster_auth.shown_url(str(self.profile.spark.remote))} answered "
                    f"neither the run nor its interrupt for {CONNECT_ANSWER_S:g} s; the run let go of it"
                )
            reason = watch.reason or ("stop" if self.stopping.is_set() else None)  # a run may fail before the watch looks
            if reason is None and schedule.timeout is not None and time.perf_counter() - began >= schedule.timeout:
                reason = "timeout"
            if reason == "timeout" and (done.outcome != OK or pipeline.streaming):
                done.outcome = TIMED_OUT
                done.error = f"timed out after {schedule.timeout:g} s (timeout: in the schedule); {done.error or 'its queries were stopped'}"
            elif reason == "stop" and (done.outcome != OK or pipeline.streaming):
                done.outcome, done.error = (
                    ABANDONED,
                    f"abandoned: stopped (SIGTERM or Ctrl-C); {done.error or 'its queries were stopped'}",
                )
            if spark is None and not _alive(session, self.profile):
                self.sessions.close()  # its JVM died: the next run starts a new one
            elif spark is None and (reason is not None or done.outcome != OK) and leftover_tasks.wait_until_stopped(session):
                self.say(f"{pipeline.name}: a cancelled Spark task would not stop; starting a new Spark session for the next run")
                self.sessions.end_stuck()
        except StaleInput as e:  # a failure like any other: retried, the data may come
            done.outcome, done.exit_code, done.error = FAILED, 1, str(e)
        except BadInput as e:  # the spec no longer validates, or the run could not start (a source is missing)
            done.outcome, done.exit_code, done.error = INVALID, e.exit_code, one_line(e)
        except Exception as e:  # noqa: BLE001 - whatever went wrong, the scheduler logs it and goes on
            done.outcome, done.exit_code, done.error = FAILED, 1, one_line(e)
        done.seconds = time.perf_counter() - began
        if done.run_id is None:  # no run was logged: log one, so the history shows the failed run
            done.run_id = new_run_id()
            try:
                self._log_unstarted(due, done)
            except Exception as e:  # noqa: BLE001 - as with the attempt's own event below
                self.say(f"warning: could not log the failed run of {due.pipeline.name}: {one_line(e)}")
        last_try = final if final is not None else due.attempt >= schedule.retries.count + 1
        done.summary = _summary(due, done, started_at, self.clock.now(), schedule.retries.count + 1)
        if trigger == SCHEDULE:
            command = (
                schedule.on_success
                if done.outcome == OK
                else schedule.on_failure
                if done.outcome in FAILURES and last_try
                else None
            )
            if command is not None:
                done.alert = alerts.send(command, done.summary, self.project.root)
        self._log_attempt(due, done, started_at)
        return done

    def close_committed(self, slot: Slot) -> None:
        """Log the end of the slot's runs that were killed after committing everything (the
        caller holds the pipeline's lock, so none of them is still going), as the pipeline's
        next run would (framework.engine.recovery): `tributary runs` then shows them ok."""
        if not self.warehouse.is_local():
            return
        for run in slot.runs:
            if run.status == RunStatus.INCOMPLETE and run.tables and self.runlog.done(run):
                events = EventLog(
                    local_store(self.profile.storage_options), self.warehouse.internal(EVENTS_TABLE), run.run_id, run.pipeline
                )
                events.record("run_end", status=RunStatus.OK, error="the process ended before the run finished")
                events.flush()

    def _log_unstarted(self, due: Due, done: Attempted) -> None:
        events = EventLog(
            local_store(self.profile.storage_options), self.warehouse.internal(EVENTS_TABLE), done.run_id or "", due.pipeline.name
        )
        interval = due.interval.as_dict() if due.interval is not None else None
        events.record("run_start", status=RunStatus.RUNNING, details={"interval": interval, "tables": {}, "scheduled": True})
        events.record(
            "run_end", status=RunStatus.FAILED, duration_s=done.seconds, error=done.error, details={"exit_code": done.exit_code}
        )
        events.flush()

    def _log_attempt(self, due: Due, done: Attempted, started_at: datetime) -> None:
        """The attempt's `schedule` event: what framework.schedule.history reads back."""
        events = EventLog(
            local_store(self.profile.storage_options), self.warehouse.internal(EVENTS_TABLE), done.run_id or "", due.pipeline.name
        )
        if done.freshness:
            events.record(
                "freshness",
                status=worst(done.freshness),
                error="; ".join(a.line for a in done.freshness if a.status != "ok") or None,
                details={"sources": [a.as_dict() for a in done.freshness]},
            )
        events.record(
            "schedule",
            status=done.outcome,
            duration_s=done.seconds,
            error=done.error,
            details={
                "trigger": done.trigger,
                "interval": due.interval.as_dict() if due.interval is not None else None,
                "fire": due.fire.isoformat(),
                "attempt": due.attempt,
                "exit_code": done.exit_code,
                "due_at": due.at.isoformat(),
                "started_at": started_at.isoformat(),
                "finished_at": self.clock.now().isoformat(),
                **({"alert": done.alert} if done.alert else {}),
            },
        )
        try:
            events.flush()
        except Exception as e:  # noqa: BLE001 - the run is done; its next attempt decides from the log anyway
            self.say(f"warning: could not log the attempt of {due.pipeline.name}: {one_line(e)}")


def _summary(due: Due, done: Attempted, started: datetime, finished: datetime, tries: int) -> dict[str, Any]:
    """The run as an alert command reads it (JSON on its stdin)."""
    result = done.result
    return {
        "pipeline": due.pipeline.name,
        "pipeline_file": due.pipeline.shown,
        "run_id": done.run_id,
        "status": done.outcome,
        "exit_code": done.exit_code,
        "error": done.error,
        "trigger": done.trigger,
        "interval": due.interval.as_dict() if due.interval is not None else None,
        "fire": due.fire.isoformat(),
        "attempt": due.attempt,
        "attempts_allowed": tries,
        "started_at": started.isoformat(),
        "finished_at": finished.isoformat(),
        "duration_s": round(done.seconds, 3),
        "outputs": [
            {"name": o.name, "table": o.table, "mode": o.mode, "status": str(o.status), "rows": o.rows, "version": o.version}
            for o in (result.outputs if result is not None else [])
            if not o.name.startswith("_")
        ],
        "freshness": [a.as_dict() for a in done.freshness],
        "host": socket.gethostname(),
        "spark_log": result.log_file if result is not None else None,
    }


def stop_on_signals(stopping: threading.Event) -> dict[int, Any]:
    """SIGTERM and SIGINT set `stopping`: the run under way is abandoned (Abandon), no new one starts."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {signum: signal.signal(signum, lambda *_: stopping.set()) for signum in (signal.SIGTERM, signal.SIGINT)}


def restore_signals(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def describe(done: Attempted) -> str:
    """One line for the scheduler's output."""
    name, due = done.due.pipeline.name, done.due
    head = f"{name} {due.label()}" + (f" (attempt {due.attempt})" if due.attempt > 1 else "")
    if done.outcome == BUSY:
        return f"{head}: another run of {name} holds its lock; trying again later"
    if done.outcome == ALREADY_DONE:
        return f"{head}: already committed"
    text = f"{head}: {done.outcome} in {done.seconds:.1f}s"
    result = done.result
    if done.outcome == OK and result is not None:
        written = sum(o.rows or 0 for o in result.outputs if str(o.status) == "written" and not o.name.startswith("_"))
        versions = ", ".join(
            f"{o.name} v{o.version}" for o in result.outputs if o.version is not None and not o.name.startswith("_")
        )
        text += f", {written:,} rows" + (f" ({versions})" if versions else "")
    elif done.error:
        text += f" (exit {done.exit_code}): {done.error}"
    if done.alert is not None:
        alert = done.alert
        text += "; alert sent" if alert.get("exit_code") == 0 else f"; alert failed: {alert.get('error')}"
    return text
