"""Templates: the user's vocabulary, safe literals, and errors located in the template itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.errors import BadInput
from framework.templating import TemplateRenderer, sql_literal
from tests.conftest import write


def _renderer(sql_dir: Path, variables: dict | None = None) -> TemplateRenderer:
    return TemplateRenderer(sql_dir, sql_dir.parent, {"a", "b"}, {"raw"}, variables or {})


def test_ref_source_var_and_macros(tmp_path: Path):
    write(tmp_path / "sql" / "macros" / "m.sql", "{% macro pct(c, p) %}percentile_approx({{ c }}, {{ p | lit }}){% endmacro %}")
    write(
        tmp_path / "sql" / "b.sql",
        "select {{ pct('x', 0.5) }} from {{ ref('a') }} join {{ source('raw') }} where r = {{ var('r') | lit }}",
    )
    rendered = _renderer(tmp_path / "sql", {"r": "eu"}).render_file("b", "b.sql")
    assert rendered.text == "select percentile_approx(x, 0.5) from `a` join `raw` where r = 'eu'"
    assert rendered.refs == ("a",) and rendered.sources == ("raw",) and rendered.vars_used == {"r"}


def test_a_macro_given_var_data_returns_sql_text_with_the_var_as_a_literal(tmp_path: Path):
    write(tmp_path / "sql" / "macros" / "m.sql", "{% macro pick(c, v) %}{{ c | ident }} = {{ v | upper }}{% endmacro %}")
    write(tmp_path / "sql" / "b.sql", "select * from {{ ref('a') | trim }} where {{ pick(var('c'), var('v')) | trim }}")
    rendered = _renderer(tmp_path / "sql", {"c": "x", "v": "eu' or true --"}).render_file("b", "b.sql")
    assert rendered.text == "select * from `a` where `x` = 'EU\\' OR TRUE --'"


def test_errors_inside_loops_map_to_the_template_line(tmp_path: Path):
    write(tmp_path / "sql" / "b.sql", "select\n{% for c in ['x', 'y'] %}\n  {{ c }},\n{% endfor %}\n  {{ nope }}\nfrom t\n")
    with pytest.raises(BadInput) as caught:
        _renderer(tmp_path / "sql").render_file("b", "b.sql")
    problem = caught.value.problems[0]
    assert (problem.file, problem.line) == ("sql/b.sql", 5) and "'nope' is undefined" in problem.message


def test_rendered_lines_map_back_through_loops(tmp_path: Path):
    write(tmp_path / "sql" / "b.sql", "select\n{% for c in ['x', 'y'] %}\n  {{ c }},\n{% endfor %}\n  1 as z\nfrom t\n")
    rendered = _renderer(tmp_path / "sql").render_file("b", "b.sql")
    lines = rendered.text.split("\n")
    for number, text in enumerate(lines, start=1):
        if text.strip() in ("x,", "y,"):
            assert rendered.locate(number)[1] == 3
        if text.strip() == "1 as z":
            assert rendered.locate(number)[1] == 5
        if text.strip() == "from t":
            assert rendered.locate(number)[1] == 6


def test_the_sandbox_refuses_python_internals(tmp_path: Path):
    write(tmp_path / "sql" / "b.sql", "select {{ ''.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(BadInput) as caught:
        _renderer(tmp_path / "sql").render_file("b", "b.sql")
    assert "sql/b.sql:1" in str(caught.value)


def test_literals_of_plain_values():
    assert sql_literal(None) == "NULL" and sql_literal(True) == "TRUE" and sql_literal(3) == "3"
    assert sql_literal(["a", 1]) == "('a', 1)"
    assert sql_literal("it's") == "'it\\'s'"


@pytest.mark.spark
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30))
def test_any_string_survives_lit_as_itself_in_spark(spark, value):
    """Whatever a var holds, `| lit` makes it a literal Spark reads back unchanged: no injection."""
    row = spark.sql(f"select {sql_literal(value)} as v, 1 as marker").first()
    assert row.v == value and row.marker == 1


def test_comparing_lists_that_hold_big_lists_many_times_is_refused_before_c_compares_them():
    """`l == m` of two lists holding 50 big lists each (equal, not the same) compares 50 million
    items in C, where a render's time limit is not seen; comparisons still chain as Python's."""
    import jinja2

    from framework.spec.template_limits import LimitedSandbox, TemplateLimit, render_limited

    env = LimitedSandbox(undefined=jinja2.StrictUndefined, autoescape=False)
    many = (
        "{% set a = [0] * 1000000 %}{% set b = a | list %}{% set l = [] %}{% set m = [] %}"
        "{% for i in range(50) %}{% set _ = l.append(a) %}{% set _ = m.append(b) %}{% endfor %}{{ l == m }}"
    )
    with pytest.raises(TemplateLimit, match="comparing would build"):
        render_limited(env.from_string(many))
    small = "{{ 1 < 2 < 3 }} {{ 3 > 2 > 5 }} {{ 'a' in 'abc' }} {{ 2 not in [1, 3] }} {{ [1, 2] == [1, 2] }}"
    assert render_limited(env.from_string(small)) == "True False True True True"
