"""Errors the user sees. Each carries the exit code the CLI returns for it.

Exit codes: 0 ok, 1 the run failed, 2 bad input (spec, template, vars, missing source path).
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the user's input, located as precisely as we can."""

    message: str
    file: str | None = None
    line: int | None = None
    col: int | None = None
    hint: str | None = None

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file
            if self.line:
                where += f":{self.line}"
                if self.col:
                    where += f":{self.col}"
            where += ": "
        text = f"{where}{self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class TributaryError(Exception):
    """Base class; `exit_code` tells the CLI what to return."""

    exit_code = 1
    #: the run's result so far, when a run raised it (framework.engine.results.RunResult)
    result: Any = None


class BadInput(TributaryError):
    """The user's spec, template, vars or files are wrong: nothing was run or changed."""

    exit_code = 2

    def __init__(self, *problems: Problem | str):
        self.problems = [p if isinstance(p, Problem) else Problem(p) for p in problems]
        super().__init__("\n".join(str(p) for p in self.problems))


class UnreadableTable(BadInput):
    """A Delta table a command must read cannot be read: a damaged log, a newer protocol, a file
    where the table's folder should be. Said with the table's place and delta-rs' first line."""

    def __init__(self, location: str, error: BaseException):
        said = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        super().__init__(
            Problem(
                f"the Delta table at {location} cannot be read: {said}",
                hint="its _delta_log, or a data file the log names, is damaged or missing, or a newer Delta version "
                "wrote it; restore the folder from a backup (or rebuild it: `tributary run <pipeline> --full-refresh`)",
            )
        )


class RunFailed(TributaryError):
    """The run started but could not finish; outputs stay at their previous version."""

    exit_code = 1


#: what Ctrl-C leaves, when nothing of the run was committed
NOTHING_COMMITTED = "outputs stay at their previous version"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C after part of a run was committed for good: a stream commits each micro-batch as it
    goes, so what stays is not "the previous version". Its text says what stays."""

    def __init__(self, kept: str):
        super().__init__(kept)
        self.kept = kept


def interrupted_line(error: KeyboardInterrupt) -> str:
    """The one line a user reads after Ctrl-C (without the word "interrupted")."""
    return error.kept if isinstance(error, Interrupted) else NOTHING_COMMITTED


def not_a_file(mode: int) -> str:
    """What a path that is not a regular file is, for a message ("it is a named pipe")."""
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return "it is " + next((kind for test, kind in kinds if test(mode)), "not a regular file")
