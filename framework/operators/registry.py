"""The step-kind registry: the one place that says what a kind of step is and what it can do.

A kind is one entry (StepKind): its spec class (framework.spec.steps), how it builds its rows,
how it runs on streams, whether its rows can be measured against ground truth, and the checks it
needs before Spark starts. The compiler, the run plan, the engine, the integration figures and
the CLI ask the registry; nothing else asks "which kind is this?".

Each operator module registers its kind at its end (`register(StepKind(...))`), and
framework/operators/__init__.py imports them all, then refuses to load when a spec kind has no
entry or an entry has no spec kind. Importing the registry stays light (no Spark, pandas or
Arrow): `tributary validate` asks it too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from framework.errors import Problem
from framework.operators.problems import SpecProblem
from framework.schemas import Schema
from framework.schemas.query_size import ColumnBudget
from framework.spec.steps import STEP_KINDS, StepSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from framework.functions.loader import Functions
    from framework.operators.context import StepContext
    from framework.operators.micro_batch import MicroBatchOperator, MicroBatchSetup
    from framework.templating import RenderedSql

Builder = Callable[["StepContext"], "DataFrame"]


class Streaming(StrEnum):
    """How a kind runs in a streaming pipeline."""

    NATIVE = "native"  # its batch builder runs on streams as it is (Spark's own streaming operators)
    PER_MICRO_BATCH = "per micro-batch"  # its output's sink runs it on each micro-batch, carrying state
    BATCH_ONLY = "batch only"


class StateModel(StrEnum):
    """The model of the state a kind holds, for `tributary capacity` and the run's figures."""

    OPEN_WINDOWS = "open windows"  # keyed windows closed by count or timeout: a G/G/c queue (framework.integration.capacity)
    COUNT_QUEUE = "count queue"  # count windows: formula (11) (framework.integration.capacity)
    JOIN_NODES = "join nodes"  # a windowed join: the nodes it needs (framework.capacity.join)


@dataclass(frozen=True)
class MicroBatch:
    """How a kind runs per micro-batch inside its output's sink (Streaming.PER_MICRO_BATCH)."""

    #: the one stream the output's sink reads (the inputs, tagged or unioned as the operator needs)
    stream: Callable[[StepContext], DataFrame]
    #: the operator the sink calls with each micro-batch (framework.operators.micro_batch)
    operator: Callable[[MicroBatchSetup], MicroBatchOperator]
    #: the step on empty static frames: checks its inputs and gives the output's columns
    check: Builder


@dataclass(frozen=True)
class ColumnContext:
    """What a kind's `output_schema` reads: the schemas of the step's inputs (sources and steps it
    reads, by name; framework.schemas), the project's udfs/, and for a template step its rendered
    query as sqlglot parsed it."""

    step: str
    inputs: dict[str, Schema]
    functions: Functions
    sql: RenderedSql | None = None
    statement: Any = None  # the sqlglot tree of the query
    parsed_text: str = ""  # the text sqlglot parsed (the rendered SQL, `window(` quoted)
    budget: ColumnBudget = field(default_factory=ColumnBudget)  # the pipeline's, shared by its steps


@dataclass(frozen=True)
class StepColumns:
    """A step's output columns, and what is certainly wrong with the columns it names: at a path
    inside the step's YAML (SpecProblem), or already located (a template's file:line)."""

    schema: Schema
    problems: list[SpecProblem | Problem] = field(default_factory=list)
    #: what was not checked and why (e.g. a query too large for the column check), shown as notes
    notes: list[Problem] = field(default_factory=list)


#: A kind's output columns from its inputs' and its settings, before Spark starts
OutputSchema = Callable[[Any, ColumnContext], StepColumns]


#: A per-micro-batch kind's emitted event time, given the step: (column, lag in seconds or None)
ChainTime = Callable[[Any], tuple[str | None, float | None]]


#: Tuples of a step's input with the unit each belongs to, and when that unit opened and closed
#: (micros), given the step's settings: what the integration figures compare with the ground truth.
Units = Callable[["DataFrame", Any], tuple["DataFrame", "Column", "Column"]]


def one_input(context: StepContext) -> DataFrame:
    """MicroBatch.stream of a kind that reads one input: that input's stream."""
    (name,) = context.spec.declared_inputs()
    return context.inputs[name]


def native(step: Any) -> Streaming:
    return Streaming.NATIVE


def per_micro_batch(step: Any) -> Streaming:
    return Streaming.PER_MICRO_BATCH


@dataclass(frozen=True)
class StepKind:
    spec: type[StepSpec]
    #: the step's rows from its inputs (batch, and streams where Spark runs it natively)
    build: Builder
    #: how the step runs on streams; a function of the step, since one kind may do both
    streaming: Callable[[Any], Streaming] = native
    micro_batch: MicroBatch | None = None
    #: checks of the step's own settings, before Spark starts
    checks: tuple[Callable[[Any], Iterable[SpecProblem]], ...] = ()
    #: checks of the step's own settings in a streaming pipeline, before Spark starts
    streaming_checks: tuple[Callable[[Any], Iterable[SpecProblem]], ...] = ()
    #: checks of the step against the project's udfs/ (framework.functions.loader.Functions), before Spark starts
    function_checks: Callable[[Any, Functions], Iterable[SpecProblem]] | None = None
    #: streaming: why the sources behind the step's declared inputs need a watermark (None: they don't)
    needs_watermark: str | None = None
    #: every row of the step is a row of its inputs as it was read (a union)
    passes_rows_through: bool = False
    #: the step's query is a template the compiler renders (its inputs are the refs it finds)
    template: Callable[[Any], str] | None = None
    #: measurable against ground truth: its settings declare `truth:` (framework.integration)
    units: Units | None = None
    #: its output columns from its inputs' schemas, and what is wrong with the columns it names (validate)
    output_schema: OutputSchema | None = None
    #: the model of the state it holds (`tributary capacity`, the run's capacity figures); None: none
    state_model: StateModel | None = None
    #: `tributary tune` chooses its settings' `size` and `timeout` (framework.capacity.tuning)
    tunable: bool = False
    #: its settings may say `size: auto` (their `learns`): per-head sizes learned from run history
    #: (framework.engine.window_history, framework.integration.learned_sizes)
    learns_sizes: bool = False
    #: the exception class its Python code raises in a Spark task, whose message is one line that
    #: names the step (framework.engine.failures shows that line instead of Spark's)
    task_failure: str | None = None
    #: on a stream, when other steps read it (framework.plan.model.Chain): the column of its rows
    #: that carries event time (None: none), and how far behind its inputs' watermark a row it emits
    #: later can be (seconds; None: no bound is known); None: a kind that does not run per micro-batch
    chain_time: ChainTime | None = None
    #: on a stream Spark runs natively, whether Spark keeps the step's state in the checkpoint (a
    #: stream-stream join's buffers, a query's groups): a function of the step and its rendered
    #: query (None for a kind without one). Such a step cannot resume under another definition
    #: (framework.engine.state_pins)
    keeps_spark_state: Callable[[Any, str | None], bool] = lambda step, query: False

    @property
    def name(self) -> str:
        return self.spec.kind

    def settings(self, step: StepSpec) -> Any:
        """The block under the step's kind key (e.g. `swa:`), or the step itself for plain kinds."""
        return getattr(step, self.name, step)

    def learns(self, step: StepSpec) -> bool:
        """Its window sizes are learned per head (`size: auto` / `timeout: auto`)."""
        return self.learns_sizes and bool(getattr(self.settings(step), "learns", False))

    def evaluable(self, step: StepSpec) -> bool:
        return self.units is not None and getattr(self.settings(step), "truth", None) is not None


_KINDS: dict[str, StepKind] = {}


def register(kind: StepKind) -> StepKind:
    if STEP_KINDS.get(kind.name) is not kind.spec:
        raise RuntimeError(f"step kind '{kind.name}': {kind.spec.__name__} is not the spec class framework.spec.steps registers")
    _KINDS[kind.name] = kind
    return kind


def kind_of(step: StepSpec) -> StepKind:
    return _KINDS[step.kind]


def kinds() -> dict[str, StepKind]:
    return dict(_KINDS)


def check_complete() -> None:
    """Every spec kind has an operator entry and every entry a spec kind (called once all are in)."""
    differences = []
    if missing := sorted(set(STEP_KINDS) - set(_KINDS)):
        differences.append(f"no operator for {missing}")
    if extra := sorted(set(_KINDS) - set(STEP_KINDS)):
        differences.append(f"no spec class for {extra}")
    if differences:
        raise RuntimeError("the step kinds of framework.spec.steps and framework.operators differ: " + "; ".join(differences))
