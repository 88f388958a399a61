"""`tributary report`: one run as a self-contained HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from framework.cli.common import DebugOpt, ProfileOpt, VarOpt, context, guard, note, say, write_file

app = typer.Typer()


@app.command()
def report(
    pipeline: Annotated[
        Optional[str], typer.Argument(help="Pipeline file or name (default: the latest run of any pipeline).")
    ] = None,
    run_id: Annotated[
        Optional[str],
        typer.Option("--run", help="Run id (see `tributary runs`; default: the latest run that wrote data or did not end ok)."),
    ] = None,
    out_file: Annotated[
        Optional[Path], typer.Option("--out", help="HTML file to write (default: reports/<pipeline>-<run id>.html).")
    ] = None,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Write one run as a self-contained HTML page: steps, outputs, quality, quarantine and the graph."""

    def body() -> None:
        from framework.reporting import gather_run, render_html

        about = context(None, profile, var, near=pipeline)
        found = gather_run(about, run_id=run_id, pipeline=pipeline)
        path = out_file or about.project.root / "reports" / f"{found.pipeline}-{found.run_id}.html"
        if out_file is None:
            path.parent.mkdir(parents=True, exist_ok=True)  # the default folder, made once
        write_file(path, render_html(found), "--out", about.warehouse())
        if found.chosen:  # no --run: which run, and why that one (on stderr: stdout is the file alone)
            note(f"{found.pipeline}: {found.chosen}")
        say(path)

    guard(debug, body)
