"""Where tables live: names under the warehouse, explicit paths, and Tributary's own tables.

A second warehouse, the scratch warehouse, takes what `tributary run --limit` writes: the same
layout (outputs by name, its own `_tributary` run log, quarantine and staging), somewhere the real
tables, their run log and their streams' checkpoints never are.

Symbolic links: the roots a profile names (`warehouse`, `scratch`, `external_roots`) are resolved
once and trusted as named; every place Tributary derives under them (an output's table by its
name, its own `_tributary` folder, the default scratch folder, a table tried in scratch) must stay
inside its root with links resolved, and so must every link inside a table it writes. On a shared
cluster a link in a folder others can write (`warehouse/evil -> /home/you`) would otherwise take a
write wherever its maker chose. Checked when a run is planned, before anything is written; a link
made while a run goes on is not seen (Spark follows links): a warehouse others can write is not
safe against that.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from framework.errors import BadInput, Problem

if TYPE_CHECKING:  # annotations only: a stream's Python data source process imports this module
    from framework.profiles import Profile
    from framework.project import Project

INTERNAL_DIR = "_tributary"  # the warehouse's own folder: no pipeline may write into it
EVENTS_TABLE = "_tributary/events"
QUARANTINE_TABLE = "_tributary/quarantine"
STAGING_DIR = "_tributary/staging"
LOCKS_DIR = "_tributary/locks"
CHECKPOINTS_DIR = "_tributary/checkpoints"
LATE_ROWS_TABLE = "_tributary/late_rows"
QUALITY_TABLE = "_tributary/quality"  # one row per expectation per run (framework.quality.results)
INTEGRATION_TABLE = "_tributary/integration_quality"  # one row per evaluated step per run
SCRATCH_DIR = ".tributary/scratch"  # beside the warehouse folder, unless the profile says `scratch:`
EXTERNAL_DIR = "_external"  # in the scratch warehouse: outputs whose real table lies outside the warehouse


def is_uri(location: str) -> bool:
    parsed = urlparse(location)
    return bool(parsed.scheme) and len(parsed.scheme) > 1 and parsed.scheme != "file"


def from_spark_path(path: str) -> str:
    """A path as Spark writes it in its logs: a local file is a percent-encoded file: URI."""
    return unquote(urlparse(path).path) if path.startswith("file:") else path


def within(location: str, root: str) -> bool:
    """Whether `location` is `root` or lies under it (local paths resolved, URIs compared by prefix)."""
    if is_uri(location) or is_uri(root):
        return location.rstrip("/") == root.rstrip("/") or location.startswith(root.rstrip("/") + "/")
    return Path(location).resolve().is_relative_to(Path(root).resolve())


def overlap(a: str, b: str) -> bool:
    """Whether one location holds the other (a glob counts from the folder before its first wildcard)."""
    a, b = _before_glob(a), _before_glob(b)
    return within(a, b) or within(b, a)


def _before_glob(location: str) -> str:
    cut = min((location.find(c) for c in "*?[" if c in location), default=-1)
    return location if cut < 0 else location[:cut].rsplit("/", 1)[0] or "/"


def join(base: str, *parts: str) -> str:
    base = base.rstrip("/")
    return "/".join([base, *(p.strip("/") for p in parts)])


@dataclass(frozen=True)
class Warehouse:
    """The warehouse root of a profile, resolved against the project."""

    root: str

    @classmethod
    def of(cls, project: Project, profile: Profile) -> Warehouse:
        if is_uri(profile.warehouse):
            return cls(profile.warehouse.rstrip("/"))
        location = profile.warehouse.removeprefix("file://")
        return cls(str(project.resolve(location).resolve()))

    def table(self, name: str) -> str:
        """`sales.daily` lives at <warehouse>/sales/daily."""
        return join(self.root, *name.split("."))

    def internal(self, relative: str) -> str:
        return join(self.root, relative)

    def is_local(self) -> bool:
        return not is_uri(self.root)


def output_location(project: Project, warehouse: Warehouse, output: str, spec: Any) -> str:
    """Where an output's Delta table lives: its `path`, else its `name` (or the output's) under the
    warehouse, which symbolic links may not take out of it (a `path` is resolved, then checked
    against the warehouse and the profile's external_roots by the compiler)."""
    table = resolve_location(project, warehouse, spec.name or output if not spec.path else None, spec.path)
    if spec.path is None:
        real = led_out(table, warehouse.root)
        if real is not None:
            raise BadInput(
                Problem(
                    f"output '{output}' is the table {table}, which a symbolic link takes to {real}, "
                    f"outside the warehouse ({warehouse.root})",
                    hint=_LINK_HINT + "; to write outside the warehouse on purpose, use path: under the profile's external_roots",
                )
            )
    return table


_LINK_HINT = "remove the link (only someone who can write in that folder can have made it) or choose another name"


def led_out(location: str, root: str) -> str | None:
    """Where a local `location` really is when symbolic links take it out of `root` (None when it
    stays inside, and for URIs: object stores have no links)."""
    if is_uri(location) or is_uri(root):
        return None
    try:
        real = Path(location).resolve()
    except (OSError, RuntimeError):  # a loop of links
        return f"{location} (a loop of symbolic links)"
    return None if real.is_relative_to(Path(root).resolve()) else str(real)


def link_out_of(folder: str, root: str) -> tuple[str, str] | None:
    """The first symbolic link in the tree under `folder` that leads out of `root`: (the link, where
    it leads). Folders behind links are not entered; one directory listing per folder (a table's
    folders: its partitions and _delta_log), no stat per file."""
    if is_uri(folder) or is_uri(root) or not os.path.isdir(folder):
        return None
    pending = [folder]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink():
                real = led_out(entry.path, root)
                if real is not None:
                    return entry.path, real
            elif entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
    return None


def link_problems(root: Warehouse, outputs: dict[str, str]) -> list[Problem]:
    """What symbolic links would take a run's writes out of the warehouse it writes (`root`): its own
    folder and everything in it, and each output's table (a table outside the warehouse, under an
    external root, must keep its links inside itself)."""
    if not root.is_local():
        return []
    problems = []
    internal = root.internal(INTERNAL_DIR)
    real = led_out(internal, root.root)
    found = (internal, real) if real is not None else link_out_of(internal, root.root)
    if found is not None:
        problems.append(
            Problem(
                f"the warehouse's own folder {internal}: {found[0]} is a symbolic link to {found[1]}, "
                f"outside the warehouse ({root.root}); the run log, quarantine and checkpoints would be written there",
                hint=_LINK_HINT.split(" or ")[0],
            )
        )
    for name, table in outputs.items():
        inside = is_uri(table) or Path(table).is_relative_to(root.root)  # as written: resolving is the check
        home = root.root if inside else table
        real = led_out(table, home)
        found = (table, real) if real is not None else link_out_of(table, home)
        if found is not None:
            place = f"the warehouse ({root.root})" if inside else f"its table ({table})"
            problems.append(
                Problem(
                    f"output '{name}' would write {table}: {found[0]} is a symbolic link to {found[1]}, outside {place}",
                    hint=_LINK_HINT,
                )
            )
    return problems


def resolve_location(project: Project, warehouse: Warehouse, name: str | None, path: str | None) -> str:
    if path is not None:
        return path if is_uri(path) else str(project.resolve(path).resolve())
    assert name is not None
    return warehouse.table(name)


def scratch_warehouse(project: Project, profile: Profile) -> Warehouse:
    """Where `run --limit` writes: the profile's `scratch`, else .tributary/scratch beside the
    warehouse folder (./.tributary/scratch for ./warehouse). Never inside the warehouse, nor the
    warehouse inside it: a try must not be able to touch a real table."""
    real = Warehouse.of(project, profile)
    if profile.scratch:
        scratch = Warehouse.of(project, profile.model_copy(update={"warehouse": profile.scratch}))
    elif real.is_local():
        scratch = Warehouse(str(Path(real.root).parent / SCRATCH_DIR))
        linked = str(Path(scratch.root).resolve())  # the warehouse's folder is resolved: a link is below it
        if linked != scratch.root:
            raise BadInput(
                Problem(
                    f"profile '{profile.name}': the scratch warehouse {scratch.root} is reached through a symbolic link, "
                    f"to {linked}: tries would be written there",
                    hint="remove the link, or name the folder tries write with scratch: in the profile",
                )
            )
    else:
        if not urlparse(real.root).path.strip("/"):  # a bucket's root has no folder beside it
            raise BadInput(
                Problem(
                    f"profile '{profile.name}': the warehouse {real.root} has no parent folder for the scratch warehouse",
                    hint="set scratch: in the profile to a folder or URI outside the warehouse",
                )
            )
        scratch = Warehouse(f"{real.root.rsplit('/', 1)[0]}/{SCRATCH_DIR}")
    if overlap(scratch.root, real.root):
        raise BadInput(
            Problem(
                f"profile '{profile.name}': the scratch warehouse {scratch.root} and the warehouse {real.root} overlap",
                hint="set scratch: to a folder outside the warehouse (tries must not write real tables)",
            )
        )
    return scratch


def in_scratch(real: Warehouse, scratch: Warehouse, table: str) -> str:
    """Where a table of the real warehouse is tried: the same name under the scratch warehouse; a
    table outside the warehouse (a profile's external root) under its _external folder."""
    if within(table, real.root):
        if real.is_local() and not is_uri(table):
            relative = Path(table).resolve().relative_to(Path(real.root).resolve()).as_posix()
        else:
            relative = table[len(real.root) :]
        return join(scratch.root, relative) if relative.strip("/") not in ("", ".") else scratch.root
    parsed = urlparse(table)
    parts = [parsed.scheme, parsed.netloc, parsed.path] if is_uri(table) else [str(Path(table).resolve())]
    return join(scratch.root, EXTERNAL_DIR, *[p.strip("/") for p in parts if p.strip("/")])
