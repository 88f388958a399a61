"""One project context: what every command works on, worked out in one place.

A command line names a project (by the folder it runs in, or the pipeline file it is given), a
profile, vars, maybe an interval and a selection of steps. `run`, `compile`, `plan`, `validate`,
`watch`, the scheduler, backfills and the tests all need the same answers: which project root,
which profile, which vars win, what a naive time in `--interval` means (the pipeline's schedule's
timezone), what the pipeline compiles to and what a run would do. Before this module each of them
worked these out for itself, and a flag added to one was missing from the others. Now each builds
a `ProjectContext` and asks it (as SQLMesh's commands all go through one `Context`).

The context is cheap to build: it reads the profile and parses the flags, nothing else. The
pipeline is compiled when first asked for (`compiled`), and its plan when asked for (`plan`); no
JVM starts here. Running (`run`) is the one thing that starts Spark, through framework.engine.
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.compiler import CompiledPipeline, compile_pipeline
from framework.errors import BadInput, Problem
from framework.io.locations import EVENTS_TABLE, Warehouse, scratch_warehouse
from framework.profiles import Profile, load_profile
from framework.project import Project, existing, find_project
from framework.spec.intervals import Interval, instant, parse_interval, zone
from framework.spec.yaml_source import load_yaml_file
from framework.variables import parse_cli_vars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from framework.engine.context import Reporter
    from framework.engine.results import RunResult
    from framework.engine.streaming import KeptFrames
    from framework.plan.model import RunPlan

UTC_ZONE = "UTC"


@dataclass(frozen=True)
class ProjectContext:
    """A project under one profile, with the command line's vars, selection and interval.

    `pipeline` is the pipeline the command is about (None for commands about the whole project:
    `validate` without arguments, `runs`, `show`); `interval_text` stays text until a pipeline's
    timezone can read it."""

    project: Project
    profile: Profile
    variables: dict[str, Any] = field(default_factory=dict)
    select: str | None = None
    pipeline: Path | None = None
    interval_text: str | None = None
    shared_vars: bool = False  # the vars go to several pipelines: each takes those it has

    @classmethod
    def load(
        cls,
        pipeline: str | None = None,
        *,
        profile: str | None = None,
        variables: list[str] | None = None,
        select: str | None = None,
        interval: str | None = None,
        start: Path | None = None,
    ) -> ProjectContext:
        """The context of a command line: the project holding `pipeline` when it is a file, else the
        one at or above `start` (default: the current folder); `profile`: a name in configs/
        (default: $TRIBUTARY_PROFILE, else local); `variables`: `name=value` texts (--var)."""
        given = existing(pipeline)
        project = find_project(given or start)
        chosen = load_profile(project, profile)
        parsed = parse_cli_vars(variables or [])
        path = project.pipeline_path(pipeline) if pipeline else None
        return cls(project, chosen, parsed, select, path, interval)

    # -- the pipeline ------------------------------------------------------------------------

    @property
    def pipeline_path(self) -> Path:
        if self.pipeline is None:
            raise BadInput(Problem("this command needs a pipeline", hint="pass a pipeline file or name"))
        return self.pipeline

    def for_pipeline(self, path: Path) -> ProjectContext:
        """The same project, profile, vars, selection and interval about another pipeline (validate
        of many, the scheduler); the interval's naive times are then read in that one's timezone."""
        return replace(self, pipeline=path)

    def across(self, paths: Sized | None) -> ProjectContext:
        """The same, for a command over these pipelines (None: whichever the project has, read
        again and again, as the scheduler does): with more than one, a --var goes to those that
        have it, as a profile's vars do (`validate --var since=...` of a whole project), and only a
        var none of them has is a mistake (`vars_none_has`)."""
        return replace(self, shared_vars=paths is None or len(paths) > 1)

    def vars_none_has(self, compiled: list[CompiledPipeline], which: str = "of the pipelines") -> list[Problem]:
        """A problem per --var that none of `compiled` has (nothing to say when none compiled)."""
        from framework.spec.base import did_you_mean

        if not compiled:
            return []
        known = set().union(*(c.known_vars for c in compiled))
        return [
            Problem(f"--var {name}: none {which} has var '{name}'", hint=did_you_mean(name, known) or "they declare no vars")
            for name in self.variables
            if name not in known
        ]

    def selecting(self, select: str | None) -> ProjectContext:
        """The same, with another selection of steps (`tune STEP` needs the step and what it reads)."""
        return replace(self, select=select)

    @cached_property
    def interval(self) -> Interval | None:
        """`--interval START/END`, naive times read in the pipeline's schedule's timezone."""
        if self.interval_text is None:
            return None
        return parse_interval(self.interval_text, self.timezone(), "--interval")

    @cached_property
    def compiled(self) -> CompiledPipeline:
        """The pipeline as `validate` checks it and a run runs it (no JVM)."""
        return self.compile()

    def compile(self, interval: Interval | None = None) -> CompiledPipeline:
        """The pipeline compiled for `interval` (default: the command line's)."""
        covered = interval if interval is not None else self.interval
        return compile_pipeline(
            self.project, self.pipeline_path, self.profile, self.variables, self.select, covered, self.shared_vars
        )

    def plan(self, full_refresh: bool = False, limit: int | None = None) -> RunPlan:
        """What a run would do (framework.plan), or a try over each source's first `limit` rows."""
        from framework.plan import plan_for

        return plan_for(self.compiled, self.profile, full_refresh, limit)

    def run(
        self,
        compiled: CompiledPipeline | None = None,
        *,
        full_refresh: bool = False,
        continuous: bool = False,
        reporter: Reporter | None = None,
        limit: int | None = None,
        spark: SparkSession | None = None,
        concurrent: set[str] | None = None,
        kept: KeptFrames | None = None,
        java_options: str = "",
    ) -> RunResult:
        """Run the pipeline (`compiled`, default: this context's) under the profile: the one call
        that starts Spark (`java_options`: for its JVM, when this run starts one)."""
        from framework.engine.runner import run_pipeline

        return run_pipeline(
            compiled or self.compiled,
            self.profile,
            full_refresh=full_refresh,
            continuous=continuous,
            reporter=reporter,
            limit=limit,
            spark=spark,
            concurrent=concurrent,
            kept=kept,
            java_options=java_options,
        )

    # -- time ----------------------------------------------------------------------------------

    def timezone(self, path: Path | None = None) -> str:
        """The timezone of the pipeline's schedule (naive times on the command line are read in it),
        else UTC. Read from the YAML alone: compiling the pipeline says what else is wrong."""
        path = path or self.pipeline
        if path is None:
            return UTC_ZONE
        try:
            data = load_yaml_file(path, self.project.relative(path)).data
        except BadInput:
            return UTC_ZONE
        schedule = data.get("schedule") if isinstance(data, dict) else None
        named = schedule.get("timezone") if isinstance(schedule, dict) else None
        try:
            return zone(named).key if isinstance(named, str) else UTC_ZONE
        except ValueError:
            return UTC_ZONE  # compiling the pipeline says the timezone is unknown

    def instant(self, text: str, option: str) -> datetime:
        """A time given on the command line (`--from`), naive ones in the schedule's timezone."""
        zone = self.timezone()
        try:
            return instant(text, zone)
        except ValueError as e:
            raise BadInput(Problem(f"{option} {text}: {e}", hint=f"naive times are read in {zone}")) from None

    # -- where things are ---------------------------------------------------------------------

    def warehouse(self, scratch: bool = False) -> Warehouse:
        """The profile's warehouse, or the scratch one that tries (`run --limit`) write to."""
        return scratch_warehouse(self.project, self.profile) if scratch else Warehouse.of(self.project, self.profile)

    def events_table(self, scratch: bool = False) -> str:
        """The run log (framework.engine.events) of the warehouse."""
        return self.warehouse(scratch).internal(EVENTS_TABLE)
