"""`tributary watch PIPELINE`: validate and rerun a pipeline whenever one of its files changes, in
one SparkSession kept warm between reruns, printing what each run made.

An analyst's loop is edit, run, look. Starting Spark is most of a small run's time, so the session
is started once, at the first run, and every rerun uses it (nothing here stops it; the CLI does,
when watching ends). Each cycle:

1. compile the pipeline (what `validate` checks, no JVM): a mistake is printed with its file and
   line, and watching goes on until the next change;
2. run it: with `--limit N`, a try over each source's first N rows into the scratch warehouse
   (framework.plan.model.Sample); without, a real run, as `tributary run` would. A streaming
   pipeline is watched as tries only: rerunning a stream after its SQL changed would meet its
   checkpoints;
3. print the run's summary and the first rows of each output; a failed run is printed in one
   line, and watching goes on.

What is watched: every file under pipelines/, sql/ and udfs/, the profile's file, and the
pipeline's local file sources (a new or changed data file reruns it too). Changes are found by
polling modification times and sizes every half second: no dependency, and it works where file
system events do not arrive (network and container mounts); a project holds tens of files, so a
poll is a few hundred stat calls. A change is acted on once the files have stood still for one
poll, so an editor's save in several writes makes one rerun. Ctrl-C stops watching; a run it
interrupts leaves every table at its previous version.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from framework.display import for_terminal, plain
from framework.errors import BadInput, Problem, TributaryError

if TYPE_CHECKING:
    from framework.compiler import CompiledPipeline
    from framework.engine.results import RunResult
    from framework.project import Project
    from framework.project_context import ProjectContext

POLL_S = 0.5
_WATCHED_FOLDERS = ("pipelines", "sql", "udfs")
_SKIPPED = ("__pycache__", ".ipynb_checkpoints")


@dataclass
class Cycle:
    """What one validate-and-run cycle did."""

    number: int
    changed: list[str]  # the files whose change started it (none for the first)
    result: RunResult | None = None  # the run, when it ran and finished
    error: TributaryError | None = None  # bad input or a failed run


@dataclass
class Watch:
    """Watch one pipeline of a project; `run()` loops until Ctrl-C, `stop` or `max_cycles`."""

    project: Project
    pipeline: str  # as the user named it
    console: Console
    profile_name: str | None = None
    variables: list[str] = field(default_factory=list)
    select: str | None = None
    interval: str | None = None  # --interval START/END, as text: the context reads it in the schedule's timezone
    limit: int | None = None
    show: int = 5
    max_cycles: int | None = None
    poll_s: float = POLL_S
    stop: threading.Event = field(default_factory=threading.Event)
    after_cycle: Callable[[Cycle], None] | None = None  # tests follow the cycles here
    spark: Any = None  # the one session, started at the first run
    _sources: list[str] = field(default_factory=list)  # the last good compile's local file sources
    _running: bool = False  # a run is under way (what Ctrl-C interrupts)

    def check(self) -> None:
        """Mistakes no edit of the watched files is likely to fix, as bad input before watching
        starts: an unknown pipeline; a streaming pipeline without --limit."""
        from framework.spec.loader import load_pipeline

        path = self.project.pipeline_path(self.pipeline)
        try:
            spec = load_pipeline(path, self.project.relative(path)).spec
        except BadInput:
            return  # the first cycle prints it, and the next edit may fix it
        if spec.mode == "streaming" and self.limit is None:
            raise BadInput(self._stream_needs_limit(spec.name))

    def _stream_needs_limit(self, name: str) -> Problem:
        return Problem(
            f"{name} is a streaming pipeline: watch reruns it as tries over the first rows of its sources",
            hint=f"add --limit N, e.g. tributary watch {self.pipeline} --limit 100",
        )

    def run(self) -> int:
        """Watch until stopped; the exit code (0: stopped by the user or after max_cycles)."""
        changed: list[str] = []
        cycles = 0
        try:
            while not self.stop.is_set():
                cycles += 1
                watched = list(self._sources)
                before = self._snapshot()
                cycle = self._cycle(cycles, changed)
                if self._sources != watched:  # files the compile found to watch: from now on
                    before = {**self._snapshot(), **before}
                if self.after_cycle is not None:
                    self.after_cycle(cycle)
                if self.max_cycles is not None and cycles >= self.max_cycles:
                    break
                self.console.print(f"[dim]watching {self._what()} for changes (Ctrl-C to stop)[/]")
                changed = self._wait_for_change(before)
        except KeyboardInterrupt:
            note = "; the run it interrupted left every table at its previous version" if self._running else ""
            self.console.print(f"stopped watching{note}")
        return 0

    def _cycle(self, number: int, changed: list[str]) -> Cycle:
        cycle = Cycle(number, changed)
        if changed:
            shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
            self.console.rule(plain(f"changed: {shown}"), align="left", style="cyan")
        try:
            compiled, about = self._compile()
            cycle.result = self._run(compiled, about)
        except TributaryError as e:
            cycle.error = e
            self._print_error(e)
        except Exception as e:  # noqa: BLE001 - watching outlives a bug in one run; the next change tries again
            cycle.error = TributaryError(f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
            self._print_error(cycle.error)
        return cycle

    def _compile(self) -> tuple[CompiledPipeline, ProjectContext]:
        """The pipeline compiled as `tributary validate` would, in a context built anew each cycle
        (the profile's file is watched too)."""
        from framework.io.sample import source_files
        from framework.project_context import ProjectContext
        from framework.spec.models import DeltaSource

        about = ProjectContext.load(
            self.pipeline,
            profile=self.profile_name,
            variables=self.variables,
            select=self.select,
            interval=self.interval,
            start=self.project.root,
        )
        compiled = about.compiled
        if compiled.spec.mode == "streaming" and self.limit is None:
            raise BadInput(self._stream_needs_limit(compiled.name))
        plan = about.plan(limit=self.limit)
        self._sources = [
            f
            for source in plan.sources
            if not isinstance(source.spec, DeltaSource) and "://" not in source.location
            for f in [source.location, *source_files(source.location)]
        ]
        return compiled, about

    def _run(self, compiled: CompiledPipeline, about: ProjectContext) -> RunResult:
        from framework.display import arrow_table, run_summary
        from framework.engine.runner import show_rows
        from framework.engine.session import spark_session
        from framework.io.delta import local_store

        profile = about.profile
        if self.spark is None:
            with self.console.status("starting Spark (once: reruns use the same session)"):
                self.spark = spark_session(profile)
        started = time.perf_counter()
        self._running = True
        try:
            with self.console.status(
                plain(f"running {compiled.name}" + (f" on the first {self.limit:,} rows" if self.limit else ""))
            ):
                result = about.run(compiled, spark=self.spark, limit=self.limit)
        finally:
            self._running = False
        self.console.print(run_summary(result))
        if self.show and result.store == "delta-rs":
            store = local_store(profile.storage_options)
            for output in result.outputs:
                if not output.name.startswith("_"):
                    rows = show_rows(store, output.table, self.show)
                    self.console.print(arrow_table(f"{output.name} (first {self.show} rows)", rows))
        self.console.print(f"[green]rerun done in {time.perf_counter() - started:.1f}s[/]")
        return result

    def _print_error(self, error: TributaryError) -> None:
        label = "invalid" if isinstance(error, BadInput) else "run failed"
        self.console.print(f"[bold red]{label}:[/]", end="\n" if "\n" in str(error) else " ")
        self.console.print(for_terminal(str(error), lines=True), markup=False, soft_wrap=True, highlight=False)

    def _what(self) -> str:
        return "pipelines/, sql/, udfs/, the profile" + (" and the pipeline's data" if self._sources else "")

    def _wait_for_change(self, before: dict[str, tuple[int, int]]) -> list[str]:
        """Poll until the watched files differ from `before` and then stand still for one poll."""
        while not self.stop.is_set():
            time.sleep(self.poll_s)
            now = self._snapshot()
            if now == before:
                continue
            while not self.stop.is_set():  # let the writer finish
                time.sleep(self.poll_s)
                settled = self._snapshot()
                if settled == now:
                    break
                now = settled
            return sorted(p for p in before.keys() | now.keys() if before.get(p) != now.get(p))
        return []

    def _snapshot(self) -> dict[str, tuple[int, int]]:
        """(modification time, size) of every watched file, by its path relative to the project."""
        paths: list[Path] = []
        for folder in _WATCHED_FOLDERS:
            root = self.project.root / folder
            for current, subfolders, names in os.walk(root):
                subfolders[:] = [d for d in subfolders if not d.startswith(".") and d not in _SKIPPED]
                paths += [Path(current) / n for n in names if not n.startswith(".") and not n.endswith((".pyc", "~"))]
        name = self.profile_name or os.environ.get("TRIBUTARY_PROFILE") or "local"
        paths.append(self.project.configs_dir / f"{name}.yaml")
        paths += [Path(p) for p in self._sources]
        found: dict[str, tuple[int, int]] = {}
        for path in paths:
            try:
                stat = path.stat()
            except OSError:
                continue  # gone: its absence is the change
            found[self.project.relative(path)] = (stat.st_mtime_ns, stat.st_size)
        return found
