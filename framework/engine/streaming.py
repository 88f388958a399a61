"""The streaming runner: the same plan on Structured Streaming, one query per output.

- `tributary run` processes everything new and stops (trigger availableNow): the mode for
  scheduled incremental runs. `--continuous` runs every `trigger.processing_time` until Ctrl-C
  or SIGTERM, then stops its queries cleanly.
- Each output commits through foreachBatch with (app id, batch id) transactions, so a batch that
  Spark replays after a crash is skipped, not appended twice (framework.io.stream_sink).
- Checkpoints live under <warehouse>/_tributary/checkpoints/<pipeline>/<output>. The app id
  carries the checkpoint's generation, so after --full-refresh batch ids start again cleanly.
- Malformed records go to the quarantine table and rows later than their source's watermark to
  the late-rows table, each through its own exactly-once query.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from framework.engine.runner import BatchRunner, OutputResult
from framework.errors import BadInput, RunFailed
from framework.io import staging as staging_files
from framework.io.checkpoint_audit import AuditedSource, CheckpointAuditor
from framework.io.delta_store import DeltaStore
from framework.io.late_rows import LateRowMonitor
from framework.io.locations import CHECKPOINTS_DIR, LATE_ROWS_TABLE, QUARANTINE_TABLE, STAGING_DIR, join
from framework.io.parquet_footers import BatchFooters
from framework.io.sources import SourceFrame, read_source_stream
from framework.io.stream_sink import ExactlyOnceDeltaSink
from framework.operators import StepContext, build_step
from framework.operators.count_join_stream import CountJoinStream
from framework.operators.swa import check_swa
from framework.operators.swa_stream import SwaStream
from framework.spec.durations import spark_interval
from framework.spec.steps import JoinStep, SwaStep, TumblingStep

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


class StreamingRunner(BatchRunner):
    def __init__(self, *args: Any, continuous: bool = False, stop: threading.Event | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.continuous = continuous
        self.stop = stop or threading.Event()
        self._queries: list[tuple[str, StreamingQuery, ExactlyOnceDeltaSink, OutputResult | None]] = []
        self._micro_batch: dict[str, CountJoinStream | SwaStream] = {}
        self._static_results: dict[str, DataFrame] = {}  # a per-batch step -> its result on empty frames
        self._auditors: dict[str, CheckpointAuditor] = {}
        self._prepared: dict[str, SwaStream] = {}  # output -> its SWA operator (side sinks, figures)

    # -- plan hooks: streams instead of static frames ------------------------------------------

    def _read_source(self, spark: SparkSession, name: str, location: str, store: DeltaStore) -> SourceFrame:
        return read_source_stream(spark, name, self.compiled.spec.sources[name], location)

    def _build_step(self, kind: str, context: StepContext) -> DataFrame:
        """Steps that keep their own state across micro-batches (a count-window join, SWA) run in
        their output's sink; here their inputs are only checked on empty frames, and the step
        becomes the stream the sink reads (framework.operators.count_join_stream, swa_stream)."""
        spec = context.spec
        streaming = any(f.isStreaming for f in context.inputs.values())
        per_batch = (isinstance(spec, JoinStep) and spec.join.last is not None) or isinstance(spec, SwaStep)
        if isinstance(spec, TumblingStep) and streaming:
            raise BadInput(
                self.compiled.loaded.problem(
                    f"step '{context.name}': the tumbling baseline runs in batch pipelines only",
                    ("steps", context.name),
                    hint="run it with mode: batch (e.g. in a second pipeline over the same files), or use swa:",
                )
            )
        if not (per_batch and streaming):
            return build_step(kind, context)
        readers = [s for s in self.compiled.graph.steps if context.name in self.compiled.graph.inputs.get(s, ())]
        if readers:
            raise BadInput(
                self.compiled.loaded.problem(
                    f"step '{readers[0]}' reads the {kind} step '{context.name}'; in streaming such a step feeds outputs directly",
                    ("steps", readers[0]),
                    hint="write it to an output and read that table in another pipeline",
                )
            )
        static = StepContext(context.spark, context.name, spec, {n: _static_twin(f) for n, f in context.inputs.items()})
        if isinstance(spec, SwaStep):
            self._static_results[context.name] = check_swa(static)
            sources = tuple(self._upstream_sources(spec.swa.input))
            delay = self._delay(spec.swa.input)
            footers = None  # the checkpoint is the output's, set in _prepare
            if self._reads_parquet_unchanged(spec.swa.input, context.inputs[spec.swa.input], spec.swa.event_time):
                footers = BatchFooters("", spec.swa.event_time)
            self._micro_batch[context.name] = SwaStream(
                context.name, spec, "", delay, self.run_id, self.compiled.name, sources=sources, footers=footers
            )
            return context.inputs[spec.swa.input]
        self._static_results[context.name] = build_step(kind, static)
        operator = CountJoinStream(context.name, spec, "", self._delay(spec.join.left), self._delay(spec.join.right))
        self._micro_batch[context.name] = operator
        return operator.tag(context.inputs[spec.join.left], context.inputs[spec.join.right])

    def _produced(self, step: str, frames: dict[str, DataFrame]) -> DataFrame:
        """A per-batch step's stream is its input (the sink runs the step): its columns are those
        of the step run on empty frames."""
        return self._static_results.get(step, frames[step])

    def _reads_parquet_unchanged(self, node: str, frame: DataFrame, event_time: str) -> bool:
        """Whether every row of `node` is a row of a Parquet file source with its event time as
        the file holds it (sources and unions only), so the files' footers know the newest."""
        from pyspark.sql.types import TimestampType

        from framework.operators.columns import field_of
        from framework.spec.models import FileSource

        graph, sources = self.compiled.graph, self.compiled.spec.sources
        for upstream in {node} | graph.upstream(node):
            kind = graph.kinds.get(upstream)
            if kind == "source":
                spec = sources[upstream]
                if not (isinstance(spec, FileSource) and spec.format == "parquet"):
                    return False
            elif kind != "union":
                return False
        column = field_of(frame, event_time)
        return column is not None and "." not in event_time and isinstance(column.dataType, TimestampType)

    def _upstream_sources(self, node: str) -> list[str]:
        graph = self.compiled.graph
        return sorted(n for n in ({node} | graph.upstream(node)) if graph.kinds.get(n) == "source")

    def _delay(self, node: str) -> float:
        upstream = self._upstream_sources(node)
        return max((self.compiled.spec.sources[n].watermark or 0.0) for n in upstream) if upstream else 0.0

    def _instrument(self, step: str, frame: DataFrame) -> DataFrame:
        return frame  # observations are batch-only; streaming rows are counted by the sinks

    def _collect_step_rows(self) -> None:
        for step in self.result.steps:
            step.status = "streamed"

    def _share(self, frame: DataFrame) -> DataFrame:
        return frame  # a stream cannot be cached; each output query reads its own

    # -- run -----------------------------------------------------------------------------------

    def _execute(self, spark: SparkSession, store: DeltaStore, locations: dict[str, str], needed: set[str]) -> None:
        self.spark_executors = _executors(spark)
        self._began = time.perf_counter()
        frames = self._plan(spark, store, locations, needed)
        self._check_streaming(spark, frames)
        targets = self._check_outputs(store, frames)
        if self.full_refresh:
            self._clear(targets)
        try:
            for name, (output, table) in targets.items():
                result = OutputResult(
                    name, self.compiled.spec.output_step(name), table, output.mode, previous_version=store.version(table)
                )
                self.result.outputs.append(result)
                prepare = self._prepare(store, name, result.step)
                sink = self._sink(store, name, table, output.mode, tuple(output.keys), tuple(output.partition_by), prepare)
                self._start(frames[result.step], name, sink, result)
            owners = {name: self.compiled.spec.output_step(name) for name in targets}
            self._start_audits(spark, store, locations, owners)
            self._wait()
            self._audit()
        finally:
            for _, query, _, _ in self._queries:
                if query.isActive:
                    query.stop()
        self._collect()
        self._collect_step_rows()

    def _prepare(self, store: DeltaStore, output: str, step: str) -> CountJoinStream | SwaStream | None:
        """The per-batch operator of an output that writes a stateful step, with its state folder
        and (SWA) the checkpoint its footers read and its own quarantine and late-row sinks,
        committed inside the output's batches."""
        operator = self._micro_batch.get(step)
        if operator is None:
            return None
        folder, _ = self._checkpoint(output)
        prepared = dataclasses.replace(operator, state_dir=folder + ".state")
        if isinstance(prepared, SwaStream):
            if prepared.footers is not None:
                prepared.footers = dataclasses.replace(prepared.footers, checkpoint=folder)
            quarantine = self.warehouse.internal(QUARANTINE_TABLE)
            prepared.quarantine = self._sink(store, f"_quarantine_{output}", quarantine, "append")
            prepared.late = self._sink(store, f"_late_{output}", self.warehouse.internal(LATE_ROWS_TABLE), "append")
            prepared.figures = {"state_rows_peak": 0, "open_windows_peak": 0}
            self._prepared[output] = prepared
        return prepared

    def _check_streaming(self, spark: SparkSession, frames: dict[str, DataFrame]) -> None:
        """Name the first step Spark cannot run as a stream, before any query starts."""
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import AnalysisException

        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        checker = getattr(getattr(jvm.org.apache.spark.sql.catalyst.analysis, "UnsupportedOperationChecker$"), "MODULE$")
        append = jvm.org.apache.spark.sql.streaming.OutputMode.Append()
        for step in self.compiled.graph.steps:
            frame = frames.get(step)
            if frame is None or not frame.isStreaming:
                continue
            try:
                checker.checkForStreaming(frame._jdf.queryExecution().analyzed(), append)
            except (Py4JJavaError, AnalysisException) as e:
                message = e.getMessage() if isinstance(e, AnalysisException) else e.java_exception.getMessage()
                reason = str(message).split(" SQLSTATE")[0]
                raise BadInput(
                    self.compiled.loaded.problem(
                        f"step '{step}' cannot run in streaming: {reason}",
                        ("steps", step),
                        hint="aggregate over event-time windows on a source with event_time and watermark, "
                        "or run the pipeline with mode: batch",
                    )
                ) from None

    def _clear(self, targets: dict[str, Any]) -> None:
        staging_files.remove_tree(self.warehouse.internal(f"{CHECKPOINTS_DIR}/{self.compiled.name}"))
        for _, table in targets.values():
            staging_files.remove_tree(table)

    def _checkpoint(self, name: str) -> tuple[str, str]:
        """The checkpoint folder of one query and its generation (new after a full refresh)."""
        folder = self.warehouse.internal(f"{CHECKPOINTS_DIR}/{self.compiled.name}/{name}")
        fs, path = staging_files.filesystem(folder + ".generation")
        if staging_files.exists(folder + ".generation") and staging_files.exists(folder):
            with fs.open_input_stream(path) as handle:
                return folder, handle.read().decode().strip()
        generation = uuid.uuid4().hex[:12]
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with fs.open_output_stream(path) as handle:
            handle.write(generation.encode())
        return folder, generation

    def _sink(
        self,
        store: DeltaStore,
        name: str,
        table: str,
        mode: str,
        keys: tuple[str, ...] = (),
        partition_by: tuple[str, ...] = (),
        prepare: Any = None,
    ) -> ExactlyOnceDeltaSink:
        folder, generation = self._checkpoint(name)
        sink = ExactlyOnceDeltaSink(
            store,
            name,
            table,
            app_id=f"tributary/{self.compiled.name}/{name}/{generation}",
            staging_root=self.warehouse.internal(f"{STAGING_DIR}/{self.run_id}/{name}"),
            checkpoint=folder,
            mode=mode,
            keys=keys,
            partition_by=partition_by,
            prepare=prepare,
            on_commit=lambda n, b, rows, v: self.reporter.update(
                "output", n, "written", f"batch {b}: {rows:,} rows → version {v}"
            ),
        )
        return sink

    def _start(self, frame: DataFrame, name: str, sink: ExactlyOnceDeltaSink, result: OutputResult | None) -> None:
        writer = frame.writeStream.foreachBatch(sink).option("checkpointLocation", sink.checkpoint)
        writer = writer.queryName(f"{self.compiled.name}__{name}")
        if self.continuous:
            writer = writer.trigger(processingTime=spark_interval(self.compiled.spec.trigger.processing_time))
        else:
            writer = writer.trigger(availableNow=True)
        self.reporter.update("output", name, "streaming")
        self._queries.append((name, writer.start(), sink, result))

    def _start_audits(self, spark: SparkSession, store: DeltaStore, locations: dict[str, str], owners: dict[str, str]) -> None:
        """Quarantine and late rows of every source. File sources are audited from the checkpoint
        of the first output query that reads them (framework.io.checkpoint_audit: no extra read
        unless something was malformed or dropped); Delta sources by a light audit query."""
        graph = self.compiled.graph
        for name, source in self._sources.items():
            spec = self.compiled.spec.sources[name]
            readers = tuple(s for s in graph.steps if name in graph.inputs.get(s, ()))
            # an SWA step records the late rows it skips itself (framework.operators.swa_stream)
            self_audited = any(name in op.sources for op in self._micro_batch.values() if isinstance(op, SwaStream))
            has_late = spec.watermark is not None and spec.event_time is not None and not self_audited
            if source.read_files is not None:
                owner = next((o for o, step in owners.items() if step == name or name in graph.upstream(step)), None)
                if owner is None or not (source.bad_rows is not None or has_late):
                    continue
                quarantine = (
                    self._sink(store, f"_quarantine_{name}", self.warehouse.internal(QUARANTINE_TABLE), "append")
                    if source.bad_rows is not None
                    else None
                )
                late = (
                    self._sink(store, f"_late_{name}", self.warehouse.internal(LATE_ROWS_TABLE), "append") if has_late else None
                )
                auditor = self._auditors.get(owner)
                if auditor is None:
                    auditor = CheckpointAuditor(spark, self._checkpoint(owner)[0], [], self.run_id, self.compiled.name)
                    self._auditors[owner] = auditor
                auditor.sources.append(
                    AuditedSource(name, locations[name], source.read_files, spec.event_time, readers, quarantine, late)
                )
            elif has_late:
                folder, _ = self._checkpoint(f"_late_{name}")
                monitor = LateRowMonitor(
                    name,
                    readers,
                    spec.event_time,
                    spec.watermark,
                    join(folder + ".late", "state.json"),
                    self.run_id,
                    self.compiled.name,
                )
                late = self._sink(store, f"_late_{name}", self.warehouse.internal(LATE_ROWS_TABLE), "append", prepare=monitor)
                self._start(source.raw, late.name, late, None)  # type: ignore[arg-type]

    def _audit(self) -> None:
        reports = {name: query for name, query, _, result in self._queries if result is not None}
        for owner, auditor in self._auditors.items():
            query = reports.get(owner)
            auditor.audit(list(query.recentProgress or []) if query is not None else [])

    def _wait(self) -> None:
        if not self.continuous:
            for name, query, _, _ in self._queries:
                if query.isActive:
                    query.awaitTermination()
                self._raise_if_failed(name, query)
            return
        previous = _install_stop_handlers(self.stop)
        audited = time.monotonic()
        try:
            while not self.stop.is_set():
                for name, query, _, _ in self._queries:
                    self._raise_if_failed(name, query)
                    if not query.isActive:
                        raise RunFailed(f"output '{name}': its streaming query stopped")
                if time.monotonic() - audited > max(self.compiled.spec.trigger.processing_time, 5.0):
                    self._audit()
                    audited = time.monotonic()
                time.sleep(0.5)
        finally:
            _restore_handlers(previous)

    @staticmethod
    def _raise_if_failed(name: str, query: StreamingQuery) -> None:
        error = query.exception()
        if error is not None:
            message = str(getattr(error, "desc", error)).strip().splitlines()[0]
            raise RunFailed(f"output '{name}': streaming query failed: {message}")

    def _collect(self) -> None:
        for name, query, sink, result in self._queries:
            if result is not None:
                result.observed = observed_load(query, self.spark_executors)
                result.duration_s = time.perf_counter() - self._began
                result.rows = sink.rows
                result.version = sink.version if sink.version is not None else result.previous_version
                result.status = "written" if sink.rows else "skipped"
                if sink.replayed:
                    self.reporter.update("output", name, result.status, f"{sink.replayed} replayed batch(es) skipped")
            elif name.startswith("_late_") and sink.rows:
                self.result.late[name.removeprefix("_late_")] = sink.rows
        for output, operator in self._prepared.items():
            result = next((r for r in self.result.outputs if r.name == output), None)
            if result is not None:
                result.observed.update(operator.figures)
            if operator.quarantine is not None and operator.quarantine.rows:
                self.result.quarantined[operator.step] = operator.quarantine.rows
            if operator.late is not None and operator.late.rows:
                self.result.late[", ".join(operator.sources) or operator.spec.swa.input] = operator.late.rows
        for auditor in self._auditors.values():
            for source in auditor.sources:
                for sink, found in ((source.quarantine, self.result.quarantined), (source.late, self.result.late)):
                    if sink is not None and sink.rows:
                        found[source.name] = sink.rows


def _static_twin(frame: DataFrame) -> DataFrame:
    """An empty static frame with the stream's columns: lets the batch operator check the inputs."""
    return frame.sparkSession.createDataFrame([], frame.schema)


def observed_load(query: StreamingQuery, executors: int) -> dict[str, Any]:
    """What a query used, from its progress reports: state rows, input rate, batches."""
    progress = [p for p in (query.recentProgress or []) if p]
    state_rows = [sum(_get(op, "numRowsTotal") or 0 for op in _get(p, "stateOperators") or []) for p in progress]
    rates = [r for r in (_get(p, "processedRowsPerSecond") for p in progress) if r]
    return {
        "executors": executors,
        "batches": len(progress),
        "state_rows_peak": max(state_rows, default=0),
        "input_rows": sum(_get(p, "numInputRows") or 0 for p in progress),
        "processed_rows_per_s": round(max(rates), 1) if rates else None,
    }


def _get(item: Any, name: str) -> Any:
    """Progress reports are dicts or objects depending on the PySpark version."""
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _executors(spark: SparkSession) -> int:
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect
        return 0


def _install_stop_handlers(stop: threading.Event) -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, lambda *_: stop.set())
    return previous


def _restore_handlers(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)
