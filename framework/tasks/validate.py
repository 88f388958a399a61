"""`tributary validate`: every pipeline checked without a JVM, one result per file.

A pipeline that compiles is also asked whether the scheduler would serve it: how many runs it has
left to catch up depends on the run history (framework.schedule.due.unserved), read from the
profile's warehouse without a JVM, and only when it can change the answer; and whether the
pipelines its `schedule: {after: [...]}` names exist, have batch schedules and wait for no one
in a cycle (framework.schedule.dependencies).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from framework.compiler import CompiledPipeline, source_file_problems
from framework.errors import BadInput, Problem
from framework.project_context import ProjectContext


@dataclass
class Checked:
    """One pipeline file as validate found it: compiled, or the problems that stop it."""

    path: Path
    shown: str
    compiled: CompiledPipeline | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.compiled is not None


def pipelines_to_check(context: ProjectContext, given: list[str] | None) -> list[Path]:
    """The files named, else every pipeline under pipelines/."""
    paths = [context.project.pipeline_path(p) for p in given] if given else context.project.all_pipelines()
    if not paths:
        raise BadInput(Problem("no pipelines found", hint="pass a pipeline file or add one under pipelines/"))
    return paths


def validate(context: ProjectContext, paths: list[Path], unreadable_history: Callable[[str], None]) -> list[Checked]:
    """Each pipeline compiled under the context's profile, vars, selection and interval; a
    scheduled one also checked against its run history (`unreadable_history` hears of a run log
    that cannot be read: counted as no history)."""
    context = context.across(paths)
    backlog = _Backlog(context, unreadable_history)
    checked = []
    for path in paths:
        one = Checked(path, context.project.relative(path))
        try:
            pipeline = context.for_pipeline(path)
            compiled = pipeline.compiled
            refused, notes = source_file_problems(compiled, pipeline.profile)  # as the run refuses them
            if refused:
                raise BadInput(*refused)
            compiled.notes.extend(notes)
            if compiled.spec.schedule is not None:
                backlog.check(path)
            check_tests(context.for_pipeline(path), compiled)
            one.compiled = compiled
        except BadInput as e:
            one.problems = list(e.problems)
        checked.append(one)
    _shared_tables(context, checked)
    return checked


def _shared_tables(context: ProjectContext, checked: list[Checked]) -> None:
    """A warning at each output whose table another pipeline validated here writes too: a copied
    pipeline overwrote the other's table unnoticed, and `show` named one owner."""
    from framework.io.locations import Warehouse
    from framework.plan.planner import output_table

    warehouse = Warehouse.of(context.project, context.profile)
    writers: dict[str, list[tuple[Checked, str]]] = {}
    for one in checked:
        if one.compiled is not None:
            for output in one.compiled.spec.outputs:
                writers.setdefault(output_table(one.compiled, warehouse, output), []).append((one, output))
    for table, found in writers.items():
        pipelines = sorted({one.compiled.name for one, _ in found if one.compiled is not None})
        if len(pipelines) < 2:
            continue
        for one, output in found:
            assert one.compiled is not None
            others = ", ".join(p for p in pipelines if p != one.compiled.name)
            one.compiled.spec_warnings.append(
                one.compiled.loaded.problem(
                    f"output '{output}' writes {context.project.relative(Path(table))}, which pipeline(s) {others} write too: "
                    "each run of one replaces or adds to what the other wrote",
                    ("outputs", output),
                    hint="give each pipeline's output a table of its own (name: or path:), unless they are meant to share it",
                )
            )


def check_tests(context: ProjectContext, compiled: CompiledPipeline) -> None:
    """The pipeline's tests (`tests:` and <name>.tests.yaml) name its steps, sources and columns
    (framework.testing.suite); BadInput with what is wrong."""
    from framework.testing.suite import check_test, declared_tests

    tests = declared_tests(compiled.loaded, context.project.root)
    if not tests:
        return
    whole = compiled if context.select is None else context.selecting(None).compiled
    problems = [p for test in tests for p in check_test(whole, test, context.project.root)]
    if problems:
        raise BadInput(*problems)


class _Backlog:
    def __init__(self, context: ProjectContext, unreadable: Callable[[str], None]):
        self.context, self.unreadable, self.now = context, unreadable, datetime.now(UTC)
        self._dependencies: list[Problem] | None = None

    def check(self, path: Path) -> None:
        from framework.schedule.dependencies import dependency_check
        from framework.schedule.due import unserved
        from framework.schedule.pipelines import read_schedule

        scheduled = read_schedule(self.context.project, path)
        if scheduled is None:
            return
        if scheduled.schedule.after:
            if self._dependencies is None:  # the whole project's, read once
                self._dependencies = dependency_check(self.context.project)
            mine = [p for p in self._dependencies if p.file == scheduled.shown]
            if mine:
                raise BadInput(*mine)
        problem = unserved(scheduled, lambda: self._history(scheduled.name, scheduled.streaming), self.now)
        if problem is not None:
            raise BadInput(problem)

    def _history(self, name: str, streaming: bool) -> dict[Any, Any]:
        from framework.io.delta import local_store
        from framework.schedule.history import RunLog

        table = self.context.events_table()
        try:
            return RunLog(local_store(self.context.profile.storage_options), table).slots(name, streaming)
        except Exception as e:  # noqa: BLE001 - e.g. a cloud warehouse out of reach: counted as no history
            said = f"{type(e).__name__}: {(str(e).strip() or '-').splitlines()[0]}"
            self.unreadable(f"note: could not read the run history in {table} ({said}); counted as none")
            return {}
