"""`group:` steps on streams: the batch step's runner applied per micro-batch to the held events,
each key's state and the new events, closing only the groups no later event can change.

The watermark (mark) is the newest event time seen (any row, keyed or not) minus the largest
watermark delay of the sources behind the inputs. A new event older than the previous batch's
mark is late: it goes to the late-rows table and takes no part (as for SWA). The runner then sees,
per key, its state, its held events and its new ones, and closes the groups that are final at the
mark (framework.operators.group.runner): their rows go to the output, the events of the others
are held, each key's state is kept. Since the groups a rule closes are a prefix of the key's
events, and events still to come are at or after the mark, the same groups close with the same
state for any split into micro-batches.

Exactly once: a batch's output, held events and states are written by its tasks in one job
(framework.io.task_parquet) into the batch's own state folder (framework.operators.micro_batch_state),
computed from the previous batch's folder, which is kept. A batch Spark replays after a crash reads
the same previous state, so the function sees the state it saw the first time, and the output's
sink commits the batch once. Events without a key or event time, contexts that never completed,
and late events are handed back with the batch (WrittenRows.side) and committed with its id.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from framework.io.checkpoint_audit import late_records
from framework.io.locations import join
from framework.io.stream_sink import WrittenRows
from framework.io.task_parquet import Folder, write_folders
from framework.operators.batch_values import before_mark
from framework.operators.columns import field_of
from framework.operators.context import REASON, quarantine_records, quarantine_shape
from framework.operators.group.batch import group_runner, keyed, run_groups
from framework.operators.group.runner import EVENT, HELD, KEY, MICROS, OUT, QUARANTINED, ROLE, STATE, STATE_OUT, STATE_ROW
from framework.operators.keyed_windows import rejection_reason
from framework.operators.micro_batch import LATE, QUARANTINE, Held, MicroBatchSetup, PerBatchOperator, micros_iso
from framework.operators.micro_batch_state import OUTPUT, MicroBatchState

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from framework.functions.loader import Functions
    from framework.operators.group.runner import GroupRunner

HELD_TABLE, STATES_TABLE, QUARANTINE_TABLE = "held", "states", "quarantined"


@dataclass
class GroupStream(PerBatchOperator):
    """The `prepare` of an output's exactly-once sink for a `group:` step on streams."""

    functions: Functions | None = None  # the project's udfs/
    PEAKS: ClassVar[tuple[str, ...]] = ("state_rows_peak", "keys_with_state_peak")

    @classmethod
    def for_output(cls, setup: MicroBatchSetup, **own: Any) -> GroupStream:
        return super().for_output(setup, functions=setup.functions, **own)

    def __call__(self, batch: DataFrame, batch_id: int) -> WrittenRows:
        from pyspark.sql import functions as F

        self.spread(batch, batch_id)  # `partitions:`, which may change between runs
        spec = self.spec.group
        state = MicroBatchState(self.state_dir)
        folder = state.previous(batch_id)
        meta = state.meta(folder)

        rows = keyed(batch.withColumn(REASON, rejection_reason(spec)), spec)  # type: ignore[arg-type]
        is_good = F.col(REASON).isNull()
        old_mark = meta.get("mark")
        is_late = is_good & before_mark(F.col(MICROS), old_mark)  # as data, not code (batch_values)
        newest = rows.agg(
            F.max(MICROS).alias("newest"), F.count_if(~is_good).alias("rejected"), F.count_if(is_late).alias("late")
        )
        figures = newest.first()
        assert figures is not None
        seen = max((m for m in (meta.get("max"), figures["newest"]) if m is not None), default=None)
        mark = seen - round(self.delay * 1_000_000) if seen is not None else None

        new = rows.where(is_good & ~is_late).drop(REASON)
        events = new.drop(ROLE).schema
        spark = batch.sparkSession
        held = self._table(spark, folder, HELD_TABLE, events).withColumn(ROLE, F.lit(1).cast("tinyint"))
        states = self._table(spark, folder, STATES_TABLE, _states_schema()).withColumn(ROLE, F.lit(STATE_ROW).cast("tinyint"))
        work = new.unionByName(held).unionByName(states, allowMissingColumns=True)
        runner = group_runner(self.step, spec, self.functions, work.schema, mark=mark, end_of_input=False)
        current = state.begin(batch_id)
        written = write_folders(run_groups(work, spec, runner), _folders(current, runner, events))

        side = {}
        quarantined = []
        if figures["rejected"]:
            quarantined.append(quarantine_shape(rows.where(~is_good), self.step))
        if written[QUARANTINE_TABLE]:
            given_up = spark.read.parquet(join(current, QUARANTINE_TABLE))
            quarantined.append(quarantine_shape(given_up, self.step))
        if quarantined:
            shaped = quarantined[0]
            for more in quarantined[1:]:
                shaped = shaped.unionByName(more)
            side[QUARANTINE] = quarantine_records(shaped, self.run_id, self.pipeline)
        if figures["late"]:
            side[LATE] = self._late(rows.where(is_late).drop(REASON), old_mark)  # type: ignore[arg-type]
        state.complete(batch_id, {"max": seen, "mark": mark})
        self.figures["state_rows_peak"] = max(self.figures["state_rows_peak"], written[HELD_TABLE])
        self.figures["keys_with_state_peak"] = max(self.figures["keys_with_state_peak"], written[STATES_TABLE])
        return WrittenRows(join(current, OUTPUT), _output_schema(runner), side)

    def held(self) -> Held | None:
        state = MicroBatchState(self.state_dir)
        folder = state.latest()
        rows = state.rows(folder, HELD_TABLE) if folder else 0
        if not rows:
            return None
        keys = state.rows(folder, STATES_TABLE)  # type: ignore[arg-type]
        return Held(
            rows,
            f"events of groups not yet closed ({keys:,} keys with state)",
            micros_iso(state.meta(folder).get("mark")),
            waits=held_waits(self.spec.group.close),
        )

    @staticmethod
    def _table(spark: Any, folder: str | None, name: str, schema: StructType) -> DataFrame:
        return MicroBatchState.table(spark, folder, name, schema)

    def _late(self, late: DataFrame, mark_micros: int) -> DataFrame:
        mark = datetime.fromtimestamp(mark_micros / 1_000_000, tz=UTC).replace(tzinfo=None)
        spec = self.spec.group
        event_time = field_of(late, spec.event_time).name  # type: ignore[union-attr]
        source = ", ".join(self.sources) or ", ".join(spec.inputs)
        return late_records(late.drop(KEY, ROLE), source, (self.step,), event_time, mark, self.run_id, self.pipeline)


def held_waits(close: Any) -> str:
    """What the events a stream holds wait for, by the close rule (framework.operators.group.runner):
    not always the watermark."""
    if close.all_inputs:
        gives_up = f"; it is quarantined as incomplete once the watermark passes its first event + {_span(close.timeout)}"
        return "a context waits for an event from each input it misses" + (gives_up if close.timeout is not None else "")
    if close.every is not None:
        return f"a group is emitted once the watermark passes the end of its {_span(close.every)} interval"
    if close.timeout is None:
        return f"a group waits for {close.count:,} events of its key, then is emitted once the watermark passes its last one"
    counted = f", or once it has {close.count:,} events and the watermark passes its last one" if close.count is not None else ""
    return f"a group is emitted once the watermark passes its first event + {_span(close.timeout)}{counted}"


def _span(seconds: float) -> str:
    """A duration as the spec writes it: 20m, 30s, 1h, 1.5s."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _output_schema(runner: GroupRunner) -> StructType:
    """The output's columns: the key columns, then the function's."""
    from pyspark.sql.types import StructType

    whole = runner.spark_schema
    return StructType([whole[name] for name in (*runner.key_columns, *runner.returns.names)])


def _states_schema() -> StructType:
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType([StructField(KEY, StringType(), True), StructField(STATE, StringType(), True)])


def _folders(current: str, runner: GroupRunner, events: StructType) -> dict[str, Folder]:
    """Where the runner's rows go, picked in the tasks with pyarrow only: the function's rows to
    the output; held events and states to the state; given-up contexts to the quarantine."""
    role, out_columns = ROLE, [*runner.key_columns, *runner.returns.names]
    event_names = [f.name for f in events.fields if f.name != KEY]
    prefix, key, state_column, reason = EVENT, KEY, STATE, REASON

    def rows_of(table: pa.Table, wanted: str) -> pa.Table:
        import pyarrow.compute as pc

        return table.filter(pc.equal(table.column(role), wanted))

    def output(table: pa.Table) -> pa.Table:
        return rows_of(table, OUT).select(out_columns)

    def held(table: pa.Table) -> pa.Table:
        picked = rows_of(table, HELD).select([key, *[prefix + n for n in event_names]])
        return picked.rename_columns([key, *event_names])

    def states(table: pa.Table) -> pa.Table:
        return rows_of(table, STATE_OUT).select([key, state_column])

    def given_up(table: pa.Table) -> pa.Table:
        picked = rows_of(table, QUARANTINED).select([*[prefix + n for n in event_names], reason])
        return picked.rename_columns([*event_names, reason])

    return {
        OUTPUT: Folder(join(current, OUTPUT), output),
        HELD_TABLE: Folder(join(current, HELD_TABLE), held),
        STATES_TABLE: Folder(join(current, STATES_TABLE), states),
        QUARANTINE_TABLE: Folder(join(current, QUARANTINE_TABLE), given_up),
    }
