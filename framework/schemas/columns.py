"""The columns of a node's rows as `validate` knows them: names, Spark types, and how sure it is.

A Schema lists columns in order. `complete` says whether the list is all of them: a source without
a declared schema, or a query whose output names only Spark can tell (an unaliased `count(*)`),
has columns no one can list before Spark starts, so a name missing from it proves nothing. Checks
report a missing column only against a complete schema.

A column's type is known (declared, read from Parquet footers or a Delta log, or passed through
unchanged), inferred (sqlglot's guess for an expression, which can differ from Spark's), or
unknown. Checks judge known types only; `validate --explain` shows the inferred ones too.

Types are written as Spark SQL writes them (`TIMESTAMP`, `ARRAY<STRING>`, `DECIMAL(10, 2)`),
normalized by sqlglot's Spark dialect so that `long` and `BIGINT` are one type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from framework.spec.base import closest


@dataclass(frozen=True)
class Column:
    name: str
    type: str | None = None  # as Spark SQL writes it; None: not known
    inferred: bool = False  # the type is sqlglot's inference, not declared or passed through

    @property
    def known_type(self) -> str | None:
        """The type when it is certain (declared or passed through), else None."""
        return None if self.inferred else self.type


@dataclass(frozen=True)
class Schema:
    columns: tuple[Column, ...] = ()
    #: every column is listed (else a name missing here may still be there at run time)
    complete: bool = True
    #: why the list may not be complete, in words for a note or --explain
    why_incomplete: str = ""
    _index: dict[str, Column] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for column in self.columns:
            self._index.setdefault(column.name.lower(), column)

    @classmethod
    def unknown(cls, why: str) -> Schema:
        return cls((), complete=False, why_incomplete=why)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def find(self, name: str) -> Column | None:
        """The column of that name (Spark compares names without case)."""
        return self._index.get(name.lower())

    def lacks(self, name: str) -> bool:
        """Certainly has no column of that name."""
        return self.complete and self.find(name) is None

    def hint(self, name: str, what: str) -> str:
        """`did you mean 'x'?`, else the columns `what` has."""
        lowered = {n.lower(): n for n in self.names}
        match = closest(name.lower(), set(lowered))
        if match:
            return f"did you mean '{lowered[match]}'?"
        return f"{what} has: {', '.join(self.names)}" if self.names else f"{what} has no columns"

    def incomplete(self, why: str) -> Schema:
        """The same columns, no longer known to be all of them."""
        return Schema(self.columns, complete=False, why_incomplete=self.why_incomplete or why)


def from_pairs(pairs: list[tuple[str, str | None]]) -> Schema:
    """A complete schema of declared (name, type text) pairs; a type Spark may read but sqlglot
    cannot is kept unknown."""
    return Schema(tuple(Column(name, spark_type(type_) if type_ else None) for name, type_ in pairs))


def from_ddl(ddl: str | dict[str, str]) -> Schema:
    """A schema from Spark DDL (`ts TIMESTAMP, n INT`, `a: int`, with NOT NULL / COMMENT) or a
    column -> type mapping. A part that does not read as `name type` makes the schema incomplete
    rather than wrong: the run's own parser reports it."""
    if isinstance(ddl, dict):
        return from_pairs([(str(k), str(v)) for k, v in ddl.items()])
    pairs: list[tuple[str, str | None]] = []
    for part in split_top_level(ddl):
        named = _name_and_type(part)
        if named is None:
            return Schema.unknown(f"its schema '{ddl}' is not plain Spark DDL")
        pairs.append(named)
    return from_pairs(pairs)


def _name_and_type(part: str) -> tuple[str, str] | None:
    text = part.strip()
    if text.startswith("`"):
        end = text.find("`", 1)
        while end > 0 and text[end : end + 2] == "``":
            end = text.find("`", end + 2)
        if end < 0:
            return None
        name, rest = text[1:end].replace("``", "`"), text[end + 1 :]
    else:
        name, _, rest = text.partition(" ")
        if ":" in name:
            name, _, more = name.partition(":")
            rest = more + " " + rest
    rest = rest.strip().removeprefix(":").strip()
    upper = rest.upper()
    for marker in (" COMMENT ", " NOT NULL"):
        at = upper.find(marker)
        if at >= 0:
            rest, upper = rest[:at], upper[:at]
    if not name or not rest.strip():
        return None
    return name, rest.strip()


@lru_cache(maxsize=512)
def spark_type(text: str) -> str | None:
    """A type as Spark SQL writes it (BIGINT for long, TIMESTAMP for timestamp_ltz), None when
    sqlglot cannot read it."""
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        built = exp.DataType.build(text.strip(), dialect="spark")
    except (SqlglotError, ValueError):
        return None
    return normalized(built.sql("spark"))


def normalized(text: str) -> str:
    """One spelling per Spark type: TIMESTAMP_LTZ is TIMESTAMP, DECIMAL is DECIMAL(10, 0), and
    VARCHAR(n) / CHAR(n) are STRING (Spark reads them as strings)."""
    upper = text.upper()
    if upper == "TIMESTAMP_LTZ":
        return "TIMESTAMP"
    if upper == "DECIMAL":
        return "DECIMAL(10, 0)"
    if re.fullmatch(r"(VAR)?CHAR\(\d+\)|TEXT", upper):
        return "STRING"
    return text


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside <...>, (...) and back-quotes."""
    parts: list[str] = []
    current: list[str] = []
    depth, quoted = 0, False
    for ch in text:
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch in "<(":
            depth += 1
        elif not quoted and ch in ">)":
            depth -= 1
        if ch == sep and depth == 0 and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in (p.strip() for p in parts) if p]


def shown(type_: str) -> str:
    """A type as Spark's messages write it (`int`, `decimal(10,2)`, `array<string>`)."""
    return type_.lower().replace(", ", ",").replace(": ", ":")


# -- what a type is, for the checks that need a kind of column -----------------------------------

_NUMERIC = ("TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL")
_COMPLEX = ("ARRAY<", "MAP<", "STRUCT<")


def is_timestamp(type_: str) -> bool:
    return type_.upper() in ("TIMESTAMP", "TIMESTAMP_NTZ")


def is_numeric(type_: str) -> bool:
    return type_.upper().split("(")[0] in _NUMERIC


def is_text(type_: str) -> bool:
    return type_.upper().split("(")[0] in ("STRING", "VARCHAR", "CHAR")


def is_complex(type_: str) -> bool:
    return type_.upper().startswith(_COMPLEX)
