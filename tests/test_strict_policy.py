"""The strict SQL policy (`sql_policy: strict`) is an allow-list: a step reads only its declared
sources and refs and its own CTEs, and calls only Spark's built-in functions (minus those that
reach outside the query) and the project's udfs. `validate` refuses the rest at the template's
line; a run checks the exact text it hands to Spark again, with sqlglot and with Spark's own
parser. Spark's `${...}` substitution is off under every policy: a var stays data."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO, delta_rows, empty_generated_folders, write

PIPELINE = """\
name: safe
vars:
  x: plain
sources:
  calls: {{format: json, path: data/samples/service_calls/static, schema: "ts TIMESTAMP, head_service STRING, response_ms INT"}}
steps:
  picked:
    sql: |
{sql}
outputs:
  picked: {{mode: overwrite}}
"""

LINE = "pipelines/safe.yaml:9:"  # the first line of the step's SQL


def _pipeline(project: Path, sql: str) -> None:
    write(project / "pipelines" / "safe.yaml", PIPELINE.format(sql="\n".join("      " + line for line in sql.splitlines())))


def _strict(project: Path) -> None:
    with (project / "configs" / "local.yaml").open("a") as profile:
        profile.write("sql_policy: strict\n")


def _refused(cli, project: Path, sql: str, *words: str, line: str = LINE) -> str:
    _pipeline(project, sql)
    _strict(project)
    code, out, err = cli("validate", "pipelines/safe.yaml")
    assert code == 2, (out, err)
    assert line in err and "which the strict SQL policy refuses" in err and "(the profile's sql_policy: strict)" in err, err
    for word in words:
        assert word in err, err
    return err


# -- script transforms --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        """select transform(head_service) using 'sh -c "cat secret.txt"' as (out) from {{ source('calls') }}""",
        "select TRANSFORM(head_service, response_ms) USING 'id' from {{ source('calls') }}",
        "select * from (select transform(*) row format delimited using 'id' from {{ source('calls') }}) t",
        "from {{ source('calls') }} select transform(head_service) using 'id'",
    ],
)
def test_strict_refuses_script_transform_at_validate(cli, project, sql):
    _refused(cli, project, sql, "TRANSFORM ... USING", "runs a program")


# -- what a query reads -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relation", "shown"),
    [
        ("`org.apache.spark.sql.execution.datasources.text.TextFileFormat`.`/etc/hostname`", "TextFileFormat"),
        ("`org.apache.spark.sql.execution.datasources.v2.text.TextDataSourceV2`.`/etc/hostname`", "TextDataSourceV2"),
        ("`parquet`.`/x`", "parquet"),
        ("`delta`.`/x`", "delta"),
        ("json.`/x` as j", "json"),
        ("spark_catalog.db.some_table", "spark_catalog.db.some_table"),
        ("db.some_table", "db.some_table"),
        ("some_table", "some_table"),
        ("`a`.`b`.`c`.`d`", "a"),
    ],
)
def test_strict_reads_only_declared_sources_refs_and_ctes(cli, project, relation, shown):
    err = _refused(cli, project, f"select * from {relation}", "not a declared source", shown)
    assert "source()" in err  # the hint says how to read it


@pytest.mark.parametrize(
    "sql",
    [
        "select * from read_files('/etc')",
        "select * from identifier('text.`/etc/hostname`')",
        "select * from table(range(3))",
        "select * from python_worker_logs()",
    ],
)
def test_strict_refuses_table_valued_functions_that_are_not_generators(cli, project, sql):
    _refused(cli, project, sql, "table-valued function")


def test_a_cte_name_covers_only_its_own_scope(cli, project):
    # `b` is defined after `a`: inside `a` Spark reads a catalog table named b, not the CTE
    _refused(
        cli,
        project,
        "with a as (select * from b), b as (select * from {{ source('calls') }}) select * from a",
        "'b'",
        "not a declared source",
    )


def test_a_subquery_reading_a_file_is_refused(cli, project):
    _refused(
        cli,
        project,
        "select * from {{ source('calls') }}\nwhere head_service in (select value from text.`/etc/hostname`)",
        "text",
        line="pipelines/safe.yaml:10:",
    )


# -- what a query calls -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "name"),
    [
        ("select ReFlEcT('java.lang.System', 'getenv', 'HOME') as r", "ReFlEcT"),
        ("select upper(coalesce(null, java_method('java.lang.System', 'getenv', 'HOME'))) as r", "java_method"),
        ("select TRY_REFLECT('java.lang.System', 'getenv', 'HOME') as r", "TRY_REFLECT"),
        ("select transform(array(1), x -> reflect('java.lang.System', 'getenv', 'HOME')) as r", "reflect"),
        ("select /*+ REPARTITION(3, reflect('java.lang.System', 'getenv', 'HOME')) */ 1 as r", "reflect"),
        ("with c as (select `reflect`('java.lang.System', 'getenv', 'HOME') as r) select * from c", "reflect"),
    ],
)
def test_strict_refuses_java_calls_however_written(cli, project, sql, name):
    _refused(cli, project, sql, f"{name}()", "calls Java methods")


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("select xpath_string('<a/>', 'a') as r", ("xpath_string()", "XML")),
        ("select from_xml('<a/>', 'a int') as r", ("from_xml()", "XML")),
        ("select from_protobuf(cast('x' as binary), 'java.lang.Object', '/etc/descriptor') as r", ("from_protobuf()",)),
        ("select current_user() as r", ("current_user()", "environment")),
        ("select session_user() as r", ("session_user()", "environment")),
        ("select version() as r", ("version()", "environment")),
        ("select system.builtin.upper('a') as r", ("system.builtin.upper",)),
        ("select spark_catalog.default.shady(1) as r", ("spark_catalog.default.shady",)),
    ],
)
def test_strict_refuses_functions_that_reach_outside_and_qualified_names(cli, project, sql, words):
    _refused(cli, project, sql, *words)


def test_strict_refuses_hints_spark_does_not_have(cli, project):
    _refused(cli, project, "select /*+ SHADY(1) */ 1 as r", "hint", "SHADY")


def test_strict_still_allows_builtins_generators_hints_and_udfs(cli, project):
    _pipeline(
        project,
        "with c as (select * from {{ source('calls') }})\n"
        "select /*+ REPARTITION(2) */ upper(c.head_service) as h, x.n, e.v, transform(array(1), y -> y + 1) as a\n"
        "from c lateral view explode(array(1, 2)) e as v cross join range(2) x(n)\n"
        "where c.response_ms in (select response_ms from c) and input_file_name() is not null",
    )
    _strict(project)
    code, out, err = cli("validate", "pipelines/safe.yaml")
    assert code == 0, err


@pytest.mark.parametrize("pipeline", sorted(p.stem for p in (REPO / "pipelines").glob("*.yaml") if ".tests" not in p.suffixes))
def test_every_example_pipeline_validates_under_strict(cli, project, pipeline):
    empty_generated_folders(project)
    _strict(project)
    code, out, err = cli("validate", f"pipelines/{pipeline}.yaml")
    assert code == 0, err


# -- at run time --------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("select transform(head_service) using 'touch {marker}' as (out) from {{ source('calls') }}", ("TRANSFORM",)),
        (
            "select value as head_service from `org.apache.spark.sql.execution.datasources.text.TextFileFormat`.`{path}`",
            ("TextFileFormat",),
        ),
        ("select reflect('java.lang.System', 'getenv', 'HOME') as home", ("reflect()",)),
    ],
)
def test_a_run_that_skipped_validate_is_refused_before_spark_runs_the_sql(spark, project, monkeypatch, sql, words):
    """Compiled under the default policy (what validate let through), run under a strict profile:
    the engine checks the text it hands to spark.sql() itself."""
    from framework.compiler import compile_pipeline
    from framework.engine.runner import run_pipeline
    from framework.errors import BadInput
    from framework.profiles import load_profile
    from framework.project import Project

    monkeypatch.chdir(project)
    secret = write(project / "secret.txt", "the secret\n")
    _pipeline(project, sql.replace("{path}", str(secret)).replace("{marker}", str(project / "ran.txt")))
    loose = load_profile(Project(project), "local")
    compiled = compile_pipeline(Project(project), project / "pipelines" / "safe.yaml", loose)
    strict = loose.model_copy(update={"sql_policy": "strict"})
    with pytest.raises(BadInput) as refused:
        run_pipeline(compiled, strict, spark=spark)
    message = str(refused.value)
    assert "strict SQL policy" in message and all(w in message for w in words), message
    assert not (project / "ran.txt").exists()
    assert not (project / "warehouse" / "picked").exists()


@pytest.mark.spark
def test_the_spark_parser_check_refuses_what_sqlglot_cannot_parse(spark):
    """MAP ... USING is Spark's other spelling of a script transform; sqlglot does not parse it,
    Spark's own parser does, and the run-time check reads Spark's plan."""
    from framework.sql_policy import SparkPlanCheck

    check = SparkPlanCheck(spark, views={"calls"}, udfs=set())
    assert check.refusals("select * from `calls`") == []
    refusals = check.refusals("map head_service using 'id' as out from `calls`")
    assert refusals and "TRANSFORM" in refusals[0].why
    assert check.refusals("select * from text.`/etc/hostname`")[0].what.startswith("text")
    assert check.refusals("select system.builtin.reflect('a', 'b')")[0].what == "system.builtin.reflect"
    assert check.refusals("select * from identifier('text.`/x`')")[0].what.startswith("text")
    assert check.refusals("with a as (select * from b), b as (select 1) select * from a")[0].what == "b"
    assert check.refusals("with b as (select 1), a as (select * from b) select * from a") == []
    assert check.refusals("select user from `calls`")[0].what == "user"  # Spark's user() when no column has the name
    assert SparkPlanCheck(spark, {"calls"}, set(), columns={"user"}).refusals("select user from `calls`") == []


# -- Spark's ${...} substitution -----------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("strict", [False, True])
def test_spark_substitution_never_runs_on_rendered_vars(spark, cli, project, strict):
    _pipeline(
        project,
        "select {{ var('x') }} as v, '${system:user.name}' as u, head_service from {{ source('calls') }} limit 1",
    )
    if strict:
        _strict(project)
    code, out, err = cli("run", "safe", "--var", "x=${env:HOME} / ${system:user.name}")
    assert code == 0, err
    rows = delta_rows(project / "warehouse" / "picked")
    assert rows and rows[0]["v"] == "${env:HOME} / ${system:user.name}" and rows[0]["u"] == "${system:user.name}"


def test_strict_judges_the_sql_expressions_the_yaml_holds(cli, project):
    """A source's event_time and an expectation's row_condition are Spark SQL too."""
    write(
        project / "pipelines" / "safe.yaml",
        """\
name: safe
sources:
  calls:
    format: json
    path: data/samples/service_calls/static
    schema: "ts TIMESTAMP, head_service STRING, response_ms INT"
    event_time: "coalesce(ts, cast(reflect('java.lang.System', 'currentTimeMillis') as timestamp))"
steps:
  picked:
    sql: select * from {{ source('calls') }}
outputs:
  picked:
    mode: overwrite
    expectations:
      - expect_column_values_to_not_be_null: {column: head_service, row_condition: "java_method('java.lang.System', 'getenv', 'HOME') is not null", condition_parser: spark}
""",
    )
    assert cli("validate", "pipelines/safe.yaml")[0] == 0
    _strict(project)
    code, out, err = cli("validate", "pipelines/safe.yaml")
    assert code == 2, err
    assert "pipelines/safe.yaml:7:" in err and "source 'calls': reflect() calls Java methods" in err, err
    assert "pipelines/safe.yaml:15:" in err and "output 'picked': java_method() calls Java methods" in err, err


def test_a_bare_user_is_refused_at_validate_unless_a_column_has_that_name(cli, project):
    """sqlglot reads `user` as a column; Spark reads it as user() when no column has the name.
    validate passed it (only a run's check on Spark's plan refused it, and on Spark Connect a run
    has only sqlglot's check): it knows the columns of what the query reads."""
    err = _refused(cli, project, "select user as u, head_service from {{ source('calls') }}", "user (Spark's user()")
    assert "qualify it (t.user)" in err, err
    _pipeline(project, "select head_service from {{ source('calls') }} where session_user = 'x'")
    code, _, err = cli("validate", "pipelines/safe.yaml")
    assert code == 2 and "session_user" in err, err  # sqlglot reads this one as the function
    for names_it in (  # a column the query names: an alias, a CTE's or a table alias's column list, a lateral view
        "with t as (select 'x' as user) select user from t",
        "with t (user) as (select head_service from {{ source('calls') }}) select user from t",
        "select user from values ('a') as t(user)",
        "select user from {{ source('calls') }} lateral view explode(array(head_service)) v as user",
    ):
        _pipeline(project, names_it)
        code, _, err = cli("validate", "pipelines/safe.yaml")
        assert code == 0, (names_it, err)
    with_user = PIPELINE.format(sql="      select user, head_service from {{ source('calls') }}").replace(
        'schema: "ts TIMESTAMP,', 'schema: "user STRING, ts TIMESTAMP,'
    )
    write(project / "pipelines" / "safe.yaml", with_user)
    code, _, err = cli("validate", "pipelines/safe.yaml")
    assert code == 0, err


@pytest.mark.spark
def test_a_bare_user_is_the_engines_user_unless_a_column_has_that_name(spark, cli, project):
    """A run checks Spark's own plan too, which knows the columns."""
    _pipeline(project, "select user as u, head_service from {{ source('calls') }}")
    _strict(project)
    code, out, err = cli("run", "safe")
    assert code == 2 and LINE in err and "user (Spark's user() without parentheses)" in err and "strict SQL policy" in err, err
    assert not (project / "warehouse" / "picked").exists()
    _pipeline(project, "select head_service as user from {{ source('calls') }}")
    assert cli("run", "safe")[0] == 0
