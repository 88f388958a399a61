"""The heavy imports a run will make, made in a thread while Spark's JVM starts.

Why: starting the JVM takes seconds in which this process only waits on it, and a pipeline with
expectations imports Great Expectations (3–4 s of imports on the 2-core development machine)
only once its frames are built, after that wait. Imported in a thread started just before the
JVM, the two overlap. Pipelines with udfs/ import pandas and Arrow for their functions the same
way. A pipeline that needs neither imports nothing more.

A warm engine started by a command does the same while its JVM starts, for the pipeline file the
command names (`for_file`): its first checked run then finds Great Expectations imported.

What is imported does not change: only when. The run waits for the thread before it goes on
(`meanwhile`): Great Expectations cannot be imported from two threads at once (its modules import
each other, and the second thread finds one partially initialized: an ImportError).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from framework.compiler import CompiledPipeline
    from framework.spec.models import Pipeline

#: what `for_file` says it imported, for a pipeline with expectations
GREAT_EXPECTATIONS = "Great Expectations"

THREAD_NAME = "tributary-preload"


def start(pipelines: Iterable[CompiledPipeline]) -> threading.Thread:
    """A started daemon thread importing what `pipelines` will need (join it to wait)."""
    pipelines = list(pipelines)
    thread = threading.Thread(target=_import_for, args=(pipelines,), name=THREAD_NAME, daemon=True)
    thread.start()
    return thread


@contextmanager
def meanwhile(pipelines: Iterable[CompiledPipeline]) -> Iterator[None]:
    """The imports `pipelines` need, in a thread while the block runs (it starts Spark), finished
    when the block ends: nothing after it imports them at the same time. A block that fails (Spark
    did not start, Ctrl-C) does not wait for them: the run ends there."""
    thread = start(pipelines)
    yield
    thread.join()


def for_file(path: Path) -> list[str]:
    """In this thread: the imports the pipeline file at `path` needs that a warm engine has not
    made already (Great Expectations when it has expectations); what was imported, in words.
    A file that does not load as a pipeline (its command will say why) imports nothing."""
    from framework.spec.loader import load_pipeline

    if not path.is_file():  # a pipe would block the engine's start on its reading
        return []
    try:
        spec = load_pipeline(path).spec
    except Exception:  # noqa: BLE001 - the command reports its own input's problems
        return []
    return [GREAT_EXPECTATIONS] if has_expectations(spec) and _import_great_expectations() else []


def has_expectations(spec: Pipeline) -> bool:
    return any(node.expectations for node in (*spec.steps.values(), *spec.outputs.values()))


def _import_for(pipelines: list[CompiledPipeline]) -> None:
    try:
        if any(one.functions.modules for one in pipelines):
            import pyspark.sql.pandas.functions  # noqa: F401
    except Exception:  # noqa: BLE001 - the run imports it again where it needs it, and says why it fails
        pass
    if any(has_expectations(one.spec) for one in pipelines):
        _import_great_expectations()


def _import_great_expectations() -> bool:
    try:
        import great_expectations.expectations.registry
        import great_expectations.validator.metric_configuration  # noqa: F401
    except Exception:  # noqa: BLE001 - the run imports it again where it needs it, and says why it fails
        return False
    return True
