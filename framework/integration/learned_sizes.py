"""Learning the per-head window sizes of `size: auto` / `timeout: auto` from history
(the why and the table: framework.operators.window_sizes).

History is kept as histograms (per head: instances by degree, and by duration in whole seconds
rounded up), so adding a run's instances is adding counts, and n and t can be chosen again from
all of them without keeping the tuples.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from framework.integration.fitting import fit_erlang, fit_hyper_erlang, smallest_size, smallest_timeout
from framework.operators.columns import field_of, quoted
from framework.operators.window_sizes import Sizes
from framework.spec.steps import AUTO, SwaSpec

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from framework.io.delta.base import DeltaStore

HISTORY_DIR = "_tributary/window_sizes"
MIN_GLOBAL = 10  # instances (lasting more than an instant) the global fits need


@dataclass
class History:
    """Per head: instances and the degree and duration histograms (value -> instances)."""

    degrees: dict[str, Counter[int]] = field(default_factory=dict)
    durations: dict[str, Counter[int]] = field(default_factory=dict)

    def add(self, other: History) -> History:
        for head, counts in other.degrees.items():
            self.degrees.setdefault(head, Counter()).update(counts)
        for head, counts in other.durations.items():
            self.durations.setdefault(head, Counter()).update(counts)
        return self

    def instances(self, head: str | None = None) -> int:
        if head is not None:
            return sum(self.degrees.get(head, Counter()).values())
        return sum(sum(c.values()) for c in self.degrees.values())


# -- learning ------------------------------------------------------------------------------------


def observe_history(rows: DataFrame, spec: SwaSpec) -> History:
    """The instances of these tuples (checked input, with MICROS), as histograms per head."""
    from pyspark.sql import functions as F

    from framework.operators.keyed_windows import MICROS

    head = field_of(rows, spec.learned_by or "")
    if head is None:
        from framework.errors import BadInput, Problem

        raise BadInput(
            Problem(f"learn.by column '{spec.learned_by}' is not in the input", hint=f"columns: {', '.join(rows.columns)}")
        )
    per_instance = rows.groupBy(*[F.col(quoted(c)) for c in spec.key_columns()]).agg(
        F.first(F.col(quoted(head.name)).cast("string")).alias("head"),
        F.count(F.lit(1)).alias("degree"),
        F.ceil((F.max(MICROS) - F.min(MICROS)) / 1e6).cast("long").alias("duration"),
    )
    per_bucket = per_instance.groupBy("head", "degree", "duration").count().toArrow()
    history = History()
    for head_value, degree, duration, count in zip(
        *(per_bucket.column(c).to_pylist() for c in per_bucket.column_names), strict=True
    ):
        history.degrees.setdefault(head_value, Counter())[degree] += count
        history.durations.setdefault(head_value, Counter())[duration] += count
    return history


def choose(history: History, spec: SwaSpec, note: str = "") -> Sizes:
    """n and t per head with enough instances, and the global fit for the others.

    A head's n needs `learn.min_instances` instances (one is enough when a head's degree is the
    head's own, as a page's is). Its t is a tail: the share β of instances outlasting it can only
    be told from at least ⌈1/β⌉ instances (100 for β = 0.01), so heads with fewer get the global t."""
    fixed_size = None if spec.size == AUTO else int(spec.size)
    fixed_timeout = None if spec.timeout == AUTO else spec.timeout_micros
    n_all, t_all = global_fit(history, spec.learn.alpha, spec.learn.beta)
    fallback = (fixed_size or n_all, fixed_timeout or t_all * 1_000_000)
    tail_instances = max(spec.learn.min_instances, math.ceil(1 / spec.learn.beta - 1e-9))
    per_head = {}
    for head, degrees in history.degrees.items():
        instances = sum(degrees.values())
        if instances < spec.learn.min_instances:
            continue
        n = fixed_size or _smallest_covering(degrees, spec.learn.alpha)
        t = fallback[1]
        if fixed_timeout is None and instances >= tail_instances:
            t = max(1, _smallest_outlasted(history.durations[head], spec.learn.beta)) * 1_000_000
        per_head[head] = (n, t)
    return Sizes(per_head, fallback, history.instances(), note)


def global_fit(history: History, alpha: float, beta: float) -> tuple[int, int]:
    """n and t (whole seconds) for every head alike: the paper's fits over all the instances, or,
    with fewer than MIN_GLOBAL instances lasting more than an instant, the same rules as per head."""
    import numpy as np

    degrees = np.array(_expand(history.degrees), dtype=float)
    durations = np.array(_expand(history.durations), dtype=float)
    if (degrees > 0).sum() < MIN_GLOBAL or (durations > 0).sum() < MIN_GLOBAL:
        pooled_degrees, pooled_durations = _pooled(history.degrees), _pooled(history.durations)
        n = _smallest_covering(pooled_degrees, alpha) if pooled_degrees else 1
        return n, max(1, _smallest_outlasted(pooled_durations, beta)) if pooled_durations else 1
    return smallest_size(fit_erlang(degrees).distribution, alpha), smallest_timeout(
        fit_hyper_erlang(durations).distribution, beta
    )


def _smallest_covering(counts: Counter[int], alpha: float) -> int:
    total, seen = sum(counts.values()), 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= alpha * total - 1e-9:
            return max(1, value)
    return max(counts)


def _smallest_outlasted(counts: Counter[int], beta: float) -> int:
    """The smallest whole second t with share(duration > t) ≤ β."""
    total = sum(counts.values())
    longer = total
    for value in sorted(counts):
        longer -= counts[value]
        if longer <= beta * total + 1e-9:
            return value
    return max(counts)


def _pooled(histograms: dict[str, Counter[int]]) -> Counter[int]:
    pooled: Counter[int] = Counter()
    for counts in histograms.values():
        pooled.update(counts)
    return pooled


def _expand(histograms: dict[str, Counter[int]]) -> list[int]:
    return [value for value, count in sorted(_pooled(histograms).items()) for _ in range(count)]


# -- the table -----------------------------------------------------------------------------------


def history_table(internal: Any, pipeline: str, step: str) -> str:
    """Where a step's history lives (`internal` maps a path under the warehouse to a location)."""
    return internal(f"{HISTORY_DIR}/{pipeline}/{step}")


def read_history(store: DeltaStore, table: str) -> History:
    rows = store.query(table, "SELECT head, degrees, durations FROM t")
    history = History()
    for head, degrees, durations in (
        zip(*(rows.column(c).to_pylist() for c in ("head", "degrees", "durations")), strict=True) if rows.num_rows else ()
    ):
        history.degrees[head] = Counter({int(k): v for k, v in json.loads(degrees).items()})
        history.durations[head] = Counter({int(k): v for k, v in json.loads(durations).items()})
    return history


def write_history(store: DeltaStore, table: str, history: History, sizes: Sizes, run_id: str) -> None:
    """Replace the table's rows with `history` and the sizes chosen from it (one Delta version)."""
    store.replace_rows(table, history_rows(history, sizes, run_id))


def history_rows(history: History, sizes: Sizes, run_id: str) -> pa.Table:
    import pyarrow as pa

    heads = sorted(history.degrees)
    chosen = [sizes.per_head.get(h) for h in heads]
    return pa.table(
        {
            "head": pa.array(heads, pa.string()),
            "instances": pa.array([history.instances(h) for h in heads], pa.int64()),
            "size": pa.array([c[0] if c else None for c in chosen], pa.int64()),
            "timeout_s": pa.array([c[1] / 1e6 if c else None for c in chosen], pa.float64()),
            "degrees": pa.array([json.dumps(dict(sorted(history.degrees[h].items()))) for h in heads], pa.string()),
            "durations": pa.array([json.dumps(dict(sorted(history.durations[h].items()))) for h in heads], pa.string()),
            "fallback_size": pa.array([sizes.fallback[0]] * len(heads), pa.int64()),
            "fallback_timeout_s": pa.array([sizes.fallback[1] / 1e6] * len(heads), pa.float64()),
            "run_id": pa.array([run_id] * len(heads), pa.string()),
        }
    )


def describe(sizes: Sizes) -> str:
    """One line for the run summary."""
    n_values = sorted(n for n, _ in sizes.per_head.values())
    spread = f"n {n_values[0]}–{n_values[-1]}" if n_values else "no head with enough instances"
    return (
        f"{len(sizes.per_head):,} heads learned from {sizes.instances:,} instances ({spread}); others n = {sizes.fallback[0]}, "
        f"t = {sizes.fallback[1] / 1e6:g} s{'; ' + sizes.note if sizes.note else ''}"
    )
