"""`tributary test`: run a pipeline's unit tests (docs/testing.md) and say how each went."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from framework.cli.common import (
    DebugOpt,
    EngineOpt,
    ProfileOpt,
    VarOpt,
    context,
    engine_first,
    guard_spark,
    safe,
    say,
    term,
    through_engine,
)

app = typer.Typer()


@app.command("test")
def test_cmd(
    ctx: typer.Context,
    pipeline: Annotated[Optional[str], typer.Argument(help="Pipeline file or name (default: every pipeline's tests).")] = None,
    select: Annotated[
        Optional[str], typer.Option("--select", "-s", help="Tests: their names or the steps they check (comma list).")
    ] = None,
    junit_xml: Annotated[
        Optional[Path], typer.Option("--junit-xml", help="Also write the outcomes as JUnit XML (for CI).")
    ] = None,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    no_engine: EngineOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Run the pipeline's tests: each checked step over its given rows, compared with the expected
    rows; nothing is written to the warehouse. Exit 1 when a test fails, 2 for a malformed test."""

    def body() -> None:
        from framework.testing.run import run_tests, tests_to_run

        engine_first(ctx, pipeline, profile, no_engine, asks=False)
        about = context(pipeline, profile, var)
        planned = tests_to_run(about, pipeline, select)  # a malformed test: exit 2 before Spark
        through_engine(ctx, about.profile, no_engine)
        out = term.out

        def progress(outcome: Any) -> None:
            mark = "[green]✓[/]" if outcome.passed else "[red]✗[/]"
            out.print(f"{mark} {safe(outcome.test.id)}  [dim]{outcome.seconds:.2f} s[/]")
            if not outcome.passed:
                for line in outcome.lines():
                    say(f"    {line}".replace("\n", "\n    "))

        from framework.warm.class_archive import using_options

        run = run_tests(planned, progress, java_options=using_options())
        failed = len(run.failed)
        colour = "red" if failed else "green"
        out.print(
            f"[{colour}]{len(run.outcomes) - failed} passed, {failed} failed[/] in {run.seconds:.1f} s"
            f" ({len(run.outcomes)} test(s) of {len(planned)} pipeline(s))"
        )
        if junit_xml is not None:
            from framework.testing.junit import write_junit

            write_junit(run, junit_xml)
        if failed:
            raise typer.Exit(1)

    guard_spark(debug, body)
