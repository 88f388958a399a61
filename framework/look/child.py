"""The child process of framework.look.isolated: runs one framework.look.commands call and sends
its answer to the parent over its stdout, in the parent's framing (isolated's _HEADER and kinds).

A module of its own so that the parent's side imports no commands and the commands' side imports
only the parent's (no import circle).
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import threading
import traceback
from typing import Any

from framework.errors import BadInput
from framework.look.isolated import _CRASH, _HEADER, _PROBLEMS, _ROWS, _STARTED, OPENING_S
from framework.look.sql import MEMORY_LIMIT_BYTES, memory_problem


def child() -> None:
    """The child's side: run the call, send its answer, exit."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # nothing else (Python's print, DuckDB's C++) may write into the answer
    sys.stdout = sys.stderr

    def send(kind: bytes, payload: bytes = b"") -> None:
        out.write(kind + len(payload).to_bytes(_HEADER - 1, "big") + payload)
        out.flush()

    def on_start() -> None:
        send(_STARTED)
        _limit_memory()

    try:
        target, kwargs = pickle.loads(sys.stdin.buffer.read())
        # a backstop should the parent be gone (killed itself): both phases' seconds, and some
        seconds = 2 * float(kwargs.get("timeout_s", 60.0)) + OPENING_S + 5
        backstop = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGKILL))
        backstop.daemon = True
        backstop.start()
        from framework.look import commands

        result = getattr(commands, target)(**kwargs, on_start=on_start)
        send(_ROWS, _ipc(result))
    except BadInput as e:
        send(_PROBLEMS, json.dumps([p.__dict__ for p in e.problems]).encode())
    except MemoryError:
        send(_PROBLEMS, json.dumps([memory_problem().__dict__]).encode())
    except BaseException:  # noqa: BLE001 - said in the parent, as a failure of the command
        send(_CRASH, traceback.format_exc().encode())
    out.flush()
    os._exit(0)  # no interpreter teardown: DuckDB's threads may still hold Arrow objects


def _limit_memory() -> None:
    """Cap this process's address space at what it maps now plus MEMORY_LIMIT_BYTES (Linux; where
    /proc or RLIMIT_AS is missing, DuckDB's own limit and the timeout remain)."""
    try:
        import resource

        with open("/proc/self/status") as status:
            mapped = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = mapped + MEMORY_LIMIT_BYTES
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    except (ImportError, OSError, StopIteration, ValueError):
        pass


def _ipc(result: Any) -> bytes:
    import pyarrow as pa

    fields = {"title": result.title, "more": result.more, "total": result.total, "location": result.location}
    rows = result.rows.replace_schema_metadata({"tributary": json.dumps(fields)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as writer:
        writer.write_table(rows)
    return sink.getvalue().to_pybytes()
