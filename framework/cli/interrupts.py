"""Ctrl-C while a command runs Spark from this process: the first asks Spark to stop the run; a
later one stops at once when the first could not.

Why: the first Ctrl-C asks Spark to cancel (an embedded session's jobs are cancelled,
framework.engine.ctrl_c; PySpark's Spark Connect client asks the server to interrupt the
operation), and the run's cleanup then talks to Spark again. A Spark Connect server that stopped answering (a frozen or stuck
process, a network that drops its packets) keeps those calls waiting inside gRPC's C code, where
Python never gets to run a signal handler: every further Ctrl-C was lost, and the command hung
until it was killed.

Python's C-level signal handler writes each signal's number to the wakeup fd
(`signal.set_wakeup_fd`), whatever the main thread is doing, so a thread of ours sees every Ctrl-C:
- after the first, if the command still runs `HINT_AFTER_S` later, it says that it waits for
  Spark and that Ctrl-C again stops at once;
- after a later one, whoever handles Ctrl-C in the main thread (PySpark, the warm engine's client,
  a stream's graceful stop) gets `GRACE_S` to end the command; if it still runs, the process exits
  with 130 there and then.

Stopping at once is as safe as the kill the crash tests make: a run commits its outputs last, and
the next run undoes a commit left half done (framework.engine.recovery); a stream replays the
micro-batch it had not committed. Nothing is installed where another part of the process already
owns Ctrl-C or the wakeup fd (the warm engine's own process).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator

HINT_AFTER_S = 5.0  # after the first Ctrl-C: the command still runs, say how to stop at once
GRACE_S = 2.0  # after a later Ctrl-C: what the main thread gets to end the command itself
EXIT_INTERRUPTED = 130

Say = Callable[[str], None]


@contextlib.contextmanager
def second_interrupt_stops_at_once(say: Say) -> Iterator[None]:
    """Around a command body that may run Spark here: `say` prints one line for the user (from the
    watching thread)."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    if not in_main_thread or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)  # the signal handler must never block on it
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    if previous != -1:  # someone else reads the process's signals this way
        signal.set_wakeup_fd(previous)
        os.close(read_end)
        os.close(write_end)
        yield
        return
    watcher = threading.Thread(target=_watch, args=(read_end, say), name="tributary-interrupts", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(-1)
        os.close(write_end)  # the watcher reads the end of the file and stops


def _watch(read_end: int, say: Say) -> None:
    interrupts = 0
    hint_at: float | None = None
    try:
        while True:
            wait = None if hint_at is None else max(0.0, hint_at - time.monotonic())
            if not select.select([read_end], [], [], wait)[0]:  # the hint's time, the command still runs
                hint_at = None
                say("waiting for Spark to stop the run; press Ctrl-C again to stop at once")
                continue
            signals = os.read(read_end, 64)
            if not signals:
                return  # the command ended
            for _ in range(signals.count(signal.SIGINT)):
                interrupts += 1
                if interrupts == 1:
                    hint_at = time.monotonic() + HINT_AFTER_S
                elif not select.select([read_end], [], [], GRACE_S)[0]:
                    _stop_at_once(say)
                # else: more signals or the end of the command; the loop reads them
    finally:
        os.close(read_end)


def _stop_at_once(say: Say) -> None:
    say(
        "interrupted: stopped without waiting for Spark. An output commit this run left half done is "
        "undone by the next run; a stream replays its last micro-batch"
    )
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_INTERRUPTED)
