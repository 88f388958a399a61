"""A new engine warms itself up while it waits for its first command.

Why: a JVM pays for the first run of any kind of work, whatever the data: loading its classes,
compiling its hot code, generating code for its plans, starting Python workers for udfs/ and for
a chained step's reader. Over the examples' tests (`tributary test`, one process, 2 cores, load 3),
measured as the first work of a new JVM they took 44.0 s and 48.7 s; the same tests after this
warm-up took 22.7 s and 24.6 s, and a second time on one JVM 21.3 s and 22.0 s. So an engine that
is started ahead of its use (`tributary engine start`) spends its first idle seconds running
tests of its own, and the analyst's first `tributary test` then answers as the second does.

What: the tests of a small project shipped with Tributary (warm-up-project/: two streams stacked
with a `drop` expectation, small window arrays, a chained SQL step calling a udf, a group step; a
batch test and two scenarios), run as `tributary test` runs them, in a folder of the engine's
own (a copy of the project, removed after): scratch tables only, no warehouse of any user's, no
project's udfs/ or views (the warm-up has a run session of its own, closed as a run's is).

When: only on an engine that `tributary engine start` started (an engine a command started runs
that command at once, and its run warms it). Any command that comes stops the warm-up as Ctrl-C
stops a run (framework.warm.server), so a command waits for the cancel, never for the warm-up.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

#: the project whose tests are the warm-up (package data)
PROJECT = Path(__file__).with_name("warm-up-project")


def warm_up(folder: Path) -> str:
    """Run the warm-up project's tests in a copy of it under `folder`; what they did, in words."""
    from framework.project_context import ProjectContext
    from framework.testing.run import run_tests, tests_to_run

    _remove_left_behind(folder)
    copy = Path(tempfile.mkdtemp(prefix=f"warm-up-{os.getpid()}-", dir=folder))
    try:
        project = copy / "project"
        shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
        context = ProjectContext.load(start=project, profile="local")
        for pipeline in context.project.all_pipelines():  # a stream's folders exist before it starts
            for source in context.for_pipeline(pipeline).selecting(None).compiled.spec.sources.values():
                (project / str(getattr(source, "path", ""))).mkdir(parents=True, exist_ok=True)
        run = run_tests(tests_to_run(context, None, None), lambda outcome: None)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    failed = ", ".join(f"{o.test.id}: {o.failure or 'rows differ'}" for o in run.failed)
    return f"{len(run.outcomes)} tests in {run.seconds:.1f}s" + (f" ({len(run.failed)} failed: {failed})" if failed else "")


def _remove_left_behind(folder: Path) -> None:
    """The warm-up folders of engines killed during their warm-up (the folder names its engine's pid)."""
    for left in folder.glob("warm-up-*-*"):
        pid = left.name.split("-")[2]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(left, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
