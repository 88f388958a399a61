"""A micro-batch's own numbers (its watermark, the previous one) as columns, not literals.

Why: Spark writes a number literal into the Java source it generates for a stage and caches the
compiled classes by that source. A literal that changes with every micro-batch, as a watermark
does, makes every batch's source new: Janino compiles the stage's classes again (four per batch
of a streaming SWA step, one per batch of Spark's own session windows) and the JVM's JIT starts
over on them, interpreted at first, batch after batch. A number read from a one-row table is
data: the generated source, and the compiled classes, stay the same from one batch to the next.
On the benchmark's stream a new watermark per batch cost an SWA run 13 % more time than the same
batches seen before (benchmarks/bench_swa.py, docs/swa.md).

The table is broadcast, so joining it costs a stage one more column per row and no shuffle, but
each query that reads it runs one small job to broadcast it (a one-row table from the driver is
an RDD to Spark; a VALUES table is broadcast by a job too). That is why only the SWA and group
steps use it: one query a micro-batch does the bulk of their work. Tumbling windows and
count-window joins run a dozen or more small queries a micro-batch, each with its own values
(watermarks, the time-bucket bounds and offsets of framework.operators.ordering, the batch id).
Their values as columns (2026-12-06, tried and not kept) compiled nothing from the third batch on,
but the broadcasts' jobs made a micro-batch of the test stream slower: tumbling 1.6 s -> 2.4 s,
count join 3.0 s -> 4.0 s. The same streams re-run over the same files (the code cached, no
broadcast) took 1.1 s and 2.1 s: what compiling and the JIT's warm-up cost them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.operators.columns import quoted

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: this batch's watermark and the previous batch's (micros), the values the operators compare with
MARK, OLD_MARK = "__tributary_mark", "__tributary_old_mark"


def with_batch_values(rows: DataFrame, values: dict[str, int]) -> DataFrame:
    """`rows` with one long column per entry of `values`, the same on every row."""
    from pyspark.sql import functions as F

    schema = ", ".join(f"{quoted(name)} long" for name in values)
    one_row = rows.sparkSession.createDataFrame([tuple(values.values())], schema)
    return rows.crossJoin(F.broadcast(one_row))


def older_than_old_mark(rows: DataFrame, old_mark: int | None, micros: str) -> tuple[DataFrame, Column]:
    """`rows`, with the previous batch's watermark as the column OLD_MARK when there is one, and
    whether a row's event time (`micros`) is before it: a row that can take no place any more."""
    from pyspark.sql import functions as F

    if old_mark is None:
        return rows, F.lit(False)
    return with_batch_values(rows, {OLD_MARK: old_mark}), F.col(micros) < F.col(OLD_MARK)
