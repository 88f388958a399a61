"""Commands that run a pipeline: run (once, or a stream kept running) and watch (rerun on change)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from framework.cli.common import (
    DebugOpt,
    EngineOpt,
    IntervalOpt,
    LimitOpt,
    PipelineArg,
    ProfileOpt,
    SampleOpt,
    SelectOpt,
    VarOpt,
    context,
    engine_first,
    guard_spark,
    interactive,
    print_warnings,
    safe,
    term,
    through_engine,
    try_rows,
)
from framework.errors import BadInput, Problem, RunFailed, TributaryError

app = typer.Typer()


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
        rows = try_rows(limit, sample)
        if continuous and rows is not None:
            raise BadInput(Problem("--limit runs a try once, as one batch; --continuous keeps a stream running: give one"))
        if full_refresh and interval is not None:
            raise BadInput(
                Problem(
                    "--full-refresh rebuilds every output from nothing, and with --interval only that interval's rows "
                    "would be in them (the other intervals' rows gone, still logged as committed)",
                    hint="to run one interval again, run it without --full-refresh (its rows are replaced), "
                    "or tributary backfill PIPELINE --from ... --to ... --rerun",
                )
            )
        engine_first(ctx, pipeline, profile, no_engine, asks=full_refresh and not yes)
        about = context(pipeline, profile, var, select, interval)
        compiled = about.compiled
        streaming = compiled.spec.mode == "streaming" and rows is None  # a try runs as one batch, in scratch
        if continuous and not streaming:
            raise BadInput(Problem("--continuous is for streaming pipelines", hint="set mode: streaming in the pipeline"))
        if full_refresh and streaming and not yes:
            _confirm_restart(compiled.name, ", ".join(compiled.selected_outputs()))
        through_engine(ctx, about.profile, no_engine, yes=True)  # asked here already
        from framework.display import LiveProgress, arrow_table, quality_table, run_summary
        from framework.engine.runner import show_rows
        from framework.io.delta import local_store

        out = term.out
        out.print(
            f"[bold]{safe(compiled.name)}[/] · profile {safe(about.profile.name)} · {len(compiled.selected)} step(s), "
            f"{len(compiled.selected_outputs())} output(s)"
            + (f" · interval {safe(compiled.interval.label())}" if compiled.interval is not None else "")
        )
        print_warnings(compiled.spec_warnings)  # what the spec's shape does that a user may not mean
        from framework.warm.class_archive import using_options

        with LiveProgress(out) as progress:
            try:
                # a JVM started here (no warm engine) maps the class archive an engine left, when there is one
                result = about.run(
                    full_refresh=full_refresh, continuous=continuous, reporter=progress, limit=rows, java_options=using_options()
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
            store = local_store(about.profile.storage_options) if result.store == "delta-rs" else None
            for o in result.outputs:
                if store is not None and not o.name.startswith("_"):
                    out.print(arrow_table(f"{o.name} (first {first} rows)", show_rows(store, o.table, first)))

    guard_spark(debug, body)


def _confirm_restart(name: str, outputs: str) -> None:
    """--full-refresh of a stream deletes its checkpoints: asked first, unless --yes."""
    question = (
        f"--full-refresh starts {name}'s stream over: its checkpoints are deleted and the tables "
        f"{outputs} get a new version without rows (their history stays). Continue?"
    )
    if not interactive():
        raise BadInput(Problem("--full-refresh of a streaming pipeline needs confirmation", hint="add --yes"))
    if not typer.confirm(question):
        raise BadInput(Problem("--full-refresh declined: nothing was changed"))


def _show_spark_log(log: Path, verbose: bool, lines: int = 400) -> None:
    """Spark's log of a failed run: its last lines with --verbose, else where it is."""
    from framework.cli.common import shown

    if not log.is_file() or log.stat().st_size == 0:
        return
    err = term.err
    if verbose:
        text = log.read_text(encoding="utf-8", errors="replace").splitlines()
        err.print(f"Spark's log, {shown(log)} (last {min(lines, len(text))} lines):", markup=False)
        err.print(shown("\n".join(text[-lines:])), markup=False, highlight=False, soft_wrap=True)
    else:
        err.print(f"Spark's log: {log} (run again with --verbose to print it)", markup=False, soft_wrap=True)


@app.command()
def watch(
    pipeline: PipelineArg,
    limit: LimitOpt = None,
    sample: SampleOpt = False,
    show: Annotated[int, typer.Option("--show", help="Print the first N rows of each output after each run.")] = 5,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    select: SelectOpt = None,
    interval: IntervalOpt = None,
    max_runs: Annotated[Optional[int], typer.Option("--max-runs", hidden=True, help="Stop after N cycles (tests).")] = None,
    debug: DebugOpt = False,
) -> None:
    """Validate and rerun a pipeline whenever a file under pipelines/, sql/ or udfs/ (or its data)
    changes, in one Spark session kept warm, printing the first rows of its outputs. A mistake is
    printed and watching goes on; Ctrl-C stops."""

    def body() -> int:
        from framework.project import existing, find_project
        from framework.watch import Watch

        rows = try_rows(limit, sample)
        # each cycle builds the project context anew (framework.watch): an edit of the profile or
        # the pipeline may fix what is wrong with them now
        project = find_project(existing(pipeline))
        watching = Watch(project, pipeline, term.out, profile, var or [], select, interval, rows, show, max_runs)
        watching.check()
        return watching.run()

    raise typer.Exit(guard_spark(debug, body))
