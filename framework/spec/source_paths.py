"""Interval-aware sources: `{{ interval_start }}` / `{{ interval_end }}` in a source's `path:`.

Why: a daily run should read its day's file (`data/flights/flights_{{ interval_start.date() }}.csv`),
not every file of the year filtered in SQL. A source's `path` is rendered, once per run, with the
run's interval (in the schedule's timezone, as plain text: `.date()` is 2013-01-05, `.strftime('%Y/%m')`
what it says) and `var(name, default)`; a sandboxed Jinja environment with nothing else in it.

Any other `{{` or `{%` in a source's or an output's settings, or in a value of `vars:`, is not
rendered by anything, and would be taken literally (a file named with braces, a date that is the
text `{{ interval_start.date() }}`): it is bad input at its line, as is a path template that does
not render (an unknown name, a broken tag, a streaming pipeline's interval).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from framework.errors import BadInput, Problem
from framework.spec.intervals import Interval
from framework.spec.loader import LoadedPipeline

_BOUNDS = ("interval_start", "interval_end")
_MISSING = object()
#: the source setting rendered per run
PATH_KEY = "path"


def is_template(text: Any) -> bool:
    return isinstance(text, str) and ("{{" in text or "{%" in text)


def render_source_paths(
    loaded: LoadedPipeline, interval: Interval | None, no_interval: tuple[str, str], variables: dict[str, Any]
) -> tuple[LoadedPipeline, tuple[str, ...]]:
    """The pipeline with each templated source path rendered, and the sources whose path reads
    the interval; BadInput at the line of each template that does not render or is not rendered."""
    import jinja2
    import jinja2.meta

    from framework.spec.template_limits import LimitedSandbox, limit_message, render_limited

    problems = _unrendered(loaded)
    env = LimitedSandbox(undefined=jinja2.StrictUndefined, autoescape=False)

    def var(name: str, default: Any = _MISSING) -> Any:
        if name in variables:
            return variables[name]
        if default is not _MISSING:
            return default
        raise jinja2.UndefinedError(f"var('{name}') is not defined")

    env.globals["var"] = var
    if interval is not None:
        env.globals.update(zip(_BOUNDS, interval.bounds(), strict=True))
    sources, by_interval = dict(loaded.spec.sources), []
    for name, source in loaded.spec.sources.items():
        path = getattr(source, PATH_KEY, None)
        if not isinstance(path, str) or not is_template(path):
            continue
        at = ("sources", name, PATH_KEY)
        try:
            template = env.from_string(path)
            if set(_BOUNDS) & jinja2.meta.find_undeclared_variables(jinja2.Environment().parse(path)):
                if interval is None:
                    problems.append(
                        loaded.problem(f"source '{name}': path reads the interval, and {no_interval[0]}", at, no_interval[1])
                    )
                    continue
                by_interval.append(name)
            text = render_limited(template)
        except jinja2.TemplateSyntaxError as e:
            problems.append(loaded.problem(f"source '{name}': path is not a valid template: {e.message}", at, _HINT))
            continue
        except Exception as e:  # noqa: BLE001 - every render error is the user's template's
            message = e.message if isinstance(e, jinja2.UndefinedError) else limit_message(e) or f"{type(e).__name__}: {e}"
            problems.append(loaded.problem(f"source '{name}': path template: {message}", at, _HINT))
            continue
        if is_template(text) or not text.strip():
            problems.append(loaded.problem(f"source '{name}': path renders as '{text}'", at, _HINT))
            continue
        sources[name] = source.model_copy(update={PATH_KEY: text})
    if problems:
        raise BadInput(*problems)
    if not by_interval and sources == loaded.spec.sources:
        return loaded, ()
    return replace(loaded, spec=loaded.spec.model_copy(update={"sources": sources})), tuple(by_interval)


_HINT = (
    "a source path may use interval_start / interval_end (e.g. {{ interval_start.date() }}, "
    "{{ interval_start.strftime('%Y/%m/%d') }}) and var('name')"
)


def _unrendered(loaded: LoadedPipeline) -> list[Problem]:
    """A template anywhere in sources or outputs but a source's path: nothing renders it."""
    found: list[Problem] = []
    data = loaded.doc.data if isinstance(loaded.doc.data, dict) else {}

    def walk(value: Any, at: tuple[Any, ...]) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if not (len(at) == 2 and at[0] == "sources" and key == PATH_KEY):
                    walk(item, (*at, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, (*at, i))
        elif is_template(value):
            found.append(
                loaded.problem(
                    f"{'.'.join(map(str, at))}: '{value}' is a template, and it is not rendered here (it would be taken literally)",
                    at,
                    hint="templates are rendered in steps (sql, settings) and in a source's path; write the value itself here",
                )
            )

    for section in ("sources", "outputs"):
        if isinstance(data.get(section), dict):
            for name, item in data[section].items():
                walk(item, (section, name))
    if isinstance(data.get("vars"), dict):
        for name, value in data["vars"].items():
            if is_template(value):
                found.append(
                    loaded.problem(
                        f"vars.{name}: '{value}' is a template, and a var's value is not rendered (it would be taken literally)",
                        ("vars", name),
                        hint="write the template where it is rendered, in the step's SQL (e.g. {{ interval_start.date() }}) "
                        "or a source's path; a var holds a value: give it with --var or in the profile",
                    )
                )
    return found
