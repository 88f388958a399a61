"""Commands that look at what runs left, without Spark: show, query, history, runs."""

from __future__ import annotations

import sys
from typing import Annotated, Any, Optional

import typer

from framework.cli.common import (
    CsvOpt,
    DebugOpt,
    JsonOpt,
    ProfileOpt,
    ScratchOpt,
    TableArg,
    TimeoutOpt,
    context,
    guard,
    say,
    shown,
    term,
)
from framework.errors import BadInput, Problem

app = typer.Typer()


@app.command()
def show(
    table: TableArg,
    version: Annotated[Optional[int], typer.Option("--version", help="The table as of this version.")] = None,
    timestamp: Annotated[
        Optional[str], typer.Option("--timestamp", help="The table as of this time (ISO 8601; UTC without a zone).")
    ] = None,
    where: Annotated[Optional[str], typer.Option("--where", help="Only rows matching this SQL condition (DuckDB).")] = None,
    run: Annotated[
        Optional[str],
        typer.Option("--run", help="Of Tributary's tables (quarantine, quality, events, ...): only the rows this run wrote."),
    ] = None,
    latest: Annotated[
        bool, typer.Option("--latest", help="Of Tributary's tables: only the rows of the newest run that wrote any there.")
    ] = False,
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

        found = commands.show(
            _catalog(profile, scratch),
            table,
            version=version,
            timestamp=timestamp,
            where=where,
            limit=limit,
            timeout_s=timeout,
            run=run,
            latest=latest,
        )
        _print_rows(found, as_json, as_csv)

    guard(debug, body)


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

    guard(debug, body)


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

    guard(debug, body)


@app.command()
def runs(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many rows per pipeline.")] = 20,
    pipeline: Annotated[Optional[str], typer.Option("--pipeline", help="Only this pipeline (its name).")] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only intervals and runs whose last attempt did not end ok.")] = False,
    scratch: Annotated[bool, typer.Option("--scratch", help="The tries (`run --limit`) instead.")] = False,
    profile: ProfileOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Run history per pipeline from the run log (<warehouse>/_tributary/events): one row per time
    interval (its runs are its attempts) or per run without one, newest first.

    The input column says "stale" where a committed interval's input files or tables, or the pipeline's definition
    (spec, SQL, vars, udfs/), changed since its commit (rerun those: tributary backfill P --from --to --rerun)."""

    def body() -> None:
        from framework.display import rows_table
        from framework.schedule.history import run_history

        table, found = run_history(context(None, profile), pipeline, failed, int(limit), scratch)
        if not found:
            say(("no failed runs" if failed else "no runs yet") + (f" of {pipeline}" if pipeline else ""))
            return
        for name, rows in found.items():
            notes = []  # long texts go under the table, whole, not folded into a narrow column
            for row in rows:
                for key in ("state predicted → observed", "error"):
                    text = row.pop(key, None)
                    if text:
                        notes.append(f"  {row['run']}: {key}: " + str(text).replace("\n", "\n    "))
            term.out.print(rows_table(f"{name}: {'failed ' if failed else ''}runs ({table})", rows))
            for line in notes:
                say(line)

    guard(debug, body)


def _catalog(profile_name: str | None, scratch: bool) -> Any:
    from framework.look.tables import Catalog

    about = context(None, profile_name)
    return Catalog(about.project, about.profile, scratch=scratch)


def _print_rows(found: Any, as_json: bool, as_csv: bool, unit: str = "rows") -> None:  # framework.look.commands.Rows
    from framework.display import arrow_table, csv_text, json_lines

    if as_json and as_csv:
        raise BadInput(Problem("--json and --csv both choose the output: give one"))
    if as_json or as_csv:
        sys.stdout.write(json_lines(found.rows) if as_json else csv_text(found.rows))
        sys.stdout.flush()
        return
    n = found.rows.num_rows
    if (found.total if found.total is not None else n) == 1:
        unit = unit.removesuffix("s")
    if found.total is not None and (found.more or found.total != n):
        caption = f"first {n:,} of {found.total:,} {unit}"
    elif found.more:
        caption = f"first {n:,} {unit} (more left out: --limit)"
    else:
        caption = f"{n:,} {unit}"
    out = term.out
    out.print(shown(found.title, lines=False), style="bold", markup=False, soft_wrap=True)
    out.print(arrow_table(None, found.rows))
    where = f" · {shown(found.location, lines=False)}" if found.location else ""
    out.print(caption + where, style="dim", markup=False, soft_wrap=True)
