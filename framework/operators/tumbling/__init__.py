"""The `tumbling:` kind: its one registry entry. Batch: framework.operators.tumbling.batch; on
streams, per micro-batch: framework.operators.tumbling.stream (imported once a stream runs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.operators.keyed_windows import aggregate_problems, keyed_window_columns
from framework.operators.registry import MicroBatch, StateModel, StepKind, one_input, per_micro_batch, register
from framework.operators.tumbling.batch import build_tumbling, units
from framework.spec.steps import TumblingStep

if TYPE_CHECKING:
    from framework.operators.micro_batch import MicroBatchSetup
    from framework.operators.tumbling.stream import TumblingStream


def _chain_time(step: TumblingStep) -> tuple[str | None, float | None]:
    """A count window closes when W tuples have come, however long that takes: no bound."""
    return "window_start", None


def _operator(setup: MicroBatchSetup) -> TumblingStream:
    from framework.operators.tumbling.stream import TumblingStream

    return TumblingStream.for_output(setup)


register(
    StepKind(
        TumblingStep,
        build=build_tumbling,
        streaming=per_micro_batch,
        micro_batch=MicroBatch(stream=one_input, operator=_operator, check=build_tumbling),
        checks=(aggregate_problems,),
        needs_watermark="streaming count windows place tuples once the watermark has passed them",
        units=units,
        output_schema=keyed_window_columns,
        state_model=StateModel.COUNT_QUEUE,
        chain_time=_chain_time,
    )
)
