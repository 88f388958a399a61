"""Variables are data unless a template says otherwise, and a strict profile refuses SQL that
reaches past the pipeline's sources. All checked by `validate` / `compile`, without Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import delta_rows, write

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


# --- a var stays data through any expression -----------------------------------------------
# Each probe is a template fragment printed where a value belongs (`where head_service = ...`),
# fed `--var n=1 or true`. The compiled SQL must hold the value only as a string literal, or the
# command must stop at the template's line and name the three ways to say what the value is.

VAR_PROBES = [
    "{{ var('n') | trim }}",
    "{{ var('n') | upper }}",
    "{{ var('n') | lower }}",
    "{{ var('n') | title }}",
    "{{ var('n') | capitalize }}",
    "{{ var('n') | safe }}",
    "{{ var('n') | e }}",
    "{{ var('n') | escape }}",
    "{{ var('n') | forceescape }}",
    "{{ var('n') | indent }}",
    "{{ var('n') | center(9) }}",
    "{{ var('n') | striptags }}",
    "{{ var('n') | first }}",
    "{{ var('n') | last }}",
    "{{ var('n') | list }}",
    "{{ var('n') | reverse }}",
    "{{ var('n') | wordwrap }}",
    "{{ var('n') | urlencode }}",
    "{{ var('n') | sort | list }}",
    "{{ var('n') | batch(100) | first }}",
    "{{ var('n')[0:50] }}",
    "{{ var('n')[::-1][::-1] }}",
    "{{ var('n') + '' }}",
    "{{ '' + var('n') }}",
    "{{ var('n') * 1 }}",
    "{{ var('n').strip() }}",
    "{{ var('n').upper() }}",
    "{{ var('n').split(',') }}",
    "{{ var('n').encode().decode() }}",
    "{% set l = [] %}{{ l.append(var('n')) or '' }}{{ l | join }}",
    "{{ var('n') | attr('upper') | string }}",
    "{{ var('n').partition(' ') | first }}",
    "{{ var('n').splitlines() | last }}",
    "{% set m = var('n') %}{{ m | first | replace('1', 'q') }}",
    "{% set m = var('n') %}{{ m.partition(' ')[1] | replace(' ', 'q') }}",
    "{% set j = joiner(var('n')) %}{{ j() }}{{ j() | upper }}",
    "{% set m = var('n') %}{{ m ~ '' }}",
    "{% set m = var('n') %}{{ '%s' % m }}",
    "{% set m = var('n') %}{{ '{}'.format(m) }}",
    "{% set m = var('n') %}{{ [m] | join }}",
    "{% set m = var('n') %}{{ m | replace('x', 'y') }}",
    "{% set m = var('n') %}{{ 'x' | replace('x', m) }}",
    "{% set m = var('n') %}{{ ''.join([m]) }}",
    "{% set m = var('n') %}{{ '%s' | format(m) }}",
    "{% set m = var('n') %}{{ m | map('upper') | join }}",
    "({% for c in var('n') %}{{ c }}{{ ', ' if not loop.last }}{% endfor %})",
    "({% for w in var('n').split(' ') %}{{ w }}{{ ', ' if not loop.last }}{% endfor %})",
    "{% macro shout(x) %}{{ x | upper }}{% endmacro %}{{ shout(var('n')) }}",
    "{% set ns = namespace(v=var('n')) %}{{ ns.v | upper }}",
    "{% for i in [1] %}{{ loop.cycle(var('n') | upper) }}{% endfor %}",
    "{{ var('n') | default('x') | upper }}",
    "{{ (var('n') | upper) if true else 'x' }}",
    "{{ dict(a=var('n')) | dictsort | first | last | upper }}",
    "{{ {'k': var('n')}.k | upper }}",
    "{{ [var('n')] | map('upper') | first }}",
    "{{ cycler(var('n') | upper).next() }}",
]


GUARD_PROBES = [  # safe before the dynamic tracking too (a literal by chance, or refused statically)
    "{{ var('n') | string }}",
    "{{ var('n') | truncate(50) }}",
    "{{ var('n') | pprint }}",
    "{{ var('n').format() }}",
    "{{ '%s' % (var('n'),) }}",
    "{{ '{:>20}'.format(var('n')) }}",
    "{{ var('n') | format }}",
    "{% set ns = namespace(v='') %}{% set ns.v = ns.v ~ var('n') | upper %}{{ ns.v }}",
    "{{ var('n') | tojson }}",
    "{% filter upper %}{{ var('n') }}{% endfilter %}",
]


def _where_value(out: str) -> str:
    """What the compiled SQL has after `where head_service = `."""
    line = next(line for line in out.splitlines() if "where head_service = " in line)
    return line.split("where head_service = ", 1)[1]


def _only_string_literals(sql: str) -> bool:
    import sqlglot
    from sqlglot import exp

    try:
        value = sqlglot.parse_one(f"select {sql}", read="spark").expressions[0]
    except sqlglot.errors.ParseError:
        return False
    nodes = list(value.walk())
    return any(isinstance(n, exp.Literal) for n in nodes) and all(
        (isinstance(n, exp.Literal) and n.is_string) or isinstance(n, (exp.Tuple, exp.Paren)) for n in nodes
    )


def _refused_at_its_line(code: int, err: str) -> bool:
    return code == 2 and "pipelines/safe.yaml:12:" in err and "| lit" in err and "| ident" in err and "| raw_sql" in err


@pytest.mark.parametrize("probe", VAR_PROBES)
def test_a_var_stays_a_literal_through_any_filter_operator_or_method(cli, project, probe):
    _pipeline(project, "select * from {{ source('calls') }}\nwhere head_service = " + probe)
    code, out, err = cli("compile", "safe", "--var", "n=1 or true")
    assert (code == 0 and _only_string_literals(_where_value(out))) or _refused_at_its_line(code, err), (code, out[-400:], err)


@pytest.mark.parametrize("probe", GUARD_PROBES)
def test_what_kept_a_var_a_literal_before_still_does(cli, project, probe):
    test_a_var_stays_a_literal_through_any_filter_operator_or_method(cli, project, probe)


def test_list_and_mapping_vars_from_a_profile_stay_data(cli, project):
    with (project / "configs" / "local.yaml").open("a") as profile:
        profile.write('vars:\n  ids: [a, "b\') or true --"]\n  pick: {k: "1 or true"}\n')
    _pipeline(project, "select * from {{ source('calls') }}\nwhere head_service in {{ var('ids') }}")
    code, out, err = cli("compile", "safe")
    assert code == 0, err
    assert "where head_service in ('a', 'b\\') or true --')" in out
    _pipeline(
        project,
        "select * from {{ source('calls') }}\n"
        "where head_service in {% set ids = var('ids') %}({{ ids | map('lit') | join(', ') }})",
    )
    code, out, err = cli("compile", "safe")
    assert code == 0 and "where head_service in ('a', 'b\\') or true --')" in out, err
    _pipeline(
        project,
        "select * from {{ source('calls') }}\nwhere head_service = {% for i in var('ids') %}{% if loop.last %}{{ i }}{% endif %}{% endfor %}",
    )
    code, out, err = cli("compile", "safe")
    assert code == 0 and _only_string_literals(_where_value(out)), (out, err)
    _pipeline(project, "select * from {{ source('calls') }}\nwhere head_service = {{ var('pick').k }}")
    code, out, err = cli("compile", "safe")
    assert code == 0 and "where head_service = '1 or true'" in out, err
    _pipeline(project, "select * from {{ source('calls') }}\nwhere head_service = {{ var('pick') }}")
    code, out, err = cli("validate", "pipelines/safe.yaml")
    assert code == 2 and "pipelines/safe.yaml:12:" in err and "no SQL literal" in err, err


def test_a_var_chosen_from_the_templates_own_names_stays_a_name(cli, project):
    """Choosing among names the template wrote is not splicing the var: they print as written."""
    _pipeline(
        project,
        "{% set columns = {'service': 'head_service', 'ms': 'response_ms'} %}"
        "select {{ columns[var('col')] }}, {{ columns.get(var('col'), 'ts') }} as again,"
        " {% for c in ['ts', 'response_ms'] | reject('equalto', var('skip')) %}{{ c }}, {% endfor %}1\n"
        "from {{ source(var('from')) | trim }}",
    )
    code, out, err = cli("compile", "safe", "--var", "col=service", "--var", "skip=ts", "--var", "from=calls")
    assert code == 0 and "select head_service, head_service as again, response_ms, 1\nfrom `calls`" in out, err


def test_a_non_finite_number_made_from_a_var_has_no_literal(cli, project):
    _pipeline(project, "select * from {{ source('calls') }}\nwhere response_ms = {{ var('n') | float }}")
    code, out, err = cli("compile", "safe", "--var", "n=inf")
    assert code == 2 and "pipelines/safe.yaml:12:" in err and "no SQL literal" in err, (out, err)


def test_a_run_given_sql_in_a_var_through_a_filter_selects_nothing(spark, cli, project):
    _pipeline(project, "select * from {{ source('calls') }}\nwhere head_service = {{ var('n') | trim }}")
    code, out, err = cli("run", "safe", "--var", "n=head_service or true")
    assert code == 0, err
    assert delta_rows(project / "warehouse" / "picked") == []  # no service is named 'head_service or true'
