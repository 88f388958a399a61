"""The batch runner: compiled pipeline → DataFrames per step → staged outputs → Delta commits.

Order of work, so that a failure changes nothing:
1. check inputs before Spark starts (missing paths are bad input);
2. plan: read sources, build each step's DataFrame (analysis errors are found here, per step),
   check each output against its table (schema, partition and merge columns);
3. stage: compute every output into Parquet under the warehouse staging folder;
4. commit: each output in one Delta transaction; if one fails, the ones already committed are
   restored to their previous version.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from framework.compiler import CompiledPipeline
from framework.engine.events import EventLog
from framework.engine.lock import RunLock
from framework.errors import BadInput, Problem, RunFailed, TributaryError
from framework.io import staging as staging_files
from framework.io.delta_store import DeltaStore, StagedWrite, choose_store
from framework.io.locations import (
    EVENTS_TABLE,
    INTEGRATION_TABLE,
    LOCKS_DIR,
    QUALITY_TABLE,
    QUARANTINE_TABLE,
    STAGING_DIR,
    Warehouse,
    is_uri,
    resolve_location,
)
from framework.io.sources import SourceFrame, check_source_exists, read_source, source_location
from framework.observations import observed_count
from framework.operators import Rejected, StepContext, build_step, quarantine_shape
from framework.profiles import Profile
from framework.quality.evaluation import evaluable, evaluate_step, metrics_rows
from framework.quality.evaluation import record as record_integration
from framework.quality.gate import MASK, QualityGate
from framework.quality.results import record as record_quality
from framework.spec.models import DeltaSource, Output

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class Reporter(Protocol):
    """Progress callbacks (the CLI draws them; tests may ignore them)."""

    def update(self, kind: str, name: str, status: str, detail: str = "") -> None: ...


class _Silent:
    def update(self, kind: str, name: str, status: str, detail: str = "") -> None:
        pass


@dataclass
class StepResult:
    name: str
    kind: str
    status: str = "pending"
    rows: int | None = None
    plan_s: float = 0.0


@dataclass
class OutputResult:
    name: str
    step: str
    table: str
    mode: str
    status: str = "pending"  # written | skipped | failed | rolled back
    rows: int | None = None
    version: int | None = None
    previous_version: int | None = None
    duration_s: float = 0.0
    app_id: str = ""
    observed: dict[str, Any] = field(default_factory=dict)  # streaming: state rows, rates, executors


@dataclass
class RunResult:
    run_id: str
    pipeline: str
    status: str = "running"
    duration_s: float = 0.0
    store: str = ""
    steps: list[StepResult] = field(default_factory=list)
    outputs: list[OutputResult] = field(default_factory=list)
    quarantined: dict[str, int] = field(default_factory=dict)
    late: dict[str, int] = field(default_factory=dict)
    integration: list[Any] = field(default_factory=list)  # StepEvaluation of steps declaring truth:
    quality: list[Any] = field(default_factory=list)  # ExpectationResult of every expectation checked
    error: str | None = None


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


class BatchRunner:
    def __init__(
        self,
        compiled: CompiledPipeline,
        profile: Profile,
        *,
        full_refresh: bool = False,
        reporter: Reporter | None = None,
        spark: SparkSession | None = None,
    ):
        self.compiled = compiled
        self.profile = profile
        self.full_refresh = full_refresh
        self.reporter = reporter or _Silent()
        self.spark = spark
        self.warehouse = Warehouse.of(compiled.project, profile)
        self.run_id = new_run_id()
        self.result = RunResult(self.run_id, compiled.name)
        self._views: list[str] = []
        self._persisted: list[DataFrame] = []
        self._observations: dict[str, Any] = {}
        self.contexts: dict[str, StepContext] = {}
        self._rejected: list[Rejected] = []  # rows steps turned away (framework.operators.StepContext.quarantine)
        self.quality = QualityGate()
        self.result.quality = self.quality.results
        self._output_frames: dict[str, DataFrame] = {}  # outputs staging a frame of their own (expectations)
        self._split_quarantine: dict[str, tuple[str, str]] = {}  # output -> the (target, scope) whose drops it splits off

    # -- entry point -------------------------------------------------------------------------

    def run(self) -> RunResult:
        started = time.perf_counter()
        spec = self.compiled.spec
        needed = self._needed_nodes()
        locations = {
            name: source_location(self.compiled.project, self.warehouse, spec.sources[name])
            for name in spec.sources
            if name in needed
        }
        self._check_file_sources(locations)

        from framework.engine.session import spark_session

        spark = self.spark or spark_session(self.profile)
        store = choose_store(spark, self.profile.delta_writer, self.profile.storage_options)
        self.result.store = store.name
        events = EventLog(store, self.warehouse.internal(EVENTS_TABLE), self.run_id, spec.name)
        events.record(
            "run_start",
            status="running",
            details={
                "profile": self.profile.name,
                "writer": store.name,
                "select": self.compiled.selected,
                "outputs": self.compiled.selected_outputs(),
                "vars": self.compiled.variables,
            },
        )
        events.flush()
        lock = (
            RunLock(Path(self.warehouse.internal(f"{LOCKS_DIR}/{spec.name}.lock")), self.run_id)
            if self.warehouse.is_local()
            else None
        )
        try:
            if lock:
                lock.acquire()
            self._execute(spark, store, locations, needed)
            self.result.status = "ok"
        except BaseException as e:
            self.result.status = "failed"
            self.result.error = _one_line(e)
            raise _as_run_error(e) from (None if isinstance(e, TributaryError) else e)
        finally:
            if lock:
                lock.release()
            self.result.duration_s = time.perf_counter() - started
            self._record_quality(store)
            self._record_events(events)
            self._cleanup(spark)
        return self.result

    def _execute(self, spark: SparkSession, store: DeltaStore, locations: dict[str, str], needed: set[str]) -> None:
        """Batch: plan, stage every output, then commit them all (restoring on a failed commit)."""
        self._recover_interrupted_runs(store)
        staged: list[tuple[OutputResult, StagedWrite]] = []
        try:
            frames = self._plan(spark, store, locations, needed)
            targets = self._check_outputs(store, frames)
            staged = self._stage(store, frames, targets, locations)  # computes the checked frames' metrics too
            self.quality.check_rows(lambda name, status, detail: self.reporter.update("check", name, status, detail))
            staged += self._stage_quarantine(store)
            self._evaluate_integration(spark)
            self._commit(spark, store, staged)
            record_integration(
                store, self.warehouse.internal(INTEGRATION_TABLE), self.result.integration, self.run_id, self.compiled.name
            )
        except BaseException:
            for _, write in staged:
                _quietly(lambda w=write: store.discard(w))
            raise

    def plan_frames(self, spark: SparkSession) -> dict[str, DataFrame]:
        """Static DataFrames of every needed source and step, without writing anything (the steps'
        contexts stay in `contexts`, e.g. for evaluating them)."""
        needed = self._needed_nodes()
        spec = self.compiled.spec
        locations = {
            n: source_location(self.compiled.project, self.warehouse, spec.sources[n]) for n in spec.sources if n in needed
        }
        self._check_file_sources(locations)
        store = choose_store(spark, self.profile.delta_writer, self.profile.storage_options)
        return self._plan(spark, store, locations, needed)

    def _recover_interrupted_runs(self, store: DeltaStore) -> None:
        """A run killed between two output commits left some outputs committed and others not.
        Under the lock no such run is still going, so its committed outputs are restored to their
        previous version and it is logged as interrupted. A killed run that committed every
        output (only its end was not logged) is logged as ok."""
        log = self.warehouse.internal(EVENTS_TABLE)
        rows = store.query(log, f"SELECT run_id, event, details FROM t WHERE pipeline = '{self.compiled.name}'").to_pylist()
        ended = {r["run_id"] for r in rows if r["event"] == "run_end"}
        interrupted = {r["run_id"]: r["details"] for r in rows if r["event"] == "run_start" and r["run_id"] not in ended}
        interrupted.pop(self.run_id, None)
        spec = self.compiled.spec
        for run_id, details in interrupted.items():
            planned = [o for o in json.loads(details or "{}").get("outputs", []) if o in spec.outputs]
            tables = {o: self._table_of(o) for o in planned}
            committed = [o for o, table in tables.items() if store.last_run_id(table) == run_id]
            closing = EventLog(store, log, run_id, spec.name)
            partial = bool(committed) and len(committed) < len(tables)
            for output in committed if partial else []:
                version = store.version(tables[output])
                store.restore(tables[output], version - 1 if version else None)
                closing.record("recovered", name=output, details={"restored_to": version - 1 if version else None})
                self.reporter.update("output", output, "recovered", f"undid run {run_id}'s partial commit")
            status = "interrupted" if partial or not committed else "ok"
            closing.record("run_end", status=status, error="the process ended before the run finished")
            closing.flush()

    def _table_of(self, output: str) -> str:
        spec = self.compiled.spec.outputs[output]
        return resolve_location(self.compiled.project, self.warehouse, spec.name or output if not spec.path else None, spec.path)

    # -- 1. inputs ---------------------------------------------------------------------------

    def _needed_nodes(self) -> set[str]:
        graph = self.compiled.graph
        needed: set[str] = set()
        for step in self.compiled.selected:
            needed.add(step)
            needed |= graph.upstream(step)
        return needed

    def _check_file_sources(self, locations: dict[str, str]) -> None:
        from framework.io.delta_rs import DeltaRsStore

        problems = []
        local_store = DeltaRsStore(self.profile.storage_options)
        for name, location in locations.items():
            spec = self.compiled.spec.sources[name]
            if isinstance(spec, DeltaSource) and (is_uri(location) or self.profile.delta_writer == "spark"):
                continue
            try:
                check_source_exists(name, location, spec, local_store)
            except BadInput as e:
                problems += e.problems
        if problems:
            raise BadInput(*problems)

    # -- 2. plan -----------------------------------------------------------------------------

    def _plan(self, spark: SparkSession, store: DeltaStore, locations: dict[str, str], needed: set[str]) -> dict[str, Any]:
        spec, graph = self.compiled.spec, self.compiled.graph
        self._sources: dict[str, SourceFrame] = {}
        frames: dict[str, DataFrame] = {}
        consumers = {n: graph.readers_count(n, needed) for n in needed}
        for out in self.compiled.selected_outputs():
            consumers[spec.output_step(out)] = consumers.get(spec.output_step(out), 0) + 1
        for node in graph.order():
            if node not in needed:
                continue
            kind = graph.kinds[node]
            began = time.perf_counter()
            checked, direct = False, None
            if kind == "source":
                source = self._read_source(spark, node, locations[node], store)
                self._sources[node] = source
                frame = source.df
            else:
                self.reporter.update("step", node, "planning")
                step = spec.steps[node]
                context = StepContext(
                    spark, node, step, {i: frames[i] for i in graph.inputs[node]}, self.compiled.sql.get(node), self._rejected
                )
                self.contexts[node] = context
                built = self._build_step(kind, context)
                checked = any(e.on == "rows" for e in step.expectations)
                if step.expectations:
                    direct = self._direct_output(node, needed)
                    built = self._attach_expectations(
                        ("steps", node), built, step.expectations, split=direct is not None, shared=consumers.get(node, 0) > 1
                    )
                frame = self._instrument(node, built)
                if MASK in frame.columns:
                    frame = self._split_masked(node, frame, direct)
                self.result.steps.append(StepResult(node, kind, "planned", plan_s=time.perf_counter() - began))
                self.reporter.update("step", node, "planned")
            if consumers.get(node, 0) > 1 and kind != "source" and not checked:
                frame = self._share(frame)
            frames[node] = frame
            frame.createOrReplaceTempView(node)
            self._views.append(node)
        for name in self.compiled.selected_outputs():
            output = spec.outputs[name]
            if output.expectations:
                checked = self._attach_expectations(
                    ("outputs", name), frames[spec.output_step(name)], output.expectations, split=True
                )
                self._output_frames[name] = checked
                if MASK in checked.columns:
                    self._split_quarantine[name] = (name, "output")
        return frames

    def _direct_output(self, step: str, needed: set[str]) -> str | None:
        """The output that stages the step's rows as they are, when it is their only reader."""
        spec = self.compiled.spec
        readers = [o for o in self.compiled.selected_outputs() if spec.output_step(o) == step]
        if self.compiled.graph.readers_count(step, needed) or len(readers) != 1:
            return None
        return None if any(e.on == "rows" for e in spec.outputs[readers[0]].expectations) else readers[0]

    def _split_masked(self, step: str, frame: DataFrame, direct: str | None) -> DataFrame:
        """A step's rows minus those its drop expectations masked. They go to quarantine: split off
        by the write of the output that stages them (one pass), else read again from the cache."""
        from pyspark.sql import functions as F

        masked = F.col(MASK).isNotNull()
        if direct is not None:
            self._output_frames[direct] = frame
            self._split_quarantine[direct] = (step, "step")
        else:
            rows = self.quality.quarantined(step, "step", frame.where(masked))
            self._rejected.append(Rejected(step, rows, self.quality.observation(step, "step")))
        return frame.where(~masked).drop(MASK)

    def _attach_expectations(
        self, at: tuple[str, str], frame: DataFrame, specs: list[Any], split: bool, shared: bool = False
    ) -> DataFrame:
        """The frame with its expectations attached (framework.quality.gate.QualityGate.attach)."""
        missing = QualityGate.missing(frame, specs)
        if missing:
            raise BadInput(
                *[
                    self.compiled.loaded.problem(
                        f"{at[0][:-1]} '{at[1]}': {spec.name} names column(s) {columns} that it does not have",
                        (*at, "expectations", i),
                        hint=f"its columns: {', '.join(frame.columns)}",
                    )
                    for i, spec, columns in missing
                ]
            )
        return self.quality.attach(at[1], at[0][:-1], frame, list(specs), self._share, split=split, shared=shared)

    def _read_source(self, spark: SparkSession, name: str, location: str, store: DeltaStore) -> SourceFrame:
        return read_source(spark, name, self.compiled.spec.sources[name], location, store)

    def _build_step(self, kind: str, context: StepContext) -> DataFrame:
        return build_step(kind, context)

    def _instrument(self, step: str, frame: DataFrame) -> DataFrame:
        """Count the step's rows as a side effect of the run (no extra Spark job); rows a drop
        expectation masked are not the step's."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        observation = Observation(f"tributary_step_{step}")
        self._observations[step] = observation
        counted = F.count_if(F.col(MASK).isNull()) if MASK in frame.columns else F.count(F.lit(1))
        return frame.observe(observation, counted.alias("rows"))

    def _share(self, frame: DataFrame) -> DataFrame:
        """A step read by several steps or outputs is computed once."""
        frame = frame.persist()
        self._persisted.append(frame)
        return frame

    def _produced(self, step: str, frames: dict[str, Any]) -> DataFrame:
        """A frame with the columns `step` writes to its outputs."""
        return frames[step]

    def _check_outputs(self, store: DeltaStore, frames: dict[str, Any]) -> dict[str, tuple[Output, str]]:
        spec = self.compiled.spec
        targets: dict[str, tuple[Output, str]] = {}
        problems: list[Problem] = []
        for name in self.compiled.selected_outputs():
            output = spec.outputs[name]
            step = spec.output_step(name)
            table = self._table_of(name)
            produced = self._produced(step, frames)
            columns = {c.lower() for c in produced.columns}
            for kind, wanted in (("partition_by", output.partition_by), ("keys", output.keys)):
                missing = [c for c in wanted if c.lower() not in columns]
                if missing:
                    problems.append(
                        self.compiled.loaded.problem(
                            f"output '{name}': {kind} column(s) {missing} not in step '{step}'",
                            ("outputs", name, kind),
                            hint=f"step '{step}' has columns: {', '.join(produced.columns)}",
                        )
                    )
            if output.mode in ("append", "merge") and not self.full_refresh:
                existing = store.schema(table)
                if existing is not None:
                    problem = _schema_problem(name, table, existing, produced.schema)
                    if problem:
                        problems.append(
                            self.compiled.loaded.problem(
                                problem,
                                ("outputs", name),
                                hint="change the step to produce the table's columns, or rebuild the table with --full-refresh",
                            )
                        )
            targets[name] = (output, table)
        if problems:
            raise BadInput(*problems)
        return targets

    # -- 3. stage ----------------------------------------------------------------------------

    def _stage(
        self, store: DeltaStore, frames: dict[str, Any], targets: dict[str, tuple[Output, str]], locations: dict[str, str]
    ) -> list[tuple[OutputResult, StagedWrite]]:
        run_key = self._run_key(store, locations)
        staged = []
        for name, (output, table) in targets.items():
            step = self.compiled.spec.output_step(name)
            mode = "overwrite" if self.full_refresh else output.mode
            result = OutputResult(name, step, table, mode, previous_version=store.version(table))
            self.result.outputs.append(result)
            result.app_id = self._app_id(name, mode, run_key)
            if mode != "overwrite" and store.has_transaction(table, result.app_id):
                result.status, result.version = "skipped", result.previous_version
                self.reporter.update("output", name, "skipped", "already written by an identical run")
                continue
            self.reporter.update("output", name, "computing")
            began = time.perf_counter()
            frame = self._output_frames.get(name, frames[step])
            split = MASK if MASK in frame.columns else None
            existing = store.schema(table) if mode == "append" else None
            if existing is not None:
                frame = frame.select(*[_match_column(frame.columns, f.name) for f in existing.fields], *([MASK] if split else []))
            write = store.stage(frame, name, table, self._staging(name), list(output.partition_by), split_by=split)
            if split:
                target, scope = self._split_quarantine[name]
                rows = self.quality.quarantined(target, scope, store.read_split_off(frame.sparkSession, write, frame.schema))
                source = target if scope == "step" else f"output:{target}"  # as the quarantine names it
                self._rejected.append(Rejected(source, rows, known=write.split_rows))
            result.rows, result.duration_s = write.rows, time.perf_counter() - began
            if mode == "merge":
                _check_unique_keys(frame.sparkSession, write, output.keys, name)
            staged.append((result, write))
            self.reporter.update("output", name, "staged", f"{write.rows:,} rows")
        self._collect_step_rows()
        return staged

    def _stage_quarantine(self, store: DeltaStore) -> list[tuple[OutputResult, StagedWrite]]:
        """Malformed source records and rows steps turned away go to <warehouse>/_tributary/quarantine
        with the reason. Step rows are only recomputed when the run counted some."""
        from pyspark.sql import functions as F

        bad = [(name, s) for name, s in self._sources.items() if (s.bad_count() or 0) > 0]
        rejected = [r for r in self._rejected if (r.count() or 0) > 0]
        if not bad and not rejected:
            return []
        frames = [
            s.bad_rows.select(F.lit(name).alias("source"), "file", "record", "reason")  # type: ignore[union-attr]
            for name, s in bad
        ]
        frames += [quarantine_shape(r.rows, r.step) for r in rejected]
        frame = frames[0]
        for other in frames[1:]:
            frame = frame.unionByName(other)
        frame = frame.select(
            F.lit(self.run_id).alias("run_id"),
            F.lit(self.compiled.name).alias("pipeline"),
            "source",
            "file",
            "record",
            "reason",
            F.current_timestamp().alias("quarantined_at"),
        )
        table = self.warehouse.internal(QUARANTINE_TABLE)
        result = OutputResult("_quarantine", "-", table, "append", previous_version=store.version(table))
        result.app_id = f"tributary/{self.compiled.name}/_quarantine/{self.run_id}"
        write = store.stage(frame, result.name, table, self._staging(result.name), [])
        result.rows = write.rows
        self.result.quarantined = {name: s.bad_count() or 0 for name, s in bad}
        for r in rejected:
            self.result.quarantined[r.step] = self.result.quarantined.get(r.step, 0) + (r.count() or 0)
        self.result.outputs.append(result)
        self.reporter.update("output", result.name, "staged", f"{write.rows:,} quarantined rows")
        return [(result, write)]

    def _evaluate_integration(self, spark: SparkSession) -> None:
        """Completeness and correctness of the steps that declare ground truth (truth:), and the
        expectations put on those figures (before anything is committed)."""
        for name in self.compiled.selected:
            context = self.contexts.get(name)
            if context is not None and evaluable(context.spec):
                self.reporter.update("step", name, "evaluating")
                evaluation = evaluate_step(context)
                self.result.integration.append(evaluation)
                self.reporter.update("step", name, "evaluated")
                figures = metrics_rows([evaluation], self.run_id, self.compiled.name)
                self.quality.check_integration(spark, name, figures, list(context.spec.expectations))

    # -- 4. commit ---------------------------------------------------------------------------

    def _commit(self, spark: SparkSession, store: DeltaStore, staged: list[tuple[OutputResult, StagedWrite]]) -> None:
        committed: list[OutputResult] = []
        for result, write in staged:
            spec_output = self.compiled.spec.outputs.get(result.name)
            keys = list(spec_output.keys) if spec_output else []
            try:
                self.reporter.update("output", result.name, "committing")
                outcome = store.commit(spark, write, result.mode, keys, result.app_id, run_id=self.run_id)
            except BaseException:
                result.status = "failed"
                for done in reversed(committed):
                    _quietly(lambda d=done: store.restore(d.table, d.previous_version))
                    done.status = "rolled back"
                raise
            result.version = outcome.version
            result.status = "skipped" if outcome.skipped else "written"
            committed.append(result)
            self.reporter.update("output", result.name, result.status, f"version {outcome.version}")

    # -- helpers -----------------------------------------------------------------------------

    def _staging(self, output: str) -> str:
        return self.warehouse.internal(f"{STAGING_DIR}/{self.run_id}/{output}")

    def _app_id(self, output: str, mode: str, run_key: str) -> str:
        # Overwrite is idempotent by itself; its id is unique so an old run never masks a newer table.
        key = self.run_id if mode == "overwrite" else run_key
        return f"tributary/{self.compiled.name}/{output}/{key}"

    def _run_key(self, store: DeltaStore, locations: dict[str, str]) -> str:
        """Identifies 'the same batch run': same spec, rendered SQL, vars and input files/versions."""
        spec = self.compiled.spec
        fingerprint: dict[str, Any] = {
            "spec": spec.model_dump(mode="json", by_alias=True),
            "sql": {k: v.text for k, v in sorted(self.compiled.sql.items())},
            "vars": self.compiled.variables,
            "inputs": {},
        }
        for name, location in sorted(locations.items()):
            source = spec.sources[name]
            if isinstance(source, DeltaSource):
                fingerprint["inputs"][name] = (
                    source.version if source.version is not None else str(source.timestamp or store.version(location))
                )
            else:
                fingerprint["inputs"][name] = _file_fingerprint(location)
        digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()
        return digest[:20]

    def _collect_step_rows(self) -> None:
        for step in self.result.steps:
            rows = observed_count(self._observations.get(step.name), "rows")
            if rows is not None:
                step.rows = rows
                step.status = "ok"
                self.reporter.update("step", step.name, "ok", f"{step.rows:,} rows")

    def _record_quality(self, store: DeltaStore | None) -> None:
        """Every expectation's outcome, passed or failed, goes to <warehouse>/_tributary/quality."""
        if store is None or not self.quality.results:
            return
        try:
            record_quality(store, self.warehouse.internal(QUALITY_TABLE), self.quality.results, self.run_id, self.compiled.name)
        except Exception as e:  # noqa: BLE001 - as with the run log: the run's own error matters more
            if self.result.status == "ok":
                self.result.status = "failed"
                raise RunFailed(f"the run finished but its quality results could not be written: {_one_line(e)}") from e

    def _record_events(self, events: EventLog) -> None:
        for step in self.result.steps:
            events.record(
                "step_end",
                name=step.name,
                status=step.status,
                rows=step.rows,
                duration_s=step.plan_s,
                details={"kind": step.kind},
            )
        for out in self.result.outputs:
            events.record(
                "output_end",
                name=out.name,
                status=out.status,
                rows=out.rows,
                version=out.version,
                duration_s=out.duration_s,
                details={"table": out.table, "mode": out.mode, "previous_version": out.previous_version, **out.observed},
            )
        for source, count in self.result.quarantined.items():
            events.record("quarantine", name=source, status="ok", rows=count)
        for source, count in self.result.late.items():
            events.record("late_rows", name=source, status="ok", rows=count)
        events.record("run_end", status=self.result.status, duration_s=self.result.duration_s, error=self.result.error)
        try:
            events.flush()
        except Exception as e:  # noqa: BLE001 - the run's own outcome matters more than its log line
            if self.result.status == "ok":
                raise RunFailed(f"the run finished but its events could not be written: {_one_line(e)}") from e

    def _cleanup(self, spark: SparkSession) -> None:
        for view in self._views:
            _quietly(lambda v=view: spark.catalog.dropTempView(v))
        for frame in self._persisted:
            _quietly(frame.unpersist)
        _quietly(lambda: staging_files.remove_tree(self.warehouse.internal(f"{STAGING_DIR}/{self.run_id}")))


def _schema_problem(output: str, table: str, existing: Any, produced: Any) -> str | None:
    have = {f.name.lower(): f.dataType.simpleString() for f in existing.fields}
    new = {f.name.lower(): f.dataType.simpleString() for f in produced.fields}
    missing = [c for c in have if c not in new]
    extra = [c for c in new if c not in have]
    changed = [f"{c} ({have[c]} → {new[c]})" for c in have if c in new and have[c] != new[c]]
    if not (missing or extra or changed):
        return None
    parts = []
    if missing:
        parts.append(f"missing columns {missing}")
    if extra:
        parts.append(f"new columns {extra}")
    if changed:
        parts.append(f"changed types {changed}")
    return f"output '{output}': the step's columns do not match the table at {table}: " + "; ".join(parts)


def _match_column(columns: list[str], name: str) -> str:
    for c in columns:
        if c.lower() == name.lower():
            return f"`{c}`"
    return f"`{name}`"


def _check_unique_keys(spark: SparkSession, write: StagedWrite, keys: list[str], output: str) -> None:
    if not write.files:
        return
    reader = spark.read.schema(write.schema)
    if write.partition_by:
        reader = reader.option("basePath", write.staging)
    dupes = reader.parquet(write.staging).groupBy(*keys).count().where("count > 1").limit(3).collect()
    if dupes:
        sample = ", ".join(str({k: row[k] for k in keys}) for row in dupes)
        raise RunFailed(f"output '{output}': merge keys {keys} are not unique in the new rows (e.g. {sample})")


def _file_fingerprint(location: str) -> Any:
    try:
        fs, root = staging_files.filesystem(location)
        import glob as globbing

        import pyarrow.fs as pafs

        paths = globbing.glob(root) if not is_uri(location) and globbing.has_magic(root) else [root]
        entries = []
        for path in paths:
            info = fs.get_file_info(path)
            infos = fs.get_file_info(pafs.FileSelector(path, recursive=True)) if info.type == pafs.FileType.Directory else [info]
            entries += [(i.path, i.size, i.mtime_ns) for i in infos if i.type == pafs.FileType.File]
        return sorted(entries)
    except Exception:  # noqa: BLE001 - unlistable input: never treat two runs as the same
        return uuid.uuid4().hex


def _one_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text if isinstance(error, TributaryError) else f"{type(error).__name__}: {text.splitlines()[0]}"


def _as_run_error(error: BaseException) -> BaseException:
    if isinstance(error, (TributaryError, KeyboardInterrupt)):
        return error
    return RunFailed(_one_line(error))


def _quietly(fn: Any) -> None:
    """Best-effort cleanup after the real error: its own failure must not hide that error."""
    with contextlib.suppress(Exception):
        fn()


def show_rows(store: DeltaStore, table: str, limit: int) -> pa.Table:
    return store.query(table, f"SELECT * FROM t LIMIT {int(limit)}")
