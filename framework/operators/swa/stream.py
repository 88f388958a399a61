"""SWA on streams: the batch fold applied per micro-batch to the held tuples plus the new ones,
emitting only the windows no later tuple can change.

A tuple's window depends on every earlier tuple of its key, so a window is final only once no
earlier tuple can still come. The watermark (mark) is the latest event time seen (in any row,
keyed or not) minus the largest watermark delay of the input's sources; a new tuple older than
the previous batch's mark is late: it is recorded in the late-rows table and takes no part (the
same rule as Spark's stateful operators, with a trace). Every other tuple that can still come is
at or after the mark.

Each micro-batch folds (held tuples ∪ new tuples) in one pass: the held tuples are exactly the
tuples after each key's last emitted window, so the fold continues every key where the emitted
windows stopped. Tuples before the mark are a prefix of each key's order, and the fold of a
prefix does not depend on what follows it, so their windows are those of the batch run. A window
is emitted when no later tuple can change it: closed by count with its n-th tuple before the mark
(`count`), or s + t before the mark (`timeout`: no tuple still to come can join it, and a held
tuple after s + t closed it or will). Both are facts about the window alone, and the windows they
pick are a prefix of each key's windows: a window before such a window ended before the mark, so
it was closed by its n-th tuple before the mark, or by a tuple after its s + t, which puts its
s + t before the mark too. Every other window's tuples stay held. So for any split into
micro-batches, every emitted window equals the batch run's window, which calls the same last
windows `end_of_input` if the input ends there.

Work per batch: the mark comes first, since the fold needs it. When every source is Parquet,
reached through unions only, the footers of the files the batch read know the newest event time
(framework.io.parquet_footers), and no job runs for it; otherwise one pass over the new rows
finds it (a second read of them, cheaper than keeping every folded tuple until the mark is
known). Then one pass folds and aggregates every window, collecting the tuples of the windows
that may stay held (`windows`: one shuffle, one sort, and a sort by window that finds the tuples
in that order already, for the one-pass aggregate of framework.operators.keyed_windows.unit_rows),
and counts the late and keyless rows as it reads them. Its tasks write its result twice with pyarrow (framework.io.task_parquet): the
final windows beside the state, as the output's files, which the sink commits as they are, and
the held tuples as the state: one job, where materialising the result and writing each part
with Spark took three. The same tasks count what the batch's figures need (windows emitted and
their lifetimes, windows left open), so no file is read back for them.

State is the held tuples (MicroBatchState `held`, beside the checkpoint), with only the columns
the units show. Rows without a key or an event time, and late rows, are handed back with the
batch's output (WrittenRows.side): the output's sink commits them to the quarantine and late-rows
tables with (app id, batch id) before the output, so a replay writes nothing twice.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from framework.io.checkpoint_audit import late_records
from framework.io.locations import join
from framework.io.parquet_footers import BatchFooters, NoStatistics
from framework.io.staging import filesystem
from framework.io.stream_sink import WrittenRows
from framework.io.task_parquet import Folder, write_counted
from framework.observations import observed
from framework.operators.batch_values import before, before_mark, not_before
from framework.operators.columns import field_of, quoted
from framework.operators.context import REASON, quarantine_records, quarantine_shape
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
from framework.operators.micro_batch import LATE, QUARANTINE, Held, MicroBatchSetup, PerBatchOperator, micros_iso
from framework.operators.micro_batch_state import OUTPUT, MicroBatchState
from framework.operators.swa.batch import KEY_HASH, POSITION, START, assign_windows, fold_windows
from framework.operators.window_sizes import SIZE_COLUMN, TIMEOUT_COLUMN, Sizes, size_column, timeout_column, with_sizes
from framework.spec.steps import AUTO

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, Observation, SparkSession
    from pyspark.sql.types import StructType


HELD = "held"  # the state's one table: every tuple not yet emitted
FINAL = "__tributary_final"  # true when no tuple still to come can change the window
HELD_TUPLE = "__tributary_held_tuple"  # a tuple as the state keeps it, null when its window is final


@dataclass
class SwaStream(PerBatchOperator):
    """The `prepare` of an output's exactly-once sink for an SWA step on streams."""

    footers: BatchFooters | None = None  # Parquet sources only: the newest event time without a pass
    sizes: Sizes | None = None  # size: auto / timeout: auto: the run's learned sizes
    #: per micro-batch: windows closed (count, Σ lifetime), event time advanced, state held at the end
    batches: dict[int, dict[str, Any]] = field(default_factory=dict)
    PEAKS: ClassVar[tuple[str, ...]] = ("state_rows_peak", "open_windows_peak")

    @classmethod
    def for_output(cls, setup: MicroBatchSetup, **own: Any) -> SwaStream:
        """The operator of one output's sink: its state beside that output's checkpoint; the
        newest event time from the Parquet footers when every row of the input is a Parquet
        file's row with its event time as the file holds it."""
        swa = setup.spec.swa
        footers = None
        if setup.parquet_rows.get(swa.input):
            column = field_of(setup.inputs[swa.input], swa.event_time)
            if column is not None and "." not in swa.event_time and column.dataType.typeName() == "timestamp":
                footers = BatchFooters(setup.checkpoint, swa.event_time)
        return super().for_output(setup, footers=footers, sizes=setup.sizes, **own)

    def __call__(self, batch: DataFrame, batch_id: int) -> WrittenRows:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        self.spread(batch, batch_id)  # `partitions:`, which may change between runs
        swa = self.spec.swa
        state = MicroBatchState(self.state_dir)
        folder = state.previous(batch_id)
        meta = state.meta(folder)

        rows = with_micros(batch.withColumn(REASON, rejection_reason(swa)), swa)
        is_good = F.col(REASON).isNull()
        old_mark = meta.get("mark")
        seen = max((m for m in (meta.get("max"), self._newest(rows, batch_id)) if m is not None), default=None)
        mark = seen - round(self.delay * 1_000_000) if seen is not None else None
        is_late = is_good & before_mark(F.col(MICROS), old_mark)  # as data, not code (batch_values)

        # counted as the fold reads the new rows; the side tables read them again only if needed
        counts = (F.count_if(~is_good).alias("rejected"), F.count_if(is_late).alias("late"))
        turned_away = Observation()
        counted = rows.observe(turned_away, *counts)
        good = used_columns(counted.where(is_good & ~is_late).drop(REASON), swa)  # what the state must keep
        work = self._held(state, batch.sparkSession, folder, good.schema).unionByName(good)
        work = with_sizes(work, swa, self.sizes)  # size: auto: the run's sizes, never kept in the state
        # one job writes both the output's rows and the state; a replay of this batch writes them
        # again from the previous batch's state, which is kept
        current = state.begin(batch_id)
        windows = self.windows(work, mark)
        written, tallies = write_counted(windows, _output_and_held(current, self._timeout_micros))
        turned = _observed(turned_away) or _one_row(rows.agg(*counts))
        side = {}
        if turned["rejected"]:
            side[QUARANTINE] = self._quarantined(rows.where(~is_good))
        if turned["late"]:  # late: older than the previous batch's mark, so there was one
            side[LATE] = self._late(rows.where(is_late).drop(REASON), old_mark)  # type: ignore[arg-type]
        state.complete(batch_id, {"max": seen, "mark": mark})
        keys = [field_of(good, c).name for c in swa.key_columns()]
        # learned sizes count keys holding tuples, which the tasks cannot sum: read back
        windows_open = self._measure(current, written[HELD], keys, mark, None if swa.learns else tallies[HELD].get(WINDOWS, 0))
        emitted = tallies[OUTPUT]
        self._record(batch_id, old_mark, mark, windows_open, written[HELD], emitted.get(WINDOWS, 0), emitted.get(LIFETIMES, 0))
        return WrittenRows(join(current, OUTPUT), windows.drop(FINAL, HELD).schema, side)

    def _newest(self, rows: DataFrame, batch_id: int) -> int | None:
        """The newest event time among the new rows, keyed or not (a quarantined row still shows
        how far event time has come): from the files' footers when every source is Parquet,
        else one pass over the rows."""
        from pyspark.sql import functions as F

        if self.footers is not None:
            with suppress(NoStatistics):
                return self.footers.newest(batch_id)
        return _one_row(rows.agg(F.max(MICROS).alias("newest")))["newest"]

    def windows(self, tuples: DataFrame, mark: int | None) -> DataFrame:
        """One row per window of `tuples`: the output's columns, FINAL (module docstring), and HELD:
        the window's tuples if it may stay held (its s + t is not before the mark)."""
        from pyspark.sql import functions as F

        swa = self.spec.swa
        timeout, size = timeout_column(swa), size_column(swa)  # a key's tuples share theirs
        count = F.count(F.lit(1))
        kept = [quoted(c) for c in tuples.columns if c not in (SIZE_COLUMN, TIMEOUT_COLUMN)]
        if mark is None:
            final, may_stay = F.lit(False), F.lit(True)
        else:  # the mark as data, not code (framework.operators.batch_values)
            final = before(F.min(START) + F.max(timeout), mark) | ((count >= F.max(size)) & before(F.max(MICROS), mark))
            may_stay = not_before(F.col(START) + timeout, mark)
        closed = F.when(count >= F.max(size), F.lit(COUNT)).otherwise(F.lit(TIMEOUT))
        # Each tuple the state may keep (or null) is a column before the aggregation, not the
        # argument of collect_list: Spark evaluates an object aggregate's argument row by row,
        # interpreted, and this struct comparison took 7 % of a micro-batch's job (a profile);
        # in a projection it is compiled with the rest of the stage.
        assigned = assign_windows(tuples, swa, last=False).withColumn(HELD_TUPLE, F.when(may_stay, F.struct(*kept)))
        held = F.collect_list(F.col(HELD_TUPLE))  # nulls are left out
        return unit_rows(
            self.step, swa, assigned, [KEY_HASH, UNIT], closed=closed, hidden={FINAL: final, HELD: held}, order=POSITION
        )

    @staticmethod
    def _held(state: MicroBatchState, spark: SparkSession, folder: str | None, schema: StructType) -> DataFrame:
        """The tuples the previous batch kept; a state written before `held` existed keeps them
        in two tables (the open windows' tuples and the pending ones)."""
        if folder is None or state.has(folder, HELD):
            return state.table(spark, folder, HELD, schema)
        return state.table(spark, folder, "open", schema).unionByName(state.table(spark, folder, "pending", schema))

    # -- side tables and figures ---------------------------------------------------------------

    def _quarantined(self, rejected: DataFrame) -> DataFrame:
        return quarantine_records(quarantine_shape(rejected, self.step), self.run_id, self.pipeline)

    def _late(self, late: DataFrame, mark_micros: int) -> DataFrame:
        mark = datetime.fromtimestamp(mark_micros / 1_000_000, tz=UTC).replace(tzinfo=None)
        event_time = field_of(late, self.spec.swa.event_time).name
        source = ", ".join(self.sources) or self.spec.swa.input
        return late_records(late, source, (self.step,), event_time, mark, self.run_id, self.pipeline)

    def held(self) -> Held | None:
        state = MicroBatchState(self.state_dir)
        folder = state.latest()
        if folder is None:
            return None
        rows = sum(state.rows(folder, name) for name in (HELD, "open", "pending"))  # older states: two tables
        if not rows:
            return None
        last = self.batches[max(self.batches)] if self.batches else None
        windows = f" in {last['open_windows']:,} open windows" if last and last["open_windows"] else ""
        return Held(rows, f"tuple{'s' if rows != 1 else ''}{windows}", micros_iso(state.meta(folder).get("mark")))

    @property
    def _timeout_micros(self) -> int:
        """t for the state model's lifetimes (learned timeouts: the sizes' fallback, an approximation)."""
        if self.spec.swa.timeout != AUTO:
            return self.spec.swa.timeout_micros
        return self.sizes.fallback[1] if self.sizes else 0

    def _record(
        self, batch_id: int, old_mark: int | None, mark: int | None, windows: int, state_rows: int, closed: int, lifetime_us: int
    ) -> None:
        """This batch's entry for the state model (framework.engine.state_figures); a replayed
        batch replaces its entry. `closed`: the windows it emitted, `lifetime_us` the sum of their
        lifetimes (to the n-th tuple for count, else the timeout), both counted by its tasks."""
        self.batches[batch_id] = {
            "batch": batch_id,
            "windows_closed": closed,
            "lifetime_sum_s": lifetime_us / 1e6,
            "advance_s": (mark - old_mark) / 1e6 if mark is not None and old_mark is not None else 0.0,
            "open_windows": windows,
            "state_rows": state_rows,
        }

    def _measure(self, folder: str, state_rows: int, keys: list[str], mark: int | None, windows: int | None = None) -> int:
        """State held after this batch: its tuples (as written), and its open windows: `windows`
        when the tasks counted them, else read from the state files without Spark. Every held
        tuple is in a window not emitted yet, also one the watermark has not reached (the fold
        assigns all of them): a key's held tuples continue where its emitted windows stopped, so
        the SWA rule over them from their first tuple gives its open windows, the windows the
        batch did not emit (one per key holding tuples when each key has sizes of its own)."""
        if windows is None:
            windows = self._open_windows_read_back(folder, keys) if state_rows else 0
        self.figures["state_rows_peak"] = max(self.figures["state_rows_peak"], state_rows)
        self.figures["open_windows_peak"] = max(self.figures["open_windows_peak"], windows)
        return windows

    def _open_windows_read_back(self, folder: str, keys: list[str]) -> int:
        """The open windows of the held tuples in the state files, without Spark: the keys holding
        tuples for learned sizes, else the SWA rule over each key's tuples."""
        import numpy as np
        import pyarrow.dataset as ds

        fs, path = filesystem(folder)
        held = ds.dataset(f"{path}/{HELD}", filesystem=fs, format="parquet").to_table(columns=[*keys, MICROS])
        swa = self.spec.swa
        if swa.learns:
            return held.group_by(keys).aggregate([]).num_rows
        held = held.sort_by([(k, "ascending") for k in keys] + [(MICROS, "ascending")])
        new_key = np.zeros(held.num_rows, dtype=bool)
        new_key[0] = True
        for k in keys:
            values = held.column(k).to_numpy(zero_copy_only=False)
            new_key[1:] |= values[1:] != values[:-1]
        micros = held.column(MICROS).to_numpy(zero_copy_only=False).astype(np.int64)
        _, _, _, position = fold_windows(new_key, micros, int(swa.size), swa.timeout_micros)
        return int((position == 1).sum())


WINDOWS = "windows"  # counted by the tasks: windows emitted (output), windows left open (held)
LIFETIMES = "lifetime_us"  # counted by the tasks: the emitted windows' lifetimes, summed


def _output_and_held(folder: str, timeout_us: int) -> dict[str, Folder]:
    """Where a batch's windows go: the final ones (FINAL) to the output, without the hidden
    columns; the tuples of the others to the state. Picked in the tasks, with pyarrow only, which
    also count the windows of each and the emitted ones' lifetimes (to the n-th tuple for count,
    else the timeout `timeout_us`)."""
    final, held, windows_, lifetimes = FINAL, HELD, WINDOWS, LIFETIMES

    def output(windows: pa.Table) -> pa.Table:
        return windows.filter(windows.column(final)).drop_columns([final, held])

    def held_tuples(windows: pa.Table) -> pa.Table:
        import pyarrow as pa
        import pyarrow.compute as pc

        kept = windows.filter(pc.invert(windows.column(final))).column(held)
        return pa.Table.from_struct_array(pc.list_flatten(kept).combine_chunks())

    def emitted(windows: pa.Table) -> dict[str, int]:
        import pyarrow.compute as pc

        done = windows.filter(windows.column(final))
        if done.num_rows == 0:
            return {windows_: 0, lifetimes: 0}
        start, end = (pc.cast(pc.cast(done.column(c), "timestamp[us]"), "int64") for c in ("window_start", "window_end"))
        life = pc.if_else(pc.equal(done.column("closed_by"), "count"), pc.subtract(end, start), timeout_us)
        return {windows_: done.num_rows, lifetimes: pc.sum(life).as_py()}

    def still_open(windows: pa.Table) -> dict[str, int]:
        import pyarrow.compute as pc

        return {windows_: windows.num_rows - (pc.sum(windows.column(final)).as_py() or 0)}

    return {
        OUTPUT: Folder(join(folder, OUTPUT), output, emitted),
        HELD: Folder(join(folder, HELD), held_tuples, still_open),
    }


def _one_row(aggregate: DataFrame) -> dict[str, Any]:
    row = aggregate.first()
    assert row is not None  # an aggregate without grouping has one row
    return row.asDict()


def _observed(observation: Observation) -> dict[str, int] | None:
    """An observation's figures, or None when the job skipped the observed rows (Spark saw they
    were empty and left them out of the plan, so nothing was counted)."""
    return observed(observation)
