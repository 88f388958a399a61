"""Pipeline variables: spec defaults < profile < `--var k=v` on the command line."""

from __future__ import annotations

from typing import Any

import yaml

from framework.errors import BadInput, Problem


def parse_cli_vars(pairs: list[str]) -> dict[str, Any]:
    """`k=v` pairs; values are read as YAML scalars so `n=3` is a number and `on=true` a bool."""
    result: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise BadInput(Problem(f"bad --var '{pair}'", hint="write --var name=value, e.g. --var min_calls=5"))
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        if isinstance(value, (dict, list)):
            value = raw  # a var is a scalar; keep the text as given
        result[key] = value
    return result


def resolve_vars(spec_vars: dict[str, Any], profile_vars: dict[str, Any], cli_vars: dict[str, Any]) -> dict[str, Any]:
    return {**spec_vars, **profile_vars, **cli_vars}
