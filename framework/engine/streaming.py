"""A streaming run of a plan: the same frames on Structured Streaming, one query per output.

- `tributary run` processes everything new and stops (trigger availableNow): the mode for
  scheduled incremental runs. `--continuous` runs every `trigger.processing_time` until Ctrl-C
  or SIGTERM, then stops its queries cleanly.
- Each output commits through foreachBatch with (app id, batch id) transactions, so a batch that
  Spark replays after a crash is skipped, not appended twice (framework.io.stream_sink).
- A step that runs per micro-batch (SWA, the count-window join) runs inside its output's sink,
  with its state beside the output's checkpoint (framework.operators.micro_batch); the rows it
  hands back for the quarantine and late-row tables are committed inside the same batch.
- A per-micro-batch step that other steps read (a chain, framework.plan.model.Chain) runs in a
  query of its own, whose sink commits each micro-batch's emitted rows once to an internal Delta
  table under _tributary/chains/; its readers and outputs read that table as a stream with the
  watermark the chain states. An available-now run finishes each chain's query before starting
  the queries that read it, so one run carries rows through the whole chain.
- Checkpoints live under <warehouse>/_tributary/checkpoints/<pipeline>/<output>. The app id
  carries the checkpoint's generation, so after --full-refresh batch ids start again cleanly.
- Malformed records go to the quarantine table and rows later than their source's watermark to
  the late-rows table, each through its own exactly-once query.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from framework.engine.chain_outputs import OUTPUT_SIDE as _OUTPUT_SIDE
from framework.engine.chain_outputs import ChainFeedsOutputs
from framework.engine.context import RunContext
from framework.engine.failures import is_spark_error, one_line, raised_in_python, spark_failure
from framework.engine.frames import Frames, StreamReading, build_frames, missing_columns
from framework.engine.output_checks import check_outputs
from framework.engine.results import OutputResult, OutputStatus, Progress, StepStatus
from framework.engine.source_pins import check_source_columns, check_source_locations, pin_source_columns, pin_source_locations
from framework.engine.state_figures import streaming_figures
from framework.engine.state_pins import check_stateful_queries, pin_stateful_queries
from framework.engine.stream_checks import BatchCheck, CheckedBatches, RefusedRows
from framework.engine.task_progress import group_tasks, tracker_of
from framework.errors import BadInput, Interrupted, RunFailed
from framework.io import staging as staging_files
from framework.io.checkpoint_audit import AuditedSource, CheckpointAuditor
from framework.io.late_rows import LateRowMonitor
from framework.io.locations import CHECKPOINTS_DIR, LATE_ROWS_TABLE, QUARANTINE_TABLE, STAGING_DIR, is_uri, join
from framework.io.sources import event_time_column
from framework.io.stream_sink import ExactlyOnceDeltaSink
from framework.operators import kind_of
from framework.operators.micro_batch import LATE, QUARANTINE, Held, MicroBatchOperator, MicroBatchSetup
from framework.operators.registry import Streaming
from framework.plan.model import CheckScope
from framework.quality.gate import MASK
from framework.spec.durations import spark_interval

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

    from framework.plan.model import PlannedOutput

#: where the rows a per-micro-batch operator hands back go (framework.operators.micro_batch)
_SIDE_TABLES = {QUARANTINE: QUARANTINE_TABLE, LATE: LATE_ROWS_TABLE}


@dataclass
class _Query:
    name: str
    query: StreamingQuery
    sink: ExactlyOnceDeltaSink
    result: OutputResult | None  # None: an audit query (late rows of a Delta source)


@dataclass
class KeptFrames:
    """A streaming plan's frames, built by its first run and used again by the next runs over the
    same session (each delivery of a `tributary test` scenario is one run; framework.testing.stream).

    Why: building a stream's frames (each source's reader, each step planned, a chain's table read
    as a stream) costs seconds, and what they describe does not change from one run to the next:
    a query started again over the same frames resumes from its checkpoint as one started over new
    ones. Only for a plan without expectations: the checks frames carry report to the run that
    attached them (framework.quality.gate), so such a plan builds its frames each run."""

    frames: Frames | None = None

    @staticmethod
    def allowed(run_plan: Any) -> bool:
        return not any(s.expectations for s in run_plan.steps) and not any(o.expectations for o in run_plan.outputs)


@dataclass
class StreamingRun:
    run: RunContext
    queries: list[_Query] = field(default_factory=list)
    operators: dict[str, MicroBatchOperator] = field(default_factory=dict)  # output -> its per-micro-batch operator
    checks: list[BatchCheck] = field(default_factory=list)  # drop expectations judged per micro-batch
    sink_checks: dict[str, list[BatchCheck]] = field(default_factory=dict)  # output -> those its sink judges
    auditors: dict[str, CheckpointAuditor] = field(default_factory=dict)  # output -> its sources' audit
    #: outputs of a chained step that its chain's query writes (framework.engine.chain_outputs)
    fed: dict[str, tuple[ExactlyOnceDeltaSink, OutputResult]] = field(default_factory=dict)
    #: steps whose aggregation has no event-time window, written by merge outputs in update mode
    updating: set[str] = field(default_factory=set)
    began: float = field(default_factory=time.perf_counter)
    #: a full refresh: each output's table and its version before it was emptied
    refreshed_from: dict[str, int | None] | None = None

    def execute(self) -> None:
        run = self.run
        executors = _executors(run.spark)
        kept = run.kept if isinstance(run.kept, KeptFrames) and KeptFrames.allowed(run.plan) else None
        frames = kept.frames if kept is not None and kept.frames is not None else build_frames(run, StreamReading())
        if kept is not None:
            kept.frames = frames
        self._check_streaming(frames)
        check_source_columns(run, frames)
        check_source_locations(run)
        check_stateful_queries(run)
        check_outputs(run, frames)
        if run.plan.full_refresh or staging_files.exists(self._refreshing()):
            self._start_over(frames)
        else:
            self._check_new_checkpoints()
        pin_source_columns(run, frames)
        pin_source_locations(run)
        pin_stateful_queries(run)
        try:
            self._start_chains(frames)
            for output in run.plan.outputs:
                if output.name not in self.fed:
                    self._start_output(frames, output)
            self._start_audits(frames)
            self._start_refused(frames)
            self._wait()
            self._audit()
        except KeyboardInterrupt as e:
            self._stop_queries()
            raise self._what_stays(e) from None
        except Exception:  # a query failed: the micro-batches the others committed stay, and say so
            self._stop_queries()
            if self.refreshed_from is not None:
                self._undo_refresh()
            else:
                self._keep_committed("committed before the run failed")
            raise
        finally:
            self._stop_queries()
        self._collect(executors)
        for step in run.result.steps:
            step.status = StepStatus.STREAMED

    def _stop_queries(self) -> None:
        for q in self.queries:
            if q.query.isActive:
                q.query.stop()

    def _what_stays(self, interrupt: KeyboardInterrupt) -> KeyboardInterrupt:
        """Ctrl-C: the micro-batches the outputs committed before it stay (each exactly once, and
        the next run goes on after them), so their results and the message say so."""
        sinks, kept, said = self._keep_committed("committed before Ctrl-C")
        if not kept:
            return interrupt
        text = (
            ", ".join(said) + "; the next run goes on after " + ("it" if kept[0][0].batches == 1 and len(kept) == 1 else "them")
        )
        if len(kept) < len(sinks):
            text += "; the other outputs stay at their previous version"
        return Interrupted(text)

    def _keep_committed(self, why: str) -> tuple[list[Any], list[Any], list[str]]:
        """Mark each output that committed micro-batches in this run as written (rows, version):
        they stay, exactly once, however the run ends. (every sink, those that committed, in words)"""
        sinks = [(q.sink, q.result) for q in self.queries if q.result is not None] + list(self.fed.values())
        kept = [(sink, result) for sink, result in sinks if sink.batches]
        said = []
        for sink, result in kept:
            result.status, result.rows = OutputStatus.WRITTEN, sink.rows
            result.version, result.duration_s = sink.version, time.perf_counter() - self.began
            batches = f"{sink.batches} micro-batch" + ("es" if sink.batches > 1 else "")
            said.append(f"output '{result.name}' keeps the {batches} it committed ({sink.rows:,} rows, version {sink.version})")
            self.run.reporter.update("output", result.name, OutputStatus.WRITTEN, f"{batches} {why}")
        return sinks, kept, said

    # -- checks --------------------------------------------------------------------------------

    def _check_streaming(self, frames: Frames) -> None:
        """Name the first step Spark cannot run as a stream, before any query starts."""
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import AnalysisException

        jvm = self.run.spark.sparkContext._jvm  # type: ignore[attr-defined]
        assert jvm is not None, "a local or cluster session (Spark Connect has no JVM on this side)"
        checker = getattr(getattr(jvm.org.apache.spark.sql.catalyst.analysis, "UnsupportedOperationChecker$"), "MODULE$")
        append = jvm.org.apache.spark.sql.streaming.OutputMode.Append()
        update = jvm.org.apache.spark.sql.streaming.OutputMode.Update()
        for step in self.run.plan.steps:
            frame = frames.frames.get(step.name)
            if frame is None or not frame.isStreaming:
                continue
            try:
                try:
                    checker.checkForStreaming(frame._jdf.queryExecution().analyzed(), append)
                except (Py4JJavaError, AnalysisException):
                    if not self._merged_only(step.name):
                        raise
                    checker.checkForStreaming(frame._jdf.queryExecution().analyzed(), update)
                    self.updating.add(step.name)
            except (Py4JJavaError, AnalysisException) as e:
                message = e.getMessage() if isinstance(e, AnalysisException) else e.java_exception.getMessage()
                reason = str(message).split(" SQLSTATE")[0]
                raise BadInput(
                    self.run.problem(
                        f"step '{step.name}' cannot run in streaming: {reason}",
                        ("steps", step.name),
                        hint=_streaming_hint(reason),
                    )
                ) from None

    def _reads_chain(self, step: str) -> bool:
        """Whether `step`'s rows come from a chain's table (a Python data source, framework.io.delta_stream)."""
        plan, todo, seen = self.run.plan, [step], set()
        while todo:
            node = todo.pop()
            if node in seen or plan.is_source(node):
                continue
            seen.add(node)
            if plan.step(node).chain is not None:
                return True
            todo.extend(plan.step(node).inputs)
        return False

    def _merged_only(self, step: str) -> bool:
        """Only outputs that merge by key read `step`: an aggregation without an event-time window
        may run in update mode, each micro-batch merging the groups it changed (as batch's rows)."""
        plan = self.run.plan
        outputs = [o for o in plan.outputs if o.step == step]
        readers = [s for s in plan.steps if step in s.inputs]
        return bool(outputs) and not readers and all(o.mode == "merge" and o.keys for o in outputs)

    def _start_over(self, frames: Frames) -> None:
        """Full refresh: each output gets a new version without rows (its history stays), then the
        checkpoints go. A marker spans both, so a refresh cut short is finished by the next run
        (resuming old checkpoints over emptied tables would lose rows; a new stream over old rows
        would write them twice)."""
        fs, path = self._mark_refreshing()
        self.refreshed_from = {o.table: self.run.store.version(o.table) for o in self.run.plan.outputs}
        for output in self.run.plan.outputs:
            columns = frames.columns_of(output.step).schema
            self.run.store.empty(output.table, columns, list(output.partition_by))
        staging_files.remove_tree(self.run.internal(f"{CHECKPOINTS_DIR}/{self.run.pipeline}"))
        fs.delete_file(path)

    def _undo_refresh(self) -> None:
        """A full refresh that failed puts each output back at its version before the refresh (a
        failed run leaves every output as it was: the refresh had emptied them), and leaves the
        refresh marker, so the next run starts the refresh over (its checkpoints go again)."""
        run, before = self.run, self.refreshed_from or {}
        self._mark_refreshing()
        failed: dict[str, str] = {}  # table -> why its restore failed too (the outage that failed the run)
        for table, version in before.items():
            try:
                run.store.restore(table, version)
            except Exception as e:  # noqa: BLE001 - the run's own error is raised after this; this one is said
                failed[table] = one_line(e)
        for result in run.result.outputs:
            if result.table in failed:
                result.status, result.version = OutputStatus.NOT_ROLLED_BACK, None  # not read: the store failed
                said = (
                    f"the refresh failed, and restoring version {before[result.table]} failed too ({failed[result.table]}): "
                    "emptied by the refresh; the next run starts the refresh over"
                )
                run.reporter.update("output", result.name, result.status, said)
            elif result.table in before:
                result.status, result.version = OutputStatus.ROLLED_BACK, before[result.table]
                run.reporter.update(
                    "output", result.name, OutputStatus.ROLLED_BACK, "the refresh failed: back at its version before it"
                )

    def _check_new_checkpoints(self) -> None:
        """An append output without a checkpoint starts reading its sources from the beginning, so
        into a table that already holds rows it would append them all again: the pipeline or the
        output was renamed (its checkpoint is under the old name), or the checkpoint was deleted.
        Refused before any query starts, naming who wrote the rows."""
        run, problems = self.run, []
        for output in run.plan.outputs:
            if output.mode != "append" or self._has_checkpoint(output.name) or not self._holds_rows(output.table):
                continue
            app_id = next((a for a, _ in run.store.commits(output.table, 1) if a), None)
            parts = app_id.split("/") if app_id else []
            by = (
                f" (last written by pipeline '{parts[1]}', output '{parts[2]}')"
                if len(parts) >= 3 and parts[0] == "tributary"
                else ""
            )
            problems.append(
                run.problem(
                    f"output '{output.name}': its table {output.table} already holds rows{by}, and this stream has no "
                    "checkpoint for it, so it would read its sources from the start and append every row again",
                    ("outputs", output.name),
                    hint="a renamed pipeline or output starts a new stream: keep the old names, or start the stream over "
                    "with --full-refresh (the table gets a new version without rows; its history stays)",
                )
            )
        if problems:
            raise BadInput(*problems)

    def _has_checkpoint(self, name: str) -> bool:
        folder = self.run.internal(f"{CHECKPOINTS_DIR}/{self.run.pipeline}/{name}")
        return staging_files.exists(folder + ".generation") and staging_files.exists(folder)

    def _holds_rows(self, table: str) -> bool:
        if self.run.store.version(table) is None:
            return False
        return self.run.store.query(table, "SELECT 1 AS one FROM t LIMIT 1").num_rows > 0

    def _refreshing(self) -> str:
        return self.run.internal(f"{CHECKPOINTS_DIR}/{self.run.pipeline}.refreshing")

    def _mark_refreshing(self) -> tuple[Any, str]:
        """The refresh marker, written (the run's id): a run that finds it starts the stream over.
        Returns its filesystem and path."""
        fs, path = staging_files.filesystem(self._refreshing())
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with fs.open_output_stream(path) as handle:
            handle.write(self.run.run_id.encode())
        return fs, path

    # -- outputs -------------------------------------------------------------------------------

    def _start_chains(self, frames: Frames) -> None:
        """Each chained step's query, in run order: its operator's emitted rows to its internal
        table, exactly once; its late and refused rows to the side tables, under the step's name.
        An available-now run waits for each before starting the next, so readers see all of it."""
        run = self.run
        for step in run.plan.steps:
            chain = step.chain
            if chain is None:
                continue
            name = f"_chain_{step.name}"
            operator = self._operator(frames, step.name, name)
            assert operator is not None, f"chained step '{step.name}' runs per micro-batch"
            # an output the chain's rows reach unjudged; the rest read the step's checked stream
            outputs = [
                o
                for o in run.plan.outputs
                if o.step == step.name and step.name not in frames.refused and not self._batch_checks(frames, o, dry=True)
            ]
            feeding = ChainFeedsOutputs(operator, tuple(f"{_OUTPUT_SIDE}{o.name}" for o in outputs))
            sink = self._sink(name, chain.table, "append", prepare=feeding)
            sink.after_batch = self._elastic(operator)
            sink.side = {
                side: self._sink(f"_{side}_{name}", run.internal(_SIDE_TABLES[side]), "append") for side in operator.side_tables
            }
            for output in outputs:  # written by the chain's query too: no query of their own
                result = OutputResult(
                    output.name, output.step, output.table, output.mode, previous_version=run.store.version(output.table)
                )
                run.result.outputs.append(result)
                own = self._sink(
                    output.name, output.table, output.mode, output.keys, output.partition_by, feeding.rows_for(output.name)
                )
                sink.side[f"{_OUTPUT_SIDE}{output.name}"] = own
                self.fed[output.name] = (own, result)
            run.result.watermarks[step.name] = chain.watermark()
            run.reporter.update("step", step.name, Progress.STREAMING, f"chained through {chain.table}")
            self._start(frames.feeds[step.name], name, sink, None, settle=any(self._reads_chain(i) for i in step.inputs))
            query = self.queries[-1]
            if not run.continuous:
                query.query.awaitTermination()
                _raise_if_failed(query)
            self._start_chain_audit(frames, step.name)

    def _start_chain_audit(self, frames: Frames, step: str) -> None:
        """Late rows of a chained step's table for readers Spark runs natively (a per-micro-batch
        reader records its own): rows behind the chain's watermark, recorded under the step. Only
        for kinds with no bound on how late they emit: with one, the delay covers it."""
        run, plan = self.run, self.run.plan
        chain = plan.step(step).chain
        assert chain is not None
        readers = [s for s in plan.steps if step in s.inputs]
        native = [s.name for s in readers if s.kind.streaming(s.spec) is not Streaming.PER_MICRO_BATCH]
        if chain.event_time is None or chain.event_time not in frames.columns[step].columns or not native:
            return
        if chain.lag_s is not None:  # the delay covers how late the kind emits: nothing can be late
            return
        name = f"_late_{step}"
        folder, _ = self._checkpoint(name)
        monitor = LateRowMonitor(
            step, tuple(native), chain.event_time, chain.delay_s, join(folder + ".late", "state.json"), run.run_id, run.pipeline
        )
        late = self._sink(name, run.internal(LATE_ROWS_TABLE), "append", prepare=monitor)
        self._start(frames.chained_raw[step], late.name, late, None, settle=True)

    def _start_output(self, frames: Frames, output: PlannedOutput) -> None:
        run = self.run
        result = OutputResult(
            output.name, output.step, output.table, output.mode, previous_version=run.store.version(output.table)
        )
        run.result.outputs.append(result)
        operator = self._operator(frames, output.step, output.name)
        checks = self._batch_checks(frames, output)
        prepare = CheckedBatches(checks, operator) if checks else operator
        sink = self._sink(output.name, output.table, output.mode, output.keys, output.partition_by, prepare)
        sink.after_batch = self._elastic(operator) if operator is not None else None
        sides = set(operator.side_tables if operator is not None else ()) | ({QUARANTINE} if checks else set())
        sink.side = {side: self._sink(f"_{side}_{output.name}", run.internal(_SIDE_TABLES[side]), "append") for side in sides}
        reads_chain = self._reads_chain(output.step)
        self._start(
            frames.frames[output.step], output.name, sink, result, update=output.step in self.updating, settle=reads_chain
        )

    def _batch_checks(self, frames: Frames, output: PlannedOutput, dry: bool = False) -> list[BatchCheck]:
        """The drop expectations the output's sink judges on each micro-batch: those of its step
        when the frames do not carry them (framework.engine.frames), then its own."""
        run, step = self.run, self.run.plan.step(output.step)
        columns = frames.columns_of(step.name)
        targets = []
        if step.drops_rows and step.name not in frames.refused:
            first = next(o.name for o in run.plan.outputs if o.step == step.name)
            targets.append((("steps", step.name), CheckScope.STEP, step.expectations, first == output.name))
        if any(e.on == "rows" and e.severity == "drop" for e in output.expectations):
            targets.append((("outputs", output.name), CheckScope.OUTPUT, output.expectations, True))
        if dry:  # only whether there are any
            return [None] * len(targets)  # type: ignore[list-item]
        checks = []
        for at, scope, expectations, record in targets:
            specs = list(expectations)  # a stream's are all row-level drops (framework.compiler)
            missing_columns(run, at, columns, specs)
            check = BatchCheck.on(columns, at[1], scope, specs, run.run_id, run.pipeline)
            check.record = record
            checks.append(check)
        self.checks += checks
        self.sink_checks[output.name] = checks
        return checks

    def _start_refused(self, frames: Frames) -> None:
        """A quarantine query for each step whose refused rows left the stream (framework.engine.frames)."""
        run = self.run
        for step, rows in frames.refused.items():
            specs = list(run.plan.step(step).expectations)
            check = BatchCheck.on(rows.drop(MASK), step, CheckScope.STEP, specs, run.run_id, run.pipeline)
            check.rows = None  # its query sees only the refused rows
            self.checks.append(check)
            name = f"_quarantine_{step}"
            if not self._has_checkpoint(name) and not self._reads_chain(step):
                self._seed_checkpoint(name, [o.name for o in run.plan.outputs if o.step == step])
            sink = self._sink(name, run.internal(QUARANTINE_TABLE), "append", prepare=RefusedRows(check))
            self._start(rows, sink.name, sink, None, settle=self._reads_chain(step))

    def _seed_checkpoint(self, query: str, siblings: list[str]) -> None:
        """A step's quarantine query new to a stream whose outputs of that step already ran (a drop
        expectation added, or a second output, which moves the quarantine out of the output's
        query) starts where they are: their offsets and commits copied, with an id of its own.
        Started with no checkpoint, it judged every file they had read: rows already written to
        the outputs were quarantined too, or quarantined again. The sibling reads the step's rows
        and nothing else, so its offsets are those of the same sources. Local checkpoints only."""
        import json
        import shutil
        from pathlib import Path

        for sibling in siblings:
            source = self.run.internal(f"{CHECKPOINTS_DIR}/{self.run.pipeline}/{sibling}")
            if is_uri(source) or not self._has_checkpoint(sibling) or not (Path(source) / "offsets").is_dir():
                continue
            target = Path(self.run.internal(f"{CHECKPOINTS_DIR}/{self.run.pipeline}/{query}"))
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            for part in ("offsets", "commits", "sources"):
                if (Path(source) / part).is_dir():
                    shutil.copytree(Path(source) / part, target / part)
            (target / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")
            return

    def _operator(self, frames: Frames, step_name: str, query: str) -> MicroBatchOperator | None:
        """The per-micro-batch operator of a query (an output's, or a chain's) whose step runs in
        its sink, with its state beside the query's checkpoint. An output of a chained step reads
        the chain's table: no operator."""
        plan, step = self.run.plan, self.run.plan.step(step_name)
        micro_batch = step.kind.micro_batch
        if step.name not in frames.columns or micro_batch is None:  # not run per micro-batch
            return None
        if step.chain is not None and query != f"_chain_{step.name}":
            return None
        folder, _ = self._checkpoint(query)
        setup = MicroBatchSetup(
            step.name,
            step.spec,
            {i: frames.frames[i] for i in step.inputs},
            state_dir=folder + ".state",
            checkpoint=folder,
            delays={i: self._delay(i) for i in step.inputs},
            sources={i: plan.upstream_sources(i) for i in step.inputs},
            parquet_rows={i: self._parquet_rows(i) for i in step.inputs},
            run_id=self.run.run_id,
            pipeline=self.run.pipeline,
            functions=self.run.compiled.functions,
            sizes=frames.contexts[step.name].sizes,
            partitions=getattr(step.kind.settings(step.spec), "partitions", None),
            elastic=self.run.compiled.spec.elastic,
            trigger_s=self.run.compiled.spec.trigger.processing_time,
            problem=self.run.problem,
        )
        operator = micro_batch.operator(setup)
        self.operators[query] = operator
        return operator

    def _elastic(self, operator: MicroBatchOperator) -> Callable[[int, float], None] | None:
        """The pipeline's `elastic:` rule for one operator: told each batch's time, it says when it
        widened the step."""
        if self.run.compiled.spec.elastic is None or not hasattr(operator, "finished"):
            return None
        reporter = self.run.reporter

        def after_batch(batch_id: int, seconds: float) -> None:
            change = operator.finished(batch_id, seconds)  # type: ignore[attr-defined]
            if change is not None:
                reporter.update(
                    "step",
                    operator.step,
                    Progress.STREAMING,
                    f"widened: partitions {change['from']} → {change['to']} after batch {batch_id} "
                    f"({seconds:.1f}s, over the {change['trigger_s']:g}s trigger)",
                )

        return after_batch

    def _parquet_rows(self, node: str) -> bool:
        """Whether every row of `node` is a row of a Parquet file source as the file holds it
        (sources and steps that pass rows through), so the files' footers know its event times."""
        plan = self.run.plan
        upstream = [node]
        while upstream:
            current = upstream.pop()
            if plan.is_source(current):
                source = plan.source(current).spec
                if getattr(source, "format", None) != "parquet":
                    return False
            else:
                step = plan.step(current)
                if not step.kind.passes_rows_through:
                    return False
                upstream.extend(step.inputs)
        return True

    def _delay(self, node: str) -> float:
        """The largest watermark delay of the sources behind `node` (seconds); a chained step's
        readers see its chain's."""
        chain = self.run.plan.chain_of(node)
        if chain is not None:
            return chain.delay_s
        if not self.run.plan.is_source(node) and any(self.run.plan.chain_of(i) for i in self.run.plan.step(node).inputs):
            return max(self._delay(i) for i in self.run.plan.step(node).inputs)
        sources = self.run.plan.upstream_sources(node)
        return max((self.run.plan.source(s).spec.watermark or 0.0) for s in sources) if sources else 0.0

    def _checkpoint(self, name: str) -> tuple[str, str]:
        """The checkpoint folder of one query or sink and its generation (new after a full refresh,
        or when the folder is gone). The folder is made with the generation: a side sink (the
        quarantine and late rows a batch hands over) has no query to make it, and a generation made
        anew each run would let a batch replayed after a crash commit its side rows again."""
        folder = self.run.internal(f"{CHECKPOINTS_DIR}/{self.run.pipeline}/{name}")
        fs, path = staging_files.filesystem(folder + ".generation")
        if self._has_checkpoint(name):
            with fs.open_input_stream(path) as handle:
                return folder, handle.read().decode().strip()
        generation = uuid.uuid4().hex[:12]
        fs.create_dir(staging_files.filesystem(folder)[1], recursive=True)
        with fs.open_output_stream(path) as handle:
            handle.write(generation.encode())
        return folder, generation

    def _sink(
        self,
        name: str,
        table: str,
        mode: str,
        keys: tuple[str, ...] = (),
        partition_by: tuple[str, ...] = (),
        prepare: Any = None,
    ) -> ExactlyOnceDeltaSink:
        folder, generation = self._checkpoint(name)
        reporter = self.run.reporter
        return ExactlyOnceDeltaSink(
            self.run.store,
            name,
            table,
            app_id=f"tributary/{self.run.pipeline}/{name}/{generation}",
            staging_root=self.run.internal(f"{STAGING_DIR}/{self.run.run_id}/{name}"),
            checkpoint=folder,
            run_id=self.run.run_id,
            mode=mode,
            keys=keys,
            partition_by=partition_by,
            prepare=prepare,
            on_commit=lambda n, b, rows, v: reporter.update(
                "output", n, OutputStatus.WRITTEN, f"batch {b}: {rows:,} rows → version {v}"
            ),
        )

    def _start(
        self,
        frame: DataFrame,
        name: str,
        sink: ExactlyOnceDeltaSink,
        result: OutputResult | None,
        update: bool = False,
        settle: bool = False,
    ) -> None:
        writer = frame.writeStream.foreachBatch(sink).option("checkpointLocation", sink.checkpoint)
        if update:  # each micro-batch hands over the groups it changed, merged by the output's keys
            writer = writer.outputMode("update")
        writer = writer.queryName(f"{self.run.pipeline}__{name}")
        if self.run.continuous:
            writer = writer.trigger(processingTime=spark_interval(self.run.compiled.spec.trigger.processing_time))
        else:
            writer = writer.trigger(availableNow=True)
        self.run.reporter.update("output", name, Progress.STREAMING)
        started = _Query(name, writer.start(), sink, result)
        self.queries.append(started)
        for _ in range(_STARTS if settle else 0):
            _settle(started)
            error = started.query.exception()
            if error is None or _PYTHON_SOURCE_LATE not in str(getattr(error, "desc", error)):
                break
            # its checkpoint says what it committed: a new start resumes exactly where it stopped
            self.run.reporter.update("output", name, Progress.STREAMING, "its Python data source started too slowly: again")
            started.query = writer.start()

    # -- quarantine and late rows of the sources -----------------------------------------------

    def _start_audits(self, frames: Frames) -> None:
        """Quarantine and late rows of every source. File sources are audited from the checkpoint
        of the first output query that reads them (framework.io.checkpoint_audit: no extra read
        unless something was malformed or dropped); Delta sources by a light audit query. Sources
        behind a per-micro-batch operator that records its own late rows are not audited for them."""
        run, plan = self.run, self.run.plan
        self_audited = {
            source
            for operator in self.operators.values()
            if LATE in operator.side_tables
            for source in plan.upstream_sources(operator.step)
        }
        for name, source in frames.sources.items():
            planned = plan.source(name)
            spec = planned.spec
            has_late = (
                spec.watermark is not None
                and spec.event_time is not None
                and name not in self_audited
                and self._drops_late_rows(name)
            )
            if source.read_files is not None:
                owner = self._file_owner(name)
                if owner is None or not (source.bad_rows is not None or has_late):
                    continue
                quarantine = (
                    self._sink(f"_quarantine_{name}", run.internal(QUARANTINE_TABLE), "append")
                    if source.bad_rows is not None
                    else None
                )
                late = self._sink(f"_late_{name}", run.internal(LATE_ROWS_TABLE), "append") if has_late else None
                auditor = self.auditors.get(owner)
                if auditor is None:
                    auditor = CheckpointAuditor(run.spark, self._checkpoint(owner)[0], [], run.run_id, run.pipeline)
                    self.auditors[owner] = auditor
                auditor.sources.append(
                    AuditedSource(
                        name, planned.location, source.read_files, event_time_column(spec), planned.readers, quarantine, late
                    )
                )
            elif has_late:
                folder, _ = self._checkpoint(f"_late_{name}")
                monitor = LateRowMonitor(
                    name,
                    planned.readers,
                    event_time_column(spec) or "",  # has_late: there is one
                    spec.watermark,
                    join(folder + ".late", "state.json"),
                    run.run_id,
                    run.pipeline,
                )
                late = self._sink(f"_late_{name}", run.internal(LATE_ROWS_TABLE), "append", prepare=monitor)
                self._start(source.raw, late.name, late, None)  # type: ignore[arg-type]

    def _drops_late_rows(self, source: str) -> bool:
        """Whether a step reading `source` leaves out rows behind the watermark: one that keeps
        state (Spark's aggregations and joins) or runs per micro-batch. Steps that keep no state
        pass every row on, so a row behind the watermark is in an output, not late: recorded as
        late too, it was counted twice (rows out + quarantined + late > rows in)."""
        compiled, plan = self.run.compiled, self.run.plan
        for step in compiled.graph.steps:
            if source not in plan.upstream_sources(step):
                continue
            spec = compiled.spec.steps[step]
            kind = kind_of(spec)
            query = compiled.sql[step].text if step in compiled.sql else None
            if kind.streaming(spec) is Streaming.PER_MICRO_BATCH or kind.keeps_spark_state(spec, query):
                return True
        return False

    def _file_owner(self, source: str) -> str | None:
        """The first query that reads `source`'s files itself: a chain's query, or an output's
        (an output of a chained step reads the chain's table, not the files)."""
        plan = self.run.plan
        queries = [(f"_chain_{s.name}", s.name, True) for s in plan.steps if s.chain is not None]
        queries += [(o.name, o.step, False) for o in plan.outputs]
        for query, step, own_operator in queries:
            todo, seen = [step], set()
            while todo:
                node = todo.pop()
                if node == source:
                    return query
                if node in seen or plan.is_source(node):
                    continue
                seen.add(node)
                planned = plan.step(node)
                if planned.chain is not None and not (own_operator and node == step):
                    continue  # read from the chain's table
                todo.extend(planned.inputs)
        return None

    def _audit(self) -> None:
        reports = {q.name: q.query for q in self.queries}
        for owner, auditor in self.auditors.items():
            query = reports.get(owner)
            auditor.audit(list(query.recentProgress or []) if query is not None else [])

    # -- waiting and collecting ----------------------------------------------------------------

    def _wait(self) -> None:
        if not self.run.continuous:
            self._until_read()
            return
        previous = _install_stop_handlers(self.run.stop)
        audited = time.monotonic()
        try:
            while not self.run.stop.is_set():
                for q in self.queries:
                    _raise_if_failed(q)
                    if not q.query.isActive:
                        raise RunFailed(f"output '{q.name}': its streaming query stopped")
                    if q.result is not None:
                        self.run.reporter.update("output", q.name, Progress.STREAMING, _waiting(q))
                if time.monotonic() - audited > max(self.run.compiled.spec.trigger.processing_time, 5.0):
                    self._audit()
                    audited = time.monotonic()
                time.sleep(0.5)
        finally:
            _restore_handlers(previous)

    def _until_read(self, every: int = 1, after: float = 2.0) -> None:
        """Available-now: until each query has read what was there. Meanwhile, a micro-batch that
        takes more than `after` seconds shows its stages' tasks on its output's line, as staging a
        batch output does (framework.engine.task_progress): a first run over a large backlog is
        one long micro-batch, which said nothing until its commit."""
        tracker, began = tracker_of(self.run.spark), time.monotonic()
        shown: dict[str, str] = {}  # output -> the tasks its line shows now
        for q in self.queries:
            while q.query.isActive:
                try:
                    q.query.awaitTermination(every)
                except Exception as e:  # the query failed: said with its output and the step it computes
                    if not is_spark_error(e):
                        raise
                    raise RunFailed(self._failure(q.name, e)) from e
                if tracker is not None and time.monotonic() - began > after:
                    self._show_tasks(tracker, shown)
            _raise_if_failed(q)

    def _failure(self, query: str, error: BaseException) -> str:
        """`output 'x': step 'y' (its file:line): [ERROR] …`, as a batch run names a failing step."""
        output = next((o for o in self.run.plan.outputs if o.name == query), None)
        said = spark_failure(self.run, error, output.step if output is not None else None)
        return f"output '{query}', {said}" if output is not None and output.step != query else said

    def _show_tasks(self, tracker: Any, shown: dict[str, str]) -> None:
        for q in self.queries:
            if q.result is None or not q.query.isActive:
                continue
            try:
                text = group_tasks(self.run.spark, tracker, str(q.query.runId))
            except Exception:  # noqa: BLE001 - the query ended meanwhile, or the JVM went away: the run says so
                continue
            if text and text != shown.get(q.name):
                shown[q.name] = text
                self.run.reporter.update("output", q.name, Progress.STREAMING, text)

    def _collect(self, executors: int) -> None:
        result, plan = self.run.result, self.run.plan
        result.startup_s = _startup(self.queries, result.started_at)
        for q in self.queries:
            if q.result is not None:
                q.result.observed = observed_load(q.query, executors)
                step = plan.output(q.name).step
                watermarked = self._reads_chain(step) and plan.chain_of(step) is None and step not in self.updating
                spark_held = _spark_held(q.query) if watermarked else None
                if spark_held is not None:
                    result.held[step] = spark_held
                q.result.duration_s = time.perf_counter() - self.began
                q.result.rows = q.sink.rows
                q.result.version = q.sink.version if q.sink.version is not None else q.result.previous_version
                q.result.status = OutputStatus.WRITTEN if q.sink.rows else OutputStatus.SKIPPED
                if q.sink.replayed:
                    self.run.reporter.update("output", q.name, q.result.status, f"{q.sink.replayed} replayed batch(es) skipped")
                side = q.sink.side
                step = plan.output(q.name).step
                # the operator's own refusals, besides the checks' (below): per step, as its records
                # name it (a row refused by several steps is recorded, and counted, at each)
                if QUARANTINE in side and side[QUARANTINE].rows:
                    own = side[QUARANTINE].rows - sum(c.quarantined for c in self.sink_checks.get(q.name, []))
                    if own:
                        result.quarantined[step] = result.quarantined.get(step, 0) + own
                if LATE in side and side[LATE].rows:
                    result.late[step] = result.late.get(step, 0) + side[LATE].rows
            elif q.name.startswith("_chain_"):
                self._collect_chain(q)
            elif q.name.startswith("_late_") and q.sink.rows:
                key = q.name.removeprefix("_late_")
                result.late[key] = result.late.get(key, 0) + q.sink.rows
        for fed_sink, fed in self.fed.values():
            fed.duration_s = time.perf_counter() - self.began
            fed.rows = fed_sink.rows
            fed.version = fed_sink.version if fed_sink.version is not None else fed.previous_version
            fed.status = OutputStatus.WRITTEN if fed_sink.rows else OutputStatus.SKIPPED
            self.run.reporter.update("output", fed.name, fed.status, f"written by the query of chained step '{fed.step}'")
        for query, operator in self.operators.items():
            found = result.output(query)
            if found is not None:
                found.observed.update(operator.figures)
            for change in getattr(operator, "rescales", ()):
                result.rescales.append({"step": operator.step, "output": query, **change})
            spreads = getattr(operator, "spreads", None)  # a per-micro-batch operator's partitions and executors
            if spreads:
                result.micro_batches[operator.step] = result.micro_batches.get(operator.step, []) + [
                    {"output": query, **spreads[b]} for b in sorted(spreads)
                ]
            held = operator.held()
            if held is not None:
                result.held[operator.step] = held
            per_batch = getattr(operator, "batches", None)  # an operator that models its state per micro-batch
            if per_batch:
                kind = kind_of(operator.spec)
                batches = [per_batch[b] for b in sorted(per_batch)]
                sizes = getattr(operator, "sizes", None)
                result.capacity.append(streaming_figures(operator.step, kind.name, kind.settings(operator.spec), batches, sizes))
        for check in self.checks:
            self.run.quality.results += check.results()
            if check.quarantined:
                result.quarantined[check.target] = result.quarantined.get(check.target, 0) + check.quarantined
        for auditor in self.auditors.values():
            for source in auditor.sources:
                for sink, counts in ((source.quarantine, result.quarantined), (source.late, result.late)):
                    if sink is not None and sink.rows:
                        counts[source.name] = sink.rows

    def _collect_chain(self, q: _Query) -> None:
        """A chained step's late and refused rows, under its name: each step of a chain says its own."""
        result, step = self.run.result, q.name.removeprefix("_chain_")
        side = q.sink.side
        if QUARANTINE in side and side[QUARANTINE].rows:
            result.quarantined[step] = result.quarantined.get(step, 0) + side[QUARANTINE].rows
        if LATE in side and side[LATE].rows:
            result.late[step] = result.late.get(step, 0) + side[LATE].rows
        self.run.reporter.update("step", step, Progress.STREAMING, f"{q.sink.rows:,} rows into its chain table")


def run_streaming(run: RunContext) -> None:
    StreamingRun(run).execute()


def _waiting(q: _Query) -> str:
    """What a continuous query is doing, for its progress line: its state and what it has done."""
    status = q.query.status or {}
    message = str(status.get("message") or "")
    state = "running a batch" if status.get("isTriggerActive") else (message[:1].lower() + message[1:]) or "starting"
    done = f"{q.sink.batches} batch(es), {q.sink.rows:,} rows written"
    last = q.query.lastProgress
    seen = sum(int(_get(s, "numInputRows") or 0) for s in (_get(last, "sources") or [])) if last else 0
    return f"{state} · {done}" + (f" · last trigger read {seen:,} rows" if last else " · no trigger finished yet")


def _startup(queries: list[_Query], started_at: float) -> float | None:
    """Seconds from the run's start to its first micro-batch (Spark's start and planning included)."""
    from datetime import datetime

    firsts = []
    for q in queries:
        progress = q.query.recentProgress or []
        stamp = _get(progress[0], "timestamp") if progress else None
        if stamp:
            firsts.append(datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp())
    return round(min(firsts) - started_at, 1) if firsts else None


def _spark_held(query: StreamingQuery) -> Held | None:
    """What a Spark stateful operator reading a chain still holds at the end (its state rows, e.g.
    the windows of an event-time aggregation its watermark has not passed), None when nothing."""
    last = query.lastProgress
    operators = (_get(last, "stateOperators") or []) if last else []
    rows = sum(int(_get(op, "numRowsTotal") or 0) for op in operators)
    if not rows:
        return None
    watermark = _get(_get(last, "eventTime") or {}, "watermark")
    return Held(rows, "groups in its stateful Spark operator (e.g. event-time windows)", str(watermark) if watermark else None)


#: a query reading a Python data source is started up to this many times when that source's Python
#: process did not connect back in time (Spark allows it 10 s; a busy machine can take longer)
_STARTS = 4
_PYTHON_SOURCE_LATE = "Python worker failed to connect back"


def _settle(q: _Query, timeout_s: float = 300.0) -> None:
    """Wait until a query that reads a Python data source has started its source (its first
    trigger ran, or it ended): Spark starts that source's Python process on the driver and allows
    it 10 s to connect, which several starting at once on a busy machine can miss."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and q.query.isActive and not q.query.recentProgress:
        time.sleep(0.2)


def _raise_if_failed(q: _Query) -> None:
    error = q.query.exception()
    if error is not None:
        text = str(getattr(error, "desc", error)).strip()
        message = raised_in_python(text) or text.splitlines()[0]  # a udf's error, not "raised by the Python Proxy"
        raise RunFailed(f"output '{q.name}': streaming query failed: {message}")


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


def _executors(spark: Any) -> int:
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect
        return 0


def _install_stop_handlers(stop: threading.Event) -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: dict[int, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, lambda *_: stop.set())
    return previous


def _restore_handlers(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def _streaming_hint(reason: str) -> str:
    """What to write instead of what Spark cannot stream (`reason`: the words of Spark's check)."""
    if reason.startswith("Sorting is not supported"):
        return (
            "drop the ORDER BY: a stream has no end to sort by, and a Delta table keeps no row order; "
            "sort where the output is read (tributary query ... order by), or run the pipeline with mode: batch"
        )
    return (
        "aggregate over event-time windows on a source with event_time and watermark, write it to an output with "
        "mode: merge and keys (its changed groups are merged each micro-batch), or run the pipeline with mode: batch"
    )
