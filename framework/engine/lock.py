"""One run of a pipeline at a time: a lock file under the warehouse.

A crashed run cannot leave it stuck: the holder refreshes the file every few seconds (a
heartbeat), and a lock whose process is gone (same host) or whose heartbeat stopped is stale
and taken over.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from framework.errors import RunFailed
from framework.io.locations import LOCKS_DIR, Warehouse

HEARTBEAT_S = 10.0
STALE_AFTER_S = 120.0


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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder is not None and not self._is_stale(holder):
                    raise LockBusy(
                        f"pipeline is already running: run {holder.get('run_id')} (pid {holder.get('pid')} on "
                        f"{holder.get('host')}, since {holder.get('started')}); wait for it to finish. "
                        f"If that run is gone, the lock frees itself within {int(STALE_AFTER_S)} s ({self.path})"
                    ) from None
                self.path.unlink(missing_ok=True)  # stale: its run crashed
                continue
            with os.fdopen(fd, "w") as handle:
                json.dump(
                    {
                        "run_id": self.run_id,
                        "pid": os.getpid(),
                        "host": socket.gethostname(),
                        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    },
                    handle,
                )
            self._thread = threading.Thread(target=self._beat, name="tributary-lock-heartbeat", daemon=True)
            self._thread.start()
            return
        raise RunFailed(f"could not take the run lock {self.path}")

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

    def _is_stale(self, holder: dict) -> bool:
        if holder.get("host") == socket.gethostname() and not self._alive(int(holder.get("pid", -1))):
            return True
        try:
            return time.time() - self.path.stat().st_mtime > STALE_AFTER_S
        except OSError:
            return True
