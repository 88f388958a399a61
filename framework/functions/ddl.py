"""Spark DDL column lists ("pair string, correlation double") read without a JVM.

`validate` must tell a misspelt type from a good one before Spark starts; Spark parses the same
text again when the run starts (StructType.fromDDL), so this only has to accept what Spark
accepts and name the column whose type it does not know.
"""

from __future__ import annotations

import re

from framework.spec.base import did_you_mean

SIMPLE_TYPES = frozenset(
    {
        "string", "boolean", "tinyint", "byte", "smallint", "short", "int", "integer", "bigint", "long",
        "float", "real", "double", "date", "timestamp", "timestamp_ntz", "timestamp_ltz", "binary",
        "decimal", "dec", "numeric", "variant",
    }
)  # fmt: skip
_PARAMETRIC = re.compile(r"^(decimal|dec|numeric|varchar|char)\s*\(\s*\d+\s*(,\s*\d+\s*)?\)$")
_NAME = re.compile(r"^(`[^`]+`|[A-Za-z_][A-Za-z0-9_]*)$")


class DdlError(ValueError):
    pass


def columns(ddl: str | dict[str, str]) -> list[tuple[str, str]]:
    """(name, type) of each column, in order; DdlError names the first part it cannot read."""
    pairs = list(ddl.items()) if isinstance(ddl, dict) else [_name_and_type(part) for part in _split(ddl, ",")]
    if not pairs:
        raise DdlError("no columns: write them as 'name type, ...', e.g. 'pair string, correlation double'")
    seen: set[str] = set()
    for name, type_ in pairs:
        if name.lower() in seen:
            raise DdlError(f"column '{name}' appears twice")
        seen.add(name.lower())
        check_type(str(type_), name)
    return [(name, str(type_)) for name, type_ in pairs]


def as_ddl(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"`{name}` {type_}" for name, type_ in pairs)


def check_type(text: str, column: str = "") -> None:
    """Accept a Spark type as DDL writes it (nested arrays, maps and structs included)."""
    t = text.strip().lower()
    where = f"column '{column}': " if column else ""
    if t in SIMPLE_TYPES or _PARAMETRIC.match(t):
        return
    for outer, parts in (("array", 1), ("map", 2), ("struct", None)):
        if t.startswith(outer + "<") and t.endswith(">"):
            inner = text.strip()[len(outer) + 1 : -1]
            if outer == "struct":
                for field in _split(inner, ","):
                    name, _, type_ = field.partition(":")
                    if not type_.strip():
                        name, _, type_ = field.strip().partition(" ")
                    check_type(type_, f"{column}.{name.strip()}" if column else name.strip())
                return
            elements = _split(inner, ",")
            if len(elements) != parts:
                raise DdlError(f"{where}{outer}<...> takes {parts} type(s), got '{text}'")
            for element in elements:
                check_type(element, column)
            return
    word = t.split("(")[0].split("<")[0].strip()
    raise DdlError(f"{where}unknown type '{text.strip()}' ({did_you_mean(word, set(SIMPLE_TYPES) | {'array', 'map', 'struct'})})")


def _name_and_type(part: str) -> tuple[str, str]:
    text = part.strip()
    if text.startswith("`"):
        end = text.find("`", 1)
        name, type_ = text[: end + 1], text[end + 1 :]
    else:
        name, _, type_ = text.partition(" ")
    name, type_ = name.strip(), type_.strip()
    if not _NAME.match(name) or not type_:
        raise DdlError(f"'{text}' is not 'name type' (e.g. 'correlation double')")
    return name.strip("`"), type_


def _split(text: str, sep: str) -> list[str]:
    """Split at `sep` outside <...> and (...)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in (p.strip() for p in parts) if p]
