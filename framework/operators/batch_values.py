"""A micro-batch's own values (its watermark, the previous one, bucket bounds) as data, not code.

Why: Spark writes a number literal into the Java source it generates for a stage and caches the
compiled classes by that source. A literal that changes with every micro-batch, as a watermark
does, makes every batch's source new: Janino compiles the stage's classes again (four per batch
of a streaming SWA step, one per batch of Spark's own session windows) and the JVM's JIT starts
over on them, interpreted at first, batch after batch. Compared as data (below), the generated
source, and the compiled classes, stay the same from one batch to the next. On the benchmark's
stream a new watermark per batch cost an SWA run 13 % more time than the same batches seen
before (benchmarks/bench_swa.py, docs/swa.md).

Only a number Spark writes into the source is a problem: it keeps any other literal (a string,
an array, a struct) out of the source, as a reference to an object it hands the compiled class.
So the value is compared as a one-field struct, `struct(x) < struct(value)`: the optimizer folds
`struct(value)` into one struct literal, held by reference, and cannot fold the comparison
(one side is a column), so the same classes serve every value. Over 200k rows, four values
compiled 4 classes for the first and none for the others, where plain literals compiled 2 for each
(and the struct costs no job: a value in a broadcast one-row table, as before, cost each query a
small job to broadcast it, two a micro-batch of SWA).

Every stateful step on streams compares this way: SWA and group steps with their watermarks,
tumbling windows and count-window joins with theirs, with the window a batch fills, and with the
bounds of the time buckets they number rows in (framework.operators.ordering; the buckets'
offsets are a map literal, data already). A count-window join's batch id is a string literal.
With a broadcast one-row table instead, which each query reads with a job of its own, those two
steps got slower (a dozen small queries a micro-batch): tumbling 1.6 s -> 2.4 s a micro-batch,
the count-window join 3.0 s -> 4.0 s, where the same streams over the same files (the code
cached) took 1.1 s and 2.1 s.

The struct costs each row a little (a CASE tree of 7 bounds over 5M rows: 0.39 s against 0.22 s
with number literals), which batch runs of those steps pay too.

A null stays null: `x < value` with a null x is null, as a plain comparison is (a struct holding
a null would compare as smaller than any value).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column


def before(value: Column, than: Any) -> Column:
    """`value < than`, with `than` (epoch micros, a timestamp) as data: the same generated code for
    any `than`."""
    from pyspark.sql import functions as F

    return F.when(value.isNotNull(), F.struct(value.alias("v")) < _as_data(than))


def not_before(value: Column, than: Any) -> Column:
    """`value >= than`, with `than` as data (`before`)."""
    from pyspark.sql import functions as F

    return F.when(value.isNotNull(), F.struct(value.alias("v")) >= _as_data(than))


def before_mark(value: Column, mark: Any) -> Column:
    """Whether `value` (an event time) is before a watermark `mark`, as data (`before`); never
    while there is no watermark yet (`mark` None). Before the previous batch's mark: a row that
    can take no place any more; before this batch's: a row that is final."""
    from pyspark.sql import functions as F

    return F.lit(False) if mark is None else before(value, mark)


def _as_data(value: Any) -> Column:
    """A one-field struct literal (Spark compares structs field by field, coercing as it would
    the fields alone: a timestamp with a TIMESTAMP_NTZ or DATE column, micros as a long). A
    Column is a literal of the caller's own (one cast to the compared column's type: a string is
    not cast inside a struct)."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    if isinstance(value, Column):
        return F.struct(value.alias("v"))
    literal = F.lit(value)
    return F.struct((literal.cast("long") if isinstance(value, int) else literal).alias("v"))
