"""Render a step's SQL template: sandboxed Jinja2, StrictUndefined, and the user's vocabulary.

Vocabulary: `ref('step')`, `source('name')`, `var('x', default)`, the `lit` filter (a value as
a safe SQL literal), the `ident` filter (a safe identifier), `raw_sql` (text as written), every
macro in sql/macros/*.sql, and in a run with a time interval `interval_start` / `interval_end`
(framework.spec.intervals): typed timestamp literals like every other value, whose use the
renderer notes, so a run that needs an interval can refuse to start without one.

Variables are safe by default: a var's value is data, so `{{ var('since') }}` renders as a typed
SQL literal ('2026-01-01', 5, TRUE, DATE '2026-01-31'), as `| lit` does, and a value typed on the
command line cannot add SQL of its own. `| ident` makes it a quoted name; `| raw_sql` splices it
as written, which `validate` reports as a warning at its line. Joining a var into text (`~`, `%`,
`format`, `join`) right where var() is called is refused unless the result says which of the three
it is: a located error that teaches the rule.

The rule holds through anything else a template can do, because the sandbox keeps track of var
data at run time: text computed from a var (by any filter but the explicit four, a method, an
operator, `~`, a slice, a loop over it, inside a macro) is var data again and prints as a string
literal, whatever was computed. What only picks among values keeps what it picks: a name the
template wrote, picked by a var (`columns[var('c')]`, `columns.get(var('c'))`, `names |
reject('equalto', var('skip'))`), carries none of the var's characters and prints as written. A
list of var data prints as a SQL list of literals; a mapping or other object holding var data is
refused at its line; numbers, dates and booleans print as typed literals (a non-finite number has
none). Deliberately out of reach: a template that branches on a var (`{% if var('x') == 'a' %}`)
writes only its own text, and what comes out of `| lit`, `| ident` or `| raw_sql` is SQL text by
the template's say-so.

Rendering keeps a map from each character of the output back to the template line that emitted
it, so a SQL syntax error found in rendered text is reported at the template's own file:line.

A template cannot hang or exhaust the machine: Jinja's sandbox caps `range`, and the limited
sandbox (framework.spec.template_limits) caps what every operator, string method and filter may
build, a render stops after RENDER_SECONDS or MAX_RENDERED characters, and endless macro
recursion is reported as such. Templates are read as UTF-8, with a located error.
"""

from __future__ import annotations

import bisect
import contextvars
import functools
import math
import re
import traceback
import types
from collections.abc import ItemsView, Iterable, Iterator, KeysView, ValuesView
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import jinja2
import jinja2.compiler
from jinja2.runtime import BlockReference, LoopContext, Macro
from jinja2.sandbox import SandboxedEnvironment
from jinja2.utils import Cycler, Namespace

from framework.errors import BadInput, Problem
from framework.spec.base import closest, did_you_mean
from framework.spec.intervals import Interval, IntervalBound
from framework.spec.template_limits import (
    MAX_RENDERED,
    RENDER_SECONDS,
    BoundedConcat,
    LimitedSandbox,
    TemplateLimit,
    deadline,
    limit_message,
)
from framework.spec.text import decode

_MISSING = object()
_INLINE = "<inline>"


class _KeepVarData(BoundedConcat):
    """`a ~ b` compiles to a join Jinja imports into the template; here it goes through the
    environment, which checks its size and keeps var data var data (see the module docstring)."""

    concat_method = "join_keeping_var_data"


class _BoundedSandbox(LimitedSandbox):
    """The limited sandbox (framework.spec.template_limits) where every operator, call and `~`
    keeps var data var data (see the module docstring)."""

    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})
    code_generator_class = _KeepVarData

    def getattr(self, obj: Any, attribute: str) -> Any:
        _note_interval(obj)  # interval_start.date(), .strftime(...)
        return super().getattr(obj, attribute)

    def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
        result = self.bounded_binop(op, left, right)
        return _carry(result, left, right, choosing=not isinstance(result, str))  # `list + list` picks items

    def call(__self, __context: Any, __obj: Any, /, *args: Any, **kwargs: Any) -> Any:  # Jinja's own signature
        args = __self.checked_args(__obj, args, kwargs)
        result = SandboxedEnvironment.call(__self, __context, __obj, *args, **kwargs)
        if isinstance(__obj, (Macro, BlockReference, LoopContext)) or __obj in (_ref, _source, _var):
            return result  # the template's own text (a var in it is already a literal), or a name
        method = getattr(__obj, "__wrapped__", __obj)  # str.format comes wrapped by the sandbox
        owner = getattr(method, "__self__", None)  # var('x').strip()
        choosing = owner is None or getattr(method, "__name__", None) in _CHOOSING_METHODS  # dict(...), d.get(k)
        return _carry(result, owner, args, kwargs, choosing=choosing)

    def join_keeping_var_data(self, join: Any, values: tuple[Any, ...]) -> Any:
        return _carry(self.bounded_concat(join, values), values)


class _SqlLoader(jinja2.FileSystemLoader):
    """Templates under sql/, read as UTF-8 with a located error for any other encoding."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Any]:
        pieces = jinja2.loaders.split_template_path(template)  # refuses '..'
        for folder in self.searchpath:
            path = Path(folder, *pieces)
            if path.is_file():
                shown = str(Path("sql", *pieces))
                text = decode(path.read_bytes(), shown)
                mtime = path.stat().st_mtime
                return text, str(path), lambda p=path, m=mtime: p.is_file() and p.stat().st_mtime == m
        raise jinja2.TemplateNotFound(template)


#: why a template has no interval, and what to do, when nobody said otherwise
NO_INTERVAL = (
    "this run has no time interval",
    "pass --interval START/END to tributary run, or add schedule: {cron: ...} to the pipeline",
)


class VarText(str):
    """A var's text value, or text made from one: rendered as a SQL string literal unless a filter
    says otherwise. Its characters and slices are var text too (`{% for c in var('x') %}`, `[0:9]`)."""

    __slots__ = ()

    def __getitem__(self, key: Any) -> VarText:  # type: ignore[override]
        return VarText(str.__getitem__(self, key))

    def __iter__(self) -> Iterator[VarText]:
        return (VarText(c) for c in str.__iter__(self))

    def __reversed__(self) -> Iterator[VarText]:
        return (VarText(c) for c in reversed(str(self)))


class SqlText(str):
    """What `| lit`, `| ident` and `| raw_sql` return: SQL text because the template says so, even
    when made from var data (`ids | map('lit') | join(', ')` joins literals, not var text)."""

    __slots__ = ()


#: Filters that say how a value goes into the SQL
_EXPLICIT = frozenset({"lit", "quote", "ident", "raw_sql"})
#: Filters and methods that pick among the values they are given, rather than compute new text:
#: what they pick keeps what it was (a string the template wrote stays the template's text).
_CHOOSING_FILTERS = frozenset(
    {"attr", "batch", "d", "default", "dictsort", "first", "groupby", "items", "last", "list", "map", "max", "min",
     "random", "reject", "rejectattr", "reverse", "select", "selectattr", "slice", "sort", "unique"}
)  # fmt: skip
_CHOOSING_METHODS = frozenset({"get", "pop", "setdefault", "copy", "keys", "values", "items", "cycle", "next"})
_SAY_WHAT = "say what it is: | lit for a value, | ident for a name, | raw_sql for SQL as written"
_SCAN_LIMIT = 100_000  # items looked at for var data in one call's arguments; past it, assume some


class _VarDataIter:
    """An iterator made from var data (`var('x') | map('upper')`): its items are var data, and it
    remembers whether it yielded any, for what consumes it (`| join`)."""

    def __init__(self, items: Iterable[Any], clean: set[str]):
        self._items, self._clean = iter(items), clean
        self._yielded_var = False
        self._yielded_clean: set[str] = set()

    def __iter__(self) -> _VarDataIter:
        return self

    def __next__(self) -> Any:
        item = _taint(next(self._items), self._clean, {})
        self._yielded_var |= _holds_var_data((item,), self._yielded_clean)
        return item


def _holds_var_data(values: Iterable[Any], clean: set[str]) -> bool:
    """Whether var data is in `values` (through lists, tuples, sets, mappings, namespaces and
    cyclers), adding to `clean` every string the template itself wrote that it finds on the way."""
    found, seen, looked = False, set(), 0
    stack = list(values)
    while stack:
        value = stack.pop()
        looked += 1
        if looked > _SCAN_LIMIT:
            return True
        if isinstance(value, VarText):
            found = True
        elif isinstance(value, str):
            clean.add(str(value))
        elif isinstance(value, _VarDataIter):
            found |= value._yielded_var
            clean |= value._yielded_clean
        elif id(value) in seen:
            continue
        elif isinstance(value, dict):
            seen.add(id(value))
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, (list, tuple, set, frozenset, KeysView, ValuesView, ItemsView)):
            seen.add(id(value))
            stack.extend(value)
        elif isinstance(value, Namespace):
            seen.add(id(value))
            stack.append(value._Namespace__attrs)  # type: ignore[attr-defined]
        elif isinstance(value, Cycler):
            seen.add(id(value))
            stack.extend(value.items)
        elif isinstance(value, (types.MethodType, types.BuiltinMethodType)):
            stack.append(value.__self__)  # var('x').upper, as a value
    return found


def _taint(value: Any, clean: set[str], memo: dict[int, Any]) -> Any:
    """`value` as var data: its strings become VarText, unless equal to one the template wrote."""
    if isinstance(value, (VarText, SqlText, Relation, _VarDataIter)):
        return value
    if isinstance(value, str):
        return value if value in clean else VarText(value)
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, list):
        tainted: list[Any] = []
        memo[id(value)] = tainted
        tainted.extend(_taint(v, clean, memo) for v in value)
        return tainted
    if isinstance(value, dict):
        mapping: dict[Any, Any] = {}
        memo[id(value)] = mapping
        mapping.update((_taint(k, clean, memo), _taint(v, clean, memo)) for k, v in value.items())
        return mapping
    if isinstance(value, tuple):
        items = [_taint(v, clean, memo) for v in value]
        return value._make(items) if hasattr(value, "_make") else tuple(items)  # groupby's named tuples
    if isinstance(value, (set, frozenset)):
        return type(value)(_taint(v, clean, memo) for v in value)
    if isinstance(value, Iterator):
        return _VarDataIter(value, clean)
    if isinstance(value, (bytes, bytearray, memoryview)):  # would hide the text from this tracking
        raise TemplateUserError("bytes made from a var have no place in a SQL template", hint=_SAY_WHAT)
    return value


def _carry(result: Any, *inputs: Any, choosing: bool = False) -> Any:
    """What a filter, method, operator or `~` returns, as var data when any input was var data.
    `choosing`: the result is one of the inputs, so a string equal to one the template wrote is
    the template's own (`columns.get(var('c'))`, `names | reject('equalto', var('skip'))`)."""
    clean: set[str] = set()
    if not _holds_var_data(inputs, clean):
        return result
    return _taint(result, clean if choosing else set(), {})


def _saying_sql(filter_function: Any) -> Any:
    @functools.wraps(filter_function)
    def said(value: Any) -> SqlText:
        return SqlText(filter_function(value))

    return said


def _keeping_var_data(name: str, filter_function: Any) -> Any:
    """A Jinja filter whose result is var data when any of its arguments is."""
    skip = 1 if getattr(filter_function, "jinja_pass_arg", None) is not None else 0  # context / environment
    choosing = name in _CHOOSING_FILTERS

    @functools.wraps(filter_function)  # keeps jinja_pass_arg
    def kept(*args: Any, **kwargs: Any) -> Any:
        return _carry(filter_function(*args, **kwargs), args[skip:], kwargs, choosing=choosing)

    return kept


class TemplateUserError(Exception):
    """Raised by ref()/source()/var()/lit inside a template; located by the renderer."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


def sql_literal(value: Any) -> str:
    """A Python value as a Spark SQL literal that cannot break out of its quotes."""
    _note_interval(value)
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TemplateUserError(f"{value} has no SQL literal", hint="pass a finite number")
        return repr(value)
    if isinstance(value, Decimal):
        return f"{value}BD"
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return "(" + ", ".join(sql_literal(v) for v in items) + ")"
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def raw_sql(value: Any) -> str:
    """The value as written, spliced into the SQL unchecked (validate warns at each use)."""
    return str(value)


def _finalize(value: Any) -> Any:
    """What `{{ ... }}` prints: a var's text, and values that are not text, as SQL literals;
    text the template itself built (a macro's output, ref() and source()) as it is."""
    _note_interval(value)
    if isinstance(value, VarText):
        return sql_literal(str(value))
    if callable(value) and not isinstance(value, (str, jinja2.Undefined)):  # {{ source }}: the function, not its call
        name = getattr(value, "__name__", "").lstrip("_") or type(value).__name__
        raise TemplateUserError(
            f"{{{{ {name} }}}} prints a function, not SQL", hint=f"call it: {name}(...), e.g. source('calls')"
        )
    if isinstance(value, (bool, date, Decimal, float)) or value is None:
        return sql_literal(value)
    if isinstance(value, (str, int)) or not (isinstance(value, _VarDataIter) or _holds_var_data((value,), set())):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        return sql_literal(value)
    if isinstance(value, _VarDataIter):
        raise TemplateUserError(
            "an iterator of var data has no SQL literal", hint=f"add | list for a list of literals, or {_SAY_WHAT}"
        )
    raise TemplateUserError(f"a {type(value).__name__} holding var data has no SQL literal", hint=_SAY_WHAT)


def sql_identifier(value: Any) -> str:
    """A name as a back-quoted Spark SQL identifier."""
    return "`" + str(value).replace("`", "``") + "`"


class Relation(str):
    """What ref()/source() return: the quoted view name the runner registers for that node."""


@dataclass
class _RenderState:
    step: str
    steps: set[str]
    sources: set[str]
    variables: dict[str, Any]
    refs: list[str] = field(default_factory=list)
    source_refs: list[str] = field(default_factory=list)
    vars_used: set[str] = field(default_factory=set)
    interval_used: bool = False


_state: contextvars.ContextVar[_RenderState] = contextvars.ContextVar("tributary_render_state")


def _ref(name: str) -> Relation:
    state = _state.get()
    if name not in state.steps:
        if name in state.sources:
            raise TemplateUserError(f"ref('{name}'): '{name}' is a source", hint=f"write source('{name}')")
        raise TemplateUserError(f"ref('{name}'): no step named '{name}'", hint=did_you_mean(name, state.steps))
    if name not in state.refs:
        state.refs.append(name)
    return Relation(sql_identifier(name))


def _source(name: str) -> Relation:
    state = _state.get()
    if name not in state.sources:
        if name in state.steps:
            raise TemplateUserError(f"source('{name}'): '{name}' is a step", hint=f"write ref('{name}')")
        raise TemplateUserError(f"source('{name}'): no source named '{name}'", hint=did_you_mean(name, state.sources))
    if name not in state.source_refs:
        state.source_refs.append(name)
    return Relation(sql_identifier(name))


def _var(name: str, default: Any = _MISSING) -> Any:
    state = _state.get()
    state.vars_used.add(name)
    if name in state.variables:
        return _as_var(state.variables[name])
    if default is not _MISSING:
        return _as_var(default)
    raise TemplateUserError(
        f"var('{name}') is not defined",
        hint=f"add it under 'vars:' in the pipeline or the profile, pass --var {name}=..., or give a default: var('{name}', ...)",
    )


def _note_interval(value: Any) -> None:
    if isinstance(value, IntervalBound):
        state = _state.get(None)
        if state is not None:
            state.interval_used = True


def _as_var(value: Any) -> Any:
    """A var's value as var data, its text VarText at any depth (a list or mapping from a profile)."""
    return _taint(value, set(), {})


@dataclass(frozen=True)
class SourceMap:
    """Maps offsets in rendered SQL to (template file, line)."""

    starts: list[int]  # rendered offset where each piece starts
    pieces: list[tuple[str, int, bool, str]]  # (file, template line at piece start, is_literal, text)

    def locate(self, offset: int) -> tuple[str, int]:
        i = max(bisect.bisect_right(self.starts, offset) - 1, 0)
        file, line, literal, text = self.pieces[i]
        if literal:
            line += text.count("\n", 0, offset - self.starts[i])
        return file, line


@dataclass(frozen=True)
class RenderedSql:
    step: str
    text: str
    template: str  # the template as shown to the user (sql/x.sql, or the pipeline file for inline SQL)
    source_map: SourceMap
    refs: tuple[str, ...]
    sources: tuple[str, ...]
    vars_used: frozenset[str]
    warnings: tuple[Problem, ...] = ()  # uses of raw_sql, at their line
    interval_used: bool = False  # the SQL depends on interval_start / interval_end

    def problem(self, message: str, line: int = 1, hint: str | None = None) -> Problem:
        """A problem at the template line that emitted `line` of the rendered SQL."""
        file, template_line = self.locate(line)
        return Problem(f"step '{self.step}': {message}", file=file, line=template_line, hint=hint)

    def locate(self, line: int, col: int = 1) -> tuple[str, int]:
        """Template file and line of a 1-based (line, col) in the rendered text."""
        lines = self.text.split("\n")
        offset = sum(len(t) + 1 for t in lines[: max(line - 1, 0)]) + max(col - 1, 0)
        return self.source_map.locate(min(offset, max(len(self.text) - 1, 0)))


class TemplateRenderer:
    """One per pipeline: a sandboxed environment over sql/ with macros loaded as globals."""

    def __init__(
        self,
        sql_dir: Path,
        shown_root: Path,
        steps: set[str],
        sources: set[str],
        variables: dict[str, Any],
        interval: Interval | None = None,
        no_interval: tuple[str, str] = NO_INTERVAL,
    ):
        """`interval`: the run's time interval; without one, a template using interval_start or
        interval_end fails with `no_interval` (why, and what to do)."""
        self.sql_dir = sql_dir
        self.shown_root = shown_root
        self.steps, self.sources, self.variables = steps, sources, variables
        self.env = _BoundedSandbox(
            loader=_SqlLoader(str(sql_dir)),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
            finalize=_finalize,
        )
        for name, function in list(self.env.filters.items()):
            self.env.filters[name] = _keeping_var_data(name, function)
        explicit = {"lit": sql_literal, "quote": sql_literal, "ident": sql_identifier, "raw_sql": raw_sql}
        self.env.filters.update({name: _saying_sql(function) for name, function in explicit.items()})
        self.env.globals.update(ref=_ref, source=_source, var=_var)
        if interval is not None:
            self.env.globals.update(zip(("interval_start", "interval_end"), interval.bounds(), strict=True))
        else:
            for name in ("interval_start", "interval_end"):
                self.env.globals[name] = jinja2.StrictUndefined(hint=f"{name}: {no_interval[0]}", name=name)
        self.no_interval_hint = no_interval[1]
        self._macros_loaded = False
        self.macro_files: dict[str, str] = {}  # each macro's file (sql/macros/x.sql), for "did you mean"

    def has_template(self, relative: str) -> bool:
        try:
            pieces = jinja2.loaders.split_template_path(relative)  # refuses '..'
        except jinja2.TemplateNotFound:
            return False
        return Path(self.sql_dir, *pieces).is_file()

    def template_hint(self, relative: str) -> str:
        return _template_hint(self.sql_dir, relative)

    def _shown(self, filename: str | None) -> str:
        if not filename:
            return _INLINE
        try:
            return str(Path(filename).resolve().relative_to(self.shown_root.resolve()))
        except ValueError:
            return filename

    def _load_macros(self, state: _RenderState) -> None:
        """Every macro of sql/macros/*.sql becomes a global (dbt style: callable by name)."""
        if self._macros_loaded:
            return
        self._macros_loaded = True
        macro_dir = self.sql_dir / "macros"
        for path in sorted(macro_dir.glob("*.sql")) if macro_dir.is_dir() else []:
            rel = path.relative_to(self.sql_dir).as_posix()
            module = self._guarded(lambda rel=rel: self.env.get_template(rel).module, state, inline=None, file=f"sql/{rel}")
            for name in dir(module):
                if not name.startswith("_"):
                    self.env.globals[name] = getattr(module, name)
                    self.macro_files[name] = f"sql/{rel}"

    def render_file(self, step: str, relative: str) -> RenderedSql:
        state = self._state(step)
        token = _state.set(state)
        try:
            self._load_macros(state)
            path = self.sql_dir / relative
            if not path.is_file():
                raise BadInput(
                    Problem(
                        f"step '{step}': template '{relative}' not found under {self._shown(str(self.sql_dir))}/",
                        hint=_template_hint(self.sql_dir, relative),
                    )
                )
            shown = self._shown(str(path))
            template = self._guarded(lambda: self.env.get_template(relative), state, inline=None, file=shown)
            return self._render(template, state, shown, inline=None)
        finally:
            _state.reset(token)

    def render_inline(self, step: str, sql: str, shown_file: str, first_line: int) -> RenderedSql:
        state = self._state(step)
        token = _state.set(state)
        try:
            self._load_macros(state)
            inline = (shown_file, first_line)
            template = self._guarded(lambda: self.env.from_string(sql), state, inline=inline)
            return self._render(template, state, shown_file, inline=inline, source=sql)
        finally:
            _state.reset(token)

    def _state(self, step: str) -> _RenderState:
        return _RenderState(step=step, steps=self.steps, sources=self.sources, variables=self.variables)

    def _render(
        self,
        template: jinja2.Template,
        state: _RenderState,
        shown: str,
        inline: tuple[str, int] | None,
        source: str | None = None,
    ) -> RenderedSql:
        if source is None:
            source = decode(Path(template.filename).read_bytes(), shown) if template.filename else ""

        def run() -> tuple[str, SourceMap]:
            with deadline(RENDER_SECONDS):
                return _render_with_map(template, shown, inline, source)

        warnings = self._guarded(lambda: self._var_uses(state, source, shown, inline), state, inline, file=shown)
        text, source_map = self._guarded(run, state, inline, file=shown)
        return RenderedSql(
            step=state.step,
            text=text,
            template=shown,
            source_map=source_map,
            refs=tuple(state.refs),
            sources=tuple(state.source_refs),
            vars_used=frozenset(state.vars_used),
            warnings=tuple(warnings),
            interval_used=state.interval_used,
        )

    def _var_uses(self, state: _RenderState, source: str, shown: str, inline: tuple[str, int] | None) -> list[Problem]:
        """Warnings for each `raw_sql`; an error where a var is joined into text without saying
        how the result goes into the SQL (see the module docstring)."""
        warnings = []
        for node, parents in _walk(self.env.parse(source)):
            file, line = self._where(None if inline else shown, getattr(node, "lineno", 1), inline)
            if isinstance(node, jinja2.nodes.Filter) and node.name == "raw_sql":
                warnings.append(
                    Problem(
                        f"step '{state.step}': raw_sql splices a value into the SQL as written",
                        file=file,
                        line=line,
                        hint="only for SQL text you trust; a var passed on the command line can change the query",
                    )
                )
            if _joins_text(node) and _has_var(node) and not any(_explicit(p) for p in parents):
                raise BadInput(
                    Problem(
                        f"step '{state.step}': a var is joined into SQL text here, so Tributary cannot keep it a value",
                        file=file,
                        line=line,
                        hint="say what the result is: ( ... ) | lit for a value, | ident for a name, | raw_sql for SQL as written",
                    )
                )
        return warnings

    def _guarded(self, fn: Any, state: _RenderState, inline: tuple[str, int] | None, file: str | None = None) -> Any:
        """Run fn; turn any template error into a BadInput at the template's own file:line (at its
        first line when no frame of the template says where, e.g. while parsing it)."""
        try:
            return fn()
        except BadInput:
            raise
        except jinja2.TemplateSyntaxError as e:
            file, line = self._where(e.filename, e.lineno, inline)
            raise BadInput(
                Problem(
                    f"step '{state.step}': template syntax error: {e.message}",
                    file=file,
                    line=line,
                    hint="check the {{ }} and {% %} tags on that line",
                )
            ) from None
        except jinja2.TemplateNotFound as e:
            file, line = self._where_in_traceback(e, inline)
            raise BadInput(
                Problem(
                    f"step '{state.step}': template '{e.name}' not found",
                    file=file,
                    line=line,
                    hint=_template_hint(self.sql_dir, str(e.name)),
                )
            ) from None
        except Exception as e:  # noqa: BLE001 - every render error is the user's template's
            where, line = self._where_in_traceback(e, inline)
            if where is None and file is not None:
                where, line = file, 1
            if isinstance(e, RecursionError):
                message = "recursion too deep: a macro that calls itself without end, or expressions nested too deeply"
                hint = "give the macro a case where it stops calling itself"
            elif limit_message(e) is not None:
                message, hint = str(limit_message(e)), "a template builds SQL text; compute data in SQL, not in the template"
            elif isinstance(e, TemplateUserError):
                message, hint = str(e), e.hint
            elif isinstance(e, jinja2.UndefinedError) and str(e.message).startswith(("interval_start:", "interval_end:")):
                message, hint = f"{e.message}", self.no_interval_hint
            elif isinstance(e, jinja2.UndefinedError):
                message = f"{e.message}"
                hint = self._undefined_hint(str(e.message))
            elif isinstance(e, jinja2.exceptions.SecurityError):
                message, hint = f"not allowed in a template: {e}", "templates may only build SQL text"
            else:
                message, hint = f"{type(e).__name__}: {e}", None
            raise BadInput(Problem(f"step '{state.step}': {message}", file=where, line=line, hint=hint)) from None

    def _undefined_hint(self, message: str) -> str:
        """The macro or template function an undefined name most likely means, else where names come from."""
        undefined = re.fullmatch(r"'([^']+)' is undefined", message)
        callables = {"ref": None, "source": None, "var": None, **self.macro_files}
        match = closest(undefined[1], set(callables)) if undefined else None
        if match:
            return f"did you mean '{match}'?" + (f" (a macro in {callables[match]})" if callables[match] else "")
        return "template values come from var('name'), ref('step'), source('name') or a macro"

    def _where(self, filename: str | None, lineno: int | None, inline: tuple[str, int] | None) -> tuple[str, int | None]:
        if inline and (filename is None or filename == "<template>"):
            return inline[0], inline[1] + (lineno or 1) - 1
        return self._shown(filename), lineno

    def _where_in_traceback(self, error: BaseException, inline: tuple[str, int] | None) -> tuple[str | None, int | None]:
        """The innermost traceback frame that belongs to a template (Jinja rewrites them)."""
        for frame in reversed(traceback.extract_tb(error.__traceback__)):
            name = frame.filename
            if name == "<template>" or (name and Path(name).suffix == ".sql"):
                return self._where(name, frame.lineno, inline)
        return (inline[0], inline[1]) if inline else (None, None)


def _walk(node: jinja2.nodes.Node, parents: tuple[jinja2.nodes.Node, ...] = ()) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    yield node, parents
    for child in node.iter_child_nodes():
        yield from _walk(child, (*parents, node))


def _explicit(node: jinja2.nodes.Node) -> bool:
    return isinstance(node, jinja2.nodes.Filter) and node.name in _EXPLICIT


def _joins_text(node: jinja2.nodes.Node) -> bool:
    """`a ~ b`, `'%s' % x`, `x | format(...)`, `x | join`, `'{}'.format(x)`, `s.join(x)`, `s.replace(...)`."""
    if isinstance(node, (jinja2.nodes.Concat, jinja2.nodes.Mod)):
        return True
    if isinstance(node, jinja2.nodes.Filter):
        return node.name in ("format", "join", "replace")
    return (
        isinstance(node, jinja2.nodes.Call)
        and isinstance(node.node, jinja2.nodes.Getattr)
        and node.node.attr in ("format", "join", "replace")
    )


def _has_var(node: jinja2.nodes.Node) -> bool:
    """Whether a var's text feeds this node: a var() call, or a method called on one. A filter that
    says what its value is, and a macro's output (the template's own text, where the var renders as
    a literal), stop the search."""
    for child in node.iter_child_nodes():
        if _explicit(child):
            continue
        if isinstance(child, jinja2.nodes.Call) and isinstance(child.node, jinja2.nodes.Name):
            if child.node.name == "var":
                return True
            continue
        if _has_var(child):
            return True
    return False


def _template_hint(sql_dir: Path, relative: str) -> str:
    known = [p.relative_to(sql_dir).as_posix() for p in sql_dir.rglob("*.sql")] if sql_dir.is_dir() else []
    return did_you_mean(relative, [k for k in known if not k.startswith("macros/")]) or "create the file under sql/"


def _render_with_map(template: jinja2.Template, shown: str, inline: tuple[str, int] | None, source: str) -> tuple[str, SourceMap]:
    """Render, recording which template line emitted each chunk (Jinja's debug line info)."""
    line_starts = [0] + [i + 1 for i, c in enumerate(source) if c == "\n"]
    offset_base = inline[1] - 1 if inline else 0
    context = template.new_context({})
    generator = template.root_render_func(context)
    starts: list[int] = []
    pieces: list[tuple[str, int, bool, str]] = []
    out: list[str] = []
    position = 0
    try:
        for chunk in generator:
            if position + len(chunk) > MAX_RENDERED:
                raise TemplateLimit(f"the template renders more than {MAX_RENDERED:,} characters of SQL")
            reported = template.get_corresponding_lineno(generator.gi_frame.f_lineno) if generator.gi_frame else 1
            line, literal = _chunk_line(chunk, reported, source, line_starts)
            starts.append(position)
            pieces.append((shown, line + offset_base, literal, chunk))
            out.append(chunk)
            position += len(chunk)
    except Exception:  # noqa: BLE001 - handle_exception raises it again
        template.environment.handle_exception()  # re-raises with template frames in the traceback
    if not pieces:
        starts, pieces = [0], [(shown, 1 + offset_base, True, "")]
    return "".join(out), SourceMap(starts, pieces)


def _chunk_line(chunk: str, reported: int, source: str, line_starts: list[int]) -> tuple[int, bool]:
    """Where a chunk starts in the template. Literal text is found verbatim near the reported line
    (Jinja reports the line of the preceding tag for text that follows a block tag)."""
    if not source or not chunk or (len(chunk) < 2 and "\n" not in chunk):
        return reported, "\n" in chunk
    begin = line_starts[min(max(reported - 1, 0), len(line_starts) - 1)]
    found = source.find(chunk, begin)
    if found >= 0:
        line = bisect.bisect_right(line_starts, found)
        if line - reported <= 3:
            return line, True
    return reported, False
