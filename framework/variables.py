"""Pipeline variables: spec defaults < profile < `--var k=v` on the command line."""

from __future__ import annotations

from typing import Any

from framework.errors import BadInput, Problem
from framework.spec.yaml_source import plain_value


def parse_cli_vars(pairs: list[str]) -> dict[str, Any]:
    """`k=v` pairs. A value is read as one plain YAML value, so `n=3` is a number, `on=true` a bool
    and `since=2026-01-31` a date; a quoted value ('"3"') is text, and so is anything that is not
    one plain value (a list, a mapping: a var is one value). A var without a value is refused: an
    empty text is written quoted ('""')."""
    result: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise BadInput(
                Problem(f"bad --var '{pair}': expected name=value", hint="write --var name=value, e.g. --var min_calls=5")
            )
        result[key] = _value(key, raw)
    return result


def _value(key: str, raw: str) -> Any:
    text = raw.strip()
    if not text:  # most often a shell variable that is not set: `--var day=$DAY`
        raise BadInput(
            Problem(
                f"--var {key} has no value",
                hint=f"give it one (a shell variable that is not set leaves it empty); for an empty text write --var {key}='\"\"'",
            )
        )
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text[0] in "!&*":
        raise BadInput(
            Problem(
                f"--var {key}={raw}: YAML tags and aliases are not values",
                hint=f"pass plain text, a number, true/false or a date; to pass this text, quote it: --var {key}='\"{text}\"'",
            )
        )
    if text[0] in "[{" or ": " in text or "\n" in text:
        return raw  # not one plain value: kept as the text given
    try:
        return plain_value(text)
    except ValueError as e:
        raise BadInput(
            Problem(
                f"--var {key}={raw}: {e}",
                hint=f"write a valid value (a date as YYYY-MM-DD), or quote it to pass it as text: --var {key}='\"{text}\"'",
            )
        ) from None


def resolve_vars(spec_vars: dict[str, Any], profile_vars: dict[str, Any], cli_vars: dict[str, Any]) -> dict[str, Any]:
    return {**spec_vars, **profile_vars, **cli_vars}
