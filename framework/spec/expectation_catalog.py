"""What expectations exist and what arguments each takes, known without importing Great Expectations.

`tributary validate` must answer in well under a second, and importing Great Expectations takes
several. So the installed library's expectations are described once in `gx_catalog.json` (name,
whether it judges single rows, each argument's JSON types and whether it is required), which
framework.quality.catalog writes from the installed library (and a test keeps equal to it).
"""

from __future__ import annotations

import json
import math
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

#: Arguments naming columns of the checked rows.
COLUMN_ARGS = ("column", "column_A", "column_B", "column_list")

_JSON_TYPES = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
    "null": (type(None),),
}


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
        elif (outside := _outside(args[arg].get("bounds", {}), value)) is not None:
            problems.append(f"{name}: argument '{arg}' must be {outside}, not {value!r} ({_range(args[arg]['bounds'])})")
    missing = [a for a, spec in args.items() if spec["required"] and a not in kwargs]
    if missing:
        problems.append(f"{name}: missing argument(s) {', '.join(missing)}")
    return problems + _value_problems(name, kwargs)


def _value_problems(name: str, kwargs: dict[str, Any]) -> list[str]:
    """Arguments of the right type that no run could use: a regex Java refuses (Spark runs it with
    java.util.regex: the run failed with a PatternSyntaxException, exit 1), a range from a higher
    bound to a lower one (every row failed), a NaN bound or an empty value_set (every row failed, or
    none could)."""
    from framework.spec.java_regex import java_groups

    problems = []
    for arg in ("regex", "regex_list"):
        value = kwargs.get(arg)
        for pattern in value if isinstance(value, list) else [value]:
            if isinstance(pattern, str):
                try:
                    java_groups(pattern)
                except ValueError as e:
                    said = str(e).removeprefix("pattern is not a regular expression: ")
                    problems.append(f"{name}: {arg} {pattern!r} is not a regular expression Java reads: {said}")
    for arg, value in kwargs.items():
        if isinstance(value, float) and math.isnan(value):
            problems.append(f"{name}: {arg} is NaN (not a number): no value compares with it, so the check means nothing")
    for arg in ("type_", "type_list"):
        value = kwargs.get(arg)
        for named in value if isinstance(value, list) else [value]:
            if isinstance(named, str) and named not in SPARK_TYPE_NAMES:
                usual = _SPARK_TYPE_OF.get(named.strip().upper())
                instead = f"write {usual}" if usual else "write a pyspark type name such as StringType or LongType"
                problems.append(f"{name}: {arg} {named!r} is not a Spark type name Great Expectations knows: {instead}")
    value_set = kwargs.get("value_set")
    if isinstance(value_set, list) and not value_set:
        outcome = "no value can fail it" if "_not_" in name else "every value fails it"
        problems.append(f"{name}: value_set is empty, so {outcome}")
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high))
    if numbers and low > high:  # type: ignore[operator]
        problems.append(f"{name}: min_value {low} is more than max_value {high}: no value lies between them")
    return problems


#: The type names `type_` and `type_list` take on Spark: pyspark.sql.types' classes (Great Expectations
#: looks each up there; the run failed on one it did not find, and `type_list` dropped it silently)
SPARK_TYPE_NAMES = frozenset(
    {
        "ArrayType", "AtomicType", "BinaryType", "BooleanType", "ByteType", "CalendarIntervalType", "CharType",
        "DataType", "DateType", "DayTimeIntervalType", "DecimalType", "DoubleType", "FloatType", "FractionalType",
        "IntegerType", "IntegralType", "LongType", "MapType", "NullType", "NumericType", "ShortType", "StringType",
        "StructType", "TimestampNTZType", "TimestampType", "VarcharType", "VariantType", "YearMonthIntervalType",
    }
)  # fmt: skip
#: Spark SQL's names for them, for the hint
_SPARK_TYPE_OF = {
    "STRING": "StringType", "INT": "IntegerType", "INTEGER": "IntegerType", "BIGINT": "LongType", "LONG": "LongType",
    "SMALLINT": "ShortType", "TINYINT": "ByteType", "DOUBLE": "DoubleType", "FLOAT": "FloatType", "REAL": "FloatType",
    "BOOLEAN": "BooleanType", "DATE": "DateType", "TIMESTAMP": "TimestampType", "TIMESTAMP_NTZ": "TimestampNTZType",
    "DECIMAL": "DecimalType", "BINARY": "BinaryType", "ARRAY": "ArrayType", "MAP": "MapType", "STRUCT": "StructType",
    "VARCHAR": "StringType", "CHAR": "StringType", "NUMBER": "NumericType",
}  # fmt: skip


def _range(bounds: dict[str, Any]) -> str:
    low = bounds.get("minimum", bounds.get("exclusiveMinimum"))
    high = bounds.get("maximum", bounds.get("exclusiveMaximum"))
    if low is not None and high is not None:
        return f"Great Expectations takes {low} to {high}"
    return "Great Expectations' range for it"


_LIMITS = {
    "minimum": (lambda v, b: v >= b, "at least"),
    "maximum": (lambda v, b: v <= b, "at most"),
    "exclusiveMinimum": (lambda v, b: v > b, "more than"),
    "exclusiveMaximum": (lambda v, b: v < b, "less than"),
}


def _outside(bounds: dict[str, Any], value: Any) -> str | None:
    """What a number must be to lie in the range Great Expectations' model gives its argument
    (the catalog's `bounds`), or None when it does (or is no number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    broken = [f"{word} {bound}" for key, bound in bounds.items() for ok, word in [_LIMITS[key]] if not ok(value, bound)]
    return " and ".join(broken) or None


def _accepts(allowed: set[str], value: Any) -> bool:
    if isinstance(value, bool):
        return "boolean" in allowed
    if isinstance(value, int) and "integer" in allowed:
        return True
    return type_name(value) in allowed or (type_name(value) == "string" and "date" in allowed)
