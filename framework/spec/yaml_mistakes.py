"""The usual mistakes in a hand-written YAML file, said in plain words at their line.

PyYAML reports what its parser expected (`expected <block end>, but found '?'`, `mapping values
are not allowed here`), which names neither the mistake nor the fix. Three mistakes cause most of
these, and each can be recognised from the text around the line PyYAML points at:

- a `{{ … }}` template value left unquoted: YAML reads `{` as the start of a mapping, so the value
  becomes a mapping of a mapping, or the line cannot be parsed at all;
- a line whose indentation lines up with no line above it (between two levels), or a key at the
  indentation of a list's items (or an item at the indentation of keys): the block above cannot
  end there;
- a line indented further than a `key: value` line above it, which YAML reads as more of that
  value, so its own `key:` is refused.

Each function returns None when the text does not show its mistake; the caller then keeps
PyYAML's words.
"""

from __future__ import annotations

import re

from framework.errors import Problem

_TEMPLATE_VALUE = re.compile(r"^(?P<lead>\s*(?:-\s+)?(?:(?P<key>[^\s#'\"{][^#]*?):\s+)?)(?P<value>\{\{.*?)\s*(?:#.*)?$")


def unquoted_template(text: str, file: str, line: int) -> Problem | None:
    """A `{{ … }}` value at the start of a value on `line` (1-based), not quoted."""
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return None
    match = _TEMPLATE_VALUE.match(lines[line - 1])
    if not match:
        return None
    value, key = match["value"], match["key"]
    quoted = f"'{value}'" if '"' in value and "'" not in value else '"' + value.replace('"', '\\"') + '"'
    written = f"{key}: {quoted}" if key else f"- {quoted}"
    return Problem(
        "quote a `{{ … }}` value: unquoted, YAML reads its `{` as the start of a mapping",
        file=file,
        line=line,
        col=len(match["lead"]) + 1,
        hint=f"write {written}",
    )


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#") and stripped != "---"


def _levels_above(lines: list[str], index: int) -> list[tuple[int, int]]:
    """(indentation, 0-based line) of the lines that are open at `index`: the line just above,
    then each nearest line above it indented less, out to the left margin."""
    levels: list[tuple[int, int]] = []
    for i in range(index - 1, -1, -1):
        if not _content(lines[i]):
            continue
        indent = _indent(lines[i])
        if not levels or indent < levels[-1][0]:
            levels.append((indent, i))
        if indent == 0:
            break
    return levels


def _shown(lines: list[str], *indexes: int) -> str:
    width = len(str(max(indexes) + 1))
    return "\n".join(f"    {i + 1:>{width}} | {lines[i]}" for i in sorted(set(indexes)))


def _item(line: str) -> bool:
    stripped = line.lstrip(" ")
    return stripped == "-" or stripped.startswith("- ")


def misaligned(text: str, file: str, index: int) -> Problem | None:
    """Line `index` (0-based, where PyYAML found the block above could not end) lines up with no
    open line above it, or puts a key at the level of a list's items (or an item among keys)."""
    lines = text.splitlines()
    if not 0 <= index < len(lines) or not _content(lines[index]):
        return None
    here, indent = lines[index], _indent(lines[index])
    levels = _levels_above(lines, index)
    if not levels:
        return None
    what = f"line {index + 1} (`{here.strip()}`)"
    same = [i for level, i in levels if level == indent]
    if same:
        other = same[0]
        if _item(lines[other]) == _item(here):
            return None
        parent = next((i for level, i in levels if level < indent), None)
        if _item(lines[other]):
            message = (
                f"{what} is a key at the indentation of the list item on line {other + 1}: "
                "a list's items and a mapping's keys cannot share one level"
            )
            hint = f"write it as an item (`- {here.strip()}`), or indent it under the item it belongs to"
        else:
            message = (
                f"{what} is a list item at the indentation of the key on line {other + 1}: "
                "a mapping's keys and a list's items cannot share one level"
            )
            hint = "indent the list under the key it belongs to (`key:` then its `- item` lines)"
        if parent is not None:
            hint += f", or move it to line up with the key above that (`{lines[parent].strip()}`, line {parent + 1})"
        shown = [other, index] + ([parent] if parent is not None else [])
        return Problem(f"{message}\n{_shown(lines, *shown)}", file=file, line=index + 1, col=indent + 1, hint=hint)
    deeper = [(level, i) for level, i in levels if level > indent]
    shallower = [(level, i) for level, i in levels if level < indent]
    options = []
    if deeper:
        level, i = deeper[-1]
        options.append((level, i))
    if shallower:
        options.append(shallower[0])
    said = " or ".join(f"{level} spaces to line up with `{lines[i].strip()}` (line {i + 1})" for level, i in options)
    return Problem(
        f"{what} is indented {indent} spaces, which does not line up with the lines above it\n"
        f"{_shown(lines, *(i for _, i in options), index)}",
        file=file,
        line=index + 1,
        col=indent + 1,
        hint=f"indent it {said}",
    )


_KEY_VALUE = re.compile(r"^\s*(?:-\s+)?[^\s#'\"][^#]*?:\s+[^\s#|>&*!]")


def continued_value(text: str, file: str, index: int) -> Problem | None:
    """Line `index` (0-based, where a `key:` was refused) is indented further than a `key: value`
    line above it, so YAML read it as more of that value."""
    lines = text.splitlines()
    if not 0 <= index < len(lines) or not _content(lines[index]):
        return None
    above = next((i for i in range(index - 1, -1, -1) if _content(lines[i])), None)
    if above is None or _indent(lines[index]) <= _indent(lines[above]) or not _KEY_VALUE.match(lines[above]):
        return None
    return Problem(
        f"line {index + 1} (`{lines[index].strip()}`) is indented further than line {above + 1}, "
        f"so YAML reads it as more of line {above + 1}'s value\n{_shown(lines, above, index)}",
        file=file,
        line=index + 1,
        col=_indent(lines[index]) + 1,
        hint=f"indent it {_indent(lines[above])} spaces to line up with `{lines[above].strip()}`, "
        "or with the key it belongs under",
    )
