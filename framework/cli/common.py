"""What every command module shares: the consoles, the options spelled once, the one error guard,
and the project context built from the flags.

A command module holds no business logic: it parses flags, builds the project context
(framework.project_context) and calls one function of the layer below, then renders what came
back. Printing the user's data is always literal (`shown`, `safe`): a description or a value can
hold brackets or control characters, and neither may turn into terminal markup.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, TypeVar

import typer
from rich.console import Console

from framework.errors import BadInput, Problem, TributaryError, interrupted_line

if TYPE_CHECKING:
    from framework.io.locations import Warehouse
    from framework.project_context import ProjectContext

T = TypeVar("T")


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader went away (`| head`): rich exits 1, a failed run's code; this ends as a
        process SIGPIPE ends (framework.cli.common.READER_GONE)."""
        self.quiet = True
        reader_gone()
        raise SystemExit(READER_GONE)


class Terminal:
    """The consoles commands print on. The warm engine swaps them for its client's while it runs a
    command line (framework.cli.engine), so commands look them up here at each print."""

    def __init__(self) -> None:
        # Off a terminal (CI logs, pipes) tables get room instead of 80 columns. No emoji codes:
        # a location at line 100 (`file.yaml:100:11`) would print as `file.yaml💯11`.
        self.out: Console = _Console(highlight=False, emoji=False, width=None if sys.stdout.isatty() else 160)
        self.err: Console = Console(stderr=True, highlight=False, emoji=False, width=None if sys.stderr.isatty() else 160)


term = Terminal()

# -- options spelled once ------------------------------------------------------------------------

PipelineArg = Annotated[str, typer.Argument(help="Pipeline file or name (pipelines/<name>.yaml).")]
ProfileOpt = Annotated[
    Optional[str], typer.Option("--profile", "-p", help="Profile in configs/ (default: $TRIBUTARY_PROFILE or local).")
]
VarOpt = Annotated[Optional[list[str]], typer.Option("--var", help="Set a var: --var name=value (repeatable).")]
SelectOpt = Annotated[
    Optional[str], typer.Option("--select", "-s", help="Steps: a, +a (with upstream), a+ (with downstream), comma list.")
]
IntervalOpt = Annotated[
    Optional[str],
    typer.Option(
        "--interval",
        help="The time interval START/END the pipeline covers ({{ interval_start }}, {{ interval_end }}); "
        "naive times are in the schedule's timezone.",
    ),
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


# -- the project context -------------------------------------------------------------------------


def context(
    pipeline: str | None = None,
    profile: str | None = None,
    variables: list[str] | None = None,
    select: str | None = None,
    interval: str | None = None,
    near: str | None = None,
) -> ProjectContext:
    """The project context of a command line (framework.project_context); `near`: a file the
    command names without being about that pipeline (the project is the one holding it)."""
    from framework.project import existing
    from framework.project_context import ProjectContext

    start = existing(near)
    return ProjectContext.load(pipeline, profile=profile, variables=variables, select=select, interval=interval, start=start)


def try_rows(limit: int | None, sample: bool) -> int | None:
    """The rows a try reads of each source (None: a real run)."""
    if limit is not None and sample:
        raise BadInput(Problem("--limit and --sample both ask for a try: give one"))
    if limit is not None and limit < 1:
        raise BadInput(Problem(f"--limit {limit}: a try reads at least 1 row of each source"))
    return SAMPLE_ROWS if sample else limit


# -- printing the user's text ----------------------------------------------------------------------


def shown(text: object, lines: bool = True) -> str:
    """User text or data (a message quoting a value, a log line) as printed: its control characters
    written out (framework.display.for_terminal). Printed with markup=False, or through `safe`."""
    from framework.display import for_terminal

    return for_terminal(str(text), lines)


def safe(text: object) -> str:
    """User text inside a markup string: control characters written out, rich's brackets escaped."""
    from rich.markup import escape

    return escape(shown(text, lines=False))


def say(line: object, **style: Any) -> None:
    """One line of the user's text on stdout, printed literally."""
    term.out.print(shown(line), markup=False, soft_wrap=True, highlight=False, **style)


def note(line: object) -> None:
    """A dim line on stderr (what the warm engine or a long step is doing)."""
    term.err.print(shown(line), style="dim", markup=False, soft_wrap=True)


def print_warnings(warnings: list[Problem], label: str = "warning") -> None:
    for warning in warnings:
        term.err.print(f"  [yellow]{label}:[/] ", end="")
        term.err.print(shown(warning).replace("\n", "\n  "), markup=False, soft_wrap=True)


# -- one guard for every command -------------------------------------------------------------------


def guard(debug: bool, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a command body; turn errors into one clear message and the right exit code."""
    err = term.err
    try:
        return fn(*args, **kwargs)
    except TributaryError as e:
        if debug:
            err.print(shown(traceback.format_exc()), markup=False, highlight=False)
        label = "invalid" if isinstance(e, BadInput) else "run failed"
        err.print(f"[bold red]{label}:[/]", end="\n" if "\n" in str(e) else " ")
        err.print(shown(e), markup=False, soft_wrap=True)
        raise typer.Exit(e.exit_code) from None
    except KeyboardInterrupt as e:
        err.print("[red]interrupted[/]; ", end="")
        err.print(interrupted_line(e), markup=False, soft_wrap=True)
        raise typer.Exit(130) from None
    except typer.Exit:
        raise
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as a process SIGPIPE ends
        reader_gone()
        raise typer.Exit(READER_GONE) from None
    except Exception as e:  # noqa: BLE001 - the last line of defence
        if debug:
            err.print(shown(traceback.format_exc()), markup=False, highlight=False)
        else:
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            err.print("[bold red]run failed:[/]", end=" ")
            err.print(
                f"{type(e).__name__}: {shown(first)}\n  (run again with --debug for the traceback)", markup=False, soft_wrap=True
            )
        raise typer.Exit(1) from None


#: the exit code of a command whose output's reader went away: 128 + SIGPIPE, as the shell says it
READER_GONE = 141


def reader_gone() -> None:
    """Standard output's reader went away: what is still buffered for it goes nowhere (Python
    would otherwise fail once more flushing it at exit)."""
    import os

    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def guard_spark(debug: bool, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`guard` for a command that may start Spark in this process: the session it started ends with
    it, and a second Ctrl-C stops it at once when Spark does not answer the first
    (framework.cli.interrupts)."""
    from framework.cli.interrupts import second_interrupt_stops_at_once

    def say(line: str) -> None:
        term.err.print(shown(line), markup=False, soft_wrap=True)

    with second_interrupt_stops_at_once(say):
        try:
            return guard(debug, fn, *args, **kwargs)
        finally:
            stop_spark()


def stop_spark() -> None:
    if "pyspark" in sys.modules:
        from contextlib import suppress

        from framework.engine.session import stop_started_session

        with suppress(Exception):  # a JVM that died with the run (said already) cannot be stopped
            stop_started_session()


# -- the warm engine -----------------------------------------------------------------------------


def engine_first(ctx: typer.Context, pipeline: str | None, profile_name: str | None, no_engine: bool, asks: bool) -> None:
    """A running warm engine takes the command at once (it checks the input as this process would,
    with its modules already imported); without one, one starts now, so its JVM starts while the
    input is checked here (bad input is then said without waiting for it). A command that may ask
    a question (`asks`) asks it here first."""
    from framework.warm.client import warm_up

    try:
        project = context(pipeline, profile_name)
    except TributaryError:
        return  # said by the command's own checks
    if not asks:
        through_engine(ctx, project.profile, no_engine, start=False)
    warm_up(project.profile, no_engine, project.pipeline)


def through_engine(ctx: typer.Context, prof: Any, no_engine: bool, start: bool = True, **overrides: Any) -> None:
    """Hand the current command to the warm engine when the profile allows it (`start`: starting one
    if none runs): its output is printed here and its exit code ends this command (typer.Exit).
    Returns when the command runs here."""
    from framework.warm.client import argv_of, hand_over

    code = hand_over(prof, argv_of(ctx, overrides), no_engine, note, start)
    if code is not None:
        raise typer.Exit(code)


def interactive() -> bool:
    """Someone can answer a question (stdin is a terminal)."""
    return sys.stdin.isatty()


def written(path: Path) -> None:
    """Say a file a command wrote: its path alone on a line (scripts read it)."""
    say(path)


def write_file(path: Path, text: str, option: str, warehouse: Warehouse | None = None) -> None:
    """Write a file the user named with `option` (--svg, --out, --html): into a folder that exists
    (a mistyped folder is not made), never over a folder, never inside the warehouse (a report
    written over a table's commit file made the table unreadable), and over an existing file only
    when it is of the kind written here (`text`'s first line: `--out pipelines/x.yaml` replaced
    the pipeline). A problem is bad input naming the option."""
    problem = None
    try:
        if not str(path) or path.name in ("", ".", ".."):
            problem = "is not a file name"
        elif path.is_dir():
            problem = "is a folder"
        elif not path.parent.is_dir():
            problem = f"is in a folder that does not exist ({path.parent})"
        elif warehouse is not None and warehouse.is_local() and path.resolve().is_relative_to(Path(warehouse.root).resolve()):
            problem = f"is inside the warehouse ({warehouse.root}), where only Tributary's tables and run log go"
        elif path.exists() and not _same_kind(path, text):
            problem = "is a file of another kind: only a file of the kind written here is replaced"
        else:
            path.write_text(text, encoding="utf-8")
            return
    except OSError as e:  # a name too long for the file system, a folder it may not write
        problem = f"cannot be written: {e.strerror}"
    raise BadInput(Problem(f"{option} {path} {problem}", hint=f"give {option} the path of a new file, in a folder that exists"))


def _same_kind(path: Path, text: str) -> bool:
    """The file begins as `text` does (its first line: `<!doctype html>`, `<svg ...`, `<?xml ...`)."""
    first = text.lstrip()[:14].lower()
    with path.open("rb") as handle:
        return handle.read(64).decode("utf-8", "replace").lstrip().lower().startswith(first)
