"""The `group:` kind: its one registry entry. Batch: framework.operators.group.batch, whose user
functions run in framework.operators.group.runner; on streams, per micro-batch:
framework.operators.group.stream (imported once a stream runs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.operators.group.batch import build_group, function_problems, group_columns, streaming_problems, tagged_inputs
from framework.operators.group.runner import GroupFailure
from framework.operators.registry import MicroBatch, StepKind, per_micro_batch, register
from framework.spec.steps import GroupStep

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from framework.operators.context import StepContext
    from framework.operators.group.stream import GroupStream
    from framework.operators.micro_batch import MicroBatchSetup


def _input_stream(context: StepContext) -> DataFrame:
    """The one stream the output's sink reads: the inputs' events, tagged with their input."""
    return tagged_inputs(context.name, context.spec.group, context.inputs)


def _chain_time(step: GroupStep) -> tuple[str | None, float | None]:
    """The function's rows carry event time when it returns the step's event-time column. A group
    still held closes by its timeout (or its interval's end) at the latest, so rows emitted later
    are at most that far behind; a count-only group waits for events: no bound."""
    close = step.group.close
    lag = close.timeout if close.timeout is not None else close.every
    return step.group.event_time, None if lag is None else float(lag)


def _operator(setup: MicroBatchSetup) -> GroupStream:
    from framework.operators.group.stream import GroupStream

    return GroupStream.for_output(setup)


register(
    StepKind(
        GroupStep,
        build=build_group,
        streaming=per_micro_batch,
        micro_batch=MicroBatch(stream=_input_stream, operator=_operator, check=build_group),
        function_checks=function_problems,
        streaming_checks=(streaming_problems,),
        needs_watermark="streaming group steps close groups when the watermark passes them",
        output_schema=group_columns,
        task_failure=GroupFailure.__name__,
        chain_time=_chain_time,
    )
)
