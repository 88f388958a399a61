"""`join:` steps: two inputs joined on equal keys within a time or a count window (Liu et al., Algorithm 1).

Left input A, right input B, key columns `on`, event time column `event_time` in both (or one per
input: `event_time: {left: dep_time, right: obs_time}`).

Time window (`within: {before, after}`): pairs (a, b) with equal keys and
b.ts in [a.ts - before, a.ts + after], both ends included. It is one plain Spark join whose
condition is the key equalities, a time bucket (so a key with few values is not compared all with
all) and that range, nothing else (no sort, window or aggregate), so the same plan runs on
streaming inputs as a stream-stream join once the caller has set watermarks on the sources.

Count window (`last: {left: W_A, right: W_B}`), Algorithm 1 of Liu et al.: A and B are merged into
one arrival sequence; when a row arrives it meets the matching rows among the last W rows (all
keys) of the other input that arrived before it, then enters its own window. So a pair (a, b)
with equal keys is produced once, at the later of the two arrivals: if a arrived after b, b must
be among the last W_B rows of B that arrived before a; if b arrived after a, a must be among the
last W_A rows of A that arrived before b.

Arrival order (a total order up to identical rows) sorts by, in turn:
  1. event_time (rows with a null event time never arrive: they join nothing and do not count
     in any window; a left join still outputs such A rows, unmatched);
  2. the `tiebreak` columns, in the order given (they must be in both inputs);
  3. the input: A before B;
  4. the remaining columns of the row's own input, in their order, ascending, nulls first
     (columns Spark cannot order, such as maps, by their JSON text).
Rows equal on all of these are identical, so their relative order cannot change the result.

Keys match when equal and not null (SQL equality): a row with a null key joins nothing.

Types: `inner` gives the matching pairs; `left` also gives every unmatched A row once, with B's
columns null.

Output: the key columns once (A's values), then A's other columns, then B's other columns; a
non-key column name present in both inputs (case-insensitively) is prefixed with its input's
name, e.g. `phones_ts` and `emails_ts`.
"""

from __future__ import annotations

import datetime
import functools
import operator
from typing import TYPE_CHECKING

from framework.errors import BadInput, Problem
from framework.operators.columns import Role, field_of, lacking, missing_columns, not_a_timestamp, quoted, untimely
from framework.operators.context import StepContext
from framework.operators.ordering import bucket_count, bucket_of, epoch_micros, orderable
from framework.operators.problems import SpecProblem
from framework.operators.registry import ColumnContext, StepColumns
from framework.schemas import Column as SchemaColumn
from framework.schemas import Schema
from framework.spec.steps import JoinStep

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def build_join(context: StepContext, rows_at_most: int | None = None) -> DataFrame:
    """The join's rows. `rows_at_most`: an upper bound of the two inputs' rows together, when the
    caller knows one without a Spark job (a count window on streams: ONE_BUCKET_ROWS)."""
    spec = context.spec.join
    left, right = context.inputs[spec.left], context.inputs[spec.right]
    _check_inputs(context, left, right)
    plan = _OutputPlan(context, left, right)
    if spec.within is not None:
        return _time_join(context, plan, left, right)
    if left.isStreaming or right.isStreaming:
        streaming = spec.left if left.isStreaming else spec.right
        raise BadInput(
            Problem(
                f"step '{context.name}': a count window ('last:') on streams runs only inside a streaming pipeline's output ('{streaming}' is streaming)",
                hint="use a time window ('within:') on streaming inputs, or read the inputs in batch",
            )
        )
    return _count_join(context, plan, left, right, rows_at_most)


# ---------------------------------------------------------------------------------------------
# Checks and output naming


def _check_inputs(context: StepContext, left: DataFrame, right: DataFrame) -> None:
    spec = context.spec.join
    problems: list[Problem] = []
    shared = [("key", c, "") for c in spec.on] + [("tiebreak", c, "") for c in spec.tiebreak]
    for name, df, time in ((spec.left, left, spec.left_event_time), (spec.right, right, spec.right_event_time)):
        problems += missing_columns(context.name, name, df, [("event_time", time, ""), *shared])
        hint = "cast it to a timestamp in a SQL step before the join, or name another column in event_time"
        problems += not_a_timestamp(context.name, name, df, time, hint)
    if problems:
        raise BadInput(*problems)


class _OutputPlan:
    """Output names: keys once (from A), then A's other columns, then B's other columns."""

    def __init__(self, context: StepContext, left: DataFrame, right: DataFrame) -> None:
        spec = context.spec.join
        keys = {c.lower() for c in spec.on}
        self.keys = [field_of(left, c).name for c in spec.on]  # A's spelling
        self.left_rest = [c for c in left.columns if c.lower() not in keys]
        self.right_rest = [c for c in right.columns if c.lower() not in keys]
        left_lower = {c.lower() for c in self.left_rest}
        right_lower = {c.lower() for c in self.right_rest}
        both = left_lower & right_lower
        self.left_out = [f"{spec.left}_{c}" if c.lower() in both else c for c in self.left_rest]
        self.right_out = [f"{spec.right}_{c}" if c.lower() in both else c for c in self.right_rest]
        names = self.keys + self.left_out + self.right_out
        seen: set[str] = set()
        for name in names:
            if name.lower() in seen:
                raise BadInput(
                    Problem(
                        f"step '{context.name}': the join would output column '{name}' twice",
                        hint="rename the columns of one input in a SQL step before the join",
                    )
                )
            seen.add(name.lower())


def _renamed(df: DataFrame, prefix: str, extra: list[Column] | None = None) -> DataFrame:
    """The input with columns renamed to positional internal names (`__a0`, `__a1`...).

    New attributes keep the two sides apart even when both inputs derive from one DataFrame
    (Spark's ambiguous self-join), and make any user column name safe to reference."""
    from pyspark.sql import functions as F

    columns = [F.col(quoted(c)).alias(f"{prefix}{i}") for i, c in enumerate(df.columns)]
    return df.select(*columns, *(extra or []))


def _index(df: DataFrame, column: str) -> int:
    return [c.lower() for c in df.columns].index(column.lower())


def _finish(plan: _OutputPlan, joined: DataFrame, left: DataFrame, right: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    out = [F.col(f"__a{_index(left, k)}").alias(k) for k in plan.keys]
    out += [F.col(f"__a{_index(left, c)}").alias(n) for c, n in zip(plan.left_rest, plan.left_out, strict=True)]
    out += [F.col(f"__b{_index(right, c)}").alias(n) for c, n in zip(plan.right_rest, plan.right_out, strict=True)]
    return joined.select(*out)


def _key_condition(context: StepContext, left: DataFrame, right: DataFrame) -> Column:
    from pyspark.sql import functions as F

    spec = context.spec.join
    equalities = [F.col(f"__a{_index(left, key)}") == F.col(f"__b{_index(right, key)}") for key in spec.on]
    return functools.reduce(operator.and_, equalities)


# ---------------------------------------------------------------------------------------------
# Time window


def _interval(seconds: float) -> Column:
    """A day-time interval *literal* (stream-stream joins read the range bounds off literals)."""
    from pyspark.sql import functions as F

    return F.lit(datetime.timedelta(microseconds=round(seconds * 1_000_000)))


def _time_join(context: StepContext, plan: _OutputPlan, left: DataFrame, right: DataFrame) -> DataFrame:
    """The keys, the time bucket (below) and the range, as one join condition.

    Why the bucket: Spark joins on the equalities and checks the range on each pair they give, so
    a key with few values (a carrier, a sensor type) compares every A row with every B row of its
    key: a year of hourly rows on 3 keys is billions of comparisons for a one-hour window. With a
    bucket width W ≥ before + after, A row a goes to bucket ⌊a.ts / W⌋ and B row b to each bucket
    an A row it can meet lives in, ⌊(b.ts − after) / W⌋ … ⌊(b.ts + before) / W⌋ (at most two): a
    and b meet in exactly one bucket when they are in range, so the pairs are the same, each once,
    a left join keeps every A row once, and the cost follows the matching pairs.

    W: in batch, before + after (at least a second), the fewest comparisons. On streams B rows sit
    in the join's state until the watermark passes them, and a B row reaching two buckets is
    stored twice: with W = before + after every B row does (state +50% on the contact-join
    benchmark, which then ran out of heap), with W = 8 × (before + after) one in eight does
    (+7%), while a bucket still holds only 8 windows of a key's rows."""
    from pyspark.sql import functions as F

    spec = context.spec.join
    before_us, after_us = round(spec.within.before * 1_000_000), round(spec.within.after * 1_000_000)
    streaming = left.isStreaming or right.isStreaming
    width = max(before_us + after_us, 1_000_000) * (STREAM_BUCKET_WINDOWS if streaming else 1)
    left_time, right_time = spec.left_event_time, spec.right_event_time
    a_micros = _micros(left, left_time, f"__a{_index(left, left_time)}")
    b_micros = _micros(right, right_time, f"__b{_index(right, right_time)}")
    a = _renamed(left, "__a", [F.floor(a_micros / F.lit(width)).alias(A_BUCKET)])
    b = _renamed(right, "__b")
    reach = F.sequence(
        F.floor((b_micros - F.lit(after_us)) / F.lit(width)), F.floor((b_micros + F.lit(before_us)) / F.lit(width))
    )
    b = b.withColumn(B_BUCKET, F.explode(reach))
    a_ts = F.col(f"__a{_index(left, left_time)}")
    b_ts = F.col(f"__b{_index(right, right_time)}")
    condition = (
        _key_condition(context, left, right)
        & (F.col(A_BUCKET) == F.col(B_BUCKET))
        & (b_ts >= a_ts - _interval(spec.within.before))
        & (b_ts <= a_ts + _interval(spec.within.after))
    )
    joined = a.join(b, on=condition, how="inner" if spec.type == "inner" else "left_outer")
    return _finish(plan, joined, left, right)


STREAM_BUCKET_WINDOWS = 8  # a stream's time bucket spans this many windows (see _time_join)
A_BUCKET, B_BUCKET = "__a_bucket", "__b_bucket"  # the time bucket of an A row, one reached by a B row


def _micros(df: DataFrame, column: str, renamed: str) -> Column:
    """The renamed event time column in micros since the epoch (monotone, as the range compares)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampNTZType

    return epoch_micros(F.col(renamed), isinstance(field_of(df, column).dataType, TimestampNTZType))


# ---------------------------------------------------------------------------------------------
# Count window (batch)
#
# Positions. For a row x of the merged sequence let cntA(x) / cntB(x) be the number of A / B rows
# (with an event time) strictly before x. For a in A, posA(a) = cntA(a) is its 0-based index among
# A's rows; for b in B, posB(b) = cntB(b). Then, since the order is total:
#   b arrived before a                      <=>  posB(b) < cntB(a)
#   b is among the last W_B B rows before a <=>  cntB(a) - W_B <= posB(b) < cntB(a)
# and symmetrically a is among the last W_A A rows before b <=> cntA(b) - W_A <= posA(a) < cntA(b).
# The two ranges cannot both hold (one needs b before a, the other a before b), so the equi-join on
# the keys with "range 1 OR range 2" gives each pair of Algorithm 1 exactly once.
#
# Distributed running counts (no single-partition window): the event times are cut into buckets
# at boundaries taken from approximate quantiles (a distributed aggregate; the boundaries come to
# the driver as a short list). The bucket of a row is a pure function of its event time,
# monotone in it, and event time is the first component of the order, so every row of bucket i
# precedes every row of bucket j > i. A grouped count per bucket (a tiny collected list) gives
# each bucket's offsets: the A and B rows in earlier buckets. Inside a bucket a window
# PARTITION BY bucket ORDER BY <arrival order> ROWS UNBOUNDED PRECEDING..1 PRECEDING counts the
# rows before each row; offset + that count = cntA / cntB. Nothing depends on how Spark happened
# to partition the data, so recomputing a stage cannot skew the counts against the offsets. Rows
# equal on every ordering column are identical, and the ROWS frame still gives them distinct
# consecutive positions, whichever way round. One event time cannot be split over buckets, so a
# huge run of equal event times stays in one task.
#
# Costs: building the step runs two small jobs over the inputs (the quantiles, the bucket counts);
# the ranked rows are read by both sides of the final join, so the plan ranks twice (same result
# both times, see above); the final join is on the keys alone with the ranges as a residual
# condition, so a hot key compares all its A rows with all its B rows (at most W_A + W_B of them
# match per row: a band join on blocks of posB // W_B would bound that, if ever needed).


#: A count window over at most this many rows numbers them in one ordered window, not in time
#: buckets: the buckets' bounds (approximate quantiles) and their row counts are two Spark jobs,
#: about 0.6 s of a count-window join's micro-batch of a dozen rows, and one task orders 100,000
#: rows in a fraction of that.
ONE_BUCKET_ROWS = 100_000


def _count_join(
    context: StepContext, plan: _OutputPlan, left: DataFrame, right: DataFrame, rows_at_most: int | None = None
) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, TimestampNTZType, TimestampType

    spec = context.spec.join
    left_ts, right_ts = field_of(left, spec.left_event_time), field_of(right, spec.right_event_time)
    ntz = isinstance(left_ts.dataType, TimestampNTZType) and isinstance(right_ts.dataType, TimestampNTZType)
    ts_type = TimestampNTZType() if ntz else TimestampType()

    def side(df: DataFrame, prefix: str, is_left: bool) -> DataFrame:
        time = spec.left_event_time if is_left else spec.right_event_time
        ordering = {time.lower()} | {c.lower() for c in spec.tiebreak}
        rest = []
        for i, field in enumerate(df.schema.fields):
            if field.name.lower() in ordering:
                continue
            column = F.col(quoted(field.name))
            rest.append((column if orderable(field.dataType) else F.to_json(F.struct(column))).alias(f"r{i}"))
        own = F.struct(*rest) if rest else F.lit(None)
        extra = [
            F.col(quoted(time)).cast(ts_type).alias("__ts"),
            *[F.col(quoted(c)).alias(f"__tb{j}") for j, c in enumerate(spec.tiebreak)],
            F.lit(0 if is_left else 1).alias("__side"),
            (own if is_left else F.lit(None)).alias("__rest_a"),
            (F.lit(None) if is_left else own).alias("__rest_b"),
        ]
        return _renamed(df, prefix, extra)

    a, b = side(left, "__a", True), side(right, "__b", False)
    a_cols, b_cols = [c for c in a.columns if c.startswith("__a")], [c for c in b.columns if c.startswith("__b")]
    # One frame for both inputs: each row carries its own input's columns, the other side null.
    shared = ["__ts", *[f"__tb{j}" for j in range(len(spec.tiebreak))], "__side", "__rest_a", "__rest_b"]
    merged = a.select(*shared, F.struct(*a_cols).alias("__row_a"), F.lit(None).alias("__row_b")).unionByName(
        b.select(*shared, F.lit(None).alias("__row_a"), F.struct(*b_cols).alias("__row_b")),
        allowMissingColumns=False,
    )
    merged = merged.withColumn("__micros", epoch_micros(F.col("__ts"), ntz))

    # Bucket boundaries: approximate quantiles of the event times (nulls ignored).
    n = 1 if rows_at_most is not None and rows_at_most <= ONE_BUCKET_ROWS else bucket_count(context.spark)
    bounds: list[int] = []
    if n > 1:
        probabilities = [i / n for i in range(1, n)]
        quantiles = merged.approxQuantile("__micros", probabilities, 1.0 / (4 * n))
        bounds = sorted({int(q) for q in quantiles})
    merged = merged.withColumn(
        "__bucket",
        F.when(F.col("__micros").isNull(), F.lit(-1)).otherwise(bucket_of(F.col("__micros"), bounds)),
    )
    is_a = F.when((F.col("__side") == 0) & F.col("__ts").isNotNull(), 1).otherwise(0)
    is_b = F.when((F.col("__side") == 1) & F.col("__ts").isNotNull(), 1).otherwise(0)
    merged = merged.withColumn("__is_a", is_a).withColumn("__is_b", is_b)

    # Offsets: A and B rows in the buckets before each bucket (one row per bucket, collected); with
    # one bucket (besides -1, the rows without an event time, which get no position) they are 0.
    per_bucket = (
        [] if not bounds else merged.groupBy("__bucket").agg(F.sum("__is_a").alias("na"), F.sum("__is_b").alias("nb")).collect()
    )
    offsets_a: dict[int, int] = {}
    offsets_b: dict[int, int] = {}
    before_a = before_b = 0
    for row in sorted(per_bucket, key=lambda r: r["__bucket"]):
        offsets_a[row["__bucket"]], offsets_b[row["__bucket"]] = before_a, before_b
        before_a += row["na"] or 0
        before_b += row["nb"] or 0

    def offset(table: dict[int, int]) -> Column:
        if not table:
            return F.lit(0).cast(LongType())
        pairs = [x for bucket, value in table.items() for x in (F.lit(bucket), F.lit(value).cast(LongType()))]
        return F.element_at(F.create_map(*pairs), F.col("__bucket"))

    order = [
        F.col("__ts").asc_nulls_first(),
        *[F.col(f"__tb{j}").asc_nulls_first() for j in range(len(spec.tiebreak))],
        F.col("__side").asc(),
        F.col("__rest_a").asc_nulls_first(),
        F.col("__rest_b").asc_nulls_first(),
    ]
    before = Window.partitionBy("__bucket").orderBy(*order).rowsBetween(Window.unboundedPreceding, -1)
    has_ts = F.col("__ts").isNotNull()
    ranked = merged.select(
        "__side",
        "__row_a",
        "__row_b",
        F.when(has_ts, offset(offsets_a) + F.coalesce(F.sum("__is_a").over(before), F.lit(0))).alias("__cnt_a"),
        F.when(has_ts, offset(offsets_b) + F.coalesce(F.sum("__is_b").over(before), F.lit(0))).alias("__cnt_b"),
    )
    a_pos = ranked.where(F.col("__side") == 0).select(
        "__row_a.*", F.col("__cnt_a").alias("__pos_a"), F.col("__cnt_b").alias("__at_b")
    )
    b_pos = ranked.where(F.col("__side") == 1).select(
        "__row_b.*", F.col("__cnt_b").alias("__pos_b"), F.col("__cnt_a").alias("__at_a")
    )

    w_a, w_b = spec.last.left, spec.last.right
    pos_a, at_b, pos_b, at_a = F.col("__pos_a"), F.col("__at_b"), F.col("__pos_b"), F.col("__at_a")
    b_in_window = (pos_b < at_b) & (pos_b >= at_b - F.lit(w_b))  # a arrived after b
    a_in_window = (pos_a < at_a) & (pos_a >= at_a - F.lit(w_a))  # b arrived after a
    condition = _key_condition(context, left, right) & (b_in_window | a_in_window)
    joined = a_pos.join(b_pos, on=condition, how="inner" if spec.type == "inner" else "left_outer")
    return _finish(plan, joined, left, right)


def unmatched_rows(context: StepContext) -> DataFrame:
    """Every row of the left input in the join's output shape, the right input's columns null: what
    a left join outputs for A rows that met no B row (the count join on streams emits those once
    they have left A's window, without joining them against an empty B)."""
    from pyspark.sql import functions as F

    spec = context.spec.join
    left, right = context.inputs[spec.left], context.inputs[spec.right]
    nulls = [F.lit(None).cast(f.dataType).alias(f"__b{i}") for i, f in enumerate(right.schema.fields)]
    return _finish(_OutputPlan(context, left, right), _renamed(left, "__a", nulls), left, right)


def join_columns(step: JoinStep, context: ColumnContext) -> StepColumns:
    """Before Spark starts: the named columns in both inputs, a timestamp event time, and the
    output as _OutputPlan names it (keys once, then A's and B's other columns, prefixed where
    both have one). With an input whose columns are not all known, only the keys are certain."""
    spec = step.join
    left, right = context.inputs[spec.left], context.inputs[spec.right]
    keys: list[Role] = [("key", c, "", ("join", "on", i)) for i, c in enumerate(spec.on)]
    tiebreak: list[Role] = [("tiebreak", c, "", ("join", "tiebreak", i)) for i, c in enumerate(spec.tiebreak)]
    problems: list[SpecProblem] = []
    hint = "cast it to a timestamp in a SQL step before the join, or name another column in event_time"
    for name, schema, time, at in (
        (spec.left, left, spec.left_event_time, spec.event_time_at("left")),
        (spec.right, right, spec.right_event_time, spec.event_time_at("right")),
    ):
        problems += lacking(name, schema, [*keys, ("event_time", time, "", at), *tiebreak])
        problems += untimely(name, schema, time, at, hint)
    key_names = {c.lower() for c in spec.on}
    out = [left.find(k) or SchemaColumn(k) for k in spec.on]
    if not (left.complete and right.complete):
        why = left.why_incomplete if not left.complete else right.why_incomplete
        return StepColumns(
            Schema(tuple(out), complete=False, why_incomplete=f"an input's columns are not all known ({why})"), list(problems)
        )
    left_rest = [c for c in left.columns if c.name.lower() not in key_names]
    right_rest = [c for c in right.columns if c.name.lower() not in key_names]
    both = {c.name.lower() for c in left_rest} & {c.name.lower() for c in right_rest}
    for prefix, rest in ((spec.left, left_rest), (spec.right, right_rest)):
        out += [SchemaColumn(f"{prefix}_{c.name}", c.type, c.inferred) if c.name.lower() in both else c for c in rest]
    seen: set[str] = set()
    for column in out:
        if column.name.lower() in seen:
            problems.append(
                SpecProblem(
                    f"the join would output column '{column.name}' twice",
                    ("join",),
                    hint="rename the columns of one input in a SQL step before the join",
                )
            )
        seen.add(column.name.lower())
    return StepColumns(Schema(tuple(out)), list(problems))
