"""`swa:` steps: small window array aggregation (Li et al., §5.1).

Per key, tuples in their total order (framework.operators.keyed_windows): the first tuple opens a
window with start s; a tuple with ts − s ≤ t joins it while it holds fewer than n tuples; the n-th
tuple closes it (`count`); a tuple with ts − s > t closes it (`timeout`) and opens the next one.
Windows still open when the input ends close as `end_of_input` (in streaming, the watermark
passing s + t closes them as `timeout`: framework.operators.swa.stream).

Why it is built this way: a per-key Python stateful function costs a JVM round trip per key and
per timer (≈3k tuples/s here). The rule is a sequential fold per key that only needs each tuple's
event time, so Spark shuffles the tuples by key and sorts each key's tuples in a window function,
and the fold runs in that window:
- in the JVM (framework.jvm `SwaFold`, a running-frame aggregate), when the session has Tributary's
  jar: no hand-off to Python, and the window keeps the shuffle's partitioning, so the windows are
  aggregated without a second shuffle;
- else in a pandas iterator UDF that gets only each tuple's first-of-key flag and event time and
  assigns windows with a few numpy operations per Arrow batch (`fold_windows`). Spark keeps the
  rows' other columns on its side while it runs.

Every use takes the same fold (`assign_windows`): per tuple its window (UNIT), the window's start
and the tuple's position in it. How a window closed is not causal: the batch step takes it from the
aggregation (`closed_in_place`), streaming SWA from each window's tuples and the watermark, in the
same aggregation (framework.operators.swa.stream), the evaluation from each window's tuples.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any

from framework.operators.columns import field_of, quoted
from framework.operators.context import StepContext
from framework.operators.keyed_windows import (
    COUNT,
    END_OF_INPUT,
    MICROS,
    TIMEOUT,
    UNIT,
    checked_input,
    spec_of,
    tuple_order,
    unit_rows,
    used_columns,
)
from framework.operators.window_sizes import SIZE_COLUMN, TIMEOUT_COLUMN, size_column, timeout_column, with_sizes

if TYPE_CHECKING:
    import numpy as np
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.window import WindowSpec

    from framework.spec.steps import SwaSpec

START = "__tributary_start"  # event time (micros) of the first tuple of the tuple's window


def build_swa(context: StepContext) -> DataFrame:
    spec = context.spec.swa
    rows = with_sizes(used_columns(checked_input(context), spec), spec, context.sizes)
    return unit_rows(
        context.name, spec, assign_windows(rows, spec), [KEY_HASH, UNIT], closed=closed_in_place(spec), order=POSITION
    )


def check_swa(context: StepContext) -> DataFrame:
    """Raise what the step would refuse (columns missing or of the wrong type, aggregates that
    cannot run) without planning the fold: on streams the fold is planned per micro-batch
    (framework.operators.swa.stream), and planning it once more only to check costs a run ~0.3 s.
    Returns rows with the step's output columns."""
    from pyspark.sql import functions as F

    spec = spec_of(context)
    rows = used_columns(checked_input(context), spec).withColumn(KEY_HASH, F.lit(0)).withColumn(UNIT, F.lit(0))
    return unit_rows(context.name, spec, rows, [KEY_HASH, UNIT], closed=F.lit(0))


LAST = "__tributary_last"  # true on each key's last tuple
FOLD = "__tributary_fold"  # the fold's struct per tuple
POSITION = "__tributary_position"  # the tuple's 1-based position in its window
KEY_HASH = "__tributary_key_hash"  # xxhash64 of the key: the sort's numeric prefix, and the grouping's partitioning


def assign_windows(rows: DataFrame, spec: SwaSpec, last: bool = True) -> DataFrame:
    """Every tuple with UNIT, START, POSITION, LAST (true on each key's last tuple; only when
    `last`: streaming has no last tuple, and Spark then leaves out the count it needs), and
    KEY_HASH: grouped by it with the key, the windows need no second shuffle after the JVM fold."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows, window = _each_key_in_order(rows, spec)
    whole = window.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    rank, count = F.row_number().over(window), F.count(F.lit(1)).over(whole)
    jvm_fold = _jvm_fold(rows, spec, window)
    if jvm_fold is not None:
        folded = rows.withColumn(FOLD, jvm_fold)
        folded = folded.withColumn(LAST, rank == count) if last else folded
    else:
        # the pandas fold carries the last key's open window from one Arrow batch to the next
        ranked = rows.withColumn("__tributary_rank", rank).withColumn(LAST, F.col("__tributary_rank") == count)
        first = F.col("__tributary_rank") == 1
        if spec.learns:  # each tuple's own size and timeout
            folded = ranked.withColumn(FOLD, _fold_udf()(first, F.col(MICROS), F.col(SIZE_COLUMN), F.col(TIMEOUT_COLUMN)))
        else:
            folded = ranked.withColumn(FOLD, _fold_udf(int(spec.size), spec.timeout_micros)(first, F.col(MICROS)))
    return folded.select(
        *[F.col(quoted(c)) for c in rows.columns],  # with KEY_HASH
        *[F.col(f"{FOLD}.{part}").alias(name) for part, name in (("unit", UNIT), ("start", START), ("position", POSITION))],
        *([F.col(LAST)] if last else []),
    )


def _jvm_fold(rows: DataFrame, spec: SwaSpec, window: WindowSpec) -> Column | None:
    """The JVM fold over each key's tuples so far, named as the pandas fold names it (a struct of
    unit, start and position), or None when the session has no JVM functions."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from framework import jvm

    if spec.learns:
        fold = jvm.swa_fold_sized(rows.sparkSession, F.col(MICROS), F.col(SIZE_COLUMN), F.col(TIMEOUT_COLUMN))
    else:
        fold = jvm.swa_fold(rows.sparkSession, int(spec.size), spec.timeout_micros, F.col(MICROS))
    if fold is None:
        return None
    folded = fold.over(window.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return folded.cast("struct<unit: bigint, start: bigint, position: bigint>")


def _each_key_in_order(rows: DataFrame, spec: SwaSpec) -> tuple[DataFrame, WindowSpec]:
    """`rows` with KEY_HASH, spread over the tasks by it, and each key's tuples in (event time,
    tiebreak) order.

    The key's xxhash64 leads so Spark's sort compares numbers, not the key's strings (which share
    long prefixes such as '/page/'). It is a column, not an expression in the window: Spark gives
    each window function its own copy of an expression, and two copies are two shuffles. The
    shuffle hashes that one number, not the key's columns again (which Spark's own partitioning
    by the window's columns would: 3 % of a streaming micro-batch's job); every key still lands
    in one task, which is all the window and the grouping by window after it need."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_key = key_columns(rows, spec)
    hashed = rows.withColumn(KEY_HASH, F.xxhash64(*by_key)).repartition(F.col(KEY_HASH))
    return hashed, Window.partitionBy(F.col(KEY_HASH), *by_key).orderBy(*tuple_order(rows, spec))


def key_columns(rows: DataFrame, spec: SwaSpec) -> list[Column]:
    from pyspark.sql import functions as F

    return [F.col(quoted(field_of(rows, c).name)) for c in spec.key_columns()]


def closed_in_place(spec: SwaSpec) -> Column:  # an aggregate
    """How a window closed, from its tuples: its n-th tuple (count); else the key's last window
    ends with the input (end_of_input); else a later tuple came too late for it (timeout)."""
    from pyspark.sql import functions as F

    size = F.max(F.col(SIZE_COLUMN)) if spec.learns else F.lit(int(spec.size))  # a key's tuples share theirs
    return F.when(F.count(F.lit(1)) >= size, F.lit(COUNT)).when(F.max(F.col(LAST)), F.lit(END_OF_INPUT)).otherwise(F.lit(TIMEOUT))


def _fold_udf(size: int | None = None, timeout_us: int | None = None) -> Any:  # a pandas UDF
    """The pandas fold: of (first-of-key, micros) with a fixed size and timeout, or of (first-of-key,
    micros, size, timeout) when each tuple carries its own (`size: auto`)."""
    import numpy as np
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    def fold(batches: Any) -> Any:  # typed for pyspark below, with types it can read at run time
        carry = np.empty((3, 0), dtype=np.int64)  # the open window's event times, sizes, timeouts
        offset = 0  # that key's unit number to continue from
        for first, micros, *sized in batches:
            first = first.to_numpy(dtype=bool)
            new = np.stack([micros.to_numpy(dtype=np.int64), *_sizes(sized, len(first))])
            times, sizes, timeouts = np.concatenate([carry, new], axis=1)
            new_key = np.concatenate([np.zeros(carry.shape[1], dtype=bool), first])
            continuing = not new_key[0]  # the batch (after the carry) starts inside the last key
            new_key[0] = True
            unit, closed, start, position = fold_windows(new_key, times, sizes, timeouts)
            if continuing:
                following = np.flatnonzero(new_key[1:])
                unit[: following[0] + 1 if following.size else len(unit)] += offset
            last_key = np.flatnonzero(new_key)[-1]
            last_unit = unit[-1]
            if closed[-1] == COUNT:
                carry, offset = np.empty((3, 0), dtype=np.int64), last_unit + 1
            else:
                in_window = np.flatnonzero(unit[last_key:] == last_unit) + last_key
                carry, offset = np.stack([times, sizes, timeouts])[:, in_window], last_unit
            kept = slice(len(times) - len(first), None)
            yield pd.DataFrame({"unit": unit[kept], "start": start[kept], "position": position[kept]})

    def _sizes(sized: list[pd.Series], rows: int) -> list[np.ndarray]:
        if sized:
            return [column.to_numpy(dtype=np.int64) for column in sized]
        return [np.full(rows, size, dtype=np.int64), np.full(rows, timeout_us, dtype=np.int64)]

    columns = 4 if size is None else 2
    fold.__annotations__ = {
        "batches": typing.Iterator[tuple[(pd.Series,) * columns]],  # type: ignore[misc]
        "return": typing.Iterator[pd.DataFrame],
    }
    return pandas_udf(fold, "unit long, start long, position long")


def fold_windows(new_key: np.ndarray, micros: np.ndarray, size: Any, timeout_us: Any) -> tuple[np.ndarray, ...]:
    """The SWA rule over rows sorted by (key, order); `new_key` marks each key's first row. `size`
    and `timeout_us` are numbers, or arrays with each row's own (equal within a key).

    Returns per row: its window's ordinal within the key, how the window closed, the window's start
    (micros), and the row's 1-based position in the window. Vectorized: for every row i, the window
    a row i would open ends at next(i) = min(i + n, first row of the key with ts > ts_i + t); the
    windows are the chain
    first row → next → next … of each key, followed for all keys at once (as many numpy steps as
    the most windows any key has in this batch)."""
    import numpy as np

    rows = len(micros)
    index = np.arange(rows)
    group = np.cumsum(new_key) - 1
    firsts = np.flatnonzero(new_key)
    end = np.append(firsts[1:], rows)[group]  # one past the key's last row

    # first row after i (same key) beyond the timeout: search (group, ts) pairs encoded as one int
    distinct = np.unique(micros)
    width = len(distinct) + 1
    encoded = group * width + np.searchsorted(distinct, micros)
    last_in_time = np.searchsorted(distinct, micros + timeout_us, side="right") - 1
    by_time = np.searchsorted(encoded, group * width + last_in_time, side="right")
    by_count = index + size
    following = np.minimum(by_time, by_count)
    closed = np.where(by_count <= by_time, COUNT, np.where(by_time < end, TIMEOUT, END_OF_INPUT))

    opens = np.zeros(rows, dtype=bool)
    current = firsts
    while current.size:
        opens[current] = True
        after = following[current]
        current = after[after < end[current]]
    number = np.cumsum(opens)  # 1-based window number in this batch
    start_row = np.flatnonzero(opens)[number - 1]
    unit = number - number[firsts][group]
    return unit.astype(np.int64), closed[start_row], micros[start_row], (index - start_row + 1).astype(np.int64)


def units(rows: DataFrame, spec: SwaSpec) -> tuple[DataFrame, Column, Column]:
    """Each tuple with its window (UNIT), and the instants (micros) the window opened and closed:
    it closes at its n-th tuple, else when its timeout runs out (framework.integration)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    assigned = assign_windows(rows, spec)
    each_window = Window.partitionBy(KEY_HASH, *key_columns(assigned, spec), UNIT)
    nth_tuple = F.max(F.when(F.col(POSITION) == size_column(spec), F.col(MICROS))).over(each_window)
    closed = F.coalesce(nth_tuple, F.col(START) + timeout_column(spec))
    return assigned, F.col(START), closed
