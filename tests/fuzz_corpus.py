"""A seeded corpus of bad inputs: mutated copies of the example project's pipelines, templates and
profile, each with the command a user would run on it (`validate`, `compile`, `plan`).

Two families, both reproducible from the seed:
- targeted cases, one or more per kind of mistake found before (files that are not UTF-8, YAML
  scalars and tags that fail to construct, recursion, huge or non-finite numbers, bad `--var`
  values, alias bombs and templates that never finish, cycles, empty files, SQL that does not
  tokenize, names and paths inside the warehouse's own folder, paths outside the project);
- random cases: a line deleted, duplicated or cut, characters swapped, a token inserted, in the
  YAML or SQL files.

Used by tests/test_fuzz.py through tests/fuzz_runner.py, which runs every case in one process
through the real CLI entry point with a time and memory limit per case.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import GENERATED

REPO = Path(__file__).resolve().parents[1]
PIPELINES = ("service_calls", "service_instances", "contact_join")


@dataclass
class Case:
    name: str
    command: list[str]
    #: files to write over the copy of the example project (relative path -> bytes)
    files: dict[str, bytes] = field(default_factory=dict)
    #: "bad": must end in exit 2; "ok": must pass; "either": a random mutation, which may still be valid
    expect: str = "either"

    def as_json(self) -> dict:
        return {"name": self.name, "command": self.command, "expect": self.expect}


def _text(path: str) -> str:
    return (REPO / path).read_text(encoding="utf-8")


def _replace(path: str, old: str, new: str) -> bytes:
    text = _text(path)
    assert old in text, (path, old)
    return text.replace(old, new, 1).encode()


#: cases whose template asks Python's C code for more than a template may build: refused before it runs
BUILT_IN_C = "template builds in C"


def targeted() -> list[Case]:
    calls, instances, contacts = "pipelines/service_calls.yaml", "pipelines/service_instances.yaml", "pipelines/contact_join.yaml"
    stats = "sql/service_stats.sql"
    profile = "configs/local.yaml"
    cases: list[Case] = []

    def add(name: str, command: list[str], expect: str = "bad", **files: bytes) -> None:
        cases.append(Case(name, command, {k.replace("__", "/").replace("_DOT_", "."): v for k, v in files.items()}, expect))

    validate_calls = ["validate", calls]
    compile_calls = ["compile", "service_calls"]
    # 1. not UTF-8
    add("pipeline not utf-8", validate_calls, **{"pipelines__service_calls_DOT_yaml": _text(calls).encode() + b"\n# \xff\n"})
    add("template not utf-8", compile_calls, **{"sql__service_stats_DOT_sql": _text(stats).encode() + b"\n-- \xff\n"})
    add("profile not utf-8", validate_calls, **{"configs__local_DOT_yaml": _text(profile).encode() + b"\n# \xff\n"})
    add(
        "macro not utf-8",
        compile_calls,
        **{"sql__macros__stats_DOT_sql": _text("sql/macros/stats.sql").encode() + b"\n\xfe\xff\n"},
    )
    # 2. scalars and tags that fail to construct
    for value in ("2026-13-45", "2026-02-30", "25:00:00", "!!python/object:os.system {}", "!foo bar", "!!int abc",
                  "!!bool maybe", "!!timestamp x", "!!binary ===", "!!float zz", "!!set {a: 1}", "!!omap [1]"):  # fmt: skip
        add(
            f"description {value}",
            validate_calls,
            **{"pipelines__service_calls_DOT_yaml": _replace(calls, "description: >", f"description: {value}\nx_old: >")},
        )
        add(
            f"var {value}",
            compile_calls,
            "ok" if value == "25:00:00" else "bad",  # YAML 1.1 reads 25:00:00 as 90000 (base 60): a valid var
            **{"pipelines__service_calls_DOT_yaml": _replace(calls, 'since: "2026-01-01 00:00:00"', f"since: {value}")},
        )
    add(
        "profile tag",
        validate_calls,
        **{"configs__local_DOT_yaml": _replace(profile, "warehouse: ./warehouse", "warehouse: !!python/name:os.system")},
    )
    # 3. recursion
    add(
        "self alias",
        validate_calls,
        **{"pipelines__service_calls_DOT_yaml": _replace(calls, "vars:\n", "vars: &a\n  loop: *a\n")},
    )
    add(
        "deep flow list",
        validate_calls,
        **{"pipelines__service_calls_DOT_yaml": _replace(calls, "min_calls: 1", "min_calls: " + "[" * 400 + "]" * 400)},
    )
    add(
        "deep flow map",
        validate_calls,
        **{"pipelines__service_calls_DOT_yaml": _replace(calls, "min_calls: 1", "min_calls: " + "{a: " * 300 + "1" + "}" * 300)},
    )
    add(
        "deep sql parens",  # 60 levels: deeper than sqlglot's default recursion allows, and checked
        compile_calls,
        "ok",
        **{
            "sql__service_stats_DOT_sql": _replace(
                stats, "count(*)                        as calls", "(" * 60 + "1" + ")" * 60 + " as calls"
            )
        },
    )
    add(
        "deep jinja",
        compile_calls,
        **{
            "sql__service_stats_DOT_sql": _replace(
                stats, "-- Per-service", "{{ " + "(" * 200 + "1" + ")" * 200 + " }}\n-- Per-service"
            )
        },
    )
    # 4. numbers
    for value in ("1e40", "1e308", "1" * 400, ".nan", ".inf", "-.inf", "1e400s", "99999999999999999999 days"):
        add(
            f"timeout {value}",
            ["validate", instances],
            **{"pipelines__service_instances_DOT_yaml": _replace(instances, "timeout: 22s", f"timeout: {value}")},
        )
        add(
            f"watermark {value}",
            ["compile", "contact_join"],
            **{"pipelines__contact_join_DOT_yaml": _replace(contacts, "watermark: 1 min", f"watermark: {value}")},
        )
    for value in ("2147483648", "10000000000000000000000000000000", "-1", "0", "1e3", "13.5", "true"):
        add(
            f"size {value}",
            ["validate", instances],
            **{"pipelines__service_instances_DOT_yaml": _replace(instances, "size: 13", f"size: {value}")},
        )
    add(
        "count window huge",
        ["validate", contacts],
        **{
            "pipelines__contact_join_DOT_yaml": _replace(
                contacts, "within: {before: 30s, after: 30s}", "last: {left: 1000000000000000000000000000000, right: 5}"
            )
        },
    )
    add(
        "files per trigger huge",
        ["validate", contacts],
        **{
            "pipelines__contact_join_DOT_yaml": _replace(
                contacts,
                "watermark: 1 min\n",
                "watermark: 1 min\n    max_files_per_trigger: 10000000000000000000000000000000000000000\n",
            )
        },
    )
    # 5. --var
    for value in (
        "since=2026-13-45",
        "since=!!int abc",
        "since=!!python/object:os.system {}",
        "min_calls=.nan",
        "=x",
        "1x=2",
        "since=",
    ):
        add(f"--var {value[:30]}", ["compile", "service_calls", "--var", value])
    # not one plain value, or text: passed on as the text given
    for value in ("since=" + "[" * 300 + "]" * 300, "since={a: [1, {b: 2}]}", "since=\xff", "min_calls=1e400"):
        add(f"--var {value[:30]}", ["compile", "service_calls", "--var", value], "ok")
    # 6. hangs and blow-ups
    bomb = "vars:\n  a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"  {chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(9)
    )
    add("alias bomb", validate_calls, **{"pipelines__service_calls_DOT_yaml": _replace(calls, "vars:\n", bomb + "  x_old:\n")})
    add(
        "template range loop",
        compile_calls,
        **{
            "sql__service_stats_DOT_sql": _replace(
                stats,
                "-- Per-service",
                "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}-- Per-service",
            )
        },
    )
    add(
        "template huge string",
        compile_calls,
        **{"sql__service_stats_DOT_sql": _replace(stats, "-- Per-service", "{{ 'x' * 10**9 }}-- Per-service")},
    )
    add(
        "template huge power",
        compile_calls,
        **{"sql__service_stats_DOT_sql": _replace(stats, "-- Per-service", "{{ 10 ** 10 ** 10 }}-- Per-service")},
    )
    add(
        "template while-ish recursion",
        compile_calls,
        **{
            "sql__service_stats_DOT_sql": _replace(
                stats, "-- Per-service", "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}-- Per-service"
            )
        },
    )
    add(
        "template huge join",
        compile_calls,
        **{"sql__service_stats_DOT_sql": _replace(stats, "-- Per-service", "{{ range(10**8) | join(',') }}-- Per-service")},
    )
    # ... also through what Python builds in C from a number the template gives (a render's time
    # limit cannot stop one C call), and in the other places a template is rendered
    for label, expression in (
        ("center filter", "'ab' | center(10**9)"),
        ("str.center", "'ab'.center(10**9)"),
        ("str.ljust", "'ab'.ljust(10**9)"),
        ("str.zfill", "'1'.zfill(10**9)"),
        ("str.expandtabs", "('a' ~ '\\t' * 100).expandtabs(10**7)"),
        ("str.replace", "('x' * 999999).replace('x', 'y' * 10000)"),
        ("str.join", "('y' * 1000000).join(['a'] * 1000000)"),
        ("str.translate", "('a' * 1000000).translate({97: 'y' * 10000})"),
        ("percent width", "'%0999999999d' % 1"),
        ("percent star width", "'%*d' % (10**9, 1)"),
        ("format width", "'{:>999999999}'.format(1)"),
        ("format nested width", "'{:>{}}'.format(1, 10**9)"),
        ("format filter", "'%999999999s' | format('a')"),
        ("indent filter", "('a\\n' * 1000) | indent(10**7)"),
        ("tojson indent", "[[1, 2], [3, 4]] | tojson(indent=10**9)"),
        ("lipsum", "lipsum(10**7)"),
        # what one operation builds from many small pieces, or from one value held many times over
        ("percent widths added up", "('%(a)1000000d' * 1000) % {'a': 1}"),
        ("format widths added up", "('{0:>1000000}' * 3000).format(1)"),
        ("concatenation", "('x' * 1000000) ~ ('x' * 1000000) ~ ('x' * 1000000)"),
        ("plus", "('x' * 1000000) + ('x' * 1000000)"),
        ("bytes", "('x'.encode() * 3000000000)"),
        ("bytes method", "'ab'.encode().center(10**9)"),
        ("str.translate by a list", "('\\x00' * 3000).translate(['x' * 1000000])"),
        ("tojson indent text", "([0] * 1000) | tojson(indent=' ' * 1000000)"),
        ("batch fill", "[1] | batch(300000000, 0) | list"),
        ("one list held many times", "([[0] * 1000000] * 300) | tojson"),
        ("one list printed many times", "[[0] * 1000000] * 300"),
        ("sort of one list held many times", "[[0] * 1000000, [0] * 1000000] | sort"),
        ("nested lists", "[[[0] * 1000000, [0] * 1000000], [[0] * 1000000, [0] * 1000000]] | string"),
    ):
        add(
            f"{BUILT_IN_C}: {label}",
            compile_calls,
            **{"sql__service_stats_DOT_sql": _replace(stats, "-- Per-service", f"{{{{ {expression} }}}}-- Per-service")},
        )
    for label, expression in (
        # each addition is checked, as `+` is; adding up 100,000 of them is a loop the time limit stops
        ("sum of lists", "([[0] * 10] * 100000) | sum(start=[])"),
        # Jinja's own formatter for safe text checks no width: refused before it runs
        ("safe string format", "('{:>999999999}' | safe).format(1)"),
    ):
        expression = f"{{{{ {expression} }}}}-- Per-service"
        add(label, compile_calls, **{"sql__service_stats_DOT_sql": _replace(stats, "-- Per-service", expression)})
    add(
        "source path range loop",
        validate_calls,
        **{
            "pipelines__service_calls_DOT_yaml": _replace(
                calls,
                "path: data/samples/service_calls/static",
                'path: "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}data"',
            )
        },
    )
    add(
        "source path huge string",
        validate_calls,
        **{
            "pipelines__service_calls_DOT_yaml": _replace(
                calls, "path: data/samples/service_calls/static", "path: \"{{ 'x'.center(3000000000) }}\""
            )
        },
    )
    add(
        "step value huge string",
        validate_calls,
        **{
            "pipelines__service_calls_DOT_yaml": _replace(
                calls,
                "description: Both streams as one, with `_source` telling which.",
                "description: \"{{ 'x' * 3000000000 }}\"",
            )
        },
    )
    add(
        "step value division by zero",
        validate_calls,
        **{
            "pipelines__service_calls_DOT_yaml": _replace(
                calls, "description: Both streams as one, with `_source` telling which.", 'description: "{{ 1/0 }}"'
            )
        },
    )
    # 7. errors that need a location
    add(
        "cycle",
        ["validate", instances],
        **{
            "pipelines__service_instances_DOT_yaml": _replace(
                instances, "union: [static_calls, image_calls]", "union: [static_calls, instances]"
            )
        },
    )
    add("empty pipeline", ["validate", calls], **{"pipelines__service_calls_DOT_yaml": b""})
    add("comment-only pipeline", ["validate", calls], **{"pipelines__service_calls_DOT_yaml": b"# nothing\n"})
    add("empty template", compile_calls, **{"sql__service_stats_DOT_sql": b""})
    add(
        "template missing",
        compile_calls,
        **{"pipelines__service_calls_DOT_yaml": _replace(calls, "sql: service_stats.sql", "sql: no_such.sql")},
    )
    add(
        "template outside sql",
        compile_calls,
        **{
            "pipelines__service_calls_DOT_yaml": _replace(
                calls, "sql: service_stats.sql", "sql: ../pipelines/service_calls.yaml.sql"
            )
        },
    )
    add("unterminated quote", compile_calls, **{"sql__service_stats_DOT_sql": _replace(stats, "as calls", "as 'calls")})
    add(
        "unterminated comment",
        compile_calls,
        **{"sql__service_stats_DOT_sql": _replace(stats, "-- Per-service", "/* Per-service")},
    )
    add(
        "unterminated jinja",
        compile_calls,
        **{"sql__service_stats_DOT_sql": _replace(stats, "{{ p95('response_ms') }}", "{{ p95('response_ms' }}")},
    )
    add(
        "control character",
        validate_calls,
        **{"pipelines__service_calls_DOT_yaml": _replace(calls, "name: service_calls", "name: service\x07calls")},
    )
    add(
        "nul byte",
        validate_calls,
        **{"pipelines__service_calls_DOT_yaml": _replace(calls, "name: service_calls", "name: service\x00calls")},
    )
    add("bom", validate_calls, "ok", **{"pipelines__service_calls_DOT_yaml": b"\xef\xbb\xbf" + _text(calls).encode()})
    add("tab indent", validate_calls, **{"pipelines__service_calls_DOT_yaml": _replace(calls, "  since:", "\tsince:")})
    add("list root", validate_calls, **{"pipelines__service_calls_DOT_yaml": b"- a\n- b\n"})
    add("scalar root", validate_calls, **{"pipelines__service_calls_DOT_yaml": b"just text\n"})
    add("two documents", validate_calls, **{"pipelines__service_calls_DOT_yaml": _text(calls).encode() + b"\n---\nname: x\n"})
    add("empty profile", validate_calls, "ok", **{"configs__local_DOT_yaml": b""})  # every setting at its default
    add("profile list", validate_calls, **{"configs__local_DOT_yaml": b"- 1\n"})
    add(
        "non-string key",
        validate_calls,
        **{"pipelines__service_calls_DOT_yaml": _replace(calls, "steps:\n", "steps:\n  [a, b]: {sql: select 1}\n")},
    )
    add(
        "int step name",
        validate_calls,
        **{"pipelines__service_calls_DOT_yaml": _replace(calls, "steps:\n", "steps:\n  12: {sql: select 1}\n")},
    )
    # 8-10. the warehouse's own tables and paths outside the project
    for target in ("name: _tributary.events", "name: _tributary.quarantine", "path: warehouse/_tributary/events",
                   "path: ../outside", "path: /tmp/tributary-fuzz-abs", "path: ''", "path: .", "path: data/samples/service_calls/static",
                   "name: ../../etc", "name: a..b", "name: ''"):  # fmt: skip
        add(
            f"output {target}",
            validate_calls,
            **{
                "pipelines__service_calls_DOT_yaml": _replace(
                    calls, "  service_stats:\n    mode: overwrite", f"  service_stats:\n    mode: overwrite\n    {target}"
                )
            },
        )
    # reading the run log is allowed (a pipeline may report on it); a source path is checked when a run reads it
    for target in ("table: _tributary.events", "path: /etc"):
        add(
            f"source {target}",
            validate_calls,
            "either",
            **{
                "pipelines__service_calls_DOT_yaml": _replace(
                    calls, "    format: json\n    path: data/samples/service_calls/static\n", f"    format: delta\n    {target}\n"
                )
            },
        )
    return cases


def _mutate_text(rng: random.Random, text: str) -> str:
    lines = text.splitlines(keepends=True)
    if not lines:
        return "x"
    i = rng.randrange(len(lines))
    choice = rng.randrange(7)
    if choice == 0:
        del lines[i]
    elif choice == 1:
        lines.insert(i, lines[i])
    elif choice == 2:
        line = lines[i]
        lines[i] = line[: rng.randrange(len(line) + 1)] + "\n"
    elif choice == 3 and len(text) > 2:
        j = rng.randrange(len(text) - 1)
        return text[:j] + text[j + 1] + text[j] + text[j + 2 :]
    elif choice == 4:
        token = rng.choice([":", "- ", "{", "}", "[", "]", "&x ", "*x", "!!str ", "'", '"', "{{", "}}", "{%", "%}", "(", ")",
                            ";", "--", "/*", "`", "\\", "|", ">", "#", "\t", "null", "1e999", "-1", "ref('x')", "  "])  # fmt: skip
        line = lines[i]
        k = rng.randrange(len(line) + 1)
        lines[i] = line[:k] + token + line[k:]
    elif choice == 5:
        lines[i] = "  " + lines[i]
    else:
        lines[i] = lines[i].lstrip()
    return "".join(lines)


def random_cases(seed: int, count: int) -> list[Case]:
    rng = random.Random(seed)
    targets = [
        ("pipelines/service_calls.yaml", ["compile", "service_calls"]),
        ("pipelines/service_instances.yaml", ["compile", "service_instances"]),
        ("pipelines/contact_join.yaml", ["compile", "contact_join"]),
        ("sql/service_stats.sql", ["compile", "service_calls"]),
        ("sql/daily_head_stats.sql", ["compile", "service_calls"]),
        ("sql/macros/stats.sql", ["compile", "service_calls"]),
        ("configs/local.yaml", ["validate"]),
    ]
    cases = []
    for n in range(count):
        path, command = rng.choice(targets)
        text = _text(path)
        for _ in range(rng.randint(1, 3)):
            text = _mutate_text(rng, text)
        cases.append(Case(f"random {n} {path}", command, {path: text.encode("utf-8", "surrogateescape")}))
    return cases


def corpus(seed: int = 2026, count: int = 300) -> list[Case]:
    return targeted() + random_cases(seed, count)


def write_corpus(root: Path, cases: list[Case]) -> None:
    """One project folder per case under `root`, and root/cases.json listing them."""
    for i, case in enumerate(cases):
        project = root / f"case-{i:04d}"
        for folder in ("pipelines", "sql", "configs"):
            shutil.copytree(REPO / folder, project / folder)
        (project / "configs" / "local.yaml").write_text("spark:\n  master: local[1]\nwarehouse: ./warehouse\n")
        # the examples' data folders, empty: validate refuses a source path that matches nothing
        for folder in [*(d for d in (REPO / "data").rglob("*") if d.is_dir()), *(REPO / g for g in GENERATED)]:
            (project / folder.relative_to(REPO)).mkdir(parents=True, exist_ok=True)
        for relative, content in case.files.items():
            target = project / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
    (root / "cases.json").write_text(json.dumps([c.as_json() for c in cases]))
