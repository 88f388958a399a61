"""Writes framework/spec/gx_catalog.json from the installed Great Expectations (imports it: slow).

After upgrading Great Expectations: `python -m framework.quality.catalog`; a test checks the
file against the installed library.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from framework.spec.expectation_catalog import CATALOG_FILE, FRAMEWORK_ARGS, type_name

__all__ = ["CATALOG_FILE", "build_catalog", "main"]


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
            name: {"required": name in required, "types": sorted(_schema_types(prop)), **_bounds(prop)}
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


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _bounds(prop: dict[str, Any]) -> dict[str, Any]:
    """The range GX's model allows a number argument (`mostly`: 0 to 1), as {"bounds": {...}}."""
    options = [prop, *(o for key in ("anyOf", "oneOf", "allOf") for o in prop.get(key, []))]
    found = {k: option[k] for option in options for k in _BOUNDS if k in option}
    return {"bounds": found} if found else {}


def main() -> None:
    CATALOG_FILE.write_text(json.dumps(build_catalog(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {CATALOG_FILE}", file=sys.stderr)


if __name__ == "__main__":
    main()
