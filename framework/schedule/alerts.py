"""Alerts: `on_failure` / `on_success` commands, the run's summary as JSON on their stdin.

A team posts the summary wherever it wants (`curl -d @- $HOOK`, a script writing to a chat, a
pager). A command given as text runs through /bin/sh, as a crontab line would; a list is the
program and its arguments, no shell. It runs in the project's folder with TRIBUTARY_PIPELINE and
TRIBUTARY_STATUS set, and gets ALERT_TIMEOUT_S: an alert that fails or hangs is logged and shown,
never changes the run's outcome, and never stops the scheduler.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

ALERT_TIMEOUT_S = 60.0


def send(command: str | list[str], summary: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """Run the alert command; what became of it (for the run log): its exit code or its error."""
    env = {**os.environ, "TRIBUTARY_PIPELINE": str(summary.get("pipeline")), "TRIBUTARY_STATUS": str(summary.get("status"))}
    shown = command if isinstance(command, str) else " ".join(command)
    try:
        done = subprocess.run(
            command,
            shell=isinstance(command, str),
            input=json.dumps(summary, default=str) + "\n",  # one line: alerts appended to a file are JSON lines
            capture_output=True,
            text=True,
            timeout=ALERT_TIMEOUT_S,
            cwd=cwd,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"command": shown, "exit_code": None, "error": f"did not finish within {ALERT_TIMEOUT_S:g} s"}
    except OSError as e:
        return {"command": shown, "exit_code": None, "error": f"could not start: {e.strerror or e}"}
    report: dict[str, Any] = {"command": shown, "exit_code": done.returncode}
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        report["error"] = lines[-1][:500] if lines else f"exited with {done.returncode}"
    return report
