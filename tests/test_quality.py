"""Expectations (Great Expectations) in the spec: validation without a JVM, drop / warn / fail in
real runs, the quality log, thresholds on integration figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import delta_rows, delta_version, write

PIPELINE = """\
name: orders
sources:
  raw:
    format: json
    path: data/orders
    schema: id BIGINT, customer STRING, amount DOUBLE
steps:
  orders:
    sql: select id, customer, amount, amount * 2 as doubled from {{{{ source('raw') }}}}
    expectations:
{expectations}
outputs:
  orders: {{{output}}}
"""

SUITE = """\
      - expect_column_values_to_not_be_null: {column: customer}
        severity: drop
        meta: {dimension: completeness}
      - expect_column_values_to_be_between: {column: amount, min_value: 0, max_value: 1000}
        severity: drop
      - expect_table_row_count_to_be_between: {min_value: 1}
      - expect_column_mean_to_be_between: {column: amount, min_value: 0, max_value: 10}
        severity: warn
"""


def _orders(project: Path, rows: list[dict], name: str = "part-0.json") -> None:
    write(project / "data" / "orders" / name, "".join(json.dumps(r) + "\n" for r in rows))


def _pipeline(project: Path, expectations: str = SUITE, output: str = "") -> None:
    write(project / "pipelines" / "orders.yaml", PIPELINE.format(expectations=expectations, output=output))


ROWS = [
    {"id": 1, "customer": "ann", "amount": 10.0},
    {"id": 2, "customer": None, "amount": 20.0},  # no customer: dropped
    {"id": 3, "customer": "bob", "amount": -5.0},  # negative: dropped
    {"id": 4, "customer": "cid", "amount": 30.0},
    {"id": 5, "customer": None, "amount": 5000.0},  # both: dropped once, both reasons
    {"id": 6, "customer": "dee", "amount": None},  # null amount: GX's between ignores nulls, kept
]


# -- validation without a JVM -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expectations", "line", "expected"),
    [
        (
            "      - expect_column_values_to_not_be_nul: {column: customer}\n",
            11,
            "unknown expectation 'expect_column_values_to_not_be_nul'; did you mean 'expect_column_values_to_not_be_null'?",
        ),
        (
            "      - expect_column_values_to_be_between: {colum: amount, min_value: 0}\n",
            11,
            "unknown argument 'colum'; did you mean 'column'?",
        ),
        (
            "      - expect_column_values_to_be_in_set: {column: customer, value_set: ann}\n",
            11,
            "argument 'value_set' must be array or object, not string",
        ),
        (
            "      - expect_table_row_count_to_be_between: {min_value: 1}\n        severity: drop\n",
            11,
            "judges the whole table, not single rows, so it cannot drop rows",
        ),
        (
            "      - expect_column_values_to_not_be_null: {column: customer}\n        severity: sometimes\n",
            12,
            "'sometimes' is not allowed; expected 'warn', 'drop' or 'fail'",
        ),
        (
            "      - expect_column_values_to_be_between: {column: correct_rate, min_value: 0.9}\n        on: integration\n",
            11,
            "only swa and tumbling steps with truth: have integration figures",
        ),
        (  # Spark runs it with java.util.regex: the run failed with a PatternSyntaxException, exit 1
            "      - expect_column_values_to_match_regex: {column: customer, regex: '([a-z'}\n        severity: drop\n",
            11,
            "regex '([a-z' is not a regular expression Java reads",
        ),
        (
            "      - expect_column_values_to_be_between: {column: amount, min_value: 10, max_value: 0}\n",
            11,
            "min_value 10 is more than max_value 0",
        ),
        (  # every row would be quarantined
            "      - expect_column_values_to_be_in_set: {column: customer, value_set: []}\n        severity: drop\n",
            11,
            "value_set is empty, so every value fails it",
        ),
        (  # Great Expectations looks the name up in pyspark.sql.types: the run failed with "No recognized spark types"
            "      - expect_column_values_to_be_of_type: {column: amount, type_: INT}\n",
            11,
            "type_ 'INT' is not a Spark type name Great Expectations knows: write IntegerType",
        ),
        (  # one unknown name in a list was dropped silently
            "      - expect_column_values_to_be_in_type_list: {column: customer, type_list: [StringType, varchar]}\n",
            11,
            "type_list 'varchar' is not a Spark type name Great Expectations knows: write StringType",
        ),
        (  # no value compares with NaN
            "      - expect_column_values_to_be_between: {column: amount, min_value: .nan}\n",
            11,
            "min_value is NaN (not a number)",
        ),
        (  # with drop, the run failed with an internal KeyError
            "      - expect_column_values_to_be_between: {column: customer, min_value: 0, max_value: 9}\n        severity: drop\n",
            11,
            "compares numbers, dates or times; 'customer' is string",
        ),
    ],
)
def test_a_bad_expectation_is_named_with_file_and_line_at_validate_time(cli, project, expectations, line, expected):
    _pipeline(project, expectations)
    code, out, err = cli("validate", "orders")
    assert code == 2, out + err
    assert f"orders.yaml:{line}:" in out + err
    assert expected in out + err


def test_the_spark_type_names_validate_takes_are_pysparks():
    import pyspark.sql.types

    from framework.spec.expectation_catalog import SPARK_TYPE_NAMES

    assert all(isinstance(getattr(pyspark.sql.types, name, None), type) for name in SPARK_TYPE_NAMES)


def test_a_regex_that_repeats_a_repetition_is_a_warning_at_its_line(cli, project):
    """Java's regex has no time limit: `(\\w+\\s?)*$` over a long value that almost matches takes
    exponential time, and the run never ends. validate says where, and the run still goes."""
    slow = "      - expect_column_values_to_match_regex: {column: customer, regex: '^(\\w+\\s?)*$'}\n        severity: warn\n"
    safe = (
        "      - expect_column_values_to_match_regex: {column: customer, regex: '^([a-z]+\\.)+[a-z]+$'}\n        severity: warn\n"
    )
    _orders(project, ROWS)
    _pipeline(project, slow + safe)
    code, out, err = cli("validate", "orders")
    assert code == 0, out + err
    assert "orders.yaml:11:" in out + err and "repeats a repetition" in out + err
    assert "orders.yaml:13:" not in out + err  # each round ends at its dot: one way to match


@pytest.mark.parametrize(
    "pattern, slow",
    [
        (r"(a+)+$", True),
        (r"(\d+\.?)*$", True),
        (r"(?:a*)*", True),
        (r"(.*,)*x", True),
        (r"(a|b+)+", True),
        (r"^\d{1,3}(\.\d{1,3}){3}$", False),
        (r"^[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}$", False),
        (r"(\.[a-z]+)+", False),
        (r"([^,]*,)*", False),
        (r"(a+b+)+", False),
        (r"(a++)+", False),
        (r"(?>a+)+", False),
    ],
)
def test_which_patterns_repeat_a_repetition(pattern, slow):
    from framework.spec.java_regex import repeats_a_repetition

    assert repeats_a_repetition(pattern) is slow


def test_an_integration_threshold_names_an_unknown_figure(cli, project):
    pipeline = project / "pipelines" / "service_instances.yaml"
    pipeline.write_text(pipeline.read_text().replace("column: completeness_100", "column: completeness_1"))
    code, out, err = cli("validate", "service_instances")
    assert code == 2, out + err
    assert "'completeness_1' is not an integration figure" in out + err and "did you mean 'completeness_100'?" in out + err


def test_a_streaming_pipeline_with_expectations_is_bad_input(cli, project):
    text = PIPELINE.format(expectations=SUITE, output="mode: append").replace("name: orders\n", "name: orders\nmode: streaming\n")
    write(project / "pipelines" / "orders.yaml", text)
    code, out, err = cli("validate", "orders")
    assert code == 2, out + err
    assert "expect_table_row_count_to_be_between with severity fail is checked in batch runs only" in out + err
    assert "expect_column_mean_to_be_between with severity warn" in out + err
    assert "expect_column_values_to_not_be_null" not in out + err  # drop: judged per micro-batch


def test_the_catalog_describes_the_installed_great_expectations():
    """validate reads gx_catalog.json instead of importing GX: it must match the installed GX
    (after an upgrade: python -m framework.quality.catalog)."""
    from framework.quality.catalog import CATALOG_FILE, build_catalog

    assert json.loads(CATALOG_FILE.read_text()) == json.loads(json.dumps(build_catalog()))


def test_the_integration_columns_are_those_of_the_integration_table():
    from framework.integration.evaluation import StepEvaluation, metrics_rows
    from framework.integration.metrics import IntegrationMetrics
    from framework.spec.expectations import INTEGRATION_COLUMNS

    metrics = IntegrationMetrics(1, 1, 1, {1.0: 1.0, 0.85: 1.0, 0.75: 1.0}, 1.0, 1.0, 1.0, 1, 1.0, 1, 1.0)
    table = metrics_rows([StepEvaluation("s", "swa", "head", 13, 22.0, metrics)], "run", "p")
    assert tuple(table.column_names) == INTEGRATION_COLUMNS


# -- drop: GX's definition, one pass, nothing lost ----------------------------------------------


amounts = st.one_of(st.none(), st.floats(min_value=-50, max_value=150, allow_nan=False))
customers = st.one_of(st.none(), st.sampled_from(["ann", "bob", "x"]))


SUITE_UNDER_TEST = [
    {"expect_column_values_to_not_be_null": {"column": "customer"}, "severity": "drop"},
    {"expect_column_values_to_be_between": {"column": "amount", "min_value": 0, "max_value": 100}, "severity": "drop"},
    {"expect_column_values_to_be_in_set": {"column": "customer", "value_set": ["ann", "bob"]}, "severity": "drop"},
    {"expect_column_values_to_match_regex": {"column": "customer", "regex": "^[ab]", "mostly": 0.5}, "severity": "warn"},
    {"expect_column_values_to_be_unique": {"column": "customer"}, "severity": "warn"},
    {"expect_compound_columns_to_be_unique": {"column_list": ["customer", "amount"]}, "severity": "warn"},
    {"expect_column_pair_values_a_to_be_greater_than_b": {"column_A": "amount", "column_B": "id"}, "severity": "warn"},
    {"expect_column_mean_to_be_between": {"column": "amount", "min_value": 10, "max_value": 60}, "severity": "warn"},
    {"expect_column_max_to_be_between": {"column": "amount", "max_value": 120}, "severity": "warn"},
    {"expect_table_row_count_to_be_between": {"min_value": 3}, "severity": "warn"},
    {"expect_column_median_to_be_between": {"column": "amount", "min_value": 0, "max_value": 50}, "severity": "warn"},
    {
        "expect_column_values_to_be_between": {
            "column": "amount",
            "min_value": 0,
            "max_value": 50,
            "row_condition": "id > 2",
            "condition_parser": "spark",
        },
        "severity": "warn",
    },
    {"expect_column_unique_value_count_to_be_between": {"column": "customer", "min_value": 2}, "severity": "warn"},
]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(customers, amounts), min_size=1, max_size=30))
def test_observed_verdicts_equal_gx_validation_and_drops_are_gx_unexpected_rows(spark, rows):
    """The gate judges from metrics observed in the run's own pass; GX validating the same rows
    itself must agree on every expectation, and the dropped rows are exactly the unexpected ones.
    The pass packs its counts two to a sum: unpacked, or (as past 2^32 rows, here past 1) counted
    again from the checked rows, they are GX's. Both ways are judged against one validation by GX
    (its ~2 s an example is most of this test's time)."""
    from pyspark.sql import functions as F

    from framework.operators import REASON
    from framework.quality import observed
    from framework.quality.gate import MASK, QualityGate
    from framework.quality.suite import check
    from framework.spec.expectations import ExpectationSpec

    specs = [ExpectationSpec.model_validate(s) for s in SUITE_UNDER_TEST]
    frame = spark.createDataFrame([(i, c, a) for i, (c, a) in enumerate(rows)], "id INT, customer STRING, amount DOUBLE")
    by_gx = check(frame, "t", "step", specs)

    def fails(customer, amount):  # the rule in plain Python (nulls are ignored by between/in_set)
        return customer is None or (amount is not None and not 0 <= amount <= 100) or (customer not in (None, "ann", "bob"))

    for packed, exact_below in (("unpacked", observed._PACKED_EXACT_BELOW), ("counted again", 1)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(observed, "_PACKED_EXACT_BELOW", exact_below)
            gate = QualityGate()
            tagged = gate.attach("t", "step", frame, specs, persist=lambda f: f, split=True)
            quarantined = gate.quarantined("t", "step", tagged)
            staged = quarantined.withColumn("dropped", F.col(REASON).isNotNull()).collect()  # the run's pass
            gate.check_rows()

        for spec, ours, theirs in zip(specs, gate.results, by_gx, strict=True):
            assert (ours.success, ours.element_count, ours.unexpected_count, ours.error) == (
                theirs.success,
                theirs.element_count,
                theirs.unexpected_count,
                theirs.error,
            ), (packed, spec.label)
            assert ours.observed_value == pytest.approx(theirs.observed_value), (packed, spec.label)

        dropped = {r.id for r in staged if r.dropped}
        assert dropped == {i for i, (c, a) in enumerate(rows) if fails(c, a)}, packed
        for spec, result in zip(specs[:3], gate.results, strict=False):
            reasons = sum(1 for r in staged if r.dropped and spec.label in r[REASON])
            assert result.unexpected_count == reasons, (packed, spec.label)
        assert MASK not in quarantined.columns, packed


def test_planning_the_observed_checks_runs_no_spark_job(spark):
    """Attaching a suite only builds expressions (GX resolves them on an empty frame): a Spark
    job here would cost every checked step a round trip before it even runs."""
    from framework.quality.observed import plan
    from framework.spec.expectations import ExpectationSpec

    specs = [ExpectationSpec.model_validate(s) for s in SUITE_UNDER_TEST]
    frame = spark.createDataFrame([(1, "ann", 2.0)], "id INT, customer STRING, amount DOUBLE")
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("plan-observed-checks", "test")
    try:
        planned = plan(frame, specs)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert tracker.getJobIdsForGroup("plan-observed-checks") == []
    assert planned.fallback == [10, 11, 12]  # median, row_condition, distinct count: GX validates those itself


def test_a_long_value_is_cut_in_the_reason_and_kept_whole_in_the_record(cli, project):
    """A 1 MB value was copied into the quarantine's reason as well as its record."""
    long = "x" * 5000
    _orders(project, [{"id": 1, "customer": long, "amount": 1.0}, {"id": 2, "customer": "ann", "amount": 2.0}])
    _pipeline(
        project, "      - expect_column_value_lengths_to_be_between: {column: customer, max_value: 10}\n        severity: drop\n"
    )
    code, out, err = cli("run", "orders")
    assert code == 0, out + err
    (row,) = [r for r in delta_rows(project / "warehouse" / "_tributary" / "quarantine") if r["source"] == "orders"]
    assert json.loads(row["record"])["customer"] == long
    assert f"customer={'x' * 200}… (5000 characters)" in row["reason"] and len(row["reason"]) < 400


def test_drop_quarantines_failing_rows_and_the_rest_go_on(spark, cli, project):
    _orders(project, ROWS)
    _pipeline(project)
    code, out, err = cli("run", "orders")
    assert code == 0, out + err
    written = {r["id"] for r in delta_rows(project / "warehouse" / "orders")}
    quarantined = [r for r in delta_rows(project / "warehouse" / "_tributary" / "quarantine") if r["source"] == "orders"]
    assert written == {1, 4, 6}
    assert sorted(json.loads(r["record"])["id"] for r in quarantined) == [2, 3, 5]
    assert len(written) + len(quarantined) == len(ROWS)  # passed + quarantined = input, always
    both = next(r["reason"] for r in quarantined if json.loads(r["record"])["id"] == 5)
    assert "expect_column_values_to_not_be_null(column=customer): customer=null" in both
    assert "expect_column_values_to_be_between(column=amount, min_value=0, max_value=1000): amount=5000.0" in both

    results = {r["expectation"]: r for r in delta_rows(project / "warehouse" / "_tributary" / "quality")}
    assert len(results) == 4 and {r["run_id"] for r in results.values()} == {quarantined[0]["run_id"]}
    not_null = results["expect_column_values_to_not_be_null"]
    assert (not_null["success"], not_null["unexpected_count"], not_null["quarantined"], not_null["element_count"]) == (
        False,
        2,
        2,
        6,
    )
    assert not_null["dimension"] == "completeness" and not_null["severity"] == "drop"
    mean = results["expect_column_mean_to_be_between"]  # warn: recorded, the run went on
    assert mean["success"] is False and mean["severity"] == "warn" and json.loads(mean["observed_value"]) > 10
    assert results["expect_table_row_count_to_be_between"]["success"] is True
    assert "quality (Great Expectations)" in out
    assert _step_rows(project) == 3  # the step's rows are those its drop expectations let through


def _step_rows(project: Path, step: str = "orders") -> int:
    """The step's row count the run logged (counted by the checks' own Observation)."""
    (ended,) = [
        e for e in delta_rows(project / "warehouse" / "_tributary" / "events") if e["event"] == "step_end" and e["name"] == step
    ]
    return ended["rows"]


def test_a_step_with_warn_checks_only_counts_every_row(spark, cli, project):
    _orders(project, ROWS)
    _pipeline(project, "      - expect_column_values_to_not_be_null: {column: customer}\n        severity: warn\n")
    code, out, err = cli("run", "orders")
    assert code == 0, out + err
    assert len(delta_rows(project / "warehouse" / "orders")) == _step_rows(project) == len(ROWS)


@pytest.mark.parametrize(
    ("output", "extra_outputs"),
    [
        ("partition_by: [customer]", ""),  # the output splits its write: partitions under the split
        ("", "  copy: {from: orders, mode: append}\n"),  # two readers: persisted, masked rows read again
    ],
    ids=["split-write-partitioned", "two-readers"],
)
def test_drops_lose_nothing_whoever_reads_the_step(spark, cli, project, output, extra_outputs):
    _orders(project, ROWS)
    _pipeline(project, SUITE, output)
    path = project / "pipelines" / "orders.yaml"
    path.write_text(path.read_text() + extra_outputs)
    code, out, err = cli("run", "orders")
    assert code == 0, out + err
    quarantined = delta_rows(project / "warehouse" / "_tributary" / "quarantine")
    assert sorted(json.loads(r["record"])["id"] for r in quarantined) == [2, 3, 5]  # once, not once per reader
    tables = ["orders", "copy"] if extra_outputs else ["orders"]
    for table in tables:
        rows = delta_rows(project / "warehouse" / table)
        assert sorted((r["id"], r["customer"], r["amount"]) for r in rows) == [
            (1, "ann", 10.0),
            (4, "cid", 30.0),
            (6, "dee", None),
        ]
    results = {r["expectation"]: r for r in delta_rows(project / "warehouse" / "_tributary" / "quality")}
    assert results["expect_column_values_to_be_between"]["quarantined"] == 2
    assert _step_rows(project) == 3


def test_a_failing_fail_expectation_commits_nothing(spark, cli, project):
    _orders(project, [r for r in ROWS if r["customer"] and (r["amount"] or 0) >= 0])
    fail_suite = "      - expect_column_values_to_be_between: {column: amount, min_value: 0, max_value: 1000}\n"
    _pipeline(project, fail_suite)
    assert cli("run", "orders")[0] == 0
    assert delta_version(project / "warehouse" / "orders") == 0

    _orders(project, [{"id": 9, "customer": "eve", "amount": 99999.0}], name="part-1.json")
    code, out, err = cli("run", "orders")
    assert code == 1, out + err
    assert "expectation(s) with severity fail did not pass, nothing was committed" in out + err
    assert delta_version(project / "warehouse" / "orders") == 0  # the table is where it was
    assert 9 not in {r["id"] for r in delta_rows(project / "warehouse" / "orders")}
    failed = [r for r in delta_rows(project / "warehouse" / "_tributary" / "quality") if not r["success"]]
    assert len(failed) == 1 and failed[0]["unexpected_count"] == 1
    assert json.loads(failed[0]["failing_samples"]) == [{"id": 9, "customer": "eve", "amount": 99999.0, "doubled": 199998.0}]
    ends = [r for r in delta_rows(project / "warehouse" / "_tributary" / "events") if r["event"] == "run_end"]
    assert sorted(r["status"] for r in ends) == ["failed", "ok"]
    assert "staged, not committed" in out and "not committed" in out
    from framework.engine.events import RECENT_RUNS_SQL
    from framework.io.delta.delta_rs import DeltaRsStore

    listed = DeltaRsStore().query(str(project / "warehouse" / "_tributary" / "events"), RECENT_RUNS_SQL.format(limit=5))
    written = {r["status"]: r["rows_written"] for r in listed.to_pylist()}
    assert written["ok"] > 0 and not written["failed"]  # `tributary runs`: the failed run wrote no rows
    assert cli("runs")[0] == 0


def test_output_expectations_drop_only_from_that_output(spark, cli, project):
    _orders(project, ROWS)
    output = (
        "expectations: [{expect_column_values_to_be_between: {column: amount, min_value: 0, max_value: 100}, severity: drop}]"
    )
    _pipeline(project, "      - expect_table_row_count_to_be_between: {min_value: 1}\n", output)
    code, out, err = cli("run", "orders")
    assert code == 0, out + err
    assert {r["id"] for r in delta_rows(project / "warehouse" / "orders")} == {1, 2, 4, 6}
    quarantined = delta_rows(project / "warehouse" / "_tributary" / "quarantine")
    assert {r["source"] for r in quarantined} == {"output:orders"}
    assert sorted(json.loads(r["record"])["id"] for r in quarantined) == [3, 5]


def test_an_expectation_on_a_missing_column_is_exit_2(spark, cli, project):
    _orders(project, ROWS)
    _pipeline(project, "      - expect_column_values_to_not_be_null: {column: customr}\n")
    code, out, err = cli("run", "orders")
    assert code == 2, out + err
    assert "orders.yaml:11:" in out + err and "names column(s) ['customr'] that it does not have" in out + err


def test_an_integration_threshold_below_the_figures_stops_the_example_before_commit(spark, cli, project):
    code, out, err = cli("generate", "service-trace", "--instances", "800", "--files", "2", "--corrupt", "12")
    assert code == 0, out + err
    pipeline = project / "pipelines" / "service_instances.yaml"
    text = pipeline.read_text().replace("size: 32000", "size: 2000").replace("min_value: 0.985", "min_value: 0.9")
    pipeline.write_text(text.replace("column: completeness_100, min_value: 0.8", "column: completeness_100, min_value: 0.9999"))
    code, out, err = cli("run", "service_instances")
    assert code == 1, out + err
    assert "completeness_100" in out + err and "nothing was committed" in out + err
    assert delta_version(project / "warehouse" / "instances") is None
    results = delta_rows(project / "warehouse" / "_tributary" / "quality")
    integration = {r["kwargs"]: r for r in results if r["scope"] == "integration"}
    assert len(integration) == 2
    completeness = next(r for k, r in integration.items() if "completeness_100" in k)
    assert completeness["success"] is False and 0.5 < json.loads(completeness["observed_value"]) < 0.9999
    drops = [r for r in results if r["scope"] == "step" and r["severity"] == "drop"]
    assert sum(r["unexpected_count"] for r in drops) >= 12  # the glitches, each caught by its expectation
    assert sum(r["quarantined"] for r in drops) == 0  # a run that committed nothing quarantined nothing


def test_an_expectation_gx_cannot_evaluate_is_an_error_not_a_silent_failure(spark):
    from framework.quality.suite import check
    from framework.spec.expectations import ExpectationSpec

    frame = spark.createDataFrame([("a",), ("b",)], "name STRING")
    # (a regex Java refuses is refused before: framework.spec.expectation_catalog)
    spec = ExpectationSpec.model_validate(
        {"expect_column_values_to_be_between": {"column": "name", "min_value": 0, "max_value": 9}}
    )
    (result,) = check(frame, "t", "step", [spec])
    assert result.success is False and result.error and result.blocks_run


STREAM_CHECKED = """\
name: checked
mode: streaming
sources:
  raw:
    format: json
    path: data/orders
    schema: id BIGINT, customer STRING, amount DOUBLE, ts TIMESTAMP
    event_time: ts
    watermark: 5s
steps:
  orders:                      # read by two steps: refused rows leave the stream (their own query)
    sql: select id, customer, amount, ts from {{ source('raw') }}
    expectations:
      - expect_column_values_to_not_be_null: {column: customer}
        severity: drop
  big:                         # its output is its only reader: split in the output's sink
    sql: select id, customer, amount from {{ ref('orders') }}
    expectations:
      - expect_column_values_to_be_between: {column: amount, min_value: 0, max_value: 1000}
        severity: drop
  sessions:                    # per micro-batch: its rows exist only in its output's sink
    swa: {input: orders, key: [customer], size: 2, timeout: 10s, event_time: ts, aggregates: {total: sum(amount)}}
outputs:
  big: {mode: append}
  sessions:
    mode: append
    expectations:
      - expect_column_values_to_be_between: {column: total, min_value: 0, max_value: 100}
        severity: drop
"""


def test_a_stream_drops_rows_failing_row_level_expectations_into_the_quarantine(spark, cli, project):
    """Every input row is in `big` or refused by exactly one check; the SWA output's check judges
    the windows the operator emits; the quality log counts each expectation's refused rows."""
    rows = [
        {"id": 1, "customer": "ann", "amount": 10.0, "ts": "2026-11-02T08:00:00"},
        {"id": 2, "customer": None, "amount": 20.0, "ts": "2026-11-02T08:00:01"},  # orders: no customer
        {"id": 3, "customer": "bob", "amount": 5000.0, "ts": "2026-11-02T08:00:02"},  # big: amount; sessions: total
        {"id": 4, "customer": "ann", "amount": 30.0, "ts": "2026-11-02T08:00:03"},
        {"id": 5, "customer": "bob", "amount": 1.0, "ts": "2026-11-02T08:00:04"},
        {"id": 6, "customer": "cid", "amount": 2.0, "ts": "2026-11-02T09:00:00"},  # moves the watermark on
    ]
    write(project / "data" / "orders" / "part-0.json", "".join(json.dumps(r) + "\n" for r in rows))
    write(project / "pipelines" / "checked.yaml", STREAM_CHECKED)
    code, out, err = cli("run", "checked")
    assert code == 0, out + err

    warehouse = project / "warehouse"
    quarantine = delta_rows(warehouse / "_tributary" / "quarantine")
    refused = {(r["source"], json.loads(r["record"]).get("id")) for r in quarantine}
    assert {(s, i) for s, i in refused if s != "sessions"} == {("orders", 2), ("big", 3)}
    assert sorted(r["id"] for r in delta_rows(warehouse / "big")) == [1, 4, 5, 6]
    sessions = delta_rows(warehouse / "sessions")
    assert sorted((r["customer"], r["total"]) for r in sessions) == [("ann", 40.0)]  # bob's 5001 refused
    refused_windows = [json.loads(r["record"]) for r in quarantine if r["source"] == "sessions"]
    assert [(w["customer"], w["total"]) for w in refused_windows] == [("bob", 5001.0)]
    assert all("expect_column_values_to_be_between" in r["reason"] for r in quarantine if r["source"] != "orders")

    quality = {(r["target"], r["expectation"]): r for r in delta_rows(warehouse / "_tributary" / "quality")}
    assert quality[("orders", "expect_column_values_to_not_be_null")]["unexpected_count"] == 1
    big = quality[("big", "expect_column_values_to_be_between")]
    assert (big["element_count"], big["unexpected_count"], big["success"]) == (5, 1, False)
    assert quality[("sessions", "expect_column_values_to_be_between")]["unexpected_count"] == 1
    assert "quarantined" in out

    assert cli("run", "checked")[0] == 0  # nothing new: nothing quarantined twice
    assert len(delta_rows(warehouse / "_tributary" / "quarantine")) == len(quarantine)


def test_a_replayed_stream_batch_writes_its_quarantine_rows_once(spark, cli, project):
    """Spark replays a batch whose commit its checkpoint did not record (a crash after the Delta
    commits): every table a batch writes, the side tables included, must skip it."""
    rows = [
        {"id": i, "customer": None if i % 4 == 0 else f"c{i % 3}", "amount": 5000.0 if i % 5 == 0 else 1.0,
         "ts": f"2026-11-02T08:00:{i:02d}"}
        for i in range(1, 30)
    ] + [{"id": 99, "customer": "late", "amount": 1.0, "ts": "2026-11-02T07:00:00"}]  # fmt: skip
    write(project / "data" / "orders" / "part-0.json", "".join(json.dumps(r) + "\n" for r in rows[:20]) + "{not json\n")
    write(project / "pipelines" / "checked.yaml", STREAM_CHECKED)
    assert cli("run", "checked")[0] == 0
    write(project / "data" / "orders" / "part-1.json", "".join(json.dumps(r) + "\n" for r in rows[20:]) + "{not json\n")
    assert cli("run", "checked")[0] == 0
    internal = project / "warehouse" / "_tributary"
    before = {
        t: sorted(map(str, delta_rows(internal / t, "record"))) for t in ("quarantine", "late_rows") if (internal / t).exists()
    }
    assert "quarantine" in before and len(before["quarantine"]) > 4

    outputs = {o: sorted(map(str, delta_rows(project / "warehouse" / o))) for o in ("big", "sessions")}
    # a crash after the side tables' commits and before the outputs': the outputs' last commits
    # never happened, and no query recorded its last batch, so Spark replays it
    for output in outputs:
        log = project / "warehouse" / output / "_delta_log"
        newest = max(log.glob("*.json"))
        newest.unlink()
        (log / f"{newest.stem}.crc").unlink(missing_ok=True)
    for commits in (internal / "checkpoints" / "checked").glob("*/commits"):
        last = max((p for p in commits.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
        last.unlink()
        (commits / f".{last.name}.crc").unlink(missing_ok=True)
    code, out, err = cli("run", "checked")
    assert code == 0, out + err
    assert {o: sorted(map(str, delta_rows(project / "warehouse" / o))) for o in outputs} == outputs
    after = {t: sorted(map(str, delta_rows(internal / t, "record"))) for t in before}
    assert after == before, "a replayed batch wrote its side rows again"


def test_a_skipped_reruns_quality_rows(spark, cli, project):
    """An identical rerun commits nothing: its checks ran (their counts are the data's), but it
    quarantined nothing, and its quality rows name the run whose commit holds the rows."""
    _orders(project, ROWS)
    _pipeline(project)
    assert cli("run", "orders")[0] == 0
    code, out, err = cli("run", "orders")
    assert code == 0, out + err
    events = delta_rows(project / "warehouse" / "_tributary" / "events")
    first, rerun = (r["run_id"] for r in sorted((e for e in events if e["event"] == "run_start"), key=lambda e: e["ts"]))
    outputs = [e for e in events if e["event"] == "output_end" and e["run_id"] == rerun]
    assert outputs and {e["status"] for e in outputs} == {"skipped"}  # the rerun changed nothing

    quarantine = delta_rows(project / "warehouse" / "_tributary" / "quarantine")
    assert {r["run_id"] for r in quarantine} == {first} and len(quarantine) == 3
    quality = delta_rows(project / "warehouse" / "_tributary" / "quality")
    drops = {(r["run_id"], r["expectation"]): r for r in quality if r["severity"] == "drop"}
    for expectation in ("expect_column_values_to_not_be_null", "expect_column_values_to_be_between"):
        assert drops[(first, expectation)]["quarantined"] == 2
        again = drops[(rerun, expectation)]
        assert again["unexpected_count"] == 2  # the checks ran, on the same rows
        assert again["quarantined"] == 0  # ... and quarantined nothing: the first run's commit holds those rows
    assert {r["run_id"]: r.get("written_by") for r in quality} == {first: None, rerun: first}
    assert "2 quarantined" not in out.split("quality (Great Expectations)")[-1]  # the run's summary counts none either


def test_the_pass_observes_its_counts_two_to_a_sum(spark):
    """The pass's Observation has fewer aggregates than the suite has metrics: each two counts of
    rows are one 64-bit sum (Spark updates every aggregate of an Observation row by row)."""
    from framework.quality.observed import plan
    from framework.spec.expectations import ExpectationSpec

    specs = [ExpectationSpec.model_validate(s) for s in SUITE_UNDER_TEST]
    frame = spark.createDataFrame([], "id INT, customer STRING, amount DOUBLE")
    suite = plan(frame, specs, keys_after=True)
    counts = len(suite.counted)
    assert counts >= 4
    pairs = counts // 2  # each pair is one sum; an odd one out stays as it is; and the row count
    assert len(suite.observation()) == len(suite.aggregates) - pairs + 1
