"""Changing scalar values in a pipeline's YAML text, keeping everything else byte for byte.

`tributary tune --write` sets an swa step's `size:` and `timeout:`. A YAML library's round trip
re-indents, re-quotes and drops anchors; analysts' files carry comments and layout that are theirs.
So the edit is textual: the loader knows the line and column of every key
(framework.spec.yaml_source), and only the value token after that key on that line is replaced.
Values that are not a plain token there (an alias, a multi-line value, a key written elsewhere by
a merge) are refused with what to change by hand.

The text is compared with what was read before it is written: a file changed in the meantime
(an editor saved it while a long tune ran) is refused, never overwritten.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

from framework.errors import BadInput, Problem
from framework.spec.yaml_source import load_yaml

_VALUE = re.compile(r"""(?P<key>[^:#]+?\s*:[ \t]*)(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s,}\]#]+)""")


def set_scalars(text: str, file: str, changes: dict[tuple[Any, ...], str]) -> str:
    """`text` with the value at each key path replaced by the given YAML token."""
    doc = load_yaml(text, file)
    lines = text.splitlines(keepends=True)
    for path, token in changes.items():
        position = doc.positions.get(path)
        if position is None:
            raise BadInput(Problem(f"cannot find {'.'.join(map(str, path))} in the file", file=file, hint="add the key by hand"))
        line, col = position
        current = lines[line - 1]
        match = _VALUE.match(current, col - 1)
        if match is None or match.group("value").startswith(("*", "&", "|", ">")) or "{{" in current[col - 1 :]:
            raise BadInput(
                Problem(
                    f"{'.'.join(map(str, path))} is not a plain value on its line, so it is not changed automatically",
                    file=file,
                    line=line,
                    hint=f"set it to {token} by hand",
                )
            )
        lines[line - 1] = current[: match.start("value")] + token + current[match.end("value") :]
    return "".join(lines)


def write_if_unchanged(path: Path, read: str, new: str, shown: str) -> None:
    """Replace the file with `new` if it still holds `read`; the replacement is atomic."""
    try:
        now = path.read_text(encoding="utf-8")
    except OSError as e:
        raise BadInput(Problem(f"cannot read {shown} again: {e.strerror}", file=shown)) from None
    if now != read:
        raise BadInput(
            Problem(
                f"{shown} changed since it was read, so it was not written",
                file=shown,
                hint="run the command again on the file as it is now",
            )
        )
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(new)
        os.chmod(temporary, path.stat().st_mode & 0o7777)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
