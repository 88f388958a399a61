"""Operators that run inside an output's sink, one micro-batch at a time (Streaming.PER_MICRO_BATCH).

Some steps cannot run as Spark streaming operators and stay exact: SWA must hold tuples until
the watermark passes them, a count-window join must see rows in their final arrival order. Such a
step's output query hands each micro-batch to the step's operator, which carries its state between
batches beside the output's checkpoint (framework.operators.micro_batch_state) and returns the
rows to commit (framework.io.stream_sink.WrittenRows), with any rows for the side tables.

The engine gives each output its own operator, built from a MicroBatchSetup by the kind's
registry entry (framework.operators.registry.MicroBatch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self

from framework.errors import Problem

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from framework.functions.loader import Functions
    from framework.io.stream_sink import WrittenRows
    from framework.operators.window_sizes import Sizes

#: Side tables an operator may hand rows to (WrittenRows.side), committed with its batch.
QUARANTINE = "quarantine"  # rows the step cannot use, with the reason
LATE = "late"  # rows older than the watermark they met


class Locate(Protocol):
    """A problem located at a path of the pipeline's YAML (framework.engine.context.RunContext.problem)."""

    def __call__(self, message: str, at: tuple[Any, ...], hint: str | None = None) -> Problem: ...


def _unlocated(message: str, at: tuple[Any, ...], hint: str | None = None) -> Problem:
    return Problem(message, hint=hint)


@dataclass(frozen=True)
class MicroBatchSetup:
    """What the engine tells a per-micro-batch operator about its output and its inputs."""

    step: str
    spec: Any  # the step's spec
    inputs: dict[str, DataFrame]  # the step's input streams, by name
    state_dir: str  # beside the output's checkpoint: the state carried between batches
    checkpoint: str  # the output query's checkpoint (its offsets name each batch's files)
    delays: dict[str, float]  # per input: the largest watermark delay of the sources behind it (s)
    sources: dict[str, tuple[str, ...]]  # per input: the sources behind it
    parquet_rows: dict[str, bool]  # per input: every row is a Parquet file source's row, as read
    run_id: str = ""
    pipeline: str = ""
    functions: Functions | None = None  # the project's udfs/ (framework.functions.loader)
    sizes: Sizes | None = None  # swa with size: auto / timeout: auto: the run's learned sizes
    elastic: Any = None  # the pipeline's `elastic:` (framework.spec.models.Elastic), None: fixed partitions
    trigger_s: float = 10.0  # the pipeline's trigger interval: a micro-batch longer than it is slow
    partitions: int | None = None  # the step's `partitions:` (hash N), None: the profile's shuffle partitions
    problem: Locate = _unlocated  # where in the pipeline's YAML a problem is


@dataclass(frozen=True)
class Held:
    """What a stream still holds when a run ends: rows waiting for the watermark to pass them
    (an availableNow run stops when its input is read, not when everything is emitted)."""

    rows: int  # the rows kept in the operator's state
    what: str  # what they are, e.g. "tuples in 120 open windows"
    watermark: str | None  # the stream's watermark (ISO event time), None before any
    #: what they wait for, said by the kind (a partial count-only group waits for events, a
    #: context missing an input for that input; most wait for the watermark)
    waits: str = "they are emitted once the watermark passes them"

    def line(self, step: str) -> str:
        at = f"; the watermark is at {self.watermark}" if self.watermark else ""
        return f"step '{step}' still holds {self.rows:,} {self.what}{at}: {self.waits}"


def micros_iso(micros: int | None) -> str | None:
    """An event time in micros since the epoch as ISO text (UTC), for messages."""
    from datetime import UTC, datetime

    return None if micros is None else datetime.fromtimestamp(micros / 1e6, tz=UTC).isoformat(timespec="seconds")


@dataclass
class PerBatchOperator:
    """What every per-micro-batch operator of a kind carries (framework.operators.<kind>.stream
    subclasses it, adds its own fields and defines `held` and `__call__`)."""

    step: str
    spec: Any  # the step's spec
    state_dir: str  # beside the output's checkpoint: the state carried between batches
    delay: float = 0.0  # the largest watermark delay of the sources behind its inputs (seconds)
    run_id: str = ""
    pipeline: str = ""
    sources: tuple[str, ...] = ()  # the sources behind its inputs
    #: state it held, reported with its output (peaks over the run); starts as PEAKS at 0
    figures: dict[str, int] = field(default_factory=dict)
    partitions: int | None = None  # the step's `partitions:` (hash N), None: the stream's pinned default
    #: per micro-batch of this run: the partitions its keys were spread over and the executors
    #: that ran them (`tributary capacity` shows them; a replayed batch replaces its entry)
    spreads: dict[int, dict[str, Any]] = field(default_factory=dict)
    elastic: Any = None  # the pipeline's `elastic:` rule, None: partitions stay as set
    trigger_s: float = 10.0
    slow_in_a_row: int = 0
    #: each widening of this run: at which batch, from and to how many partitions, why
    rescales: list[dict[str, Any]] = field(default_factory=list)
    #: the figures it reports
    PEAKS: ClassVar[tuple[str, ...]] = ()
    #: the side tables its batches have rows for: rows without a key or event time, late rows
    side_tables: ClassVar[tuple[str, ...]] = (QUARANTINE, LATE)

    def __post_init__(self) -> None:
        self.figures = dict.fromkeys(self.PEAKS, 0) | self.figures

    @classmethod
    def for_output(cls, setup: MicroBatchSetup, **own: Any) -> Self:
        """The operator of one output's sink, its state beside that output's checkpoint; `own`:
        the subclass's own fields."""
        inputs = setup.spec.declared_inputs()
        sources = tuple(dict.fromkeys(s for i in inputs for s in setup.sources.get(i, ())))
        delay = max(setup.delays[i] for i in inputs)
        return cls(
            setup.step,
            setup.spec,
            setup.state_dir,
            delay,
            setup.run_id,
            setup.pipeline,
            sources,
            partitions=setup.partitions,
            elastic=setup.elastic,
            trigger_s=setup.trigger_s,
            **own,
        )

    def spread(self, batch: DataFrame, batch_id: int) -> None:
        """Spread this micro-batch's keys, and the state it carries, over the step's `partitions:`
        tasks. Spark's own stateful operators keep their state in state stores partitioned as the
        stream's first run chose, and pinned in its checkpoint: they can never rescale. These
        operators keep their state in files of their own, read whole by each micro-batch, so N
        may change between runs (hash N → 3N, as the balancers of "ESC: Towards an Elastic Stream
        Computing Platform for the Cloud", §4, widen under load). The setting is the query's own
        session's (foreachBatch runs on it): the run's other queries keep theirs."""
        session = batch.sparkSession
        if self.partitions is not None:
            session.conf.set("spark.sql.shuffle.partitions", str(self.partitions))
        used = self.partitions or int(session.conf.get("spark.sql.shuffle.partitions") or 200)
        self.spreads[batch_id] = {"batch": batch_id, "partitions": used, "executors": executors(session)}

    def finished(self, batch_id: int, seconds: float) -> dict[str, Any] | None:
        """The `elastic:` rule, told that batch `batch_id` took `seconds` (read, step, commit): after
        `slow_batches` in a row over the trigger interval, the next batch spreads over `factor`
        times the partitions (the change, when there is one). A run starts again from the step's
        `partitions:`; the run log and `tributary capacity` show each widening."""
        rule = self.elastic
        if rule is None or batch_id not in self.spreads:
            return None
        self.slow_in_a_row = self.slow_in_a_row + 1 if seconds > self.trigger_s else 0
        if self.slow_in_a_row < rule.slow_batches:
            return None
        self.slow_in_a_row = 0
        now = self.spreads[batch_id]["partitions"]
        wider = min(now * rule.factor, rule.max_partitions)
        if wider <= now:
            return None
        self.partitions = wider
        change = {"batch": batch_id, "from": now, "to": wider, "seconds": round(seconds, 2), "trigger_s": self.trigger_s}
        self.rescales.append(change)
        return change


def executors(session: Any) -> int | None:
    """The executors a session's tasks run on now: the workers' JVMs on a cluster, the driver's
    own in local mode (1); None where the driver's JVM is out of reach (Spark Connect)."""
    try:
        context = session.sparkContext
        known = context._jsc.sc().getExecutorMemoryStatus().size()  # the driver is one of them
    except Exception:  # noqa: BLE001 - Spark Connect: no SparkContext on this side
        return None
    return 1 if context.master.startswith("local") else max(known - 1, 0)


class MicroBatchOperator(Protocol):
    @property
    def step(self) -> str: ...

    @property
    def spec(self) -> Any:
        """The step's spec."""
        ...

    @property
    def figures(self) -> dict[str, int]:
        """State it held, reported with its output (peaks over the run)."""
        ...

    @property
    def side_tables(self) -> tuple[str, ...]:
        """Side tables its batches may have rows for (QUARANTINE, LATE)."""
        ...

    def held(self) -> Held | None:
        """What the state holds now (after the run's last batch), None when it holds nothing."""
        ...

    def __call__(self, batch: DataFrame, batch_id: int) -> WrittenRows: ...
