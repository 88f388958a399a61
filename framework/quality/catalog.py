"""What expectations exist and what arguments each takes, known without importing Great Expectations.

`tributary validate` must answer in well under a second, and importing Great Expectations takes
several. So the installed library's expectations are described once in `gx_catalog.json` (name,
whether it judges single rows, each argument's JSON types and whether it is required); a test
checks that file against the installed library, and `python -m framework.quality.catalog`
rewrites it after an upgrade.
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from framework.spec.base import did_you_mean

CATALOG_FILE = Path(__file__).with_name("gx_catalog.json")

#: Arguments every GX expectation has that are about GX itself (rendering, ids, its own
#: severity), not about the data; Tributary sets or replaces them (see framework.quality.suite).
FRAMEWORK_ARGS = frozenset(
    {
        "id",
        "meta",
        "notes",
        "result_format",
        "description",
        "catch_exceptions",
        "rendered_content",
        "severity",
        "windows",
        "batch_id",
    }
)

#: Columns of the integration quality table (framework.quality.evaluation.metrics_rows), which
#: `on: integration` expectations check.
INTEGRATION_COLUMNS = (
    "run_id", "pipeline", "step", "operator", "strategy", "size", "timeout_s",
    "tuples", "instances", "units", "completeness_100", "completeness_85", "completeness_75",
    "partial_completeness", "recall", "correct_rate",
    "windows_open_max", "windows_open_mean", "tuples_held_max", "tuples_held_mean", "evaluated_at",
)  # fmt: skip

#: Arguments naming columns of the checked rows.
COLUMN_ARGS = ("column", "column_A", "column_B", "column_list")

#: A row's failed `drop` expectations travel as the bits of one positive 64-bit number.
MAX_DROP_EXPECTATIONS = 63

_JSON_TYPES = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
    "null": (type(None),),
}


def build_catalog() -> dict[str, Any]:
    """Describe the installed Great Expectations' built-in expectations (imports it: slow)."""
    import inspect

    import great_expectations.expectations as gxe
    from great_expectations.expectations.expectation import (
        ColumnMapExpectation,
        ColumnPairMapExpectation,
        Expectation,
        MulticolumnMapExpectation,
    )

    row_level = (ColumnMapExpectation, ColumnPairMapExpectation, MulticolumnMapExpectation)
    entries: dict[str, Any] = {}
    for attr in sorted(dir(gxe)):
        cls = getattr(gxe, attr)
        if not (inspect.isclass(cls) and issubclass(cls, Expectation)) or not getattr(cls, "expectation_type", None):
            continue
        schema = cls.schema()
        required = set(schema.get("required", []))
        args = {
            name: {"required": name in required, "types": sorted(_schema_types(prop))}
            for name, prop in schema.get("properties", {}).items()
            if name not in FRAMEWORK_ARGS
        }
        entries[cls.expectation_type] = {"class": cls.__name__, "row_level": issubclass(cls, row_level), "args": args}
    import great_expectations

    return {"great_expectations": great_expectations.__version__, "expectations": entries}


def _schema_types(prop: dict[str, Any]) -> set[str]:
    """JSON types a property accepts (empty: anything)."""
    if "type" in prop:
        kinds = prop["type"]
        return set(kinds) if isinstance(kinds, list) else {kinds}
    found: set[str] = set()
    for key in ("anyOf", "oneOf", "allOf"):
        for option in prop.get(key, []):
            inner = _schema_types(option)
            if not inner:
                return set()
            found |= inner
    if "enum" in prop:
        found |= {type_name(v) for v in prop["enum"]}
    return found


def type_name(value: Any) -> str:
    for name, types in _JSON_TYPES.items():
        if name != "integer" and isinstance(value, types) and not (name == "number" and isinstance(value, bool)):
            return name
    return "object"


@lru_cache(maxsize=1)
def catalog() -> dict[str, Any]:
    return json.loads(CATALOG_FILE.read_text(encoding="utf-8"))["expectations"]


def is_row_level(name: str) -> bool:
    """Whether the expectation judges each row on its own (so failing rows can be dropped)."""
    return bool(catalog().get(name, {}).get("row_level"))


def expectation_problems(name: str, kwargs: dict[str, Any]) -> list[str]:
    """What is wrong with `name: kwargs` as an expectation, in words that say what to do."""
    known = catalog()
    if name not in known:
        return [f"unknown expectation '{name}'; {did_you_mean(name, set(known))}"]
    args = known[name]["args"]
    problems = []
    for arg, value in kwargs.items():
        if arg not in args:
            problems.append(f"{name}: unknown argument '{arg}'; {did_you_mean(arg, set(args))}")
            continue
        allowed = set(args[arg]["types"])
        if allowed and value is not None and not _accepts(allowed, value):
            problems.append(
                f"{name}: argument '{arg}' must be {' or '.join(sorted(allowed))}, not {type_name(value)} ({value!r})"
            )
    missing = [a for a, spec in args.items() if spec["required"] and a not in kwargs]
    if missing:
        problems.append(f"{name}: missing argument(s) {', '.join(missing)}")
    return problems


def _accepts(allowed: set[str], value: Any) -> bool:
    if isinstance(value, bool):
        return "boolean" in allowed
    if isinstance(value, int) and "integer" in allowed:
        return True
    return type_name(value) in allowed or (type_name(value) == "string" and "date" in allowed)


def main() -> None:
    CATALOG_FILE.write_text(json.dumps(build_catalog(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {CATALOG_FILE}", file=sys.stderr)


if __name__ == "__main__":
    main()
