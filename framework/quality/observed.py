"""Expectations judged from the pass that writes the rows: GX's metrics as one Spark Observation.

Great Expectations decides an expectation from a few metrics (a column map expectation: the row
count, the null count, the unexpected count; expect_column_mean_to_be_between: the mean). On
Spark, GX computes each domain's metrics as its own aggregation job over rows that must be cached
to be read again, and caching a step costs more than computing it. Here the same metrics are
taken from GX as Spark expressions, resolved on an empty frame (no job):
- `X.unexpected_count`, `X.filtered_row_count`: GX's condition of the map metric X and its
  domain (nulls, ignore_row_if) as a hidden boolean column, counted;
- aggregate metrics (`table.row_count`, `column.mean`, `column.max`, ...): GX's own aggregate;
- `X.unexpected_values`: an empty list (results are counts only; samples are observed apart).
They are observed while the run stages its outputs, then handed back to GX (`metrics_validate`),
so GX still judges, with its own definitions, and the checks cost no pass of their own. Spark's
Observation updates every aggregate row by row outside its generated code, so the counts of rows
are observed two to a 64-bit sum (`ObservedSuite.observation`) and unpacked before GX sees them.

Uniqueness (`column_values.unique`, `compound_columns.unique`) is GX's window condition: a row is
unexpected when its key's group (over all the rows) has more than one row, and it is in the
domain. In the staging pass that window would shuffle and sort whole rows by the key, doubling
the step. When the rows are written or cached anyway and no `drop` expectation needs the per-row
condition, the same count is taken afterwards from the key columns alone (`KeyCount`: group by
the key, sum the domain's rows of the groups with more than one row), so only the keys are read:
a 64-bit hash of each key first, every such count of a suite in one job (the hashes sorted on the
driver when they fit, else grouped by Spark), then exactly over the rows of the hashes seen more
than once only (`ObservedSuite.count_keys`). A failed check's samples are then picked among those
rows only.

Failing samples (a few failing rows as JSON) would be aggregated in the pass for every warn check,
failed or not, at the price of a hash and a JSON per candidate row; when the rows can be read again
they are taken afterwards instead, for the failed checks only, in one job
(`ObservedSuite.failed_samples`), picked as the pass would have picked them.

GX's planning on the empty frame costs more than most checks (~0.7 s per suite): a plan depends
only on the frame's schema and the suite, so it is kept per session, schema and suite (`planned`).

An expectation needing anything else (quantiles, value counts, distinct sets, a row_condition)
is validated by GX itself (framework.quality.suite.check) on the persisted rows.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from framework.quality.results import ExpectationResult
from framework.quality.suite import SAMPLE_ROWS, EmptyFrame, first_line, gx_expectation, make_result, row_domain

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import Column, DataFrame

    from framework.spec.expectations import ExpectationSpec

CHECK_PREFIX = "__tributary_check_"
RESULT_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": 0}
_SCHEMA_METRICS = ("table.columns", "table.column_types")  # exact from the schema alone
#: map metrics whose condition is "the key's group has more than one row" (a window over the key)
KEY_COUNTED = ("column_values.unique", "compound_columns.unique")
_PLANS_KEPT = 32
#: repeated key hashes counted exactly from their rows alone; past this, from every row
_CANDIDATES_KEPT = 1_000
#: failing rows of warn checks whose samples are taken with the exact key counts (one read of the
#: rows); past this, apart (those rows would go through the key counts' shuffle)
_SAMPLED_WITH_KEYS = 100_000
#: key hashes looked at on the driver (8 bytes each, twice while sorted: 64 MB); past this, by Spark
_HASHES_ON_DRIVER = 4_000_000
#: two counts of rows per 64-bit sum in the Observation (`ObservedSuite.observation`): the low
#: one exact below 2^32 rows; past that, they are counted again after the pass
_PACK_BITS = 32
_PACKED_EXACT_BELOW = 1 << _PACK_BITS
_ROWS_SEEN = "rows_seen"


@dataclass(frozen=True)
class KeyCount:
    """GX's unexpected count of a uniqueness metric, counted from the rows' key columns: the rows
    in `domain` whose key (its `columns`, as GX's window partitions them) occurs more than once."""

    columns: tuple[str, ...]
    domain: Column

    def groups(self, rows: DataFrame) -> DataFrame:
        """Per key: its rows (n) and its rows in the domain (d). Grouped by the columns themselves
        (nulls equal, as in GX's window over their struct), which hashes cheaper than a struct."""
        from pyspark.sql import functions as F

        keys = [F.col(f"`{c}`").alias(f"__tributary_key{k}") for k, c in enumerate(self.columns)]
        return rows.groupBy(*keys).agg(F.count(F.lit(1)).alias("n"), F.count_if(self.domain).alias("d"))

    def count(self, rows: DataFrame) -> int:
        """Exact, over every row (see `count_keys` for the cheaper way several are taken)."""
        from pyspark.sql import functions as F

        total = self.groups(rows).where(F.col("n") > 1).agg(F.sum("d")).collect()[0][0]
        return int(total or 0)

    def hashed(self) -> Column:
        """One 64-bit hash of the key: rows with equal keys have equal hashes (the converse is
        what `count_keys` checks exactly)."""
        from pyspark.sql import functions as F

        return F.xxhash64(*[F.col(f"`{c}`") for c in self.columns])

    def count_among(self, rows: DataFrame, hashes: list[int]) -> int:
        """The exact count over the rows whose key hashes to one of `hashes` (every repeated key's
        rows are among them: the other keys' groups cannot have more than one row)."""

        return self.count(rows.where(self.hashed().isin(hashes)))

    def failing(self, rows: DataFrame) -> DataFrame:
        """The unexpected rows themselves (for samples), over every row: the repeated keys found by
        grouping, their rows joined back (`ObservedSuite._counted_and_sampled` reads only the rows of
        the repeated hashes instead, when `count_keys` kept them)."""
        from functools import reduce

        from pyspark.sql import functions as F

        repeated = self.groups(rows).where(F.col("n") > 1).drop("n", "d")
        same = reduce(
            lambda a, b: a & b,
            [F.col(f"`{c}`").eqNullSafe(F.col(f"__tributary_key{k}")) for k, c in enumerate(self.columns)],
        )
        return rows.join(repeated, same, "left_semi").where(self.domain)


class NotObservable(Exception):
    """A metric that is not one aggregate over the rows: GX validates the expectation itself."""


@dataclass
class ObservedSuite:
    """The hidden check columns and the Observation aggregates for a list of expectations.

    `observable[i]` maps each metric id expectation i needs to where its value comes from: an
    aggregate's alias in the Observation, or a constant."""

    specs: list[ExpectationSpec]
    checks: dict[str, Column] = field(default_factory=dict)  # hidden column -> GX condition ∧ domain
    aggregates: dict[str, Column] = field(default_factory=dict)  # alias -> aggregate
    observable: dict[int, dict[Any, tuple[str, Any]]] = field(default_factory=dict)
    failing: dict[int, str] = field(default_factory=dict)  # row-level expectation -> its hidden check column
    samples: dict[int, list[str]] = field(default_factory=dict)  # warn/fail row-level -> sample aliases
    errors: dict[int, str] = field(default_factory=dict)  # GX could not even plan it (reported as an error)
    counted_check: dict[str, str] = field(default_factory=dict)  # unexpected-count alias -> the check it counts
    counted: dict[str, Column] = field(default_factory=dict)  # alias of a count of rows -> the condition it counts
    #: unexpected counts taken after the pass from the key columns (alias -> how), and which
    #: warn/fail expectation's samples come from which of them
    key_counts: dict[str, KeyCount] = field(default_factory=dict)
    key_samples: dict[int, str] = field(default_factory=dict)
    #: warn/fail row-level expectation -> its hidden check column, when its failing samples are
    #: taken after the pass from the checked rows, and only if it failed (see `failed_samples`)
    samples_after: dict[int, str] = field(default_factory=dict)
    expectations: dict[int, Any] = field(default_factory=dict)  # GX's expectation objects, built once
    engine: Any = None  # GX's Spark engine (over the empty frame): metrics_validate wants one
    sample_row: Any = None  # the row as JSON, for failing samples
    sample_bucket: Any = None

    @property
    def fallback(self) -> list[int]:
        return [i for i in range(len(self.specs)) if i not in self.observable and i not in self.errors]

    def tag(self, df: DataFrame) -> DataFrame:
        """`df` with the hidden check columns (computed once, read by the Observation and the drops)."""
        return df.withColumns(self.checks) if self.checks else df

    def observation(self) -> list[Column]:
        """What the pass observes: `aggregates`, their counts of rows (`counted`) packed two to a
        64-bit sum, the first in the low 32 bits, the second above (`_packed`), and the row count.
        Spark's Observation updates each aggregate row by row outside its generated code, about
        55 ms per aggregate and 1M rows on the development machine (docs/quality.md), so the
        fewer the better; `results` unpacks them."""
        from pyspark.sql import functions as F

        pairs = self._packed()
        packed = {alias for pair in pairs for alias in pair}
        columns = [column for alias, column in self.aggregates.items() if alias not in packed]
        for low, high in pairs:
            one = F.when(self.counted[low], F.lit(1)).otherwise(F.lit(0)).cast("long")
            above = F.when(self.counted[high], F.lit(1 << _PACK_BITS)).otherwise(F.lit(0)).cast("long")
            columns.append(F.try_sum(one + above).alias(_pair_alias(low, high)))  # null past 2^63: counted again
        if pairs:
            columns.append(F.count(F.lit(1)).alias(_ROWS_SEEN))
        return columns

    def _packed(self) -> list[tuple[str, str]]:
        """The counts `observation` packs, in pairs (an odd one out is observed as it is)."""
        counted = [alias for alias in self.aggregates if alias in self.counted]
        return list(zip(counted[0::2], counted[1::2], strict=False))

    def unpacked(self, observed: dict[str, Any], rows: Callable[[], DataFrame] | None) -> dict[str, Any]:
        """`observed` with each packed pair as its two counts. A pair is exact while the rows seen
        are fewer than 2^32 and its sum did not pass 2^63 (`try_sum`: null then); otherwise its
        counts are taken again from the checked rows (`rows`), exactly."""
        pairs = [pair for pair in self._packed() if _pair_alias(*pair) in observed]
        if not pairs:
            return observed
        unpacked = dict(observed)
        seen = unpacked.pop(_ROWS_SEEN)
        again = []
        for low, high in pairs:
            value = unpacked.pop(_pair_alias(low, high))
            if not seen:
                unpacked[low] = unpacked[high] = 0
            elif value is None or seen >= _PACKED_EXACT_BELOW:
                again += [low, high]
            else:
                unpacked[low], unpacked[high] = value & ((1 << _PACK_BITS) - 1), value >> _PACK_BITS
        if again:
            if rows is None:
                raise RuntimeError(f"{seen:,} rows: the packed counts need the checked rows to be counted again")
            from pyspark.sql import functions as F

            counts = self.tag(rows()).agg(*[F.count_if(self.counted[alias]).alias(alias) for alias in again]).collect()[0]
            unpacked |= counts.asDict()
        return unpacked

    def count_keys(
        self,
        rows: DataFrame,
        repeated: dict[str, list[int]] | None = None,
        known_rows: int | None = None,
        samples: dict[str, list[dict[str, Any]]] | None = None,
        checks: dict[int, int] | None = None,
        check_samples: dict[int, list[dict[str, Any]]] | None = None,
    ) -> dict[str, int]:
        """The key-counted unexpected counts over the checked rows (as staged or cached), exact;
        `repeated` (when given) is told each count's repeated key hashes, when they were kept;
        `known_rows`: how many rows `rows` has, when the caller knows (a staged write's count);
        `samples` (when given: `rows` are also the rows samples are picked from) is told the
        failing samples of each count that has samples and repeated hashes, taken in the same
        query as the counts (`results` would take them in one more, which reads the rows again);
        `checks`: the `samples_after` expectations with failing rows (`failing_rows`), whose
        samples that query takes too, into `check_samples`, when they are few (see
        `_counted_and_sampled`).

        Each key is hashed to 64 bits: a hash seen once is a key seen once, so only the hashes seen
        more than once (few when the check passes, none mostly) are counted exactly, from their
        rows alone (`KeyCount.count_among`). Past `_CANDIDATES_KEPT` such hashes, each key is
        counted exactly over all its rows. The repeated hashes are found on the driver when there
        are at most `_HASHES_ON_DRIVER` hashes to look at (`_repeated_on_driver`), else by Spark."""
        hows = list(self.key_counts.items())
        if not hows:
            return {}
        hashes = [how.hashed() for _, how in hows]
        if known_rows is not None and known_rows * len(hows) <= _HASHES_ON_DRIVER:
            kept = _repeated_on_driver(rows, hashes)
        else:
            kept = _repeated_by_spark(rows, hashes)
        if len(kept) > _CANDIDATES_KEPT:  # many repeated keys: each counted over all its rows
            return {alias: how.count(rows) for alias, how in hows}
        candidates: dict[int, list[int]] = {k: [] for k in range(len(hows))}
        for k, h in kept:
            candidates[k].append(h)
        if repeated is not None:
            repeated |= {alias: candidates[k] for k, (alias, _) in enumerate(hows)}
        counts = {alias: 0 for k, (alias, _) in enumerate(hows) if not candidates[k]}
        exact = {alias: candidates[k] for k, (alias, _) in enumerate(hows) if candidates[k]}
        if not exact:
            return counts
        if samples is None:
            return counts | {alias: self.key_counts[alias].count_among(rows, found) for alias, found in exact.items()}
        checks = checks or {}
        together = list(checks) if check_samples is not None and sum(checks.values()) <= _SAMPLED_WITH_KEYS else []
        sampled = [alias for alias in exact if alias in set(self.key_samples.values())]
        found_counts, found_samples, found_check_samples = self._counted_and_sampled(rows, exact, together, sampled)
        samples |= found_samples
        if check_samples is not None:
            check_samples |= found_check_samples
        return counts | found_counts

    def _counted_and_sampled(
        self, rows: DataFrame, repeated: dict[str, list[int]], checks: list[int], sampled: list[str]
    ) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]], dict[int, list[dict[str, Any]]]]:
        """One query over the checked rows: the exact count of each key count with `repeated`
        hashes and the failing samples of those `sampled`, and the failing samples of the
        `checks` (expectations of `samples_after`), each picked as the pass would have picked them
        (the least row of each hash bucket). It reads the rows whose key hash repeats or which
        fail one of the checks; each key's rows are counted by a window over them (a row whose
        hash is seen once has a key seen once, so it counts 1 there too). The rows failing the
        checks go through that window's shuffle, so the caller passes checks only when their
        failing rows are few (`_SAMPLED_WITH_KEYS`); otherwise `failed_samples` takes them apart.
        Over the wide benchmark's 1M rows of 40 columns this is one read of the rows instead of two."""
        from functools import reduce

        from pyspark.sql import Window
        from pyspark.sql import functions as F

        conditions = [self.key_counts[alias].hashed().isin(hashes) for alias, hashes in repeated.items()]
        conditions += [self.checks[self.samples_after[i]] for i in checks]
        subset = rows.where(reduce(lambda a, b: a | b, conditions))
        failing: dict[str, Column] = {}
        for n, alias in enumerate(repeated):
            how = self.key_counts[alias]
            per_key = Window.partitionBy(*[F.col(f"`{c}`") for c in how.columns])
            subset = subset.withColumn(f"__tributary_key_rows{n}", F.count(F.lit(1)).over(per_key))
            failing[alias] = (F.col(f"__tributary_key_rows{n}") > 1) & how.domain
        picks = [F.count_if(condition) for condition in failing.values()]
        picks += [_failing_sample(self, failing[alias], j) for alias in sampled for j in range(SAMPLE_ROWS)]
        picks += [_failing_sample(self, self.checks[self.samples_after[i]], j) for i in checks for j in range(SAMPLE_ROWS)]
        values = list(subset.agg(*picks).collect()[0])
        counts = {alias: int(values[k] or 0) for k, alias in enumerate(failing)}
        values = values[len(failing) :]
        key_samples = {alias: _samples(values[k * SAMPLE_ROWS : (k + 1) * SAMPLE_ROWS]) for k, alias in enumerate(sampled)}
        values = values[len(sampled) * SAMPLE_ROWS :]
        check_samples = {i: _samples(values[k * SAMPLE_ROWS : (k + 1) * SAMPLE_ROWS]) for k, i in enumerate(checks)}
        return counts, key_samples, check_samples

    def failing_rows(self, observed: dict[str, Any]) -> dict[int, int]:
        """The `samples_after` expectations that have failing rows (only they can fail), and how
        many, from the `observed` counts (unpacked)."""
        alias_of = {column: alias for alias, column in self.counted_check.items()}
        return {i: observed[alias_of[c]] for i, c in self.samples_after.items() if observed.get(alias_of[c])}

    def key_failing_samples(self, rows: DataFrame, alias: str, hashes: list[int] | None = None) -> list[dict[str, Any]]:
        """Failing samples of a key-counted expectation, picked as the pass picks them (one per
        hash bucket); `hashes`: its repeated key hashes, when `count_keys` kept them."""
        if hashes is not None:
            return self._counted_and_sampled(rows, {alias: hashes}, [], [alias])[1][alias]
        failing = self.key_counts[alias].failing(rows)
        return _samples(list(failing.agg(*[_bucket_sample(self, j) for j in range(SAMPLE_ROWS)]).collect()[0]))

    def failed_samples(self, rows: DataFrame, failed: list[int]) -> dict[int, list[dict[str, Any]]]:
        """Failing samples of the `failed` expectations of `samples_after`, in one pass over the
        checked rows: each one's check evaluated again, the rows picked as the pass would have
        picked them (the least row of each hash bucket). Only the rows failing one of them are
        hashed and written as JSON: over 1M rows of 40 columns, 0.7 s instead of 1.9 s."""
        from functools import reduce

        checks = [self.checks[self.samples_after[i]] for i in failed]
        picks = [_failing_sample(self, check, j) for check in checks for j in range(SAMPLE_ROWS)]
        values = list(rows.where(reduce(lambda a, b: a | b, checks)).agg(*picks).collect()[0])
        return {i: _samples(values[k * SAMPLE_ROWS : (k + 1) * SAMPLE_ROWS]) for k, i in enumerate(failed)}

    def results(
        self,
        observed: dict[str, Any],
        target: str,
        scope: str,
        rows: Callable[[], DataFrame] | None = None,
        repeated: dict[str, list[int]] | None = None,
        key_samples: dict[str, list[dict[str, Any]]] | None = None,
        check_samples: dict[int, list[dict[str, Any]]] | None = None,
    ) -> dict[int, ExpectationResult]:
        """GX's verdict on each observable expectation, from the observed metric values (`rows`:
        the checked rows, for the samples of a failed key-counted expectation; `repeated`: the
        repeated key hashes `count_keys` kept, so those samples read only those keys' rows;
        `key_samples`, `check_samples`: the samples `count_keys` already took)."""
        observed = self.unpacked(observed, rows)
        results = {}
        for i, sources in self.observable.items():
            spec = self.specs[i]
            metrics = {mid: observed[value] if kind == "alias" else value for mid, (kind, value) in sources.items()}
            try:
                verdict = self.expectations[i].metrics_validate(
                    metrics, runtime_configuration={"result_format": dict(RESULT_FORMAT)}, execution_engine=self.engine
                )
            except Exception as e:  # noqa: BLE001 - GX's own failure is the expectation's result
                verdict, error = None, first_line(e)
            result = make_result(target, scope, spec, verdict)
            if verdict is None:
                result.error = error
            if not result.success and i in self.samples:
                result.failing_samples = _samples([observed[a] for a in self.samples[i]])
            elif not result.success and i in self.key_samples and result.unexpected_count and rows is not None:
                alias = self.key_samples[i]
                if key_samples is not None and alias in key_samples:
                    result.failing_samples = key_samples[alias]
                else:
                    result.failing_samples = self.key_failing_samples(rows(), alias, (repeated or {}).get(alias))
            results[i] = result
        failed = [i for i in self.samples_after if not results[i].success]
        taken = check_samples or {}
        for i in failed:
            if i in taken:
                results[i].failing_samples = taken[i]
        failed = [i for i in failed if i not in taken]
        if failed and rows is not None:
            for i, samples in self.failed_samples(rows(), failed).items():
                results[i].failing_samples = samples
        for i, message in self.errors.items():
            result = make_result(target, scope, self.specs[i], None)
            result.error = message
            results[i] = result
        return results


def _repeated_on_driver(rows: DataFrame, hashes: list[Column]) -> list[tuple[int, int]]:
    """(key count, hash) of each hash seen more than once (up to `_CANDIDATES_KEPT` + 1 of them):
    the hashes sent to the driver as Arrow (8 bytes a row and key) and sorted there. One job that
    reads the key columns; grouping 1M distinct hashes in Spark is three (a partial aggregation
    that cannot reduce anything, a shuffle, the final one), 0.9 s against 0.3 s
    (docs/quality.md)."""
    import numpy as np

    table = rows.select(*[h.alias(f"h{k}") for k, h in enumerate(hashes)]).toArrow()
    kept: list[tuple[int, int]] = []
    for k in range(len(hashes)):
        values = np.sort(table.column(k).to_numpy())
        seen_again = np.unique(values[1:][values[1:] == values[:-1]])
        kept += [(k, int(h)) for h in seen_again[: _CANDIDATES_KEPT + 1 - len(kept)]]
    return kept


def _repeated_by_spark(rows: DataFrame, hashes: list[Column]) -> list[tuple[int, int]]:
    """`_repeated_on_driver` as one Spark job grouping every key count's hashes (a long per row
    to shuffle and group, where the key's own columns would be strings)."""
    from pyspark.sql import functions as F

    if len(hashes) == 1:  # one hash per row: no generator (exploding 1M one-element arrays costs ~0.25 s)
        keyed = rows.select(F.lit(0).alias("c"), hashes[0].alias("h"))
    else:
        per_row = F.explode(F.array(*[F.struct(F.lit(k).alias("c"), h.alias("h")) for k, h in enumerate(hashes)]))
        keyed = rows.select(per_row.alias("e")).select("e.c", "e.h")
    seen_twice = keyed.groupBy("c", "h").agg(F.count(F.lit(1)).alias("n")).where(F.col("n") > 1)
    return [(row["c"], row["h"]) for row in seen_twice.select("c", "h").limit(_CANDIDATES_KEPT + 1).collect()]


_plans: OrderedDict[tuple[Any, ...], tuple[Any, ObservedSuite]] = OrderedDict()
_plans_lock = threading.Lock()  # runs side by side (backfill --parallel, tributary test)


def planned(df: DataFrame, specs: list[ExpectationSpec], keys_after: bool = False) -> ObservedSuite:
    """`plan`, kept per Spark session, frame schema and suite: a plan is made of Spark expressions
    (by column name) and GX's metric configurations, which depend on nothing else. The plan is
    shared: callers only read it."""
    session = df.sparkSession
    key = (id(session), df.schema.json(), keys_after, tuple(s.model_dump_json() for s in specs))
    with _plans_lock:
        kept = _plans.get(key)
        if kept is not None and kept[0] is session:
            _plans.move_to_end(key)
            return kept[1]
    suite = plan(df, specs, keys_after=keys_after)
    with _plans_lock:
        _plans[key] = (session, suite)
        while len(_plans) > _PLANS_KEPT:
            _plans.popitem(last=False)
    return suite


def plan(df: DataFrame, specs: list[ExpectationSpec], probe_each: bool = False, keys_after: bool = False) -> ObservedSuite:
    """Which expectations the pass can judge, and the columns and aggregates it needs for them.

    keys_after: the checked rows can be read again after the pass (written or cached), so a
    uniqueness count no `drop` expectation needs is taken then, from the key columns (`KeyCount`).

    Spark is asked once whether it accepts the whole Observation (an analysis, no job); only if it
    refuses is each expectation's part asked on its own, to leave the refused ones to GX."""
    from great_expectations.validator.metric_configuration import MetricConfiguration
    from pyspark.sql import functions as F

    empty = EmptyFrame.like(df)
    suite = ObservedSuite(specs, engine=empty.engine)

    def how(configuration: Any) -> tuple[str, Any]:
        """How a metric is observed, and what GX resolves on the empty frame for it (if anything)."""
        name = configuration.metric_name
        base, _, suffix = name.rpartition(".")
        derived = partial(MetricConfiguration, metric_domain_kwargs=configuration.metric_domain_kwargs)
        if name in _SCHEMA_METRICS:
            return "schema", configuration
        if suffix == "unexpected_values":
            return "no values", None  # results are counts only (partial_unexpected_count 0)
        if suffix in ("unexpected_count", "filtered_row_count") and _registered(f"{base}.condition", empty.engine):
            return suffix, derived(f"{base}.condition", metric_value_kwargs=configuration.metric_value_kwargs)
        if _registered(f"{name}.aggregate_fn", empty.engine):
            return "aggregate", derived(f"{name}.aggregate_fn", metric_value_kwargs=configuration.metric_value_kwargs)
        return "unobservable", None

    # every expectation's metrics, and what GX resolves for them, in one graph
    expectations, needs = {}, {}
    for i, spec in enumerate(specs):
        try:
            expectations[i] = gx_expectation(spec)
            needs[i] = (
                expectations[i]
                .get_validation_dependencies(
                    execution_engine=empty.engine, runtime_configuration={"result_format": dict(RESULT_FORMAT)}
                )
                .get_metric_configurations()
            )
        except Exception as e:  # noqa: BLE001 - reported as the expectation's error, as GX would
            suite.errors[i] = first_line(e)
    suite.expectations = dict(expectations)
    needed_by_drops = {c.id for i, cs in needs.items() if specs[i].severity == "drop" for c in cs}
    hows = {c.id: how(c) for cs in needs.values() for c in cs}
    resolved = empty.resolve(list({r.id: r for _, r in hows.values() if r is not None}.values()))
    by_metric: dict[Any, tuple[str, Any]] = {}  # metric id -> source, shared by the expectations

    def source_of(configuration: Any) -> tuple[str, Any]:
        if configuration.id in by_metric:
            return by_metric[configuration.id]
        kind, resolution = hows[configuration.id]
        if configuration.metric_domain_kwargs.get("row_condition"):
            raise NotObservable(f"{configuration.metric_name} with a row_condition")
        if kind == "unobservable" or (resolution is not None and resolution.id not in resolved):
            raise NotObservable(configuration.metric_name)
        value: Any = resolved[resolution.id] if resolution is not None else None
        if kind == "schema":
            source = ("value", value)
        elif kind == "no values":
            source = ("value", [])
        elif kind == "unexpected_count" and _key_counted(configuration, keys_after, needed_by_drops):
            _, compute_kwargs, accessor_kwargs = value
            columns = accessor_kwargs.get("column_list") or [accessor_kwargs["column"]]
            domain = F.coalesce(row_domain(compute_kwargs, accessor_kwargs, empty.engine), F.lit(False))
            alias = f"k{len(suite.key_counts)}"
            suite.key_counts[alias] = KeyCount(tuple(columns), domain)
            source = ("alias", alias)
        elif kind == "unexpected_count":
            condition, compute_kwargs, accessor_kwargs = value
            domain = row_domain(compute_kwargs, accessor_kwargs, empty.engine)
            column = _check_column(suite, F.coalesce(condition & domain, F.lit(False)))
            source = _count_rows(suite, F.col(column))
            suite.counted_check[source[1]] = column
        elif kind == "filtered_row_count":
            _, compute_kwargs, accessor_kwargs = value
            in_domain = F.coalesce(row_domain(compute_kwargs, accessor_kwargs, empty.engine), F.lit(False))
            source = _count_rows(suite, in_domain)
        else:  # aggregate
            aggregate, compute_kwargs, _ = value
            if compute_kwargs.get("filter_conditions") or compute_kwargs.get("row_condition"):
                raise NotObservable(f"{configuration.metric_name} over filtered rows")
            source = _aggregate(suite, aggregate)
        by_metric[configuration.id] = source
        return source

    for i, needed in needs.items():
        spec = specs[i]
        before = (
            dict(suite.checks),
            dict(suite.aggregates),
            dict(by_metric),
            dict(suite.key_counts),
            dict(suite.counted),
            dict(suite.counted_check),
        )
        try:
            sources = {c.id: source_of(c) for c in needed}
            if probe_each:  # Spark accepts them in an Observation (no distinct, no window in an aggregate)
                _probe(empty.frame, suite)
        except Exception:  # noqa: BLE001 - anything GX or Spark refuses here is left to GX's own validation
            suite.checks, suite.aggregates, by_metric, suite.key_counts, suite.counted, suite.counted_check = before
            continue
        suite.observable[i] = sources
        counted = [c for c in needed if c.metric_name == f"{getattr(expectations[i], 'map_metric', None)}.unexpected_count"]
        if spec.row_level and counted:
            alias = sources[counted[0].id][1]
            if alias in suite.key_counts:  # never a drop's (see _key_counted)
                suite.key_samples[i] = alias
                _sample_expressions(suite, df)
                continue
            suite.failing[i] = suite.counted_check[alias]
            if spec.severity != "drop" and keys_after:  # taken afterwards, and only if it failed
                suite.samples_after[i] = suite.failing[i]
                _sample_expressions(suite, df)
            elif spec.severity != "drop":
                suite.samples[i] = _sample_aggregates(suite, df, suite.failing[i])
    if not probe_each:
        try:
            _probe(empty.frame, suite)
        except Exception:  # noqa: BLE001 - find which expectations Spark refuses
            return plan(df, specs, probe_each=True, keys_after=keys_after)
    return suite


def _key_counted(configuration: Any, keys_after: bool, needed_by_drops: set[Any]) -> bool:
    """A uniqueness count taken from the key columns after the pass (see the module's docstring)."""
    base = configuration.metric_name.rpartition(".")[0]
    return keys_after and base in KEY_COUNTED and configuration.id not in needed_by_drops


def _registered(metric: str, engine: Any) -> bool:
    from great_expectations.expectations.registry import get_metric_provider

    try:
        get_metric_provider(metric, engine)
    except Exception:  # noqa: BLE001 - GX raises several kinds for "no such metric"
        return False
    return True


def _check_column(suite: ObservedSuite, condition: Column) -> str:
    name = f"{CHECK_PREFIX}{len(suite.checks)}"
    suite.checks[name] = condition
    return name


def _aggregate(suite: ObservedSuite, aggregate: Column) -> tuple[str, str]:
    alias = f"m{len(suite.aggregates)}"
    suite.aggregates[alias] = aggregate.alias(alias)
    return ("alias", alias)


def _count_rows(suite: ObservedSuite, condition: Column) -> tuple[str, str]:
    """An aggregate counting the rows meeting `condition`, which the Observation may pack with
    another such count (`ObservedSuite.observation`)."""
    from pyspark.sql import functions as F

    source = _aggregate(suite, F.count_if(condition))
    suite.counted[source[1]] = condition
    return source


def _pair_alias(low: str, high: str) -> str:
    return f"{low}_{high}"


def _sample_expressions(suite: ObservedSuite, df: DataFrame) -> None:
    from pyspark.sql import functions as F

    if suite.sample_row is None:  # one JSON and one hash expression, shared by every sample
        columns = [F.col(f"`{c}`") for c in df.columns]
        suite.sample_row = F.to_json(F.struct(*columns), {"ignoreNullFields": "false"})
        suite.sample_bucket = F.pmod(F.xxhash64(*columns), F.lit(SAMPLE_ROWS))


def _bucket_sample(suite: ObservedSuite, j: int) -> Column:
    """The least failing row (as JSON) of hash bucket j, over rows that are all failing."""
    from pyspark.sql import functions as F

    return F.min(F.when(suite.sample_bucket == j, suite.sample_row))


def _failing_sample(suite: ObservedSuite, failing: Column, j: int) -> Column:
    """The least row (as JSON) of hash bucket j among the rows `failing` holds for. Nested, not
    `failing & bucket == j`: Spark hoists what an And shares across aggregates and would hash
    every row; a CASE's value is only computed for the rows that reach it."""
    from pyspark.sql import functions as F

    return F.min(F.when(failing, F.when(suite.sample_bucket == j, suite.sample_row)))


def _sample_aggregates(suite: ObservedSuite, df: DataFrame, check: str) -> list[str]:
    """Up to SAMPLE_ROWS failing rows, one per hash bucket: constant memory, no extra pass."""
    from pyspark.sql import functions as F

    _sample_expressions(suite, df)
    return [_aggregate(suite, _failing_sample(suite, F.col(check), j))[1] for j in range(SAMPLE_ROWS)]


def _samples(values: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(v) for v in values if v is not None]


def _probe(empty: DataFrame, suite: ObservedSuite) -> None:
    """Spark's analysis of the Observation on the empty frame: raises if it refuses an aggregate."""
    suite.tag(empty).observe("tributary_probe", *suite.observation())
