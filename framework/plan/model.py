"""The run plan: what a run will read, build, check and write, decided before Spark starts.

A plan is plain data (framework.plan.planner builds it from a compiled pipeline, the engine
executes it), so every decision about the run is made once, in one place, and can be shown
(`tributary plan`) and tested without a JVM:

- which sources and steps the selected outputs need, in run order;
- which steps are read more than once (computed once and shared);
- per output: its table, the mode it writes with, whether it stages the step's rows or its own
  checked rows, and which rows its write splits off for the quarantine;
- the expectations on each step and output;
- for a try (`run --limit N`, a `Sample`): each source's row limit, and the scratch warehouse that
  takes every table the run writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from framework.io.locations import Warehouse
    from framework.operators.registry import StepKind
    from framework.spec.expectations import ExpectationSpec
    from framework.templating import RenderedSql


class RunMode(StrEnum):
    BATCH = "batch"
    STREAMING = "streaming"


class CheckScope(StrEnum):
    """Whose expectations refused a row (the quarantine's `source` says which)."""

    STEP = "step"
    OUTPUT = "output"


@dataclass(frozen=True)
class PlannedSource:
    name: str
    spec: Any  # FileSource | DeltaSource
    location: str  # a resolved local path or a URI
    readers: tuple[str, ...]  # the planned steps that read it
    limit: int | None = None  # a try reads the source's first `limit` rows (framework.io.sample)


@dataclass(frozen=True)
class Sample:
    """A try of the pipeline (`tributary run --limit N`): every source read as its first `rows`
    rows, in batch (a streaming pipeline too: one batch over those rows, no checkpoints), and
    every table the run writes (outputs, run log, quarantine) in the scratch warehouse, each
    output rebuilt whole, so it holds exactly what this try made. Sources, and the history of
    learned window sizes, are read from the real warehouse, which the try never writes."""

    rows: int
    real: Warehouse  # where the pipeline's inputs live


CHAINS_DIR = "_tributary/chains"  # under the warehouse: one internal Delta table per chained step


@dataclass(frozen=True)
class Chain:
    """A per-micro-batch step that other steps read on a stream. Its operator runs in a query of
    its own that commits each micro-batch's emitted rows once, with (app id, batch id), to an
    internal Delta table; its readers and outputs read that table as a stream, in the same run
    (an available-now run finishes the chain's query first). See docs/architecture.md."""

    table: str  # the internal Delta table of its emitted rows (<warehouse>/_tributary/chains/<pipeline>/<step>)
    event_time: str | None  # the column of its rows that carries event time; None: its readers get no watermark
    upstream_delay_s: float  # the largest watermark delay behind its inputs (seconds)
    lag_s: float | None  # how far behind that a row it emits later can be (the kind's bound); None: unknown

    @property
    def delay_s(self) -> float:
        """The watermark delay its readers see on `event_time`: upstream delay + lag."""
        return self.upstream_delay_s + (self.lag_s or 0.0)

    def watermark(self) -> str:
        """The watermark its readers see, in words (plan, run summary, run log)."""
        if self.event_time is None:
            return "none: its rows carry no event-time column (readers may aggregate by key into a merge output)"
        text = f"{self.event_time} − {_seconds(self.delay_s)} (inputs' delay {_seconds(self.upstream_delay_s)}"
        if self.lag_s is None:
            return text + " + no known bound on how late it emits: rows behind it are recorded as late)"
        return text + f" + emission lag {_seconds(self.lag_s)})"


def _seconds(value: float) -> str:
    return f"{value:g}s"


@dataclass(frozen=True)
class PlannedStep:
    name: str
    kind: StepKind
    spec: Any  # the step's spec (framework.spec.steps)
    inputs: tuple[str, ...]  # sources and steps it reads
    sql: RenderedSql | None  # the rendered query of a template kind
    readers: int  # planned steps and outputs that read its rows
    selected: bool = True  # chosen by --select (else built only because a chosen step reads it)
    #: the output whose write splits off the rows this step's drop expectations refuse (its only
    #: reader, with no row checks of its own); None: the refused rows are read again for the quarantine
    split_by: str | None = None
    #: a stream: a per-micro-batch step that other steps read runs through an internal table
    chain: Chain | None = None

    @property
    def expectations(self) -> tuple[ExpectationSpec, ...]:
        return tuple(self.spec.expectations)

    @property
    def checks_rows(self) -> bool:
        return any(e.on == "rows" for e in self.expectations)

    @property
    def drops_rows(self) -> bool:
        return any(e.on == "rows" and e.severity == "drop" for e in self.expectations)

    @property
    def shared(self) -> bool:
        """Read by several steps or outputs: computed once."""
        return self.readers > 1


@dataclass(frozen=True)
class QuarantineSplit:
    """Rows an output's write splits off: those the expectations of `target` refused."""

    target: str
    scope: CheckScope


@dataclass(frozen=True)
class PlannedOutput:
    name: str
    step: str  # the step whose rows it writes
    table: str  # the Delta table's location
    mode: str  # append | overwrite | merge, as this run writes (a batch full refresh overwrites)
    keys: tuple[str, ...]
    partition_by: tuple[str, ...]
    expectations: tuple[ExpectationSpec, ...]
    split: QuarantineSplit | None = None
    #: an interval-sliced output: the column whose values in the run's interval are the rows it
    #: replaces (mode overwrite then overwrites that slice only, in one commit)
    slice_by: str | None = None


@dataclass(frozen=True)
class RunPlan:
    pipeline: str
    mode: RunMode
    warehouse: Warehouse
    full_refresh: bool
    sources: tuple[PlannedSource, ...]
    steps: tuple[PlannedStep, ...]  # in run order: each after everything it reads
    outputs: tuple[PlannedOutput, ...]
    order: tuple[str, ...]  # sources and steps in run order
    sample: Sample | None = None  # a try: `warehouse` is then the scratch warehouse

    @property
    def streaming(self) -> bool:
        return self.mode is RunMode.STREAMING

    def is_source(self, node: str) -> bool:
        return any(s.name == node for s in self.sources)

    def source(self, name: str) -> PlannedSource:
        return next(s for s in self.sources if s.name == name)

    def step(self, name: str) -> PlannedStep:
        return next(s for s in self.steps if s.name == name)

    def output(self, name: str) -> PlannedOutput:
        return next(o for o in self.outputs if o.name == name)

    def chain_of(self, node: str) -> Chain | None:
        """The chain of a step other steps read on a stream (None: a source, or not chained)."""
        return None if self.is_source(node) else self.step(node).chain

    def upstream_sources(self, node: str) -> tuple[str, ...]:
        """The sources whose rows reach `node` (itself, if it is a source), sorted."""
        sources = {s.name for s in self.sources}
        seen: set[str] = set()
        todo = [node]
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(() if current in sources else self.step(current).inputs)
        return tuple(sorted(seen & sources))
