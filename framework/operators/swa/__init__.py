"""The `swa:` kind: its one registry entry. Batch: framework.operators.swa.batch; on streams, per
micro-batch inside its output's sink: framework.operators.swa.stream (imported once a stream runs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.operators.keyed_windows import aggregate_problems, keyed_window_columns
from framework.operators.registry import MicroBatch, StateModel, StepKind, one_input, per_micro_batch, register
from framework.operators.swa.batch import build_swa, check_swa, units
from framework.spec.steps import AUTO, SwaStep

if TYPE_CHECKING:
    from framework.operators.micro_batch import MicroBatchSetup
    from framework.operators.swa.stream import SwaStream


def _chain_time(step: SwaStep) -> tuple[str | None, float | None]:
    """A window is emitted once its start + t or its n-th tuple is behind the mark, and every
    window still to come starts after mark − t: its `window_start` lags by at most t."""
    timeout = step.swa.timeout
    return "window_start", None if timeout == AUTO else float(timeout)


def _operator(setup: MicroBatchSetup) -> SwaStream:
    from framework.operators.swa.stream import SwaStream

    return SwaStream.for_output(setup)


register(
    StepKind(
        SwaStep,
        build=build_swa,
        streaming=per_micro_batch,
        micro_batch=MicroBatch(stream=one_input, operator=_operator, check=check_swa),
        checks=(aggregate_problems,),
        needs_watermark="streaming SWA closes windows by the watermark",
        units=units,
        output_schema=keyed_window_columns,
        state_model=StateModel.OPEN_WINDOWS,
        tunable=True,
        learns_sizes=True,
        chain_time=_chain_time,
    )
)
