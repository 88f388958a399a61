"""`join:` steps checked against brute-force oracles that follow each definition literally."""

from __future__ import annotations

import datetime
import random
from collections import Counter, deque
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.errors import BadInput
from framework.operators import StepContext, build_step
from framework.spec.steps import JoinStep

pytestmark = pytest.mark.spark

BASE = datetime.datetime(2024, 1, 1, 12, 0, 0)
A_SCHEMA = "k INT, ts TIMESTAMP, tb INT, v INT"
B_SCHEMA = "k INT, ts TIMESTAMP, tb INT, v STRING"
HYPOTHESIS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def join(spark, inputs: dict, **spec):  # a DataFrame
    spec.setdefault("left", "phones")
    spec.setdefault("right", "emails")
    step = JoinStep.model_validate({"join": spec})
    return build_step("join", StepContext(spark=spark, name="matched", spec=step, inputs=inputs))


def _sql_literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, datetime.datetime):  # naive = local time, as PySpark reads it back
        return f"timestamp_micros({round(value.timestamp() * 1_000_000)})"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return repr(value)


def frame(spark, rows: list[tuple], schema: str):  # a DataFrame
    """A DataFrame over a VALUES list: a local relation, so no Python worker runs (much faster
    than createDataFrame, which matters for the property tests)."""
    columns = [part.split() for part in schema.split(", ")]
    names = ", ".join(name for name, _ in columns)
    typed = ", ".join(f"CAST({name} AS {type_}) AS {name}" for name, type_ in columns)
    values = ", ".join("(" + ", ".join(_sql_literal(x) for x in row) + ")" for row in rows)
    if not rows:
        values = "(" + ", ".join("NULL" for _ in columns) + ")"
    return spark.sql(f"SELECT {typed} FROM VALUES {values} AS t({names})" + ("" if rows else " WHERE false"))


def frames(spark, a_rows: list[tuple], b_rows: list[tuple]) -> dict:
    return {"phones": frame(spark, a_rows, A_SCHEMA), "emails": frame(spark, b_rows, B_SCHEMA)}


@contextmanager
def shuffle_partitions(spark, n: int):
    old = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(n))
    try:
        yield
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", old)


# ---------------------------------------------------------------------------------------------
# Oracles. Rows are tuples (k, ts, tb, v); keys match when equal and not null.

NULL_B = (None, None, None)


def _pair(a: tuple, b: tuple | None) -> tuple:
    return (a[0], *a[1:], *(b[1:] if b is not None else NULL_B))


def _keys_match(a: tuple, b: tuple) -> bool:
    return a[0] is not None and a[0] == b[0]


def oracle_time(a_rows, b_rows, before: float, after: float, how: str) -> Counter:
    out = Counter()
    lo, hi = datetime.timedelta(seconds=before), datetime.timedelta(seconds=after)
    for a in a_rows:
        matched = False
        for b in b_rows:
            if _keys_match(a, b) and a[1] is not None and b[1] is not None and a[1] - lo <= b[1] <= a[1] + hi:
                out[_pair(a, b)] += 1
                matched = True
        if how == "left" and not matched:
            out[_pair(a, None)] += 1
    return out


def _null_first(x) -> tuple:
    return (0,) if x is None else (1, x)


def arrival_order(a_rows, b_rows, tiebreak: bool) -> list[tuple[int, int]]:
    """(side, index) of every row with an event time, in the documented arrival order:
    event time, tiebreak column, A before B, then the row's remaining columns (nulls first)."""

    def sort_key(item):
        side, i = item
        row = (a_rows if side == 0 else b_rows)[i]
        k, ts, tb, v = row
        rest = (k, v) if tiebreak else (k, tb, v)
        return (ts, *((_null_first(tb),) if tiebreak else ()), side, tuple(_null_first(x) for x in rest))

    items = [(0, i) for i, r in enumerate(a_rows) if r[1] is not None]
    items += [(1, i) for i, r in enumerate(b_rows) if r[1] is not None]
    return sorted(items, key=sort_key)


def oracle_count(a_rows, b_rows, w_a: int, w_b: int, how: str, tiebreak: bool) -> Counter:
    """Algorithm 1: on arrival purge the other window to its last W rows, join, insert into own."""
    window_a: deque[int] = deque()
    window_b: deque[int] = deque()
    out = Counter()
    matched_a = set()
    for side, i in arrival_order(a_rows, b_rows, tiebreak):
        if side == 0:
            while len(window_b) > w_b:
                window_b.popleft()
            for j in window_b:
                if _keys_match(a_rows[i], b_rows[j]):
                    out[_pair(a_rows[i], b_rows[j])] += 1
                    matched_a.add(i)
            window_a.append(i)
        else:
            while len(window_a) > w_a:
                window_a.popleft()
            for j in window_a:
                if _keys_match(a_rows[j], b_rows[i]):
                    out[_pair(a_rows[j], b_rows[i])] += 1
                    matched_a.add(j)
            window_b.append(i)
    if how == "left":
        for i, a in enumerate(a_rows):
            if i not in matched_a:
                out[_pair(a, None)] += 1
    return out


def result(df) -> Counter:
    return Counter(tuple(row) for row in df.collect())


# ---------------------------------------------------------------------------------------------
# Property tests


def rows(value: st.SearchStrategy) -> st.SearchStrategy:
    key = st.sampled_from([1, 1, 2, 2, 3, None])
    # half-second steps, so the window edges (0.5 s multiples) are hit exactly; a few null times
    ts = st.sampled_from([None] + [BASE + datetime.timedelta(milliseconds=500 * h) for h in range(13)] * 3)
    tb = st.sampled_from([0, 1, 1, None])
    return st.lists(st.tuples(key, ts, tb, value), max_size=9)


a_lists = rows(st.sampled_from([0, 1, None]))
b_lists = rows(st.sampled_from(["x", "y", None]))
durations = st.sampled_from([0, 0.5, 1, 2, 3.5])


@HYPOTHESIS
@given(a=a_lists, b=b_lists, before=durations, after=durations)
def test_time_window_matches_oracle(spark, a, b, before, after):
    from pyspark.sql import functions as F

    inputs = frames(spark, a, b)
    both = [
        join(spark, inputs, on=["k"], type=how, within={"before": before, "after": after}).withColumn("how", F.lit(how))
        for how in ("inner", "left")
    ]
    got = result(both[0].unionByName(both[1]))  # one Spark job for both join types
    for how in ("inner", "left"):
        assert Counter({row[:-1]: n for row, n in got.items() if row[-1] == how}) == oracle_time(a, b, before, after, how), how


@HYPOTHESIS
@given(
    a=a_lists,
    b=b_lists,
    w_a=st.integers(1, 4),
    w_b=st.integers(1, 4),
    tiebreak=st.booleans(),
    how=st.sampled_from(["inner", "left"]),
    buckets=st.sampled_from([1, 2, 3, 7]),
)
def test_count_window_matches_oracle(spark, a, b, w_a, w_b, tiebreak, how, buckets):
    with shuffle_partitions(spark, buckets):  # the number of event-time buckets ranks are counted in
        df = join(
            spark, frames(spark, a, b), on=["k"], type=how, last={"left": w_a, "right": w_b}, tiebreak=["tb"] if tiebreak else []
        )
        assert result(df) == oracle_count(a, b, w_a, w_b, how, tiebreak)


def test_count_window_arrival_order_at_equal_event_times(spark):
    """The documented order: event time, tiebreak columns, A before B, then the other columns."""
    t0, t1 = BASE, BASE + datetime.timedelta(seconds=1)

    def run(a, b, w_a, w_b, tiebreak):
        df = join(spark, frames(spark, a, b), on=["k"], last={"left": w_a, "right": w_b}, tiebreak=tiebreak)
        got = result(df)
        assert got == oracle_count(a, b, w_a, w_b, "inner", tiebreak=bool(tiebreak))
        return sorted(got)

    # tiebreak column first: (k=2, tb=0) then (k=1, tb=1) arrive, so k=1 is the last A row b sees
    a = [(1, t0, 1, 0), (2, t0, 0, 0)]
    b = [(1, t1, 0, "x")]
    assert run(a, b, 1, 1, ["tb"]) == [(1, t0, 1, 0, t1, 0, "x")]
    # without it, the remaining columns (k, tb, v) order them: k=2 arrives last, k=1 is out
    assert run(a, b, 1, 1, []) == []
    # remaining columns ascending: v=1 arrives after v=0 and is the only A row in a window of 1
    assert run([(1, t0, 0, 1), (1, t0, 0, 0)], b, 1, 1, []) == [(1, t0, 0, 1, t1, 0, "x")]
    # A before B at equal times: a arrives before y, so x is still the last B row it sees
    a = [(1, t0, 0, 0)]
    b = [(1, t0 - datetime.timedelta(seconds=1), 0, "x"), (2, t0, 0, "y")]
    assert run(a, b, 1, 1, []) == [(1, t0, 0, 0, t0 - datetime.timedelta(seconds=1), 0, "x")]


def test_count_window_larger_input_many_buckets(spark):
    rng = random.Random(7)

    def make(values):
        return [
            (
                rng.choice([1, 2, 3, 4, None]),
                BASE + datetime.timedelta(seconds=rng.randrange(300)),
                rng.randrange(3),
                rng.choice(values),
            )
            for _ in range(1500)
        ]

    a, b = make([0, 1, 2]), make(["x", "y"])
    with shuffle_partitions(spark, 9):
        df = join(spark, frames(spark, a, b), on=["k"], type="left", last={"left": 3, "right": 5}, tiebreak=["tb"])
        assert result(df) == oracle_count(a, b, 3, 5, "left", tiebreak=True)


def test_count_window_timestamp_ntz_across_dst_gap(spark):
    """Wall-clock order must hold even where the session time zone skips an hour."""
    wall = ["2024-03-10 01:59:00", "2024-03-10 02:30:00", "2024-03-10 03:10:00", "2024-03-10 03:40:00"]
    a = [(1, datetime.datetime.fromisoformat(t), 0, i) for i, t in enumerate(wall)]
    b = [(1, datetime.datetime.fromisoformat(t) + datetime.timedelta(seconds=1), 0, str(i)) for i, t in enumerate(wall)]
    old = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        inputs = {
            "phones": spark.createDataFrame(a, "k INT, ts TIMESTAMP_NTZ, tb INT, v INT"),
            "emails": spark.createDataFrame(b, "k INT, ts TIMESTAMP_NTZ, tb INT, v STRING"),
        }
        with shuffle_partitions(spark, 4):
            df = join(spark, inputs, on=["k"], last={"left": 1, "right": 1})
            assert result(df) == oracle_count(a, b, 1, 1, "inner", tiebreak=False)
    finally:
        spark.conf.set("spark.sql.session.timeZone", old)


# ---------------------------------------------------------------------------------------------
# Streaming (time window): the same operator, as a stream-stream join with watermarks


def test_time_window_runs_as_stream_stream_join(spark, tmp_path):
    """Rows over several time buckets of the stream (8 windows wide) and two keys: the pairs are
    the oracle's, each once, whichever bucket boundary falls between a pair's rows."""
    a = [(k, BASE + datetime.timedelta(seconds=s), 0, s) for k in (1, 2) for s in range(0, 200, 3)]
    b = [(k, BASE + datetime.timedelta(seconds=s), 0, str(s)) for k in (1, 2) for s in range(1, 200, 5)]
    frame(spark, a, A_SCHEMA).write.parquet(str(tmp_path / "a"))
    frame(spark, b, B_SCHEMA).write.parquet(str(tmp_path / "b"))
    streams = {
        "phones": spark.readStream.schema(A_SCHEMA).parquet(str(tmp_path / "a")).withWatermark("ts", "1 minute"),
        "emails": spark.readStream.schema(B_SCHEMA).parquet(str(tmp_path / "b")).withWatermark("ts", "1 minute"),
    }
    for how in ("inner", "left"):  # Spark refuses a left outer stream join without a usable range
        df = join(spark, streams, on=["k"], type=how, within={"before": "1s", "after": "2s"})
        assert df.isStreaming
        table = f"join_stream_{how}"
        query = df.writeStream.format("memory").queryName(table).trigger(availableNow=True).start()
        query.awaitTermination(120)
        assert query.exception() is None
        got = result(spark.table(table))
        inner = oracle_time(a, b, 1, 2, "inner")
        if how == "inner":
            assert got == inner and len(inner) > 40
        else:
            assert inner - got == Counter()  # unmatched rows wait for the watermark


def test_a_time_join_on_few_key_values_compares_rows_of_one_time_bucket_only(spark):
    """The equi-join keys include the time bucket: a key with 3 values over a long span must not
    make every A row meet every B row of its key. Rows hours apart on one key give no pair, and
    Spark is told the bucket is a join key (not a filter after the key join)."""
    a = [(1, BASE + datetime.timedelta(hours=h), 0, h) for h in range(0, 48, 7)]
    b = [(1, BASE + datetime.timedelta(hours=h, minutes=-30), 0, str(h)) for h in range(0, 48, 7)]
    df = join(spark, frames(spark, a, b), on=["k"], within={"before": "1h", "after": 0})
    assert result(df) == oracle_time(a, b, 3600, 0, "inner") and len(result(df)) == 7
    plan = df._jdf.queryExecution().executedPlan().toString()  # the plan's shape is the point
    join_line = next(line for line in plan.splitlines() if "Join [" in line)
    assert "__a_bucket" in join_line and "__b_bucket" in join_line


def test_count_window_refuses_streaming_input(spark, tmp_path):
    frame(spark, [], A_SCHEMA).write.parquet(str(tmp_path / "a"))
    streams = {
        "phones": spark.readStream.schema(A_SCHEMA).parquet(str(tmp_path / "a")),
        "emails": frame(spark, [], B_SCHEMA),
    }
    with pytest.raises(BadInput, match=r"step 'matched'.*count window.*'phones' is streaming"):
        join(spark, streams, on=["k"], last={"left": 2, "right": 2})


# ---------------------------------------------------------------------------------------------
# Output columns and errors


def test_output_columns_keys_once_and_only_colliding_names_prefixed(spark):
    phones = frame(spark, [(1, "eu", BASE, "555")], "user INT, region STRING, ts TIMESTAMP, phone STRING")
    emails = frame(spark, [("eu", 1, BASE, "a@b")], "region STRING, User INT, TS TIMESTAMP, email STRING")
    inputs = {"phones": phones, "emails": emails}
    for window in ({"within": {"before": 1, "after": 1}}, {"last": {"left": 1, "right": 1}}):
        df = join(spark, inputs, on=["user", "region"], **window)
        assert df.columns == ["user", "region", "phones_ts", "phone", "emails_TS", "email"]
        assert [tuple(r) for r in df.collect()] == [(1, "eu", BASE, "555", BASE, "a@b")]


def test_left_join_keeps_unmatched_rows_with_nulls(spark):
    inputs = frames(spark, [(1, BASE, 0, 7), (2, BASE, 0, 8)], [(1, BASE, 0, "x")])
    df = join(spark, inputs, on=["k"], type="left", within={"before": 0, "after": 0})
    assert sorted(tuple(r) for r in df.collect()) == [(1, BASE, 0, 7, BASE, 0, "x"), (2, BASE, 0, 8, None, None, None)]


def test_missing_key_column_names_step_input_and_column(spark):
    inputs = frames(spark, [], [])
    inputs["emails"] = inputs["emails"].drop("k")
    with pytest.raises(BadInput) as error:
        join(spark, inputs, on=["k"], within={"before": 1})
    message = str(error.value)
    assert "step 'matched'" in message and "key column 'k'" in message and "input 'emails'" in message
    assert "input 'phones'" not in message


def test_missing_event_time_column(spark):
    inputs = frames(spark, [], [])
    with pytest.raises(BadInput, match=r"step 'matched': event_time column 'when' is not in input 'phones'"):
        join(spark, inputs, on=["k"], event_time="when", last={"left": 1, "right": 1})


def test_event_time_must_be_a_timestamp(spark):
    inputs = frames(spark, [], [])
    inputs["phones"] = inputs["phones"].withColumn("ts", inputs["phones"]["ts"].cast("string"))
    with pytest.raises(BadInput, match=r"step 'matched': event_time column 'ts' of input 'phones' is string, not a timestamp"):
        join(spark, inputs, on=["k"], within={"after": 1})


def test_missing_tiebreak_column(spark):
    inputs = frames(spark, [], [])
    with pytest.raises(BadInput, match=r"tiebreak column 'seq' is not in input 'phones'"):
        join(spark, inputs, on=["k"], tiebreak=["seq"], last={"left": 1, "right": 1})


def test_unorderable_columns_and_one_frame_on_both_sides(spark):
    a = spark.sql(
        "SELECT 1 AS k, TIMESTAMP'2024-01-01 00:00:00' AS ts, map('x', 1) AS m UNION ALL SELECT 1, TIMESTAMP'2024-01-01 00:00:00', map('y', 2)"
    )
    b = spark.sql("SELECT 1 AS k, TIMESTAMP'2024-01-01 00:00:01' AS ts, 'z' AS w")
    df = join(spark, {"phones": a, "emails": b}, on=["k"], last={"left": 1, "right": 1})
    assert [r["m"] for r in df.collect()] == [{"y": 2}]  # maps order by their JSON text: y after x
    same = spark.sql("SELECT 1 AS k, TIMESTAMP'2024-01-01 00:00:00' AS ts")
    for window in ({"within": {"before": 0}}, {"last": {"left": 1, "right": 1}}):
        assert join(spark, {"phones": same, "emails": same}, on=["k"], **window).count() == 1
