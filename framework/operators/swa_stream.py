"""SWA on streams: the batch fold applied per micro-batch to the carried open windows plus the
tuples whose place in the order is final.

A tuple's window depends on every earlier tuple of its key, so it is placed only once no earlier
tuple can still come: tuples are held ("pending") until the watermark passes them. The watermark
is the latest event time seen minus the largest watermark delay of the input's sources; a new
tuple older than the previous batch's watermark is late: it is recorded in the late-rows table
and takes no part (the same rule as Spark's stateful operators, with a trace).

Each micro-batch folds (open windows' tuples ∪ newly final tuples); the open tuples are all older
than the new ones, so the fold continues every key exactly where the previous batch stopped.
Windows closed by count or timeout are emitted; a window still open is emitted as `timeout` once
the watermark passes s + t (no later tuple can join it), otherwise its tuples stay in the state.
So for any split into micro-batches, every emitted window equals the batch run's window, which
calls the same last windows `end_of_input` if the input ends there.

State is only the open windows' tuples and the pending tuples (MicroBatchState, beside the
checkpoint), with only the columns the units show; rows without a key or an event time go to the quarantine table. Both side tables are
committed with (app id, batch id) inside the output's batch, so a replay writes nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from framework.io.checkpoint_audit import late_records
from framework.io.staging import filesystem
from framework.operators import REASON, quarantine_shape
from framework.operators.columns import field_of
from framework.operators.keyed_windows import (
    CLOSED,
    END_OF_INPUT,
    MICROS,
    TIMEOUT,
    UNIT,
    rejection_reason,
    unit_rows,
    used_columns,
    with_micros,
)
from framework.operators.micro_batch_state import MicroBatchState
from framework.operators.swa import START, assign_windows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from framework.io.stream_sink import ExactlyOnceDeltaSink


@dataclass
class SwaStream:
    """The `prepare` of an output's exactly-once sink for an SWA step on streams."""

    step: str
    spec: Any  # SwaStep
    state_dir: str
    delay: float  # the largest watermark delay of the input's sources (seconds)
    run_id: str = ""
    pipeline: str = ""
    quarantine: ExactlyOnceDeltaSink | None = None
    late: ExactlyOnceDeltaSink | None = None
    sources: tuple[str, ...] = ()
    figures: dict[str, int] = field(default_factory=lambda: {"state_rows_peak": 0, "open_windows_peak": 0})

    def __call__(self, batch: DataFrame, batch_id: int) -> DataFrame:
        from pyspark.sql import functions as F

        swa = self.spec.swa
        spark = batch.sparkSession
        state = MicroBatchState(self.state_dir)
        folder = state.previous(batch_id)
        meta = state.meta(folder)

        rows = with_micros(batch.withColumn(REASON, rejection_reason(swa)), swa).localCheckpoint()
        is_good = F.col(REASON).isNull()
        old_mark = meta.get("mark")
        is_late = is_good & (F.col(MICROS) < F.lit(old_mark)) if old_mark is not None else F.lit(False)
        stats = rows.agg(
            F.max(F.when(is_good, F.col(MICROS))).alias("newest"),
            F.count_if(~is_good).alias("rejected"),
            F.count_if(is_late).alias("late"),
        ).first()
        if stats["rejected"]:
            self._quarantine(rows.where(~is_good), batch_id)
        if stats["late"]:
            self._late(rows.where(is_late).drop(REASON), old_mark, batch_id)
        good = used_columns(rows.where(is_good & ~is_late).drop(REASON), swa)  # what the state must keep
        seen = max((m for m in (meta.get("max"), stats["newest"]) if m is not None), default=None)
        mark = seen - round(self.delay * 1_000_000) if seen is not None else None

        held = state.table(spark, folder, "pending", good.schema).unionByName(good)
        is_final = F.col(MICROS) < F.lit(mark) if mark is not None else F.lit(False)
        work = state.table(spark, folder, "open", good.schema).unionByName(held.where(is_final))
        assigned = assign_windows(work, swa).localCheckpoint()  # read by the output, the state and the figures

        still_open = F.col(CLOSED) == F.lit(END_OF_INPUT)
        if mark is not None:  # the watermark passed s + t: no later tuple can join the window
            timed_out = still_open & (F.col(START) + F.lit(round(swa.timeout * 1_000_000)) < F.lit(mark))
        else:
            timed_out = F.lit(False)
        emitted = assigned.where(~still_open | timed_out).withColumn(
            CLOSED, F.when(timed_out, F.lit(TIMEOUT)).otherwise(F.col(CLOSED))
        )
        kept_open = assigned.where(still_open & ~timed_out).select(*good.columns)
        state.save(batch_id, {"open": kept_open, "pending": held.where(~is_final)}, {"max": seen, "mark": mark})
        self._measure(state.folder(batch_id), [field_of(good, c).name for c in swa.key_columns()])
        # the output reads only the checkpointed assignment, never the state files: a replay of
        # this batch recomputes it from the previous batch's state, which is kept
        return unit_rows(self.step, swa, emitted, [UNIT])

    # -- side tables and figures ---------------------------------------------------------------

    def _quarantine(self, rejected: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        if self.quarantine is None:
            return
        shaped = quarantine_shape(rejected, self.step).select(
            F.lit(self.run_id).alias("run_id"),
            F.lit(self.pipeline).alias("pipeline"),
            "source",
            "file",
            "record",
            "reason",
            F.current_timestamp().alias("quarantined_at"),
        )
        self.quarantine(shaped, batch_id)

    def _late(self, late: DataFrame, mark_micros: int, batch_id: int) -> None:
        if self.late is None:
            return
        mark = datetime.fromtimestamp(mark_micros / 1_000_000, tz=UTC).replace(tzinfo=None)
        event_time = field_of(late, self.spec.swa.event_time).name
        source = ", ".join(self.sources) or self.spec.swa.input
        self.late(late_records(late, source, (self.step,), event_time, mark, self.run_id, self.pipeline), batch_id)

    def _measure(self, folder: str, keys: list[str]) -> None:
        """State held after this batch, read from the state files without Spark: tuples (footers)
        and open windows (distinct keys of the open tuples: a key has at most one)."""
        import pyarrow.dataset as ds

        fs, path = filesystem(folder)
        open_rows = ds.dataset(f"{path}/open", filesystem=fs, format="parquet")
        pending = ds.dataset(f"{path}/pending", filesystem=fs, format="parquet").count_rows()
        windows = open_rows.to_table(columns=keys).group_by(keys).aggregate([]).num_rows
        state_rows = open_rows.count_rows() + pending
        self.figures["state_rows_peak"] = max(self.figures["state_rows_peak"], state_rows)
        self.figures["open_windows_peak"] = max(self.figures["open_windows_peak"], windows)
