"""The analyst's edit-run loop, timed from the command line as a user runs it.

.venv/bin/python benchmarks/bench_loop.py [--repeat 3] [--no-class-archive]

In a copy of the example project (its own warehouse, cleared before every run so each run writes
both tables; its own runtime folder, so engines already running are neither used nor stopped):

- today: `tributary run pipelines/service_calls.yaml --no-engine`, the embedded engine started per
  run (the named baseline, measured in the same script run, interleaved with the cold runs);
- checked: the same pipeline with two expectations on its stacked calls, the same way: what a
  suite adds to a run that starts its own JVM (Great Expectations' imports among it, which the
  run makes while the JVM starts: framework.engine.preload);     target <= 1.2 x today
- cold: the same command with no engine running (`tributary engine stop` first, untimed): it
  starts the warm engine and runs through it;                          target <= 12 s
- cold checked: `checked` with no engine running: the engine it starts imports Great
  Expectations while its JVM starts (framework.warm.server);            target <= 12 s
- warm: the same command again with the engine running;                target <= 3 s
- `tributary validate` of all example pipelines;                       target < 1 s
- `tributary show service_stats` when the command exists;              target < 1 s

Medians of --repeat runs. Wall times on a shared machine move with its load: the load average is
printed before and after. The engine's class archive (framework/warm/class_archive.py) lives in
the user's cache; whether it existed at the start is printed (--no-class-archive: measure without).
When it did not, round 1's cold run is the very first engine's, and the archive is built in the
background after that engine stops: each round waits for it, untimed, before measuring.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import example_copy, record

EXAMPLE = "pipelines/service_calls.yaml"
CHECKED = "pipelines/service_calls_checked.yaml"
#: the expectations the checked variant puts on the example's stacked calls (warn: nothing is dropped)
EXPECTATIONS = """    expectations:
      - expect_column_values_to_not_be_null: {column: head_service}
        severity: warn
      - expect_column_values_to_be_between: {column: response_ms, min_value: 0, max_value: 120000}
        severity: warn
"""


def write_checked(project: Path) -> None:
    """The example pipeline as `service_calls_checked`, with EXPECTATIONS on its step all_calls."""
    text = (project / EXAMPLE).read_text()
    step = "    union: [static_calls, image_calls]\n"
    assert step in text, "the example's all_calls step changed: update bench_loop.write_checked"
    text = text.replace("name: service_calls\n", "name: service_calls_checked\n", 1).replace(step, step + EXPECTATIONS, 1)
    (project / CHECKED).write_text(text)


class Loop:
    def __init__(self, project: Path, runtime: Path, class_archive: bool):
        self.project = project
        tributary = Path(sys.executable).with_name("tributary")
        self.command = [str(tributary)] if tributary.exists() else [sys.executable, "-m", "framework"]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUTARY_")}
        self.env["TRIBUTARY_RUNTIME_DIR"] = str(runtime)
        if not class_archive:
            self.env["TRIBUTARY_CLASS_ARCHIVE"] = "0"

    def time(self, *args: str, fresh: bool = False) -> float:
        """Seconds of one command (its warehouse cleared first when `fresh`); it must succeed."""
        if fresh:
            shutil.rmtree(self.project / "warehouse", ignore_errors=True)
        began = time.perf_counter()
        done = subprocess.run([*self.command, *args], cwd=self.project, env=self.env, capture_output=True, text=True)
        seconds = time.perf_counter() - began
        if done.returncode != 0:
            raise SystemExit(
                f"tributary {' '.join(args)} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            )
        return seconds

    def wait_for_class_archive(self, archive: Path | None, limit_s: float = 300.0) -> None:
        """Untimed: an engine that stopped may be building the class archive in the background
        (about 40 s of CPU); the next figures are measured once it is done."""
        from framework.warm import class_archive

        deadline = time.monotonic() + limit_s
        while archive is not None and class_archive.being_written(archive) and time.monotonic() < deadline:
            time.sleep(1)

    def has(self, command: str) -> bool:
        done = subprocess.run([*self.command, command, "--help"], cwd=self.project, env=self.env, capture_output=True)
        return done.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-class-archive", action="store_true", help="engines start without the class archive")
    args = parser.parse_args()

    from framework.warm import class_archive

    archive = class_archive.archive_path()
    had_archive = archive is not None and archive.is_file() and not args.no_class_archive
    work = Path(tempfile.mkdtemp(prefix="tributary-loop-"))
    runtime = Path(tempfile.mkdtemp(prefix="trl-"))
    project = example_copy(work / "project")
    loop = Loop(project, runtime, not args.no_class_archive)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    print(
        f"class archive: {'off' if args.no_class_archive else ('present' if had_archive else 'none yet (built from the class list of the first engine after it stops; round 1 runs without)')}"
    )
    write_checked(project)
    figures: dict[str, list[float]] = {
        name: [] for name in ("today", "checked", "cold", "cold_checked", "warm", "validate", "show")
    }
    try:
        for i in range(args.repeat):
            loop.time("engine", "stop")
            loop.wait_for_class_archive(archive)
            for name in ("today", "checked") if i % 2 == 0 else ("checked", "today"):
                figures[name].append(loop.time("run", EXAMPLE if name == "today" else CHECKED, "--no-engine", fresh=True))
            figures["cold"].append(loop.time("run", EXAMPLE, fresh=True))
            loop.time("engine", "stop")
            loop.wait_for_class_archive(archive)
            figures["cold_checked"].append(loop.time("run", CHECKED, fresh=True))
            print(
                f"  round {i + 1}: today {figures['today'][-1]:.1f} s, checked {figures['checked'][-1]:.1f} s,"
                f" cold {figures['cold'][-1]:.1f} s, cold checked {figures['cold_checked'][-1]:.1f} s",
                flush=True,
            )
        for _ in range(args.repeat):
            figures["warm"].append(loop.time("run", EXAMPLE, fresh=True))
        loop.time("validate")  # the file cache
        figures["validate"] = [loop.time("validate") for _ in range(max(args.repeat, 5))]
        show_note = ""
        if loop.has("show"):
            figures["show"] = [loop.time("show", "service_stats") for _ in range(max(args.repeat, 5))]
        else:
            show_note = "skipped: this Tributary has no `show` command yet"
    finally:
        loop.time("engine", "stop")
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(runtime, ignore_errors=True)

    today = statistics.median(figures["today"])
    print(f"load average at end:   {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print(f"{'figure':<46} {'median':>8}  {'target':>8}  {'met':<4} {'vs today':>9}  runs")
    rows = [
        ("today: embedded engine started per run", "today", None),
        ("checked: the same with 2 expectations", "checked", None),
        ("cold: first run, starts the warm engine", "cold", 12.0),
        ("cold checked: the same, with 2 expectations", "cold_checked", 12.0),
        ("warm: rerun through the running engine", "warm", 3.0),
        ("tributary validate (all examples)", "validate", 1.0),
        ("tributary show service_stats", "show", 1.0),
    ]
    for label, name, target in rows:
        samples = figures[name]
        if not samples:
            print(f"{label:<46} {show_note}")
            continue
        median = statistics.median(samples)
        strict = name in ("validate", "show")  # "< 1 s"; the run targets are "<= N s"
        met = "" if target is None else ("yes" if (median < target if strict else median <= target) else "NO")
        ratio = f"{today / median:.1f}x" if name in ("cold", "cold_checked", "warm") else ""
        if name == "checked":
            ratio = f"{median / today:.2f}x ({'met' if median / today <= 1.2 else 'MISSED'} <= 1.2x)"
        shown_target = "" if target is None else f"{'<' if strict else '<='} {target:g} s"
        print(f"{label:<46} {median:>6.2f} s  {shown_target:>8}  {met:<4} {ratio:>9}  {', '.join(f'{s:.2f}' for s in samples)}")
    if not args.no_class_archive:  # the published figures are those of the default setting
        for name, figure in (
            ("today", "embedded"),
            ("cold", "first_run"),
            ("cold_checked", "first_checked_run"),
            ("warm", "warm_rerun"),
            ("validate", "validate"),
            ("show", "show"),
        ):
            if figures[name]:
                record(f"loop.{figure}", statistics.median(figures[name]))
        record("loop.embedded_checked", statistics.median(figures["checked"]) / today)
        if not had_archive:
            record("loop.very_first_engine", figures["cold"][0])


if __name__ == "__main__":
    main()
