"""How complete and correct a stream integration was, measured against ground truth (DESIGN.md §1).

Input is one row per integrated tuple: the output unit it landed in (an emitted SWA window, or one
key group inside a tumbling window), the instance it truly belongs to, whether it is the instance's
primary (head) invocation, its event time and its unit's open/close times. Tuples that never made it
into a unit (quarantined, dropped) can be passed as `lost`; they still count in their instance's degree.

Everything runs in Spark as one action of a few aggregations; only a dozen named figures come back to the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from rich.table import Table

DEFAULT_LEVELS: tuple[float, ...] = (1.0, 0.85, 0.75)


@dataclass(frozen=True)
class IntegrationMetrics:
    """One integration run's quality figures; rates are shares in [0, 1]."""

    tuples: int  # tuples that were integrated (rows)
    instances: int  # true instances (distinct instance ids, counting `lost` tuples too)
    units: int  # output units
    completeness: dict[float, float] = field(hash=False)  # level γ -> share of instances
    partial_completeness: float
    recall: float
    correct_rate: float
    windows_open_max: int
    windows_open_mean: float
    tuples_held_max: int
    tuples_held_mean: float

    def as_row(self) -> dict[str, float | int]:
        """Flat, Delta-friendly row: completeness levels become columns completeness_100, completeness_85, ..."""
        row: dict[str, float | int] = {"tuples": self.tuples, "instances": self.instances, "units": self.units}
        row.update({completeness_column(level): share for level, share in self.completeness.items()})
        for name in (
            "partial_completeness",
            "recall",
            "correct_rate",
            "windows_open_max",
            "windows_open_mean",
            "tuples_held_max",
            "tuples_held_mean",
        ):
            row[name] = getattr(self, name)
        return row


def completeness_column(level: float) -> str:
    """Column name for a level: 1.0 -> completeness_100, 0.85 -> completeness_85, 0.875 -> completeness_87_5."""
    return "completeness_" + f"{round(level * 100, 6):g}".replace(".", "_")


def integration_metrics(
    rows: DataFrame,
    *,
    unit: list[str],
    instance: str,
    primary: str,
    event_time: str,
    opened_at: str,
    closed_at: str,
    lost: DataFrame | None = None,
    levels: tuple[float, ...] = DEFAULT_LEVELS,
) -> IntegrationMetrics:
    """Measure an integration: `rows` has one row per integrated tuple, `lost` (same `instance` column) the rest.

    Instance ids must be non-null. Times may be timestamps or numbers of seconds.
    """
    if not unit:
        raise ValueError("unit needs at least one column")
    for level in levels:
        if not 0 < level <= 1:
            raise ValueError(f"completeness level must be in (0, 1], got {level}")
    tuples = rows.select(
        F.struct(*[_column(name) for name in unit]).alias("unit"),
        _column(instance).alias("instance"),
        F.coalesce(_column(primary).cast("boolean"), F.lit(False)).alias("primary"),
        _micros(event_time).alias("event"),
        _micros(opened_at).alias("opened"),
        _micros(closed_at).alias("closed"),
    )
    lost_tuples = None if lost is None else lost.select(_column(instance).alias("instance"))
    with _cached(_unit_instance_pairs(tuples)) as pairs:
        figures = _collect(
            _count_figures(pairs, lost_tuples, levels),
            _occupancy_figures(
                windows=pairs.where("first_of_unit").select(
                    F.col("unit_opened").alias("start"), F.col("unit_closed").alias("end")
                ),
                held=tuples.select(F.col("event").alias("start"), F.col("closed").alias("end")),
            ),
        )

    def count(name: str) -> int:
        return int(figures.get(name) or 0)

    instances, with_primary = count("instances"), count("with_primary")
    return IntegrationMetrics(
        tuples=count("tuples"),
        instances=instances,
        units=count("units"),
        completeness={level: _share(count(f"complete_{i}"), instances) for i, level in enumerate(levels)},
        partial_completeness=_share(count("pure"), count("units")),
        recall=_share(with_primary, instances),
        correct_rate=_share(count("correct"), with_primary),
        windows_open_max=count("windows_max"),
        windows_open_mean=figures.get("windows_mean") or 0.0,
        tuples_held_max=count("held_max"),
        tuples_held_mean=figures.get("held_mean") or 0.0,
    )


def _column(name: str) -> Column:
    """A column by its literal name (dots, spaces and backticks in names are not syntax)."""
    return F.col("`" + name.replace("`", "``") + "`")


def _micros(name: str) -> Column:
    """Integer microseconds, so sweeps and interval lengths are exact (numbers are read as seconds)."""
    return F.unix_micros(_column(name).cast("timestamp"))


def _collect(*parts: DataFrame) -> dict[str, float]:
    """Run every summary as one Spark action: each part is a tiny (name, value) table, so they stack into one result."""
    return {row["name"]: row["value"] for row in reduce(_stack, parts).collect()}


def _stack(top: DataFrame, bottom: DataFrame) -> DataFrame:
    return top.unionByName(bottom)


def _named(summary: DataFrame) -> DataFrame:
    """A one-row summary with a column per figure -> rows (name, value)."""
    values = summary.select(*[F.col(name).cast("double").alias(name) for name in summary.columns])
    return values.unpivot([], values.columns, "name", "value")


@contextmanager
def _cached(frame: DataFrame) -> Iterator[DataFrame]:
    """Keep the (unit, instance) pairs while every summary reads them, so `rows` is aggregated once for all of them."""
    frame.persist()
    try:
        yield frame
    finally:
        frame.unpersist()


def _unit_instance_pairs(tuples: DataFrame) -> DataFrame:
    """One row per (unit, instance): how many of the instance's tuples the unit holds, plus its unit's figures.

    The unit's figures (pure, has a primary, lifetime) ride along on every pair; `first_of_unit` marks one
    pair per unit, so the units themselves are a filter away instead of another shuffle.
    """
    in_unit = Window.partitionBy("unit")
    pairs = tuples.groupBy("unit", "instance").agg(
        F.count(F.lit(1)).alias("n"),
        F.max("primary").alias("primary"),
        F.min("opened").alias("opened"),
        F.max("closed").alias("closed"),
    )
    return pairs.select(
        "instance",
        "n",
        (F.count(F.lit(1)).over(in_unit) == 1).alias("pure"),
        F.max("primary").over(in_unit).alias("unit_primary"),
        F.min("opened").over(in_unit).alias("unit_opened"),
        F.max("closed").over(in_unit).alias("unit_closed"),
        (F.row_number().over(in_unit.orderBy("instance")) == 1).alias("first_of_unit"),
    )


def _count_figures(pairs: DataFrame, lost: DataFrame | None, levels: tuple[float, ...]) -> DataFrame:
    """Every count behind the rates in one pass: per instance first, then over all instances.

    Per instance: its degree, the most of its tuples any unit holds (`main`) and the most any pure unit
    holds (`main_pure`). Its main unit is the unit holding the most; among tied units a pure one is
    preferred, so the outcome does not depend on how units are ordered: the main unit is pure exactly
    when main_pure == main. `complete_<i>` counts the instances complete at levels[i].
    Unit counts ride along on each unit's first pair, so summing them counts every unit once.
    """
    first, pure, headed = F.col("first_of_unit"), F.col("pure"), F.col("unit_primary")
    parts = pairs.select(
        "instance",
        F.col("n").alias("tuples"),
        F.col("n").alias("degree"),
        F.when(pure, F.col("n")).alias("in_pure_unit"),
        first.cast("int").alias("units"),
        (first & pure).cast("int").alias("pure"),
        (first & headed).cast("int").alias("with_primary"),
        (first & headed & pure).cast("int").alias("correct"),
    )
    unit_counts = ["units", "pure", "with_primary", "correct"]
    if lost is not None:  # a lost tuple adds to its instance's degree and to nothing else
        parts = parts.unionByName(lost.select("instance", F.lit(1).cast("long").alias("degree")), allowMissingColumns=True)
    per_instance = parts.groupBy("instance").agg(
        F.sum("tuples").alias("tuples"),
        F.sum("degree").alias("degree"),
        F.max("tuples").alias("main"),
        F.max("in_pure_unit").alias("main_pure"),
        *[F.sum(name).alias(name) for name in unit_counts],
    )
    main_is_pure = F.col("main_pure") == F.col("main")  # null, so not counted, when no pure unit holds any of it
    # γ as the decimal it prints as, so 0.7 × 10 tuples is exactly 7 (a float product would be 7.000000000000001).
    complete = [
        _count_if(main_is_pure & (F.col("main") >= F.col("degree") * F.lit(Decimal(repr(float(level)))))).alias(f"complete_{i}")
        for i, level in enumerate(levels)
    ]
    return _named(
        per_instance.agg(
            F.count(F.lit(1)).alias("instances"),
            F.sum("tuples").alias("tuples"),
            *[F.sum(name).alias(name) for name in unit_counts],
            *complete,
        )
    )


def _occupancy_figures(**intervals: DataFrame) -> DataFrame:
    """Per kind of interval [start, end): peak (<kind>_max) and time-weighted mean (<kind>_mean) number open at once.

    Half-open intervals: one ending at the instant another starts does not overlap it, and a
    zero-length interval is never open (one ending before it starts counts as zero-length).
    One sweep serves every kind: +1 at each start and -1 at each end, ends first at an instant; the
    running sum in time order is the number open, and the total open time is
    Σ ends − Σ starts = −Σ delta × instant. The mean is over [first start, last end]; a zero-length span gives 0.
    A running sum is sequential by nature: each kind's events are sorted in one task.
    """
    events = []
    for kind, frame in intervals.items():
        spans = frame.select(F.lit(kind).alias("kind"), "start", F.greatest("start", "end").alias("end"))
        events += [
            spans.select("kind", F.col(edge).alias("at"), F.lit(delta).alias("delta"))
            for edge, delta in (("start", 1), ("end", -1))
        ]
    in_time = Window.partitionBy("kind").orderBy("at", "delta").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    since_first = F.col("at") - F.min("at").over(Window.partitionBy("kind"))  # keeps Σ delta × instant small
    swept = reduce(_stack, events).select(
        "kind",
        "at",
        F.sum("delta").over(in_time).alias("open"),
        (F.col("delta").cast("decimal(38,0)") * since_first).alias("weighted"),
    )
    per_kind = swept.groupBy("kind").agg(
        F.max("open").cast("double").alias("max"),
        (-F.sum("weighted")).cast("double").alias("busy"),
        (F.max("at") - F.min("at")).cast("double").alias("span"),
    )
    mean = F.when(F.col("span") > 0, F.col("busy") / F.col("span")).otherwise(F.lit(0.0))
    figures = per_kind.select("kind", "max", mean.alias("mean")).unpivot("kind", ["max", "mean"], "figure", "value")
    return figures.select(F.concat_ws("_", "kind", "figure").alias("name"), "value")


def _count_if(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0))


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


# --------------------------------------------------------------------------------------------- display


def metrics_table(columns: dict[str, IntegrationMetrics], title: str | None = None) -> Table:
    """Variants side by side, one row per indicator, laid out like the paper's Tables 6 and 7."""
    table = Table(title=title, title_justify="left")
    table.add_column("Indicator")
    for name in columns:
        table.add_column(name, justify="right")
    levels = sorted({level for metrics in columns.values() for level in metrics.completeness}, reverse=True)
    indicators: list[tuple[str, Callable[[IntegrationMetrics], str]]] = [
        (f"Completeness (γ = {level:g})", lambda m, level=level: _percent(m.completeness.get(level))) for level in levels
    ]
    indicators += [
        ("Partial completeness", lambda m: _percent(m.partial_completeness)),
        ("Recall", lambda m: _percent(m.recall)),
        ("Correct rate", lambda m: _percent(m.correct_rate)),
        ("Tuples", lambda m: f"{m.tuples:,}"),
        ("Instances", lambda m: f"{m.instances:,}"),
        ("Units", lambda m: f"{m.units:,}"),
        ("Windows open (max / mean)", lambda m: f"{m.windows_open_max:,} / {m.windows_open_mean:,.2f}"),
        ("Tuples held (max / mean)", lambda m: f"{m.tuples_held_max:,} / {m.tuples_held_mean:,.2f}"),
    ]
    for label, render in indicators:
        table.add_row(label, *(render(metrics) for metrics in columns.values()))
    return table


def _percent(share: float | None) -> str:
    return "–" if share is None else f"{share * 100:.2f}%"
