"""`{{ var('x') }}` in a step's settings: rendered before the pipeline is validated, then typed.

Why: one YAML for several settings (`size: "{{ var('n') }}"`, `timeout: "{{ var('t', '22s') }}"`),
chosen by the profile or `--var`, instead of a file per setting.

A string value of a step that holds `{{` is rendered with `var(name, default)` only (a sandboxed
Jinja environment with the limits of framework.spec.template_limits: no other names, no attribute
access to Python objects, nothing built past a million characters). A value that is one
expression and nothing else takes the type YAML gives the result (`13` a number, `true` a bool),
so it is validated exactly as if it had been written; a value with text around the expression
stays text. A step's `sql:` is a SQL template rendered later with ref() and source(), and is left
as it is. An undefined var, a broken expression or one that fails (`{{ 1/0 }}`, a limit) is bad
input at the value's line.
"""

from __future__ import annotations

import re
from typing import Any

from framework.errors import BadInput, Problem
from framework.spec.yaml_source import LocatedDocument, plain_value

_ONE_EXPRESSION = re.compile(r"^\s*\{\{[^{}]*\}\}\s*$")
_MISSING = object()
SQL_KEY = "sql"  # a sql step's template: rendered by framework.templating, not here


def render_step_values(doc: LocatedDocument, variables: dict[str, Any]) -> set[str]:
    """Render the `{{ }}` values under `steps:` in place; return the names of the vars they used."""
    from jinja2 import StrictUndefined, TemplateError

    from framework.spec.template_limits import LimitedSandbox, limit_message, render_limited

    used: set[str] = set()

    def var(name: str, default: Any = _MISSING) -> Any:
        used.add(name)
        if name in variables:
            return variables[name]
        if default is not _MISSING:
            return default
        raise _Undefined(name)

    env = LimitedSandbox(undefined=StrictUndefined, autoescape=False)
    env.globals = {"var": var}
    steps = doc.data.get("steps") if isinstance(doc.data, dict) else None
    if not isinstance(steps, dict):
        return used
    problems: list[Problem] = []

    def render(value: Any, path: tuple[Any, ...]) -> Any:
        if isinstance(value, dict):
            return {k: value[k] if len(path) == 2 and k == SQL_KEY else render(value[k], (*path, k)) for k in value}
        if isinstance(value, list):
            return [render(item, (*path, i)) for i, item in enumerate(value)]
        if not isinstance(value, str) or "{{" not in value:
            return value
        try:
            text = render_limited(env.from_string(value))
        except _Undefined as e:
            problems.append(_problem(doc, path, f"var('{e.name}') is not defined", _hint(e.name)))
            return value
        except TemplateError as e:
            problems.append(_problem(doc, path, f"'{_short(value)}' is not a valid template: {e.message}", None))
            return value
        except Exception as e:  # noqa: BLE001 - every other render error is the user's template's
            said = limit_message(e) or f"{type(e).__name__}: {e}"
            problems.append(_problem(doc, path, f"'{_short(value)}' does not render: {said}", _VALUE_HINT))
            return value
        if not _ONE_EXPRESSION.match(value):
            return text
        try:
            return plain_value(text)
        except ValueError:
            return text

    doc.data["steps"] = {name: render(step, ("steps", name)) for name, step in steps.items()}
    if problems:
        raise BadInput(*problems)
    return used


class _Undefined(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _problem(doc: LocatedDocument, path: tuple[Any, ...], message: str, hint: str | None) -> Problem:
    line = doc.value_lines.get(path) or (doc.positions.get(path) or (None, None))[0]
    return Problem(f"{'.'.join(map(str, path))}: {message}", file=doc.file, line=line, hint=hint)


def _hint(name: str) -> str:
    return f"add it under 'vars:' in the pipeline or the profile, pass --var {name}=..., or give a default: var('{name}', ...)"


_VALUE_HINT = "a step's setting may hold {{ var('name') }} (or {{ var('name', default) }}); compute anything else in SQL"


def _short(value: str, most: int = 80) -> str:
    return value if len(value) <= most else value[: most - 1] + "…"
