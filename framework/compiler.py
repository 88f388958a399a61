"""Spec → compiled pipeline: vars resolved, templates rendered, graph built, SQL syntax checked.

Everything here runs without a JVM, so `tributary validate` answers in well under a second.

A batch run covers a time interval when it is given one (`run --interval`, the scheduler, a
backfill) or when its pipeline has a schedule (then the schedule's latest complete interval).
Without either, templates that use `interval_start` / `interval_end` are rendered with the
previous UTC day, so `validate` and `compile` still check them, and `uses_interval` tells the
runner to refuse the run.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlglot
import sqlglot.errors
from sqlglot import exp

from framework.errors import BadInput, Problem
from framework.functions.builtins import spark_functions
from framework.functions.loader import NONE as NO_FUNCTIONS
from framework.functions.loader import Functions, load_functions
from framework.graph import PipelineGraph, StepCycle
from framework.io.locations import INTERNAL_DIR, Warehouse, is_uri, output_location, overlap, within
from framework.io.sources import missing_files, source_location
from framework.operators.problems import SpecProblem
from framework.operators.registry import ColumnContext, StepColumns, StepKind, Streaming, kind_of, kinds
from framework.profiles import Profile
from framework.project import Project
from framework.schemas import Schema
from framework.schemas.query_size import ColumnBudget
from framework.spec.base import closest, did_you_mean
from framework.spec.expectations import INTEGRATION_COLUMNS, MAX_DROP_EXPECTATIONS
from framework.spec.intervals import Interval
from framework.spec.loader import LoadedPipeline, load_pipeline
from framework.spec.models import DeltaSource, FileSource, Pipeline
from framework.spec.slow_patterns import slow_pattern_warnings
from framework.spec.source_paths import render_source_paths
from framework.spec.steps import StepSpec, template_file
from framework.sql_policy import SPARK_HINTS, bare_function_refusals
from framework.sql_policy import expression_refusals as strict_refusals_in_expression
from framework.sql_policy import for_sqlglot as _for_sqlglot
from framework.sql_policy import refusals as strict_refusals
from framework.templating import NO_INTERVAL, RenderedSql, TemplateRenderer
from framework.variables import resolve_vars

#: sqlglot warns on stderr about text it reads as a Command ("contains unsupported syntax"), in
#: the middle of validate's output; the step's own check says what is wrong with that text
logging.getLogger("sqlglot").setLevel(logging.ERROR)

#: Statement types a SQL step may hold: it must define rows, not change anything.
_QUERY_TYPES = (exp.Query, exp.Values)


@dataclass(frozen=True)
class CompiledPipeline:
    project: Project
    loaded: LoadedPipeline
    variables: dict[str, Any]
    sql: dict[str, RenderedSql]  # step -> rendered SQL (sql steps only)
    graph: PipelineGraph
    selected: list[str]  # steps chosen by --select, in run order
    functions: Functions = NO_FUNCTIONS  # what udfs/ registered
    source_schemas: dict[str, str] = field(default_factory=dict)  # Parquet (footers) and Delta (log) sources' schemas
    schemas: dict[str, Schema] = field(default_factory=dict)  # every source's and step's columns, as far as known
    notes: list[Problem] = field(default_factory=list)  # what validate could not check (a source without a schema)
    interval: Interval | None = None  # the time interval this run covers (batch), part of its run key
    interval_sources: tuple[str, ...] = ()  # sources whose path reads interval_start / interval_end
    spec_warnings: list[Problem] = field(default_factory=list)  # e.g. a scheduled pipeline that appends

    @property
    def uses_interval(self) -> bool:
        """Whether a step's SQL or a source's path reads interval_start / interval_end."""
        return bool(self.interval_sources) or any(sql.interval_used for sql in self.sql.values())

    @property
    def spec(self) -> Pipeline:
        return self.loaded.spec

    @property
    def known_vars(self) -> set[str]:
        """The vars this pipeline has (declared, or read by a template or a value)."""
        return known_vars(self.spec.vars, self.sql, self.loaded.vars_used)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def warnings(self) -> list[Problem]:
        """What validate reports without failing (e.g. each raw_sql in a template)."""
        return [*self.spec_warnings, *(w for sql in self.sql.values() for w in sql.warnings)]

    def selected_outputs(self) -> list[str]:
        chosen = set(self.selected)
        return [o for o in self.spec.outputs if self.spec.output_step(o) in chosen]


def compile_pipeline(
    project: Project,
    pipeline_path: Path,
    profile: Profile,
    cli_vars: dict[str, Any] | None = None,
    select: str | None = None,
    interval: Interval | None = None,
    shared_vars: bool = False,
) -> CompiledPipeline:
    """`interval`: the time interval a batch run covers (see the module's docstring).
    `shared_vars`: the command line's vars were given to several pipelines at once, so one this
    pipeline has not is meant for another (as a profile's vars are); else it is a mistake."""
    cli_vars = cli_vars or {}
    loaded = load_pipeline(pipeline_path, project.relative(pipeline_path), {**profile.vars, **cli_vars})
    spec = loaded.spec
    variables = resolve_vars(spec.vars, profile.vars, cli_vars)
    interval, rendered_with, no_interval = _interval(loaded, interval)
    loaded, interval_sources = render_source_paths(loaded, rendered_with, no_interval, variables)
    spec = loaded.spec
    renderer = TemplateRenderer(
        project.sql_dir, project.root, set(spec.steps), set(spec.sources), variables, rendered_with, no_interval
    )
    functions = load_functions(project)

    problems: list[Problem] = []
    rendered: dict[str, RenderedSql] = {}
    parsed: dict[str, tuple[Any, str]] = {}  # sql step -> (sqlglot tree, the text it read)
    inputs: dict[str, tuple[str, ...]] = {}
    for name, step in spec.steps.items():
        kind = kind_of(step)
        try:
            declared = _check_declared_inputs(loaded, name, step.declared_inputs())
            _raise_problems(loaded, name, [problem for check in kind.checks for problem in check(step)])
            if kind.function_checks is not None:
                _raise_problems(loaded, name, list(kind.function_checks(step, functions)))
            _check_expectations(loaded, ("steps", name), step)
            if kind.template is not None:
                sql = _render_step(renderer, loaded, name, kind, step)
                nodes = set(spec.steps) | set(spec.sources)
                parsed[name] = _check_sql(
                    loaded, sql, nodes, functions, strict=profile.sql_policy == "strict", catalog=has_catalog(profile)
                )
                rendered[name] = sql
                declared = [*declared, *sql.sources, *sql.refs]
            inputs[name] = tuple(dict.fromkeys(declared))
        except BadInput as e:
            problems.extend(e.problems)
    for name, output in spec.outputs.items():
        try:
            _check_expectations(loaded, ("outputs", name), output)
        except BadInput as e:
            problems.extend(e.problems)
    problems.extend(_slice_problems(loaded))
    if not shared_vars:
        problems.extend(_unused_cli_vars(cli_vars, known_vars(spec.vars, rendered, loaded.vars_used)))
    problems.extend(_location_problems(loaded, project, profile))
    problems.extend(connect_problems(loaded, profile))
    if profile.sql_policy == "strict":
        problems.extend(_strict_expressions(loaded, functions))
    if problems:
        raise BadInput(*problems)

    kinds = {name: "source" for name in spec.sources} | {name: step.kind for name, step in spec.steps.items()}
    outputs = {o: spec.output_step(o) for o in spec.outputs}
    try:
        graph = PipelineGraph.build(inputs, kinds, outputs)
    except StepCycle as e:
        raise BadInput(*_cycle_problems(loaded, e.cycle)) from None
    loaded, found = _source_schemas(loaded, project, profile)
    if spec.mode == "streaming":
        _check_streaming_spec(loaded, graph)
    elif spec.elastic is not None:
        raise BadInput(
            loaded.problem(
                "elastic: widens the steps of a stream that falls behind; this pipeline runs in batch",
                ("elastic",),
                hint="remove elastic:, or set mode: streaming (a batch step's partitions come from the profile's "
                "spark.sql.shuffle.partitions)",
            )
        )
    schemas, notes = _check_columns(loaded, graph, rendered, parsed, functions, found)
    if profile.sql_policy == "strict":
        _check_bare_functions(rendered, parsed, graph, schemas)
    return CompiledPipeline(
        project,
        loaded,
        variables,
        rendered,
        graph,
        graph.select(select),
        functions,
        found,
        schemas,
        notes,
        interval,
        interval_sources,
        _append_warnings(loaded) + slow_pattern_warnings(loaded),
    )


def source_file_problems(compiled: CompiledPipeline, profile: Profile) -> tuple[list[Problem], list[Problem]]:
    """(problems, notes): what the local files of the sources the selection reads would make a
    run refuse before Spark starts, said at the source's line (validate and the run both ask).

    A path that matches nothing is refused, a stream's too (its folder must exist; files may
    arrive in it later); a path naming an interval's files is a note (a run of that interval waits
    for them, and the scheduler retries it). A CSV file whose first line is a row of data, read
    with header: true, would lose that row (framework.io.csv_header)."""
    from framework.errors import not_a_file
    from framework.io.csv_header import data_row_for_header, header_out_of_order
    from framework.io.sample import special_files

    spec, warehouse = compiled.spec, Warehouse.of(compiled.project, profile)
    needed = {n for step in compiled.selected for n in ({step} | compiled.graph.upstream(step))}
    problems, notes = [], []
    for name, source in spec.sources.items():
        if name not in needed or isinstance(source, DeltaSource):
            continue
        location = source_location(compiled.project, warehouse, source)
        if not missing_files(location):
            for special, mode in special_files(location):
                problems.append(
                    compiled.loaded.problem(
                        f"source '{name}': {compiled.project.relative(Path(special))}: {not_a_file(mode)}, "
                        "not a file; Spark would list it with the files and wait on it for ever",
                        ("sources", name, "path"),
                        hint="move it out of the source's folder, or narrow 'path' to the data files (a glob)",
                    )
                )
            misplaced = header_out_of_order(source, location) if isinstance(source, FileSource) else None
            if misplaced is not None:
                file, column, in_file, in_schema = misplaced
                problems.append(
                    compiled.loaded.problem(
                        f"source '{name}': the header of {compiled.project.relative(Path(file))} names column "
                        f"'{column}' in place {in_file}, and the schema in place {in_schema}: Spark reads CSV columns "
                        "by position, so its values would land in another column",
                        ("sources", name, "schema"),
                        hint="declare the columns in the files' order, or write the files' columns in the schema's order",
                    )
                )
            headless = data_row_for_header(source, location) if isinstance(source, FileSource) else None
            if headless is not None and isinstance(source, FileSource):
                file, line = headless
                header = next((("sources", name, "options", k) for k in source.options if str(k).lower() == "header"), None)
                problems.append(
                    compiled.loaded.problem(
                        f"source '{name}': the first line of {compiled.project.relative(Path(file))} is a row of data, "
                        f"not a header: {line[:200]!r}; read with header: true (the default), Spark would drop it",
                        header or ("sources", name),
                        hint="the files have no header: set options: {header: false}; or give each file a header line",
                    )
                )
            continue
        at = ("sources", name, "path")
        if name in compiled.interval_sources:
            given = "" if compiled.interval is not None else " (no interval given: validate rendered the previous UTC day's)"
            notes.append(
                compiled.loaded.problem(
                    f"source '{name}': the interval's files are not there (yet): {source.path}{given}",
                    at,
                    hint="a run of that interval waits for them and fails (exit 1) until they land; the scheduler retries it",
                )
            )
            continue
        hint = "check 'path' (relative paths start at the project root)"
        if spec.mode == "streaming":
            hint += "; a stream's folder must exist (its files may arrive later): create it empty"
        made_by = re.search(r"tributary generate [\w-]+(?: --[\w-]+(?: [\w./-]+)?)*", spec.description or "")
        if made_by:  # the pipeline says what makes its data (the examples do)
            hint += f"; its description says its data is made by `{made_by.group(0)}`"
        problems.append(compiled.loaded.problem(f"source '{name}': path not found: {location}", at, hint=hint))
    return problems, notes


def _slice_problems(loaded: LoadedPipeline) -> list[Problem]:
    """Interval-sliced outputs (framework.spec.models.Output.interval): batch only, and with a
    column that finds an interval's rows."""
    spec, problems = loaded.spec, []
    for name, output in spec.outputs.items():
        if spec.mode == "streaming" and output.interval is not None:
            problems.append(
                loaded.problem(
                    f"output '{name}': a streaming run has no interval, so its output has no interval slices",
                    ("outputs", name, "interval"),
                    hint="drop interval: (a stream appends or merges what is new)",
                )
            )
        elif spec.sliced_by(name) == "":
            at = ("outputs", name, "interval") if output.interval is not None else ("outputs", name)
            problems.append(
                loaded.problem(
                    f"output '{name}': a run of an interval replaces the output's rows of that interval, and nothing says "
                    "which rows those are (the sources name no event_time column)",
                    at,
                    hint="name the output's DATE or TIMESTAMP column: interval: {column: day}; or say how the output is "
                    "written instead: mode: append (a log of every run), merge (with keys) or overwrite with interval: false "
                    "(the whole table)",
                )
            )
    return problems


def _append_warnings(loaded: LoadedPipeline) -> list[Problem]:
    """A batch pipeline whose output appends: a scheduled one's rerun of an interval adds its rows
    again; an unscheduled one reading files appends every row its files hold at each run that
    finds them changed (one new file: the old files' rows a second time)."""
    spec = loaded.spec
    if spec.mode != "batch":
        return []
    if spec.schedule is None:
        if not any(isinstance(source, FileSource) for source in spec.sources.values()):
            return []
        return [
            loaded.problem(
                f"output '{name}' appends every row the sources' files hold at each run that finds them changed: "
                "a new file among them appends the others' rows a second time",
                ("outputs", name, "mode"),
                hint="for each file's rows once, make the pipeline a stream (mode: streaming); or replace the rows "
                "(mode: overwrite), or merge them by keys (mode: merge, keys: [...])",
            )
            for name, output in spec.outputs.items()
            if output.mode == "append"
        ]
    return [
        loaded.problem(
            f"output '{name}' appends: a rerun of an interval (late data, a fixed bug) adds that interval's rows a second time",
            ("outputs", name, "mode"),
            hint="replace each interval's rows instead: interval: {column: <the output's DATE or TIMESTAMP column>} "
            "(and no mode); keep mode: append for a log meant to keep every run's rows",
        )
        for name, output in spec.outputs.items()
        if output.mode == "append"
    ]


def _check_columns(
    loaded: LoadedPipeline,
    graph: PipelineGraph,
    rendered: dict[str, RenderedSql],
    parsed: dict[str, tuple[Any, str]],
    functions: Functions,
    found: dict[str, str],
) -> tuple[dict[str, Schema], list[Problem]]:
    """Every node's columns in graph order (sources from their specs, steps from their kind's
    output_schema over their inputs'), raising what is certainly wrong with the columns the steps,
    outputs and expectations name; notes say which sources' columns are not known."""
    from framework.io.source_columns import event_time_problems, source_columns
    from framework.schemas.expectations import expectation_column_problems

    spec = loaded.spec
    schemas: dict[str, Schema] = {}
    problems: list[Problem] = []
    notes: list[Problem] = []
    budget = ColumnBudget()  # the column check's, shared by the pipeline's queries (framework.schemas.query_size)
    troubled: set[str] = set()  # steps with a problem of their own already (a join's repeated column)
    for node in graph.order():
        if node in spec.sources:
            source = spec.sources[node]
            schema = source_columns(source, found.get(node))
            if not schema.complete:
                notes.append(
                    loaded.problem(
                        f"source '{node}': {schema.why_incomplete}, so the columns steps read from it are not checked",
                        ("sources", node),
                        hint="declare schema: to have validate check them",
                    )
                )
            problems += [
                loaded.problem(f"source '{node}': {m}", ("sources", node, "event_time"), hint=h)
                for m, h in event_time_problems(node, source, schema)
            ]
        else:
            step = spec.steps[node]
            kind = kind_of(step)
            if kind.output_schema is None:
                schemas[node] = Schema.unknown(f"{kind.name} steps do not say their columns")
                continue
            tree, text = parsed.get(node, (None, ""))
            context = ColumnContext(
                node, {i: schemas[i] for i in graph.inputs.get(node, ())}, functions, rendered.get(node), tree, text, budget
            )
            try:
                result = kind.output_schema(step, context)
            except Exception as e:  # noqa: BLE001 - a check that cannot follow a step must not stop the pipeline
                result = StepColumns(Schema.unknown(f"validate could not follow it ({type(e).__name__}: {e})"))
            schema = result.schema
            notes += result.notes
            if result.problems:
                troubled.add(node)
            for p in result.problems:
                located = (
                    p
                    if isinstance(p, Problem)
                    else loaded.problem(f"step '{node}': {p.message}", ("steps", node, *p.at), hint=p.hint)
                )
                problems.append(located)
            problems += expectation_column_problems(loaded, ("steps", node), step.expectations, schema)
        schemas[node] = schema
    for name, output in spec.outputs.items():
        step_name = spec.output_step(name)
        schema = schemas.get(step_name, Schema.unknown(""))
        if step_name not in troubled:
            problems += repeated_column_problems(loaded.problem, name, step_name, schema.names)
        for setting in ("keys", "partition_by"):
            for i, column in enumerate(getattr(output, setting)):
                named = schema.find(column)
                if schema.lacks(column):
                    problems.append(
                        loaded.problem(
                            f"output '{name}': {setting} column '{column}' is not a column of step '{step_name}'",
                            ("outputs", name, setting, i),
                            hint=schema.hint(column, f"'{step_name}'"),
                        )
                    )
                elif named is not None and named.name != column:
                    problems.append(spelling_problem(loaded.problem, name, setting, column, named.name, (setting, i)))
        sliced, written = spec.sliced_by(name), output.interval is not None and output.interval.column is not None
        if sliced and written and (named := schema.find(sliced)) is not None and named.name != sliced:
            problems.append(spelling_problem(loaded.problem, name, "interval", sliced, named.name, ("interval",)))
        problems += expectation_column_problems(loaded, ("outputs", name), output.expectations, schema)
        problems += _date_slice_problems(loaded, name, schema)
    if problems:
        raise BadInput(*problems)
    return schemas, notes


def repeated_column_problems(problem: Callable[..., Problem], output: str, step: str, names: list[str]) -> list[Problem]:
    """A column name the step's rows have twice, which no table can hold (Spark and Delta compare
    names without case): the run failed in Spark's words ([COLUMN_ALREADY_EXISTS]) without a line.
    Validate says it for the names it is sure of (framework.schemas.query), the run for the names
    only Spark knows (framework.engine.output_checks). A step that is not an output may have them,
    as long as no query names that column."""
    seen: dict[str, str] = {}
    for name in names:
        if name.lower() in seen:
            first = seen[name.lower()]
            again = "" if name == first else f" ('{name}' again)"
            return [
                problem(
                    f"output '{output}': step '{step}' has the column '{first}' twice{again}, and a table holds each "
                    "name once (letter case aside)",
                    ("outputs", output),
                    hint=f"give one of them another name in step '{step}', e.g. {name} AS {name}_2",
                )
            ]
        seen[name.lower()] = name
    return []


def spelling_problem(
    problem: Callable[..., Problem], output: str, setting: str, column: str, spelled: str, at: tuple[str | int, ...]
) -> Problem:
    """A key, partition or interval column written in other letter case than the step's column
    (validate here, and the run for columns only Spark knows, framework.engine.output_checks):
    Spark finds it either way, and Delta does not (a merge failed from its second run on, a sliced
    output from its second interval on; a partitioned table's first commit could not be read again)."""
    return problem(
        f"output '{output}': {setting} column '{column}' is spelled '{spelled}' in the step",
        ("outputs", output, *at),
        hint=f"write '{spelled}': a Delta table keeps each column's own spelling",
    )


def _date_slice_problems(loaded: LoadedPipeline, name: str, schema: Schema) -> list[Problem]:
    """An output sliced by a DATE column holds whole local days per interval, so its schedule's
    intervals must begin and end where days do. With `30 2 * * *` every run failed as "not whole
    days" (exit 2), and the scheduler tried again each day; said here, before any run."""
    from framework.io.delta.base import whole_days

    schedule, column = loaded.spec.schedule, loaded.spec.sliced_by(name)
    found = schema.find(column) if schedule is not None and column else None
    if schedule is None or found is None or (found.type or "").upper() != "DATE":
        return []
    cron, now, end = schedule.parsed(), datetime.now(UTC), schedule.end_at()
    latest = cron.latest_complete(min(now, end) if end is not None else now)  # one the schedule runs
    for interval in itertools.islice(cron.intervals(latest.start, latest.start + timedelta(days=400)), 3):
        if not whole_days(interval.start, interval.end, schedule.timezone):
            begin, end = interval.local()
            at = ("outputs", name, "interval") if loaded.spec.outputs[name].interval is not None else ("schedule", "cron")
            return [
                loaded.problem(
                    f"output '{name}' is sliced on '{found.name}', a DATE, and its schedule ('{schedule.cron}' in "
                    f"{schedule.timezone}) runs intervals that are not whole days ({begin.isoformat()} / {end.isoformat()}): "
                    "such a run cannot replace whole days of the output",
                    at,
                    hint="schedule at midnight (e.g. cron: '0 0 * * *'), or slice by a TIMESTAMP column "
                    "(interval: {column: <a TIMESTAMP column>})",
                )
            ]
    return []


def _interval(loaded: LoadedPipeline, given: Interval | None) -> tuple[Interval | None, Interval | None, tuple[str, str]]:
    """(the interval the run covers, the one templates are rendered with, why there is none)."""
    spec = loaded.spec
    if spec.mode == "streaming":
        if given is not None:
            raise BadInput(
                loaded.problem(
                    "a streaming run has no time interval: it processes what is new",
                    ("mode",),
                    hint="drop --interval; to cut a stream's rows by time, filter on their event time in SQL",
                )
            )
        why = ("a streaming run has no time interval (it processes what is new)", "filter on the rows' event time instead")
        return None, None, why
    if given is not None:
        _check_given_interval(loaded, given)
        return given, given, NO_INTERVAL
    if spec.schedule is not None:
        cron, now = spec.schedule.parsed(), datetime.now(UTC)
        end = spec.schedule.end_at()
        latest = cron.latest_complete(min(now, end) if end is not None else now)
        return latest, latest, NO_INTERVAL
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return None, Interval(today - timedelta(days=1), today), NO_INTERVAL


def _check_given_interval(loaded: LoadedPipeline, given: Interval) -> None:
    """An `--interval` a run would get wrong is refused: one that has not ended (what came so far
    would be committed as the interval, and the scheduler would not run it again), and, for a
    scheduled pipeline, one that does not begin and end where the schedule's intervals do (08:01 to
    08:03 of a 2-minute schedule replaced half of two intervals' slices, and the run log took it
    for neither: rows counted twice and lost, and no rerun repaired them), or, where a source's
    path is rendered from the interval (files per interval), one that is not exactly one of the
    schedule's intervals (the path names one interval's files, so a run over two read the first
    one's alone and replaced both intervals' rows with them)."""
    if given.end > datetime.now(UTC):
        raise BadInput(
            Problem(
                f"--interval {given.label()}: it has not ended yet, so its data may not all be there",
                hint="run an interval once it has ended (the scheduler runs each as it ends)",
            )
        )
    schedule = loaded.spec.schedule
    if schedule is None:
        return
    start, stop = schedule.start_at(), schedule.end_at()
    if (start is not None and given.start < start) or (stop is not None and given.end > stop):
        raise BadInput(
            loaded.problem(
                f"--interval {given.label()} lies outside the schedule's "
                + ("start: and end:" if start is not None and stop is not None else "start:" if start is not None else "end:"),
                ("schedule",),
                hint="no interval of this pipeline starts before its schedule's start: or ends after its end:",
            )
        )
    cron = schedule.parsed()
    aligned = all(cron.next_fire(at - timedelta(microseconds=1)) == at for at in (given.start, given.end))
    inside = list(itertools.islice(cron.intervals(given.start, given.end), 3))
    by_path = [
        name
        for name, source in loaded.spec.sources.items()
        if isinstance(getattr(source, "path", None), str) and "interval_" in str(getattr(source, "path", ""))
    ]
    if inside == [given] or (aligned and not by_path):
        return
    begin, end = given.local()
    if not aligned:
        said = "does not begin and end where the schedule's intervals do: a run commits whole intervals"
    else:
        count = f"{len(inside)}{'+' if len(inside) == 3 else ''} of the schedule's intervals"
        said = f"covers {count}, and source '{by_path[0]}' reads the files of one interval, named by its path from the interval"
    raise BadInput(
        Problem(
            f"--interval {given.label()} {said} ('{schedule.cron}' in {schedule.timezone})",
            hint=f"run each interval: tributary backfill {loaded.spec.name} --from {begin.isoformat()} --to {end.isoformat()}",
        )
    )


def _source_schemas(loaded: LoadedPipeline, project: Project, profile: Profile) -> tuple[LoadedPipeline, dict[str, str]]:
    """Parquet sources without `schema:` get the one their files' footers agree on, and Delta
    sources have their log's (framework.io.source_schema); returns the pipeline with the Parquet
    schemas set, and every schema found (pinned in the run log)."""
    found, problems = {}, []
    for name, source in loaded.spec.sources.items():
        footers = isinstance(source, FileSource) and source.format == "parquet" and source.schema_ is None
        if not (footers or isinstance(source, DeltaSource)):
            continue
        # imported here: reading footers and Delta logs needs pyarrow, which validate does not import otherwise
        from framework.io.locations import Warehouse, is_uri
        from framework.io.source_schema import delta_log_schema, footer_schema
        from framework.io.sources import source_location

        location = source_location(project, Warehouse.of(project, profile), source)
        if is_uri(location):
            continue
        try:
            if isinstance(source, DeltaSource):
                ddl = delta_log_schema(name, location, source.version, source.timestamp)
            else:
                ddl = footer_schema(name, location)
        except BadInput as e:
            problems += [loaded.problem(p.message, ("sources", name), p.hint) for p in e.problems]
            continue
        if ddl is not None:
            found[name] = ddl
    if problems:
        raise BadInput(*problems)
    typed = {n: ddl for n, ddl in found.items() if isinstance(loaded.spec.sources[n], FileSource)}
    if not typed:
        return loaded, found
    sources = {n: s.model_copy(update={"schema_": typed[n]}) if n in typed else s for n, s in loaded.spec.sources.items()}
    return replace(loaded, spec=loaded.spec.model_copy(update={"sources": sources})), found


def connect_problems(loaded: LoadedPipeline, profile: Profile) -> list[Problem]:
    """What a Spark Connect profile (spark.remote) cannot run, said before anything starts: a
    Connect client holds no JVM and no py4j gateway, and the functions it hands the server run in
    the server's Python, not in this process (docs/profiles.md, "Spark Connect"). The strict SQL
    policy runs there with sqlglot's re-check only (docs/security.md)."""
    if not profile.spark.remote or loaded.spec.mode != "streaming":
        return []
    on = f"profile '{profile.name}' runs on Spark Connect ({profile.spark.remote})"
    return [
        loaded.problem(
            f"pipeline '{loaded.spec.name}' is a stream, and {on}: each output commits its micro-batches "
            "through foreachBatch in this process (exactly-once Delta transactions, state carried between "
            "micro-batches, the run's figures), and on Spark Connect foreachBatch runs in the server's Python, "
            "which cannot reach this process",
            ("mode",),
            hint="run streaming pipelines with a profile that sets spark.master (local[*] or a cluster's "
            "spark://host:7077); batch pipelines run on Spark Connect",
        )
    ]


def _location_problems(loaded: LoadedPipeline, project: Project, profile: Profile) -> list[Problem]:
    """Where outputs write: never into the warehouse's own folder (the run log, the quarantine,
    checkpoints), by `path:` only inside the warehouse or under the profile's external_roots, not
    two outputs into one table, and never into what a source of the pipeline reads unless that
    Delta source says it reads its own output on purpose."""
    spec, warehouse = loaded.spec, Warehouse.of(project, profile)
    internal = warehouse.internal(INTERNAL_DIR)
    roots = [warehouse.root, *(r if is_uri(r) else str(project.resolve(r).resolve()) for r in profile.external_roots)]
    sources = {name: source_location(project, warehouse, source) for name, source in spec.sources.items()}
    problems: list[Problem] = _project_in_warehouse(project, profile, warehouse)
    written: dict[str, str] = {}  # table -> the first output writing it
    for name, output in spec.outputs.items():
        at = (
            ("outputs", name, "path")
            if output.path is not None
            else ("outputs", name, "name")
            if output.name
            else ("outputs", name)
        )
        try:
            table = output_location(project, warehouse, name, output)
        except BadInput as e:  # a symbolic link takes it out of the warehouse: said at its line
            problems.extend(loaded.problem(p.message, at, hint=p.hint) for p in e.problems)
            continue
        if overlap(table, internal):
            problems.append(
                loaded.problem(
                    f"output '{name}' would write {table}, over the warehouse's own folder {INTERNAL_DIR}/ (run log, quarantine, checkpoints)",
                    at,
                    hint=f"names and paths under {INTERNAL_DIR} are reserved: choose another name",
                )
            )
            continue
        foreign = _not_a_table(table)
        if foreign:
            problems.append(
                loaded.problem(
                    f"output '{name}' would write its Delta table into {project.relative(Path(table))}, {foreign}",
                    at,
                    hint="choose another name (or path:), or move those files away: the table's files would be mixed "
                    "with them, and cleaning the table up could delete them",
                )
            )
        if output.path is not None and not any(within(table, root) for root in roots):
            problems.append(
                loaded.problem(
                    f"output '{name}': path '{output.path}' is outside the warehouse ({warehouse.root})",
                    at,
                    hint="use name: to write under the warehouse, or list the folder under external_roots: in the profile",
                )
            )
        if table in written:
            problems.append(loaded.problem(f"outputs '{written[table]}' and '{name}' write the same table {table}", at))
        written.setdefault(table, name)
        for source, location in sources.items():
            read = spec.sources[source]
            if overlap(table, location) and not (isinstance(read, DeltaSource) and read.own_output):
                problems.append(
                    loaded.problem(
                        f"output '{name}' would write {table}, which source '{source}' reads",
                        at,
                        hint="write it elsewhere; to read a table this pipeline writes on purpose (its previous version), "
                        "make the source format: delta with own_output: true",
                    )
                )
    return problems


def _project_in_warehouse(project: Project, profile: Profile, warehouse: Warehouse) -> list[Problem]:
    """A warehouse that is the project folder, or holds it, puts tables among pipelines/, sql/ and
    udfs/ (an output named `sql` would be written into the templates' folder)."""
    if not warehouse.is_local():
        return []
    root, tables = project.root.resolve(), Path(warehouse.root)
    if tables != root and tables not in root.parents:
        return []
    return [
        Problem(
            f"the warehouse ({warehouse.root}) is the project folder or holds it: tables would be written "
            "beside pipelines/, sql/ and udfs/",
            file=project.relative(project.configs_dir / f"{profile.name}.yaml"),
            hint="give the profile's warehouse: a folder of its own, e.g. ./warehouse (check the variables it uses, "
            "e.g. an empty ${WAREHOUSE})",
        )
    ]


def _not_a_table(table: str) -> str | None:
    """Why a local output location cannot take a Delta table: a file there, or a folder without a
    Delta log holding files no table has (someone else's data, or the project's own folders)."""
    if is_uri(table) or not os.path.lexists(table):
        return None
    if not os.path.isdir(table):
        return "which is a file, not a folder"
    if os.path.isdir(os.path.join(table, "_delta_log")):
        return None
    try:
        with os.scandir(table) as entries:  # a table's own files: Parquet, partition folders, hidden ones
            held = next((e.name for e in entries if not _table_file(e)), None)
    except OSError as e:
        return f"a folder that cannot be read ({e.strerror})"
    return f"a folder holding files that are not a Delta table's (no _delta_log), e.g. {held}" if held else None


def _table_file(entry: os.DirEntry[str]) -> bool:
    """A name a Delta table's folder holds (a killed first commit may leave its Parquet files)."""
    name = entry.name
    return name.startswith(("_", ".")) or name.endswith(".parquet") or ("=" in name and entry.is_dir())


def _cycle_problems(loaded: LoadedPipeline, cycle: list[str]) -> list[Problem]:
    """The cycle at the line of each step in it, so every read that closes the loop is found."""
    loop = " → ".join(cycle)
    steps = list(dict.fromkeys(cycle))
    return [
        loaded.problem(
            f"the steps form a cycle: {loop}"
            if i == 0
            else f"step '{step}' is in the cycle: it reads '{cycle[cycle.index(step) - 1]}'",
            ("steps", step),
            hint="each step reads the one before it; break the loop by removing one of those reads" if i == 0 else None,
        )
        for i, step in enumerate(steps)
    ]


def _check_streaming_spec(loaded: LoadedPipeline, graph: PipelineGraph) -> None:
    """What a streaming pipeline needs that can be known without Spark."""
    spec = loaded.spec
    problems = []
    for name, source in spec.sources.items():
        if isinstance(source, FileSource) and source.schema_ is None:
            problems.append(
                loaded.problem(
                    f"source '{name}': a streaming source needs a 'schema'",
                    ("sources", name),
                    hint="declare its columns, e.g. schema: ts TIMESTAMP, name STRING"
                    + (" (a Parquet source reads it from its files once one is there)" if source.format == "parquet" else ""),
                )
            )
    for name, output in spec.outputs.items():
        if output.mode == "overwrite":
            problems.append(
                loaded.problem(
                    f"output '{name}': a streaming output appends or merges, it cannot overwrite",
                    ("outputs", name, "mode") if "mode" in output.model_fields_set else ("outputs", name),
                    hint="set mode: append (or merge with keys)",
                )
            )
    checked = [("steps", n, s) for n, s in spec.steps.items()] + [("outputs", n, o) for n, o in spec.outputs.items()]
    for section, name, node in checked:
        for i, expectation in enumerate(node.expectations):
            if expectation.severity == "drop":  # row-level (the spec checks it): judged per micro-batch
                continue
            problems.append(
                loaded.problem(
                    f"{section[:-1]} '{name}': {expectation.name} with severity {expectation.severity} is checked in batch "
                    "runs only; a stream can drop the rows failing a row-level expectation",
                    (section, name, "expectations", i),
                    hint="use severity: drop (failing rows go to the quarantine), or check the output tables with a batch "
                    "pipeline reading them (format: delta)",
                )
            )

    for name, step in spec.steps.items():
        problems += _streaming_problems(loaded, graph, name, step)
    if problems:
        raise BadInput(*problems)


def _streaming_problems(loaded: LoadedPipeline, graph: PipelineGraph, name: str, step: StepSpec) -> list[Problem]:
    """What the step's kind needs to run on streams (framework.operators.registry)."""
    spec, kind = loaded.spec, kind_of(step)
    mode = kind.streaming(step)
    if mode is Streaming.BATCH_ONLY:
        return [
            loaded.problem(
                f"step '{name}': {kind.name} steps run in batch pipelines only",
                ("steps", name),
                hint="run it in a pipeline with mode: batch (e.g. a second pipeline over the same files)",
            )
        ]
    problems = [
        loaded.problem(f"step '{name}': {p.message}", ("steps", name, *p.at), hint=p.hint)
        for check in kind.streaming_checks
        for p in check(step)
    ]
    if kind.needs_watermark:
        upstream = {n for i in step.declared_inputs() for n in ({i} | graph.upstream(i))}
        missing = sorted(n for n in upstream if graph.kinds.get(n) == "source" and spec.sources[n].watermark is None)
        if missing:
            problems.append(
                loaded.problem(
                    f"step '{name}': {kind.needs_watermark}; source(s) {missing} have none",
                    ("steps", name),
                    hint="add event_time and watermark (e.g. watermark: 30s) to those sources",
                )
            )
    return problems


def _check_expectations(loaded: LoadedPipeline, at: tuple[str, str], node: Any) -> None:
    """`on: integration` needs a step measured against ground truth, and names its figures; a
    row's failed `drop` expectations are kept as bits of one 64-bit number, so at most 63."""
    problems = []
    drops = [i for i, e in enumerate(node.expectations) if e.severity == "drop" and e.on == "rows"]
    if len(drops) > MAX_DROP_EXPECTATIONS:
        problems.append(
            loaded.problem(
                f"{at[0][:-1]} '{at[1]}' has {len(drops)} expectations with severity drop; at most {MAX_DROP_EXPECTATIONS}",
                (*at, "expectations", drops[MAX_DROP_EXPECTATIONS]),
                hint="combine checks of one column (e.g. one expect_column_values_to_be_in_set) or move some to a later step",
            )
        )
    for i, expectation in enumerate(node.expectations):
        where = (*at, "expectations", i)
        if expectation.on != "integration":
            continue
        if not (isinstance(node, StepSpec) and kind_of(node).evaluable(node)):
            measured = " and ".join(k.name for k in kinds().values() if k.units is not None)
            problems.append(
                loaded.problem(
                    f"{at[0][:-1]} '{at[1]}': {expectation.name} is on: integration, but only {measured} steps "
                    "with truth: have integration figures",
                    where,
                    hint="declare truth: {instance: ..., primary: ...} on the step, or drop 'on: integration'",
                )
            )
            continue
        for column in expectation.columns():
            if column not in INTEGRATION_COLUMNS:
                problems.append(
                    loaded.problem(
                        f"step '{at[1]}': {expectation.name}: '{column}' is not an integration figure",
                        (*where, expectation.name),
                        hint=did_you_mean(column, set(INTEGRATION_COLUMNS)),
                    )
                )
    if problems:
        raise BadInput(*problems)


def _raise_problems(loaded: LoadedPipeline, step: str, problems: list[SpecProblem]) -> None:
    """A kind's own checks (framework.operators.registry), located in the step's YAML."""
    if problems:
        raise BadInput(*[loaded.problem(f"step '{step}': {p.message}", ("steps", step, *p.at), hint=p.hint) for p in problems])


def _render_step(renderer: TemplateRenderer, loaded: LoadedPipeline, name: str, kind: StepKind, step: StepSpec) -> RenderedSql:
    assert kind.template is not None
    text = kind.template(step)
    file = template_file(text)
    if file:
        if not renderer.has_template(file):
            raise BadInput(
                loaded.problem(
                    f"step '{name}': template '{file}' not found under sql/",
                    ("steps", name, kind.name),
                    hint=renderer.template_hint(file),
                )
            )
        return renderer.render_file(name, file)
    first_line = loaded.doc.value_lines.get(("steps", name, kind.name), 1)
    return renderer.render_inline(name, text, loaded.shown_as, first_line)


def _check_declared_inputs(loaded: LoadedPipeline, step: str, declared: list[str]) -> list[str]:
    known = set(loaded.spec.steps) | set(loaded.spec.sources)
    for i, name in enumerate(declared):
        if name not in known:
            raise BadInput(
                loaded.problem(
                    f"step '{step}' reads '{name}', which is neither a source nor a step",
                    ("steps", step, loaded.spec.steps[step].kind, i),
                    hint=did_you_mean(name, known),
                )
            )
        if name == step:
            raise BadInput(loaded.problem(f"step '{step}' reads itself", ("steps", step)))
    return declared


def _check_sql(
    loaded: LoadedPipeline,
    sql: RenderedSql,
    node_names: set[str],
    functions: Functions,
    strict: bool = False,
    catalog: bool = False,
) -> tuple[Any, str]:
    """Spark-dialect syntax check; one query per step; pipeline nodes only through ref()/source();
    with the strict SQL policy, only what framework.sql_policy allows. Returns the query's
    sqlglot tree and the text sqlglot read."""
    text = _for_sqlglot(sql.text)
    too_deep = _nested_past(sql.text, _MAX_NESTING)
    if too_deep is not None:  # sqlglot would take it (slowly), Spark's parser would not
        raise BadInput(
            sql.problem(
                f"the SQL is nested too deeply to check (more than {_MAX_NESTING} levels of parentheses)",
                too_deep,
                hint="split the query with WITH clauses or steps of their own",
            )
        )
    try:
        with _deeper_recursion():
            statements = [s for s in sqlglot.parse(text, read="spark") if s is not None]
    except RecursionError:
        raise BadInput(
            sql.problem(
                f"the SQL is nested too deeply to check (more than {_MAX_NESTING} levels of parentheses)",
                _deepest_line(sql.text),
                hint="split the query with WITH clauses or steps of their own",
            )
        ) from None
    except sqlglot.errors.TokenError:
        offset = _unterminated(sql.text)
        what = (
            "a quote or comment" if offset is None else f"the {_OPENERS.get(sql.text[offset : offset + 2], sql.text[offset])!s}"
        )
        line = sql.text.count("\n", 0, offset) + 1 if offset is not None else 1
        raise BadInput(
            sql.problem(f"SQL has {what} that is never closed", line, hint="close it on the line where it should end")
        ) from None
    except sqlglot.errors.ParseError as e:
        err = e.errors[0] if e.errors else {}
        line, col, token = err.get("line", 1), err.get("col", 1), err.get("highlight") or ""
        file, template_line = sql.locate(line, max(col - len(token) + 1, 1))
        description = str(err.get("description", e)).split(". Line ")[0]
        raise BadInput(
            Problem(
                f"step '{sql.step}': SQL syntax error near '{token}': {description}",
                file=file,
                line=template_line,
                hint=f"rendered SQL line {line}; see it with `tributary compile {loaded.shown_as}`",
            )
        ) from None
    except sqlglot.errors.SqlglotError as e:
        raise BadInput(sql.problem(f"SQL error: {e}")) from None
    if len(statements) != 1 or not isinstance(statements[0], _QUERY_TYPES):
        what = (
            "no statement"
            if not statements
            else f"{len(statements)} statements"
            if len(statements) > 1
            else statements[0].key.upper()
        )
        raise BadInput(
            sql.problem(
                f"a SQL step holds one query (SELECT/WITH/VALUES), found {what}",
                hint="write the query that defines the step's rows; outputs do the writing",
            )
        )
    ctes = {cte.alias_or_name for cte in statements[0].find_all(exp.CTE)}
    referenced = {f"`{n}`" for n in (*sql.refs, *sql.sources)}
    for table in statements[0].find_all(exp.Table):
        name = table.name
        if name in node_names and name not in ctes and not table.db and f"`{name}`" not in referenced:
            kind = "source" if name in loaded.spec.sources else "ref"
            raise BadInput(
                Problem(
                    f"step '{sql.step}' reads '{name}' directly",
                    file=sql.template,
                    line=sql.locate(table.meta.get("line", 1) if hasattr(table, "meta") else 1)[1],
                    hint=f"write {{{{ {kind}('{name}') }}}} so Tributary knows the order of the steps",
                )
            )
    if strict:
        _check_strict(sql, statements[0], functions)
    if not catalog:
        _check_unknown_tables(loaded, sql, statements[0], ctes)
    _check_hints(sql, statements[0])
    _check_functions(sql, statements[0], functions)
    return statements[0], text


def has_catalog(profile: Profile) -> bool:
    """Whether the profile's Spark has a catalog of tables (Hive, or a catalog plug-in), whose
    tables a query may name; without one, a run's session knows only the pipeline's nodes."""
    conf = {str(k): str(v).lower() for k, v in profile.spark.conf.items()}
    return conf.get("spark.sql.catalogImplementation") == "hive" or any(
        k.startswith("spark.sql.catalog.") or k == "spark.sql.defaultCatalog" for k in conf
    )


def _check_unknown_tables(loaded: LoadedPipeline, sql: RenderedSql, statement: Any, ctes: set[str]) -> None:
    """A table named bare, that is neither a step, a source nor a CTE of the query: the run's
    session has only the pipeline's nodes as views (and an empty catalog), so Spark refuses it."""
    spec = loaded.spec
    nodes = {**{n: "ref" for n in spec.steps}, **{n: "source" for n in spec.sources}}
    problems = []
    for table in statement.find_all(exp.Table):
        if table.db or not isinstance(table.this, exp.Identifier) or table.find_ancestor(exp.Hint) is not None:
            continue  # delta.`/path`, db.table, a table function, a hint's relation
        name = table.name
        if name in nodes or name in ctes or name.lower() in {c.lower() for c in ctes}:
            continue
        near = closest(name, set(nodes))
        problems.append(
            sql.problem(
                f"'{name}' is neither a step, a source nor a table of the query (WITH): Spark would not find it",
                _meta_line(table.this, table),
                hint=f"did you mean {{{{ {nodes[near]}('{near}') }}}}?"
                if near
                else "read a step with {{ ref('name') }} and a source with {{ source('name') }}; tables of a catalog "
                "need a profile whose Spark has one (spark.sql.catalogImplementation: hive)",
            )
        )
    if problems:
        raise BadInput(*problems)


#: hints that take an optional number of partitions first, then columns (Spark's ResolveHints)
_PARTITIONING_HINTS = frozenset({"repartition", "repartition_by_range", "rebalance"})
_JOIN_HINTS = SPARK_HINTS - _PARTITIONING_HINTS - {"coalesce"}


def _check_hints(sql: RenderedSql, statement: Any) -> None:
    """Each `/*+ … */` hint is one of Spark's, with arguments Spark takes: COALESCE one number of
    partitions; REPARTITION, REPARTITION_BY_RANGE and REBALANCE an optional positive whole number,
    then columns; the join hints names of tables. Spark refuses the others' arguments when the
    run plans the query, and ignores a hint it does not know."""
    problems = []
    for hint in statement.find_all(exp.Hint):
        for item in hint.expressions:
            name, args = _hint_parts(item)
            lowered = name.lower()
            line = _meta_line(item, hint)
            wrong = _hint_arguments(name, lowered, args)
            if lowered not in SPARK_HINTS:
                close = closest(lowered, set(SPARK_HINTS))
                wrong = (
                    f"the hint {name} is not one of Spark's hints (Spark would ignore it)",
                    f"did you mean {close.upper()}?"
                    if close
                    else "Spark's hints: " + ", ".join(sorted(h.upper() for h in SPARK_HINTS)),
                )
            if wrong is not None:
                problems.append(sql.problem(wrong[0], line, hint=wrong[1]))
    if problems:
        raise BadInput(*problems)


def _hint_parts(item: Any) -> tuple[str, list[Any]]:
    """A hint's name and arguments; sqlglot keeps a hint it cannot read (BROADCAST(1)) as text."""
    if isinstance(item, str):
        name, _, rest = item.partition("(")
        args = []
        for text in (a.strip() for a in rest.rstrip(")").split(",") if a.strip()):
            try:
                args.append(sqlglot.parse_one(text, read="spark"))
            except sqlglot.errors.SqlglotError:
                args.append(exp.column(text))
        return name.strip(), args
    name = item.sql("spark").split("(")[0].strip()
    return name, [item.this, *item.expressions] if isinstance(item, exp.Coalesce) else list(item.expressions)


def _hint_arguments(name: str, lowered: str, args: list[Any]) -> tuple[str, str] | None:
    """What Spark would refuse in a known hint's arguments: (message, hint), or None."""
    if lowered == "coalesce":
        if len(args) != 1 or _partitions(args[0]) is None:
            given = ", ".join(a.sql("spark") for a in args) or "nothing"
            return f"COALESCE takes one number of partitions, not {given}", "e.g. /*+ COALESCE(4) */"
        return _positive(name, args[0])
    if lowered in _PARTITIONING_HINTS:
        for i, arg in enumerate(args):
            number = _partitions(arg)
            if number is None:
                if isinstance(arg, exp.Literal) and not arg.is_string:
                    return (
                        f"{name}: the number of partitions must be a whole number, not {arg.sql('spark')}",
                        f"e.g. /*+ {name}(4) */",
                    )
                continue
            if i > 0:
                return (
                    f"{name}: the number of partitions comes first, then the columns ({arg.sql('spark')} is in place {i + 1})",
                    f"e.g. /*+ {name}({arg.sql('spark')}, {args[0].sql('spark')}) */",
                )
            positive = _positive(name, arg)
            if positive is not None:
                return positive
        return None
    if lowered in _JOIN_HINTS:
        for arg in args:
            if isinstance(arg, exp.Literal) and not arg.is_string or isinstance(arg, exp.Neg):
                return (
                    f"{name} names tables (or their aliases), not {arg.sql('spark')}",
                    f"e.g. /*+ {name}(t) */ … from t join u …",
                )
    return None


def _partitions(arg: Any) -> int | None:
    """A whole-number literal (negative ones too, which _positive refuses), else None."""
    literal, sign = (arg.this, -1) if isinstance(arg, exp.Neg) else (arg, 1)
    if isinstance(literal, exp.Literal) and not literal.is_string and literal.this.isdigit():
        return sign * int(literal.this)
    return None


def _positive(name: str, arg: Any) -> tuple[str, str] | None:
    number = _partitions(arg)
    if number is not None and number < 1:
        return f"{name}: the number of partitions must be positive, not {number}", f"e.g. /*+ {name}(4) */"
    return None


def _meta_line(*nodes: Any) -> int:
    for node in nodes:
        line = getattr(node, "meta", {}).get("line")
        if line:
            return int(line)
    return 1


def _check_functions(sql: RenderedSql, statement: Any, functions: Functions) -> None:
    """Every function the query calls is Spark's or a udf from udfs/, with the udf's argument count.
    sqlglot parses the functions it knows into their own nodes; the rest are Anonymous."""
    known = spark_functions()
    udfs = {name.lower(): f for name, f in functions.sql.items()}
    problems = []
    for call in statement.find_all(exp.Anonymous):
        name = str(call.name)
        lowered = name.lower()
        line = call.meta.get("line", 1) if hasattr(call, "meta") else 1
        if isinstance(call.parent, exp.Hint):
            continue  # /*+ REPARTITION(4) */: a hint, not a function (_check_hints)
        if lowered in udfs:
            udf = udfs[lowered]
            if udf.arity is not None and len(call.expressions) != udf.arity:
                message = f"udf '{udf.name}' takes {udf.arity} argument(s), called with {len(call.expressions)}"
                problems.append(sql.problem(message, line, hint=f"see its definition at udfs/{Path(udf.file).name}:{udf.line}"))
        elif lowered not in known and (not isinstance(call.parent, exp.Dot) or _session_qualified(call.parent)):
            names = set(known) | set(udfs)
            hint = did_you_mean(lowered, names) if closest(lowered, names) else None
            problems.append(
                sql.problem(
                    f"unknown function '{name}'",
                    line,
                    hint=hint or "it is not a Spark function, and udfs/ registers no @udf of that name",
                )
            )
    if problems:
        raise BadInput(*problems)


def _session_qualified(dot: Any) -> bool:
    """`system.session.f(...)` or `session.f(...)`: a temporary function of the session, which
    only udfs/ may register (anything else would be another run's)."""
    return dot.this.sql().split(".")[0].strip("`").lower() in ("system", "session")


def _check_strict(sql: RenderedSql, statement: Any, functions: Functions) -> None:
    """The profile's strict SQL policy (sql_policy: strict): an allow-list of what a query may read
    and call, judged on its tree (framework.sql_policy says what and why)."""
    refused = strict_refusals(statement, (*sql.refs, *sql.sources), functions.sql)
    if refused:
        raise BadInput(*(sql.problem(r.message, r.line, hint=r.full_hint) for r in refused))


def _check_bare_functions(
    rendered: dict[str, RenderedSql], parsed: dict[str, tuple[Any, str]], graph: PipelineGraph, schemas: dict[str, Schema]
) -> None:
    """The strict policy on `user`, `current_user` and `session_user` written without parentheses,
    once the columns of each query's inputs are known (framework.sql_policy.bare_function_refusals)."""
    problems = []
    for step, (tree, _) in parsed.items():
        if tree is None or step not in rendered:
            continue
        inputs = [schemas.get(i) for i in graph.inputs.get(step, ())]
        known = all(s is not None and s.complete for s in inputs)
        columns = {c.name.lower() for s in inputs if s is not None for c in s.columns} if known else None
        sql = rendered[step]
        problems += [sql.problem(r.message, r.line, hint=r.full_hint) for r in bare_function_refusals(tree, columns)]
    if problems:
        raise BadInput(*problems)


def _strict_expressions(loaded: LoadedPipeline, functions: Functions) -> list[Problem]:
    """The strict policy on the SQL expressions the YAML holds, which Spark evaluates like a
    query: sources' event_time, aggregates, expectations' row conditions."""
    spec = loaded.spec
    found: list[tuple[str, tuple[Any, ...]]] = []
    for name, source in spec.sources.items():
        event_time = getattr(source, "event_time", None)
        if isinstance(event_time, str):
            found.append((event_time, ("sources", name, "event_time")))
        found += _row_conditions(source, ("sources", name))
    for name, step in spec.steps.items():
        settings = getattr(step, step.kind, None)
        for column, expression in (getattr(settings, "aggregates", None) or {}).items():
            if isinstance(expression, str):
                found.append((expression, ("steps", name, step.kind, "aggregates", column)))
        found += _row_conditions(step, ("steps", name))
    for name, output in spec.outputs.items():
        found += _row_conditions(output, ("outputs", name))
    problems = []
    for expression, at in found:
        for r in strict_refusals_in_expression(expression, functions.sql):
            problems.append(loaded.problem(f"{at[0][:-1]} '{at[1]}': {r.message}", at, hint=r.full_hint))
    return problems


def _row_conditions(node: Any, at: tuple[Any, ...]) -> list[tuple[str, tuple[Any, ...]]]:
    return [
        (e.kwargs["row_condition"], (*at, "expectations", i))
        for i, e in enumerate(getattr(node, "expectations", None) or [])
        if isinstance(e.kwargs.get("row_condition"), str)
    ]


_MAX_NESTING = 200  # parentheses: what the syntax check supports with a raised recursion limit
_OPENERS = {"'": "quote (')", '"': 'quote (")', "`": "back-quote (`)", "/*": "comment (/*)"}


@contextmanager
def _deeper_recursion(limit: int = 20_000) -> Iterator[None]:
    """sqlglot's parser recurses about twenty frames per level of parentheses, so Python's default
    limit stops it near 48 levels; generated SQL may nest deeper. (Python 3.11 keeps these frames
    off the C stack, so a higher limit is safe.)"""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def _deepest_line(text: str) -> int:
    """The 1-based line where parentheses first nest past _MAX_NESTING (else the deepest point)."""
    depth, deepest, line, at = 0, 0, 1, 1
    for char in text:
        if char == "\n":
            line += 1
        elif char == "(":
            depth += 1
            if depth > deepest:
                deepest, at = depth, line
            if depth > _MAX_NESTING:
                return line
        elif char == ")":
            depth -= 1
    return at


def _nested_past(text: str, limit: int) -> int | None:
    """The 1-based line where parentheses nest past `limit` levels, outside quotes and comments
    (Spark SQL's rules, as _unterminated reads them); None when they never do. One pass, and
    none when the text has too few parentheses to get there."""
    if text.count("(") <= limit:
        return None
    depth, line, i, n = 0, 1, 0, len(text)
    while i < n:
        char = text[i]
        if char == "\n":
            line += 1
        elif char == "(":
            depth += 1
            if depth > limit:
                return line
        elif char == ")":
            depth -= 1
        elif text.startswith("--", i) or text.startswith("/*", i) or char in "'\"`":
            if text.startswith("--", i):
                end = text.find("\n", i)
                end = n if end < 0 else end
            elif text.startswith("/*", i):
                end = text.find("*/", i + 2)
                end = n if end < 0 else end + 2
            else:
                end = i + 1
                while end < n and text[end] != char:
                    end += 2 if text[end] == "\\" and char != "`" else 1
                end += 1
            line += text.count("\n", i, min(end, n))
            i = end
            continue
        i += 1
    return None


def _unterminated(text: str) -> int | None:
    """Offset of the quote, back-quote or /* comment in `text` that is never closed (Spark SQL's
    rules: backslash escapes in quotes, doubled back-quotes, -- comments to the end of the line)."""
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                return i
            i = end + 2
        elif char in "'\"`":
            j = i + 1
            while j < n and text[j] != char:
                j += 2 if text[j] == "\\" and char != "`" else 1
            if j >= n:
                return i
            i = j + 1
        else:
            i += 1
    return None


def known_vars(spec_vars: dict[str, Any], rendered: dict[str, RenderedSql], in_values: frozenset[str]) -> set[str]:
    """The vars a pipeline has: those it declares and those its templates and values read."""
    known = set(spec_vars) | in_values
    for sql in rendered.values():
        known |= sql.vars_used
    return known


def _unused_cli_vars(cli_vars: dict[str, Any], known: set[str]) -> list[Problem]:
    return [
        Problem(f"--var {name}: this pipeline has no var '{name}'", hint=did_you_mean(name, known) or "it declares no vars")
        for name in cli_vars
        if name not in known
    ]
