"""The reference the SWA folds are tested against: the same rule over whole partitions.

Spark sorts each partition by key and order and the Arrow batches go to Python with every column
(mapInArrow). A key's tuples may continue in the next batch, so the last key of each batch waits
for the next one; each key is then folded whole (`fold_windows`, itself tested against the rule
written tuple by tuple), so nothing is carried from batch to batch as the UDFs under test do.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from framework.operators.columns import field_of, quoted
from framework.operators.keyed_windows import CLOSED, UNIT, tuple_order
from framework.operators.swa.batch import POSITION, START, fold_windows

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from framework.spec.steps import SwaSpec


def assign_windows(rows: DataFrame, spec: SwaSpec) -> DataFrame:
    """Every tuple with its window: UNIT (the window's ordinal within its key), CLOSED (how the
    window closed), START (its first tuple's event time in micros) and POSITION (the tuple's place
    in it). `rows` carry MICROS.

    The sort leads with a 64-bit hash of the key so Spark's prefix sort compares numbers, not
    the key's strings (which share long prefixes such as '/page/'); rows of one key stay
    together because the key follows the hash. Arrow batches go to Python and back as they are
    (mapInArrow): only the key and time columns are looked at, the others are never converted."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    keys = [field_of(rows, c).name for c in spec.key_columns()]
    by_key = [F.col(quoted(k)) for k in keys]
    ordered = rows.repartition(*by_key).sortWithinPartitions(F.xxhash64(*by_key), *by_key, *tuple_order(rows, spec))
    schema = StructType(
        [
            *rows.schema.fields,
            StructField(UNIT, LongType(), False),
            StructField(CLOSED, IntegerType(), False),
            StructField(START, LongType(), False),
            StructField(POSITION, LongType(), False),
        ]
    )
    fold = partial(_assign_batches, keys=keys, size=spec.size, timeout_us=round(spec.timeout * 1_000_000))
    return ordered.mapInArrow(fold, schema)


def _assign_batches(
    batches: Iterator[pa.RecordBatch], *, keys: list[str], size: int, timeout_us: int
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of one partition, sorted by key and order. A key's tuples may continue in the
    next batch, so the last key of each batch waits for the next one."""
    import pyarrow as pa

    carry: pa.RecordBatch | None = None
    for batch in batches:
        frame = batch if carry is None else pa.concat_batches([carry, batch])
        if frame.num_rows == 0:
            continue
        new_key = _key_changes(frame, keys)
        last = int(np.flatnonzero(new_key)[-1])
        if last > 0:
            yield _with_windows(frame.slice(0, last), new_key[:last], size, timeout_us)
        carry = frame.slice(last)
    if carry is not None and carry.num_rows:
        yield _with_windows(carry, _key_changes(carry, keys), size, timeout_us)


def _key_changes(frame: pa.RecordBatch, keys: list[str]) -> np.ndarray:
    """True where a row starts a new key (rows are sorted by key)."""
    import pyarrow.compute as pc

    rows = frame.num_rows
    changes = np.zeros(rows, dtype=bool)
    changes[0] = True
    for key in keys:
        values = frame.column(key)
        differs = pc.not_equal(values.slice(1), values.slice(0, rows - 1))
        changes[1:] |= differs.to_numpy(zero_copy_only=False)
    return changes


def _with_windows(frame: pa.RecordBatch, new_key: np.ndarray, size: int, timeout_us: int) -> pa.RecordBatch:
    import pyarrow as pa

    from framework.operators.keyed_windows import MICROS

    micros = frame.column(MICROS).to_numpy(zero_copy_only=False).astype(np.int64)
    unit, closed, start, position = fold_windows(new_key, micros, size, timeout_us)
    columns = [*frame.columns, pa.array(unit), pa.array(closed.astype(np.int32)), pa.array(start), pa.array(position)]
    return pa.RecordBatch.from_arrays(columns, names=[*frame.schema.names, UNIT, CLOSED, START, POSITION])
