"""A run plan's sources and steps as DataFrames, in run order; batch and streaming alike.

What differs between the two is how a source is read and how a step is built, and that is all a
Reading says: batch reads files and tables once and counts each step's rows as the run computes
them; streaming reads sources as streams and hands steps that run per micro-batch to their
outputs' sinks (their frame here is the stream the sink reads). The rest is the same:

- each step gets its inputs' frames and its rendered SQL (StepContext), and a temporary view;
- expectations are attached where the plan puts them (framework.quality.gate): rows a `drop`
  expectation refuses are split off by the write of the output the plan names, or read again
  from the cached rows for the quarantine (streams: framework.engine.stream_checks);
- a step several readers share is computed once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Protocol

from framework.engine.context import RunContext
from framework.engine.results import Progress, StepResult, StepStatus
from framework.engine.window_history import learned_sizes
from framework.errors import BadInput
from framework.io.sources import SourceFrame, read_source, read_source_stream
from framework.operators.context import Rejected, StepContext
from framework.operators.registry import Streaming
from framework.plan.model import CheckScope, PlannedSource, PlannedStep
from framework.quality.gate import MASK, ROWS, QualityGate

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation

    from framework.plan.model import PlannedOutput
    from framework.spec.expectations import ExpectationSpec


@dataclass
class Frames:
    """The frames of one run's sources and steps, and what the outputs need from them."""

    frames: dict[str, DataFrame] = field(default_factory=dict)  # source or step -> its rows
    sources: dict[str, SourceFrame] = field(default_factory=dict)
    contexts: dict[str, StepContext] = field(default_factory=dict)
    #: an output -> the frame it stages when that is not its step's (its own checks, a split write)
    staged: dict[str, DataFrame] = field(default_factory=dict)
    #: a step run per micro-batch -> a frame with the columns it writes (its frame is its input stream)
    columns: dict[str, DataFrame] = field(default_factory=dict)
    row_counts: dict[str, Observation] = field(default_factory=dict)  # batch: observed while staging
    #: streaming: a step read further whose drop expectations refused rows -> those rows (with MASK)
    refused: dict[str, DataFrame] = field(default_factory=dict)
    #: streaming: a chained step (framework.plan.model.Chain) -> the stream its own query reads (its
    #: frame is its internal table read as a stream)
    feeds: dict[str, DataFrame] = field(default_factory=dict)
    #: streaming: a chained step -> its internal table read as a stream, before its watermark
    chained_raw: dict[str, DataFrame] = field(default_factory=dict)

    def output_frame(self, output: PlannedOutput) -> DataFrame:
        return self.staged.get(output.name, self.frames[output.step])

    def columns_of(self, step: str) -> DataFrame:
        """A frame with the columns `step` writes to its outputs."""
        return self.columns.get(step, self.frames[step])


class Reading(Protocol):
    """How a run reads its sources and builds its steps: batch or streaming."""

    def source(self, run: RunContext, source: PlannedSource) -> SourceFrame: ...

    def step(self, run: RunContext, frames: Frames, step: PlannedStep, context: StepContext) -> DataFrame: ...

    def count_rows(self, frames: Frames, step: str, frame: DataFrame, observed: Observation | None = None) -> DataFrame: ...

    def share(self, run: RunContext, frame: DataFrame) -> DataFrame: ...

    def checks_in_frames(self, step: PlannedStep | None) -> bool:
        """Whether the frames carry the row checks of `step` (None: of an output); if not, the
        output's sink judges them on each micro-batch (framework.engine.stream_checks)."""
        ...

    def split_off(self, run: RunContext, built: Frames, step: PlannedStep, frame: DataFrame) -> None:
        """Send the rows with a drop mask, which leave `step` here, towards the quarantine."""
        ...


class BatchReading:
    def source(self, run: RunContext, source: PlannedSource) -> SourceFrame:
        return read_source(run.spark, source.name, source.spec, source.location, run.store, source.limit)

    def step(self, run: RunContext, frames: Frames, step: PlannedStep, context: StepContext) -> DataFrame:
        return step.kind.build(context)

    def count_rows(self, frames: Frames, step: str, frame: DataFrame, observed: Observation | None = None) -> DataFrame:
        """Count the step's rows as a side effect of the run (no extra Spark job).

        observed: the Observation the step's expectations put on the frame, which counts its rows
        too (ROWS: those no drop expectation masked; a frame with a drop mask always has one). A
        second Observation above it made Spark project every column again between the two: runs
        of the quality benchmark's 8-check pipeline took 0.41 s longer with it (median of 10
        alternated rounds, docs/quality.md)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        if observed is not None:
            frames.row_counts[step] = observed
            return frame
        assert MASK not in frame.columns, f"step '{step}': its drop mask comes with the checks' Observation"
        observation = Observation(f"tributary_step_{step}")
        frames.row_counts[step] = observation
        return frame.observe(observation, F.count(F.lit(1)).alias(ROWS))

    def share(self, run: RunContext, frame: DataFrame) -> DataFrame:
        """A step read by several steps or outputs is computed once."""
        frame = frame.persist()
        run.on_exit(frame.unpersist)
        return frame

    def checks_in_frames(self, step: PlannedStep | None) -> bool:
        return True

    def split_off(self, run: RunContext, built: Frames, step: PlannedStep, frame: DataFrame) -> None:
        """Split off by the write of the output that stages the step (one pass), else read again
        from the cached rows."""
        from pyspark.sql import functions as F

        masked = F.col(MASK).isNotNull()
        if step.split_by is not None:
            built.staged[step.split_by] = frame
        else:
            rows = run.quality.quarantined(step.name, CheckScope.STEP, frame.where(masked))
            run.rejected.append(Rejected(step.name, rows, run.quality.observation(step.name, CheckScope.STEP)))


class StreamReading:
    def source(self, run: RunContext, source: PlannedSource) -> SourceFrame:
        return read_source_stream(run.spark, source.name, source.spec, source.location)

    def step(self, run: RunContext, frames: Frames, step: PlannedStep, context: StepContext) -> DataFrame:
        """A step that runs per micro-batch (framework.operators.micro_batch) runs in its output's
        sink: here it is checked on empty frames, which also gives the columns it writes, and its
        frame is the stream the sink reads."""
        kind = step.kind
        if kind.streaming(step.spec) is not Streaming.PER_MICRO_BATCH:
            return kind.build(context)
        assert kind.micro_batch is not None, f"step kind '{kind.name}' runs per micro-batch but has no MicroBatch"
        static = StepContext(
            context.spark,
            context.name,
            context.spec,
            {n: _empty_twin(f) for n, f in context.inputs.items()},
            functions=context.functions,
            sizes=context.sizes,
        )
        frames.columns[step.name] = kind.micro_batch.check(static)
        if step.chain is None:
            return kind.micro_batch.stream(context)
        frames.feeds[step.name] = kind.micro_batch.stream(context)
        return _chained_stream(run, frames, step)

    def count_rows(self, frames: Frames, step: str, frame: DataFrame, observed: Observation | None = None) -> DataFrame:
        return frame  # streaming rows are counted by the sinks

    def share(self, run: RunContext, frame: DataFrame) -> DataFrame:
        return frame  # a stream cannot be cached; each output query reads its own

    def checks_in_frames(self, step: PlannedStep | None) -> bool:
        """Only a step other steps read: its rows must leave the stream before its readers see
        them. The rest are judged in the output's sink, where the rows of a per-micro-batch step
        exist at all and refused rows commit with the output's batch. A chained step's rows are a
        stream (its chain's table), judged here like any step's, so its readers never see a row
        its drop expectations refuse."""
        if step is None or step.split_by is not None:
            return False
        return step.kind.streaming(step.spec) is not Streaming.PER_MICRO_BATCH or step.chain is not None

    def split_off(self, run: RunContext, built: Frames, step: PlannedStep, frame: DataFrame) -> None:
        """A quarantine query of their own writes them (framework.engine.stream_checks)."""
        from pyspark.sql import functions as F

        built.refused[step.name] = frame.where(F.col(MASK).isNotNull())


def build_frames(run: RunContext, reading: Reading) -> Frames:
    plan, built = run.plan, Frames()
    for node in plan.order:
        if plan.is_source(node):
            source = reading.source(run, plan.source(node))
            built.sources[node] = source
            frame = source.df
        else:
            frame = _build_step(run, reading, built, plan.step(node))
        built.frames[node] = frame
        frame.createOrReplaceTempView(node)
        run.on_exit(partial(run.spark.catalog.dropTempView, node))
    for output in plan.outputs:
        if output.expectations and reading.checks_in_frames(None):
            checked = _attach(run, reading, ("outputs", output.name), built.frames[output.step], output.expectations, split=True)
            built.staged[output.name] = checked
    return built


def _build_step(run: RunContext, reading: Reading, built: Frames, step: PlannedStep) -> DataFrame:
    began = time.perf_counter()
    run.reporter.update("step", step.name, Progress.PLANNING)
    inputs = {i: built.frames[i] for i in step.inputs}
    sizes = learned_sizes(run, step, inputs)
    context = StepContext(
        run.spark,
        step.name,
        step.spec,
        inputs,
        step.sql,
        run.rejected,
        run.compiled.functions,
        sizes,
        sql_policy=run.profile.sql_policy,
        keep=partial(reading.share, run),
    )
    built.contexts[step.name] = context
    frame = reading.step(run, built, step, context)
    observed = None
    if step.expectations and reading.checks_in_frames(step):
        frame = _attach(
            run, reading, ("steps", step.name), frame, step.expectations, split=step.split_by is not None, shared=step.shared
        )
        observed = run.quality.observation(step.name, CheckScope.STEP)
    frame = reading.count_rows(built, step.name, frame, observed)
    if MASK in frame.columns:
        frame = _split_masked(reading, run, built, step, frame)
    run.result.steps.append(StepResult(step.name, step.kind.name, StepStatus.PLANNED, plan_s=time.perf_counter() - began))
    run.reporter.update("step", step.name, StepStatus.PLANNED)
    if step.shared and not step.checks_rows:
        frame = reading.share(run, frame)
    return frame


def _split_masked(reading: Reading, run: RunContext, built: Frames, step: PlannedStep, frame: DataFrame) -> DataFrame:
    """A step's rows minus those its drop expectations masked; those go to the quarantine."""
    from pyspark.sql import functions as F

    reading.split_off(run, built, step, frame)
    return frame.where(F.col(MASK).isNull()).drop(MASK)


def _attach(
    run: RunContext,
    reading: Reading,
    at: tuple[str, str],
    frame: DataFrame,
    specs: tuple[ExpectationSpec, ...],
    split: bool,
    shared: bool = False,
) -> DataFrame:
    """The frame with its expectations attached (framework.quality.gate.QualityGate.attach)."""
    missing_columns(run, at, frame, specs)
    return run.quality.attach(at[1], at[0][:-1], frame, list(specs), partial(reading.share, run), split=split, shared=shared)


def missing_columns(run: RunContext, at: tuple[str, str], frame: DataFrame, specs: Sequence[ExpectationSpec]) -> None:
    """Bad input when an expectation of the step or output at `at` names a column `frame` lacks."""
    missing = QualityGate.missing(frame, list(specs))
    if missing:
        raise BadInput(
            *[
                run.problem(
                    f"{at[0][:-1]} '{at[1]}': {spec.name} names column(s) {columns} that it does not have",
                    (*at, "expectations", i),
                    hint=f"its columns: {', '.join(frame.columns)}",
                )
                for i, spec, columns in missing
            ]
        )


def static_frames(run: RunContext) -> Frames:
    """Every planned source and step as static DataFrames, without writing anything (e.g. to
    evaluate or measure steps): the steps' contexts stay in `contexts`."""
    return build_frames(run, BatchReading())


def _chained_stream(run: RunContext, frames: Frames, step: PlannedStep) -> DataFrame:
    """A chained step's internal table as a stream, with the watermark its chain states on its
    event-time column; the table is made (empty) before its first run so the stream has a schema."""
    from pyspark.sql import functions as F

    from framework.io.delta_stream import register_delta_stream
    from framework.io.sources import oldest_metric

    chain = step.chain
    assert chain is not None
    columns = frames.columns[step.name]
    if run.store.version(chain.table) is None:
        from framework.io.delta.delta_rs import spark_to_arrow

        run.store.append_rows(chain.table, spark_to_arrow(columns.schema).empty_table())
    reader = register_delta_stream(run.spark)
    raw = run.spark.readStream.format(reader).option("path", chain.table).load()
    frames.chained_raw[step.name] = raw
    if chain.event_time is None or chain.event_time not in columns.columns:
        return raw
    oldest = F.min(F.unix_micros(F.col(chain.event_time).cast("timestamp"))).alias("oldest")
    return raw.observe(oldest_metric(step.name), oldest).withWatermark(chain.event_time, f"{chain.delay_s} seconds")


def _empty_twin(frame: DataFrame) -> DataFrame:
    """An empty static frame with the stream's columns: lets the batch operator check the inputs."""
    return frame.sparkSession.createDataFrame([], frame.schema)
