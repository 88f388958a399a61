"""What a template may build: time, size, and every operation that allocates by a number it gives.

Why: a template builds a few lines of SQL, a path or a setting. Jinja's sandbox keeps it away from
Python's internals, but not from asking Python's C code for gigabytes: `'x' * 10**9`,
`'ab'.center(10**9)`, `'%0999999999d' % 1`, `'{:>999999999}'.format(1)`, `lipsum(10**9)`. No time
limit can stop those (the alarm that ends a slow render is seen between two bytecodes, not inside
one C call), and a size check after the render comes after the memory is gone. So each such
operation is checked before it runs: what it would build may be at most MAX_BUILT characters or
items. A render also stops after RENDER_SECONDS (loops that build nothing) and at MAX_RENDERED
characters.

Every template Tributary renders goes through `LimitedSandbox`: a step's SQL (framework.templating,
which adds its var-data rules on top), a source's `path:` (framework.spec.source_paths) and a
step's settings (framework.spec.step_vars).
"""

from __future__ import annotations

import operator
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import update_wrapper
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment, SandboxedFormatter
from markupsafe import Markup

RENDER_SECONDS = 2.0  # one template's render, macros included
MAX_RENDERED = 10_000_000  # characters one template may render
MAX_BUILT = 1_000_000  # characters or items one operation may build
MAX_EXPONENT = 256
HINT = "a template builds SQL text, a path or a setting; compute data in SQL, not in the template"


class TemplateLimit(Exception):
    """A template went past what a template needs (time, size, recursion)."""


def _check(size: Any, what: str) -> None:
    if isinstance(size, (int, float)) and size > MAX_BUILT:
        raise TemplateLimit(f"{what} would build {int(size):,} characters or items, more than {MAX_BUILT:,}")


#: a printf-style conversion: %[(name)][flags][width][.precision][length]type
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?[a-zA-Z%]")
#: a format spec: [[fill]align][sign][z][#][0][width][grouping][.precision][type]
_SPEC = re.compile(r"(?:.?[<>=^])?[-+ ]?z?#?0?(\d+)?[_,]?(?:\.(\d+))?[a-zA-Z%]?", re.DOTALL)


def check_percent(text: str, values: Any) -> None:
    """`text % values`: no width or precision past MAX_BUILT, also one given as `*`, nor all of
    them added up (`'%(a)999999d' * 1000 % {'a': 1}`)."""
    total = len(text)
    for match in _PERCENT.finditer(text):
        for number in match.groups():
            if number == "*":
                given = values if isinstance(values, tuple) else (values,)
                for value in given:
                    _check(value if isinstance(value, int) else 0, "a '*' width in % formatting")
                    total += value if isinstance(value, int) else 0
            elif number:
                _check(int(number), f"the width or precision in '{match.group()}'")
                total += int(number)
    _check(total, "% formatting, its widths added up,")


def check_format_spec(spec: str) -> None:
    """One field's spec of str.format (its nested fields already filled in)."""
    match = _SPEC.fullmatch(spec)
    for number in match.groups() if match else ():
        if number:
            _check(int(number), f"the width or precision in '{{:{spec}}}'")


class _BoundedFormatter(SandboxedFormatter):
    """Checks each field's width before it is built, and what all the fields built so far."""

    built = 0

    def vformat(self, format_string: str, args: Any, kwargs: Any) -> str:
        self.built = len(format_string)
        return super().vformat(format_string, args, kwargs)

    def format_field(self, value: Any, format_spec: str) -> Any:
        check_format_spec(format_spec)
        field = super().format_field(value, format_spec)
        self.built += len(field)
        _check(self.built, "str.format, its fields added up,")
        return field


_COMPARISONS: dict[str, Any] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "gteq": operator.ge,
    "lt": operator.lt,
    "lteq": operator.le,
    "in": lambda a, b: a in b,
    "notin": lambda a, b: a not in b,
}
_TEXTS = (str, bytes, bytearray)
_SEQUENCES = (*_TEXTS, list, tuple)


def deep_size(value: Any) -> int:
    """How many characters (of text) and items (anything else) `value` holds, counting a value
    held many times over each time: `[a] * 300` of a list `a` of a million numbers is 300 items
    that print 300 million. Walked in Python, where the render's time limit is seen, and stopped
    past MAX_BUILT."""
    texts, containers = _TEXTS, (list, tuple, set, frozenset, dict)
    size, stack = 1, [value]  # each value counts 1 when first seen, the rest of its size when walked
    while stack and size <= MAX_BUILT:
        item = stack.pop()
        if isinstance(item, texts):
            size += len(item) - 1
        elif isinstance(item, containers) and item:
            children = list(item.items()) if isinstance(item, dict) else item
            size += len(children) - 1
            if size <= MAX_BUILT:
                stack.extend(c for c in children if isinstance(c, texts + containers))
    return size


def _sized(items: Any) -> list[Any]:
    if isinstance(items, (list, tuple, str)):
        return list(items)
    return [item for item, _ in zip(items, range(MAX_BUILT + 1), strict=False)]


def check_str_method(owner: str | bytes | bytearray, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """A string's (or bytes') method about to run with these arguments; returns the arguments to
    call it with (an iterable given to `join` is read here once, so it is passed on as a list)."""
    if name in ("center", "ljust", "rjust", "zfill") and args:
        _check(args[0], f"str.{name}")
    elif name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(size, int):
            tabs = owner.count("\t") if isinstance(owner, str) else owner.count(b"\t")
            _check(len(owner) + tabs * size, "str.expandtabs")
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], _TEXTS) and isinstance(args[1], _TEXTS):
        old, new = args[0], args[1]
        try:
            matches = len(owner) + 1 if not old else owner.count(old)  # type: ignore[arg-type]
        except TypeError:  # bytes and text mixed: the method itself refuses them
            return args
        count = args[2] if len(args) > 2 else kwargs.get("count", -1)
        if isinstance(count, int) and count >= 0:
            matches = min(matches, count)
        _check(len(owner) + matches * len(new), "str.replace")
    elif name == "join" and args:
        items = _sized(args[0])
        _check(len(items), "str.join")
        _check(sum(len(i) if isinstance(i, _TEXTS) else 0 for i in items) + len(owner) * max(len(items) - 1, 0), "str.join")
        return (items, *args[1:])
    elif name == "translate" and args:
        table = args[0]
        values = table.values() if isinstance(table, dict) else table if isinstance(table, (list, tuple)) else ()
        longest = max((len(v) for v in values if isinstance(v, _TEXTS)), default=1)
        _check(len(owner) * longest, "str.translate")
    return args


class LimitedSandbox(SandboxedEnvironment):
    """Jinja's sandbox (no internals, `range` capped) with every operation that allocates by a
    number the template gives bounded (module docstring)."""

    intercepted_binops = frozenset({"+", "*", "**", "%"})
    code_generator_class: type[jinja2.compiler.CodeGenerator]  # set below the class: `~` bounded

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.filters.update(_BOUNDED_FILTERS)
        given = self.finalize

        def finalize(value: Any) -> Any:  # what {{ ... }} prints: a value that is not text yet is printed in C
            if not isinstance(value, str):
                _check(deep_size(value), "printing a value")
            return given(value) if given is not None else value

        self.finalize = finalize
        if "lipsum" in self.globals:
            self.globals["lipsum"] = _lipsum

    def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
        return self.bounded_binop(op, left, right)

    def bounded_binop(self, op: str, left: Any, right: Any) -> Any:
        if op == "**":
            if isinstance(right, (int, float)) and abs(right) > MAX_EXPONENT and isinstance(left, (int, float)) and abs(left) > 1:
                raise TemplateLimit(f"{left} ** {right} is larger than a template needs")
            return operator.pow(left, right)
        if op == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, _SEQUENCES) and isinstance(times, int) and times > 1:
                    _check(deep_size(seq) * times, f"repeating a value {times:,} times")
            return operator.mul(left, right)
        if op == "+" and isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
            _check(len(left) + len(right), "+")
        if op == "%" and isinstance(left, _TEXTS):
            check_percent(left if isinstance(left, str) else left.decode("latin-1"), right)
        return self.binop_table[op](left, right)

    def bounded_compare(self, left: Any, comparisons: tuple[tuple[str, Any], ...]) -> Any:
        """`left op1 right1 op2 right2 ...` as Python chains it, each container compared checked
        first: comparing two lists compares their items in C, where the time limit is not seen."""
        result: Any = True
        for op, right in comparisons:
            for side in (left, right):
                if isinstance(side, (list, tuple, dict, set, frozenset)):
                    _check(deep_size(side), "comparing")
            result = _COMPARISONS[op](left, right)
            if not result:
                return result
            left = right
        return result

    def bounded_concat(self, join: Any, values: tuple[Any, ...]) -> Any:
        """`a ~ b ~ ...`: one join in C of what each value prints, so checked before it."""
        _check(sum(deep_size(v) for v in values), "~")
        return join(values)

    def call(__self, __context: Any, __obj: Any, /, *args: Any, **kwargs: Any) -> Any:  # Jinja's own signature
        return super().call(__context, __obj, *__self.checked_args(__obj, args, kwargs), **kwargs)

    @staticmethod
    def checked_args(method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The arguments to call `method` with, once a string method's checks passed."""
        owner = getattr(method, "__self__", None)
        if isinstance(owner, _TEXTS):
            return check_str_method(owner, getattr(method, "__name__", ""), args, kwargs)
        return args

    def wrap_str_format(self, value: Any) -> Any:
        """str.format / format_map through a formatter that checks each field's width first."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return wrapped
        if isinstance(value.__self__, Markup):  # Jinja's own formatter would build any width
            raise TemplateLimit("format on a safe (Markup) string: format the text before | safe")
        text, is_map, vformat = value.__self__, value.__name__ == "format_map", _BoundedFormatter(self).vformat

        def bounded(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                return type(text)(vformat(text, (), args[0]))
            return type(text)(vformat(text, args, kwargs))

        return update_wrapper(bounded, value)


class BoundedConcat(jinja2.compiler.CodeGenerator):
    """`a ~ b ~ ...` compiles to one join of every piece, in C; here it goes through the
    environment's `bounded_concat`, which checks what the pieces print first. Comparisons
    (`==`, `<`, `in`, ...) compile to Python's own, which compare two lists item by item in C;
    here they go through `bounded_compare`."""

    concat_method = "bounded_concat"

    @jinja2.compiler.optimizeconst
    def visit_Concat(self, node: jinja2.nodes.Concat, frame: jinja2.compiler.Frame) -> None:
        if frame.eval_ctx.volatile:
            join = "(markup_join if context.eval_ctx.volatile else str_join)"
        else:
            join = "markup_join" if frame.eval_ctx.autoescape else "str_join"
        self.write(f"environment.{self.concat_method}({join}, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    @jinja2.compiler.optimizeconst
    def visit_Compare(self, node: jinja2.nodes.Compare, frame: jinja2.compiler.Frame) -> None:
        self.write("environment.bounded_compare(")
        self.visit(node.expr, frame)
        self.write(", (")
        for operand in node.ops:
            self.write(f"({operand.op!r}, ")
            self.visit(operand.expr, frame)
            self.write("), ")
        self.write("))")


LimitedSandbox.code_generator_class = BoundedConcat


def _bounded_center(value: Any, width: int = 80) -> str:
    _check(width, "the center filter")
    return str(value).center(width)


def _bounded_indent(value: Any, width: Any = 4, first: bool = False, blank: bool = False) -> str:
    lines = str(value).count("\n") + 1
    _check(len(width) * lines if isinstance(width, str) else width * lines if isinstance(width, int) else 0, "the indent filter")
    return jinja2.filters.do_indent(value, width, first, blank)


def _bounded_format(value: Any, *args: Any, **kwargs: Any) -> str:
    check_percent(str(value), kwargs or args)
    return jinja2.filters.do_format(value, *args, **kwargs)


def _bounded_replace(eval_ctx: Any, value: Any, old: str, new: str, count: int | None = None) -> str:
    check_str_method(str(value), "replace", (str(old), str(new), -1 if count is None else count), {})
    return jinja2.filters.do_replace(eval_ctx, value, old, new, count)


def _bounded_join(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> str:
    items = _sized(value)
    if attribute is not None:  # the items' attribute is what is joined
        items = list(map(jinja2.filters.make_attrgetter(eval_ctx.environment, attribute), items))
    _check(sum(deep_size(i) for i in items) + len(str(d)) * len(items), "the join filter")
    return jinja2.filters.do_join(eval_ctx, items, d)


def _bounded_tojson(eval_ctx: Any, value: Any, indent: int | str | None = None) -> Any:
    width = len(indent) if isinstance(indent, str) else indent or 0
    _check(width, "the tojson filter's indent")
    _check(deep_size(value) * (width + 1), "the tojson filter")
    return jinja2.filters.do_tojson(eval_ctx, value, indent)  # type: ignore[arg-type]  # json.dumps takes text too


def _bounded_string(value: Any) -> str:
    _check(deep_size(value), "the string filter")
    return jinja2.filters.soft_str(value)


def _bounded_sum(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
    if isinstance(start, (int, float)) and not isinstance(start, bool):
        return jinja2.filters.sync_do_sum(environment, iterable, attribute, start)
    total = start  # lists or text added up: each addition checked, as `+` is
    for item in iterable:
        if attribute is not None:
            item = jinja2.filters.make_attrgetter(environment, attribute)(item)
        if isinstance(total, _SEQUENCES) and isinstance(item, _SEQUENCES):
            _check(len(total) + len(item), "the sum filter")
        total = total + item
    return total


def _comparing(name: str, compare: Any) -> Any:
    """A filter that compares its items (sort, unique, min, max, groupby, dictsort): comparing two
    lists compares their items, in C, so a list holding one big list many times over is refused."""

    def bounded(*args: Any, **kwargs: Any) -> Any:
        value = args[1] if getattr(compare, "jinja_pass_arg", None) is not None else args[0]
        if isinstance(value, (list, tuple, dict)):
            _check(deep_size(value), f"the {name} filter")
        return compare(*args, **kwargs)

    return update_wrapper(bounded, compare)  # keeps jinja_pass_arg


def _bounded_batch(value: Any, linecount: int, fill_with: Any = None) -> Any:
    _check(linecount, "the batch filter")
    return jinja2.filters.do_batch(value, linecount, fill_with)


def _bounded_wordwrap(environment: Any, s: str, width: int = 79, *args: Any, **kwargs: Any) -> str:
    wrapstring = kwargs.get("wrapstring", args[1] if len(args) > 1 else None) or environment.newline_sequence
    _check(len(s) * (len(wrapstring) + 1), "the wordwrap filter")
    return jinja2.filters.do_wordwrap(environment, s, width, *args, **kwargs)


for _filter in (_bounded_replace, _bounded_join, _bounded_tojson):
    jinja2.pass_eval_context(_filter)
jinja2.pass_environment(_bounded_wordwrap)
jinja2.pass_environment(_bounded_sum)

_BOUNDED_FILTERS = {
    "center": _bounded_center,
    "indent": _bounded_indent,
    "format": _bounded_format,
    "replace": _bounded_replace,
    "join": _bounded_join,
    "tojson": _bounded_tojson,
    "wordwrap": _bounded_wordwrap,
    "string": _bounded_string,
    "sum": _bounded_sum,
    "batch": _bounded_batch,
    **{
        name: _comparing(name, compare)
        for name, compare in (
            ("sort", jinja2.filters.do_sort),
            ("unique", jinja2.filters.do_unique),
            ("min", jinja2.filters.do_min),
            ("max", jinja2.filters.do_max),
            ("groupby", jinja2.filters.sync_do_groupby),
            ("dictsort", jinja2.filters.do_dictsort),
        )
    },
}


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> Any:
    _check(n * max * 12, "lipsum")
    return jinja2.utils.generate_lorem_ipsum(n, html, min, max)


@contextmanager
def deadline(seconds: float = RENDER_SECONDS, error: Callable[[], Exception] | None = None) -> Iterator[None]:
    """Stop a render that runs longer than `seconds` (loops that build nothing, or too much), with
    `error()` if given. On a thread other than the main one, where signals cannot be used, only
    the size limits apply."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    began = time.monotonic()

    def expired(signum: int, frame: Any) -> None:
        if error is not None:
            raise error()
        raise TemplateLimit(f"the template took more than {seconds:g} s to render (a loop too long?)")

    previous = signal.signal(signal.SIGALRM, expired)
    remaining = signal.setitimer(signal.ITIMER_REAL, seconds)[0]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if remaining:  # an outer timer was running: give it back what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(remaining - (time.monotonic() - began), 0.001))


def render_limited(template: jinja2.Template) -> str:
    """A small template (a path, a setting) rendered within the time and size limits."""
    with deadline():
        text = template.render()
    if len(text) > MAX_RENDERED:
        raise TemplateLimit(f"the template renders more than {MAX_RENDERED:,} characters")
    return text


def limit_message(error: BaseException) -> str | None:
    """What to tell the user about an error a render stopped with, when it is a limit's."""
    if isinstance(error, TemplateLimit):
        return str(error)
    if isinstance(error, RecursionError):
        return "recursion too deep: a macro that calls itself without end, or expressions nested too deeply"
    if isinstance(error, MemoryError):
        return "the template needs more memory than the machine has"
    if isinstance(error, ValueError) and "integer string conversion" in str(error):
        return "the template prints a number of more than 4,300 digits"
    return None
