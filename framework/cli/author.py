"""Commands for writing a pipeline: validate, compile, plan, graph, schema. None starts Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from framework.cli.common import (
    DebugOpt,
    IntervalOpt,
    LimitOpt,
    PipelineArg,
    ProfileOpt,
    SelectOpt,
    VarOpt,
    context,
    guard,
    print_warnings,
    safe,
    say,
    shown,
    term,
    write_file,
)
from framework.errors import BadInput, Problem

app = typer.Typer()


@app.command()
def validate(
    pipelines: Annotated[Optional[list[str]], typer.Argument(help="Pipeline files (default: all in pipelines/).")] = None,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    select: SelectOpt = None,
    interval: IntervalOpt = None,
    explain: Annotated[
        Optional[str],
        typer.Option("--explain", metavar="STEP", help="Also print the columns validate infers for this step or source."),
    ] = None,
    debug: DebugOpt = False,
) -> None:
    """Check pipelines without starting Spark: schema, keys, refs, cycles, templates, SQL syntax, columns."""

    def body() -> None:
        from framework.tasks.validate import pipelines_to_check
        from framework.tasks.validate import validate as check

        about = context(pipelines[0] if pipelines else None, profile, var, select, interval)
        paths = pipelines_to_check(about, pipelines)
        checked = check(about, paths, lambda line: term.err.print(shown(line), markup=False))
        explained = False
        for one in checked:
            if one.compiled is None:
                term.out.print(f"[red]✗[/] {safe(one.shown)}")
                for p in one.problems:
                    term.err.print(shown(f"  {p}").replace("\n", "\n  "), markup=False, soft_wrap=True)
                continue
            compiled = one.compiled
            term.out.print(
                f"[green]✓[/] {safe(one.shown)}  ({len(compiled.spec.steps)} steps, {len(compiled.spec.outputs)} outputs)"
            )
            print_warnings(compiled.warnings)
            print_warnings(compiled.notes, "note")
            if explain is not None and explain in compiled.schemas:
                from framework.display import schema_table

                term.out.print(schema_table(explain, compiled.graph.kinds[explain], compiled.schemas[explain], one.shown))
                explained = True
        if not all(one.ok for one in checked):
            raise typer.Exit(2)
        typo = about.across(paths).vars_none_has([one.compiled for one in checked if one.compiled], "of the pipelines validated")
        if typo:
            raise BadInput(*typo)
        if explain is not None and not explained:
            from framework.spec.base import did_you_mean

            nodes = {n for one in checked if one.compiled is not None for n in one.compiled.schemas}
            hint = did_you_mean(explain, nodes) or None
            raise BadInput(Problem(f"--explain {explain}: no step or source of that name in the pipelines validated", hint=hint))

    guard(debug, body)


@app.command("compile")
def compile_cmd(
    pipeline: PipelineArg,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    select: SelectOpt = None,
    interval: IntervalOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Print the rendered SQL of each step, in run order."""

    def body() -> None:
        from rich.syntax import Syntax

        compiled = context(pipeline, profile, var, select, interval).compiled
        out = term.out
        if compiled.interval is not None:
            out.print(f"[dim]-- interval {safe(compiled.interval)}[/]")
        print_warnings(compiled.warnings)
        for step in compiled.selected:
            spec = compiled.spec.steps[step]
            out.rule(f"[bold]{safe(step)}[/] ({safe(spec.kind)})", align="left")
            if step in compiled.sql:
                out.print(f"[dim]-- from {safe(compiled.sql[step].template)}[/]")
                out.print(Syntax(compiled.sql[step].text.strip(), "sql", theme="ansi_dark", word_wrap=True))
            else:
                say(json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_defaults=True), indent=2))

    guard(debug, body)


@app.command("plan")
def plan_cmd(
    pipeline: PipelineArg,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    select: SelectOpt = None,
    interval: IntervalOpt = None,
    full_refresh: Annotated[bool, typer.Option("--full-refresh", help="Plan a rebuild of the outputs.")] = False,
    limit: LimitOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Show what a run would do, without starting Spark: steps in order, what each reads and how it
    runs, what is computed once and shared, and per output its table, mode and checks."""

    def body() -> None:
        from framework.display import plan_tables

        planned = context(pipeline, profile, var, select, interval)
        for table in plan_tables(planned.plan(full_refresh, limit), planned.project):
            term.out.print(table)

    guard(debug, body)


@app.command()
def graph(
    pipeline: Annotated[Optional[str], typer.Argument(help="Pipeline file or name (pipelines/<name>.yaml).")] = None,
    all_pipelines: Annotated[
        bool, typer.Option("--all", help="The project's pipelines and the tables between them (and after: links).")
    ] = False,
    svg: Annotated[Optional[Path], typer.Option("--svg", help="Also write the graph as an SVG picture.")] = None,
    html: Annotated[Optional[Path], typer.Option("--html", help="Also write an HTML page with the picture.")] = None,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    select: SelectOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Print the pipeline DAG as Mermaid text (paste into Markdown); or draw it and print the files
    written. --all: every pipeline, the tables each writes and reads, and which waits for which."""

    def body() -> None:
        from framework.display import graph_page

        if all_pipelines == (pipeline is not None):
            raise BadInput(Problem("graph draws one pipeline or, with --all, the project's: give one of them"))
        about = context(None, profile, var) if all_pipelines else context(pipeline, profile, var, select)
        if all_pipelines:
            from framework.schedule.lineage import lineage

            drawn = lineage(about)
            name, description = "pipelines", "The project's pipelines and the tables between them."
        else:
            compiled = about.compiled
            drawn, name, description = compiled.graph, compiled.name, compiled.spec.description  # type: ignore[assignment]
        if not svg and not html:
            term.out.print(drawn.to_mermaid(), end="", markup=False)
            return
        picture = drawn.to_svg()
        if svg is not None:
            write_file(svg, picture, "--svg", about.warehouse())
            say(svg)
        if html is not None:
            write_file(html, graph_page(name, description, picture), "--html", about.warehouse())
            say(html)

    guard(debug, body)


@app.command()
def schema() -> None:
    """Print the pipeline spec as JSON Schema (for editor completion: tributary schema > tributary.schema.json)."""
    from framework.spec.json_schema import pipeline_json_schema

    term.out.print(json.dumps(pipeline_json_schema(), indent=2), markup=False, soft_wrap=True)
