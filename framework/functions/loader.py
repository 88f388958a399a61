"""Import a project's udfs/ and take the functions its decorators registered.

Tributary imports udfs/ itself, as a package named `udfs` (so one module can import another:
`from udfs.prices import homogenize`), for `validate` and before a run starts Spark. An error
while importing is bad input at the module's file and line, never a traceback. The result is kept
per process until a file under udfs/ changes.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import os
import signal
import sys
import traceback
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

from framework.errors import BadInput, Problem
from framework.functions.builtins import spark_functions
from framework.functions.ddl import DdlError, check_type, columns
from framework.functions.registry import GroupFunction, SqlFunction, collecting
from framework.project import Project
from framework.spec.template_limits import deadline

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PACKAGE = "udfs"
#: a udfs/ module still importing after this long is an error of its own (validate, run and test
#: waited for ever on one that slept or looped at import)
IMPORT_SECONDS = 60.0


@dataclass(frozen=True)
class Functions:
    """The functions a project's udfs/ registered, and the modules that hold them."""

    sql: dict[str, SqlFunction] = field(default_factory=dict)
    group: dict[str, GroupFunction] = field(default_factory=dict)
    modules: tuple[str, ...] = ()
    root: str = ""  # the project's root: a failure names udfs/ files relative to it

    def use(self, spark: SparkSession) -> None:
        """Before a run: ship udfs/ to the executors and register its @udf functions by name.

        Shipping is pickling the code by value, so executors run it without the project's files
        (local and cluster profiles alike); cloudpickle would otherwise pickle a module's function
        by its import path, which executors cannot import."""
        if not self.modules or _used_on.get(spark) is self:
            return
        if workers_per_project:  # the warm engine: this project's Python workers, not another's
            spark.sparkContext.environment[WORKERS_OF] = self.root
        from pyspark import cloudpickle
        from pyspark.sql.functions import pandas_udf

        for name in self.modules:
            if name in sys.modules:
                cloudpickle.register_pickle_by_value(sys.modules[name])
        for function in self.sql.values():
            spark.udf.register(function.name, pandas_udf(function.fn, function.returns))  # type: ignore[call-overload]
        _used_on[spark] = self


#: The project whose udfs/ a run's Python workers run, as a variable of theirs (the warm engine).
#: Spark keeps one pool of Python workers per set of worker environment variables, so each
#: project gets workers of its own: what a project's function changes in a worker's modules
#: (`json`, pandas' options, the decimal context) is not what another project's function finds.
#: Projects without udfs/ share the engine's warm workers (only Tributary's own code runs there).
WORKERS_OF = "TRIBUTARY_WORKERS_OF"
workers_per_project = False  # set by the warm engine (framework.warm.server)

NONE = Functions()
#: the functions last registered on each session: another run over the same session (each delivery
#: of a `tributary test` scenario is one) does not build the same pandas udfs again (~1 s each time)
_used_on: weakref.WeakKeyDictionary[SparkSession, Functions] = weakref.WeakKeyDictionary()
_loaded: dict[Path, tuple[tuple, Functions]] = {}


def forget() -> None:
    """Drop what was imported (the warm engine, after each run: the next may be another project's)."""
    _loaded.clear()


def udfs_files(folder: Path) -> list[Path]:
    """Every module of udfs/, in its subfolders too (a module imports `udfs.lib.x`), sorted."""
    if not folder.is_dir():
        return []
    return sorted(f for f in folder.rglob("*.py") if "__pycache__" not in f.relative_to(folder).parts)


def load_functions(project: Project) -> Functions:
    folder = project.udfs_dir
    files = sorted(folder.glob("*.py")) if folder.is_dir() else []
    if not files:
        return NONE
    stamp = tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in udfs_files(folder))
    cached = _loaded.get(folder.resolve())
    if cached is not None and cached[0] == stamp and all(m in sys.modules for m in cached[1].modules):
        return cached[1]
    functions = _import(project, folder, files)
    _loaded[folder.resolve()] = (stamp, functions)
    return functions


class _FromSource(importlib.machinery.SourceFileLoader):
    """Compiles a udfs/ module from its source every time. Python's bytecode cache trusts a
    file's size and modification second: a function edited to a text of the same size within the
    same second (0.1 -> 0.5) ran the old code in a process that imported it before (the warm
    engine, watch, the tests)."""

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


def _import(project: Project, folder: Path, files: list[Path]) -> Functions:
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]  # another project's udfs/, or an older version of this one
    package = ModuleType(PACKAGE)
    package.__path__ = [str(folder)]
    package.__package__ = PACKAGE
    sys.modules[PACKAGE] = package
    importlib.invalidate_caches()
    for place in [folder, *(f.parent for f in udfs_files(folder))]:  # subpackages compile from source too
        sys.path_importer_cache[str(place)] = importlib.machinery.FileFinder(str(place), (_FromSource, [".py"]))
    problems: list[Problem] = []
    with collecting() as collected, _signal_handlers_kept(), _no_exit():
        for file in files:
            if file.stem == "__init__":
                continue
            try:
                with deadline(IMPORT_SECONDS, lambda: TimeoutError(f"still importing after {IMPORT_SECONDS:g} s")):
                    importlib.import_module(f"{PACKAGE}.{file.stem}")
            except BaseException as error:  # the analyst's code may raise anything
                if isinstance(error, KeyboardInterrupt):
                    raise
                problems.append(_import_problem(project, folder, file, error))
    for message, file_name, line in collected.problems:
        problems.append(Problem(message, file=project.relative(Path(file_name)), line=line))
    problems += _declaration_problems(project, collected.sql, collected.group)
    if problems:
        raise BadInput(*problems)
    modules = tuple(m for m in sys.modules if m.startswith(PACKAGE + "."))
    return Functions(dict(collected.sql), dict(collected.group), modules, str(project.root.resolve()))


@contextlib.contextmanager
def _signal_handlers_kept() -> Iterator[None]:
    """The modules imported inside leave Ctrl-C's and SIGTERM's handlers as they were: a module
    that ignored SIGINT made Ctrl-C do nothing, and the interrupted run went on to commit (in
    the warm engine: every later run of every project). Only the main thread may set them."""
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            if handler is not None and signal.getsignal(signum) is not handler:
                with contextlib.suppress(ValueError):  # not the main thread
                    signal.signal(signum, handler)


@contextlib.contextmanager
def _no_exit() -> Iterator[None]:
    """`os._exit()` in a module imported inside is an error of that import, as `sys.exit()` is:
    it ended validate, run and test at once with its code (0: a CI saw them pass, having done
    nothing)."""
    real = os._exit

    def refused(status: int) -> NoReturn:
        raise SystemExit(f"os._exit({status}) while being imported")

    os._exit = refused
    try:
        yield
    finally:
        os._exit = real


def _import_problem(project: Project, folder: Path, file: Path, error: BaseException) -> Problem:
    """The module and the line of the udfs/ file where importing it failed."""
    where, line = file, None
    if isinstance(error, SyntaxError) and error.filename:
        where, line = Path(error.filename), error.lineno
    else:
        for frame in traceback.extract_tb(error.__traceback__):
            if Path(frame.filename).resolve().is_relative_to(folder.resolve()):
                where, line = Path(frame.filename), frame.lineno
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    message = f"importing udfs module '{file.stem}' failed: {type(error).__name__}" + (f": {text}" if text else "")
    hint = f"udfs/ modules are imported by Tributary; fix the module so `python -c 'import udfs.{file.stem}'` works"
    if isinstance(error, ModuleNotFoundError):
        hint = f"install '{error.name}' in the project's environment, or import it inside the function that needs it"
    return Problem(message, file=project.relative(where), line=line, hint=hint)


def _declaration_problems(project: Project, sql: dict[str, SqlFunction], group: dict[str, GroupFunction]) -> list[Problem]:
    problems = []
    builtin = spark_functions()
    for f in sql.values():
        file = project.relative(Path(f.file))
        if not f.name.isidentifier():
            problems.append(
                Problem(f"udf name '{f.name}' is not a SQL identifier", file, f.line, hint="use letters, digits and _")
            )
        elif f.name.lower() in builtin:
            hint = "give it another name: @udf(..., name=...)"
            problems.append(Problem(f"udf '{f.name}' has the name of a Spark function", file, f.line, hint=hint))
        try:
            check_type(f.returns)
        except DdlError as e:
            problems.append(Problem(f"udf '{f.name}': returns: {e}", file, f.line, hint='a Spark type, e.g. returns="double"'))
    for g in group.values():
        if g.returns is not None:
            try:
                columns(g.returns)
            except DdlError as e:
                hint = 'e.g. returns="pair string, correlation double"'
                problems.append(
                    Problem(f"group function '{g.name}': returns: {e}", project.relative(Path(g.file)), g.line, hint=hint)
                )
    return problems
