"""The CLI's side of the warm engine: find or start the engine for a profile, hand it the command,
print what it prints, return its exit code.

`hand_over` is called by a Spark-using command once its input checked out (bad input is reported
without an engine). It returns None when the command should run here instead: the engine is
turned off (--no-engine, TRIBUTARY_ENGINE=0, profile `engine: embedded`), the profile is not
local, this process already holds a session, or the engine cannot start or died (said on
stderr). Starting is serialised by a lock file, so two commands at once start one engine.

Ctrl-C (or SIGTERM) asks the engine to interrupt the run, which then ends as an interrupted
embedded run does (exit 130, outputs at their previous version; a continuous stream stops
cleanly); a second Ctrl-C leaves at once (the engine sees the client go and interrupts the run).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import framework.warm
from framework.profiles import Profile
from framework.warm.place import (
    SESSION_ENVIRONMENT,
    EnginePlace,
    EngineUnavailable,
    engine_key,
    idle_minutes,
    known_places,
    mode,
    settings_of,
    source_digest,
)
from framework.warm.protocol import Channel, ask, connect

#: how long a client waits for a new engine's session (a JVM start on a busy machine)
START_TIMEOUT_S = 180.0

Say = Callable[[str], None]
#: engines this process started (warm_up, then hand_over waits for the same one)
_spawned: dict[str, subprocess.Popen] = {}
#: an engine failed this command: the rest of it runs here
_gave_up = False
#: _relay: the engine ended before it ran the command, which may go to a new engine
_AGAIN = -1
#: what an engine process gets of its starter's environment: the variables that shape its session
#: (they are in its key), and what Java, Spark and Python need to start. Nothing else: the engine
#: serves other commands later, each with its own environment, and its JVM and Python workers
#: keep the environment they started with.
_ENGINE_ENVIRONMENT = (
    *SESSION_ENVIRONMENT,
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "XDG_CACHE_HOME",
    "TRIBUTARY_RUNTIME_DIR",
    "TRIBUTARY_CLASS_ARCHIVE",
    "VIRTUAL_ENV",
)


def hand_over(profile: Profile, argv: list[str], no_engine: bool, say: Say, start: bool = True) -> int | None:
    """Run `argv` (a tributary command line) in the warm engine, started if none runs (`start`); its
    exit code, or None to run here."""
    if framework.warm.serving or _gave_up or _session_here():
        return None
    why_not = mode(profile, no_engine)
    if why_not is not None:
        if why_not and start:
            say(f"warm engine not used: {why_not}")
        return None
    try:
        place = EnginePlace.of(engine_key(profile))
        channel = _connect_or_start(place, profile, say) if start else _try_connect(place)
        if channel is None:
            return None
    except EngineUnavailable as e:
        say(f"warm engine unavailable: {e}; running in this process")
        return None
    code = _relay(channel, argv, place, say)
    if code == _AGAIN:  # the engine ended before the command ran (a cancelled task would not stop)
        _spawned.pop(place.key, None)
        try:
            code = _relay(_connect_or_start(place, profile, say), argv, place, say)
        except EngineUnavailable as e:
            say(f"warm engine unavailable: {e}; running in this process")
            code = None
    if code is None or code == _AGAIN:
        _give_up()
        return None
    return code


def _give_up() -> None:
    global _gave_up
    _gave_up = True


def warm_up(profile: Profile, no_engine: bool = False, pipeline: Path | None = None) -> None:
    """Start the profile's engine in the background if it is not running (the command goes on
    checking its input meanwhile; hand_over then finds it starting or ready). `pipeline`: the
    command's pipeline file, whose imports the engine makes while its JVM starts."""
    if framework.warm.serving or _gave_up or _session_here() or mode(profile, no_engine) is not None:
        return
    with contextlib.suppress(EngineUnavailable, OSError):
        place = EnginePlace.of(engine_key(profile))
        if _try_connect(place) is not None:
            return
        with _start_lock(place, wait=False) as held:
            if held and _try_connect(place) is None:
                _spawn(place, profile, pipeline=pipeline)
                _retire_outdated(place)


def start(profile: Profile, say: Say, warm_up: bool = True) -> dict[str, Any]:
    """`tributary engine start`: the profile's engine, started if needed; its status. An engine it
    starts warms itself up until its first command comes (`warm_up`: framework.warm.warm_up)."""
    why_not = mode(profile)
    if why_not is not None:
        raise EngineUnavailable(
            why_not or "this profile does not use the warm engine (engine: embedded, not local, or turned off)"
        )
    place = EnginePlace.of(engine_key(profile))
    _connect_or_start(place, profile, say, warm_up).close()
    status = ask(str(place.socket), {"t": "status"})
    if status is None:
        raise EngineUnavailable(f"the engine stopped right after starting; its log: {place.log}")
    return status


def statuses(folder: Path | None = None) -> list[dict[str, Any]]:
    """Every running engine's status; files of engines that are gone are removed."""
    found = []
    for place in known_places(folder):
        status = ask(str(place.socket), {"t": "status"}, timeout=3.0)
        if status is not None:
            found.append(status)
        elif not _lock_held(place):
            for path in (place.socket, place.info, place.lock, place.starting):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
    return found


def stop_all(folder: Path | None = None, wait_s: float = 30.0) -> list[dict[str, Any]]:
    """Ask every running engine to stop; wait until they let go of their locks. Their answers."""
    answers = []
    places = known_places(folder)
    for place in places:
        answer = ask(str(place.socket), {"t": "stop"})
        if answer is not None:
            answers.append({**answer, "key": place.key})
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(_lock_held(p) for p in places):
        time.sleep(0.1)
    return answers


# -- starting --------------------------------------------------------------------------------


def _connect_or_start(place: EnginePlace, profile: Profile, say: Say, warm_up: bool = False) -> Channel:
    channel = _try_connect(place)
    if channel is not None:
        return channel
    with _start_lock(place, wait=True):
        channel = _try_connect(place)
        if channel is not None:
            return channel
        process = _spawned.get(place.key)
        if process is None and not _lock_held(place):
            process = _spawn(place, profile, warm_up)
        _retire_outdated(place)
        minutes = idle_minutes(profile)
        say(f"starting a warm Spark engine for this and later runs (it stops after {minutes:g} min idle; tributary engine stop)")
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            channel = _try_connect(place)
            if channel is not None:
                return channel
            if process is not None and process.poll() is not None:
                raise EngineUnavailable(f"the engine exited while starting (code {process.returncode}); its log: {place.log}")
            if process is None and not _lock_held(place):
                process = _spawn(place, profile, warm_up)  # the engine that held the lock is gone
            if time.monotonic() > deadline:
                raise EngineUnavailable(f"the engine did not start within {START_TIMEOUT_S:.0f}s; its log: {place.log}")
            time.sleep(0.05)


def _retire_outdated(place: EnginePlace) -> None:
    """Engines of this Python that run an older copy of the framework's files (it was edited or
    upgraded) serve no one any more: idle ones are stopped now instead of after their idle time."""
    current = source_digest()
    for status in statuses(place.folder):
        ours = status.get("key") != place.key and status.get("python") == sys.executable
        if ours and not status.get("busy") and status.get("source") not in (None, current):
            ask(str(status.get("socket")), {"t": "stop"})


def _spawn(place: EnginePlace, profile: Profile, warm_up: bool = False, pipeline: Path | None = None) -> subprocess.Popen:
    """`tributary engine serve`, detached: its own session (no terminal signals), output to its log."""
    settings = {
        "key": place.key,
        "folder": str(place.folder),
        "spark": settings_of(profile),
        "idle_minutes": idle_minutes(profile),
        "warm_up": warm_up,
        "pipeline": str(pipeline.resolve()) if pipeline is not None else None,
    }
    log = open(place.log, "ab")  # noqa: SIM115 - handed to the child
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "framework", "engine", "serve"],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=place.folder,
            env={name: os.environ[name] for name in _ENGINE_ENVIRONMENT if name in os.environ},
            start_new_session=True,
            close_fds=True,
        )
    finally:
        log.close()
    assert process.stdin is not None
    process.stdin.write(json.dumps(settings).encode())
    process.stdin.close()
    _spawned[place.key] = process
    return process


def _try_connect(place: EnginePlace) -> Channel | None:
    try:
        return connect(str(place.socket), timeout=5.0)
    except OSError:
        return None


@contextlib.contextmanager
def _start_lock(place: EnginePlace, wait: bool) -> Iterator[bool]:
    fd = os.open(place.starting, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _lock_held(place: EnginePlace) -> bool:
    """An engine process of this key is alive (it holds its lock from start to exit)."""
    try:
        fd = os.open(place.lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _session_here() -> bool:
    """This process already holds a SparkContext (a notebook, the test suite): use it."""
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


# -- running ---------------------------------------------------------------------------------


def argv_of(ctx: Any, overrides: dict[str, Any] | None = None, leave_out: tuple[str, ...] = ("no_engine",)) -> list[str]:
    """The command line of a parsed typer command (its parents' names, then every option and
    argument with a value other than its default): what the engine runs again."""
    overrides = overrides or {}
    names: list[str] = []
    parent = ctx
    while parent is not None and parent.parent is not None:
        names.insert(0, parent.info_name)
        parent = parent.parent
    options: list[str] = []
    arguments: list[str] = []
    for param in ctx.command.params:
        if param.name in leave_out:
            continue
        value = overrides.get(param.name, ctx.params.get(param.name))
        if param.param_type_name == "argument":
            values = value if isinstance(value, (list, tuple)) else ([] if value is None else [value])
            arguments += [_text(v) for v in values]
        elif param.param_type_name == "option":
            if param.is_flag and not param.multiple:
                if value and not param.default:
                    options.append(param.opts[0])
                elif not value and param.default and param.secondary_opts:
                    options.append(param.secondary_opts[0])
            elif param.multiple:
                for v in value or ():
                    options += [param.opts[0], _text(v)]
            elif value is not None and value != param.default:
                options += [param.opts[0], _text(value)]
    return [*names, *options, *(["--", *arguments] if arguments else [])]


def _text(value: Any) -> str:
    return str(getattr(value, "value", value))


def _relay(channel: Channel, argv: list[str], place: EnginePlace, say: Say) -> int | None:
    request = {
        "t": "run",
        "argv": argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "out": _terminal(sys.stdout),
        "err": _terminal(sys.stderr),
    }
    interrupts = 0
    queued = False  # waiting behind another run: Ctrl-C just leaves

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts > 1 or queued:
            raise KeyboardInterrupt
        with contextlib.suppress(OSError):
            channel.send({"t": "cancel"})

    previous = _install(on_signal)
    try:
        channel.send(request)
        while True:
            message = channel.receive()
            if message is None:
                if interrupts:
                    raise KeyboardInterrupt  # cancelled: the engine let go of it
                say(f"the warm engine stopped during the command (its log: {place.log}); running it in this process")
                return None
            kind = message.get("t")
            queued = kind == "busy" or (queued and kind not in ("out", "err", "exit"))
            if kind == "out":
                _write(sys.stdout, message.get("d", ""))
            elif kind == "err":
                _write(sys.stderr, message.get("d", ""))
            elif kind == "busy":
                ahead = message.get("ahead") or 0
                also = f" and {ahead} queued command(s)" if ahead else ""
                say(
                    f"the warm engine (pid {message.get('pid')}) is busy with {message.get('with')}{also}: waiting (Ctrl-C to give up)"
                )
            elif kind == "exit":
                code = int(message.get("code", 1))
                died = message.get("died")
                if died and message.get("again") and not interrupts:
                    say(f"the warm engine stopped before running the command: {died}")
                    return _AGAIN
                if died:
                    if code in (0, 130) or interrupts:
                        say(f"the warm engine stopped: {died}")
                        return code
                    say(f"the warm engine stopped: {died} (its log: {place.log}); running the command in this process")
                    return None
                return code
    except (OSError, ValueError) as e:
        say(f"lost the warm engine ({e}; its log: {place.log}); running the command in this process")
        return None
    finally:
        channel.close()
        _restore(previous)


def _terminal(stream: Any) -> dict[str, Any]:
    tty = bool(getattr(stream, "isatty", lambda: False)())
    return {"tty": tty, "width": shutil.get_terminal_size().columns if tty else None}


def _write(stream: Any, text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        stream.write(text)
        stream.flush()


def _install(handler: Callable[[int, Any], None]) -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {signum: signal.signal(signum, handler) for signum in (signal.SIGINT, signal.SIGTERM)}


def _restore(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)
