"""The `join:` kind: its one registry entry. Batch, and time windows on streams:
framework.operators.join.batch; count windows on streams, per micro-batch:
framework.operators.join.stream (imported once a stream runs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.operators.join.batch import build_join, join_columns
from framework.operators.registry import MicroBatch, StateModel, StepKind, Streaming, register
from framework.spec.steps import JoinStep

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from framework.operators.context import StepContext
    from framework.operators.join.stream import CountJoinStream
    from framework.operators.micro_batch import MicroBatchSetup


def _streaming(step: JoinStep) -> Streaming:
    """A time window is Spark's stream-stream join; a count window needs the final arrival order,
    so it runs per micro-batch (framework.operators.join.stream)."""
    return Streaming.NATIVE if step.join.within is not None else Streaming.PER_MICRO_BATCH


def _chain_time(step: JoinStep) -> tuple[str | None, float | None]:
    """A pair is emitted when its later row arrives; its event time is the join's (the left
    input's, with one per input): no bound."""
    return step.join.left_event_time, None


def _tagged_inputs(context: StepContext) -> DataFrame:
    from framework.operators.join.stream import CountJoinStream

    return CountJoinStream.tag(context)


def _operator(setup: MicroBatchSetup) -> CountJoinStream:
    from framework.operators.join.stream import CountJoinStream

    return CountJoinStream.for_output(setup)


register(
    StepKind(
        JoinStep,
        build=build_join,
        streaming=_streaming,
        micro_batch=MicroBatch(stream=_tagged_inputs, operator=_operator, check=build_join),
        needs_watermark="a streaming join needs a watermark on its inputs",
        output_schema=join_columns,
        state_model=StateModel.JOIN_NODES,
        chain_time=_chain_time,
        keeps_spark_state=lambda step, query: _streaming(step) is Streaming.NATIVE,
    )
)
