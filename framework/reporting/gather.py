"""Gathering a run report: what a run left in the warehouse — the run log (`_tributary/events`),
the quality log (`_tributary/quality`), integration quality, quarantine — plus the pipeline's
graph, read into a `RunReport` (framework.reporting.model). No Spark: delta-rs reads the tables.

Counts are of what the run wrote. A run that changed nothing (an identical rerun: every output
"skipped: unchanged") says so and names the run whose commit holds the data; without `--run` the
report is of the latest run that wrote data (or did not end ok), not of such a rerun. The
quarantine is grouped by what turned the rows away (the expectations, or the reason), with each
group's count and its most frequent values: a check over a column of many values is one line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.engine.results import OutputStatus, RunStatus
from framework.errors import BadInput, Problem
from framework.integration.capacity import Figures
from framework.io.delta import local_store
from framework.io.locations import EVENTS_TABLE, INTEGRATION_TABLE, QUALITY_TABLE, QUARANTINE_TABLE
from framework.operators.micro_batch import Held

if TYPE_CHECKING:
    from framework.io.delta.base import DeltaStore
    from framework.project import Project
    from framework.project_context import ProjectContext

from framework.reporting.model import SAMPLE_ROWS, OutputRow, QuarantineGroup, RunReport, StepRow, logged_json

# -- gathering ---------------------------------------------------------------------------------

_RUNS_SQL = f"""
SELECT run_id, max(pipeline) AS pipeline, min(ts) AS started,
       max(CASE WHEN event = 'run_end' THEN status END) AS status,
       sum(CASE WHEN event = 'output_end' AND status = '{OutputStatus.WRITTEN}' THEN 1 ELSE 0 END) AS written
FROM t GROUP BY run_id ORDER BY started DESC
"""


def gather_run(
    context: ProjectContext,
    run_id: str | None = None,
    pipeline: str | None = None,
    store: DeltaStore | None = None,
) -> RunReport:
    """Everything logged about one run (default: the latest, of `pipeline` if given).

    Raises BadInput when there are no runs, or no run with that id."""
    project = context.project
    store = store or local_store(context.profile.storage_options)
    warehouse = context.warehouse()
    name, pipeline_file = _pipeline_arg(project, pipeline) if pipeline else (None, None)
    events_table = warehouse.internal(EVENTS_TABLE)
    run, chosen = _find_run(store, events_table, run_id, name)
    events = store.query(events_table, f"SELECT * FROM t WHERE run_id = {_lit(run['run_id'])}").to_pylist()
    report = _from_events(run["run_id"], run["pipeline"], sorted(events, key=lambda e: e["ts"]))
    report.warehouse = warehouse.root
    report.chosen = chosen
    where = f"run_id = {_lit(report.run_id)}"
    report.quality = _sorted_quality(_rows(store, warehouse.internal(QUALITY_TABLE), where), report)
    report.integration = _rows(store, warehouse.internal(INTEGRATION_TABLE), where, order="step")
    report.quarantine = _quarantine_groups(store, warehouse.internal(QUARANTINE_TABLE), where)
    report.graph_svg, report.graph_note = _pipeline_graph(context, report.pipeline, pipeline_file)
    return report


def _lit(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _pipeline_arg(project: Project, pipeline: str) -> tuple[str, Path | None]:
    """The pipeline name the run log uses for a `PIPELINE` argument (a name or a YAML file)."""
    try:
        path = project.pipeline_path(pipeline)
    except BadInput:
        return pipeline, None  # a pipeline whose file is gone still has its runs
    return _spec_name(path) or path.stem, path


def _spec_name(path: Path) -> str | None:
    try:
        found = re.search(r"""^name:\s*["']?([^"'#\s]+)""", path.read_text(encoding="utf-8"), re.MULTILINE)
    except OSError:
        return None
    return found.group(1) if found else None


def _find_run(store: DeltaStore, table: str, run_id: str | None, pipeline: str | None) -> tuple[dict[str, Any], str | None]:
    """The run asked for, or without `run_id` the latest one worth a report, and in words why it."""
    runs = store.query(table, _RUNS_SQL).to_pylist()
    if not runs:
        raise BadInput(Problem(f"no runs yet in {table}", hint="run a pipeline first: tributary run <pipeline>"))
    mine = [r for r in runs if pipeline is None or r["pipeline"] == pipeline]
    if run_id is None:
        if not mine:
            others = sorted({r["pipeline"] for r in runs})
            raise BadInput(
                Problem(
                    f"no runs of pipeline '{pipeline}' yet",
                    hint=f"run it first (tributary run {pipeline}); pipelines with runs: {', '.join(others)}",
                )
            )
        return _latest_that_wrote(mine)
    for run in runs:
        if run["run_id"] == run_id:
            if pipeline is not None and run["pipeline"] != pipeline:
                raise BadInput(
                    Problem(
                        f"run '{run_id}' is a run of pipeline '{run['pipeline']}', not '{pipeline}'",
                        hint=f"tributary report {run['pipeline']} --run {run_id}",
                    )
                )
            return run, None
    recent = ", ".join(f"{r['run_id']} ({r['pipeline']})" for r in (mine or runs)[:5])
    raise BadInput(Problem(f"no run '{run_id}' in {table}", hint=f"recent runs: {recent} (all: tributary runs)"))


def _latest_that_wrote(runs: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """The newest run (runs newest first) that wrote data or did not end ok: an ok run that wrote
    nothing (an identical rerun, every output skipped as unchanged) has nothing of its own to show."""
    worth = [n for n, run in enumerate(runs) if run["written"] or run["status"] != RunStatus.OK]
    if not worth:
        return runs[0], f"the latest run: {runs[0]['run_id']} (none of its {len(runs)} runs wrote data)"
    run, skipped = runs[worth[0]], runs[: worth[0]]
    if run["written"]:
        why = f"the latest run that wrote data: {run['run_id']}"
    else:
        why = f"the latest run: {run['run_id']} ({run['status'] or RunStatus.INCOMPLETE})"
    if skipped:
        shown = ", ".join(r["run_id"] for r in skipped[:3]) + (", …" if len(skipped) > 3 else "")
        why += f"; {len(skipped)} later run{'s' if len(skipped) > 1 else ''} changed nothing ({shown})"
    return run, why


def _from_events(run_id: str, pipeline: str, events: list[dict[str, Any]]) -> RunReport:
    report = RunReport(run_id=run_id, pipeline=pipeline, status=RunStatus.INCOMPLETE)
    for e in events:
        details = logged_json(e.get("details"))
        details = details if isinstance(details, dict) else {}
        kind = e["event"]
        if kind == "run_start":
            report.started = e["ts"]
            report.profile = details.get("profile")
            report.writer = details.get("writer")
            report.selected = list(details.get("select") or [])
            report.variables = dict(details.get("vars") or {})
        elif kind == "run_end":
            report.status, report.ended = e["status"], e["ts"]
            report.duration_s, report.error = e["duration_s"], e["error"]
        elif kind == "step_end":
            report.steps.append(StepRow(e["name"], details.get("kind", ""), e["status"], e["rows"], e["duration_s"]))
        elif kind == "output_end":
            known = ("table", "mode", "previous_version")
            report.outputs.append(
                OutputRow(
                    e["name"],
                    details.get("table", ""),
                    details.get("mode", ""),
                    e["status"],
                    e["rows"],
                    e["version"],
                    details.get("previous_version"),
                    e["duration_s"],
                    {k: v for k, v in details.items() if k not in known},
                )
            )
        elif kind == "held":
            said = {"waits": details["waits"]} if details.get("waits") else {}  # runs logged before it was said
            report.notes.append(Held(e["rows"], details.get("what", "rows"), details.get("watermark"), **said).line(e["name"]))
        elif kind == "capacity":
            report.capacity.append(Figures.from_dict(details))
        elif kind == "freshness":  # the scheduler's check of the sources before the run
            for source in details.get("sources") or []:
                if source.get("status") != "ok":
                    report.notes.append(_freshness_note(source))
        elif kind == "late_rows":
            report.notes.append(f"{e['rows']:,} late row(s) from {e['name']}, older than the watermark (_tributary/late_rows)")
        elif kind == "recovered":
            report.notes.append(
                f"output {e['name']} was restored to version {details.get('restored_to')} after this run was interrupted"
            )
    if report.duration_s is None and report.started and report.ended:
        report.duration_s = (report.ended - report.started).total_seconds()
    return report


def _freshness_note(source: dict[str, Any]) -> str:
    """A stale source as the report says it (framework.quality.freshness logged it)."""
    said = "past error_after" if source.get("status") == "error" else "past warn_after"
    age = f"{source['age_s'] / 3600:,.1f} h old" if source.get("age_s") is not None else "no data"
    return f"source {source.get('source')} was {said} before this run: {age} ({source.get('measured_on')} {source.get('newest') or '–'})"


def _rows(store: DeltaStore, table: str, where: str, order: str | None = None) -> list[dict[str, Any]]:
    """Rows of an optional table; none when the table does not exist (yet)."""
    columns = store.query(table, "SELECT * FROM t LIMIT 0").column_names
    if not columns:
        return []
    order_by = f" ORDER BY {order}" if order and order in columns else ""
    return store.query(table, f"SELECT * FROM t WHERE {where}{order_by}").to_pylist()


def _sorted_quality(rows: list[dict[str, Any]], report: RunReport) -> list[dict[str, Any]]:
    """Targets in pipeline order (steps, then outputs); failures first within a target."""
    order = {name: i for i, name in enumerate([*(s.name for s in report.steps), *(o.name for o in report.outputs)])}
    return sorted(
        rows,
        key=lambda r: (
            order.get(str(r.get("target")), len(order)),
            str(r.get("target")),
            bool(r.get("success")),
            str(r.get("expectation")),
        ),
    )


#: A quarantine reason written by an expectation is `<expectation(args)>: <column>=<value> ...` (one
#: part per failed expectation, joined by "; "); without the values it is what the rows have in common.
#: Rows written before the quarantine had an `expectation` column are grouped by this.
_WITHOUT_VALUES = r"regexp_replace(reason, '^(expect_[a-z_]+\(.*?\)): .*$', '\1')"


def _quarantine_groups(store: DeltaStore, table: str, where: str) -> list[QuarantineGroup]:
    """The run's quarantined rows by source and what turned them away: each group's count, its
    most frequent values and a few sample records (three small queries, whatever the rows)."""
    columns = store.query(table, "SELECT * FROM t LIMIT 0").column_names
    if not columns:
        return []
    cause = f"coalesce(expectation, {_WITHOUT_VALUES})" if "expectation" in columns else _WITHOUT_VALUES
    rows = f"SELECT *, {cause} AS cause FROM t WHERE {where}"
    counts = store.query(
        table, f"SELECT source, cause, count(*) AS n FROM ({rows}) GROUP BY source, cause ORDER BY n DESC, source, cause"
    ).to_pylist()
    if not counts:
        return []
    order = "quarantined_at" if "quarantined_at" in columns else "reason"
    samples = store.query(
        table,
        f"SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY source, cause ORDER BY {order}) AS sample_no "
        f"FROM ({rows})) WHERE sample_no <= {SAMPLE_ROWS}",
    ).to_pylist()
    values = store.query(
        table,
        f"SELECT source, cause, reason, n FROM (SELECT source, cause, reason, n, "
        f"row_number() OVER (PARTITION BY source, cause ORDER BY n DESC, reason) AS rank FROM "
        f"(SELECT source, cause, reason, count(*) AS n FROM ({rows}) GROUP BY source, cause, reason)) "
        f"WHERE rank <= {SAMPLE_ROWS} ORDER BY rank",
    ).to_pylist()
    shown = [c for c in columns if c not in ("source", "expectation", "run_id", "pipeline", "sample_no")]
    groups = []
    for c in counts:
        key = (c["source"], c["cause"])
        picked = sorted((s for s in samples if (s["source"], s["cause"]) == key), key=lambda s: s["sample_no"])
        cause = c["cause"] or ""
        groups.append(
            QuarantineGroup(
                source=c["source"] or "",
                reason=cause,
                expectation=cause if cause.startswith("expect_") else None,
                count=int(c["n"]),
                samples=[_sample(s, shown, cause) for s in picked],
                values=[
                    (_failed_values(v["reason"] or "", cause), int(v["n"]))
                    for v in values
                    if (v["source"], v["cause"]) == key and v["reason"] != cause
                ],
            )
        )
    return groups


def _sample(row: dict[str, Any], shown: list[str], cause: str) -> dict[str, Any]:
    """A quarantined row as a sample: an expectation's reason as the values alone (the group names it)."""
    sample = {k: row[k] for k in shown if k != "cause"}
    if cause.startswith("expect_") and sample.get("reason"):
        sample["reason"] = _failed_values(sample["reason"], cause)
    return sample


def _failed_values(reason: str, cause: str) -> str:
    """`expect_x(column=a): a=5` without its expectation(s): `a=5`."""
    for expectation in cause.split("; "):
        reason = reason.replace(f"{expectation}: ", "")
    return reason


def _pipeline_graph(context: ProjectContext, name: str, path: Path | None) -> tuple[str | None, str | None]:
    """The DAG as SVG, compiled like the CLI compiles (no Spark); or why it cannot be drawn."""
    project = context.project
    path = path or _pipeline_file(project, name)
    if path is None:
        return None, f"No pipeline file named '{name}' under {project.relative(project.pipelines_dir)}/ to draw the graph from."
    try:
        compiled = context.for_pipeline(path).compiled
        return compiled.graph.to_svg(), None
    except BadInput as e:
        if any(p.message.startswith("--var ") for p in e.problems):
            raise  # a mistake on this command line, not in today's spec: say it, write no page
        first = str(e.problems[0]) if e.problems else str(e)
        return None, f"{project.relative(path)} does not compile now, so its graph is not shown: {first}"
    except Exception as e:  # noqa: BLE001 - a report of a past run must not fail on today's spec
        return None, f"{project.relative(path)} could not be compiled, so its graph is not shown: {type(e).__name__}: {e}"


def _pipeline_file(project: Project, name: str) -> Path | None:
    try:
        return project.pipeline_path(name)
    except BadInput:
        pass
    for path in project.all_pipelines():
        if _spec_name(path) == name:
            return path
    return None
