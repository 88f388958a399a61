"""The run lock with real processes racing for it: one holder at a time, whatever the timing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

RACER = """\
import os, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from framework.engine.lock import LockBusy, RunLock

lock, held = Path(sys.argv[2]), Path(sys.argv[3])
overlaps = taken = 0
end = time.time() + float(sys.argv[4])
while time.time() < end:
    run = RunLock(lock, f"run-{os.getpid()}-{taken}")
    try:
        run.acquire()
    except LockBusy:
        continue
    taken += 1
    try:  # the lock's holder marks that it holds it: a mark already there is a second holder
        os.close(os.open(held, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        time.sleep(0.0005)
        os.unlink(held)
    except FileExistsError:
        overlaps += 1
    run.release()
print(taken, overlaps)
"""


def test_processes_racing_for_the_lock_never_hold_it_together(tmp_path: Path):
    """A lock file another process had just created, before it wrote who holds it, read as
    stale and was taken over: two runs of one pipeline at once (83 overlaps in 20 s, 3 processes)."""
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    args = [sys.executable, str(script), str(REPO), str(tmp_path / "p.lock"), str(tmp_path / "held"), "6"]
    racers = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    said = [r.communicate(timeout=120) for r in racers]
    assert all(r.returncode == 0 for r in racers), said
    results = [tuple(map(int, out.split())) for out, _ in said]
    assert sum(taken for taken, _ in results) > 50, results  # they did take it, many times
    assert sum(overlaps for _, overlaps in results) == 0, results
