"""A micro-batch's own numbers (its watermark, the previous one) as columns, not literals.

Why: Spark writes a number literal into the Java source it generates for a stage and caches the
compiled classes by that source. A literal that changes with every micro-batch, as a watermark
does, makes every batch's source new: Janino compiles the stage's classes again (four per batch
of a streaming SWA step, one per batch of Spark's own session windows) and the JVM's JIT starts
over on them, interpreted at first, batch after batch. A number read from a one-row table is
data: the generated source, and the compiled classes, stay the same from one batch to the next.
On the benchmark's stream a new watermark per batch cost an SWA run 13 % more time than the same
batches seen before (benchmarks/bench_swa.py, docs/swa.md).

The table is broadcast (a local one-row relation: no job builds it), so joining it costs a
stage one more column per row and no shuffle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.operators.columns import quoted

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: this batch's watermark and the previous batch's (micros), the values the operators compare with
MARK, OLD_MARK = "__tributary_mark", "__tributary_old_mark"


def with_batch_values(rows: DataFrame, values: dict[str, int]) -> DataFrame:
    """`rows` with one long column per entry of `values`, the same on every row."""
    from pyspark.sql import functions as F

    schema = ", ".join(f"{quoted(name)} long" for name in values)
    one_row = rows.sparkSession.createDataFrame([tuple(values.values())], schema)
    return rows.crossJoin(F.broadcast(one_row))
