"""One run of a pipeline at a time: a lock file under the warehouse.

A crashed run cannot leave it stuck: the holder refreshes the file every few seconds (a
heartbeat), and a lock whose process is gone (same host) or whose heartbeat stopped is stale
and taken over.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from framework.errors import RunFailed
from framework.io.locations import LOCKS_DIR, Warehouse

HEARTBEAT_S = 10.0
STALE_AFTER_S = 120.0
TAKEOVER_S = 30.0  # a replacement of a stale lock takes milliseconds; a marker this old was left by a crash


class LockBusy(RunFailed):
    """Another run of the pipeline holds its lock (the scheduler waits instead of failing)."""


def lock_file(warehouse: Warehouse, pipeline: str) -> Path:
    """Where a pipeline's run lock lives (a local warehouse only)."""
    return Path(warehouse.internal(f"{LOCKS_DIR}/{pipeline}.lock"))


@dataclass
class RunLock:
    path: Path
    run_id: str
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock, or raise LockBusy naming its holder. The file appears with its holder
        written (linked in whole), so a lock just taken is never read empty and taken for stale;
        and one process at a time replaces a stale lock (`_taking_over`), so two that found it
        stale cannot both take it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            if self._create():
                self._thread = threading.Thread(target=self._beat, name="tributary-lock-heartbeat", daemon=True)
                self._thread.start()
                return
            holder = self._holder()
            if holder is None and not self.path.exists():
                continue  # released since: take it
            if not self._is_stale(holder):
                raise self._busy(holder)
            with self._taking_over() as alone:
                if not alone:  # another process is replacing the stale lock: it holds it next
                    raise self._busy(holder)
                # still that stale lock (never a file gone meanwhile: another may have just made its own)
                if self.path.exists() and self._holder() == holder and self._is_stale(holder):
                    self.path.unlink(missing_ok=True)  # stale: its run crashed
        raise self._busy(self._holder())

    def _create(self) -> bool:
        """The lock file made with this holder in it, if there is none."""
        record = {
            "run_id": self.run_id,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        written = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}")
        written.write_text(json.dumps(record))
        try:
            os.link(written, self.path)  # fails when the lock file exists: taking it is atomic
            return True
        except FileExistsError:
            return False
        finally:
            written.unlink(missing_ok=True)

    @contextlib.contextmanager
    def _taking_over(self) -> Iterator[bool]:
        """Whether this process alone may replace the stale lock now (a marker file beside it;
        one left by a process that died while replacing goes after TAKEOVER_S)."""
        marker = self.path.with_name(f"{self.path.name}.takeover")
        with contextlib.suppress(OSError):
            if time.time() - marker.stat().st_mtime > TAKEOVER_S:
                marker.unlink(missing_ok=True)
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            yield False
            return
        try:
            yield True
        finally:
            marker.unlink(missing_ok=True)

    def _busy(self, holder: dict | None) -> LockBusy:
        who = (
            f"run {holder.get('run_id')} (pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('started')})"
            if holder
            else "another run"
        )
        return LockBusy(
            f"pipeline is already running: {who}; wait for it to finish. "
            f"If that run is gone, the lock frees itself within {int(STALE_AFTER_S)} s ({self.path})"
        )

    def release(self) -> None:
        self._stop.set()
        holder = self._holder()
        if holder is not None and holder.get("run_id") == self.run_id:
            self.path.unlink(missing_ok=True)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except OSError:
                return

    def _holder(self) -> dict | None:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None

    @staticmethod
    def _alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _is_stale(self, holder: dict | None) -> bool:
        """Its process is gone (this host), or its heartbeat stopped; a file that cannot be read
        (damaged) by its heartbeat alone."""
        if holder is not None and holder.get("host") == socket.gethostname() and not self._alive(int(holder.get("pid", -1))):
            return True
        try:
            return time.time() - self.path.stat().st_mtime > STALE_AFTER_S
        except OSError:  # gone: released, not stale (taking it is trying again)
            return False
