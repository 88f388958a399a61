"""The `tributary` command. Heavy imports (pyspark) happen only in commands that run Spark."""

from __future__ import annotations

import json
import os
import sys
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.syntax import Syntax

from framework.errors import BadInput, Problem, RunFailed, TributaryError

if TYPE_CHECKING:
    from framework.profiles import Profile
    from framework.project import Project

app = typer.Typer(
    name="tributary",
    help="Declarative data pipelines on Spark: YAML + Spark SQL templates → Delta tables.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Off a terminal (CI logs, pipes) tables get room instead of 80 columns.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)

PipelineArg = Annotated[str, typer.Argument(help="Pipeline file or name (pipelines/<name>.yaml).")]
ProfileOpt = Annotated[
    Optional[str], typer.Option("--profile", "-p", help="Profile in configs/ (default: $TRIBUTARY_PROFILE or local).")
]
VarOpt = Annotated[Optional[list[str]], typer.Option("--var", help="Set a var: --var name=value (repeatable).")]
SelectOpt = Annotated[
    Optional[str], typer.Option("--select", "-s", help="Steps: a, +a (with upstream), a+ (with downstream), comma list.")
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks.")]
LimitOpt = Annotated[
    Optional[int],
    typer.Option(
        "--limit",
        help="Try the pipeline: each source's first N rows (files in path order), in batch, written to the scratch "
        "warehouse; the real tables are not touched.",
    ),
]
SampleOpt = Annotated[bool, typer.Option("--sample", help="Try the pipeline on each source's first 100 rows (--limit 100).")]
SAMPLE_ROWS = 100
EngineOpt = Annotated[
    bool,
    typer.Option("--no-engine", help="Start Spark in this process instead of using the warm engine (docs/warm-engine.md)."),
]


def _shown(text: object, lines: bool = True) -> str:
    """User text or data (a message quoting a value, a log line) as printed: its control characters
    written out (framework.display.for_terminal). Printed with markup=False, or through _safe."""
    from framework.display import for_terminal

    return for_terminal(str(text), lines)


def _safe(text: object) -> str:
    """User text inside a markup string: control characters written out, rich's brackets escaped."""
    from rich.markup import escape

    return escape(_shown(text, lines=False))


def _guard(debug: bool, fn, *args, **kwargs):
    """Run a command body; turn errors into one clear message and the right exit code."""
    try:
        return fn(*args, **kwargs)
    except TributaryError as e:
        if debug:
            err.print(_shown(traceback.format_exc()), markup=False, highlight=False)
        label = "invalid" if isinstance(e, BadInput) else "run failed"
        err.print(f"[bold red]{label}:[/]", end="\n" if "\n" in str(e) else " ")
        err.print(_shown(e), markup=False, soft_wrap=True)
        raise typer.Exit(e.exit_code) from None
    except KeyboardInterrupt:
        err.print("[red]interrupted[/]; outputs stay at their previous version")
        raise typer.Exit(130) from None
    except typer.Exit:
        raise
    except Exception as e:  # noqa: BLE001 - the last line of defence
        if debug:
            err.print(_shown(traceback.format_exc()), markup=False, highlight=False)
        else:
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            err.print("[bold red]run failed:[/]", end=" ")
            err.print(
                f"{type(e).__name__}: {_shown(first)}\n  (run again with --debug for the traceback)", markup=False, soft_wrap=True
            )
        raise typer.Exit(1) from None


def _context(pipeline: str | None, profile_name: str | None):
    from framework.profiles import load_profile
    from framework.project import find_project

    start = Path(pipeline) if pipeline and Path(pipeline).exists() else None
    project = find_project(start)
    profile = load_profile(project, profile_name)
    return project, profile


def _show_spark_log(log: Path, verbose: bool, lines: int = 400) -> None:
    """Spark's log of a failed run: its last lines with --verbose, else where it is."""
    if not log.is_file() or log.stat().st_size == 0:
        return
    if verbose:
        text = log.read_text(encoding="utf-8", errors="replace").splitlines()
        err.print(f"Spark's log, {_shown(log)} (last {min(lines, len(text))} lines):", markup=False)
        err.print(_shown("\n".join(text[-lines:])), markup=False, highlight=False, soft_wrap=True)
    else:
        err.print(f"Spark's log: {log} (run again with --verbose to print it)", markup=False, soft_wrap=True)


def _print_warnings(warnings: list[Problem], label: str = "warning") -> None:
    for warning in warnings:
        err.print(f"  [yellow]{label}:[/] ", end="")
        err.print(_shown(warning).replace("\n", "\n  "), markup=False, soft_wrap=True)


def _compile(
    pipeline: str, profile_name: str | None, variables: list[str] | None, select: str | None = None, interval: str | None = None
):
    from framework.compiler import compile_pipeline
    from framework.variables import parse_cli_vars

    cli_vars = parse_cli_vars(variables or [])
    project, profile = _context(pipeline, profile_name)
    path = project.pipeline_path(pipeline)
    covered = _interval(project, path, interval, "--interval") if interval is not None else None
    return compile_pipeline(project, path, profile, cli_vars, select, covered), profile


def _timezone(project, path: Path) -> str:
    """The pipeline's schedule's timezone (naive times on the command line are read in it), else UTC."""
    from framework.schedule.pipelines import read_schedule

    try:
        scheduled = read_schedule(project, path)
    except BadInput:
        return "UTC"  # compiling the pipeline says what is wrong
    return scheduled.schedule.timezone if scheduled is not None else "UTC"


def _interval(project, path: Path, text: str, option: str):
    from framework.spec.intervals import parse_interval

    return parse_interval(text, _timezone(project, path), option)


def _instant(project, path: Path, text: str, option: str):
    from framework.spec.intervals import instant

    zone = _timezone(project, path)
    try:
        return instant(text, zone)
    except ValueError as e:
        raise BadInput(Problem(f"{option} {text}: {e}", hint=f"naive times are read in {zone}")) from None


@app.command()
def validate(
    pipelines: Annotated[Optional[list[str]], typer.Argument(help="Pipeline files (default: all in pipelines/).")] = None,
    profile: ProfileOpt = None,
    explain: Annotated[
        Optional[str],
        typer.Option("--explain", metavar="STEP", help="Also print the columns validate infers for this step or source."),
    ] = None,
    debug: DebugOpt = False,
) -> None:
    """Check pipelines without starting Spark: schema, keys, refs, cycles, templates, SQL syntax, columns."""

    def body() -> None:
        from framework.compiler import compile_pipeline

        project, prof = _context(pipelines[0] if pipelines else None, profile)
        paths = [project.pipeline_path(p) for p in pipelines] if pipelines else project.all_pipelines()
        if not paths:
            raise BadInput(Problem("no pipelines found", hint="pass a pipeline file or add one under pipelines/"))
        failures, nodes, explained = [], set(), False
        backlog = _Backlog(project, prof)
        for path in paths:
            shown = project.relative(path)
            try:
                compiled = compile_pipeline(project, path, prof)
                if compiled.spec.schedule is not None:
                    backlog.check(path)
                out.print(f"[green]✓[/] {_safe(shown)}  ({len(compiled.spec.steps)} steps, {len(compiled.spec.outputs)} outputs)")
                _print_warnings(compiled.warnings)
                _print_warnings(compiled.notes, "note")
                nodes |= set(compiled.schemas)
                if explain is not None and explain in compiled.schemas:
                    from framework.display import schema_table

                    out.print(schema_table(explain, compiled.graph.kinds[explain], compiled.schemas[explain], shown))
                    explained = True
            except BadInput as e:
                failures.append(e)
                out.print(f"[red]✗[/] {_safe(shown)}")
                for p in e.problems:
                    err.print(_shown(f"  {p}").replace("\n", "\n  "), markup=False, soft_wrap=True)
        if failures:
            raise typer.Exit(2)
        if explain is not None and not explained:
            from framework.spec.base import did_you_mean

            hint = did_you_mean(explain, nodes) or None
            raise BadInput(Problem(f"--explain {explain}: no step or source of that name in the pipelines validated", hint=hint))

    _guard(debug, body)


class _Backlog:
    """`validate` asks the scheduler whether it would serve a scheduled pipeline: how many runs it
    has left to catch up depends on the run history (framework.schedule.due.unserved), read from
    the profile's warehouse without a JVM, and only when it can change the answer."""

    def __init__(self, project: Project, prof: Profile):
        self.project, self.profile, self.now = project, prof, datetime.now(UTC)

    def check(self, path: Path) -> None:
        from framework.schedule.due import unserved
        from framework.schedule.pipelines import read_schedule

        scheduled = read_schedule(self.project, path)
        if scheduled is None:
            return
        problem = unserved(scheduled, lambda: self._history(scheduled.name, scheduled.streaming), self.now)
        if problem is not None:
            raise BadInput(problem)

    def _history(self, name: str, streaming: bool) -> dict[Any, Any]:
        from framework.io.delta import local_store
        from framework.io.locations import EVENTS_TABLE, Warehouse
        from framework.schedule.history import RunLog

        table = Warehouse.of(self.project, self.profile).internal(EVENTS_TABLE)
        try:
            return RunLog(local_store(self.profile.storage_options), table).slots(name, streaming)
        except Exception as e:  # noqa: BLE001 - e.g. a cloud warehouse out of reach: counted as no history
            said = f"{type(e).__name__}: {(str(e).strip() or '-').splitlines()[0]}"
            err.print(f"note: could not read the run history in {_shown(table)} ({_shown(said)}); counted as none", markup=False)
            return {}


@app.command("compile")
def compile_cmd(
    pipeline: PipelineArg,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    select: SelectOpt = None,
    interval: Annotated[Optional[str], typer.Option("--interval", help="Render for this time interval START/END.")] = None,
    debug: DebugOpt = False,
) -> None:
    """Print the rendered SQL of each step, in run order."""

    def body() -> None:
        compiled, _ = _compile(pipeline, profile, var, select, interval)
        if compiled.interval is not None:
            out.print(f"[dim]-- interval {_safe(compiled.interval)}[/]")
        _print_warnings(compiled.warnings)
        for step in compiled.selected:
            spec = compiled.spec.steps[step]
            out.rule(f"[bold]{_safe(step)}[/] ({_safe(spec.kind)})", align="left")
            if step in compiled.sql:
                out.print(f"[dim]-- from {_safe(compiled.sql[step].template)}[/]")
                out.print(Syntax(compiled.sql[step].text.strip(), "sql", theme="ansi_dark", word_wrap=True))
            else:
                spelled = json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_defaults=True), indent=2)
                out.print(_shown(spelled), markup=False, highlight=False, soft_wrap=True)  # a description is the user's text

    _guard(debug, body)


@app.command("plan")
def plan_cmd(
    pipeline: PipelineArg,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    select: SelectOpt = None,
    full_refresh: Annotated[bool, typer.Option("--full-refresh", help="Plan a rebuild of the outputs.")] = False,
    limit: LimitOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Show what a run would do, without starting Spark: steps in order, what each reads and how it
    runs, what is computed once and shared, and per output its table, mode and checks."""

    def body() -> None:
        from framework.display import plan_tables
        from framework.plan import plan_for

        compiled, prof = _compile(pipeline, profile, var, select)
        planned = plan_for(compiled, prof, full_refresh, limit)
        for table in plan_tables(planned):
            out.print(table)

    _guard(debug, body)


@app.command()
def run(
    ctx: typer.Context,
    pipeline: PipelineArg,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    select: SelectOpt = None,
    full_refresh: Annotated[bool, typer.Option("--full-refresh", help="Rebuild outputs from scratch (overwrite).")] = False,
    show: Annotated[
        Optional[int], typer.Option("--show", help="Print the first N rows of each output written (a try: 10 unless given).")
    ] = None,
    limit: LimitOpt = None,
    sample: SampleOpt = False,
    continuous: Annotated[
        bool, typer.Option("--continuous", help="Streaming: keep running every trigger.processing_time until Ctrl-C/SIGTERM.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before --full-refresh starts a stream over.")] = False,
    interval: Annotated[
        Optional[str],
        typer.Option(
            "--interval",
            help="Batch: the time interval START/END the run covers ({{ interval_start }}, {{ interval_end }}); "
            "naive times are in the schedule's timezone. Default: the schedule's latest complete interval.",
        ),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="On failure, print Spark's log (its errors with Java stacks).")
    ] = False,
    no_engine: EngineOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Run a pipeline: build every step, write the outputs to Delta, log the run.

    A streaming pipeline processes everything new and stops, or with --continuous keeps running."""

    def body() -> None:
        rows = _try_rows(limit, sample)
        if continuous and rows is not None:
            raise BadInput(Problem("--limit runs a try once, as one batch; --continuous keeps a stream running: give one"))
        _engine_first(ctx, pipeline, profile, no_engine, asks=full_refresh and not yes)
        compiled, prof = _compile(pipeline, profile, var, select, interval)
        streaming = compiled.spec.mode == "streaming" and rows is None  # a try runs as one batch, in scratch
        if continuous and not streaming:
            raise BadInput(Problem("--continuous is for streaming pipelines", hint="set mode: streaming in the pipeline"))
        if full_refresh and streaming and not yes:
            outputs = ", ".join(compiled.selected_outputs())
            question = (
                f"--full-refresh starts {compiled.name}'s stream over: its checkpoints are deleted and the tables "
                f"{outputs} get a new version without rows (their history stays). Continue?"
            )
            if not _interactive():
                raise BadInput(Problem("--full-refresh of a streaming pipeline needs confirmation", hint="add --yes"))
            if not typer.confirm(question):
                raise BadInput(Problem("--full-refresh declined: nothing was changed"))
        _through_engine(ctx, prof, no_engine, yes=True)  # asked here already
        from framework.display import LiveProgress, arrow_table, quality_table, run_summary
        from framework.engine.runner import run_pipeline, show_rows
        from framework.io.delta import local_store

        out.print(
            f"[bold]{_safe(compiled.name)}[/] · profile {_safe(prof.name)} · {len(compiled.selected)} step(s), "
            f"{len(compiled.selected_outputs())} output(s)"
            + (f" · interval {_safe(compiled.interval.label())}" if compiled.interval is not None else "")
        )
        with LiveProgress(out) as progress:
            try:
                result = run_pipeline(
                    compiled, prof, full_refresh=full_refresh, continuous=continuous, reporter=progress, limit=rows
                )
            except TributaryError as e:
                if e.result is not None and e.result.outputs:  # what did and did not reach the tables
                    out.print(run_summary(e.result))
                elif e.result is not None and e.result.quality:  # show what stopped the run
                    out.print(quality_table(e.result.quality))
                if isinstance(e, RunFailed) and e.result is not None and e.result.log_file:
                    _show_spark_log(Path(e.result.log_file), verbose)
                raise
        out.print(run_summary(result))
        first = show if show is not None else (10 if rows is not None else 0)
        if first:
            store = local_store(prof.storage_options) if result.store == "delta-rs" else None
            for o in result.outputs:
                if store is not None and not o.name.startswith("_"):
                    out.print(arrow_table(f"{o.name} (first {first} rows)", show_rows(store, o.table, first)))

    try:
        _guard(debug, body)
    finally:
        _stop_spark()


@app.command()
def watch(
    pipeline: PipelineArg,
    limit: LimitOpt = None,
    sample: SampleOpt = False,
    show: Annotated[int, typer.Option("--show", help="Print the first N rows of each output after each run.")] = 5,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    select: SelectOpt = None,
    max_runs: Annotated[Optional[int], typer.Option("--max-runs", hidden=True, help="Stop after N cycles (tests).")] = None,
    debug: DebugOpt = False,
) -> None:
    """Validate and rerun a pipeline whenever a file under pipelines/, sql/ or udfs/ (or its data)
    changes, in one Spark session kept warm, printing the first rows of its outputs. A mistake is
    printed and watching goes on; Ctrl-C stops."""

    def body() -> int:
        from framework.project import find_project
        from framework.watch import Watch

        rows = _try_rows(limit, sample)
        start = Path(pipeline) if Path(pipeline).exists() else None
        project = find_project(start)
        watching = Watch(project, pipeline, out, profile, var or [], select, rows, show, max_runs)
        watching.check()
        return watching.run()

    try:
        code = _guard(debug, body)
    finally:
        _stop_spark()
    raise typer.Exit(code)


def _try_rows(limit: int | None, sample: bool) -> int | None:
    """The rows a try reads of each source (None: a real run)."""
    if limit is not None and sample:
        raise BadInput(Problem("--limit and --sample both ask for a try: give one"))
    if limit is not None and limit < 1:
        raise BadInput(Problem(f"--limit {limit}: a try reads at least 1 row of each source"))
    return SAMPLE_ROWS if sample else limit


def _engine_first(ctx: typer.Context, pipeline: str, profile_name: str | None, no_engine: bool, asks: bool) -> None:
    """A running warm engine takes the command at once (it checks the input as this process would,
    with its modules already imported); without one, one starts now, so its JVM starts while the
    input is checked here (bad input is then said without waiting for it). A command that may ask
    a question (`asks`) asks it here first."""
    from framework.warm.client import warm_up

    try:
        _, prof = _context(pipeline, profile_name)
    except TributaryError:
        return  # said by the command's own checks
    if not asks:
        _through_engine(ctx, prof, no_engine, start=False)
    warm_up(prof, no_engine)


def _through_engine(ctx: typer.Context, prof, no_engine: bool, start: bool = True, **overrides) -> None:
    """Hand the current command to the warm engine when the profile allows it (`start`: starting one
    if none runs): its output is printed here and its exit code ends this command (typer.Exit).
    Returns when the command runs here."""
    from framework.warm.client import argv_of, hand_over

    argv = argv_of(ctx, overrides)
    code = hand_over(
        prof, argv, no_engine, lambda text: err.print(_shown(text), style="dim", markup=False, soft_wrap=True), start
    )
    if code is not None:
        raise typer.Exit(code)


def _interactive() -> bool:
    """Someone can answer a question (stdin is a terminal)."""
    return sys.stdin.isatty()


@app.command()
def graph(
    pipeline: PipelineArg,
    svg: Annotated[Optional[Path], typer.Option("--svg", help="Also write the graph as an SVG picture.")] = None,
    html: Annotated[Optional[Path], typer.Option("--html", help="Also write an HTML page with the picture.")] = None,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Print the pipeline DAG as Mermaid text (paste into Markdown); or draw it and print the files written."""

    def body() -> None:
        from html import escape

        compiled, _ = _compile(pipeline, profile, var)
        if not svg and not html:
            out.print(compiled.graph.to_mermaid(), end="", markup=False)
            return
        picture = compiled.graph.to_svg()
        if svg:
            svg.write_text(picture, encoding="utf-8")
            out.print(_shown(svg), markup=False, highlight=False, soft_wrap=True)
        if html:
            html.write_text(
                f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(compiled.name)}</title>"
                "<style>body{font-family:Helvetica,Arial,sans-serif;margin:2em}</style></head>"
                f"<body><h1>{escape(compiled.name)}</h1><p>{escape(compiled.spec.description or '')}</p>{picture}</body></html>\n",
                encoding="utf-8",
            )
            out.print(_shown(html), markup=False, highlight=False, soft_wrap=True)

    _guard(debug, body)


@app.command()
def schema() -> None:
    """Print the pipeline spec as JSON Schema (for editor completion: tributary schema > tributary.schema.json)."""
    from framework.spec.json_schema import pipeline_json_schema

    out.print(json.dumps(pipeline_json_schema(), indent=2), markup=False, soft_wrap=True)


@app.command()
def runs(
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many rows per pipeline.")] = 20,
    pipeline: Annotated[Optional[str], typer.Option("--pipeline", help="Only this pipeline (its name).")] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only intervals and runs whose last attempt did not end ok.")] = False,
    scratch: Annotated[bool, typer.Option("--scratch", help="The tries (`run --limit`) instead.")] = False,
    profile: ProfileOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Run history per pipeline from the run log (<warehouse>/_tributary/events): one row per time
    interval (its runs are its attempts) or per run without one, newest first."""

    def body() -> None:
        from framework.display import rows_table
        from framework.io.delta import local_store
        from framework.io.locations import EVENTS_TABLE, Warehouse, scratch_warehouse
        from framework.schedule.history import RunLog, history_rows

        project, prof = _context(None, profile)
        warehouse = scratch_warehouse(project, prof) if scratch else Warehouse.of(project, prof)
        table = warehouse.internal(EVENTS_TABLE)
        records = RunLog(local_store(prof.storage_options), table).runs([pipeline] if pipeline else None)
        shown = history_rows(records, failed_only=failed, limit=int(limit))
        if not shown:
            out.print(
                ("no failed runs" if failed else "no runs yet") + (f" of {_shown(pipeline)}" if pipeline else ""), markup=False
            )
            return
        for name, rows in shown.items():
            notes = []  # long texts go under the table, whole, not folded into a narrow column
            for row in rows:
                for key, label in (("state predicted → observed", "state predicted → observed"), ("error", "error")):
                    text = row.pop(key, None)
                    if text:
                        notes.append(f"  {row['run']}: {label}: " + str(text).replace("\n", "\n    "))
            out.print(rows_table(f"{name}: {'failed ' if failed else ''}runs ({table})", rows))
            for note in notes:
                out.print(_shown(note), markup=False, soft_wrap=True, highlight=False)

    _guard(debug, body)


@app.command("next")
def next_cmd(
    pipelines: Annotated[Optional[list[str]], typer.Argument(help="Pipelines (default: every one with a schedule).")] = None,
    profile: ProfileOpt = None,
    debug: DebugOpt = False,
) -> None:
    """When each schedule fires next, what it runs then, and what is due now (no Spark)."""

    def body() -> None:
        from framework.display import rows_table
        from framework.io.delta import local_store
        from framework.io.locations import EVENTS_TABLE, Warehouse
        from framework.schedule.clock import SystemClock
        from framework.schedule.due import BadSchedule, outlook
        from framework.schedule.history import RunLog
        from framework.schedule.pipelines import scheduled_pipelines

        project, prof = _context(pipelines[0] if pipelines else None, profile)
        found, problems = scheduled_pipelines(project, pipelines)
        if not found:
            for problem in problems:
                err.print(f"not scheduled: {_shown(problem)}", markup=False, soft_wrap=True)
            if problems:
                raise typer.Exit(2)
            out.print("no pipeline has a schedule: add schedule: {cron: '0 * * * *'} to one under pipelines/", markup=False)
            return
        log = RunLog(local_store(prof.storage_options), Warehouse.of(project, prof).internal(EVENTS_TABLE))
        now = SystemClock().now()
        rows = []
        for p in found:
            try:
                seen = outlook(p, log.slots(p.name, p.streaming), now)
            except BadSchedule as e:  # named below; the others are listed
                problems.append(e.problem)
                continue
            cron = p.schedule.parsed()
            fire = seen.next_fire
            runs_then = "available now" if p.streaming else (cron.interval_ending(fire).label() if fire else "–")
            rows.append(
                {
                    "pipeline": p.name,
                    "schedule": f"{p.schedule.cron} ({p.schedule.timezone})",
                    "next fire": fire.astimezone(cron.zone).isoformat() if fire else "– (past its end)",
                    "runs then": runs_then,
                    "due now": (f"{len(seen.due)}: from {seen.due[0].label()}" if seen.due else "–"),
                    "retries waiting": ", ".join(
                        f"{d.label()} (attempt {d.attempt}) at {d.at.astimezone(cron.zone).isoformat()}" for d in seen.waiting
                    )
                    or "–",
                }
            )
        out.print(rows_table(f"schedules at {now.isoformat(timespec='seconds')}", rows))
        for problem in problems:
            err.print(f"not scheduled: {_shown(problem)}", markup=False, soft_wrap=True)
        if problems:
            raise typer.Exit(2)

    _guard(debug, body)


TableArg = Annotated[
    str,
    typer.Argument(
        help="An output (service_stats, or pipeline.output), a Tributary table (quarantine, late_rows, quality, "
        "integration_quality, events) or a Delta table's folder."
    ),
]
ScratchOpt = Annotated[bool, typer.Option("--scratch", help="The tables `run --limit` wrote (the scratch warehouse).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the rows as JSON Lines (for scripts).")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Print the rows as CSV (for scripts).")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Stop the SQL after this many seconds.")]


@app.command()
def show(
    table: TableArg,
    version: Annotated[Optional[int], typer.Option("--version", help="The table as of this version.")] = None,
    timestamp: Annotated[
        Optional[str], typer.Option("--timestamp", help="The table as of this time (ISO 8601; UTC without a zone).")
    ] = None,
    where: Annotated[Optional[str], typer.Option("--where", help="Only rows matching this SQL condition (DuckDB).")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many rows.")] = 20,
    scratch: ScratchOpt = False,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
    timeout: TimeoutOpt = 60.0,
    profile: ProfileOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Print a Delta table's first rows, now or at an older version, without Spark."""

    def body() -> None:
        from framework.look import commands

        shown = commands.show(
            _catalog(profile, scratch), table, version=version, timestamp=timestamp, where=where, limit=limit, timeout_s=timeout
        )
        _print_rows(shown, as_json, as_csv)

    _guard(debug, body)


@app.command()
def scheduler(
    pipelines: Annotated[
        Optional[list[str]], typer.Argument(help="Pipelines to serve (default: every one with a schedule).")
    ] = None,
    once: Annotated[
        bool, typer.Option("--once", help="Run what is due now, then exit (for a crontab line); exit 1 if a run failed.")
    ] = False,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Run pipelines by their schedule: in the foreground, one run at a time on one Spark session,
    retrying failed runs; SIGTERM/Ctrl-C abandons the run under way and stops (the next start runs
    it again). --once runs what is due and exits."""

    def body() -> None:
        from framework.schedule.scheduler import Scheduler
        from framework.variables import parse_cli_vars

        project, prof = _context(pipelines[0] if pipelines else None, profile)
        serving = Scheduler(project, prof, _say, pipelines or None, cli_vars=parse_cli_vars(var or []))
        if not serving.serve(once=once) and once:
            raise typer.Exit(1)  # a run failed (its retries, if any, are due at a later start)

    try:
        _guard(debug, body)
    finally:
        _stop_spark()


@app.command()
def backfill(
    pipeline: PipelineArg,
    begin: Annotated[
        str, typer.Option("--from", help="Start of the first interval (a date or time; naive: the schedule's timezone).")
    ],
    end: Annotated[str, typer.Option("--to", help="End of the last interval.")],
    parallel: Annotated[
        int, typer.Option("--parallel", help="Run up to K intervals at once (outputs that append or merge).")
    ] = 1,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Run every interval of the pipeline's schedule within --from … --to once, in order, skipping
    the intervals already committed (a backfill run again writes nothing twice). Exit 1 if one failed."""

    def body() -> None:
        import threading

        from framework.schedule.attempt import Attempts, Sessions, stop_on_signals
        from framework.schedule.backfill import backfill as run_backfill
        from framework.schedule.clock import SystemClock
        from framework.schedule.history import OK
        from framework.variables import parse_cli_vars

        project, prof = _context(pipeline, profile)
        path = project.pipeline_path(pipeline)
        first, last = _instant(project, path, begin, "--from"), _instant(project, path, end, "--to")
        if first >= last:
            raise BadInput(Problem(f"--from {begin} must come before --to {end}"))
        stopping = threading.Event()
        sessions = Sessions(prof, started=lambda: stop_on_signals(stopping))
        attempts = Attempts(project, prof, SystemClock(), sessions, stopping, _say, parse_cli_vars(var or []))
        try:
            done = run_backfill(attempts, path, first, last, parallel)
        finally:
            sessions.close()
        failed = [d for d in done if d.outcome != OK]
        out.print(f"backfill: {len(done) - len(failed)} interval(s) ok, {len(failed)} failed", markup=False)
        if stopping.is_set():
            err.print("[red]stopped[/]: the intervals not run are run by the next backfill")
            raise typer.Exit(130)
        if failed:
            raise RunFailed(f"{len(failed)} interval(s) failed, first {failed[0].due.label()}: {failed[0].error}")

    try:
        _guard(debug, body)
    finally:
        _stop_spark()


def _say(line: str) -> None:
    """A line of the scheduler's or backfill's log, stamped with the time (UTC)."""
    from datetime import UTC, datetime

    out.print(f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M:%S')} {_shown(line)}", markup=False, soft_wrap=True, highlight=False)


@app.command()
def history(
    table: TableArg,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many versions (newest first).")] = 20,
    scratch: ScratchOpt = False,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
    profile: ProfileOpt = None,
    debug: DebugOpt = False,
) -> None:
    """List a Delta table's versions: when, which operation and Tributary run, rows added and removed."""

    def body() -> None:
        from framework.look import commands

        _print_rows(commands.history(_catalog(profile, scratch), table, limit), as_json, as_csv, unit="versions")

    _guard(debug, body)


@app.command()
def query(
    sql: Annotated[str, typer.Argument(help='One SELECT; tables by name: "select * from service_stats where calls > 100".')],
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many rows to print.")] = 100,
    scratch: ScratchOpt = False,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
    timeout: TimeoutOpt = 60.0,
    profile: ProfileOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Run one SQL query (DuckDB) over Delta tables named as `show` names them, without Spark.
    The query reads the tables it names and nothing else: no files, no extensions."""

    def body() -> None:
        from framework.look import commands

        _print_rows(commands.query(_catalog(profile, scratch), sql, limit, timeout), as_json, as_csv)

    _guard(debug, body)


def _catalog(profile_name: str | None, scratch: bool):
    from framework.look.tables import Catalog

    project, prof = _context(None, profile_name)
    return Catalog(project, prof, scratch=scratch)


def _print_rows(shown, as_json: bool, as_csv: bool, unit: str = "rows") -> None:  # framework.look.commands.Rows
    from framework.display import arrow_table, csv_text, json_lines

    if as_json and as_csv:
        raise BadInput(Problem("--json and --csv both choose the output: give one"))
    if as_json or as_csv:
        sys.stdout.write(json_lines(shown.rows) if as_json else csv_text(shown.rows))
        sys.stdout.flush()
        return
    n = shown.rows.num_rows
    if (shown.total if shown.total is not None else n) == 1:
        unit = unit.removesuffix("s")
    if shown.total is not None and (shown.more or shown.total != n):
        caption = f"first {n:,} of {shown.total:,} {unit}"
    elif shown.more:
        caption = f"first {n:,} {unit} (more left out: --limit)"
    else:
        caption = f"{n:,} {unit}"
    out.print(_shown(shown.title, lines=False), style="bold", markup=False, soft_wrap=True)
    out.print(arrow_table(None, shown.rows))
    where = f" · {_shown(shown.location, lines=False)}" if shown.location else ""
    out.print(caption + where, style="dim", markup=False, soft_wrap=True)


@app.command()
def report(
    pipeline: Annotated[
        Optional[str], typer.Argument(help="Pipeline file or name (default: the latest run of any pipeline).")
    ] = None,
    run_id: Annotated[Optional[str], typer.Option("--run", help="Run id (see `tributary runs`; default: the latest).")] = None,
    out_file: Annotated[
        Optional[Path], typer.Option("--out", help="HTML file to write (default: reports/<pipeline>-<run id>.html).")
    ] = None,
    profile: ProfileOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Write one run as a self-contained HTML page: steps, outputs, quality, quarantine and the graph."""

    def body() -> None:
        from framework.reporting import gather_run, render_html

        project, prof = _context(pipeline, profile)
        found = gather_run(project, prof, run_id=run_id, pipeline=pipeline)
        path = out_file or project.root / "reports" / f"{found.pipeline}-{found.run_id}.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_html(found), encoding="utf-8")
        out.print(_shown(path), markup=False, soft_wrap=True)

    _guard(debug, body)


@app.command()
def capacity(
    pipeline: PipelineArg,
    step: Annotated[Optional[str], typer.Option("--step", help="One join, swa or tumbling step (default: all of them).")] = None,
    sample: Annotated[int, typer.Option("--sample", help="Rows per input used to time one pair comparison.")] = 1500,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    debug: DebugOpt = False,
) -> None:
    """What the pipeline's stateful steps need, predicted from their input, next to what the last
    run observed: nodes for a windowed join (n = max(K)·Δt·2·max(N)), open windows and state for
    swa (c = ⌊λ/μ⌋ + 1, state c × n × tuple), queue length and residence time for tumbling
    (formula (11)); docs/references.md."""

    def body() -> None:
        from rich.table import Table

        from framework.capacity.join import last_observed, measure_join
        from framework.display import capacity_table
        from framework.engine.runner import plan_frames
        from framework.engine.session import spark_session
        from framework.engine.state_figures import predicted
        from framework.integration.capacity import Figures
        from framework.io.delta import local_store
        from framework.io.locations import EVENTS_TABLE, Warehouse
        from framework.operators import kind_of
        from framework.operators.registry import StateModel

        compiled, prof = _compile(pipeline, profile, var, f"+{step}" if step else None)
        measured = {
            n: s for n, s in compiled.spec.steps.items() if kind_of(s).state_model is not None and (step is None or n == step)
        }
        if not measured:
            raise BadInput(
                Problem(
                    f"no join, swa or tumbling step {'named ' + repr(step) + ' ' if step else ''}in {compiled.name}",
                    hint="capacity models the steps that hold state: windowed joins and window aggregations",
                )
            )
        spark = spark_session(prof)
        frames = plan_frames(compiled, prof, spark)
        events = local_store(prof.storage_options).query(
            Warehouse.of(compiled.project, prof).internal(EVENTS_TABLE),
            "SELECT * FROM t WHERE event IN ('output_end', 'capacity') ORDER BY ts",
        )
        logged = events.to_pylist() if events.num_rows else []
        for name, spec in measured.items():
            if kind_of(spec).state_model == StateModel.JOIN_NODES:
                settings = kind_of(spec).settings(spec)
                inputs = {i: frames.frames[i] for i in (settings.left, settings.right)}
                result = measure_join(spark, name, settings, inputs, sample)
                outputs = [o for o in compiled.spec.outputs if compiled.spec.output_step(o) == name]
                result.observed = last_observed(events, outputs) if events.num_rows else {}
                table = Table(title=f"capacity of join step '{name}'", title_justify="left", header_style="bold")
                for column in ("quantity", "predicted", "observed"):
                    table.add_column(column)
                for row in result.rows():
                    table.add_row(*row)
                out.print(table)
                continue
            with err.status(f"reading the input of step '{name}'"):
                figures, _, _ = predicted(frames.contexts[name])
            last = [json.loads(e["details"]) for e in logged if e["event"] == "capacity" and e["name"] == name]
            if last:
                figures.observed = Figures.from_dict(last[-1]).observed
                figures.notes.append("observed: the last run of this step in the run log")
            else:
                figures.notes.append("observed: no run of this step in the run log yet")
            out.print(capacity_table(figures))

    try:
        _guard(debug, body)
    finally:
        _stop_spark()


@app.command()
def tune(
    ctx: typer.Context,
    pipeline: PipelineArg,
    step: Annotated[str, typer.Argument(help="The swa step whose size and timeout to choose.")],
    alpha: Annotated[float, typer.Option("--alpha", help="n: the smallest size with F(n) >= alpha (degree CDF).")] = 0.9,
    beta: Annotated[float, typer.Option("--beta", help="t: the smallest whole second with 1 - F(t) <= beta.")] = 0.05,
    sample: Annotated[
        Optional[float], typer.Option("--sample", help="Fit on this share of the instances (0-1], whole instances kept.")
    ] = None,
    plots: Annotated[Optional[Path], typer.Option("--plots", help="Folder for the PNG plots (default: reports/tune/).")] = None,
    write: Annotated[bool, typer.Option("--write", help="Set size: and timeout: in the pipeline's YAML.")] = False,
    learn: Annotated[
        bool, typer.Option("--learn", help="size: auto steps: add the input to the step's history of per-head sizes.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the tuning as JSON.")] = False,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    no_engine: EngineOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Choose an swa step's window size n and timeout t from its input (Li et al., §5.2–5.3): fit
    the instances' degree (Erlang) and duration (hyper-Erlang), print F around the choice, draw
    the fits, and with --write put them in the YAML."""

    def body() -> None:
        from framework.capacity.tuning import check_levels, read_instances
        from framework.capacity.tuning import tune as choose
        from framework.operators import kind_of, kinds
        from framework.spec.base import did_you_mean
        from framework.spec.text import read_text

        check_levels(alpha, beta)
        if sample is not None and not 0 < sample <= 1:
            raise BadInput(Problem(f"--sample {sample:g}: a share must lie in (0, 1]", hint="e.g. --sample 0.1"))
        compiled, prof = _compile(pipeline, profile, var)
        loaded = compiled.loaded
        text = read_text(loaded.path, loaded.shown_as)  # --write refuses if the file differs from this
        spec = compiled.spec.steps.get(step)
        if spec is None:
            raise BadInput(
                loaded.problem(f"no step '{step}' in {compiled.name}", ("steps",), did_you_mean(step, list(compiled.spec.steps)))
            )
        if not kind_of(spec).tunable:
            tunable = [n for n, s in compiled.spec.steps.items() if kind_of(s).tunable]
            names = [k.name for k in kinds().values() if k.tunable]
            raise BadInput(
                loaded.problem(
                    f"step '{step}' is a {spec.kind} step: tune chooses the size and timeout of an {' or '.join(names)} step, "
                    "whose windows close by count and by event time",
                    ("steps", step),
                    f"{' or '.join(names)} steps here: {', '.join(tunable)}"
                    if tunable
                    else f"add an {' or '.join(f'{n}:' for n in names)} step with an event_time to tune",
                )
            )
        if learn and not kind_of(spec).learns(spec):
            raise BadInput(
                loaded.problem(
                    f"--learn: step '{step}' has a fixed size and timeout, so it learns nothing per head",
                    ("steps", step, spec.kind, "size"),
                    "set size: auto (and optionally timeout: auto), or drop --learn",
                )
            )
        _through_engine(ctx, prof, no_engine)
        from dataclasses import replace

        from framework.engine.runner import plan_frames
        from framework.engine.session import spark_session

        compiled = replace(compiled, selected=compiled.graph.select(f"+{step}"))  # the step and what it reads
        spark = spark_session(prof)
        if learn:
            _learn(compiled, prof, spark, step)
            return
        with err.status(f"reading the instances of step '{step}'"):
            instances = read_instances(plan_frames(compiled, prof, spark).contexts[step], sample)
        with err.status(f"fitting {len(instances.degree):,} instances"):
            tuning = choose(step, kind_of(spec).settings(spec), instances, alpha, beta)
        _show_tuning(tuning, as_json, plots or compiled.project.root / "reports" / "tune", compiled.name)
        if write:
            _write_tuning(tuning, loaded, text, spec.kind)

    try:
        _guard(debug, body)
    finally:
        _stop_spark()


def _learn(compiled, prof, spark, step: str) -> None:
    """tune --learn: the step's input joins its history of per-head sizes (size: auto)."""
    from framework.engine.results import new_run_id
    from framework.engine.runner import plan_frames
    from framework.engine.window_history import learn_from
    from framework.integration.learned_sizes import describe, history_table
    from framework.io.delta import choose_store
    from framework.io.locations import Warehouse
    from framework.operators import StepContext, kind_of
    from framework.operators.keyed_windows import checked_input

    spec = compiled.spec.steps[step]
    warehouse = Warehouse.of(compiled.project, prof)
    store = choose_store(spark, prof.delta_writer, prof.storage_options)
    with err.status(f"learning per-head window sizes of step '{step}'"):
        inputs = plan_frames(compiled, prof, spark).contexts[step].inputs
        rows = checked_input(StepContext(spark, step, spec, inputs))
        settings = kind_of(spec).settings(spec)
        _, sizes = learn_from(store, warehouse.internal, compiled.name, step, settings, rows, f"tune-{new_run_id()}")
    out.print(f"{step}: {describe(sizes)}", markup=False, soft_wrap=True)
    out.print(f"history: {history_table(warehouse.internal, compiled.name, step)}", markup=False, soft_wrap=True)


def _show_tuning(tuning, as_json: bool, folder: Path, pipeline: str) -> None:
    from framework.capacity.plots import plot_tuning
    from framework.capacity.tuning import report_lines, summary

    pictures = plot_tuning(tuning, folder, f"{pipeline}-{tuning.step}")
    if as_json:
        out.print_json(json.dumps({**summary(tuning), "plots": [str(p) for p in pictures]}))
        return
    for line in report_lines(tuning):
        out.print(line, markup=False, soft_wrap=True)
    out.print("  plots: " + ", ".join(str(p) for p in pictures), markup=False, soft_wrap=True)


def _write_tuning(tuning, loaded, text: str, kind: str) -> None:
    """Set the chosen size and timeout under the step's kind key (`kind`)."""
    from framework.spec.rewrite import set_scalars, write_if_unchanged

    at = ("steps", tuning.step, kind)
    changed = set_scalars(text, loaded.shown_as, {(*at, "size"): str(tuning.size), (*at, "timeout"): f"{tuning.timeout}s"})
    if changed == text:
        out.print(f"{loaded.shown_as} already has size: {tuning.size} and timeout: {tuning.timeout}s", markup=False)
        return
    write_if_unchanged(loaded.path, text, changed, loaded.shown_as)
    out.print(f"wrote size: {tuning.size} and timeout: {tuning.timeout}s into {loaded.shown_as}", markup=False)


@app.command()
def evaluate(
    ctx: typer.Context,
    pipeline: PipelineArg,
    step: Annotated[
        Optional[list[str]], typer.Option("--step", help="A swa/tumbling step (default: all declaring truth:).")
    ] = None,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    no_engine: EngineOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Completeness and correctness of SWA/tumbling steps against the ground truth in their input
    (truth: {instance, primary}), over all input read in batch; figures go to
    _tributary/integration_quality. Writes no outputs."""

    def body() -> None:
        from framework.display import integration_table
        from framework.engine.results import new_run_id
        from framework.engine.runner import plan_frames
        from framework.engine.session import spark_session
        from framework.integration.evaluation import evaluable, evaluate_step, record
        from framework.io.delta import choose_store
        from framework.io.locations import INTEGRATION_TABLE, Warehouse
        from framework.operators import kinds

        compiled, prof = _compile(pipeline, profile, var, ",".join(f"+{s}" for s in step) if step else None)
        chosen = [n for n in compiled.selected if evaluable(compiled.spec.steps.get(n)) and (not step or n in step)]
        if not chosen:
            named = f"step(s) {', '.join(step)} of {compiled.name}" if step else f"the steps of {compiled.name}"
            measured = " or ".join(f"{k.name}:" for k in kinds().values() if k.units is not None)
            raise BadInput(
                Problem(
                    f"nothing to evaluate in {named}: evaluation needs a {measured} step declaring truth:",
                    hint="add truth: {instance: <instance id column>, primary: <is-head column>} to the step",
                )
            )
        _through_engine(ctx, prof, no_engine)
        spark = spark_session(prof)
        contexts = plan_frames(compiled, prof, spark).contexts
        evaluations = []
        with out.status("evaluating") as status:
            for name in chosen:
                status.update(f"evaluating {name}")
                evaluations.append(evaluate_step(contexts[name]))
        out.print(integration_table(evaluations))
        store = choose_store(spark, prof.delta_writer, prof.storage_options)
        table = Warehouse.of(compiled.project, prof).internal(INTEGRATION_TABLE)
        record(store, table, evaluations, "evaluate-" + new_run_id(), compiled.name)
        out.print(f"figures appended to {_shown(table)}", markup=False)

    try:
        _guard(debug, body)
    finally:
        _stop_spark()


generate_app = typer.Typer(help="Write synthetic input data for the examples and benchmarks.", no_args_is_help=True)
app.add_typer(generate_app, name="generate")


@generate_app.command("contacts")
def generate_contacts_cmd(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to write phones/ and emails/ into.")] = Path(
        "data/samples/contacts"
    ),
    people: Annotated[int, typer.Option("--people", help="How many people (rows per stream, roughly).")] = 2000,
    files: Annotated[int, typer.Option("--files", help="Files per stream.")] = 8,
    seed: Annotated[int, typer.Option("--seed")] = 1,
) -> None:
    """Two timestamped streams about the same people (phones, e-mails) for the contact-join example."""
    from framework.generators.contacts import generate_contacts

    counts = generate_contacts(out_dir, people=people, files=files, seed=seed)
    out.print(f"wrote {counts['phones']:,} phone rows and {counts['emails']:,} e-mail rows under {out_dir}/", markup=False)


@generate_app.command("ticks")
def generate_ticks_cmd(
    requests: Annotated[int, typer.Option("--requests", help="Requests (contexts): each gets every stock's tick list.")] = 10,
    stocks: Annotated[int, typer.Option("--stocks", help="Stocks per request (2-10).")] = 5,
    ticks: Annotated[int, typer.Option("--ticks", help="Ticks per stock and request (the paper: 30,000).")] = 30_000,
    first: Annotated[int, typer.Option("--first", help="Id of the first request (to add requests later).")] = 0,
    seed: Annotated[int, typer.Option("--seed")] = 1,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to write one folder per stock into.")] = Path(
        "data/samples/ticks"
    ),
) -> None:
    """Stock tick lists per request for the trading example (one Parquet file per stock and request)."""
    from framework.generators.ticks import generate_ticks

    def body() -> None:
        if not 2 <= stocks <= 10 or requests < 1 or ticks < 2 or first < 0:
            raise BadInput("--stocks must be 2-10, --requests at least 1, --ticks at least 2, --first at least 0")
        counts = generate_ticks(out_dir, requests=requests, stocks=stocks, ticks=ticks, seed=seed, first=first)
        out.print(f"wrote {requests:,} request(s) × {len(counts)} stocks × {ticks:,} ticks under {out_dir}/", markup=False)

    _guard(False, body)


@generate_app.command("service-trace")
def generate_service_trace_cmd(
    instances: Annotated[int, typer.Option("--instances", help="Page instances (about 11.4 tuples each).")] = 15000,
    seed: Annotated[int, typer.Option("--seed")] = 1,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to write static/, images/ and _trace.json into.")] = Path(
        "data/samples/service_trace"
    ),
    files: Annotated[int, typer.Option("--files", help="Files per stream, cut in arrival order.")] = 20,
    fmt: Annotated[str, typer.Option("--format", help="json or parquet.")] = "json",
    corrupt: Annotated[
        int, typer.Option("--corrupt", help="Give this many tuples a logging glitch (null key, impossible response time).")
    ] = 0,
    site_seed: Annotated[
        Optional[int],
        typer.Option("--site-seed", help="Pages and clients from this seed: other --seed values are other days of one site."),
    ] = None,
) -> None:
    """Page-view invocations in two streams (static, images) with the paper's degree and duration statistics."""
    if fmt not in ("json", "parquet"):
        raise typer.BadParameter("must be json or parquet", param_hint="--format")
    from framework.generators.service_trace import generate_service_trace

    s = generate_service_trace(
        out_dir, instances=instances, seed=seed, files=files, fmt=fmt, corrupt=corrupt, site_seed=site_seed
    )
    per_stream = ", ".join(f"{count:,} {stream}" for stream, count in s.tuples_per_stream.items())
    out.print(
        f"wrote {s.instances:,} instances, {s.tuples:,} tuples ({per_stream}) as {fmt} in {s.files_written} files under {out_dir}/"
        + (f", {s.corrupted:,} of them with a glitch" if s.corrupted else ""),
        markup=False,
    )


@generate_app.command("access-log")
def generate_access_log_cmd(
    instances: Annotated[int, typer.Option("--instances", help="Page views (about 11 requests each).")] = 120,
    seed: Annotated[int, typer.Option("--seed")] = 1,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the servers' log files.")] = Path("data/samples/access_log"),
    files: Annotated[int, typer.Option("--files", help="Files per server.")] = 2,
) -> None:
    """Raw access logs of two web servers (static files, images) in the Combined Log Format, for the
    text-source example: the service trace's page views as the servers would have logged them."""
    from framework.generators.access_log import generate_access_log

    s = generate_access_log(out_dir, instances=instances, seed=seed, files=files)
    out.print(
        f"wrote {s.lines:,} log lines of {s.instances:,} page views in {s.files} files under {out_dir}/ ({s.garbage} malformed)",
        markup=False,
    )


engine_app = typer.Typer(
    help="The warm engine: a local Spark kept running between commands, so reruns answer in seconds.", no_args_is_help=True
)
app.add_typer(engine_app, name="engine")


@engine_app.command("status")
def engine_status(
    as_json: Annotated[bool, typer.Option("--json", help="Print the engines as JSON.")] = False, debug: DebugOpt = False
) -> None:
    """Running engines: pid, uptime, runs served, idle time, settings, socket and log."""

    def body() -> None:
        from framework.display import engine_table
        from framework.warm.client import statuses

        found = statuses()
        if as_json:
            out.print_json(json.dumps(found))
            return
        if not found:
            out.print("no warm engine running (the next `tributary run` starts one)")
            return
        out.print(engine_table(found))

    _guard(debug, _engine_errors(body))


@engine_app.command("stop")
def engine_stop(debug: DebugOpt = False) -> None:
    """Stop every warm engine of this user (a run under way is interrupted; outputs stay as they were)."""

    def body() -> None:
        from framework.warm.client import stop_all

        answers = stop_all()
        if not answers:
            out.print("no warm engine running")
        for answer in answers:
            busy = f", interrupting {answer['busy']}" if answer.get("busy") else ""
            out.print(f"stopped engine {answer['key']} (pid {answer.get('pid')}{busy})", markup=False)

    _guard(debug, _engine_errors(body))


@engine_app.command("start")
def engine_start(profile: ProfileOpt = None, debug: DebugOpt = False) -> None:
    """Start the warm engine of a profile now (runs start it themselves when needed)."""

    def body() -> None:
        from framework.display import engine_table
        from framework.warm.client import start

        _, prof = _context(None, profile)
        out.print(engine_table([start(prof, lambda text: err.print(_shown(text), style="dim", markup=False, soft_wrap=True))]))

    _guard(debug, _engine_errors(body))


@engine_app.command("serve", hidden=True)
def engine_serve() -> None:
    """The engine process itself (started by a client, settings as JSON on stdin)."""
    from framework.warm.server import serve

    def settings() -> dict:
        try:
            given = json.loads("" if sys.stdin.isatty() else sys.stdin.read())
            assert isinstance(given, dict) and {"key", "folder", "spark", "idle_minutes"} <= given.keys()
            return given
        except (ValueError, AssertionError):
            raise BadInput(Problem("engine serve is started by tributary itself", hint="use tributary engine start")) from None

    raise typer.Exit(serve(_guard(False, settings), _engine_command))


def _engine_errors(body):
    """An engine that cannot be used (runtime folder, settings) is bad input, said in one line."""

    def guarded() -> None:
        from framework.warm.place import EngineUnavailable

        try:
            body()
        except EngineUnavailable as e:
            raise BadInput(Problem(f"warm engine: {e}")) from None

    return guarded


def _engine_command(argv: list[str], out_console: Console, err_console: Console) -> int:
    """Run one command line in the warm engine, printing on the client's consoles: the same
    commands, messages and exit codes as here."""
    global out, err
    saved = out, err
    out, err = out_console, err_console
    try:
        typer.main.get_command(app).main(args=argv, prog_name="tributary", standalone_mode=True)
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        out, err = saved


def _stop_spark() -> None:
    if "pyspark" in sys.modules:
        from contextlib import suppress

        from framework.engine.session import stop_started_session

        with suppress(Exception):  # a JVM that died with the run (said already) cannot be stopped
            stop_started_session()


def main() -> None:
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    app()


def _reflow_help(typer_app: typer.Typer) -> None:
    """Each command's help as paragraphs that rich wraps to the terminal: a docstring's hard line
    breaks are where the source wraps, not the sentence (Typer's rich help keeps single newlines in
    the command list and in every paragraph after the first). Blank lines still part paragraphs."""
    import inspect

    def reflowed(text: str) -> str:
        return "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(text).split("\n\n"))

    for command in typer_app.registered_commands:
        text = command.help or inspect.getdoc(command.callback)
        if text:
            command.help = reflowed(text)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _reflow_help(group.typer_instance)


_reflow_help(app)
