"""Reading the user's text files (pipelines, templates, profiles): UTF-8, or a located error.

A byte that is not UTF-8 (a file saved as Latin-1, a stray binary byte) is bad input named by
file, line and column, never a UnicodeDecodeError. A UTF-8 byte-order mark, which some editors
write, is accepted. Only a regular file is read, and at most MAX_BYTES of it: a named pipe would
block the command until someone writes to it, and /dev/zero (or a symlink to it) never ends.
"""

from __future__ import annotations

import stat
from pathlib import Path

from framework.errors import BadInput, Problem, not_a_file


def read_text(path: Path, shown_as: str | None = None) -> str:
    shown = shown_as or str(path)
    try:
        mode, size = (found := path.stat()).st_mode, found.st_size
        if not stat.S_ISREG(mode):
            raise BadInput(Problem(f"{not_a_file(mode)}, not a text file", file=shown, hint="give the path of a file"))
        if size > MAX_BYTES:
            raise BadInput(
                Problem(
                    f"the file has {size:,} bytes; a pipeline, template or profile may have {MAX_BYTES:,} at most",
                    file=shown,
                    hint="is it the right file? data belongs in a source's folder, not in the spec",
                )
            )
        data = path.read_bytes()
    except OSError as e:
        raise BadInput(Problem(f"cannot read file: {e.strerror}", file=shown)) from None
    return decode(data, shown)


MAX_BYTES = 16 * 2**20


def decode(data: bytes, shown: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line_start = data.rfind(b"\n", 0, e.start) + 1
        raise BadInput(
            Problem(
                f"the file is not UTF-8 text: byte 0x{data[e.start]:02x} cannot be read",
                file=shown,
                line=data.count(b"\n", 0, e.start) + 1,
                col=len(data[line_start : e.start].decode("utf-8", "replace")) + 1,
                hint="save the file as UTF-8 (your editor's encoding setting), or remove the character",
            )
        ) from None
