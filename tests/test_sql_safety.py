"""Variables are data unless a template says otherwise, and a strict profile refuses SQL that
reaches past the pipeline's sources. All checked by `validate` / `compile`, without Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write

PIPELINE = """\
name: safe
vars:
  since: "2026-01-01"
  min_ms: 5
  flag: true
sources:
  calls: {{format: json, path: data/samples/service_calls/static, schema: "ts TIMESTAMP, head_service STRING, response_ms INT"}}
steps:
  picked:
    sql: |
{sql}
outputs:
  picked: {{mode: overwrite}}
"""


def _pipeline(project: Path, sql: str) -> None:
    write(project / "pipelines" / "safe.yaml", PIPELINE.format(sql="\n".join("      " + line for line in sql.splitlines())))


def test_a_bare_var_is_a_typed_sql_literal_and_a_value_cannot_add_sql(cli, project):
    _pipeline(
        project,
        "select * from {{ source('calls') }}\n"
        "where ts >= to_timestamp({{ var('since') }}) and response_ms > {{ var('min_ms') }} and {{ var('flag') }}",
    )
    code, out, err = cli("compile", "safe")
    assert code == 0, err
    assert "to_timestamp('2026-01-01') and response_ms > 5 and TRUE" in out
    evil = "2026-01-01') union all select value, 0, 0 from text.`/etc/passwd` --"
    code, out, err = cli("compile", "safe", "--var", f"since={evil}")
    assert code == 0, err
    assert "to_timestamp('2026-01-01\\') union all select value, 0, 0 from text.`/etc/passwd` --')" in out


def test_ident_and_raw_sql_say_how_a_var_goes_in_and_raw_sql_is_reported(cli, project):
    _pipeline(
        project,
        "select {{ var('column', 'head_service') | ident }}, {{ var('expr', 'response_ms * 2') | raw_sql }}\nfrom {{ source('calls') }}",
    )
    code, out, err = cli("validate", "pipelines/safe.yaml")
    assert code == 0, err
    assert "warning:" in err and "pipelines/safe.yaml:11:" in err and "raw_sql splices a value into the SQL as written" in err
    code, out, err = cli("compile", "safe")
    assert code == 0 and "select `head_service`, response_ms * 2" in out


@pytest.mark.parametrize(
    "expression", ["'x_' ~ var('since')", "'%s' % var('since')", "'{}'.format(var('since'))", "[var('since'), 'b'] | join(',')"]
)
def test_a_var_joined_into_text_must_say_what_the_result_is(cli, project, expression):
    _pipeline(project, "select * from {{ source('calls') }}\nwhere head_service = {{ " + expression + " }}")
    code, out, err = cli("validate", "pipelines/safe.yaml")
    assert code == 2 and "pipelines/safe.yaml:12:" in err and "a var is joined into SQL text here" in err
    _pipeline(project, "select * from {{ source('calls') }}\nwhere head_service = {{ (" + expression + ") | lit }}")
    assert cli("validate", "pipelines/safe.yaml")[0] == 0


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        ("select reflect('java.lang.Runtime', 'getRuntime') as r", "reflect() calls Java methods"),
        ("select java_method('java.lang.System', 'exit', 1) as r", "java_method() calls Java methods"),
        ("select value from text.`/etc/passwd`", "text.`/etc/passwd` reads files by path"),
        ("select * from parquet.`/data/elsewhere`", "parquet.`/data/elsewhere` reads files by path"),
    ],
)
def test_the_strict_sql_policy_refuses_jvm_calls_and_reads_by_path(cli, project, sql, refused):
    _pipeline(project, sql)
    assert cli("validate", "pipelines/safe.yaml")[0] == 0  # the default policy lets them through
    with (project / "configs" / "local.yaml").open("a") as profile:
        profile.write("sql_policy: strict\n")
    code, out, err = cli("validate", "pipelines/safe.yaml")
    assert code == 2 and "pipelines/safe.yaml:11:" in err and refused in err and "strict SQL policy" in err


def test_the_cluster_profile_is_strict():
    from framework.profiles import load_profile
    from framework.project import Project

    assert load_profile(Project(Path(__file__).resolve().parents[1]), "cluster").sql_policy == "strict"
