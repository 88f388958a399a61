"""Commands for scheduled pipelines: scheduler (serve the schedules), next (what fires when),
backfill (every interval of a range, once)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Optional

import typer

from framework.cli.common import DebugOpt, PipelineArg, ProfileOpt, VarOpt, context, guard, guard_spark, say, shown, term
from framework.errors import RunFailed

app = typer.Typer()


def _log(line: str) -> None:
    """A line of the scheduler's or backfill's log, stamped with the time (UTC)."""
    say(f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M:%S')} {line}")


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

        serving = Scheduler(context(None, profile, var, near=pipelines[0] if pipelines else None), _log, pipelines or None)
        if not serving.serve(once=once) and once:
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
    debug: DebugOpt = False,
) -> None:
    """Run every interval of the pipeline's schedule within --from … --to once, in order, skipping
    the intervals already committed (a backfill run again writes nothing twice). Exit 1 if one failed."""

    def body() -> None:
        from framework.schedule.backfill import backfill_range

        done = backfill_range(context(pipeline, profile, var), begin, end, parallel, _log, rerun)
        failed = done.failed
        say(f"backfill: {len(done.done) - len(failed)} interval(s) ok, {len(failed)} failed")
        if done.stopped:
            term.err.print("[red]stopped[/]: the intervals not run are run by the next backfill")
            raise typer.Exit(130)
        if failed:
            raise RunFailed(f"{len(failed)} interval(s) failed, first {failed[0].due.label()}: {failed[0].error}")

    guard_spark(debug, body)
