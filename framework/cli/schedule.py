"""Commands for scheduled pipelines: scheduler (serve the schedules), next (what fires when),
backfill (every interval of a range, once), freshness (how old each source's newest data is).

`backfill` and `scheduler --once` run in the warm engine, as `run` does (one JVM for the schedule:
a backfill's first interval does not start a JVM of its own while an engine runs). The foreground
`scheduler` keeps its own session for as long as it serves: in the engine it would hold it from one
fire to the next, and every `tributary run` by hand would wait behind it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Optional

import typer

from framework.cli.common import (
    DebugOpt,
    EngineOpt,
    PipelineArg,
    ProfileOpt,
    VarOpt,
    context,
    engine_first,
    guard,
    guard_spark,
    say,
    shown,
    term,
    through_engine,
)
from framework.errors import RunFailed

app = typer.Typer()


def _log(line: str) -> None:
    """A line of the scheduler's or backfill's log, stamped with the time (UTC)."""
    say(f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M:%S')} {line}")


@app.command()
def scheduler(
    ctx: typer.Context,
    pipelines: Annotated[
        Optional[list[str]], typer.Argument(help="Pipelines to serve (default: every one with a schedule).")
    ] = None,
    once: Annotated[
        bool,
        typer.Option(
            "--once",
            help="Run what is due now, then exit (for a crontab line); exit 1 if a run failed, 2 if a pipeline could not be scheduled, 130 when Ctrl-C or SIGTERM stopped it.",
        ),
    ] = False,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    no_engine: EngineOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Run pipelines by their schedule: in the foreground, one run at a time on one Spark session,
    retrying failed runs; SIGTERM/Ctrl-C abandons the run under way and stops (the next start runs
    it again). --once runs what is due and exits (in the warm engine, when the profile uses one)."""

    def body() -> None:
        from framework.schedule.scheduler import Scheduler

        about = context(None, profile, var, near=pipelines[0] if pipelines else None)
        if once:
            through_engine(ctx, about.profile, no_engine)
        serving = Scheduler(about, _log, pipelines or None)
        all_ok = serving.serve(once=once)
        if once and serving.stopping.is_set():  # Ctrl-C or SIGTERM: the run under way abandoned, as backfill says it
            raise typer.Exit(130)
        if once and serving.left_out:  # a pipeline with a wrong schedule ran nothing: bad input, said above
            raise typer.Exit(2)
        if not all_ok and once:
            raise typer.Exit(1)  # a run failed (its retries, if any, are due at a later start)

    guard_spark(debug, body)


@app.command("next")
def next_cmd(
    pipelines: Annotated[Optional[list[str]], typer.Argument(help="Pipelines (default: every one with a schedule).")] = None,
    profile: ProfileOpt = None,
    debug: DebugOpt = False,
) -> None:
    """When each schedule fires next, what it runs then, and what is due now (no Spark)."""

    def body() -> None:
        from framework.display import rows_table
        from framework.schedule.upcoming import upcoming

        found = upcoming(context(None, profile, near=pipelines[0] if pipelines else None), pipelines)
        if found.scheduled == 0 and not found.problems:
            say("no pipeline has a schedule: add schedule: {cron: '0 * * * *'} to one under pipelines/")
            return
        if found.rows:
            term.out.print(rows_table(f"schedules at {found.now.isoformat(timespec='seconds')}", found.rows))
        for problem in found.problems:
            term.err.print(f"not scheduled: {shown(problem)}", markup=False, soft_wrap=True)
        if found.problems:
            raise typer.Exit(2)

    guard(debug, body)


@app.command()
def backfill(
    ctx: typer.Context,
    pipeline: PipelineArg,
    begin: Annotated[
        str, typer.Option("--from", help="Start of the first interval (a date or time; naive: the schedule's timezone).")
    ],
    end: Annotated[str, typer.Option("--to", help="End of the last interval.")],
    parallel: Annotated[
        int, typer.Option("--parallel", help="Run up to K intervals at once (outputs sliced by interval, appended or merged).")
    ] = 1,
    rerun: Annotated[
        bool,
        typer.Option(
            "--rerun",
            help="Run the committed intervals again too: each replaces its interval's rows (unchanged ones commit nothing).",
        ),
    ] = False,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    no_engine: EngineOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Run every interval of the pipeline's schedule within --from … --to once, in order, skipping
    the intervals already committed (a backfill run again writes nothing twice), in the warm engine
    when the profile uses one. Exit 1 if one failed."""

    def body() -> None:
        from framework.schedule.backfill import backfill_range, check_range

        engine_first(ctx, pipeline, profile, no_engine, asks=False)
        about = context(pipeline, profile, var)
        check_range(about, begin, end, parallel, rerun)  # bad input is said before an engine is waited for
        through_engine(ctx, about.profile, no_engine)
        done = backfill_range(about, begin, end, parallel, _log, rerun)
        failed = done.failed
        say(f"backfill: {len(done.done) - len(failed)} interval(s) ok, {len(failed)} failed")
        if done.stopped:
            again = "the same backfill with --rerun" if rerun else "the next backfill"
            term.err.print(f"[red]stopped[/]: the intervals not run are run by {again}", soft_wrap=True)
            raise typer.Exit(130)
        if failed:
            raise RunFailed(f"{len(failed)} interval(s) failed, first {failed[0].due.label()}: {failed[0].error}")

    guard_spark(debug, body)


@app.command()
def freshness(
    pipelines: Annotated[Optional[list[str]], typer.Argument(help="Pipelines (default: every one under pipelines/).")] = None,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    debug: DebugOpt = False,
) -> None:
    """How old each source's newest data is, against its freshness: {warn_after, error_after} (no
    Spark). Exit 1 when a source is past its error_after (as dbt source freshness), 0 otherwise."""

    def body() -> None:
        from framework.display import rows_table
        from framework.quality.freshness import ERROR, WARN, duration_text
        from framework.tasks.freshness import freshness as measure
        from framework.tasks.validate import pipelines_to_check

        about = context(None, profile, var, near=pipelines[0] if pipelines else None)
        found = measure(about, pipelines_to_check(about, pipelines))
        if not found:
            say("no source declares freshness: add freshness: {warn_after: 1h, error_after: 1d} to a source")
            return
        rows = [
            {
                "pipeline": p.pipeline,
                "source": a.source,
                "status": a.status,
                "age": duration_text(a.age_s) if a.age_s is not None else "no data",
                "newest": a.newest.isoformat(timespec="seconds") if a.newest else "–",
                "measured on": a.measured_on,
                "warn_after": duration_text(a.warn_after) if a.warn_after else "–",
                "error_after": duration_text(a.error_after) if a.error_after else "–",
            }
            for p in found
            for a in p.ages
        ]
        term.out.print(rows_table("source freshness", rows))
        errors = sum(r["status"] == ERROR for r in rows)
        warnings = sum(r["status"] == WARN for r in rows)
        say(f"{len(rows)} source(s): {errors} past error_after, {warnings} past warn_after")
        if errors:
            raise typer.Exit(1)

    guard(debug, body)
