"""A pipeline's tests, read from its `tests:` key and `pipelines/<name>.tests.yaml`, and checked
against what the compiler knows before Spark starts.

Everything a test names is checked here, with no JVM, so `validate` and `tributary test` refuse
a malformed test alike (exit 2, at its line): the step or output it checks, the sources and steps
it gives rows for (each one the checked step reads), the sources it leaves out (every source the
run would read must be given: a test never reads the real data), and the columns of given and
expected rows against the node's columns when the compiler can list them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from framework.compiler import CompiledPipeline
from framework.errors import BadInput, Problem
from framework.io.locations import within
from framework.schemas import Schema
from framework.spec.base import did_you_mean
from framework.spec.loader import LoadedPipeline, validation_problems
from framework.spec.tests import Rows, RowsFile, TestsFile, UnitTest
from framework.spec.yaml_source import LocatedDocument, load_yaml_file
from framework.testing.rows import read_rows_file


@dataclass(frozen=True)
class DeclaredTest:
    """One test and where it is written (for its problems' lines and its rows files)."""

    pipeline: str
    name: str
    spec: UnitTest
    doc: LocatedDocument
    at: tuple[Any, ...]  # its path in doc: ("tests", name)

    @property
    def folder(self) -> Path:
        return Path(self.doc.file).parent

    @property
    def file(self) -> str:
        return self.doc.file

    @property
    def line(self) -> int | None:
        found = self.doc.locate(self.at)
        return found[0] if found else None

    @property
    def id(self) -> str:
        return f"{self.pipeline}::{self.name}"

    def problem(self, message: str, *at: Any, hint: str | None = None) -> Problem:
        found = self.doc.locate((*self.at, *at))
        line, col = found if found else (None, None)
        return Problem(f"test '{self.name}': {message}", file=self.doc.file, line=line, col=col, hint=hint)

    def rows(self, rows: Rows, root: Path, *at: Any) -> list[dict[str, Any]]:
        """Rows written inline, or read from their file (relative to the file holding the test)."""
        if isinstance(rows, RowsFile):
            path = root / self.folder / rows.file
            if not within(str(path), str(root)):  # a test reads the project's files, nothing else
                hint = "give a path inside the project, relative to the file holding the test"
                raise BadInput(self.problem(f"rows file outside the project: {rows.file}", *at, "file", hint=hint))
            try:
                return read_rows_file(path, str(self.folder / rows.file))
            except BadInput as e:
                raise BadInput(self.problem(str(e.problems[0].message), *at, "file", hint=e.problems[0].hint)) from None
        return rows


def declared_tests(loaded: LoadedPipeline, root: Path) -> list[DeclaredTest]:
    """The tests of a loaded pipeline: its `tests:` key, then its `.tests.yaml` file's."""
    name = loaded.spec.name
    found = [DeclaredTest(name, n, t, loaded.doc, ("tests", n)) for n, t in loaded.spec.tests.items()]
    beside = loaded.path.with_name(f"{loaded.path.stem}.tests.yaml")
    if beside.is_file():
        shown = str(Path(loaded.shown_as).with_name(beside.name))
        doc = load_yaml_file(beside, shown)
        if not isinstance(doc.data, dict):
            raise BadInput(
                Problem("a tests file is a mapping: tests: {<name>: {step: ..., given: ..., expect: ...}}", file=shown, line=1)
            )
        try:
            tests = TestsFile.model_validate(doc.data).tests
        except ValidationError as e:
            raise BadInput(*validation_problems(e, doc)) from None
        for n, t in tests.items():
            if n in loaded.spec.tests:
                raise BadInput(
                    Problem(f"test '{n}' is also in {loaded.shown_as}", file=shown, line=(doc.locate(("tests", n)) or (None,))[0])
                )
            found.append(DeclaredTest(name, n, t, doc, ("tests", n)))
    return found


def checked_node(compiled: CompiledPipeline, test: DeclaredTest) -> tuple[str, str | None]:
    """The step whose rows the test compares, and the output when it names one."""
    spec = compiled.spec
    named = test.spec.step
    if named in spec.steps:
        return named, None
    if named in spec.outputs:
        return spec.output_step(named), named
    raise BadInput(
        test.problem(
            f"no step or output '{named}' in {compiled.name}",
            "step",
            hint=did_you_mean(named, set(spec.steps) | set(spec.outputs)),
        )
    )


def needed_nodes(compiled: CompiledPipeline, step: str, given: set[str]) -> list[str]:
    """The sources and steps the run of a test builds, in run order: `step` and what it reads,
    up to the given nodes (what a given step reads is not run)."""
    inputs = compiled.graph.inputs
    needed: set[str] = set()
    todo = [step]
    while todo:
        node = todo.pop()
        if node in needed:
            continue
        needed.add(node)
        if node not in given:
            todo.extend(inputs.get(node, ()))
    return [n for n in compiled.graph.order() if n in needed]


def check_test(compiled: CompiledPipeline, test: DeclaredTest, root: Path) -> list[Problem]:
    """What is certainly wrong with a test, without Spark (empty: nothing)."""
    try:
        step, _ = checked_node(compiled, test)
    except BadInput as e:
        return e.problems
    spec, problems = test.spec, []
    upstream = compiled.graph.upstream(step)
    if spec.then is not None:
        return _check_scenario(compiled, test, step, upstream, root)
    for name in spec.given:
        if name not in upstream:
            nodes = set(compiled.spec.sources) | set(compiled.spec.steps)
            hint = f"'{step}' reads: {', '.join(sorted(upstream))}" if name in nodes else did_you_mean(name, nodes)
            what = "is not read by" if name in nodes else "is neither a source nor a step, so not read by"
            problems.append(test.problem(f"given '{name}' {what} '{step}'", "given", name, hint=hint))
    if problems:
        return problems
    for node in needed_nodes(compiled, step, set(spec.given)):
        if node in compiled.spec.sources and node not in spec.given:
            problems.append(
                test.problem(
                    f"'{step}' reads source '{node}', and the test gives no rows for it (a test never reads real data)",
                    "given" if spec.given else "step",
                    hint=f"add given: {{{node}: []}} for no rows",
                )
            )
    for name, rows in spec.given.items():
        problems += _columns(test, compiled.schemas.get(name), test.rows(rows, root, "given", name), ("given", name), f"'{name}'")
    expect = spec.expected
    if expect is not None:
        schema = compiled.schemas.get(step)
        expected = test.rows(expect.rows, root, "expect", "rows")
        problems += _columns(test, schema, expected, ("expect", "rows"), f"'{step}'")
        if expect.columns is not None:
            problems += _columns(test, schema, [dict.fromkeys(expect.columns)], ("expect", "columns"), f"'{step}'")
            listed = {c.lower() for c in expect.columns}
            for i, row in enumerate(expected):
                extra = [c for c in row if c.lower() not in listed]
                if extra:
                    problems.append(
                        test.problem(
                            f"expected row {i + 1} names {', '.join(extra)}, not among columns: {expect.columns}",
                            "expect",
                            "rows",
                            i,
                            hint="add them to columns:, or leave them out of the row",
                        )
                    )
        elif schema is not None and schema.complete:
            for i, row in enumerate(expected):
                named = {c.lower() for c in row}
                left = [c for c in schema.names if c.lower() not in named]
                if left:
                    problems.append(
                        test.problem(
                            f"expected row {i + 1} leaves out {', '.join(left)} of '{step}'",
                            "expect",
                            "rows",
                            i,
                            hint="give every column, or compare some: expect: {columns: [...], rows: [...]}",
                        )
                    )
                    break
    return problems


def _check_scenario(compiled: CompiledPipeline, test: DeclaredTest, step: str, upstream: set[str], root: Path) -> list[Problem]:
    """A streaming scenario: a streaming pipeline, deliveries to the sources the step reads, columns."""
    problems = []
    if compiled.spec.mode != "streaming":
        return [test.problem("deliveries (then:) are for streaming pipelines", "then", hint="give rows with given: and expect:")]
    read = sorted(n for n in upstream if n in compiled.spec.sources)
    for i, delivery in enumerate(test.spec.then or []):
        for name, rows in delivery.rows.items():
            if name not in read:
                hint = did_you_mean(name, set(read)) if name not in compiled.spec.sources else f"it reads: {', '.join(read)}"
                problems.append(
                    test.problem(f"delivery {i + 1}: '{step}' reads no source '{name}'", "then", i, "rows", name, hint=hint)
                )
                continue
            at = ("then", i, "rows", name)
            problems += _columns(test, compiled.schemas.get(name), test.rows(rows, root, *at), at, f"'{name}'")
        expected = delivery.expected
        if expected is not None:
            at = ("then", i, "emitted", "rows")
            problems += _columns(test, compiled.schemas.get(step), test.rows(expected.rows, root, *at), at, f"'{step}'")
    return problems


def _columns(
    test: DeclaredTest, schema: Schema | None, rows: list[dict[str, Any]], at: tuple[Any, ...], what: str
) -> list[Problem]:
    problems = []
    for i, row in enumerate(rows):
        for column in row:
            if schema is not None and schema.lacks(str(column)):
                where = (*at, i, column) if len(rows) > 1 or at[-1] != "columns" else at
                problems.append(test.problem(f"{what} has no column '{column}'", *where, hint=schema.hint(str(column), what)))
    return problems[:10]
