"""`swa:` steps: small window array aggregation (seed 000, §5).

Per key, tuples in their total order (framework.operators.keyed_windows): the first tuple opens a
window with start s; a tuple with ts − s ≤ t joins it while it holds fewer than n tuples; the n-th
tuple closes it (`count`); a tuple with ts − s > t closes it (`timeout`) and opens the next one.
Windows still open when the input ends close as `end_of_input` (in streaming, the watermark
passing s + t closes them as `timeout`: framework.operators.swa_stream).

Why it is built this way: a per-key Python stateful function costs a JVM round trip per key and
per timer (≈3k tuples/s here). The rule is a sequential fold per key, but it only needs each
tuple's key and event time, so it runs vectorized over many keys at once: Spark shuffles the
tuples by key and sorts them (JVM), one `mapInPandas` pass assigns every tuple its window with a
few numpy operations per Arrow batch (`fold_windows`), and Spark aggregates the windows.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from framework.operators import StepContext, operator
from framework.operators.keyed_windows import (
    CLOSED,
    COUNT,
    END_OF_INPUT,
    TIMEOUT,
    UNIT,
    checked_input,
    field_of,
    quoted,
    spec_of,
    tuple_order,
    unit_rows,
)

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame

    from framework.spec.steps import SwaSpec

START = "__tributary_start"  # event time (micros) of the first tuple of the tuple's window


@operator("swa")
def build_swa(context: StepContext):  # noqa: ANN201 - a DataFrame
    spec = spec_of(context)
    return unit_rows(context.name, spec, assign_windows(checked_input(context), spec), [UNIT])


def assign_windows(rows: DataFrame, spec: SwaSpec) -> DataFrame:
    """Every tuple with its window: UNIT (the window's ordinal within its key), CLOSED (how the
    window closed) and START (its first tuple's event time in micros). `rows` carry MICROS."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    keys = [field_of(rows, c).name for c in spec.key_columns()]
    by_key = [F.col(quoted(k)) for k in keys]
    ordered = rows.repartition(*by_key).sortWithinPartitions(*by_key, *tuple_order(rows, spec))
    schema = StructType(
        [
            *rows.schema.fields,
            StructField(UNIT, LongType(), False),
            StructField(CLOSED, IntegerType(), False),
            StructField(START, LongType(), False),
        ]
    )
    fold = partial(_assign_batches, keys=keys, size=spec.size, timeout_us=round(spec.timeout * 1_000_000))
    return ordered.mapInPandas(fold, schema)


def _assign_batches(batches: Iterator[pd.DataFrame], *, keys: list[str], size: int, timeout_us: int) -> Iterator[pd.DataFrame]:
    """Arrow batches of one partition, sorted by key and order. A key's tuples may continue in the
    next batch, so the last key of each batch waits for the next one."""
    import pandas as pd

    from framework.operators.keyed_windows import MICROS

    carry: pd.DataFrame | None = None
    for batch in batches:
        frame = batch if carry is None else pd.concat([carry, batch], ignore_index=True)
        if frame.empty:
            continue
        new_key = _key_changes(frame, keys)
        last = int(np.flatnonzero(new_key)[-1])
        if last > 0:
            done = frame.iloc[:last]
            yield _with_windows(done, new_key[:last], done[MICROS].to_numpy(np.int64), size, timeout_us)
        carry = frame.iloc[last:].reset_index(drop=True)
    if carry is not None and not carry.empty:
        yield _with_windows(carry, _key_changes(carry, keys), carry[MICROS].to_numpy(np.int64), size, timeout_us)


def _key_changes(frame: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """True where a row starts a new key (rows are sorted by key)."""
    changes = np.zeros(len(frame), dtype=bool)
    changes[0] = True
    for key in keys:
        values = frame[key].to_numpy()
        changes[1:] |= values[1:] != values[:-1]
    return changes


def _with_windows(frame: pd.DataFrame, new_key: np.ndarray, micros: np.ndarray, size: int, timeout_us: int) -> pd.DataFrame:
    unit, closed, start = fold_windows(new_key, micros, size, timeout_us)
    return frame.assign(**{UNIT: unit, CLOSED: closed.astype(np.int32), START: start})


def fold_windows(new_key: np.ndarray, micros: np.ndarray, size: int, timeout_us: int) -> tuple[np.ndarray, ...]:
    """The SWA rule over rows sorted by (key, order); `new_key` marks each key's first row.

    Returns per row: its window's ordinal within the key, how the window closed, and the window's
    start (micros). Vectorized: for every row i, the window a row i would open ends at
    next(i) = min(i + n, first row of the key with ts > ts_i + t); the windows are the chain
    first row → next → next … of each key, followed for all keys at once (as many numpy steps as
    the most windows any key has in this batch)."""
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
    return unit.astype(np.int64), closed[start_row], micros[start_row]
