"""The two decorators of udfs/ and what they record.

`@udf(returns=...)` marks a vectorized function for SQL templates: it gets one pandas Series per
argument and returns a Series of the declared Spark type (Spark's pandas UDF). `@group_function`
marks the function of a `group:` step: `f(events, state, args)`, called once per closed group
(framework.operators.group). Both record where the function is defined, so a problem with it is
reported at its file and line.

Recording happens while framework.functions.loader imports udfs/: the loader opens a collection,
imports the modules, and takes what the decorators put in it. Importing this module stays light
(no pandas, no Spark): `tributary validate` uses it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class SqlFunction:
    """A pandas UDF SQL templates call by `name`."""

    name: str
    fn: Callable[..., Any]
    returns: str  # Spark DDL type, e.g. "double" or "array<string>"
    arity: int | None  # positional arguments it takes (None: any number, *args)
    file: str
    line: int


@dataclass(frozen=True)
class GroupFunction:
    """The function a `group:` step calls per closed group: f(events, state, args)."""

    name: str
    fn: Callable[..., Any]
    returns: str | None  # Spark DDL of the rows it returns ("a string, b double"); the step may say it instead
    file: str
    line: int


@dataclass
class Collected:
    """What the decorators recorded while udfs/ was imported, and what they found wrong."""

    sql: dict[str, SqlFunction] = field(default_factory=dict)
    group: dict[str, GroupFunction] = field(default_factory=dict)
    problems: list[tuple[str, str, int]] = field(default_factory=list)  # (message, file, line)


_collecting: list[Collected] = []


@contextmanager
def collecting() -> Iterator[Collected]:
    """Record the decorators' functions while the body imports modules (framework.functions.loader)."""
    collected = Collected()
    _collecting.append(collected)
    try:
        yield collected
    finally:
        _collecting.pop()


def udf(returns: str, name: str | None = None) -> Callable[[F], F]:
    """Register a vectorized function for SQL templates, called as `name(...)` (default: its own name)."""

    def mark(fn: F) -> F:
        file, line = _where(fn)
        arity = _positional_arity(fn)
        _record("sql", SqlFunction(name or fn.__name__, fn, str(returns), arity, file, line), file, line)
        return fn

    return mark


def group_function(returns: str | None = None, name: str | None = None) -> Callable[[F], F]:
    """Register the function of `group:` steps: f(events: DataFrame, state, args) -> None | DataFrame."""

    def mark(fn: F) -> F:
        file, line = _where(fn)
        arity = _positional_arity(fn)
        if arity is not None and arity != 3:
            _problem(
                f"group function '{fn.__name__}' takes {arity} argument(s); it is called as f(events, state, args)", file, line
            )
        _record("group", GroupFunction(name or fn.__name__, fn, returns, file, line), file, line)
        return fn

    return mark


def _record(kind: str, function: SqlFunction | GroupFunction, file: str, line: int) -> None:
    if not _collecting:
        return  # imported outside Tributary's loader (e.g. the analyst's own tests): nothing to record
    registered: dict[str, Any] = getattr(_collecting[-1], kind)
    earlier = registered.get(function.name)
    if earlier is not None:
        _problem(f"function '{function.name}' is registered twice (first at {earlier.file}:{earlier.line})", file, line)
    registered[function.name] = function


def _problem(message: str, file: str, line: int) -> None:
    if _collecting:
        _collecting[-1].problems.append((message, file, line))


def _where(fn: Callable[..., Any]) -> tuple[str, int]:
    code = getattr(fn, "__code__", None)
    if code is None:
        return "udfs", 0
    return code.co_filename, code.co_firstlineno


def _positional_arity(fn: Callable[..., Any]) -> int | None:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return None
    return sum(1 for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)
