"""What was run, per pipeline and time interval: the run log read back, checked against Delta.

Sources of truth, in order: a run's commits in its output tables (Delta), then the run log
(<warehouse>/_tributary/events: `run_start` names a run's interval and the tables it may commit
to, `run_end` its status, and a `schedule` event the scheduler's view of each attempt: trigger,
attempt number, outcome, exit code, and the time on the scheduler's clock when it ended).

An interval is *done* when a run of it ended ok, or when a run of it has no end in the log (its
process was killed) but every table it planned holds its commit, not undone by a RESTORE: it
was killed after committing, before logging its end. A run killed between its commits is not
done, and its interval is not done while that run is its last, even after an earlier run of it
ended ok (the tables disagree): its next run undoes the partial commit
(framework.engine.recovery) and commits it whole.
No side file is kept, so nothing here can disagree with the tables.

A streaming run has no interval: a scheduled one is filed under the fire it answered, from its
`schedule` event (its exactly-once comes from its checkpoints, not from this).

Read with delta-rs; no JVM.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from framework.engine.events import EVENT_SCHEMA
from framework.engine.results import OutputStatus, RunStatus
from framework.io.delta.base import DeltaStore
from framework.project_context import ProjectContext
from framework.spec.intervals import Interval

#: what a scheduler's attempt came to (the `schedule` event's status)
OK, FAILED, INVALID, TIMED_OUT, ABANDONED = "ok", "failed", "invalid", "timed out", "abandoned"
#: outcomes that use up one of the schedule's tries (abandoned: the scheduler was stopped)
FAILURES = frozenset({FAILED, INVALID, TIMED_OUT})
#: `schedule` events say who asked for the run
SCHEDULE, BACKFILL = "schedule", "backfill"

_EPOCH = datetime.fromtimestamp(0, UTC)
_EVENTS = ("run_start", "run_end", "output_end", "schedule", "capacity", "freshness")


@dataclass
class RunRecord:
    """One run of a pipeline as the log tells it."""

    run_id: str
    pipeline: str
    started: datetime | None = None  # wall clock of its run_start (UTC)
    interval: Interval | None = None
    tables: dict[str, str] = field(default_factory=dict)  # output -> table the run planned to commit to
    status: str = RunStatus.INCOMPLETE  # run_end's status; incomplete while it has none
    duration_s: float | None = None
    error: str | None = None
    exit_code: int | None = None
    rows: int = 0  # rows it committed
    versions: dict[str, int] = field(default_factory=dict)  # output -> version it committed
    attempt: dict[str, Any] | None = None  # its `schedule` event's details (scheduler, backfill)
    outcome: str | None = None  # its `schedule` event's status
    state: list[str] = field(default_factory=list)  # window steps: state predicted → observed
    freshness: str | None = None  # its sources' freshness before it ran, when one was stale (scheduler)
    inputs_key: str | None = None  # a hash of its inputs' fingerprint (framework.engine.transaction.inputs_key)
    definition_key: str | None = None  # a hash of what it computed (framework.engine.transaction.definition_key)

    @property
    def trigger(self) -> str | None:
        return self.attempt.get("trigger") if self.attempt else None

    @property
    def fire(self) -> datetime | None:
        fire = (self.attempt or {}).get("fire")
        return datetime.fromisoformat(fire) if fire else None

    @property
    def finished_at(self) -> datetime | None:
        """When the attempt ended on the clock of the scheduler that made it."""
        at = (self.attempt or {}).get("finished_at")
        return datetime.fromisoformat(at) if at else None

    @property
    def shown_status(self) -> str:
        """What `tributary runs` says: the scheduler's word where it has one (timed out, abandoned)."""
        if self.outcome in (TIMED_OUT, ABANDONED, INVALID):
            return self.outcome
        return self.status

    @property
    def exit(self) -> int | None:
        if self.exit_code is not None:
            return self.exit_code
        code = (self.attempt or {}).get("exit_code")
        return int(code) if code is not None else (0 if self.status == RunStatus.OK else None)


@dataclass
class Slot:
    """An interval (or, streaming, a fire) and the runs made for it, oldest first."""

    runs: list[RunRecord] = field(default_factory=list)
    done: bool = False

    def failures(self, trigger: str = SCHEDULE) -> list[RunRecord]:
        """Attempts of `trigger` that failed (the scheduler's retries count these)."""
        return [r for r in self.runs if r.trigger == trigger and r.outcome in FAILURES]

    @property
    def scheduled(self) -> bool:
        """Whether the scheduler started it (or some run of it was cut off before logging its end)."""
        return any(r.trigger == SCHEDULE or r.status == RunStatus.INCOMPLETE for r in self.runs)

    @property
    def last(self) -> RunRecord:
        return self.runs[-1]


class RunLog:
    """The run log of one warehouse, read for the scheduler and `tributary runs`."""

    def __init__(self, store: DeltaStore, table: str):
        self.store, self.table = store, table

    def runs(self, pipelines: Iterable[str] | None = None) -> list[RunRecord]:
        """Every run of the pipelines (all when None), oldest first."""
        where = f"event IN ({', '.join(_quoted(e) for e in _EVENTS)})"
        names = sorted(set(pipelines)) if pipelines is not None else None
        if names is not None:
            if not names:
                return []
            where += f" AND pipeline IN ({', '.join(_quoted(n) for n in names)})"
        columns = ", ".join(EVENT_SCHEMA.names)
        rows = self.store.query(self.table, f"SELECT {columns} FROM t WHERE {where} ORDER BY ts").to_pylist()
        return _assemble(rows)

    def slots(self, pipeline: str, streaming: bool = False) -> dict[Any, Slot]:
        """The pipeline's runs by interval (streaming: by the fire a scheduled run answered), each
        with whether it is done (see the module's docstring)."""
        found: dict[Any, Slot] = defaultdict(Slot)
        for run in self.runs([pipeline]):
            key = run.fire if streaming else run.interval
            if key is not None:
                found[key].runs.append(run)
        for slot in found.values():
            slot.done = any(self.done(run, streaming) for run in slot.runs) and not (
                not streaming and self.half_committed(slot.last)
            )
        return dict(found)

    def half_committed(self, run: RunRecord) -> bool:
        """A run killed between its commits: some of its tables hold its commit, others do not.
        Its interval is not done, whatever ran before it: the tables disagree until a run of it
        undoes the partial commit (framework.engine.recovery) and commits it whole."""
        if run.status != RunStatus.INCOMPLETE or not run.tables:
            return False
        held = [self.store.holds_run(table, run.run_id) for table in run.tables.values()]
        return any(held) and not all(held)

    def done(self, run: RunRecord, streaming: bool = False) -> bool:
        """Whether the run committed its interval (see the module's docstring)."""
        if streaming:
            return run.outcome == OK
        if run.status == RunStatus.OK:
            return True
        if run.status != RunStatus.INCOMPLETE or not run.tables:
            return False
        return all(self.store.holds_run(table, run.run_id) for table in run.tables.values())


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _assemble(rows: list[dict[str, Any]]) -> list[RunRecord]:
    runs: dict[str, RunRecord] = {}
    for row in rows:
        run = runs.get(row["run_id"])
        if run is None:
            run = runs[row["run_id"]] = RunRecord(row["run_id"], row["pipeline"])
        details = _json(row["details"])
        event = row["event"]
        if event == "run_start":
            run.started = row["ts"]
            if details.get("interval"):
                run.interval = Interval.from_dict(details["interval"])
            run.tables = dict(details.get("tables") or {})
            run.inputs_key = details.get("inputs_key")  # a batch run's inputs as it started
            run.definition_key = details.get("definition_key")  # what it computed (spec, SQL, vars, udfs/)
        elif event == "run_end":
            run.status, run.duration_s, run.error = row["status"], row["duration_s"], row["error"]
            if details.get("exit_code") is not None:
                run.exit_code = int(details["exit_code"])
            run.inputs_key = details.get("inputs_key") or run.inputs_key
        elif event == "output_end" and row["status"] == OutputStatus.WRITTEN:
            run.rows += row["rows"] or 0
            if row["version"] is not None and not str(row["name"]).startswith("_"):
                run.versions[row["name"]] = row["version"]
        elif event == "schedule":
            run.attempt, run.outcome = details, row["status"]
            run.error = row["error"] or run.error  # the scheduler's word: timed out, abandoned
            if run.started is None:
                run.started = row["ts"]
        elif event == "freshness":
            run.freshness = f"{row['status']}: {row['error']}" if row["error"] else row["status"]
        elif event == "capacity":
            from framework.integration.capacity import Figures

            run.state.append(Figures.from_dict(details).headline())
    return sorted(runs.values(), key=lambda r: r.started or _EPOCH)


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def run_history(
    context: ProjectContext, pipeline: str | None, failed_only: bool, limit: int, scratch: bool
) -> tuple[str, dict[str, list[dict[str, Any]]]]:
    """`tributary runs`: the run log read, and its rows per pipeline (history_rows)."""
    from framework.io.delta import local_store

    table = context.events_table(scratch)
    runlog = RunLog(local_store(context.profile.storage_options), table)
    records = runlog.runs([pipeline] if pipeline else None)
    stale = set() if scratch else stale_intervals(context, records, limit, runlog)
    return table, history_rows(records, failed_only=failed_only, limit=limit, stale=stale)


def stale_intervals(context: ProjectContext, runs: list[RunRecord], limit: int, runlog: RunLog) -> set[tuple[str, Interval]]:
    """(pipeline, interval) of the `limit` committed intervals run last per scheduled pipeline whose
    inputs or definition changed since their commit: the fingerprint of the files or tables the
    interval reads now (its source paths rendered for it), or the hash of what a run of it would
    compute now (spec, SQL, vars, udfs/), differs from the one its last committing run recorded
    (a run that ended ok, or one killed after committing: `RunLog.done`). No JVM."""
    from framework.engine.transaction import definition_key, input_fingerprint, inputs_key
    from framework.errors import TributaryError
    from framework.io.delta import local_store
    from framework.plan import plan_for
    from framework.schedule.pipelines import scheduled_pipelines

    committed: dict[str, dict[Interval, RunRecord]] = defaultdict(dict)
    attempts: dict[tuple[str, Interval], list[RunRecord]] = defaultdict(list)
    for run in runs:  # oldest first: the last ok run of each interval wins
        if run.interval is not None:
            attempts[(run.pipeline, run.interval)].append(run)
        if run.interval is not None and run.inputs_key and runlog.done(run):
            committed[run.pipeline][run.interval] = run
    if not committed:
        return set()
    store = local_store(context.profile.storage_options)
    found: set[tuple[str, Interval]] = set()
    pipelines, _ = scheduled_pipelines(context.project, sorted(committed))
    for pipeline in pipelines:
        about = context.for_pipeline(pipeline.path)
        # the rows `runs` shows: the intervals run most recently (history_rows), not the latest ones
        shown = sorted(
            committed.get(pipeline.name, {}).items(), key=lambda item: _newest(attempts[(pipeline.name, item[0])]), reverse=True
        )
        newest = shown[:limit]
        for interval, run in newest:
            try:
                compiled = about.compile(interval=interval)
                plan = plan_for(compiled, context.profile)
            except TributaryError:  # the pipeline does not validate now: `validate` says why
                break
            redefined = run.definition_key is not None and definition_key(compiled) != run.definition_key
            if redefined or inputs_key(input_fingerprint(plan, store)) != run.inputs_key:
                found.add((pipeline.name, interval))
    return found


def history_rows(
    runs: list[RunRecord], failed_only: bool = False, limit: int = 20, stale: set[tuple[str, Interval]] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """`tributary runs`: per pipeline, one row per interval (its runs are its attempts) or per run
    without one, newest first; `failed_only`: the rows whose last attempt did not end ok; `stale`:
    the committed intervals whose inputs changed since (framework.schedule.history.stale_intervals)."""
    groups: dict[tuple[str, Any], list[RunRecord]] = {}
    for run in runs:
        key: Any = run.interval or run.fire or run.run_id
        groups.setdefault((run.pipeline, key), []).append(run)
    rows: dict[str, list[dict[str, Any]]] = {}
    for (pipeline, _), attempts in sorted(groups.items(), key=lambda g: _newest(g[1]), reverse=True):
        last = attempts[-1]
        if failed_only and last.status == RunStatus.OK and last.outcome not in FAILURES | {ABANDONED}:
            continue
        shown = rows.setdefault(pipeline, [])
        if len(shown) >= limit:
            continue
        shown.append(
            {
                "started": last.started.strftime("%Y-%m-%d %H:%M:%S") if last.started else None,
                "interval": last.interval.label() if last.interval else ("fire " + last.fire.isoformat() if last.fire else None),
                "status": last.shown_status,
                "input": "stale" if last.interval and (pipeline, last.interval) in (stale or set()) else None,
                "attempts": len(attempts),
                "exit": last.exit,
                "seconds": round(last.duration_s, 1) if last.duration_s is not None else None,
                "rows written": last.rows if last.status != RunStatus.INCOMPLETE else None,
                "versions": ", ".join(f"{o} v{v}" for o, v in sorted(last.versions.items())) or None,
                "state predicted → observed": "; ".join(last.state) or None,
                "freshness": last.freshness,
                "error": last.error,
                "run": last.run_id,
            }
        )
    return {pipeline: _without_empty_columns(shown) for pipeline, shown in rows.items()}


def _without_empty_columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Columns no row fills (state figures for a pipeline without window steps, errors for one
    that never failed) are left out, so the table fits a terminal."""
    if not rows:
        return rows
    keep = [c for c in rows[0] if c in ("status", "interval") or any(r[c] is not None for r in rows)]
    return [{c: r[c] for c in keep} for r in rows]


def _newest(runs: list[RunRecord]) -> datetime:
    return max((r.started for r in runs if r.started is not None), default=_EPOCH)
