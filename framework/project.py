"""Where a project's folders are: pipelines/, sql/, udfs/, configs/ under one root."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from framework.errors import BadInput, Problem, not_a_file

#: files in pipelines/ that hold a pipeline's tests, not a pipeline
TESTS_SUFFIXES = (".tests.yaml", ".tests.yml")


@dataclass(frozen=True)
class Project:
    root: Path

    @property
    def sql_dir(self) -> Path:
        return self.root / "sql"

    @property
    def pipelines_dir(self) -> Path:
        return self.root / "pipelines"

    @property
    def configs_dir(self) -> Path:
        return self.root / "configs"

    @property
    def udfs_dir(self) -> Path:
        return self.root / "udfs"

    def resolve(self, path: str) -> Path:
        """A path from a spec or profile: absolute as is, relative to the project root."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else self.root / p

    def relative(self, path: Path) -> str:
        """How to show a path to the user: relative to the project when inside it."""
        try:
            return str(Path(path).resolve().relative_to(self.root.resolve()))
        except ValueError:
            return str(path)

    def pipeline_path(self, name_or_path: str) -> Path:
        """Accept `pipelines/x.yaml`, `x.yaml` or just `x`."""
        candidates = [Path(name_or_path), self.root / name_or_path]
        if not name_or_path.endswith((".yaml", ".yml")):
            candidates += [self.pipelines_dir / f"{name_or_path}.yaml", self.pipelines_dir / f"{name_or_path}.yml"]
        try:
            for c in candidates:
                if c.is_file():
                    return c
            for c in candidates:
                if c.exists() and not c.is_dir():  # a named pipe, a device: reading it would block or never end
                    raise BadInput(Problem(f"{not_a_file(c.stat().st_mode)}, not a pipeline file", file=name_or_path))
        except OSError:  # a name too long for a file
            shown = name_or_path if len(name_or_path) <= 80 else name_or_path[:80] + "…"
            raise BadInput(
                Problem(f"pipeline '{shown}' not found: no file can have that name", hint="tributary validate lists them")
            ) from None
        known = sorted(p.stem for p in self.all_pipelines()) if self.pipelines_dir.is_dir() else []
        raise BadInput(
            Problem(
                f"pipeline '{name_or_path}' not found",
                hint=f"pipelines here: {', '.join(known)}" if known else "give the path of a pipeline YAML file",
            )
        )

    def all_pipelines(self) -> list[Path]:
        """The pipeline files (`<name>.tests.yaml` beside them holds tests: framework.spec.tests)."""
        return sorted(p for p in self.pipelines_dir.glob("*.y*ml") if not p.name.endswith(TESTS_SUFFIXES))

    def tests_path(self, pipeline: Path) -> Path:
        """Where the tests of a pipeline file may be kept beside it."""
        return pipeline.with_name(f"{pipeline.stem}.tests.yaml")


def existing(typed: str | None) -> Path | None:
    """What the user typed as a path, when it names something that exists (a name too long for a
    file, or one the OS refuses, names nothing: the caller then reads it as a pipeline's name)."""
    if not typed:
        return None
    try:
        return Path(typed) if Path(typed).exists() else None
    except OSError:
        return None


def find_project(start: Path | None = None) -> Project:
    """The nearest folder at or above `start` holding configs/ or pipelines/; else `start`."""
    start = (start or Path.cwd()).resolve()
    if start.is_file():
        start = start.parent
    for folder in [start, *start.parents]:
        if (folder / "configs").is_dir() or (folder / "pipelines").is_dir():
            return Project(folder)
    return Project(start)
