"""The warm engine process: one embedded SparkSession, commands run one at a time, stop when idle.

`tributary engine serve` (started by a client, detached, in its own session and process group,
its output in the engine's log) reads its settings as JSON on stdin, takes the engine's lock
(one engine per key), starts the session, listens on its Unix socket and serves:

- a run request: the command runs on the main thread (the thread that made the session, as in
  the embedded path: pyspark's SIGINT handler and the active session belong to it), with the
  client's working directory, environment and terminal (width, colours), its console output sent
  back as it is printed; the exit code last. Requests that come while a run is under way wait in
  order, and their clients are told whom they wait for.
- Ctrl-C on the client (or the client going away) interrupts the run as Ctrl-C interrupts an
  embedded one: Spark's jobs are cancelled and the main thread gets KeyboardInterrupt (a
  continuous stream's own handler stops its queries cleanly instead). Unlike a process that exits
  after Ctrl-C, the engine goes on using its py4j connections, so the KeyboardInterrupt is never
  raised while a JVM call is under way (an answer would be left unread on the connection and the
  next call would read it): it is raised as that call returns (the cancelled job's call returns at
  once).
- each run has a session of its own (framework.warm.isolation): another project's functions,
  views, confs, database and udfs/ modules are not there; what sessions share (global views, the
  catalog, cached data) is cleaned after the run.
- a run's jobs are cancelled with their threads interrupted. A task that does not stop (Java code
  that ignores interrupts) keeps the engine busy, as `engine status` says, for a grace period;
  then the engine ends, its JVM killed, and waiting clients start a new one
  (framework.engine.leftover_tasks): the next run starts on free cores.
- the engine's own environment is the few variables that shape its session (client.py starts it
  so); during a run, the process's environment is the client's, and only its.
- status and stop requests are answered at once, even during a run.

The engine stops after `idle` seconds without a request, on `tributary engine stop`, on SIGTERM,
or when its JVM dies (the client then says so and runs the command embedded).
"""

from __future__ import annotations

import _thread
import contextlib
import fcntl
import io
import itertools
import json
import os
import queue
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

import framework
import framework.warm
from framework.engine import ctrl_c, leftover_tasks
from framework.errors import interrupted_line
from framework.functions import loader
from framework.functions.loader import WORKERS_OF
from framework.profiles import Profile, SparkSettings
from framework.warm.isolation import RunSession, catalog_objects
from framework.warm.place import EnginePlace, java_options, source_digest
from framework.warm.process_state import ProcessState
from framework.warm.protocol import Channel

#: how long a new engine waits for an old one of the same key to let go of the lock
_LOCK_WAIT_S = 60.0


@dataclass
class Terminal:
    """What the client's stdout or stderr is: the command prints for it."""

    tty: bool = False
    width: int | None = None

    @classmethod
    def of(cls, data: Any) -> Terminal:
        data = data if isinstance(data, dict) else {}
        width = data.get("width")
        return cls(bool(data.get("tty")), int(width) if isinstance(width, int) and width > 0 else None)


class ClientStream(io.TextIOBase):
    """A text stream whose writes go to the client as "out"/"err" messages. Once the client is gone
    writes are dropped, so a run being cancelled is not stopped again by a broken pipe."""

    def __init__(self, channel: Channel, name: str, terminal: Terminal):
        self.channel, self.name, self.terminal = channel, name, terminal
        self.gone = False

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.terminal.tty

    def write(self, text: str) -> int:
        if text and not self.gone:
            try:
                self.channel.send({"t": self.name, "d": text})
            except OSError:
                self.gone = True
        return len(text)


#: runs one command: (argv, out console, err console) -> exit code; the CLI provides it
RunCommand = Callable[[list[str], Any, Any], int]


@dataclass
class Request:
    channel: Channel
    argv: list[str]
    cwd: str
    env: dict[str, str]
    out: Terminal
    err: Terminal
    done: bool = False
    interrupted: bool = False
    raised: bool = False
    received: float = field(default_factory=time.time)

    @property
    def label(self) -> str:
        """What the run is, for a client that waits: `run service_calls` (the command's names, then
        its arguments: client.argv_of puts them after `--`)."""
        names = list(itertools.takewhile(lambda a: not a.startswith("-"), self.argv))
        arguments = self.argv[self.argv.index("--") + 1 :] if "--" in self.argv else []
        return " ".join(names + arguments) or "a command"

    def gone(self) -> bool:
        """The client hung up (or asked to cancel) while waiting in the queue."""
        try:
            self.channel.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            return True
        return True  # EOF, or a cancel sent before the run started


@dataclass
class WarmUp:
    """The engine's warm-up (framework.warm.warm_up) while it runs: interrupted as a run is."""

    label: str = "warm-up"
    done: bool = False
    interrupted: bool = False
    raised: bool = False


#: The projects with udfs/ one engine serves: each has Python workers of its own, which Spark keeps
#: for the JVM's life; past this many the engine ends after the run, and the next starts afresh.
WORKER_POOLS = 8


class Engine:
    def __init__(
        self,
        place: EnginePlace,
        spark: Any,
        idle_s: float,
        run_command: RunCommand,
        settings: dict[str, Any],
        warm_up: bool = False,
    ):
        self.place, self.spark, self.idle_s, self.run_command = place, spark, idle_s, run_command
        self.settings = settings
        self.source = source_digest()  # the framework's files this engine runs
        self.started = time.time()
        self.idle_since = time.time()
        self.runs = 0
        self.current: Request | WarmUp | None = None
        self.warm_up = WarmUp() if warm_up else None  # framework.warm.warm_up
        self.waiting: queue.Queue[Request] = queue.Queue()
        self.stopping = threading.Event()
        self.stop_reason = ""
        self._lock = threading.Lock()
        self._baseline_conf: dict[str, str] = dict(spark.conf.getAll)
        self._catalog = catalog_objects(spark)  # what the shared catalog holds between runs
        self.session: RunSession | None = None  # the run's, while it runs
        self._process: ProcessState | None = None  # taken when serving begins (its signal handlers)
        self._worker_folders: set[str] = set()  # projects with udfs/: each has Python workers of its own (loader.WORKERS_OF)
        self.draining: str | None = None  # a run whose cancelled tasks may still run
        self.jvm_stuck = False  # a task would not stop: the JVM is ended with the engine
        self._listener: socket.socket | None = None
        self._wake = threading.Event()  # SIGTERM: a thread (not the handler) interrupts the run

    # -- the main loop ---------------------------------------------------------------------

    def serve(self) -> str:
        """Serve until idle, stopped or dead; returns why it stopped."""
        self._listen()
        threading.Thread(target=self._accept, name="tributary-engine-accept", daemon=True).start()
        threading.Thread(target=self._terminator, name="tributary-engine-term", daemon=True).start()
        signal.signal(signal.SIGTERM, lambda *_: self._wake.set())
        signal.signal(signal.SIGINT, self._on_sigint)
        self._process = ProcessState.of(self.spark)  # what each run leaves as it found it
        try:
            died = self._warm_up(self.warm_up) if self.warm_up is not None else None
            if died:
                self.stop_reason = died
            while not self.stopping.is_set() and not died:
                try:
                    request = self.waiting.get(timeout=0.5)
                except queue.Empty:
                    if self.current is None and time.time() - self.idle_since > self.idle_s:
                        self.stop_reason = f"idle for {self.idle_s / 60:g} min"
                        break
                    continue
                except KeyboardInterrupt:  # a cancel that came after its run ended
                    continue
                died = self._handle(request)
                if died:
                    self.stop_reason = died
                    break
        finally:
            self.stopping.set()
            self._shutdown()
        return self.stop_reason or "stopped"

    def _handle(self, request: Request) -> str | None:
        """Run one request; returns why the engine cannot go on, if it cannot."""
        if request.gone():  # hung up, or cancelled, while it waited: it never ran
            with contextlib.suppress(OSError):
                request.channel.send({"t": "exit", "code": 130})
            request.channel.close()
            return None
        with self._lock:
            self.current = request
        began = time.perf_counter()
        watcher = threading.Thread(target=self._watch, args=(request,), name="tributary-engine-watch", daemon=True)
        watcher.start()
        code, died = 1, None
        try:
            try:
                self.session = RunSession(self.spark, self._catalog)
                code = self._run(request)
            finally:
                with self._lock:
                    request.done = True
                workers = self.spark.sparkContext.environment.get(WORKERS_OF)  # its project's Python workers
                if workers:
                    self._worker_folders.add(workers)
                _settle()
                ctrl_c.deferred.clear()
            died = self._jvm_gone()
        except KeyboardInterrupt:
            code = 130
            died = self._jvm_gone()
        except BaseException as e:  # noqa: BLE001 - the engine outlives a command's unexpected failure
            traceback.print_exc()
            with contextlib.suppress(OSError):
                request.channel.send({"t": "err", "d": f"run failed: the warm engine could not run the command: {e}\n"})
            died = self._jvm_gone()
        finally:
            with self._lock:
                self.draining = request.label if died is None and (code != 0 or request.interrupted) else None
                self.current = None
                self.runs += 1
        with contextlib.suppress(OSError):
            request.channel.send({"t": "exit", "code": code, **({"died": died} if died else {})})
        request.channel.close()
        print(f"{time.strftime('%H:%M:%S')} {request.label}: exit {code} in {time.perf_counter() - began:.2f}s", flush=True)
        if died is None:  # after the client has its answer: the next run starts once this is done
            self._reset_session()
        if self.draining is not None:  # a failed or cancelled run's tasks may go on: wait for them
            died = self._wait_for_leftover_tasks(request.label)
        if died is None:
            died = self._put_back(request.label)
        if died is None and len(self._worker_folders) >= WORKER_POOLS:  # each keeps its Python workers
            died = f"it ran the udfs/ of {len(self._worker_folders)} projects, each with Python workers of its own"
        with self._lock:
            self.draining = None
            self.idle_since = time.time()
        return died

    def _warm_up(self, warm_up: WarmUp) -> str | None:
        """Run the warm-up as a run (a session of its own, cleaned after), until it ends or a
        command comes (_greet interrupts it as a client's Ctrl-C interrupts a run); returns why the
        engine cannot go on, if it cannot."""
        from framework.warm.warm_up import warm_up as run_warm_up

        with self._lock:
            if not self.waiting.empty():
                warm_up.done = True
                return None  # a command came first: its run warms the engine
            self.current = warm_up
        began = time.perf_counter()
        what = "stopped: a command came"
        try:
            try:
                self.session = RunSession(self.spark, self._catalog)
                what = run_warm_up(self.place.folder)
            finally:
                with self._lock:
                    warm_up.done = True
                _settle()
                ctrl_c.deferred.clear()
        except KeyboardInterrupt:
            pass
        except Exception as e:  # noqa: BLE001 - the engine serves whatever its warm-up met
            what = f"failed: {type(e).__name__}: {e}"
        finally:
            with self._lock:
                self.current = None
                self.draining = warm_up.label if warm_up.interrupted else None
        print(f"{time.strftime('%H:%M:%S')} warm-up: {what} ({time.perf_counter() - began:.1f}s)", flush=True)
        died = self._jvm_gone()
        if died is None:
            self._reset_session()
            if self.draining is not None:
                died = self._wait_for_leftover_tasks(warm_up.label)
        with self._lock:
            self.draining = None
            self.idle_since = time.time()
        return died

    def _wait_for_leftover_tasks(self, label: str) -> str | None:
        """After a cancelled or failed run: wait for its tasks to stop; if they do not, the engine
        ends (its JVM with it) and this says why."""
        left = leftover_tasks.wait_until_stopped(self.spark)
        if not left:
            return None
        self.jvm_stuck = True
        died = (
            f"{len(left)} Spark task(s) of the cancelled or failed `{label}` did not stop within "
            f"{leftover_tasks.GRACE_S:g} s (Java code that ignores interrupts, such as a slow regex); "
            "the engine ended its JVM to free their cores"
        )
        print(f"{time.strftime('%H:%M:%S')} {died}: {', '.join(left)}", flush=True)
        return died

    def _run(self, request: Request) -> int:
        from rich.console import Console

        with _request_scope(request) as (out, err):
            consoles = [
                Console(
                    file=cast(IO[str], stream),
                    highlight=False,
                    emoji=False,  # `file.yaml:100:11` is a location, not the emoji :100:
                    width=t.width if t.tty else 160,
                    force_terminal=t.tty,
                    force_interactive=t.tty,
                )
                for stream, t in ((out, request.out), (err, request.err))
            ]
            try:
                return self.run_command(request.argv, consoles[0], consoles[1])
            except KeyboardInterrupt as e:
                err.write(f"interrupted; {interrupted_line(e)}\n")
                return 130

    # -- cancelling ------------------------------------------------------------------------

    def _watch(self, request: Request) -> None:
        """The client's messages during its run: a cancel, or hanging up, interrupts the run."""
        while True:
            try:
                message = request.channel.receive()
            except (OSError, ValueError):
                message = None
            if message is None or message.get("t") == "cancel":
                self._interrupt(request)
            if message is None or request.done:
                return

    def _interrupt(self, request: Request | WarmUp) -> None:
        """Ctrl-C for the main thread, as a terminal would send it: Spark's jobs are cancelled from
        here (the main thread may be waiting for one), then the main thread's SIGINT handler runs.
        Another handler than the engine's (a continuous stream's clean stop, a backfill's or the
        scheduler's abandon) does its own work: it gets a real SIGINT, so it runs at once even while
        the main thread waits for a Spark job (which it then cancels itself)."""
        with self._lock:
            if request.done or request.interrupted:
                return
            request.interrupted = True
        if signal.getsignal(signal.SIGINT) == self._on_sigint:
            session = self.session
            if session is not None:
                session.cancel()
            else:
                with contextlib.suppress(Exception):
                    self.spark.sparkContext.cancelAllJobs()
            _thread.interrupt_main()
        else:
            main = threading.main_thread().ident
            assert main is not None
            signal.pthread_kill(main, signal.SIGINT)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        """KeyboardInterrupt for the run a client cancelled, raised once, never inside a JVM call."""
        with self._lock:
            request = self.current
            if request is None or request.done or not request.interrupted or request.raised:
                return  # nothing to interrupt (a SIGINT sent to the engine itself is ignored)
            request.raised = True
        if ctrl_c.inside_jvm_call(frame):
            ctrl_c.deferred.set()  # raised by the call as it returns (ctrl_c.install_interrupt_point)
            return
        raise KeyboardInterrupt

    def _terminator(self) -> None:
        self._wake.wait()
        self.stop("SIGTERM")

    def stop(self, reason: str) -> None:
        """Stop serving: the run under way is interrupted, waiting clients are told."""
        self.stop_reason = self.stop_reason or reason
        self.stopping.set()
        with self._lock:
            current = self.current
        if current is not None:
            self._interrupt(current)

    # -- between runs ----------------------------------------------------------------------

    def _jvm_gone(self) -> str | None:
        """Why the engine cannot go on after a run (its JVM or SparkContext stopped), if so."""
        try:
            stopped = self.spark.sparkContext._jsc.sc().isStopped()
        except Exception as e:  # noqa: BLE001 - py4j: the JVM is gone
            return f"its JVM stopped ({type(e).__name__})"
        return "its SparkContext was stopped" if stopped else None

    def _reset_session(self) -> None:
        """Drop the run's session and put the engine's back as it was before the run. Done after
        the client has its exit code: the cleanup is not the user's wait (the next request waits
        for it, in the queue)."""
        spark = self.spark
        session, self.session = self.session, None
        if session is not None:
            session.close()
        with contextlib.suppress(Exception):
            for query in spark.streams.active:
                query.stop()
        with contextlib.suppress(Exception):
            for table in spark.catalog.listTables():
                if table.isTemporary:
                    spark.catalog.dropTempView(table.name)
        with contextlib.suppress(Exception):
            spark.catalog.clearCache()
        current = dict(spark.conf.getAll)
        for key in current.keys() - self._baseline_conf.keys():
            with contextlib.suppress(Exception):
                spark.conf.unset(key)
        for key, value in self._baseline_conf.items():
            if current.get(key) != value:
                with contextlib.suppress(Exception):
                    spark.conf.set(key, value)

    def _put_back(self, label: str) -> str | None:
        """The process as the run found it (framework.warm.process_state); why the engine cannot
        go on when the run changed what cannot be put back."""
        if self._process is None:
            return None
        try:
            kept = self._process.restore(self.spark)
        except Exception as e:  # noqa: BLE001 - py4j: the JVM is gone
            return self._jvm_gone() or f"it could not put back what {label} changed ({type(e).__name__}: {e})"
        if kept:
            print(f"{label} changed {', '.join(kept)}, which no run may leave for the next: the engine ends", flush=True)
            return f"{label} changed {', '.join(kept)}"
        return None

    # -- the socket ------------------------------------------------------------------------

    def _listen(self) -> None:
        path = self.place.socket
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # we hold the engine's lock: a socket there is a dead engine's
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(str(path))
        finally:
            os.umask(old)
        listener.listen(16)
        self._listener = listener
        self.place.info.write_text(json.dumps(self._describe(), indent=1))

    def _accept(self) -> None:
        assert self._listener is not None
        while not self.stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            # each its own thread: a client that connects and says nothing (suspended with Ctrl-Z)
            # held the engine's only door for the 10 s of its greeting
            threading.Thread(target=self._greet_safely, args=(conn,), name="tributary-engine-greet", daemon=True).start()

    def _greet_safely(self, conn: socket.socket) -> None:
        try:
            self._greet(conn)
        except Exception:  # noqa: BLE001 - one bad client must not stop the engine
            traceback.print_exc()
            conn.close()

    def _greet(self, conn: socket.socket) -> None:
        if not _same_user(conn):
            conn.close()
            return
        channel = Channel(conn)
        conn.settimeout(10)
        message = channel.receive()
        conn.settimeout(None)
        kind = (message or {}).get("t")
        if kind == "status":
            channel.send(self.status())
            channel.close()
        elif kind == "stop":
            busy = self.current.label if self.current else None
            channel.send({"t": "stopping", "pid": os.getpid(), "busy": busy})
            channel.close()
            self.stop("tributary engine stop")
        elif kind == "run" and message is not None:
            request = Request(
                channel,
                [str(a) for a in message.get("argv", [])],
                str(message.get("cwd") or "/"),
                {str(k): str(v) for k, v in (message.get("env") or {}).items()},
                Terminal.of(message.get("out")),
                Terminal.of(message.get("err")),
            )
            if self.stopping.is_set():
                channel.send({"t": "exit", "code": 1, "died": "the engine is stopping"})
                channel.close()
                return
            with self._lock:
                warming = self.current if isinstance(self.current, WarmUp) else None
                running = None if warming else self.current.label if self.current else self.draining
                ahead = self.waiting.qsize()
            if warming is not None:  # the command goes first: the warm-up stops for it
                self._interrupt(warming)
            elif running is not None or ahead:
                label = running or "queued runs"
                channel.send({"t": "busy", "with": label, "ahead": ahead, "pid": os.getpid()})
            self.waiting.put(request)
        else:
            channel.close()

    def status(self) -> dict[str, Any]:
        now = time.time()
        with self._lock:
            current, draining = self.current, self.draining
        # a warm-up not begun yet is about to: the engine answers before its main thread starts it
        warming = isinstance(current, WarmUp) or (current is None and self.warm_up is not None and not self.warm_up.done)
        busy = None if warming else current.label if current else None
        if busy is None and draining is not None:
            busy = f"{draining} (cancelled: waiting up to {leftover_tasks.GRACE_S:g} s for its Spark tasks to stop)"
        elif busy is None and not warming and not self.stopping.is_set():
            left = leftover_tasks.running_tasks(self.spark)  # work no run owns any more is still work
            busy = f"{len(left)} Spark task(s) still running" if left else None
        return {
            "t": "status",
            **self._describe(),
            "uptime_s": round(now - self.started, 1),
            "runs": self.runs,
            "busy": busy,
            "warming_up": warming,
            "idle_s": None if busy or warming else round(now - self.idle_since, 1),
            "waiting": self.waiting.qsize(),
        }

    def _describe(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "key": self.place.key,
            "started": self.started,
            "socket": str(self.place.socket),
            "log": str(self.place.log),
            "spark_log": str(self.place.spark_log),
            "master": self.settings.get("master"),
            "spark": self.settings,
            "python": sys.executable,
            "tributary": framework.__version__,
            "source": self.source,
            "idle_stop_s": self.idle_s,
        }

    def _shutdown(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
        for path in (self.place.socket, self.place.info):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        while True:
            try:
                request = self.waiting.get_nowait()
            except queue.Empty:
                break
            with contextlib.suppress(OSError):  # it never ran: its client may start a new engine
                request.channel.send({"t": "exit", "code": 1, "died": f"the engine stopped ({self.stop_reason})", "again": True})
            request.channel.close()


def serve(settings: dict[str, Any], run_command: RunCommand) -> int:
    """The engine's life: `settings` = {"key", "folder", "spark", "idle_minutes", "warm_up", "pipeline"}
    from the client."""
    place = EnginePlace.of(str(settings["key"]), Path(settings["folder"]))
    lock = _take_lock(place.lock)
    if lock is None:
        print(f"engine {place.key}: another engine with these settings holds {place.lock}", flush=True)
        return 0
    print(f"engine {place.key}: pid {os.getpid()}, starting Spark ({time.strftime('%Y-%m-%d %H:%M:%S')})", flush=True)
    began = time.perf_counter()
    from framework.engine import session
    from framework.warm import class_archive

    spark_settings = dict(settings["spark"])
    imported: list[str] = []
    pipeline = settings.get("pipeline")  # the pipeline file of the command that started this engine
    preload = threading.Thread(target=_preload, args=(pipeline, imported), name="tributary-engine-preload", daemon=True)
    preload.start()  # imports while the JVM starts
    archive = class_archive.archive_path()
    archive_options, class_list = class_archive.java_options(archive)
    options = f"{java_options()} {archive_options}".strip()
    spark = session.spark_session(Profile(spark=SparkSettings(**spark_settings)), place.spark_log, options)
    session.started_here = None  # the engine's: commands it runs must not stop it
    dump = None
    if class_list is not None and archive is not None:
        with contextlib.suppress(Exception):
            dump = class_archive.dump_command(spark._jvm, class_list, archive)
    preload.join()
    framework.warm.serving = True
    loader.workers_per_project = True  # each project's udfs/ in Python workers of its own
    ctrl_c.install_interrupt_point()
    warm_up = bool(settings.get("warm_up"))  # started by `tributary engine start`
    engine = Engine(place, spark, float(settings["idle_minutes"]) * 60, run_command, spark_settings, warm_up)
    meanwhile = f" (imported {', '.join(imported)} meanwhile, for {pipeline})" if imported else ""
    print(f"engine {place.key}: ready in {time.perf_counter() - began:.1f}s on {place.socket}{meanwhile}", flush=True)
    reason = engine.serve()
    print(f"engine {place.key}: stopping ({reason}) after {engine.runs} run(s)", flush=True)
    if engine.jvm_stuck:  # stopping Spark would wait for the task that does not stop
        leftover_tasks.end_jvm()
        return 0
    with contextlib.suppress(Exception):
        spark.stop()
    if dump is not None:  # the class list is whole once the JVM has exited
        _end_jvm()
        with contextlib.suppress(OSError):
            class_archive.write_later(dump)
    return 0


def _end_jvm(timeout: float = 120.0) -> None:
    """Let the driver's JVM exit now (it exits when its stdin closes) and wait for it."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if gateway is None or process is None:
        return
    with contextlib.suppress(Exception):
        gateway.shutdown()
    with contextlib.suppress(Exception):
        process.stdin.close()
        process.wait(timeout)


def _preload(pipeline: str | None, imported: list[str]) -> None:
    """What the first run imports anyway, imported while the JVM starts (the two overlap), and
    what `pipeline` (the file of the command that started the engine) needs besides: Great
    Expectations when it has expectations (framework.engine.preload). Adds those to `imported`."""
    with contextlib.suppress(Exception):
        import pyspark.sql.pandas.functions  # noqa: F401 - pandas and Arrow, for udfs/

        import framework.display
        import framework.engine.runner  # noqa: F401
    if pipeline:
        from framework.engine import preload

        imported += preload.for_file(Path(pipeline))


def _take_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    deadline = time.monotonic() + _LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd  # held until the process exits
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.2)


def _same_user(conn: socket.socket) -> bool:
    """The peer runs as this user (the folder's 0700 already says so; the kernel confirms)."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return True
    _, uid, _ = struct.unpack("3i", creds)
    return uid == os.getuid()


def _settle() -> None:
    """A cancel that raced the end of its command raises KeyboardInterrupt here, not later."""
    for _ in range(3):
        with contextlib.suppress(KeyboardInterrupt):
            time.sleep(0.005)


@contextlib.contextmanager
def _request_scope(request: Request) -> Iterator[tuple[ClientStream, ClientStream]]:
    """The client's working directory, environment and console for the time of its command."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out = ClientStream(request.channel, "out", request.out)
    err = ClientStream(request.channel, "err", request.err)
    try:
        os.environ.clear()
        os.environ.update(request.env)
        os.chdir(request.cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield out, err
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        with contextlib.suppress(OSError):
            os.chdir(saved_cwd)
