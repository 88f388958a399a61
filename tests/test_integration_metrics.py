"""Integration quality metrics (framework.integration.metrics) on hand-built cases and against a pure-Python oracle."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from framework.integration.metrics import IntegrationMetrics, integration_metrics, metrics_table

pytestmark = pytest.mark.spark

T0 = datetime(2024, 1, 1, tzinfo=UTC)
ROWS = "key string, ordinal int, instance int, is_head boolean, ts timestamp, opened timestamp, closed timestamp"
COLUMNS = dict(
    unit=["key", "ordinal"], instance="instance", primary="is_head", event_time="ts", opened_at="opened", closed_at="closed"
)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def unit_rows(units: dict[tuple[str | None, int], tuple[float, float, list[tuple[int, bool, float]]]]) -> list[tuple]:
    """{(key, ordinal): (opened, closed, [(instance, is_head, event), ...])} -> one row per tuple."""
    return [
        (key, ordinal, instance, head, at(event), at(opened), at(closed))
        for (key, ordinal), (opened, closed, tuples) in units.items()
        for instance, head, event in tuples
    ]


def measure(spark, rows: list[tuple], lost: list[int] | None = None, **kwargs) -> IntegrationMetrics:
    frame = spark.createDataFrame(rows, ROWS)
    lost_frame = None if lost is None else spark.createDataFrame([(i,) for i in lost], "instance int")
    return integration_metrics(frame, **COLUMNS, lost=lost_frame, **kwargs)


def test_every_definition_on_a_small_integration(spark):
    # I1 split over (a,1)+(a,2); I2 and I3 merged in (b,1); I3's other tuple alone in (c,1) (a 1-1 tie);
    # I4 has one quarantined tuple; I5 was only quarantined; I6 complete, in a unit with a null key.
    rows = unit_rows(
        {
            ("a", 1): (0, 10, [(1, True, 0), (1, False, 1), (1, False, 2)]),
            ("a", 2): (12, 20, [(1, False, 12)]),
            ("b", 1): (0, 5, [(2, True, 0), (2, False, 1), (3, True, 4)]),
            ("c", 1): (5, 8, [(3, False, 5)]),
            ("d", 1): (3, 9, [(4, True, 3), (4, False, 3), (4, False, 4)]),
            (None, 1): (15, 16, [(6, True, 15), (6, False, 16)]),
        }
    )
    m = measure(spark, rows, lost=[4, 5], levels=(1.0, 0.85, 0.75, 0.5))

    assert (m.tuples, m.instances, m.units) == (13, 6, 6)
    # γ=1 and 0.85: only I6.  0.75: I1 (3/4), I4 (3/4 with one lost), I6.  0.5: + I3 (tie -> the pure unit, 1/2).
    assert m.completeness == {1.0: 1 / 6, 0.85: 1 / 6, 0.75: 3 / 6, 0.5: 4 / 6}
    assert m.partial_completeness == 5 / 6  # every unit but (b,1)
    assert m.recall == 4 / 6  # units with a head: (a,1), (b,1), (d,1), (None,1); 6 true instances
    assert m.correct_rate == 3 / 4  # (b,1) mixes I2 and I3
    # Units open [0,10) [12,20) [0,5) [5,8) [3,9) [15,16): (b,1) closes as (c,1) opens at 5, so the peak is 3.
    assert (m.windows_open_max, m.windows_open_mean) == (3, pytest.approx(33 / 20))
    # Tuples held [event, close): nine at once during [4,5); total 66 tuple-seconds over [0,20]; I6's tuple at 16 is never held.
    assert (m.tuples_held_max, m.tuples_held_mean) == (9, pytest.approx(66 / 20))


def test_ties_prefer_a_pure_unit_and_only_a_pure_main_unit_counts(spark):
    rows = unit_rows(
        {
            ("u", 1): (0, 1, [(1, True, 0), (2, True, 0)]),  # X=1 and Y=2 mixed
            ("u", 2): (0, 1, [(1, False, 0), (3, True, 0)]),  # X=1 and Z=3 mixed: X ties 1-1 between two mixed units
            ("w", 1): (0, 1, [(4, True, 0)]),  # W=4 ties 1-1 between two pure units
            ("w", 2): (0, 1, [(4, False, 0)]),
            ("v", 1): (0, 1, [(5, True, 0), (5, False, 0), (6, True, 0)]),  # V=5 has 2 of 3 here, mixed with Q=6 ...
            ("v", 2): (0, 1, [(5, False, 0)]),  # ... and 1 alone: its main unit is the mixed one, so not complete
        }
    )
    m = measure(spark, rows, levels=(1.0, 0.5))
    assert m.completeness == {1.0: 0.0, 0.5: 1 / 6}  # W only
    assert (m.partial_completeness, m.recall, m.correct_rate) == (3 / 6, 4 / 6, 1 / 4)


def test_levels_are_exact_decimals(spark):
    # 0.7 * 10 is 7.000000000000001 in floats; 7 of 10 tuples must still count as complete at γ = 0.7.
    rows = unit_rows({("k", 1): (0, 1, [(1, i == 0, 0) for i in range(7)])})
    m = measure(spark, rows, lost=[1, 1, 1], levels=(0.7, 0.71))
    assert m.completeness == {0.7: 1.0, 0.71: 0.0}


def test_state_figures_for_touching_units_with_times_in_seconds(spark):
    # [0,5) then [5,10): never two open at once (closed intervals would give 2).
    # Times given as seconds, not timestamps; column names are literal (a dot is not a struct field).
    frame = spark.createDataFrame(
        [("a", 1, 1, True, 0.0, 0.0, 5.0), ("a", 1, 1, False, 3.0, 0.0, 5.0), ("a", 2, 2, True, 5.0, 5.0, 10.0)],
        "key string, `window.no` int, instance int, is_head boolean, ts double, opened double, closed double",
    )
    m = integration_metrics(frame, **{**COLUMNS, "unit": ["key", "window.no"]})
    assert (m.windows_open_max, m.windows_open_mean) == (1, 1.0)
    assert (m.tuples_held_max, m.tuples_held_mean) == (2, pytest.approx((5 + 2 + 5) / 10))


def test_a_zero_length_span_gives_zero_means(spark):
    m = measure(spark, unit_rows({("a", 1): (5, 5, [(1, True, 5), (1, False, 5)])}))
    assert (m.windows_open_max, m.windows_open_mean, m.tuples_held_max, m.tuples_held_mean) == (0, 0.0, 0, 0.0)
    assert (m.tuples, m.units, m.completeness[1.0]) == (2, 1, 1.0)


def test_no_integrated_tuples_gives_zeros(spark):
    m = measure(spark, [], lost=[1, 2, 2])
    assert m == IntegrationMetrics(0, 2, 0, {1.0: 0.0, 0.85: 0.0, 0.75: 0.0}, 0.0, 0.0, 0.0, 0, 0.0, 0, 0.0)


def test_levels_outside_zero_one_are_refused(spark):
    with pytest.raises(ValueError, match="level"):
        measure(spark, [], levels=(0.0,))


def test_row_and_table():
    m = IntegrationMetrics(
        174069, 8000, 8200, {1.0: 0.804815, 0.85: 0.902979, 0.75: 0.916553}, 0.94, 1.0, 1.0, 2119, 2050.5, 27000, 26000.25
    )
    row = m.as_row()
    assert list(row)[:6] == ["tuples", "instances", "units", "completeness_100", "completeness_85", "completeness_75"]
    assert row["completeness_85"] == 0.902979 and row["tuples_held_max"] == 27000
    assert all(type(value) in (int, float) for value in row.values())

    console = Console(record=True, width=200)
    console.print(metrics_table({"swa head+client+time 13/22s": m, "tumbling W=32000": m}))
    text = console.export_text()
    for expected in (
        "Completeness (γ = 1)",
        "Completeness (γ = 0.85)",
        "Completeness (γ = 0.75)",
        "80.48%",
        "90.30%",
        "91.66%",
        "Partial completeness",
        "Recall",
        "100.00%",
        "Correct rate",
        "Instances",
        "8,000",
        "Units",
        "Windows open (max / mean)",
        "2,119 / 2,050.50",
        "Tuples held (max / mean)",
        "tumbling W=32000",
    ):
        assert expected in text


# ----------------------------------------------------------------------------------------------- oracle


def oracle(rows: list[tuple], lost: list[int], levels: tuple[float, ...]) -> dict:
    """The definitions of DESIGN.md §1, spelled out naively over plain tuples."""
    members: dict[tuple, list[tuple]] = defaultdict(list)
    for row in rows:
        members[row[:2]].append(row)
    degree = Counter(row[2] for row in rows) + Counter(lost)
    pure = {u for u, ts in members.items() if len({t[2] for t in ts}) == 1}
    headed = {u for u, ts in members.items() if any(t[3] for t in ts)}

    def complete(instance: int, level: float) -> bool:
        counts = {u: sum(t[2] == instance for t in ts) for u, ts in members.items()}
        best = max(counts.values(), default=0)
        main = [u for u, n in counts.items() if n == best and n > 0]
        return any(u in pure for u in main) and best >= Fraction(str(level)) * degree[instance]

    def occupancy(intervals: list[tuple[datetime, datetime]]) -> tuple[int, float]:
        if not intervals:
            return 0, 0.0
        points = sorted({p for interval in intervals for p in interval})
        open_at = [sum(a <= p < b for a, b in intervals) for p in points]
        span = (points[-1] - points[0]).total_seconds()
        area = sum(n * (q - p).total_seconds() for n, p, q in zip(open_at, points, points[1:], strict=False))
        return max(open_at), (area / span if span else 0.0)

    n = len(degree)
    windows = {u: (ts[0][5], ts[0][6]) for u, ts in members.items()}
    return dict(
        tuples=len(rows),
        instances=n,
        units=len(members),
        completeness={level: (sum(complete(i, level) for i in degree) / n if n else 0.0) for level in levels},
        partial_completeness=len(pure) / len(members) if members else 0.0,
        recall=len(headed) / n if n else 0.0,
        correct_rate=len(headed & pure) / len(headed) if headed else 0.0,
        windows=occupancy(list(windows.values())),
        held=occupancy([(row[4], row[6]) for row in rows]),
    )


@st.composite
def integrations(draw):
    """A few units with lifetimes, tuples of a few instances spread over them, and some lost tuples."""
    n_units = draw(st.integers(1, 4))
    lifetimes = [draw(st.tuples(st.integers(0, 6), st.integers(0, 4))) for _ in range(n_units)]
    tuples = draw(
        st.lists(
            st.tuples(st.integers(0, n_units - 1), st.integers(0, 2), st.booleans(), st.integers(0, 4)), min_size=0, max_size=12
        )
    )
    rows = []
    for u, instance, head, offset in tuples:
        start, length = lifetimes[u]
        rows.append(("k" if u % 2 else None, u, instance, head, at(start + min(offset, length)), at(start), at(start + length)))
    lost = draw(st.lists(st.integers(0, 3), max_size=3))
    return rows, lost


@settings(max_examples=20, deadline=None)
@given(integrations())
def test_matches_the_oracle(spark, case):
    rows, lost = case
    levels = (1.0, 0.75, 0.5, 0.3)
    m = measure(spark, rows, lost=lost, levels=levels)
    want = oracle(rows, lost, levels)
    assert (m.tuples, m.instances, m.units) == (want["tuples"], want["instances"], want["units"])
    assert m.completeness == pytest.approx(want["completeness"])
    assert (m.partial_completeness, m.recall, m.correct_rate) == pytest.approx(
        (want["partial_completeness"], want["recall"], want["correct_rate"])
    )
    assert (m.windows_open_max, m.windows_open_mean) == (want["windows"][0], pytest.approx(want["windows"][1]))
    assert (m.tuples_held_max, m.tuples_held_mean) == (want["held"][0], pytest.approx(want["held"][1]))
