"""Where tables live: names under the warehouse, explicit paths, and Tributary's own tables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

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
    """Where an output's Delta table lives: its `path`, else its `name` (or the output's) under the warehouse."""
    return resolve_location(project, warehouse, spec.name or output if not spec.path else None, spec.path)


def resolve_location(project: Project, warehouse: Warehouse, name: str | None, path: str | None) -> str:
    if path is not None:
        return path if is_uri(path) else str(project.resolve(path).resolve())
    assert name is not None
    return warehouse.table(name)
