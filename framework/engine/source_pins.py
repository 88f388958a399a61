"""A stream resumes only over the source columns it started with.

A streaming run's checkpoints hold state (open windows, join buffers, offsets) shaped by its
sources' columns. When a source's columns change between two runs (a Delta table's schema
evolved, a declared schema was edited), resuming would fail deep in Spark or, worse, read the new
columns as nulls. So the first run pins each source's columns beside its checkpoints, and a later
run compares: a difference is bad input naming the source and the column, with the way out
(`--full-refresh` starts the stream over; the outputs keep their history).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from framework.errors import BadInput
from framework.io import staging as staging_files
from framework.io.locations import CHECKPOINTS_DIR

if TYPE_CHECKING:
    from framework.engine.context import RunContext
    from framework.engine.frames import Frames

PINS_FILE = "_source_columns.json"
#: where each file source's files were when the stream started (its checkpoint names them by absolute path)
LOCATIONS_FILE = "_source_locations.json"


def check_source_columns(run: RunContext, frames: Frames) -> None:
    """Bad input when a source's columns differ from the ones pinned by the stream's first run."""
    pinned = _read(run)
    if run.plan.full_refresh or pinned is None:
        return
    problems = [
        run.problem(
            f"source '{name}': its columns changed since this stream's checkpoints were written: {change}",
            ("sources", name),
            hint="a stream resumes only with the columns it started with: run again with --full-refresh to start "
            "it over (the outputs keep their history), or give the source its former columns",
        )
        for name, columns in _columns(frames).items()
        if name in pinned and (change := _change(pinned[name], columns))
    ]
    if problems:
        raise BadInput(*problems)


def pin_source_columns(run: RunContext, frames: Frames) -> None:
    """Keep the sources' columns beside the checkpoints (sources new to the pipeline added)."""
    pinned = _read(run) or {}
    now = _columns(frames)
    if all(name in pinned for name in now):
        return
    write_pins(run, PINS_FILE, pinned | now)


def check_source_locations(run: RunContext) -> None:
    """Bad input when a file source's folder is not where the stream's first run read it: Spark's
    checkpoint names each file it read by its absolute path, and resumed over another folder (the
    project copied or moved, the source's `path:` changed) it failed every run with "Wrong basePath"
    (exit 1)."""
    pinned = read_pins(run, LOCATIONS_FILE)
    if run.plan.full_refresh or pinned is None:
        return
    problems = [
        run.problem(
            f"source '{name}': this stream read its files in {pinned[name]}, and its path is {location} now "
            "(the project was moved or copied, or the source's path changed): the stream's checkpoint names each file "
            "it read by that path",
            ("sources", name, "path"),
            hint="give the source its former path (or move the project back), or run again with --full-refresh to start "
            "the stream over (it reads every file now in the folder; the outputs keep their history)",
        )
        for name, location in _file_locations(run).items()
        if name in pinned and pinned[name] != location
    ]
    if problems:
        raise BadInput(*problems)


def pin_source_locations(run: RunContext) -> None:
    """Keep the file sources' folders beside the checkpoints (sources new to the pipeline added)."""
    pinned = read_pins(run, LOCATIONS_FILE) or {}
    now = _file_locations(run)
    if run.plan.full_refresh or not all(name in pinned for name in now):
        write_pins(run, LOCATIONS_FILE, now if run.plan.full_refresh else pinned | now)


def _file_locations(run: RunContext) -> dict[str, str]:
    from framework.spec.models import DeltaSource

    return {s.name: s.location for s in run.plan.sources if s.spec is not None and not isinstance(s.spec, DeltaSource)}


def _read(run: RunContext) -> dict[str, dict[str, str]] | None:
    return read_pins(run, PINS_FILE)


def read_pins(run: RunContext, name: str) -> Any:
    """A JSON file kept beside the pipeline's checkpoints (None when there is none)."""
    location = run.internal(f"{CHECKPOINTS_DIR}/{run.pipeline}/{name}")
    if not staging_files.exists(location):
        return None
    fs, path = staging_files.filesystem(location)
    with fs.open_input_stream(path) as handle:
        return json.loads(handle.read().decode())


def write_pins(run: RunContext, name: str, pinned: Any) -> None:
    """Keep `pinned` as a JSON file beside the pipeline's checkpoints (--full-refresh removes it)."""
    fs, path = staging_files.filesystem(run.internal(f"{CHECKPOINTS_DIR}/{run.pipeline}/{name}"))
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(path) as handle:
        handle.write(json.dumps(pinned, indent=1).encode())


def _columns(frames: Frames) -> dict[str, dict[str, str]]:
    return {name: {f.name: f.dataType.simpleString() for f in source.df.schema.fields} for name, source in frames.sources.items()}


def _change(before: dict[str, str], after: dict[str, str]) -> str | None:
    parts = []
    if added := [c for c in after if c not in before]:
        parts.append(f"new column(s) {added}")
    if removed := [c for c in before if c not in after]:
        parts.append(f"column(s) {removed} gone")
    if changed := [f"{c} ({before[c]} → {after[c]})" for c in before if c in after and before[c] != after[c]]:
        parts.append(f"type of {', '.join(changed)}")
    return "; ".join(parts) or None
