"""The `tributary` command: a root group whose commands live in one module per user activity,
imported only when a command line needs them (as Kedro's LazyGroup does).

`tributary validate` must answer in well under a second, so a command module imports typer and
framework.cli.common only, and each command imports what it uses inside its function: the light
commands never import pyspark (tests/test_graph_and_cli.py checks it). `tributary --help` lists
every command under the activity it serves, in the order a user meets them.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any

import typer
from typer import _click as click  # Typer's own copy of click: its groups and contexts are of these classes
from typer.core import TyperGroup

#: command name -> (module under framework.cli, help panel); the order is the help's order
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("author", "Author"),
    "compile": ("author", "Author"),
    "plan": ("author", "Author"),
    "graph": ("author", "Author"),
    "schema": ("author", "Author"),
    "generate": ("generate", "Author"),
    "test": ("testing", "Author"),
    "run": ("run", "Run"),
    "watch": ("run", "Run"),
    "engine": ("engine", "Run"),
    "cluster": ("cluster", "Run"),
    "show": ("look", "Look"),
    "query": ("look", "Look"),
    "history": ("look", "Look"),
    "runs": ("look", "Look"),
    "report": ("report", "Look"),
    "scheduler": ("schedule", "Schedule"),
    "next": ("schedule", "Schedule"),
    "backfill": ("schedule", "Schedule"),
    "freshness": ("schedule", "Schedule"),
    "tune": ("tune", "Tune"),
    "capacity": ("tune", "Tune"),
    "evaluate": ("tune", "Tune"),
}


class LazyGroup(TyperGroup):
    """The root group: a command's module is imported when the command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        if cmd_name not in self.commands:
            module_name, panel = COMMANDS[cmd_name]
            module = importlib.import_module(f"framework.cli.{module_name}")
            command = _command_of(module.app, cmd_name)
            command.rich_help_panel = panel  # type: ignore[attr-defined]
            self.commands[cmd_name] = command
        return self.commands[cmd_name]

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        """A misspelt command is answered with the closest names of all commands, loaded or not."""
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.UsageError as e:
            from difflib import get_close_matches

            matches = get_close_matches(args[0], list(COMMANDS)) if args else []
            if matches and "Did you mean" not in e.message:
                e.message = f"{e.message.rstrip('.')}. Did you mean {', '.join(repr(m) for m in matches)}?"
            raise


def _command_of(module_app: typer.Typer, name: str) -> click.Command:
    """The click command `name` of a command module's Typer app: the app itself when it is a group
    of subcommands (`engine`, `generate`), else its command of that name."""
    built = _built(module_app)
    if module_app.info.name == name:
        return built
    if isinstance(built, TyperGroup):
        found = built.commands.get(name)
        if found is None:
            raise LookupError(f"framework.cli: no command {name} in its module")
        return found
    return built


_BUILT: dict[int, click.Command] = {}


def _built(module_app: typer.Typer) -> click.Command:
    """A module's Typer app as click commands, built once."""
    if id(module_app) not in _BUILT:
        _reflow_help(module_app)
        module_app._add_completion = False  # a command module's own app would offer --install-completion
        _BUILT[id(module_app)] = typer.main.get_command(module_app)
    return _BUILT[id(module_app)]


app = typer.Typer(
    name="tributary",
    cls=LazyGroup,
    help="Declarative data pipelines on Spark: YAML + Spark SQL templates → Delta tables.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def tributary() -> None:
    """Declarative data pipelines on Spark: YAML + Spark SQL templates → Delta tables."""


def main() -> None:
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    try:
        app()
    except SystemExit:
        try:  # what is still buffered for a reader that went away (`| head`) fails here, at exit
            sys.stdout.flush()
        except BrokenPipeError:
            from framework.cli.common import READER_GONE, reader_gone

            reader_gone()
            raise SystemExit(READER_GONE) from None
        raise


def _reflow_help(typer_app: typer.Typer) -> None:
    """Each command's help as paragraphs that rich wraps to the terminal: a docstring's hard line
    breaks are where the source wraps, not the sentence (Typer's rich help keeps single newlines in
    the command list and in every paragraph after the first). Blank lines still part paragraphs."""

    def reflowed(text: str) -> str:
        return "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(text).split("\n\n"))

    for command in typer_app.registered_commands:
        text = command.help or inspect.getdoc(command.callback)
        if text:
            command.help = reflowed(text)
    if typer_app.info.help and isinstance(typer_app.info.help, str):
        typer_app.info.help = reflowed(typer_app.info.help)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _reflow_help(group.typer_instance)


def all_commands() -> dict[str, Any]:
    """Every command, loaded (the docs site's CLI reference and the tests walk them)."""
    root = typer.main.get_command(app)
    ctx = click.Context(root)
    return {name: root.get_command(ctx, name) for name in root.list_commands(ctx)}  # type: ignore[attr-defined]
