"""`tributary test` over all the example tests, warm and cold, against baselines in the same run.

A copy of the example project (pipelines, sql, configs, udfs, data) in a temporary folder, with
its own runtime folder (so engines already running are neither used nor stopped); per round:

- baseline: `tributary validate` of the same pipelines (no Spark: what reading and checking the
  pipelines and their tests costs), and one `tributary run pipelines/service_calls.yaml --no-engine`
  (a JVM of its own, a small batch run: what starting Spark costs);
- cold: `tributary test --no-engine` (a JVM of its own);                 target < 30 s
- unwarmed: `tributary test` on an engine started right before it with `engine start --no-warm-up`
  (as an engine a command starts: the test is the first work of its JVM)
- warm: `tributary test` on an engine `engine start` started (untimed), once its warm-up is over
  (framework.warm.warm_up: it runs tests of its own while it waits);    target < 20 s
- again: `tributary test` once more on that engine (an analyst's loop: edit, test, edit, test):
  its JVM has run these very tests once

The load average is printed with each figure: on a shared machine it moves them more than any
change does, so compare figures of the same run (the rounds alternate the commands).

    .venv/bin/python benchmarks/bench_tests.py [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, example_copy, record


class Commands:
    def __init__(self, project: Path, runtime: Path):
        self.project = project
        tributary = Path(sys.executable).with_name("tributary")
        self.command = [str(tributary)] if tributary.exists() else [sys.executable, "-m", "framework"]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUTARY_")}
        self.env["TRIBUTARY_RUNTIME_DIR"] = str(runtime)
        self.env["PYTHONPATH"] = str(REPO)  # this tree's framework, whichever is installed

    def warmed_up(self, timeout: float = 300.0) -> float:
        """Seconds until the running engine's warm-up is over."""
        began = time.perf_counter()
        while time.perf_counter() - began < timeout:
            done = subprocess.run(
                [*self.command, "engine", "status", "--json"], cwd=self.project, env=self.env, capture_output=True
            )
            if done.returncode == 0 and not any(e.get("warming_up") for e in json.loads(done.stdout or "[]")):
                return time.perf_counter() - began
            time.sleep(1.0)
        raise SystemExit(f"the engine was still warming up after {timeout:.0f} s")

    def time(self, *args: str) -> float:
        """Seconds of one command; it must succeed."""
        began = time.perf_counter()
        done = subprocess.run([*self.command, *args], cwd=self.project, env=self.env, capture_output=True, text=True)
        seconds = time.perf_counter() - began
        if done.returncode != 0:
            raise SystemExit(
                f"tributary {' '.join(args)} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            )
        return seconds


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=1, help="rounds (each: baselines, cold, unwarmed, warm, again)")
    args = parser.parse_args()
    figures: dict[str, list[float]] = {"validate": [], "run": [], "cold": [], "unwarmed": [], "warm": [], "again": []}
    with tempfile.TemporaryDirectory() as tmp:
        project = example_copy(Path(tmp) / "project")  # a fresh checkout has no generated data: empty folders
        commands = Commands(project, Path(tmp) / "runtime")
        try:
            for round_ in range(args.repeat):
                for name, command in (
                    ("validate", ("validate",)),
                    ("run", ("run", "pipelines/service_calls.yaml", "--no-engine")),
                    ("cold", ("test", "--no-engine")),
                ):
                    figures[name].append(commands.time(*command))
                    print(f"round {round_ + 1}: {name:8} {figures[name][-1]:6.1f} s  ({load()})", flush=True)
                commands.time("engine", "start", "--no-warm-up")  # untimed: a new engine's first test is
                figures["unwarmed"].append(commands.time("test"))
                print(f"round {round_ + 1}: {'unwarmed':8} {figures['unwarmed'][-1]:6.1f} s  ({load()})", flush=True)
                commands.time("engine", "stop")
                commands.time("engine", "start")  # untimed, and its warm-up: the engine is started ahead of use
                print(f"round {round_ + 1}: warm-up  {commands.warmed_up():6.1f} s after the engine was ready", flush=True)
                for name in ("warm", "again"):
                    figures[name].append(commands.time("test"))
                    print(f"round {round_ + 1}: {name:8} {figures[name][-1]:6.1f} s  ({load()})", flush=True)
                commands.time("engine", "stop")
        finally:
            subprocess.run([*commands.command, "engine", "stop"], cwd=project, env=commands.env, capture_output=True)
    print()
    rows = (
        ("baseline: tributary validate (no Spark)", "validate", None),
        ("baseline: one tributary run --no-engine (a JVM of its own)", "run", None),
        ("cold: tributary test --no-engine", "cold", 30.0),
        ("unwarmed: tributary test, first work of a new engine", "unwarmed", None),
        ("warm: tributary test, engine started ahead (warmed up)", "warm", 20.0),
        ("again: tributary test, the same engine once more", "again", 20.0),
    )
    for label, key, target in rows:
        median = statistics.median(figures[key])
        goal = f"  target < {target:.0f} s: {'met' if median < target else 'not met'}" if target else ""
        print(f"{label:60} {median:6.1f} s{goal}")
    record("tests.cold", statistics.median(figures["cold"]), digits=1)
    record("tests.unwarmed", statistics.median(figures["unwarmed"]), digits=1)
    record("tests.warm", statistics.median(figures["warm"]), digits=1)
    record("tests.again", statistics.median(figures["again"]), digits=1)
    record("tests.baseline_run", statistics.median(figures["run"]), digits=1)


if __name__ == "__main__":
    main()
