"""Uniqueness counted from the key columns after the pass, and plans kept per suite: the results
(verdicts, counts, observed values, failing samples) and the quarantined rows are those of the
window in the staging pass, whoever holds the rows afterwards (the output's staged files, the cache)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import delta_rows, write
from tests.test_quality import SUITE_UNDER_TEST

#: every kind of expectation the gate judges from the pass (map, pair, multicolumn, aggregate,
#: schema) and those it leaves to GX, with uniqueness failing as warn and fail
KEYED_SUITE = [
    *SUITE_UNDER_TEST,
    {"expect_compound_columns_to_be_unique": {"column_list": ["customer", "amount"], "mostly": 0.5}, "severity": "fail"},
    {"expect_column_values_to_be_unique": {"column": "amount"}, "severity": "warn"},
    {"expect_table_columns_to_match_set": {"column_set": ["id", "customer", "amount"]}, "severity": "warn"},
    {"expect_column_value_lengths_to_be_between": {"column": "customer", "min_value": 2}, "severity": "warn"},
    {"expect_column_values_to_not_match_regex": {"column": "customer", "regex": "x"}, "severity": "warn"},
]

amounts = st.one_of(st.none(), st.sampled_from([-1.0, 0.0, 5.0, 5.0, 70.0, 200.0]))
customers = st.one_of(st.none(), st.sampled_from(["ann", "bob", "x"]))


def _judge(frame, specs, keys_after: bool) -> list:
    """The gate's judgement of `frame` by one plan: observed in a pass, key counts read afterwards.
    The plan is the one kept for the frame's schema and the suite (`planned`), as a run's is: it
    depends on nothing else, and making it is GX's ~1 s per call."""
    from pyspark.sql import Observation

    from framework.quality.observed import planned

    suite = planned(frame, specs, keys_after=keys_after)
    observation = Observation(f"keys_{keys_after}_{id(suite)}")
    suite.tag(frame).observe(observation, *suite.aggregates.values()).write.format("noop").mode("overwrite").save()
    observed = dict(observation.get)
    key_samples: dict = {}
    check_samples: dict = {}  # the failed warn checks' samples, taken with the key counts as the gate does
    observed |= suite.count_keys(frame, {}, None, key_samples, suite.failing_rows(observed), check_samples)
    results = suite.results(observed, "t", "step", rows=lambda: frame, key_samples=key_samples, check_samples=check_samples)
    return [results.get(i) for i in range(len(specs))]


def _shown(result) -> tuple:
    if result is None:
        return (None,)
    return (
        result.success,
        result.element_count,
        result.unexpected_count,
        result.unexpected_percent,
        json.dumps(result.observed_value),
        json.dumps(result.failing_samples, sort_keys=True),
        result.error,
    )


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(customers, amounts), min_size=0, max_size=25))
def test_key_counted_uniqueness_equals_the_window_in_the_pass(spark, rows):
    """Every result of the suite, failing samples included, is the same whether uniqueness is the
    window in the pass (before) or counted from the key columns afterwards (now)."""
    from framework.spec.expectations import ExpectationSpec

    specs = [ExpectationSpec.model_validate(s) for s in KEYED_SUITE]
    frame = spark.createDataFrame([(i, c, a) for i, (c, a) in enumerate(rows)], "id INT, customer STRING, amount DOUBLE")
    before = _judge(frame, specs, keys_after=False)
    after = _judge(frame, specs, keys_after=True)
    for spec, old, new in zip(specs, before, after, strict=True):
        assert _shown(new) == _shown(old), spec.label


def test_the_pass_has_no_window_for_a_key_counted_uniqueness_and_plans_are_kept(spark):
    from framework.quality.observed import plan, planned
    from framework.spec.expectations import ExpectationSpec

    specs = [ExpectationSpec.model_validate(s) for s in KEYED_SUITE]
    frame = spark.createDataFrame([(1, "ann", 2.0)], "id INT, customer STRING, amount DOUBLE")
    keyed = plan(frame, specs, keys_after=True)
    assert keyed.key_counts and not any("OVER" in str(c).upper() for c in keyed.checks.values())
    assert any("OVER" in str(c).upper() for c in plan(frame, specs).checks.values())  # before: windows in the pass
    drop_unique = [*specs[:1], ExpectationSpec.model_validate({**KEYED_SUITE[5], "severity": "drop"})]
    assert not plan(frame, drop_unique, keys_after=True).key_counts  # a drop needs the row's own condition

    other = spark.createDataFrame([(2, "bob", 3.0)], "id INT, customer STRING, amount DOUBLE")
    assert planned(frame, specs, keys_after=True) is planned(other, specs, keys_after=True)  # same schema and suite
    assert planned(frame, specs[:3], keys_after=True) is not planned(frame, specs, keys_after=True)


ROWS = [
    {"id": 1, "customer": "ann", "amount": 10.0},
    {"id": 2, "customer": None, "amount": 20.0},  # dropped (no customer)
    {"id": 3, "customer": "bob", "amount": 7.0},
    {"id": 4, "customer": "ann", "amount": 10.0},  # same key as 1
    {"id": 5, "customer": "bob", "amount": 7.0},  # same key as 3
    {"id": 6, "customer": "cid", "amount": None},
    {"id": 7, "customer": None, "amount": 20.0},  # dropped, same key as 2
    {"id": 8, "customer": "", "amount": 1.0},  # an empty string: a partition folder would make it null
    {"id": 9, "customer": "", "amount": 1.0},
]

STEP_CHECKS = """\
    expectations:
      - expect_column_values_to_not_be_null: {column: customer}
        severity: drop
      - expect_compound_columns_to_be_unique: {column_list: [customer, amount]}
        severity: warn
      - expect_column_values_to_be_unique: {column: id}
        severity: warn
      - expect_column_values_to_be_between: {column: amount, max_value: 8}
        severity: warn
"""

OUTPUT_CHECKS = """\
    expectations:
      - expect_compound_columns_to_be_unique: {column_list: [customer, amount]}
        severity: warn
      - expect_column_values_to_be_between: {column: amount, max_value: 8}
        severity: warn
"""
#: the expectations whose results the run's rows are compared on: uniqueness (counted after the
#: pass) and a failing warn check (its samples taken with the key counts, in one read)
COMPARED = ("unique", "between")


def _pipeline(project: Path, step_checks: str, output: str, more: str = "") -> None:
    write(
        project / "pipelines" / "orders.yaml",
        "name: orders\nsources:\n  raw: {format: json, path: data/orders, schema: 'id BIGINT, customer STRING, amount DOUBLE'}\n"
        "steps:\n  orders:\n    sql: select id, customer, amount from {{ source('raw') }}\n"
        f"{step_checks}outputs:\n  orders:\n{output}{more}",
    )


@pytest.mark.parametrize(
    ("step_checks", "output", "more"),
    [
        (STEP_CHECKS, "    mode: overwrite\n", ""),  # the output's split write holds the rows
        (STEP_CHECKS, "    partition_by: [customer]\n", ""),  # a key column in folder names: computed again
        (STEP_CHECKS, "    mode: overwrite\n", "  copy: {from: orders, mode: append}\n"),  # two readers: cached
        ("", "    mode: overwrite\n" + OUTPUT_CHECKS, ""),  # the output's own checks, no drop
    ],
    ids=["split-write", "partitioned-by-a-key", "cached", "output-checks"],
)
def test_a_runs_uniqueness_results_are_the_windows(spark, cli, project, step_checks, output, more):
    """A real run's quality rows for uniqueness and a failed warn check equal the window's on the
    same rows (counts and samples)."""
    from framework.spec.expectations import ExpectationSpec

    write(project / "data" / "orders" / "part-0.json", "".join(json.dumps(r) + "\n" for r in ROWS))
    _pipeline(project, step_checks, output, more)
    code, out, err = cli("run", "orders")
    assert code == 0, out + err
    recorded = [
        r for r in delta_rows(project / "warehouse" / "_tributary" / "quality") if any(c in r["expectation"] for c in COMPARED)
    ]

    import yaml

    checks = yaml.safe_load(step_checks or OUTPUT_CHECKS)["expectations"]
    specs = [ExpectationSpec.model_validate(c) for c in checks]
    frame = spark.createDataFrame(
        [(r["id"], r["customer"], r["amount"]) for r in ROWS], "id BIGINT, customer STRING, amount DOUBLE"
    )
    expected = [
        r for s, r in zip(specs, _judge(frame, specs, keys_after=False), strict=True) if any(c in s.name for c in COMPARED)
    ]
    assert len(recorded) == len(expected) == (3 if step_checks else 2)
    for row, old in zip(
        sorted(recorded, key=lambda r: r["expectation"]), sorted(expected, key=lambda r: r.expectation), strict=True
    ):
        assert (row["success"], row["unexpected_count"], row["element_count"]) == (
            old.success,
            old.unexpected_count,
            old.element_count,
        )
        assert json.loads(row["failing_samples"] or "[]") == old.failing_samples
    compound = next(r for r in recorded if r["expectation"] == "expect_compound_columns_to_be_unique")
    assert compound["unexpected_count"] == 8  # ids 1/4, 3/5, 2/7 (customer null, amount not), 8/9
    between = next(r for r in recorded if r["expectation"] == "expect_column_values_to_be_between")
    assert between["unexpected_count"] == 4 and len(json.loads(between["failing_samples"])) > 0  # amounts 10 and 20


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(customers, amounts), min_size=0, max_size=25))
def test_key_counts_by_hash_are_exact_when_keys_collide(spark, rows):
    """The key counts look at a hash of the key first: with a hash of one bit (every other key
    collides) they still equal the counts over the keys themselves, whether the repeated hashes
    are found on the driver (the row count known and small) or by Spark, and counted from their
    rows alone or, past the limit, each key over all its rows; and the failing samples picked
    among the repeated hashes' rows (apart, or with the counts) are those picked among all rows.
    The answers over all rows are taken once an example, and both ways are checked against them."""
    from dataclasses import dataclass

    from pyspark.sql import functions as F

    from framework.quality import observed
    from framework.quality.observed import KeyCount, planned
    from framework.spec.expectations import ExpectationSpec

    @dataclass(frozen=True)
    class OneBitKey(KeyCount):
        def hashed(self):
            return F.pmod(super().hashed(), F.lit(2))

    specs = [ExpectationSpec.model_validate(s) for s in KEYED_SUITE]
    frame = spark.createDataFrame([(i, c, a) for i, (c, a) in enumerate(rows)], "id INT, customer STRING, amount DOUBLE")
    planned_suite = planned(frame, specs, keys_after=True)
    assert planned_suite.key_counts
    exact = {alias: how.count(frame) for alias, how in planned_suite.key_counts.items()}
    one_bit = {alias: OneBitKey(how.columns, how.domain) for alias, how in planned_suite.key_counts.items()}
    reference = copy.copy(planned_suite)
    reference.key_counts = one_bit
    key_samples = {alias: reference.key_failing_samples(frame, alias) for alias in exact}  # picked among all rows
    checks = dict.fromkeys(planned_suite.samples_after, 1)  # the warn row checks' samples, in the same query
    check_samples = {i: reference.failed_samples(frame, [i])[i] for i in checks}
    for on_driver in (True, False):  # the hashes sorted on the driver, or grouped by Spark
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(observed, "_CANDIDATES_KEPT", 1_000)
            patch.setattr(observed, "_SAMPLED_WITH_KEYS", 100_000)
            suite = copy.copy(planned_suite)  # its key counts are replaced below
            known = len(rows) if on_driver else None
            assert suite.count_keys(frame, known_rows=known) == exact, on_driver
            suite.key_counts = one_bit
            repeated: dict[str, list[int]] = {}
            assert suite.count_keys(frame, repeated, known) == exact, on_driver
            assert set(repeated) == set(exact)
            for alias in exact:  # a failed check's samples, picked among the repeated hashes' rows: the same rows
                assert suite.key_failing_samples(frame, alias, repeated[alias]) == key_samples[alias], on_driver
            found: dict[str, list] = {}  # the samples taken with the counts: the same rows again
            assert suite.count_keys(frame, known_rows=known, samples=found) == exact, on_driver
            assert set(found) == {alias for alias in exact if repeated[alias]} & set(suite.key_samples.values())
            for alias, samples in found.items():
                assert samples == key_samples[alias], on_driver
            found, taken = {}, {}
            assert suite.count_keys(frame, known_rows=known, samples=found, checks=checks, check_samples=taken) == exact
            assert set(taken) == (set(checks) if any(repeated.values()) else set())  # only when there is a query
            for i, samples in taken.items():
                assert samples == check_samples[i], on_driver
            patch.setattr(observed, "_SAMPLED_WITH_KEYS", len(checks) - 1)  # too many failing rows: apart
            taken = {}
            assert suite.count_keys(frame, known_rows=known, samples={}, checks=checks, check_samples=taken) == exact
            assert taken == {}
            for alias, samples in found.items():
                assert samples == key_samples[alias], on_driver
            patch.setattr(observed, "_CANDIDATES_KEPT", 1)
            assert suite.count_keys(frame, known_rows=known) == exact, on_driver


def test_a_passed_warn_check_adds_no_sample_to_the_pass(spark):
    """When the checked rows can be read again, failing samples are taken afterwards, for the
    failed checks only: the pass aggregates no row as JSON."""
    from framework.quality.observed import plan
    from framework.spec.expectations import ExpectationSpec

    specs = [ExpectationSpec.model_validate(s) for s in KEYED_SUITE]
    frame = spark.createDataFrame([(1, "ann", 2.0)], "id INT, customer STRING, amount DOUBLE")
    after = plan(frame, specs, keys_after=True)
    assert after.samples_after and not after.samples
    assert not any("to_json" in str(a) for a in after.aggregates.values())
    assert any("to_json" in str(a) for a in plan(frame, specs).aggregates.values())  # in the pass otherwise
