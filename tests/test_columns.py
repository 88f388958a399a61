"""`validate` knows columns: schemas carried from sources through every step kind, and the mistakes
they reveal reported at the template's or the YAML's line with a "did you mean", without a JVM.
A corpus of valid Spark SQL (tests/sql_corpus.py) stays accepted; Spark itself confirms it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.compiler import _for_sqlglot
from framework.schemas.columns import from_ddl, spark_type
from framework.schemas.query import analyze
from tests.conftest import write
from tests.sql_corpus import INVALID, VALID, VIEWS

SCHEMAS = {name: from_ddl(ddl) for name, ddl in VIEWS.items()}


def _analyze(query: str, views=SCHEMAS):  # the compiler's way in
    text = _for_sqlglot(query)
    return analyze(sqlglot.parse_one(text, read="spark"), views, text)


# -- the corpus, without and with Spark --------------------------------------------------------------


@pytest.mark.parametrize("query", VALID)
def test_valid_spark_sql_gets_no_column_finding(query):
    assert _analyze(query).findings == []


@pytest.mark.parametrize(("query", "message"), INVALID)
def test_column_mistakes_are_found(query, message):
    findings = _analyze(query).findings
    assert any(message in f.message for f in findings), findings


def test_spark_runs_the_valid_corpus_refuses_the_invalid_one_and_agrees_on_known_columns(spark):
    """Every VALID query is one Spark analyses, and where validate lists all of a query's output
    columns they are Spark's, in order, with Spark's type wherever validate calls a type certain.
    Every INVALID query is one Spark refuses."""
    from pyspark.errors import AnalysisException

    for name, ddl in VIEWS.items():
        spark.createDataFrame([], ddl).createOrReplaceTempView(name)
    compared = 0
    try:
        for query in VALID:
            fields = spark.sql(query).schema.fields
            schema = _analyze(query).schema
            if not schema.complete:
                continue
            compared += 1
            assert [c.name.lower() for c in schema.columns] == [f.name.lower() for f in fields], query
            for column, field in zip(schema.columns, fields, strict=True):
                if column.known_type is not None:
                    assert column.known_type == spark_type(field.dataType.simpleString()), (query, column)
        for query, _ in INVALID:
            with pytest.raises(AnalysisException):
                spark.sql(query).schema  # noqa: B018 - analysis is the point
    finally:
        for name in VIEWS:
            spark.catalog.dropTempView(name)
    assert compared > len(VALID) // 2  # most outputs are listed in full


_NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=8).map(lambda s: "c_" + s)


@settings(max_examples=60, deadline=None)
@given(columns=st.lists(_NAMES, min_size=1, max_size=6, unique=True), asked=st.lists(_NAMES, min_size=1, max_size=6))
def test_exactly_the_columns_a_view_lacks_are_reported(columns, asked):
    view = from_ddl(", ".join(f"{c} INT" for c in columns))
    query = f"select {', '.join(asked)} from v where {asked[0]} is not null"
    findings = _analyze(query, {"v": view}).findings
    missing = {a for a in asked if a not in columns}
    assert {f.message.split("'")[1] for f in findings} == missing


# -- through the CLI: file, line, hint ------------------------------------------------------------


PIPELINE = """\
name: shop
sources:
  orders:
    format: json
    path: data/orders
    schema: id BIGINT, customer STRING, ts TIMESTAMP, amount DOUBLE, tags ARRAY<STRING>
  refunds:
    format: json
    path: data/refunds
    schema: id BIGINT, ts TIMESTAMP, amount STRING
steps:
  daily:
    sql: daily.sql
outputs:
  daily:
    mode: merge
    keys: [day, customer]
    partition_by: [day]
"""

DAILY = """\
select to_date(ts) as day,
       customer,
       sum(amount) as total
from {{ source('orders') }}
group by to_date(ts), customer
"""


def _shop(project: Path, pipeline: str = PIPELINE, daily: str = DAILY) -> None:
    (project / "data" / "orders").mkdir(parents=True, exist_ok=True)  # no files: Spark reads none
    write(project / "pipelines" / "shop.yaml", pipeline)
    write(project / "sql" / "daily.sql", daily)


def test_the_shop_validates_and_explain_prints_its_columns(cli, project):
    _shop(project)
    code, out, err = cli("validate", "shop", "--explain", "daily")
    assert code == 0, out + err
    assert "columns of sql step 'daily' (pipelines/shop.yaml)" in out
    rows = [line.split("│")[1:4] for line in out.splitlines() if line.startswith("│")]
    assert [[cell.strip() for cell in row] for row in rows] == [
        ["day", "DATE", "inferred"],
        ["customer", "STRING", "certain"],
        ["total", "DOUBLE", "inferred"],
    ]
    code, out, err = cli("validate", "shop", "--explain", "dayly")
    assert code == 2 and "--explain dayly: no step or source of that name" in err and "did you mean 'daily'?" in err


def test_an_unknown_column_is_named_at_its_template_line_with_the_closest(cli, project):
    _shop(project, daily=DAILY.replace("       customer,\n", "       costumer,\n"))
    code, out, err = cli("validate", "shop")
    assert code == 2
    assert "sql/daily.sql:2: step 'daily': unknown column 'costumer'" in err and "did you mean 'customer'?" in err


def test_a_column_outside_group_by_is_named_at_its_line(cli, project):
    _shop(project, daily=DAILY.replace("       sum(amount) as total\n", "       amount,\n       sum(amount) as total\n"))
    code, out, err = cli("validate", "shop")
    assert code == 2
    assert "sql/daily.sql:3: step 'daily': column 'amount' is neither in GROUP BY nor inside an aggregate" in err


def test_merge_keys_and_partitions_the_output_lacks_are_named_at_their_yaml_line(cli, project):
    _shop(project, PIPELINE.replace("keys: [day, customer]", "keys: [day, customr]").replace("[day]\n", "[dy]\n"))
    code, out, err = cli("validate", "shop")
    assert code == 2
    assert "pipelines/shop.yaml:17:17: output 'daily': keys column 'customr' is not a column of step 'daily'" in err
    assert "did you mean 'customer'?" in err
    assert "pipelines/shop.yaml:18:20: output 'daily': partition_by column 'dy' is not a column of step 'daily'" in err


def test_an_expectation_on_a_missing_column_or_a_type_it_cannot_judge_is_named(cli, project):
    checks = """\
    expectations:
      - expect_column_values_to_not_be_null: {column: custmer}
      - expect_column_mean_to_be_between: {column: day, min_value: 0}
        severity: warn
"""
    _shop(project, PIPELINE.replace("    partition_by: [day]\n", "    partition_by: [day]\n" + checks))
    code, out, err = cli("validate", "shop")
    assert code == 2
    assert "pipelines/shop.yaml:20:47: output 'daily': expect_column_values_to_not_be_null names column(s) ['custmer']" in err
    assert "did you mean 'customer'?" in err
    assert "pipelines/shop.yaml:21:44: output 'daily': expect_column_mean_to_be_between" not in err
    # the day's type is sqlglot's inference, not certain: no error; on a declared date it is one
    _shop(
        project,
        PIPELINE.replace("    partition_by: [day]\n", "    partition_by: [day]\n" + checks.replace("custmer", "customer")),
    )
    write(project / "sql" / "daily.sql", DAILY.replace("to_date(ts) as day", "cast(to_date(ts) as date) as day"))
    code, out, err = cli("validate", "shop")
    assert code == 2
    assert (
        "pipelines/shop.yaml:21:44: output 'daily': expect_column_mean_to_be_between needs a numeric column; 'day' is date" in err
    )


def test_union_join_and_swa_columns_are_checked_through_the_steps(cli, project):
    steps = """\
steps:
  both:
    union: [orders, refunds]
  matched:
    join: {left: orders, right: refunds, on: [id, customer], within: {before: 1m, after: 1m}}
  windows:
    swa:
      input: orders
      key: [customer]
      size: 5
      timeout: 1m
      event_time: ts
      aggregates: {spent: sum(amont)}
  daily:
    sql: daily.sql
"""
    _shop(project, PIPELINE.replace("steps:\n  daily:\n    sql: daily.sql\n", steps))
    code, out, err = cli("validate", "shop")
    assert code == 2
    assert "pipelines/shop.yaml:13:21: step 'both': column 'amount' is double in 'orders' but string in 'refunds'" in err
    assert "pipelines/shop.yaml:15:51: step 'matched': key column 'customer' is not in input 'refunds'" in err
    assert "pipelines/shop.yaml:23:20: step 'windows': aggregate 'spent: sum(amont)' cannot run: unknown column 'amont'" in err
    assert "did you mean 'amount'?" in err


def test_a_source_without_a_schema_is_noted_and_what_reads_it_is_not_checked(cli, project):
    pipeline = PIPELINE.replace("    schema: id BIGINT, customer STRING, ts TIMESTAMP, amount DOUBLE, tags ARRAY<STRING>\n", "")
    _shop(
        project,
        pipeline,
        DAILY.replace("       customer,\n", "       customer, whatever,\n").replace("customer\n", "customer, whatever\n"),
    )
    code, out, err = cli("validate", "shop")
    assert code == 0, out + err  # Spark infers the columns at run time: nothing certain to say about 'whatever"
    assert "note: pipelines/shop.yaml:3:3: source 'orders': no schema: Spark infers it when it reads the files" in err


def test_a_group_steps_declared_returns_are_its_columns(cli, project):
    pipeline = project / "pipelines" / "trading_correlation.yaml"
    pipeline.write_text(pipeline.read_text().replace("max(correlation) AS correlation", "max(corelation) AS correlation"))
    code, out, err = cli("validate", "trading_correlation")
    assert code == 2
    assert "pipelines/trading_correlation.yaml:" in err and "unknown column 'corelation'" in err
    assert "did you mean 'correlation'?" in err


def test_a_steps_event_time_must_be_a_timestamp_when_its_type_is_known(cli, project):
    pipeline = textwrap.dedent(
        """\
        name: typed
        sources:
          calls: {format: json, path: data/calls, schema: "page STRING, ms BIGINT"}
        steps:
          windows:
            swa: {input: calls, key: [page], size: 3, timeout: 10s, event_time: ms}
        outputs:
          windows: {}
        """
    )
    write(project / "pipelines" / "typed.yaml", pipeline)
    code, out, err = cli("validate", "typed")
    assert code == 2 and "pipelines/typed.yaml:6:" in err and "event_time column 'ms' is bigint, not a timestamp" in err


def test_parquet_footers_and_delta_logs_give_their_sources_columns(cli, project):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import write_deltalake

    (project / "data" / "facts").mkdir(parents=True)
    pq.write_table(pa.table({"k": ["a"], "v": [1.5]}), project / "data" / "facts" / "part-0.parquet")
    write_deltalake(str(project / "data" / "dims"), pa.table({"k": ["a"], "label": ["first"]}))
    pipeline = textwrap.dedent(
        """\
        name: lookups
        sources:
          facts: {format: parquet, path: data/facts}
          dims: {format: delta, path: data/dims}
        steps:
          joined:
            sql: |
              select f.k, f.v, d.lable
              from {{ source('facts') }} f join {{ source('dims') }} d on f.k = d.k
        outputs:
          joined: {}
        """
    )
    write(project / "pipelines" / "lookups.yaml", pipeline)
    code, out, err = cli("validate", "lookups")
    assert code == 2
    assert "pipelines/lookups.yaml:8: step 'joined': unknown column 'd.lable'" in err and "did you mean 'label'?" in err
    write(project / "pipelines" / "lookups.yaml", pipeline.replace("d.lable", "d.label"))
    code, out, err = cli("validate", "lookups", "--explain", "joined")
    assert code == 0, out + err
    rows = [[cell.strip() for cell in line.split("│")[1:4]] for line in out.splitlines() if line.startswith("│")]
    assert rows == [["k", "STRING", "certain"], ["v", "DOUBLE", "certain"], ["label", "STRING", "certain"]]


SHAPES = """\
name: shapes
sources:
  static_calls:
    format: json
    path: data/samples/service_calls/static
    schema: ts TIMESTAMP, client_ip STRING, head_service STRING, requested_service STRING, response_ms INT
    origin: true
  image_calls:
    format: json
    path: data/samples/service_calls/images
    schema: ts TIMESTAMP, client_ip STRING, head_service STRING, requested_service STRING, response_ms INT
  requests:
    format: text
    path: data/samples/access_log
    event_time: "try_to_timestamp(substring_index(substring_index(value, '[', -1), ']', 1), 'dd/MMM/yyyy:HH:mm:ss Z')"
steps:
  stacked:
    union: [static_calls, image_calls]
  paired:
    join: {left: static_calls, right: image_calls, on: [client_ip], within: {before: 1s, after: 1s}}
  views:
    swa:
      input: stacked
      key: head+client
      columns: {head: head_service, client: client_ip}
      size: 5
      timeout: 10s
      event_time: ts
      aggregates: {total: sum(response_ms), services: collect_set(requested_service)}
  summary:
    sql: |
      select s.head_service, count(*) as calls, max(s.ts) as last, first(s._source) as stream
      from {{ ref('stacked') }} s
      group by s.head_service
  lines:
    sql: select * from {{ source('requests') }}
outputs:
  stacked: {}
  paired: {}
  views: {}
  summary: {}
  lines: {}
"""


def test_the_columns_validate_lists_are_the_columns_spark_writes(spark, cli, project):
    """Each kind's output_schema against a real run: names in order, and every type validate calls
    certain, as the Delta tables hold them."""
    from framework.io.source_schema import delta_log_schema
    from framework.project_context import ProjectContext

    write(project / "pipelines" / "shapes.yaml", SHAPES)
    code, out, err = cli("run", "shapes")
    assert code == 0, out + err
    compiled = ProjectContext.load("shapes", start=project).compiled
    for output in ("stacked", "paired", "views", "summary", "lines"):
        schema = compiled.schemas[output]
        written = from_ddl(delta_log_schema(output, str(project / "warehouse" / output)) or "")
        assert schema.complete, output
        assert schema.names == written.names, output
        for column, actual in zip(schema.columns, written.columns, strict=True):
            if column.known_type is not None:
                assert column.known_type == actual.type, (output, column, actual)
