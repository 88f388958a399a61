"""YAML loading that remembers where every key is, so errors can name file:line:col.

PyYAML keeps duplicate keys silently (the last wins); a pipeline with two steps of the same
name is a mistake we report instead.

Whatever the text, loading ends in data or in a located BadInput, in bounded time and memory:
- only plain YAML values are read (text, numbers, true/false, null, dates, lists, mappings); a
  tag such as `!!python/object` or `!foo` is refused, and a value its tag cannot construct
  (`2026-13-45` read as a date, `!!int abc`) is named at its line;
- aliases repeat what they refer to, so an alias of an alias of ... (a "billion laughs" document)
  grows exponentially: loading stops past MAX_VALUES values or MAX_DEPTH levels of nesting, which
  also ends an alias that refers to the mapping holding it;
- control characters PyYAML refuses are named at their line and column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from framework.errors import BadInput, Problem
from framework.spec.text import read_text
from framework.spec.yaml_mistakes import continued_value, misaligned, unquoted_template

Location = tuple[int, int]  # 1-based line, column
PathKey = tuple[Any, ...]

MAX_DEPTH = 64  # levels of nesting in a document
MAX_VALUES = 100_000  # values a document may expand to (aliases included)
_PLAIN_TAGS = {f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "timestamp", "map", "seq")}
_TAG_WORDS = {"int": "a whole number", "float": "a number", "bool": "true or false", "timestamp": "a date", "null": "null"}


@dataclass
class LocatedDocument:
    """Parsed YAML data plus the position of each key (by its path from the root)."""

    file: str
    data: Any
    positions: dict[PathKey, Location] = field(default_factory=dict)
    #: line where each scalar value's text starts (after a `|` or `>` indicator line)
    value_lines: dict[PathKey, int] = field(default_factory=dict)

    def locate(self, loc: tuple[Any, ...]) -> Location | None:
        """Best position for a pydantic error location; loc parts that are not keys are skipped."""
        path: PathKey = ()
        best = self.positions.get(())
        for i, part in enumerate(loc):
            candidate = (*path, part)
            following = loc[i + 1] if i + 1 < len(loc) else None
            # a union tag that is also a key (a step's `sql:`): skip it when the path goes on beside it
            beside = (
                following is not None and (*path, following) in self.positions and (*candidate, following) not in self.positions
            )
            if candidate in self.positions and not beside:
                path = candidate
                best = self.positions[path]
        return best


def load_yaml(text: str, file: str) -> LocatedDocument:
    """The document in `text` (data None when it holds no document: an empty file)."""
    try:
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        raise BadInput(_malformed(e, text, file)) from None
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, e.position) + 1
        col = e.position - (text.rfind("\n", 0, e.position) + 1) + 1
        raise BadInput(
            Problem(
                f"character #x{e.character:04x} is not allowed in YAML"
                if isinstance(e.character, int)
                else f"malformed YAML: {e}",
                file=file,
                line=line,
                col=col,
                hint='remove it, or write it as an escape inside double quotes (e.g. "\\t")',
            )
        ) from None
    except yaml.YAMLError as e:
        raise BadInput(Problem(f"malformed YAML: {e}", file=file, line=1)) from None
    except RecursionError:
        raise BadInput(
            Problem(
                f"the YAML is nested more than {MAX_DEPTH} levels deep",
                file=file,
                line=_too_deep_line(text),
                hint="flatten the lists or mappings",
            )
        ) from None
    doc = LocatedDocument(file=file, data=None)
    if root is None:
        return doc
    doc.positions[()] = (root.start_mark.line + 1, root.start_mark.column + 1)
    doc.data = _Builder(doc, text).construct(root, ())
    return doc


def _malformed(error: yaml.MarkedYAMLError, text: str, file: str) -> Problem:
    """PyYAML's refusal, in plain words where the text shows the usual mistake (yaml_mistakes)."""
    mark = error.problem_mark or error.context_mark
    marks = [m for m in (error.problem_mark, error.context_mark) if m is not None]
    for m in marks:
        quote = unquoted_template(text, file, m.line + 1)
        if quote:
            return quote
    said = None
    if error.problem_mark is not None and str(error.problem).startswith("expected <block end>"):
        said = misaligned(text, file, error.problem_mark.line)
    elif error.problem_mark is not None and error.problem == "mapping values are not allowed here":
        said = continued_value(text, file, error.problem_mark.line)
    return said or Problem(
        f"malformed YAML: {error.problem or error.context}",
        file=file,
        line=mark.line + 1 if mark else 1,
        col=mark.column + 1 if mark else None,
        hint="check indentation and that every key ends with ':'",
    )


def load_yaml_file(path: Path, shown_as: str | None = None) -> LocatedDocument:
    shown = shown_as or str(path)
    return load_yaml(read_text(path, shown), shown)


def _too_deep_line(text: str) -> int:
    """The line where nesting first goes past MAX_DEPTH (PyYAML's own parser recursed too deep)."""
    depth = 0
    try:
        for token in yaml.scan(text, Loader=yaml.SafeLoader):
            if isinstance(token, (yaml.FlowSequenceStartToken, yaml.FlowMappingStartToken, yaml.BlockMappingStartToken,
                                  yaml.BlockSequenceStartToken)):  # fmt: skip
                depth += 1
                if depth > MAX_DEPTH:
                    return token.start_mark.line + 1
            elif isinstance(token, (yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken, yaml.BlockEndToken)):
                depth -= 1
    except yaml.YAMLError:
        pass
    return 1


class _Builder:
    """Python values from YAML nodes, recording positions, within MAX_DEPTH and MAX_VALUES."""

    def __init__(self, doc: LocatedDocument, text: str) -> None:
        self.doc = doc
        self.text = text
        self.values = 0

    def construct(self, node: yaml.Node, path: PathKey) -> Any:
        self._count(node, len(path))
        if node.tag not in _PLAIN_TAGS:
            raise self._problem(
                node,
                f"YAML tag '{node.tag.replace('tag:yaml.org,2002:', '!!')}' is not allowed",
                "write a plain value (text, a number, true/false, a date, a list or a mapping); quote text that starts with '!'",
            )
        if isinstance(node, yaml.MappingNode):
            start = node.start_mark.index
            if node.flow_style and self.text.startswith("{{", start):
                quote = unquoted_template(self.text, self.doc.file, node.start_mark.line + 1)
                if quote:
                    raise BadInput(quote)
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            items = []
            for i, item in enumerate(node.value):
                self.doc.positions[(*path, i)] = (item.start_mark.line + 1, item.start_mark.column + 1)
                items.append(self.construct(item, (*path, i)))
            return items
        return self._scalar(node)

    def _mapping(self, node: yaml.MappingNode, path: PathKey) -> dict[Any, Any]:
        doc, result = self.doc, {}
        merged: dict[Any, Any] = {}  # `<<: *name`: its keys, where the mapping does not give them itself
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                merged = {**self._merged(key_node, value_node, path), **merged}
                continue
            # Keys are names: `on:` is the key "on", not YAML 1.1's boolean true.
            if not isinstance(key_node, yaml.ScalarNode):
                raise self._problem(key_node, "a key must be a plain value")
            key = key_node.value
            if key in result:
                first = doc.positions.get((*path, key))
                raise self._problem(
                    key_node,
                    f"duplicate key '{key}'" + (f" (first defined on line {first[0]})" if first else ""),
                    "each name may appear once; rename or merge the two entries",
                )
            doc.positions[(*path, key)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if isinstance(value_node, yaml.ScalarNode):
                block = value_node.style in ("|", ">")
                doc.value_lines[(*path, key)] = value_node.start_mark.line + 1 + (1 if block else 0)
            result[key] = self.construct(value_node, (*path, key))
        return {**merged, **result}

    def _merged(self, key_node: yaml.Node, value_node: yaml.Node, path: PathKey) -> dict[Any, Any]:
        """The keys a YAML merge key (`<<: *name`, or `<<: [*a, *b]`: the first one's win) adds."""
        nodes = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        if not all(isinstance(n, yaml.MappingNode) for n in nodes):
            raise self._problem(key_node, "'<<' merges a mapping into this one", "write <<: *name, where &name marks a mapping")
        found: dict[Any, Any] = {}
        for merged in reversed(nodes):
            found.update(self.construct(merged, path))
        return found

    def _scalar(self, node: yaml.Node) -> Any:
        if node.tag == "tag:yaml.org,2002:str":
            return node.value
        try:
            return _SCALARS.construct_object(node, deep=True)
        except Exception:  # noqa: BLE001 - PyYAML's constructors raise ValueError, KeyError, TypeError...
            kind = node.tag.rsplit(":", 1)[-1]
            raise self._problem(
                node,
                f"'{node.value}' looks like {_TAG_WORDS.get(kind, kind)} but is not one",
                f'write a valid {kind} value, or quote it to keep it as text: "{node.value}"',
            ) from None

    def _count(self, node: yaml.Node, depth: int) -> None:
        self.values += 1
        if depth > MAX_DEPTH:
            raise self._problem(
                node,
                f"nested more than {MAX_DEPTH} levels deep",
                "flatten the lists or mappings; an alias (*name) inside the mapping it names repeats forever",
            )
        if self.values > MAX_VALUES:
            raise self._problem(
                node,
                f"the document expands to more than {MAX_VALUES:,} values",
                "each alias (*name) repeats everything it names: aliases of aliases grow very fast; write the values out",
            )

    def _problem(self, node: yaml.Node, message: str, hint: str | None = None) -> BadInput:
        mark = node.start_mark
        return BadInput(Problem(message, file=self.doc.file, line=mark.line + 1, col=mark.column + 1, hint=hint))


def plain_value(text: str) -> Any:
    """One plain YAML scalar as YAML reads it (`3` a number, `true` a bool, `2026-01-31` a date,
    anything else text), for values typed on the command line. ValueError says what is wrong."""
    tag = _SCALARS.resolve(yaml.ScalarNode, text, (True, False))
    if tag == "tag:yaml.org,2002:str":
        return text
    try:
        return _SCALARS.construct_object(yaml.ScalarNode(tag, text), deep=True)
    except Exception:  # noqa: BLE001 - PyYAML's constructors raise ValueError, KeyError, TypeError...
        kind = tag.rsplit(":", 1)[-1]
        raise ValueError(f"'{text}' looks like {_TAG_WORDS.get(kind, kind)} but is not one") from None


_SCALARS = yaml.SafeLoader("")  # only its resolver and scalar constructors are used (ints, floats, bools, dates)
