"""SWA on streams: the batch fold applied per micro-batch to the held tuples plus the new ones,
emitting only the windows no later tuple can change.

A tuple's window depends on every earlier tuple of its key, so a window is final only once no
earlier tuple can still come. The watermark (mark) is the latest event time seen minus the
largest watermark delay of the input's sources; a new tuple older than the previous batch's mark
is late: it is recorded in the late-rows table and takes no part (the same rule as Spark's
stateful operators, with a trace). Every other tuple that can still come is at or after the mark.

Each micro-batch folds (held tuples ∪ new tuples) in one pass: the held tuples are exactly the
tuples after each key's last emitted window, so the fold continues every key where the emitted
windows stopped. Tuples before the mark are a prefix of each key's order, and the fold of a
prefix does not depend on what follows it, so their windows are those of the batch run. A window
is emitted when no later tuple can change it: closed by count with its last tuple before the mark
(`count`), or s + t before the mark (`timeout`: no tuple still to come can join it, and a held
tuple after s + t closed it or will). Emitted windows are a prefix of each key's windows: a window
before a final one ended before it, so before the mark, and was closed by count or by a tuple after
its s + t, before the mark too. So a tuple is emitted when s + t is before the mark or its window is
at or before the key's last window whose n-th tuple is before the mark: one pass over each key's
tuples, which the checkpoint keeps partitioned and sorted by key. Every other tuple stays held. So
for any split into micro-batches, every emitted window equals the batch run's window, which calls
the same last windows `end_of_input` if the input ends there.

Work per batch: the fold (one shuffle and sort, in a pass that also observes the newest event time
and the late and keyless counts, checkpointed), one state write, the output (no shuffle after the
JVM fold). The mark is known only after that pass, so the fold cannot leave the not-yet-final
tuples out; it refolds them next batch.

State is the held tuples (MicroBatchState `held`, beside the checkpoint), with only the columns
the units show; rows without a key or an event time go to the quarantine table. Both side tables
are committed with (app id, batch id) inside the output's batch, so a replay writes nothing twice.
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
    COUNT,
    MICROS,
    TIMEOUT,
    UNIT,
    rejection_reason,
    unit_rows,
    used_columns,
    with_micros,
)
from framework.operators.micro_batch_state import MicroBatchState
from framework.operators.swa import KEY_HASH, POSITION, START, assign_windows, key_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from framework.io.stream_sink import ExactlyOnceDeltaSink


HELD = "held"  # the state's one table: every tuple not yet emitted
FINAL = "__tributary_final"  # true when no tuple still to come can change the tuple's window


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
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        swa = self.spec.swa
        state = MicroBatchState(self.state_dir)
        folder = state.previous(batch_id)
        meta = state.meta(folder)

        rows = with_micros(batch.withColumn(REASON, rejection_reason(swa)), swa)
        is_good = F.col(REASON).isNull()
        old_mark = meta.get("mark")
        is_late = is_good & (F.col(MICROS) < F.lit(old_mark)) if old_mark is not None else F.lit(False)
        stats = Observation()  # filled by the fold's own pass over the rows: no job of its own
        observed = rows.observe(
            stats,
            F.max(F.when(is_good, F.col(MICROS))).alias("newest"),
            F.count_if(~is_good).alias("rejected"),
            F.count_if(is_late).alias("late"),
        )
        good = used_columns(observed.where(is_good & ~is_late).drop(REASON), swa)  # what the state must keep
        work = self._held(state, batch.sparkSession, folder, good.schema).unionByName(good)
        # read by the output and the state; the fold of the held tuples is redone each batch
        assigned = _checkpoint_keeping_partitioning(assign_windows(work, swa))
        stats = stats.get
        if stats["rejected"]:
            self._quarantine(rows.where(~is_good), batch_id)
        if stats["late"]:
            self._late(rows.where(is_late).drop(REASON), old_mark, batch_id)
        seen = max((m for m in (meta.get("max"), stats["newest"]) if m is not None), default=None)
        mark = seen - round(self.delay * 1_000_000) if seen is not None else None

        decided = assigned.withColumn(FINAL, self._is_final(assigned, mark))
        state.save(batch_id, {HELD: decided.where(~F.col(FINAL)).select(*good.columns)}, {"max": seen, "mark": mark})
        self._measure(state.folder(batch_id), [field_of(good, c).name for c in swa.key_columns()], mark)
        # the output reads only the checkpointed assignment, never the state files: a replay of
        # this batch recomputes it from the previous batch's state, which is kept
        closed = F.when(F.count(F.lit(1)) >= swa.size, F.lit(COUNT)).otherwise(F.lit(TIMEOUT))
        return unit_rows(self.step, swa, decided.where(F.col(FINAL)), [KEY_HASH, UNIT], closed=closed)

    def _is_final(self, assigned: DataFrame, mark: int | None) -> Column:
        """Whether no tuple still to come can change the tuple's window (module docstring)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        if mark is None:
            return F.lit(False)
        swa = self.spec.swa
        timed_out = F.col(START) + F.lit(round(swa.timeout * 1_000_000)) < F.lit(mark)
        counted_before_mark = F.when((F.col(POSITION) == swa.size) & (F.col(MICROS) < F.lit(mark)), F.col(UNIT))
        each_key = Window.partitionBy(KEY_HASH, *key_columns(assigned, swa))
        return timed_out | F.coalesce(F.col(UNIT) <= F.max(counted_before_mark).over(each_key), F.lit(False))

    @staticmethod
    def _held(state: MicroBatchState, spark: SparkSession, folder: str | None, schema: StructType) -> DataFrame:
        """The tuples the previous batch kept; a state written before `held` existed keeps them
        in two tables (the open windows' tuples and the pending ones)."""
        if folder is None or state.has(folder, HELD):
            return state.table(spark, folder, HELD, schema)
        return state.table(spark, folder, "open", schema).unionByName(state.table(spark, folder, "pending", schema))

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

    def _measure(self, folder: str, keys: list[str], mark: int | None) -> None:
        """State held after this batch, read from the state files without Spark: tuples (footers)
        and open windows (distinct keys of the held tuples older than the watermark: those are
        the tuples of the key's open window, so a key has at most one)."""
        import pyarrow.dataset as ds

        fs, path = filesystem(folder)
        held = ds.dataset(f"{path}/{HELD}", filesystem=fs, format="parquet")
        state_rows = held.count_rows()
        windows = 0
        if mark is not None and state_rows:
            placed = held.to_table(columns=keys, filter=ds.field(MICROS) < mark)
            windows = placed.group_by(keys).aggregate([]).num_rows
        self.figures["state_rows_peak"] = max(self.figures["state_rows_peak"], state_rows)
        self.figures["open_windows_peak"] = max(self.figures["open_windows_peak"], windows)


def _checkpoint_keeping_partitioning(frame: DataFrame) -> DataFrame:
    """`frame.localCheckpoint()`, remembering that its rows are partitioned by key, so the output's
    aggregation by key and window needs no shuffle. Adaptive execution reports a plan's
    partitioning only once it has run, so a checkpoint taken under it forgets it: this one job
    runs without it."""
    spark = frame.sparkSession
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        return frame.localCheckpoint()
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)
