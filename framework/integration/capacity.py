"""The state an `swa` or `tumbling` step needs: predicted from its input, observed from its windows
(Li et al., "Service Intelligence Oriented Distributed Data Stream Integration", §6.3–6.4).

SWA (§6.4): the open windows are the servers of a G/G/c queue. Windows open at rate λ (one per
instance) and live 1/μ on average (until their n-th tuple, else until the timeout), so at least
c = ⌊λ/μ⌋ + 1 windows are open at once (formula (12)), and the state is c × n × bytes per tuple
(formula (13)).
- Predicted from the input: each value of the step's key stands for one instance (true for keys
  with client and time; a key shared by many instances, such as `head` alone, is flagged), λ =
  key values starting per second of event time, and a key's window lives t unless it reaches n
  tuples, then until its n-th tuple (interpolated between its first and last event time).
- Both sides measure the steady state, as a queueing model describes it: rates and mean levels
  are taken between the 5% and 95% quantiles of the instants windows open (STEADY), leaving out
  the ramp-up at the start of the input and the tail after its last arrivals.
- Observed from the windows the run emitted (window_start, window_end, tuple_count, closed_by): a
  window is open over [start, close), close = its n-th tuple for `count`, else start + t. The
  sweep over those intervals gives the open windows (peak, and mean over event time) and the tuples
  in them (each window counted with the tuples it ends with: the state a window reaches).

Tumbling baseline (§6.3): a count window of W tuples holds L tuples on average; the paper's fit,
formula (11), is L = 0.4994·W − 0.4526, and the residence time follows by Little's law, L / tuple
rate. Observed: a count window's buffer grows 1…W with each arrival, so over the run's tuples L is
the mean buffer length seen by an arriving tuple.

Errors are (predicted − observed) / observed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from framework.operators.registry import StateModel, kinds

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from framework.spec.steps import KeyedWindowSpec

QUEUE_SLOPE, QUEUE_INTERCEPT = 0.4994, -0.4526  # formula (11): L = 0.4994 K − 0.4526
SHARED_KEY_TUPLES = 3.0  # a key with more tuples than this × n is several instances, not one
WINDOW_COLUMNS = ("window_start", "window_end", "tuple_count", "closed_by")
SHORT_TRACE = 3  # an input whose windows open over fewer lifetimes than this never reaches a steady state
STEADY = (0.05, 0.95)  # quantiles of the window opening instants that bound the steady state


@dataclass(frozen=True)
class InputLoad:
    """What the model reads from a step's input (one Spark aggregation)."""

    tuples: int
    span_s: float  # event time from the first to the last tuple
    keys: int  # distinct key values
    lifetime_sum_s: float  # Σ over keys of the window lifetime the rule gives it (SWA)
    crowded_keys: int  # keys with more than SHARED_KEY_TUPLES × n tuples
    steady_s: float  # event time between the STEADY quantiles of the keys' first tuples
    bytes_per_tuple: float  # Arrow bytes of the columns a window holds, per tuple
    mean_size: float = 0.0  # n averaged over the key values (size: auto gives each head its own)

    @property
    def instances_per_s(self) -> float:
        """λ: key values (instances) starting per second in the steady part of the input."""
        share = STEADY[1] - STEADY[0]
        return share * self.keys / self.steady_s if self.steady_s > 0 else float(self.keys)

    @property
    def tuple_rate(self) -> float:
        return self.tuples / self.span_s if self.span_s > 0 else float(self.tuples)


@dataclass
class Figures:
    """One step's predicted and observed state, as the run log keeps them."""

    step: str
    kind: str  # the step's kind: one whose registry entry has an OPEN_WINDOWS or COUNT_QUEUE state_model
    size: int | str  # n or W; "auto": learned per head
    timeout_s: float | str | None  # t; "auto": learned per head; None: tumbling
    predicted: dict[str, float] = field(default_factory=dict)
    observed: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    batches: list[dict[str, Any]] = field(default_factory=list)  # streaming: one entry per micro-batch

    @property
    def model(self) -> StateModel | None:
        """The model of the state the step's kind holds (StepKind.state_model)."""
        kind = kinds().get(self.kind)
        return kind.state_model if kind is not None else None

    @property
    def setting(self) -> str:
        """The step's parameters as a person reads them: n = 13, t = 22 s / n = auto, t = auto / W = 32000."""
        if self.timeout_s is None:
            return f"W = {self.size}"
        timeout = self.timeout_s if isinstance(self.timeout_s, str) else f"{self.timeout_s:g} s"
        return f"n = {self.size}, t = {timeout}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Figures:
        return Figures(
            step=data["step"],
            kind=data["kind"],
            size=data["size"],
            timeout_s=data.get("timeout_s"),
            predicted=data.get("predicted") or {},
            observed=data.get("observed") or {},
            notes=data.get("notes") or [],
            batches=data.get("batches") or [],
        )

    def rows(self) -> list[tuple[str, str, str, str]]:
        """(quantity, predicted, observed, error) for the tables of the CLI and the report."""
        rows = []
        for label, p, o in _ROWS.get(self.model, []):
            shown = _bytes if "bytes" in label else _fmt
            predicted, observed = self.predicted.get(p), self.observed.get(o)
            rows.append((label, shown(predicted), shown(observed), error(predicted, observed)))
        return rows

    def headline(self) -> str:
        """One line for `tributary runs`: the model's main figure, predicted → observed (error)."""
        key, observed, unit = (
            ("open_windows", "open_windows_mean", "windows")
            if self.model == StateModel.OPEN_WINDOWS
            else ("queue_length", "queue_length", "tuples")
        )
        p, o = self.predicted.get(key), self.observed.get(observed)
        return f"{self.step}: {_fmt(p)} → {_fmt(o)} {unit} ({error(p, o)})"


_ROWS: dict[StateModel | None, list[tuple[str, str, str]]] = {
    StateModel.OPEN_WINDOWS: [
        ("windows opened per second λ", "instances_per_s", "windows_per_s"),
        ("mean window lifetime 1/μ (s)", "lifetime_s", "lifetime_s"),
        ("open windows c = ⌊λ/μ⌋ + 1 (mean)", "open_windows", "open_windows_mean"),
        ("open windows (peak)", "", "open_windows_max"),
        ("tuples in open windows c × n (mean)", "tuples_held", "tuples_held_mean"),
        ("tuples in open windows (peak)", "tuples_held", "tuples_held_max"),
        ("state bytes c × n × tuple (mean)", "state_bytes", "state_bytes_mean"),
        ("state bytes (peak)", "state_bytes", "state_bytes_max"),
    ],
    StateModel.COUNT_QUEUE: [
        ("tuples per second", "tuple_rate", "tuple_rate"),
        ("queue length L (formula 11)", "queue_length", "queue_length"),
        ("residence time W = L / rate (s)", "residence_s", "residence_s"),
        ("state bytes W × tuple (peak)", "state_bytes", "state_bytes_max"),
    ],
}


def error(predicted: float | None, observed: float | None) -> str:
    if predicted is None or observed is None:
        return "–"
    if observed == 0:
        return "–" if predicted == 0 else "∞"
    return f"{(predicted - observed) / observed:+.1%}"


def _fmt(value: float | None) -> str:
    if value is None:
        return "–"
    if float(value).is_integer() and abs(value) >= 1:
        return f"{int(value):,}"
    return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"


def _bytes(value: float | None) -> str:
    if value is None:
        return "–"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:,.2f} {unit}"
    return f"{value:,.0f} B"


def predict(model: StateModel | None, size: int, load: InputLoad) -> tuple[dict[str, float], list[str]]:
    """The model's figures for a step whose kind holds this state, with these parameters, on an input with this load."""
    notes: list[str] = []
    if model == StateModel.COUNT_QUEUE:
        queue = QUEUE_SLOPE * size + QUEUE_INTERCEPT
        return {
            "tuple_rate": load.tuple_rate,
            "queue_length": queue,
            "residence_s": queue / load.tuple_rate if load.tuple_rate else 0.0,
            "state_bytes": float(size * load.bytes_per_tuple),
        }, notes
    rate = load.instances_per_s
    lifetime = load.lifetime_sum_s / load.keys if load.keys else 0.0
    windows = math.floor(round(rate * lifetime, 9)) + 1  # rounded: 9.999999… × 20 is 200
    if load.steady_s < SHORT_TRACE * lifetime:
        notes.append(
            f"the input's windows open over {load.steady_s:,.1f} s, less than {SHORT_TRACE} mean window lifetimes "
            f"({lifetime:,.1f} s): the windows never reach the steady state the model describes, so it overestimates"
        )
    if load.crowded_keys:
        notes.append(
            f"{load.crowded_keys:,} key value(s) have more than {SHARED_KEY_TUPLES:g} × n tuples: they stand for several "
            "instances, so λ is underestimated (a key with client and time separates instances)"
        )
    return {
        "instances_per_s": rate,
        "lifetime_s": lifetime,
        "open_windows": float(windows),
        "tuples_held": float(windows * (load.mean_size or size)),
        "state_bytes": float(windows * (load.mean_size or size) * load.bytes_per_tuple),
        "bytes_per_tuple": load.bytes_per_tuple,
    }, notes


def observe(
    model: StateModel | None, size: int, timeout_s: float | None, windows: pa.Table, bytes_per_tuple: float
) -> dict[str, float]:
    """The state the emitted windows (or tumbling units) held, from their rows alone."""
    import numpy as np
    import pyarrow.compute as pc

    counts = windows.column("tuple_count").to_numpy(zero_copy_only=False).astype(np.int64)
    start = _micros(windows.column("window_start"))
    end = _micros(windows.column("window_end"))
    if len(counts) == 0:
        return {}
    span_s = max((end.max() - start.min()) / 1e6, 0.0)
    tuples = int(counts.sum())
    rate = tuples / span_s if span_s > 0 else float(tuples)
    if model == StateModel.COUNT_QUEUE:
        full, rest = divmod(tuples, size)
        queue = (full * size * (size + 1) / 2 + rest * (rest + 1) / 2) / tuples
        return {
            "tuple_rate": rate,
            "queue_length": queue,
            "residence_s": queue / rate if rate else 0.0,
            "state_bytes_max": float(min(size, tuples) * bytes_per_tuple),
        }
    by_count = pc.equal(windows.column("closed_by"), "count").to_numpy(zero_copy_only=False)
    close = np.where(by_count, end, start + round((timeout_s or 0) * 1e6))
    lo, hi = steady(start)
    open_max, open_mean = sweep(start, close, np.ones_like(counts), (lo, hi))
    held_max, held_mean = sweep(start, close, counts, (lo, hi))
    inside = (start >= lo) & (start <= hi)
    return {
        "windows": float(len(counts)),
        "windows_per_s": float(inside.sum() / ((hi - lo) / 1e6)) if hi > lo else float(len(counts)),
        "lifetime_s": float(((close - start) / 1e6).mean()),
        "open_windows_max": float(open_max),
        "open_windows_mean": open_mean,
        "tuples_held_max": float(held_max),
        "tuples_held_mean": held_mean,
        "state_bytes_mean": held_mean * bytes_per_tuple,
        "state_bytes_max": float(held_max * bytes_per_tuple),
    }


def sweep(start: Any, end: Any, weight: Any, within: tuple[float, float] | None = None) -> tuple[float, float]:
    """Peak and time-weighted mean of Σ weight over the intervals [start, end) open at an instant
    (the mean over `within` when given, else over all of them). An interval ending where another
    starts does not overlap it; an empty one is never open."""
    import numpy as np

    keep = end > start
    start, end, weight = start[keep], end[keep], weight[keep]
    if len(start) == 0:
        return 0.0, 0.0
    times = np.concatenate([end, start])
    deltas = np.concatenate([-weight, weight])
    order = np.lexsort((deltas, times))  # at one instant, ends (negative) before starts
    level = np.cumsum(deltas[order])
    at = times[order].astype(np.float64)
    lo, hi = within if within is not None else (at[0], at[-1])
    clipped = np.clip(at, lo, hi)
    total = float(np.sum(level[:-1] * np.diff(clipped)))
    return float(level.max()), total / (hi - lo) if hi > lo else 0.0


def steady(opened: Any) -> tuple[float, float]:
    """The steady part of a trace: from the STEADY[0] to the STEADY[1] quantile of the instants
    windows open, leaving out the ramp-up and the tail where the input has stopped arriving."""
    import numpy as np

    lo, hi = np.quantile(opened, STEADY)
    return float(lo), float(hi)


def _micros(column: Any) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    as_us = pc.cast(column, pa.timestamp("us", tz=getattr(column.type, "tz", None)))
    return pc.cast(as_us, pa.int64()).to_numpy(zero_copy_only=False).astype(np.int64)


def input_load(rows: DataFrame, spec: KeyedWindowSpec, sample: int = 2000) -> InputLoad:
    """The model's inputs from a step's checked input (with MICROS), in one aggregation."""
    from pyspark.sql import functions as F

    from framework.operators.columns import quoted
    from framework.operators.keyed_windows import MICROS, used_columns
    from framework.operators.window_sizes import SIZE_COLUMN, TIMEOUT_COLUMN

    # a key's window size and timeout: the tuples' own when learned (size: auto), else the step's
    learned = SIZE_COLUMN in rows.columns
    size_of = F.first(SIZE_COLUMN) if learned else F.lit(int(spec.size))  # type: ignore[attr-defined]
    timeout_of = F.first(TIMEOUT_COLUMN) if learned else F.lit(round(float(getattr(spec, "timeout", 0) or 0) * 1e6))
    per_key = rows.groupBy(*[F.col(quoted(c)) for c in spec.key_columns()]).agg(
        F.count(F.lit(1)).alias("n"),
        F.min(MICROS).alias("first"),
        F.max(MICROS).alias("last"),
        size_of.alias("size"),
        timeout_of.alias("timeout"),
    )
    size, timeout = F.col("size"), F.col("timeout")
    nth = F.col("first") + (F.col("last") - F.col("first")) * (size - 1) / F.greatest(F.col("n") - 1, F.lit(1))
    lifetime = F.when(F.col("n") >= size, F.least(nth - F.col("first"), timeout)).otherwise(timeout)
    row = per_key.agg(
        F.avg("size").alias("mean_size"),
        F.sum("n").alias("tuples"),
        F.count(F.lit(1)).alias("keys"),
        F.min("first").alias("first"),
        F.max("last").alias("last"),
        (F.sum(lifetime) / 1e6).alias("lifetime_sum_s"),
        F.count_if(F.col("n") > SHARED_KEY_TUPLES * size).alias("crowded"),
        F.percentile_approx("first", list(STEADY), 10_000).alias("steady"),
    ).first()
    assert row is not None  # an aggregate without grouping has one row
    held = used_columns(rows.drop(SIZE_COLUMN, TIMEOUT_COLUMN), spec)
    held = held.select(*[quoted(c) for c in held.columns if not c.startswith("__tributary")])
    probe = held.limit(sample).toArrow()
    tuples = int(row["tuples"] or 0)
    return InputLoad(
        tuples=tuples,
        span_s=((row["last"] or 0) - (row["first"] or 0)) / 1e6,
        keys=int(row["keys"] or 0),
        lifetime_sum_s=float(row["lifetime_sum_s"] or 0.0),
        crowded_keys=int(row["crowded"] or 0) if getattr(spec, "timeout", None) is not None else 0,
        steady_s=(row["steady"][1] - row["steady"][0]) / 1e6 if row["steady"] else 0.0,
        mean_size=float(row["mean_size"] or 0.0),
        bytes_per_tuple=probe.nbytes / probe.num_rows if probe.num_rows else 0.0,
    )
