"""`tributary engine`: the warm engine, a local Spark kept running between commands.

`engine serve` is the engine process itself; it runs each client's command line with this same
CLI (`run_command_line`), printing on the client's consoles, so a command behaves, prints and
exits the same through the engine as without it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Console

from framework.cli.common import DebugOpt, ProfileOpt, context, guard, note, say, term
from framework.errors import BadInput, Problem

app = typer.Typer(
    name="engine",
    help="The warm engine: a local Spark kept running between commands, so reruns answer in seconds.",
    no_args_is_help=True,
)


@app.command("status")
def engine_status(
    as_json: Annotated[bool, typer.Option("--json", help="Print the engines as JSON.")] = False, debug: DebugOpt = False
) -> None:
    """Running engines: pid, uptime, runs served, idle time, settings, socket and log."""

    def body() -> None:
        from framework.display import engine_table
        from framework.warm.client import statuses

        found = statuses()
        if as_json:
            term.out.print_json(json.dumps(found))
            return
        if not found:
            term.out.print("no warm engine running (the next `tributary run` starts one)")
            return
        term.out.print(engine_table(found))

    guard(debug, _engine_errors(body))


@app.command("stop")
def engine_stop(debug: DebugOpt = False) -> None:
    """Stop every warm engine of this user (a run under way is interrupted; outputs stay as they were)."""

    def body() -> None:
        from framework.warm.client import stop_all

        answers = stop_all()
        if not answers:
            term.out.print("no warm engine running")
        for answer in answers:
            busy = f", interrupting {answer['busy']}" if answer.get("busy") else ""
            say(f"stopped engine {answer['key']} (pid {answer.get('pid')}{busy})")

    guard(debug, _engine_errors(body))


@app.command("start")
def engine_start(
    profile: ProfileOpt = None,
    no_warm_up: Annotated[
        bool,
        typer.Option(
            "--no-warm-up", help="Do not warm a new engine up (by default it runs tests of its own until a command comes)."
        ),
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Start the warm engine of a profile now (runs start it themselves when needed). A new engine
    warms itself up in the background until its first command comes, so that command runs as fast
    as a second one would."""

    def body() -> None:
        from framework.display import engine_table
        from framework.warm.client import start

        term.out.print(engine_table([start(context(None, profile).profile, note, warm_up=not no_warm_up)]))

    guard(debug, _engine_errors(body))


@app.command("serve", hidden=True)
def engine_serve() -> None:
    """The engine process itself (started by a client, settings as JSON on stdin)."""
    from framework.warm.server import serve

    def settings() -> dict[str, Any]:
        try:
            given = json.loads("" if sys.stdin.isatty() else sys.stdin.read())
            assert isinstance(given, dict) and {"key", "folder", "spark", "idle_minutes"} <= given.keys()
            return given
        except (ValueError, AssertionError):
            raise BadInput(Problem("engine serve is started by tributary itself", hint="use tributary engine start")) from None

    raise typer.Exit(serve(guard(False, settings), run_command_line))


def _engine_errors(body: Callable[[], None]) -> Callable[[], None]:
    """An engine that cannot be used (runtime folder, settings) is bad input, said in one line."""

    def guarded() -> None:
        from framework.warm.place import EngineUnavailable

        try:
            body()
        except EngineUnavailable as e:
            raise BadInput(Problem(f"warm engine: {e}")) from None

    return guarded


def run_command_line(argv: list[str], out_console: Console, err_console: Console) -> int:
    """Run one command line in the warm engine, printing on the client's consoles: the same
    commands, messages and exit codes as here."""
    from framework.cli.app import app as root

    saved = term.out, term.err
    term.out, term.err = out_console, err_console
    try:
        typer.main.get_command(root).main(args=argv, prog_name="tributary", standalone_mode=True)
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        term.out, term.err = saved
