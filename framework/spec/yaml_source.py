"""YAML loading that remembers where every key is, so errors can name file:line:col.

PyYAML keeps duplicate keys silently (the last wins); a pipeline with two steps of the same
name is a mistake we report instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from framework.errors import BadInput, Problem

Location = tuple[int, int]  # 1-based line, column
PathKey = tuple[Any, ...]


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
    try:
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise BadInput(
            Problem(
                f"malformed YAML: {e.problem or e.context}",
                file=file,
                line=mark.line + 1 if mark else None,
                col=mark.column + 1 if mark else None,
                hint="check indentation and that every key ends with ':'",
            )
        ) from None
    except yaml.YAMLError as e:
        raise BadInput(Problem(f"malformed YAML: {e}", file=file)) from None
    if root is None:
        raise BadInput(Problem("the file is empty", file=file, hint="a pipeline needs at least name, steps and outputs"))
    doc = LocatedDocument(file=file, data=None)
    doc.positions[()] = (root.start_mark.line + 1, root.start_mark.column + 1)
    doc.data = _construct(root, (), doc)
    return doc


def load_yaml_file(path: Path, shown_as: str | None = None) -> LocatedDocument:
    shown = shown_as or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise BadInput(Problem(f"cannot read file: {e.strerror}", file=shown)) from None
    return load_yaml(text, shown)


def _construct(node: yaml.Node, path: PathKey, doc: LocatedDocument) -> Any:
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            # Keys are names: `on:` is the key "on", not YAML 1.1's boolean true.
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else _scalar(key_node, doc)
            if key in result:
                first = doc.positions.get((*path, key))
                raise BadInput(
                    Problem(
                        f"duplicate key '{key}'" + (f" (first defined on line {first[0]})" if first else ""),
                        file=doc.file,
                        line=key_node.start_mark.line + 1,
                        col=key_node.start_mark.column + 1,
                        hint="each name may appear once; rename or merge the two entries",
                    )
                )
            doc.positions[(*path, key)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if isinstance(value_node, yaml.ScalarNode):
                block = value_node.style in ("|", ">")
                doc.value_lines[(*path, key)] = value_node.start_mark.line + 1 + (1 if block else 0)
            result[key] = _construct(value_node, (*path, key), doc)
        return result
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            doc.positions[(*path, i)] = (item.start_mark.line + 1, item.start_mark.column + 1)
            items.append(_construct(item, (*path, i), doc))
        return items
    return _scalar(node, doc)


def _scalar(node: yaml.Node, doc: LocatedDocument) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        raise BadInput(
            Problem("a key must be a plain value", file=doc.file, line=node.start_mark.line + 1, col=node.start_mark.column + 1)
        )
    if node.tag == "tag:yaml.org,2002:str":
        return node.value
    return _SCALARS.construct_object(node, deep=True)


_SCALARS = yaml.SafeLoader("")  # only its scalar constructors are used (ints, floats, bools, dates)
