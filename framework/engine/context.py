"""What every part of one run shares: the plan, the session, the Delta store, the result so far.

One RunContext per run, made by framework.engine.runner and handed to the batch or streaming
driver. Things to undo when the run ends (temporary views, cached frames, staging files) are
registered with `on_exit`, on an ExitStack the runner closes whatever happens.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from framework.engine.results import RunResult
from framework.errors import Problem
from framework.io.locations import STAGING_DIR
from framework.operators.context import Rejected
from framework.quality.gate import QualityGate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from framework.compiler import CompiledPipeline
    from framework.io.delta.base import DeltaStore
    from framework.plan.model import RunPlan
    from framework.profiles import Profile


def quietly(fn: Callable[[], Any]) -> None:
    """Best-effort cleanup after the real error: its own failure must not hide that error."""
    with suppress(Exception):
        fn()


class Reporter(Protocol):
    """Progress callbacks (the CLI draws them; tests may ignore them)."""

    def update(self, kind: str, name: str, status: str, detail: str = "") -> None: ...


class Silent:
    def update(self, kind: str, name: str, status: str, detail: str = "") -> None:
        pass


@dataclass
class RunContext:
    compiled: CompiledPipeline
    plan: RunPlan
    profile: Profile
    spark: SparkSession
    store: DeltaStore
    result: RunResult
    reporter: Reporter = field(default_factory=Silent)
    #: streaming: keep running every trigger interval until `stop` is set (Ctrl-C, SIGTERM)
    continuous: bool = False
    stop: threading.Event = field(default_factory=threading.Event)
    quality: QualityGate = field(default_factory=QualityGate)
    #: rows steps and expectations turned away, for the quarantine table
    rejected: list[Rejected] = field(default_factory=list)
    cleanup: ExitStack = field(default_factory=ExitStack)  # closed by the runner when the run ends
    #: swa steps with size: auto that learned from this run's input at its start (no history yet)
    learned: dict[str, Any] = field(default_factory=dict)
    #: batch: the run key (framework.engine.transaction.run_key), computed once
    key: str | None = None
    #: runs of this pipeline started beside this one under the same lock (a parallel backfill),
    #: going on or ended: not to be recovered
    siblings: set[str] = field(default_factory=set)
    #: streaming: frames a first run built, kept for the next runs of the same plan and session
    #: (framework.engine.streaming.KeptFrames); None: each run builds its own
    kept: Any = None

    def __post_init__(self) -> None:
        self.result.quality = self.quality.results

    @property
    def run_id(self) -> str:
        return self.result.run_id

    @property
    def pipeline(self) -> str:
        return self.plan.pipeline

    def on_exit(self, undo: Callable[[], Any]) -> None:
        """Undo something when the run ends (a view, a cache, staging files), best effort: a
        failure there must not hide the run's own outcome."""
        self.cleanup.callback(quietly, undo)

    def internal(self, relative: str) -> str:
        """A path under the warehouse's own folder (_tributary/...)."""
        return self.plan.warehouse.internal(relative)

    def staging(self, name: str) -> str:
        return self.internal(f"{STAGING_DIR}/{self.run_id}/{name}")

    def problem(self, message: str, at: tuple[Any, ...], hint: str | None = None) -> Problem:
        """A problem located at a path of the pipeline's YAML."""
        return self.compiled.loaded.problem(message, at, hint=hint)
