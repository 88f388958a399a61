"""Ctrl-C in a process that holds an embedded SparkSession: Spark's jobs are cancelled, and the
main thread gets KeyboardInterrupt, never while it is inside a JVM call.

Why: the main thread mostly waits inside a py4j call (a job, a plan) when Ctrl-C comes. PySpark's
own handler then cancels the jobs by calling the JVM from inside that very call, on the same py4j
connection: py4j refuses the reentrant call and logs it with a traceback, and the
KeyboardInterrupt raised in the middle of reading the answer is logged with a second one. Here
the jobs are cancelled from a thread of their own (its own connection); the interrupted call
returns as soon as its job is cancelled, and the KeyboardInterrupt is raised as it returns
(`install_interrupt_point`), once the answer is read and the connection is free.

The warm engine, which goes on using its py4j connections after a cancelled run, raises its
runs' KeyboardInterrupt the same way (framework.warm.server).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: a KeyboardInterrupt for the main thread, to raise as its JVM call returns
deferred = threading.Event()
_installed = threading.Lock()
_interrupt_point = False


def inside_jvm_call(frame: Any) -> bool:
    """The main thread is sending a py4j command or waiting for its answer."""
    while frame is not None:
        if frame.f_code.co_name == "send_command" and str(frame.f_globals.get("__name__", "")).startswith("py4j"):
            return True
        frame = frame.f_back
    return False


def install_interrupt_point() -> None:
    """py4j's client returns each answer through one method; the main thread gets its deferred
    KeyboardInterrupt there, once the answer is read and the connection is free. Once per process."""
    global _interrupt_point
    from py4j.java_gateway import GatewayClient

    with _installed:
        if _interrupt_point:
            return
        _interrupt_point = True
        send = GatewayClient.send_command

        def send_command(self: Any, *args: Any, **kwargs: Any) -> Any:
            answer = send(self, *args, **kwargs)
            if deferred.is_set() and threading.current_thread() is threading.main_thread():
                deferred.clear()
                raise KeyboardInterrupt
            return answer

        GatewayClient.send_command = send_command  # type: ignore[method-assign]


def take_over_from_pyspark(spark: SparkSession) -> None:
    """Replace the Ctrl-C handler PySpark installed with `spark`'s context (module docstring);
    any other handler (the warm engine's, a stream's clean stop) is left in place."""
    if threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGINT)
    if not str(getattr(current, "__module__", "")).startswith("pyspark"):
        return
    install_interrupt_point()
    context = spark.sparkContext

    def cancel() -> None:
        with contextlib.suppress(Exception):  # a JVM already gone has no jobs to cancel
            context.cancelAllJobs()

    def on_sigint(signum: int, frame: Any) -> None:
        threading.Thread(target=cancel, name="tributary-cancel", daemon=True).start()
        if inside_jvm_call(frame):
            deferred.set()  # raised by the call as it returns
            return
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
