"""Tumbling count windows on streams: the batch operator's numbering, per micro-batch, with state.

A count window (W tuples of the whole input in its total order; the baseline of Li et al.,
Table 6) depends on the place of every earlier tuple, so a tuple's window is final only once no
earlier tuple can still come. As the count-window join does, rows are held ("pending") until the
watermark passes them; a new row older than the previous batch's watermark can take no place any
more and goes to the late rows.

Why numbering per batch gives the batch run's windows: a row is final in batch i when its event
time is below that batch's watermark, and every row still to come is at or above it (older ones
are late), so the final rows of batch i come after all those of earlier batches in the total
order. The state keeps how many tuples were placed before (`placed`) and the rows of the window
still filling (`tail`, with their window number); the newly final rows are numbered from
`placed` on in the total order. Full windows are emitted, closed by count. The filling window
stays, so a stream holds fewer than W placed tuples plus the pending ones: batch closes that last
window as end_of_input, a stream keeps it until W tuples fill it (said at the end of a run).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar

from framework.io.checkpoint_audit import late_records
from framework.io.stream_sink import WrittenRows
from framework.operators.batch_values import before, before_mark, not_before
from framework.operators.columns import field_of
from framework.operators.context import REASON, quarantine_records, quarantine_shape
from framework.operators.keyed_windows import (
    CLOSED,
    COUNT,
    MICROS,
    UNIT,
    rejection_reason,
    tuple_order,
    unit_rows,
    used_columns,
    with_micros,
)
from framework.operators.micro_batch import LATE, QUARANTINE, Held, PerBatchOperator, micros_iso
from framework.operators.micro_batch_state import MicroBatchState
from framework.operators.ordering import global_positions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

KIND = "__tributary_kind"  # in the state: 'tail' (placed, window still filling) or 'pending'
POSITION = "__tributary_position"


@dataclass
class TumblingStream(PerBatchOperator):
    """The `prepare` of an output's exactly-once sink for a tumbling step on streams."""

    PEAKS: ClassVar[tuple[str, ...]] = ("state_rows_peak",)

    def __call__(self, batch: DataFrame, batch_id: int) -> WrittenRows:
        from pyspark.sql import functions as F

        self.spread(batch, batch_id)  # `partitions:`, which may change between runs
        spec, size = self.spec.tumbling, self.spec.tumbling.size
        state = MicroBatchState(self.state_dir)
        folder = state.previous(batch_id)
        meta = state.meta(folder)

        rows = with_micros(batch.withColumn(REASON, rejection_reason(spec)), spec).localCheckpoint()
        is_good = F.col(REASON).isNull()
        old_mark = meta.get("mark")
        is_late = is_good & before_mark(F.col(MICROS), old_mark)  # as data, not code (batch_values)
        counts = rows.agg(
            F.count_if(~is_good).alias("rejected"), F.count_if(is_late).alias("late"), F.max(MICROS).alias("newest")
        ).first()
        assert counts is not None  # an aggregate has one row
        seen = max((m for m in (meta.get("max"), counts["newest"]) if m is not None), default=None)
        mark = seen - round(self.delay * 1_000_000) if seen is not None else None

        good = used_columns(rows.where(is_good & ~is_late).drop(REASON), spec)
        previous = state.table(
            batch.sparkSession, folder, "rows", good.withColumn(UNIT, F.lit(None).cast("long")).withColumn(KIND, F.lit("")).schema
        )
        tail = previous.where(F.col(KIND) == "tail").drop(KIND)
        held = previous.where(F.col(KIND) == "pending").drop(KIND, UNIT).unionByName(good)
        is_final = before_mark(F.col(MICROS), mark)

        placed = int(meta.get("placed", 0))
        # positions from `placed` on: the offsets are data, not code (framework.operators.ordering)
        numbered, final = global_positions(held.where(is_final), MICROS, tuple_order(held, spec), POSITION, start=placed)
        numbered = numbered.withColumn(UNIT, F.floor(F.col(POSITION) / F.lit(size)).cast("long")).drop(POSITION)
        filling = (placed + final) // size  # the window the next final row goes to
        windows = tail.unionByName(numbered).localCheckpoint()
        full = windows.where(before(F.col(UNIT), filling)).withColumn(CLOSED, F.lit(COUNT))
        units = unit_rows(self.step, spec, full, [UNIT], order=tuple_order(full, spec))

        kept = windows.where(not_before(F.col(UNIT), filling)).withColumn(KIND, F.lit("tail"))
        pending = held.where(~is_final).withColumn(UNIT, F.lit(None).cast("long")).withColumn(KIND, F.lit("pending"))
        state.save(batch_id, {"rows": kept.unionByName(pending)}, {"max": seen, "mark": mark, "placed": placed + final})
        self.figures["state_rows_peak"] = max(self.figures["state_rows_peak"], state.rows(state.folder(batch_id), "rows"))
        written = state.write_output(batch_id, units)
        side = {}
        if counts["rejected"]:
            side[QUARANTINE] = quarantine_records(quarantine_shape(rows.where(~is_good), self.step), self.run_id, self.pipeline)
        if counts["late"]:
            side[LATE] = self._late(rows.where(is_late).drop(REASON), old_mark)  # type: ignore[arg-type]
        return WrittenRows(written.folder, written.schema, side)

    def _late(self, late: DataFrame, mark_micros: int) -> DataFrame:
        mark = datetime.fromtimestamp(mark_micros / 1_000_000, tz=UTC).replace(tzinfo=None)
        event_time = field_of(late, self.spec.tumbling.event_time).name
        source = ", ".join(self.sources) or self.spec.tumbling.input
        return late_records(late, source, (self.step,), event_time, mark, self.run_id, self.pipeline)

    def held(self) -> Held | None:
        """The placed tuples of the window still filling and the rows waiting for the watermark."""
        state = MicroBatchState(self.state_dir)
        folder = state.latest()
        rows = state.rows(folder, "rows") if folder is not None else 0
        if not rows or folder is None:
            return None
        return Held(
            rows, "tuples of the window still filling or waiting for their place", micros_iso(state.meta(folder).get("mark"))
        )
