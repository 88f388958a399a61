"""Which Delta table a name means, for `tributary show`, `history` and `query`.

An analyst thinks in the names of the pipelines' outputs, not in folders, so a name is tried as:

1. an output of a pipeline: `service_stats`, or `service_calls.service_stats` when two pipelines
   have an output of that name (unless only one of their tables is called so); its table is where the pipeline's spec and the profile put it
   (`name:`/`path:` under the warehouse), so it is the table `run` writes;
2. one of Tributary's own tables: `quarantine`, `late_rows`, `quality`, `integration_quality`,
   `events` (also `runs`), or written out as `_tributary.quality`;
3. a table under the warehouse by name (`sales.daily` is <warehouse>/sales/daily): tables no
   pipeline here declares, e.g. another project's;
4. a path to a Delta table's folder, as given.

An output named like one of Tributary's tables wins; `_tributary.<name>` still reaches the latter.
With `scratch`, names mean the tables a `run --limit` wrote in the scratch warehouse instead
(framework.io.locations.scratch_warehouse).

Only the pipelines' YAML is read (its `name` and `outputs`), not validated: importing the spec's
models and Jinja would be a third of a `show`. A pipeline whose outputs' `name`/`path` are
templates (`{{ var('region') }}`) is loaded in full, with the profile's vars; a file that does not
read is skipped and named when a table is not found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from framework.errors import BadInput, Problem
from framework.io.locations import (
    EVENTS_TABLE,
    INTEGRATION_TABLE,
    INTERNAL_DIR,
    LATE_ROWS_TABLE,
    QUALITY_TABLE,
    QUARANTINE_TABLE,
    Warehouse,
    in_scratch,
    is_uri,
    output_location,
    scratch_warehouse,
)
from framework.profiles import Profile
from framework.project import Project
from framework.spec.base import closest

#: Tributary's own tables by the names `show` accepts
INTERNAL_TABLES = {
    "quarantine": QUARANTINE_TABLE,
    "late_rows": LATE_ROWS_TABLE,
    "quality": QUALITY_TABLE,
    "integration_quality": INTEGRATION_TABLE,
    "events": EVENTS_TABLE,
    "runs": EVENTS_TABLE,
}


@dataclass(frozen=True)
class TableRef:
    """A table a name resolved to."""

    name: str  # as the user named it
    location: str  # the Delta table's folder or URI
    about: str  # what it is, in words: "output of pipeline service_calls"
    pipeline: str | None = None  # the pipeline that writes it, for an output
    internal: bool = False  # one of Tributary's own tables


@dataclass
class Catalog:
    """The tables a project's names can mean, under its profile's warehouse (or the scratch one)."""

    project: Project
    profile: Profile
    scratch: bool = False
    _outputs: dict[str, list[tuple[str, str]]] | None = field(default=None, repr=False)  # output -> [(pipeline, table)]
    skipped: list[str] = field(default_factory=list)  # pipeline files that did not load
    refused: dict[str, BadInput] = field(default_factory=dict)  # output -> why its table is not read (a link out)

    @property
    def warehouse(self) -> Warehouse:
        return scratch_warehouse(self.project, self.profile) if self.scratch else Warehouse.of(self.project, self.profile)

    def outputs(self) -> dict[str, list[tuple[str, str]]]:
        """Every pipeline's outputs and their tables, read once."""
        if self._outputs is None:
            real = Warehouse.of(self.project, self.profile)
            found: dict[str, list[tuple[str, str]]] = {}
            for path in self.project.all_pipelines():
                try:
                    pipeline, outputs = self._declared_outputs(path)
                except BadInput:
                    self.skipped.append(self.project.relative(path))
                    continue
                for name, output in outputs.items():
                    try:
                        table = output_location(self.project, real, name, output)
                    except BadInput as e:  # a link out of the warehouse: not read either (said when named)
                        self.refused.setdefault(name, e)
                        continue
                    if self.scratch:
                        table = in_scratch(real, self.warehouse, table)
                    found.setdefault(name, []).append((pipeline, table))
            self._outputs = found
        return self._outputs

    def _declared_outputs(self, path: Path) -> tuple[str, dict[str, Any]]:
        """A pipeline's name and outputs (each with `name`/`path` attributes), from its YAML."""
        from framework.spec.yaml_source import load_yaml_file

        data = load_yaml_file(path, self.project.relative(path)).data
        if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not isinstance(data.get("outputs"), dict):
            raise BadInput(Problem("not a pipeline", file=self.project.relative(path)))
        outputs = {}
        for name, spec in data["outputs"].items():
            spec = spec if isinstance(spec, dict) else {}
            place = {key: spec.get(key) for key in ("name", "path")}
            if any(not isinstance(v, (str, type(None))) or "{{" in (v or "") for v in place.values()) or "{{" in data["name"]:
                return self._loaded_outputs(path)
            outputs[str(name)] = SimpleNamespace(**place)
        return data["name"], outputs

    def _loaded_outputs(self, path: Path) -> tuple[str, dict[str, Any]]:
        from framework.spec.loader import load_pipeline

        spec = load_pipeline(path, self.project.relative(path), self.profile.vars).spec
        return spec.name, dict(spec.outputs)

    def resolve(self, name: str) -> TableRef:
        """The table `name` means; bad input naming the closest names when there is none."""
        name = name.strip()
        if not name:
            raise BadInput(Problem("no table named", hint="give an output name, e.g. " + self._example()))
        outputs = self.outputs()
        pipeline, _, output = name.partition(".")
        if name in outputs:
            places = _one_table(name, outputs[name], self.warehouse.table(name) if _plain_name(name) else None)
            if len(places) > 1:
                raise BadInput(
                    Problem(
                        f"'{name}' is an output of several pipelines: {', '.join(p for p, _ in places)}",
                        hint="say which: " + " or ".join(f"{p}.{name}" for p, _ in places),
                    )
                )
            return TableRef(name, places[0][1], f"output of pipeline {places[0][0]}{self._where()}", places[0][0])
        if output and any(p == pipeline for p, _ in outputs.get(output, [])):
            table = next(t for p, t in outputs[output] if p == pipeline)
            return TableRef(name, table, f"output of pipeline {pipeline}{self._where()}", pipeline)
        if name in self.refused or output in self.refused:
            raise self.refused.get(name) or self.refused[output]
        internal = name.removeprefix(f"{INTERNAL_DIR}.").removeprefix(f"{INTERNAL_DIR}/")
        if internal in INTERNAL_TABLES:
            table = INTERNAL_TABLES[internal]
            about = f"Tributary's {table.removeprefix(INTERNAL_DIR + '/')} table{self._where()}"
            return TableRef(name, self.warehouse.internal(table), about, internal=True)
        if _plain_name(name):
            under = self.warehouse.table(name)
            if _is_delta(under, self.profile.storage_options):
                return TableRef(name, under, "a table under the warehouse")
        if _looks_like_path(name):
            location = name if is_uri(name) else str(Path(name).expanduser().resolve())
            if is_uri(name) or _is_delta(location, self.profile.storage_options):
                return TableRef(name, location, "a Delta table folder")
            raise BadInput(
                Problem(f"no Delta table at {location}", hint="a Delta table's folder holds _delta_log/; " + self._hint(name))
            )
        raise BadInput(Problem(f"no table '{name}'{self._where()}", hint=self._hint(name)))

    def names(self) -> list[str]:
        """The names `resolve` knows (ambiguous outputs as pipeline.output), for hints."""
        shown = []
        for output, places in sorted(self.outputs().items()):
            shown += [output] if len(places) == 1 else [f"{p}.{output}" for p, _ in places]
        return shown

    def _hint(self, name: str) -> str:
        outputs = self.names()
        internal = sorted(k for k in INTERNAL_TABLES if k != "runs")
        match = closest(name, [*outputs, *internal, *[f"{p}.{o}" for o, ps in self.outputs().items() for p, _ in ps]])
        hint = f"did you mean '{match}'? " if match else ""
        hint += f"outputs: {', '.join(outputs) or 'none'}; Tributary's tables: {', '.join(internal)}; or a Delta table's folder"
        if self.skipped:
            hint += f" (pipelines that did not load, so their outputs are not known: {', '.join(self.skipped)})"
        return hint

    def _where(self) -> str:
        return " (scratch: written by run --limit)" if self.scratch else ""

    def _example(self) -> str:
        names = self.names()
        return names[0] if names else "service_stats"


def _one_table(name: str, places: list[tuple[str, str]], named: str | None) -> list[tuple[str, str]]:
    """The places an output name several pipelines have can mean, narrowed to one table when only one
    can be meant: all write the same table, or only one of their tables has the name itself
    (`page_views` of access_log, not access_log_streaming's page_views_streaming)."""
    if len({table for _, table in places}) == 1:
        return places[:1]
    same = [(pipeline, table) for pipeline, table in places if table == named]
    return same if len(same) == 1 else places


def _plain_name(name: str) -> bool:
    return all(part.replace("_", "a").replace("-", "a").isalnum() for part in name.split("."))


def _looks_like_path(name: str) -> bool:
    return "/" in name or "\\" in name or is_uri(name) or _exists(Path(name))


def _exists(path: Path) -> bool:
    """Path.exists, with a name too long for the file system (or unreadable) as not there."""
    try:
        return path.exists()
    except OSError:
        return False


def _is_delta(location: str, storage_options: dict[str, str]) -> bool:
    if not is_uri(location):
        return _exists(Path(location) / "_delta_log") and (Path(location) / "_delta_log").is_dir()
    from deltalake import DeltaTable

    try:
        return bool(DeltaTable.is_deltatable(location, storage_options=storage_options or None))
    except Exception:  # noqa: BLE001 - an unreachable store is "not a table" here; reading it says why
        return False
