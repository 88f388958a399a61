"""Count-window joins on streams: the batch operator applied per micro-batch, with carried state.

Arrival order is event-time order, so a row's place is final only once no earlier row can
still come: rows are held ("pending") until the join's watermark passes them. The watermark is
min over both inputs of (latest event time seen − that source's watermark delay); a new row
older than the previous watermark is late (the late-rows monitor has recorded it) and skipped.

Each micro-batch then joins the newly final rows F against the carried *tails*: the last W_A
rows of A and the last W_B rows of B before F. Why the batch operator gives exactly Algorithm 1's
pairs on tails ∪ F: each tail is a contiguous suffix of its stream, followed by F's rows of that
stream, so differences of positions inside tails ∪ F equal the global ones for every pair whose
later row is in F, and the window test only uses such differences. Pairs whose rows are both in
the tails were produced by an earlier batch and are filtered out.

For `type: left`, an A row is unmatched for good once it has left A's window (W_A later A rows
arrived); it is then emitted with B's columns null. A rows still in the window are not final.

State per batch (tables a and b: tails and pending rows) is kept by MicroBatchState and written
before the output commit, so a replayed batch recomputes the same rows from the state of the
batch before it. The batch's output is written beside that state, and the sink commits those
files as they are (WrittenRows) rather than writing the rows a second time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from framework.errors import BadInput
from framework.io.stream_sink import WrittenRows
from framework.operators.batch_values import before_mark, not_before
from framework.operators.columns import field_of
from framework.operators.context import StepContext
from framework.operators.join.batch import build_join, unmatched_rows
from framework.operators.micro_batch import Held, MicroBatchSetup, PerBatchOperator
from framework.operators.micro_batch_state import MicroBatchState

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NEW_A, NEW_B = "__tributary_new_a", "__tributary_new_b"
ID_A, MATCHED_A = "__tributary_id_a", "__tributary_matched_a"


@dataclass
class CountJoinStream(PerBatchOperator):
    """The `prepare` of an output's exactly-once sink for a count-window join on streams."""

    delay_a: float = 0.0  # watermark delays of the two inputs' sources (seconds)
    delay_b: float = 0.0
    side_tables: ClassVar[tuple[str, ...]] = ()  # late rows are recorded by the sources' audit

    @classmethod
    def for_output(cls, setup: MicroBatchSetup, **own: Any) -> CountJoinStream:
        """The operator of one output's sink. A left join's state records which kept A rows have
        matched; an inner join's does not (no inner join reads it), so a stream whose state an
        inner join wrote cannot go on as a left join: it would emit matched rows as unmatched."""
        join = setup.spec.join
        state = MicroBatchState(setup.state_dir)
        written = state.latest()
        was = state.meta(written).get("type") if written else None
        if was == "inner" and join.type == "left":
            raise BadInput(
                setup.problem(
                    f"step '{setup.step}': its count-window join is a left join now, and was an inner join"
                    " when its stream's state was written: that state does not record which rows matched",
                    ("steps", setup.step, "join", "type"),
                    hint=f"start the stream over: tributary run {setup.pipeline} --full-refresh",
                )
            )
        return super().for_output(setup, delay_a=setup.delays[join.left], delay_b=setup.delays[join.right], **own)

    def held(self) -> Held | None:
        """The rows of both inputs waiting for the watermark before they take their place in the
        count windows (the windows' last rows are kept too, but they are done: not counted)."""
        import pyarrow.dataset as ds

        state = MicroBatchState(self.state_dir)
        folder = state.latest()
        if folder is None:
            return None
        pending = ds.field("__kind") == "pending"
        rows = state.rows(folder, "a", pending) + state.rows(folder, "b", pending)
        if not rows:
            return None
        return Held(rows, "rows of the two inputs waiting for their place in the count windows", state.meta(folder).get("mark"))

    @staticmethod
    def tag(context: StepContext) -> DataFrame:
        """One stream of both inputs: (side, a struct, b struct), for foreachBatch."""
        from pyspark.sql import functions as F

        join = context.spec.join
        left, right = context.inputs[join.left], context.inputs[join.right]
        a = left.select(
            F.lit(0).alias("__side"), F.struct(*left.columns).alias("__a"), F.lit(None).cast(_struct(right)).alias("__b")
        )
        b = right.select(
            F.lit(1).alias("__side"), F.lit(None).cast(_struct(left)).alias("__a"), F.struct(*right.columns).alias("__b")
        )
        return a.unionByName(b)

    def __call__(self, batch: DataFrame, batch_id: int) -> WrittenRows:
        from pyspark.sql import functions as F

        self.spread(batch, batch_id)  # `partitions:`, which may change between runs
        spark = batch.sparkSession
        ts_a, ts_b = self.spec.join.left_event_time, self.spec.join.right_event_time
        new_a = batch.where("__side = 0").select("__a.*")
        new_b = batch.where("__side = 1").select("__b.*")
        previous = self._load(spark, batch_id, new_a, new_b)
        meta = previous["meta"]
        seen = batch.select(
            F.max(f"__a.`{ts_a}`").alias("a"), F.max(f"__b.`{ts_b}`").alias("b"), F.count(F.lit(1)).alias("rows")
        ).first()
        assert seen is not None  # an aggregate has one row
        max_a = _later(meta.get("max_a"), seen["a"])
        max_b = _later(meta.get("max_b"), seen["b"])
        old_mark, mark = meta.get("mark"), _watermark(max_a, self.delay_a, max_b, self.delay_b)

        # ids tell A rows apart for the left join's bookkeeping; materialised so they stay fixed
        new_a = new_a.withColumn(ID_A, F.concat_ws("-", F.lit(str(batch_id)), F.monotonically_increasing_id()))
        new_a = new_a.withColumn(MATCHED_A, F.lit(False)).localCheckpoint()
        if old_mark is not None:  # late rows cannot take a place in the sequence any more
            # the state's ISO text, read as each column's type (as `ts >= 'text'` would)
            old_a, old_b = (F.lit(old_mark).cast(field_of(f, ts).dataType) for f, ts in ((new_a, ts_a), (new_b, ts_b)))
            new_a, new_b = new_a.where(not_before(F.col(ts_a), old_a)), new_b.where(not_before(F.col(ts_b), old_b))
        held_a = previous["a"].where("__kind = 'pending'").drop("__kind").unionByName(new_a)
        held_b = previous["b"].where("__kind = 'pending'").drop("__kind").unionByName(new_b)
        # the batch's values as data, not code: a string id, the marks compared as structs (batch_values)
        is_final_a = before_mark(F.col(ts_a), mark)
        is_final_b = before_mark(F.col(ts_b), mark)
        final_a, final_b = held_a.where(is_final_a), held_b.where(is_final_b)
        tail_a = previous["a"].where("__kind = 'tail'").drop("__kind")
        tail_b = previous["b"].where("__kind = 'tail'").drop("__kind")

        cand_a = tail_a.withColumn(NEW_A, F.lit(False)).unionByName(final_a.withColumn(NEW_A, F.lit(True))).cache()
        cand_b = tail_b.withColumn(NEW_B, F.lit(False)).unionByName(final_b.withColumn(NEW_B, F.lit(True))).cache()
        at_most = seen["rows"] + previous["rows"]  # the candidates' rows, known without a job
        pairs = self._inner_join(spark, cand_a, cand_b, at_most).where(F.col(NEW_A) | F.col(NEW_B))

        keep_a = self._last(cand_a, self.spec.join.last.left, ts_a)
        keep_b = self._last(cand_b, self.spec.join.last.right, ts_b)
        output = pairs
        if self.spec.join.type == "left":  # which A rows matched is kept for the left join only
            # the pairs are read three times below (the evicted A rows, the kept ones, the output)
            # and the kept rows twice: each computed once, not per read
            pairs, keep_a = pairs.localCheckpoint(), keep_a.localCheckpoint()
            matched = pairs.select(F.col(ID_A).alias("__m")).distinct()
            evicted = cand_a.join(keep_a.select(ID_A), ID_A, "left_anti")
            unmatched = evicted.join(matched, evicted[ID_A] == matched["__m"], "left_anti").where(~F.col(MATCHED_A))
            output = pairs.unionByName(unmatched_rows(self._context(spark, unmatched, cand_b)))
            keep_a = (
                keep_a.join(matched, keep_a[ID_A] == matched["__m"], "left")
                .withColumn(MATCHED_A, F.col(MATCHED_A) | F.col("__m").isNotNull())
                .drop("__m")
            )
        pending_a, pending_b = held_a.where(~is_final_a), held_b.where(~is_final_b)
        self._save(
            batch_id,
            keep_a.drop(NEW_A),
            keep_b.drop(NEW_B),
            pending_a,
            pending_b,
            {"max_a": _iso(max_a), "max_b": _iso(max_b), "mark": _iso(mark), "type": self.spec.join.type},
        )
        hidden = [NEW_A, NEW_B, ID_A, MATCHED_A]
        written = MicroBatchState(self.state_dir).write_output(batch_id, output.drop(*[c for c in output.columns if c in hidden]))
        cand_a.unpersist()
        cand_b.unpersist()
        return written

    # -- pieces --------------------------------------------------------------------------------

    def _inner_join(self, spark: SparkSession, a: DataFrame, b: DataFrame, rows_at_most: int) -> DataFrame:
        return build_join(self._context(spark, a, b, kind="inner"), rows_at_most)

    def _context(self, spark: SparkSession, a: DataFrame, b: DataFrame, kind: str | None = None) -> StepContext:
        """The step's context over `a` and `b` as its two inputs (and as a join of `kind`, if given)."""
        spec = self.spec
        if kind is not None:
            spec = spec.model_copy(update={"join": spec.join.model_copy(update={"type": kind})})
        return StepContext(spark, self.step, spec, {spec.join.left: a, spec.join.right: b})

    def _last(self, rows: DataFrame, count: int, event_time: str) -> DataFrame:
        """The last `count` rows in arrival order (event time, tiebreak, then the other columns)."""
        from pyspark.sql import functions as F

        order = [event_time, *self.spec.join.tiebreak]
        rest = [c for c in rows.columns if c not in order and not c.startswith("__tributary")]
        return rows.orderBy(*[F.col(f"`{c}`").desc_nulls_last() for c in (*order, *rest)]).limit(count)

    def _load(self, spark: SparkSession, batch_id: int, new_a: DataFrame, new_b: DataFrame) -> dict[str, Any]:
        from pyspark.sql import functions as F

        state = MicroBatchState(self.state_dir)
        folder = state.previous(batch_id)
        empty_a = new_a.limit(0).withColumn(ID_A, F.lit("")).withColumn(MATCHED_A, F.lit(False)).withColumn("__kind", F.lit(""))
        empty_b = new_b.limit(0).withColumn("__kind", F.lit(""))
        return {
            "a": state.table(spark, folder, "a", empty_a.schema),
            "b": state.table(spark, folder, "b", empty_b.schema),
            "meta": state.meta(folder),
            "rows": sum(state.rows(folder, name) for name in ("a", "b")) if folder else 0,  # tails and pending
        }

    def _save(
        self,
        batch_id: int,
        tail_a: DataFrame,
        tail_b: DataFrame,
        pending_a: DataFrame,
        pending_b: DataFrame,
        meta: dict[str, Any],
    ) -> None:
        from pyspark.sql import functions as F

        tables = {
            "a": tail_a.withColumn("__kind", F.lit("tail")).unionByName(pending_a.withColumn("__kind", F.lit("pending"))),
            "b": tail_b.withColumn("__kind", F.lit("tail")).unionByName(pending_b.withColumn("__kind", F.lit("pending"))),
        }
        MicroBatchState(self.state_dir).save(batch_id, tables, meta)


def _struct(df: DataFrame) -> str:
    return df.schema.simpleString()


def _later(a: Any, b: Any) -> Any:
    from datetime import datetime

    values = [datetime.fromisoformat(v) if isinstance(v, str) else v for v in (a, b) if v is not None]
    return max(values) if values else None


def _watermark(max_a: Any, delay_a: float, max_b: Any, delay_b: float) -> Any:
    from datetime import timedelta

    if max_a is None or max_b is None:
        return None  # one input has not started: an earlier row of it may still come
    return min(max_a - timedelta(seconds=delay_a), max_b - timedelta(seconds=delay_b))


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None
