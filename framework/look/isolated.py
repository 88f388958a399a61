"""SQL a person typed runs in a child process the command can kill: the only limits that hold for
any expression.

DuckDB's own limits are cooperative. Its interrupt is checked between vectors, so one call that
runs long inside a vector goes on: `regexp_replace(repeat('a', 100000000), 'a', 'b', 'g')` ran
54 s past a 1 s `--timeout`. Its `memory_limit` counts its buffer pool, not every value an
expression makes: `length(repeat('x', 1500000000))` grew to 3 GB under a limit of 2 GB. So
`show --where` and `query` run in a fresh interpreter (not a fork: the caller may hold threads,
delta-rs' runtime or a JVM) that

- opens the tables and runs the query exactly as in-process (framework.look.commands), with
  DuckDB's sandbox settings (framework.look.sql);
- says when the query starts, then caps its own address space (RLIMIT_AS) at what it has mapped
  then plus MEMORY_LIMIT_BYTES, so an allocation past it fails inside the child and never
  reaches the machine;
- sends the rows back as an Arrow IPC stream, bad input as its problems in JSON (the parent
  unpickles nothing the child wrote).

The parent kills the child (SIGKILL) `timeout` seconds after the query started; starting and
opening the tables before it have `timeout` + OPENING_S seconds. A timeout and a refused allocation are bad input (exit
2), as a mistake in the SQL is. The child costs an interpreter start and its imports (duckdb,
deltalake, sqlglot), which the parent no longer makes: `show` without `--where` runs in-process.
"""

from __future__ import annotations

import json
import os
import pickle
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.errors import BadInput, Problem
from framework.look.sql import MEMORY_LIMIT_BYTES

if TYPE_CHECKING:
    import pyarrow as pa

_STARTED, _ROWS, _PROBLEMS, _CRASH = b"S", b"R", b"P", b"X"
_HEADER = 9  # one byte of kind, eight of length
#: seconds the child has, beyond --timeout, to start (an interpreter, duckdb, deltalake: ~0.5 s on a
#: quiet machine, seconds on a busy one) and open the tables before its query starts
OPENING_S = 30.0

#: the child: the framework this process runs, not whatever an editable install points at
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from framework.look.child import child; child()"


def run(target: str, timeout_s: float, /, **kwargs: Any) -> tuple[dict[str, Any], pa.Table]:
    """Call framework.look.commands.<target>(**kwargs, on_start=...) in a child process: its
    result's fields (title, more, total, location) and its rows, or its BadInput raised here."""
    import pyarrow as pa

    root = str(Path(__file__).resolve().parents[2])
    with tempfile.TemporaryFile() as errors:
        child_process = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOT, root],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        try:
            assert child_process.stdin is not None and child_process.stdout is not None
            try:
                child_process.stdin.write(pickle.dumps((target, kwargs)))
                child_process.stdin.close()
            except BrokenPipeError:  # it ended already: said below
                pass
            kind, payload = _answer(child_process, timeout_s)
        finally:
            if child_process.poll() is None:
                child_process.kill()
            child_process.wait()
        if kind == _ROWS:
            reader = pa.ipc.open_stream(payload)
            fields = json.loads(reader.schema.metadata[b"tributary"])
            return fields, reader.read_all().replace_schema_metadata(None)
        if kind == _PROBLEMS:
            raise BadInput(*(Problem(**p) for p in json.loads(payload)))
        if kind == _CRASH:  # a bug: its exception, as the command's own would be (--debug: the child's traceback)
            lines = payload.decode("utf-8", "replace").strip().splitlines()
            raise RuntimeError(f"in the query's process: {lines[-1] if lines else '?'}\n" + "\n".join(lines))
        errors.seek(0)
        said = errors.read().decode("utf-8", "replace").strip().splitlines()
    code = child_process.returncode
    why = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
    raise BadInput(
        Problem(
            f"the query's process ended ({why}) without an answer: most likely it reached the memory limit "
            f"({_gb(MEMORY_LIMIT_BYTES)})" + (f"; it said: {said[-1]}" if said else ""),
            hint="narrow it: fewer rows or smaller values",
        )
    )


def _answer(child_process: subprocess.Popen[bytes], timeout_s: float) -> tuple[bytes, bytes]:
    """The child's last message, read until it ends; killed at the deadline: `timeout_s` +
    OPENING_S to start and open the tables, then `timeout_s` once the query started."""
    assert child_process.stdout is not None
    stream = child_process.stdout
    os.set_blocking(stream.fileno(), False)
    buffer = bytearray()
    deadline = time.monotonic() + timeout_s + OPENING_S
    started = False
    last: tuple[bytes, bytes] = (b"", b"")
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                child_process.kill()
                if started:
                    raise BadInput(
                        Problem(f"the query ran longer than {timeout_s:g} s and was stopped", hint="narrow it, or pass --timeout")
                    )
                raise BadInput(
                    Problem(
                        f"opening the tables took longer than {timeout_s + OPENING_S:g} s and was stopped",
                        hint="check that the tables' storage answers (the profile's storage_options)",
                    )
                )
            if not selector.select(min(left, 60.0)):
                continue
            chunk = stream.read(1 << 20)
            if not chunk:  # the child closed its end: it is done, or died
                return last
            buffer += chunk
            while len(buffer) >= _HEADER:
                size = int.from_bytes(buffer[1:_HEADER], "big")
                if len(buffer) < _HEADER + size:
                    break
                kind, payload = bytes(buffer[:1]), bytes(buffer[_HEADER : _HEADER + size])
                del buffer[: _HEADER + size]
                if kind == _STARTED:
                    started, deadline = True, time.monotonic() + timeout_s
                else:
                    last = (kind, payload)


def _gb(size: int) -> str:
    return f"{size / 2**30:g} GB"
