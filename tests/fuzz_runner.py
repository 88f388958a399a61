"""Runs a corpus of bad inputs (tests/fuzz_corpus.py) through the real CLI entry point, one case
after another in this one process, each with a time limit, the process under a memory limit.

    python tests/fuzz_runner.py CORPUS_DIR [--seconds 5] [--memory-mib 3072]

Prints one JSON line per case: its name, exit code, seconds, whether the output holds a Python
traceback or an unexpected error, whether an exit 2 names a location (file:line, or the --var),
and the last lines it printed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import resource
import signal
import sys
import time
from pathlib import Path

LOCATED = re.compile(r"(\S+\.(ya?ml|sql)|<inline[^>]*>):\d+|--var")
CRASHED = re.compile(r"Traceback \(most recent call last\)|run again with --debug|RecursionError|MemoryError")


class CaseTimeout(BaseException):
    """Raised by the alarm: a BaseException, so the CLI's own error handling cannot swallow it."""


def _alarm(signum, frame):
    raise CaseTimeout


def run_case(project: Path, command: list[str], seconds: float) -> dict:
    from framework.cli import main

    out, err = io.StringIO(), io.StringIO()
    os.chdir(project)
    sys.argv = ["tributary", *command]
    began = time.perf_counter()
    code: int | str = 0
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except CaseTimeout:
        code = "timeout"
    except BaseException as e:  # noqa: BLE001 - anything escaping the CLI is a crash
        code = f"escaped {type(e).__name__}"
        err.write(f"Traceback (most recent call last): {type(e).__name__}: {e}\n")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    text = out.getvalue() + err.getvalue()
    return {
        "code": code,
        "seconds": round(time.perf_counter() - began, 3),
        "crashed": bool(CRASHED.search(text)),
        "located": bool(LOCATED.search(err.getvalue())),
        "tail": text.strip().splitlines()[-3:],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--memory-mib", type=int, default=3072)
    args = parser.parse_args()
    limit = args.memory_mib * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGALRM, _alarm)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    cases = json.loads((args.corpus / "cases.json").read_text())
    real_stdout = sys.stdout
    for i, case in enumerate(cases):
        result = run_case(args.corpus / f"case-{i:04d}", case["command"], args.seconds)
        real_stdout.write(json.dumps({**case, **result}) + "\n")
        real_stdout.flush()


if __name__ == "__main__":
    main()
