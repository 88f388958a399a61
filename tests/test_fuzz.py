"""Bad input never crashes, hangs or goes unlocated: a seeded corpus of mutated example pipelines,
templates and profiles (tests/fuzz_corpus.py) through the real CLI entry point, every case under a
time limit and the whole run under a memory limit (tests/fuzz_runner.py)."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

from tests.fuzz_corpus import BUILT_IN_C, corpus, write_corpus

RUNNER = Path(__file__).with_name("fuzz_runner.py")


def test_no_input_crashes_hangs_or_fails_without_a_location(tmp_path: Path):
    cases = corpus()
    write_corpus(tmp_path, cases)
    done = subprocess.run(
        [sys.executable, str(RUNNER), str(tmp_path), "--seconds", "8"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(cases)

    def outcome(r: dict) -> str:
        if r["code"] == "timeout":
            return "timeout"
        if r["crashed"] or r["code"] not in (0, 2):
            return "crash"
        if r["code"] == 2:
            return "bad input, located" if r["located"] else "bad input, no location"
        return "ok"

    counts = collections.Counter(outcome(r) for r in results)
    print(f"{len(results)} cases: {dict(counts)}")  # shown with -s, e.g. for a closing note
    wrong = [
        f"{outcome(r)}: {r['name']} ({' '.join(r['command'])}): {' | '.join(r['tail'])[:300]}"
        for r in results
        if outcome(r) in ("timeout", "crash", "bad input, no location")
        or (r["expect"] == "bad" and r["code"] != 2)
        or (r["expect"] == "ok" and r["code"] != 0)
    ]
    assert wrong == [], "\n".join(wrong)
    # refused before Python built it: after, the memory is gone, and no time limit stops one C call
    in_c = [r for r in results if r["name"].startswith(BUILT_IN_C)]
    assert in_c and all("would build" in " ".join(r["tail"]) for r in in_c), [(r["name"], r["tail"]) for r in in_c]
    # the corpus keeps finding mistakes: most targeted cases are bad input
    assert counts["bad input, located"] > len(cases) / 2


# --- var-filter family: a var's value stays data through any chain of filters and operators ------
# Self-contained: seeded random chains of Jinja filters, methods and operators applied to var('n')
# with an adversarial value, rendered by the real renderer (no Spark). The rendered SQL, parsed by
# sqlglot, must hold nothing but literals (so the value is inside string literals), or the render
# must be refused with a located error.

import random as _random  # noqa: E402 - kept with its family
from typing import Any as _Any  # noqa: E402

import pytest as _pytest  # noqa: E402
from hypothesis import given as _given  # noqa: E402
from hypothesis import settings as _settings  # noqa: E402
from hypothesis import strategies as _st  # noqa: E402

_ADVERSARIAL = (
    "zz or true",
    "zz') or ('1'='1",
    "z' or 1=1 --",
    'z" or 1=1 --',
    "z\\' or 1=1 --",
    "z) union all select * from t --",
    "`zz` or true",
    "z /* */ or true",
    "z\n; drop table t",
    "zz {{ 7 * 7 }}",
)
#: one step applied to the expression so far (`@`). What a step picks from the template's own text
#: prints as written (`@ or 'x'` with an empty value prints x), so its fallbacks are SQL literals.
_STEPS = (
    "@ | trim", "@ | upper", "@ | lower", "@ | title", "@ | capitalize", "@ | safe", "@ | e",
    "@ | forceescape", "@ | indent(2, true)", "@ | center(40)", "@ | striptags", "@ | string",
    "@ | reverse", "@ | wordwrap(5)", "@ | truncate(12)", "@ | urlencode", "@ | tojson", "@ | pprint",
    "@ | default('d')", "@ | replace('z', 'q')", "(@ | list | first)", "(@ | list | last)",
    "(@ | list | join)", "(@ | map('upper') | join)", "(@ | batch(3) | first | join)", "(@ | sort | join)",
    "@[0:9]", "@[::-1]", "(@ + 'x')", "('x' + @)", "(@ * 2)", "('%s' % @)", "('{}'.format(@))",
    "(@.strip())", "(@.upper())", "(@.split(' ') | first)", "(@.replace('z', 'q'))", "(''.join([@]))",
    "('%s' | format(@))", "(@ if true else 'x')", "(@ or \"'x'\")", "([@, 'x'] | first)", "(dict(k=@).k)",
    "(namespace(v=@).v)", "({'k': @}['k'])",
)  # fmt: skip


def _render_chain(tmp: Path, value: str, steps: list[str], bind: bool) -> tuple[str | None, _Any]:
    """Render `where c = <chain>`; bind: go through `{% set m = var('n') %}` (no static check sees it)."""
    from framework.errors import BadInput
    from framework.templating import TemplateRenderer

    expression = "m" if bind else "var('n')"
    for step in steps:
        expression = "(" + step.replace("@", expression) + ")"
    sql = ("{% set m = var('n') %}" if bind else "") + "select * from t\nwhere c = {{ " + expression + " }}\n"
    renderer = TemplateRenderer(tmp, tmp, {"t"}, set(), {"n": value})
    try:
        return renderer.render_inline("s", sql, "pipelines/p.yaml", 10).text, expression
    except BadInput as e:
        return None, e.problems[0]


def _value_stays_data(rendered: str | None, outcome: _Any) -> None:
    import sqlglot
    from sqlglot import exp

    if rendered is None:
        assert outcome.file == "pipelines/p.yaml" and outcome.line == 11, outcome
        return
    if not rendered.split("where c =", 1)[1].strip():
        return  # nothing of the value printed: `'   ' | trim | list | join` joins no character
    where = sqlglot.parse_one(rendered, read="spark").find(exp.Where)
    assert where is not None, rendered
    right = where.this.expression
    allowed = (exp.Literal, exp.Tuple, exp.Paren, exp.Neg, exp.Boolean, exp.Null)
    assert all(isinstance(node, allowed) for node in right.walk()), (outcome, rendered)


def test_var_filter_chains_keep_the_value_a_literal(tmp_path: Path):
    rng = _random.Random(2032)
    for _ in range(600):
        steps = [rng.choice(_STEPS) for _ in range(rng.randint(1, 4))]
        value, bind = rng.choice(_ADVERSARIAL), rng.random() < 0.5
        rendered, outcome = _render_chain(tmp_path, value, steps, bind)
        _value_stays_data(rendered, outcome)


@_settings(max_examples=300, deadline=None)
@_given(
    steps=_st.lists(_st.sampled_from(_STEPS), min_size=1, max_size=5),
    value=_st.one_of(_st.sampled_from(_ADVERSARIAL), _st.text(min_size=1, max_size=30).map(lambda t: "z" + t)),
    bind=_st.booleans(),
)
def test_var_filter_chains_property(tmp_path_factory: _pytest.TempPathFactory, steps: list[str], value: str, bind: bool):
    rendered, outcome = _render_chain(tmp_path_factory.getbasetemp(), value, steps, bind)
    _value_stays_data(rendered, outcome)


# -- The strict SQL policy: seeded probes --------------------------------------------------------
# Self-contained: attacks (relations that are not declared, functions that reach outside, script
# transforms) in random spellings and places, beside harmless queries built the same way; under a
# profile with `sql_policy: strict`, every attack must end in exit 2 at its line naming the policy,
# and every harmless query must validate.

_STRICT_PIPELINE = """\
name: probe
sources:
  calls: {format: json, path: data/samples/service_calls/static, schema: "ts TIMESTAMP, head_service STRING, response_ms INT"}
steps:
  picked:
    sql: |
SQL
outputs:
  picked: {mode: overwrite}
"""
_BAD_RELATIONS = [
    "text.`/etc/hostname`",
    "`org.apache.spark.sql.execution.datasources.text.TextFileFormat`.`/etc/hostname`",
    "`org.apache.spark.sql.execution.datasources.v2.text.TextDataSourceV2`.`/etc/hostname`",
    "`parquet`.`/data/elsewhere`",
    "`delta`.`s3a://lake/other`",
    "spark_catalog.default.secrets",
    "default.secrets",
    "secrets",
    "read_files('/etc')",
    "identifier('text.`/etc/hostname`')",
    "python_worker_logs()",
    "table(range(3))",
]
_BAD_CALLS = [
    "reflect('java.lang.System', 'getenv', 'HOME')",
    "java_method('java.lang.System', 'getProperty', 'user.name')",
    "try_reflect('java.lang.Runtime', 'getRuntime')",
    "system.builtin.reflect('java.lang.System', 'getenv', 'HOME')",
    "xpath_string('<a>x</a>', 'a')",
    "from_xml('<a>1</a>', 'a int')",
    "current_user()",
    "session_user()",
    "version()",
    "spark_catalog.default.shady(1)",
]
_GOOD_CALLS = ["upper(head_service)", "abs(response_ms)", "date_trunc('HOUR', ts)", "concat_ws('-', head_service, 'x')"]
_CALL_PLACES = [
    "select {x} as r from {{{{ source('calls') }}}}",
    "select upper(cast({x} as string)) as r from {{{{ source('calls') }}}}",
    "select coalesce(null, {x}) as r from {{{{ source('calls') }}}}",
    "select case when response_ms > 0 then {x} end as r from {{{{ source('calls') }}}}",
    "select transform(array(1), y -> {x}) as r from {{{{ source('calls') }}}}",
    "with c as (select {x} as r from {{{{ source('calls') }}}}) select * from c",
    "select * from {{{{ source('calls') }}}}\nwhere {x} is not null",
    "select /*+ REPARTITION(2, {x}) */ * from {{{{ source('calls') }}}}",
    "select r from {{{{ source('calls') }}}} lateral view explode(array({x})) e as r",
]
_RELATION_PLACES = [
    "select * from {x}",
    "select * from {{{{ source('calls') }}}}\nwhere head_service in (select * from {x})",
    "with c as (select * from {x}) select * from c",
    "select head_service from {{{{ source('calls') }}}}\nunion all select * from {x}",
    "select * from {{{{ source('calls') }}}} cross join {x}",
    "select * from (select * from (select * from {x}) a) b",
]
_SCRIPTS = [
    "select transform(head_service) using 'id' as (out) from {{ source('calls') }}",
    "select TRANSFORM(*) ROW FORMAT DELIMITED USING 'sh -c \"cat secret.txt\"' from {{ source('calls') }}",
    "from {{ source('calls') }} select transform(head_service, response_ms) using 'cat'",
]


def _recase(rng, text: str) -> str:
    """Keywords and function names in random case; quoted text and source() kept as written."""
    relation = "{{ source('calls') }}"
    out, quoted = [], None
    for piece in text.split(relation):
        for char in piece:
            if quoted:
                quoted = None if char == quoted else quoted
                out.append(char)
            elif char in "'`":
                quoted = char
                out.append(char)
            else:
                out.append(char.upper() if rng.random() < 0.5 else char.lower())
        out.append(relation)
    return "".join(out)[: -len(relation)]


def strict_policy_cases(seed: int = 32, count: int = 120) -> list:
    import random

    from tests.fuzz_corpus import Case

    rng = random.Random(seed)
    strict = b"spark:\n  master: local[1]\nwarehouse: ./warehouse\nsql_policy: strict\n"
    cases = []
    for n in range(count):
        family = rng.choice(["call", "relation", "script", "good"])
        if family == "call":
            sql = rng.choice(_CALL_PLACES).format(x=rng.choice(_BAD_CALLS))
        elif family == "relation":
            sql = rng.choice(_RELATION_PLACES).format(x=rng.choice(_BAD_RELATIONS))
        elif family == "script":
            sql = rng.choice(_SCRIPTS)
        else:
            sql = rng.choice(_CALL_PLACES[:7]).format(x=rng.choice(_GOOD_CALLS))
        if rng.random() < 0.5:
            sql = _recase(rng, sql)
        pipeline = _STRICT_PIPELINE.replace("SQL\n", "".join("      " + line + "\n" for line in sql.splitlines()))
        files = {"pipelines/probe.yaml": pipeline.encode(), "configs/local.yaml": strict}
        cases.append(
            Case(
                f"strict {n} {family}: {sql[:70]}",
                ["validate", "pipelines/probe.yaml"],
                files,
                "ok" if family == "good" else "bad",
            )
        )
    return cases


def test_the_strict_policy_refuses_every_seeded_attack_and_passes_the_harmless(tmp_path: Path):
    cases = strict_policy_cases()
    write_corpus(tmp_path, cases)
    done = subprocess.run(
        [sys.executable, str(RUNNER), str(tmp_path), "--seconds", "8"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(cases)
    wrong = [
        f"{r['name']}: exit {r['code']}: {' | '.join(r['tail'])[:300]}"
        for r in results
        if (r["expect"] == "ok" and r["code"] != 0)
        or (
            r["expect"] == "bad"
            and (
                r["code"] != 2
                or not r["located"]
                or not any("strict SQL policy" in t or "sql_policy: strict" in t for t in r["tail"])
            )
        )
    ]
    assert wrong == [], "\n".join(wrong)
    assert {r["expect"] for r in results} == {"ok", "bad"}
