"""A batch run's writes as one unit: stage every output, then commit them all, or none stay.

1. stage: Spark computes each output into Parquet under <warehouse>/_tributary/staging/<run id>
   (nothing is visible to readers yet); rows the quality gate or the steps refused are staged for
   the quarantine table the same way;
2. commit: each output in one Delta transaction; if a commit fails, the outputs this run already
   committed are restored to their previous version.

Each commit carries a Delta application transaction id, tributary/<pipeline>/<output>/<run key>:
the run key hashes the spec, the rendered SQL, the vars and the input files or versions, and a run
with a time interval starts it with the interval (20261024T2200Z-20261024T2300Z-<hash>), so each
interval's commits carry their own ids. One rule for every output and the quarantine: an
identical run commits nothing. An append or merge (and the quarantine) is skipped when its id is
in the table's log and its commit still holds (its rows are there); an overwrite only when the
table's latest commit carries it (a newer write in between is replaced again, with a higher
transaction version, so an old run never masks a newer table). A commit that a RESTORE undid (a
run killed between two commits is undone by the next one, framework.engine.recovery) holds
nothing: Delta keeps its transaction id, so the rerun commits with the next transaction version.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from framework.engine.context import RunContext, quietly
from framework.engine.failures import is_spark_error, one_line, spark_failure
from framework.engine.frames import Frames
from framework.engine.results import OutputResult, OutputStatus, Progress
from framework.engine.task_progress import task_progress
from framework.errors import BadInput, Problem, RunFailed
from framework.functions.loader import udfs_files
from framework.io import staging as staging_files
from framework.io.delta.base import DeltaStore, Slice, WriteMode
from framework.io.locations import QUARANTINE_TABLE, is_uri
from framework.operators.context import Rejected, quarantine_records, quarantine_shape
from framework.plan.model import CheckScope, PlannedOutput, QuarantineSplit
from framework.quality.gate import MASK
from framework.spec.models import DeltaSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from framework.compiler import CompiledPipeline
    from framework.io.delta.base import StagedWrite
    from framework.plan.model import RunPlan

QUARANTINE_OUTPUT = "_quarantine"


@dataclass
class Staged:
    """An output computed and written to staging, waiting for its commit."""

    result: OutputResult
    write: StagedWrite
    keys: tuple[str, ...] = ()
    txn_version: int = 0  # overwrite: above any earlier commit of the same id (see the module's docstring)
    where: Slice | None = None  # an interval-sliced output: the rows its commit replaces


def stage_outputs(run: RunContext, frames: Frames) -> list[Staged]:
    """Every output of the plan in staging (an output an identical run wrote is skipped)."""
    store, key = run.store, run_key(run)
    if run.plan.full_refresh:
        key += "-refresh"  # a rebuild is not the append or merge an identical plain run made
    staged = []
    for output in run.plan.outputs:
        result = OutputResult(output.name, output.step, output.table, output.mode, previous_version=store.version(output.table))
        run.result.outputs.append(result)
        result.app_id = f"tributary/{run.pipeline}/{output.name}/{key}"
        where = _slice(run, output)
        if _already_written(run, result, where is not None):
            continue
        run.reporter.update("output", output.name, Progress.COMPUTING)
        began = time.perf_counter()
        frame = frames.output_frame(output)
        split = MASK if MASK in frame.columns else None
        existing = store.schema(output.table) if output.mode == "append" else None
        if existing is not None:
            frame = frame.select(*[_match_column(frame.columns, f.name) for f in existing.fields], *([MASK] if split else []))
        moving = task_progress(run.spark, partial(run.reporter.update, "output", output.name, Progress.COMPUTING))
        try:
            with moving:
                write = store.stage(
                    frame, output.name, output.table, run.staging(output.name), list(output.partition_by), split_by=split
                )
        except Exception as e:
            if is_spark_error(e):
                raise RunFailed(spark_failure(run, e, output.step)) from e
            raise
        checked = output.split or (
            QuarantineSplit(output.name, CheckScope.OUTPUT) if any(e.on == "rows" for e in output.expectations) else None
        )
        if checked is not None:  # the write holds the checked rows: uniqueness is counted from its keys
            run.quality.staged(checked.target, checked.scope, write)
        if split and output.split is not None:
            target, scope = output.split.target, output.split.scope
            rows = run.quality.quarantined(target, scope, store.read_split_off(frame.sparkSession, write, frame.schema))
            source = target if scope is CheckScope.STEP else f"output:{target}"  # as the quarantine names it
            run.rejected.append(Rejected(source, rows, known=write.split_rows))
        result.rows, result.duration_s = write.rows, time.perf_counter() - began
        if where is not None:
            _check_slice(frame.sparkSession, write, where, output.name)
        if output.mode == "merge":
            _check_unique_keys(frame.sparkSession, write, list(output.keys), output.name)
        if output.mode == "overwrite" and result.previous_version is not None:
            txn_version = result.previous_version + 1
        else:  # above the id's version in the log, if a commit of it was undone since
            done = store.transaction_version(output.table, result.app_id) if result.previous_version is not None else None
            txn_version = 0 if done is None else done + 1
        staged.append(Staged(result, write, output.keys, txn_version, where))
        run.reporter.update("output", output.name, Progress.STAGED, f"{write.rows:,} rows")
    return staged


def _slice(run: RunContext, output: PlannedOutput) -> Slice | None:
    interval = run.compiled.interval
    if output.slice_by is None or interval is None:
        return None
    return Slice(output.slice_by, interval.start, interval.end, interval.timezone)


def _check_slice(spark: SparkSession, write: StagedWrite, where: Slice, output: str) -> None:
    """Every row of a sliced output lies in the run's interval: a row outside it would never be
    replaced by a rerun of its own interval (and delta-rs would refuse the commit)."""
    try:
        condition = where.spark_sql(write.schema)
    except ValueError as e:
        raise BadInput(
            Problem(
                f"output '{output}' is sliced by interval on '{where.column}', and {e}",
                hint="interval: {column: ...} names a DATE or TIMESTAMP column of the output (a DATE for whole-day intervals)",
            )
        ) from None
    if not write.files:
        return
    reader = spark.read.schema(write.schema)
    if write.partition_by:
        reader = reader.option("basePath", write.staging)
    outside = reader.parquet(write.staging).where(f"NOT coalesce({condition}, false)")
    count = outside.count()
    if count:
        sample = ", ".join(str(row[0]) for row in outside.select(f"`{where.column}`").limit(3).collect())
        raise RunFailed(
            f"output '{output}': {count:,} row(s) lie outside the run's interval by '{where.column}' (e.g. {sample}); "
            f"an interval's run replaces the rows with {condition}, so they would never be replaced; filter the step "
            "on the interval (e.g. where day >= {{ interval_start.date() }} and day < {{ interval_end.date() }})"
        )


def _already_written(run: RunContext, result: OutputResult, sliced: bool = False) -> bool:
    """Whether an identical run's commit already holds this output's rows (then it is skipped):
    for an interval-sliced output, the newest commit of its interval."""
    if result.previous_version is None:
        return False
    if sliced:
        prefix = f"tributary/{run.pipeline}/{result.name}/{run.compiled.interval.tag}-"  # type: ignore[union-attr]
        writer = run.store.written_by_slice(result.table, result.app_id, prefix)
    else:
        # an append's rows stay in the table; an overwrite's and a merge's values only while no later commit replaced them
        writer = run.store.written_by(result.table, result.app_id, latest_only=result.mode in ("overwrite", "merge"))
    if writer is None:
        return False
    result.status, result.version, result.written_by = OutputStatus.SKIPPED, result.previous_version, writer
    run.reporter.update("output", result.name, OutputStatus.SKIPPED, f"unchanged, already written by run {writer}")
    return True


def stage_quarantine(run: RunContext, frames: Frames) -> list[Staged]:
    """Malformed source records and rows steps or expectations turned away, with the reason, for
    <warehouse>/_tributary/quarantine. Step rows are only recomputed when the run counted some."""
    from pyspark.sql import functions as F

    bad = [(name, s) for name, s in frames.sources.items() if (s.bad_count() or 0) > 0]
    rejected = [r for r in run.rejected if (r.count() or 0) > 0]
    if not bad and not rejected:
        return []
    parts = [
        s.quarantined().select(  # type: ignore[union-attr]
            F.lit(name).alias("source"), "file", "line", "record", "reason", F.lit(None).cast("string").alias("expectation")
        )
        for name, s in bad
    ]
    parts += [quarantine_shape(r.rows, r.step) for r in rejected]
    frame = parts[0]
    for other in parts[1:]:
        frame = frame.unionByName(other)
    frame = quarantine_records(frame, run.run_id, run.pipeline)
    table = run.internal(QUARANTINE_TABLE)
    result = OutputResult(QUARANTINE_OUTPUT, "-", table, "append", previous_version=run.store.version(table))
    result.app_id = f"tributary/{run.pipeline}/{QUARANTINE_OUTPUT}/{run_key(run)}"
    if _already_written(run, result):
        run.result.outputs.append(result)
        return []
    write = run.store.stage(frame, result.name, table, run.staging(result.name), [])
    result.rows = write.rows
    run.result.quarantined = {name: s.bad_count() or 0 for name, s in bad}
    for r in rejected:
        run.result.quarantined[r.step] = run.result.quarantined.get(r.step, 0) + (r.count() or 0)
    run.result.outputs.append(result)
    run.reporter.update("output", result.name, Progress.STAGED, f"{write.rows:,} quarantined rows")
    return [Staged(result, write)]


def commit_all(run: RunContext, staged: list[Staged]) -> None:
    """Commit the staged writes in order; on a failure, restore the ones already committed."""
    committed: list[OutputResult] = []
    for item in staged:
        result = item.result
        try:
            run.reporter.update("output", result.name, Progress.COMMITTING)
            outcome = run.store.commit(
                run.spark,
                item.write,
                cast(WriteMode, result.mode),
                list(item.keys),
                result.app_id,
                item.txn_version,
                run.run_id,
                where=item.where,
            )
        except BaseException:
            result.status = OutputStatus.FAILED
            for done in reversed(committed):
                _roll_back(run, done)
            raise
        result.version = outcome.version
        result.status = OutputStatus.SKIPPED if outcome.skipped else OutputStatus.WRITTEN
        committed.append(result)
        said = f"version {outcome.version}" + (f"; {outcome.note}" if outcome.note else "")
        run.reporter.update("output", result.name, result.status, said)


def _roll_back(run: RunContext, done: OutputResult) -> None:
    """Restore an output this failed run committed. When the restore fails too (the outage that
    failed the run's next commit), the output says so and keeps its version in the run log, and
    the next run of the pipeline restores it (framework.engine.recovery)."""
    try:
        run.store.restore(done.table, done.previous_version)
    except Exception as e:  # noqa: BLE001 - the run's own error is raised after this; this one is said
        done.status = OutputStatus.NOT_ROLLED_BACK
        run.reporter.update(
            "output",
            done.name,
            done.status,
            f"still at version {done.version}, this run's commit: restoring version {done.previous_version} failed "
            f"({one_line(e)}); the next run of the pipeline restores it",
        )
        return
    done.status = OutputStatus.ROLLED_BACK


def discard(run: RunContext, staged: list[Staged]) -> None:
    for item in staged:
        quietly(partial(run.store.discard, item.write))


def run_key(run: RunContext) -> str:
    """Identifies 'the same batch run': same spec, rendered SQL, vars and input files/versions."""
    if run.key is None:
        run.key = _run_key(run)
    return run.key


def _run_key(run: RunContext) -> str:
    compiled = run.compiled
    fingerprint: dict[str, Any] = {
        "spec": compiled.spec.model_dump(mode="json", by_alias=True, exclude={"tests"}),  # tests run nothing
        "sql": {k: v.text for k, v in sorted(compiled.sql.items())},
        "vars": compiled.variables,
        "inputs": {},
    }
    if compiled.interval is not None:
        fingerprint["interval"] = [compiled.interval.start.isoformat(), compiled.interval.end.isoformat()]
    if run.plan.sample is not None:  # a try over other first rows is another run
        fingerprint["limit"] = run.plan.sample.rows
    code = udfs_code(compiled)
    if code is not None:  # an edited function of udfs/ is another run of the pipelines that call it
        fingerprint["udfs"] = code
    fingerprint["inputs"] = input_fingerprint(run.plan, run.store)
    run.result.inputs_key = inputs_key(fingerprint["inputs"])
    digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()
    return f"{compiled.interval.tag}-{digest[:20]}" if compiled.interval is not None else digest[:20]


def definition_key(compiled: CompiledPipeline) -> str:
    """A short hash of what a run computes, apart from its inputs: the spec, the rendered SQL, the
    vars and the udfs/ it calls. A committed interval whose definition hashes otherwise now was
    computed by another version of the pipeline (`tributary runs` says so)."""
    fingerprint = {
        "spec": compiled.spec.model_dump(mode="json", by_alias=True, exclude={"tests"}),
        "sql": {k: v.text for k, v in sorted(compiled.sql.items())},
        "vars": compiled.variables,
        "udfs": udfs_code(compiled),
    }
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()[:20]


def udfs_code(compiled: CompiledPipeline) -> str | None:
    """A digest of udfs/ when the pipeline calls one of its functions (a SQL function in a step's
    SQL or in the spec's expressions, or a group step's function); None when it calls none, so an
    edit there is not a new run of pipelines that do not use it (an append would add its rows again)."""
    functions = compiled.functions
    said = (" ".join(sql.text for sql in compiled.sql.values()) + json.dumps(compiled.spec.model_dump(mode="json"))).lower()
    called = any(re.search(rf"\b{re.escape(name.lower())}\s*\(", said) for name in functions.sql)
    grouped = any(getattr(step, "function", None) in functions.group for step in compiled.spec.steps.values())
    if not (called or grouped):
        return None
    digest = hashlib.sha256()
    folder = compiled.project.udfs_dir
    for file in udfs_files(folder):  # one module may import another, also from a subfolder
        digest.update(file.relative_to(folder).as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def input_fingerprint(plan: RunPlan, store: DeltaStore) -> dict[str, Any]:
    """Per source: its files (path, size, modification time) or its Delta version."""
    found: dict[str, Any] = {}
    for source in sorted(plan.sources, key=lambda s: s.name):
        spec = source.spec
        if isinstance(spec, DeltaSource):
            found[source.name] = (
                spec.version if spec.version is not None else str(spec.timestamp or store.version(source.location))
            )
        else:
            found[source.name] = _file_fingerprint(source.location)
    return found


def inputs_key(fingerprint: dict[str, Any]) -> str:
    """A short hash of an input fingerprint: a committed interval whose inputs hash otherwise now is stale."""
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _match_column(columns: list[str], name: str) -> str:
    for c in columns:
        if c.lower() == name.lower():
            return f"`{c}`"
    return f"`{name}`"


def _check_unique_keys(spark: SparkSession, write: StagedWrite, keys: list[str], output: str) -> None:
    dupes = DeltaStore.repeated_keys(spark, write, keys)
    if dupes:
        sample = ", ".join(str(key) for key in dupes)
        raise RunFailed(f"output '{output}': merge keys {keys} are not unique in the new rows (e.g. {sample})")


def _file_fingerprint(location: str) -> Any:
    try:
        import glob as globbing

        import pyarrow.fs as pafs

        fs, root = staging_files.filesystem(location)
        paths = globbing.glob(root) if not is_uri(location) and globbing.has_magic(root) else [root]
        entries = []
        for path in paths:
            info = fs.get_file_info(path)
            infos = fs.get_file_info(pafs.FileSelector(path, recursive=True)) if info.type == pafs.FileType.Directory else [info]
            entries += [(i.path, i.size, i.mtime_ns) for i in infos if i.type == pafs.FileType.File]
        return sorted(entries)
    except Exception:  # noqa: BLE001 - unlistable input: never treat two runs as the same
        return uuid.uuid4().hex
