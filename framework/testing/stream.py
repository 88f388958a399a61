"""An event-time scenario: deliveries landed one by one, the real stream run after each.

A stream's answer depends on when rows arrive, not only on which rows: a window closes by count,
by timeout or at the watermark; a join's row waits for its match or leaves unmatched; a context
waits for a missing input. So a scenario is run by the engine as a stream really runs, with no
stand-in for Spark: the pipeline runs over a scratch warehouse of its own (outputs, checkpoints,
run log, late rows, quarantine), each source is a JSON file source over a scratch folder typed
by the source's known columns, and each delivery lands its rows there as one file, then one
available-now run processes what is new (its micro-batches, its watermark, its state kept in the
checkpoints). After each run the test reads what the scratch tables hold so far and what the
run says the step still holds, and compares them with the delivery's expectations.

The runs of one scenario share their frames (framework.engine.streaming.KeptFrames): the first
delivery's run builds them (seconds: readers, steps, udfs), the next ones start their queries
over them again. Each delivery is still a run of its own, started and stopped: a query kept
running between deliveries could start a micro-batch while a delivery's files for several
sources are landing, and see one source's file but not another's.
"""

from __future__ import annotations

import json
import shutil
import time
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.errors import BadInput, TributaryError
from framework.project_context import ProjectContext
from framework.testing.batch import Outcome, compare_frame, test_context
from framework.testing.rows import compare
from framework.testing.suite import DeclaredTest, checked_node

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from framework.compiler import CompiledPipeline

#: the output a scenario adds when no output writes the checked step
TEST_OUTPUT = "tributary_test_rows"


def scenarios_folder(context: ProjectContext) -> Path | None:
    """The folder a project's scenarios run in, each in a folder of its own removed after it
    (`<scratch>/tests`); None when the scratch warehouse is not a local folder. The folders above
    a scenario's own are the test command's to remove (framework.testing.run): two scenarios run
    side by side, and only the command knows when the last one has ended."""
    scratch = context.warehouse(scratch=True)
    return Path(scratch.root) / "tests" if scratch.is_local() else None


def run_scenario(context: ProjectContext, compiled_all: CompiledPipeline, test: DeclaredTest, spark: SparkSession) -> Outcome:
    began = time.perf_counter()
    step, output = checked_node(compiled_all, test)
    assert test.spec.then is not None
    scenarios = scenarios_folder(context)
    if scenarios is None:
        scratch = context.warehouse(scratch=True).root
        raise BadInput(test.problem(f"a scenario runs in a local scratch folder; the profile's is {scratch}", "then"))
    folder = scenarios / f"{test.pipeline}.{test.name}"
    shutil.rmtree(folder, ignore_errors=True)
    profile = context.profile.model_copy(update={"warehouse": str(folder / "warehouse"), "scratch": None})
    about = replace(test_context(context, test, step), profile=profile)
    compiled, written = _scenario_pipeline(about.compiled, step, output, folder)
    from framework.engine.streaming import KeptFrames

    kept = KeptFrames()  # built by the first delivery's run, used by the next ones'
    outcome = Outcome(test)
    try:
        for i, delivery in enumerate(test.spec.then):
            for source, rows in delivery.rows.items():
                _land(
                    folder / "sources" / source / f"delivery-{i + 1:04d}.json",
                    test.rows(rows, context.project.root, "then", i, "rows", source),
                )
            try:
                result = about.run(compiled, spark=spark, kept=kept)
            except TributaryError as e:
                outcome.failure = f"delivery {i + 1}: the run stopped: {e}"
                break
            what = f"after delivery {i + 1}"
            warehouse = about.warehouse()
            expected = delivery.expected
            if expected is not None:
                table = _table(spark, about, compiled, written)
                rows = test.rows(expected.rows, context.project.root, "then", i, "emitted")
                columns = expected.columns or (table.columns if table is not None else [])
                _check(outcome, f"{what}: emitted", spark, table, rows, columns, expected.match == "exact")
            for key, table_name in (("late", "_tributary/late_rows"), ("quarantined", "_tributary/quarantine")):
                wanted = getattr(delivery, key)
                if wanted is not None:
                    table = _read(spark, about, warehouse.internal(table_name))
                    _check_side(outcome, f"{what}: {key}", table, wanted)
            held = result.held.get(step)
            if delivery.held is not None and (held.rows if held is not None else 0) != delivery.held:
                outcome.failure = f"{what}: held: expected {delivery.held} row(s), the step holds {held.rows if held else 0}" + (
                    f" ({held.what})" if held is not None else ""
                )
            if delivery.watermark is not None:
                mark = held.watermark if held is not None else None
                if mark is None or not _same_instant(mark, delivery.watermark):
                    outcome.failure = f"{what}: watermark: expected {delivery.watermark}, the stream's is {mark or 'not set'}"
            if not outcome.passed:
                break
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    outcome.seconds = time.perf_counter() - began
    return outcome


def _scenario_pipeline(compiled: CompiledPipeline, step: str, output: str | None, folder: Path) -> tuple[CompiledPipeline, str]:
    """The pipeline as the scenario runs it: each source a JSON file source over its scratch folder
    (typed by the source's known columns, with its event time and watermark), and an output
    writing the checked step (its own, else one added)."""
    from framework.io.sources import EVENT_TIME
    from framework.spec.models import FileSource, Output

    spec = compiled.spec
    sources = {}
    for name, source in spec.sources.items():
        derived = (
            source.event_time is not None
            and source.event_time != EVENT_TIME
            and EVENT_TIME not in [c.name for c in compiled.schemas[name].columns if not c.inferred]
        )
        columns = [c for c in compiled.schemas[name].columns if not (derived and c.name == EVENT_TIME)]
        ddl = ", ".join(f"`{c.name}` {c.type or 'STRING'}" for c in columns)
        landing = folder / "sources" / name
        landing.mkdir(parents=True, exist_ok=True)
        sources[name] = FileSource.model_validate(
            {
                "format": "json",
                "path": str(landing),
                "schema": ddl,
                "event_time": source.event_time,
                "watermark": source.watermark,
            }
        )
    outputs = dict(spec.outputs)
    written = output or next((o for o in spec.outputs if spec.output_step(o) == step), None)
    if written is None:
        written = TEST_OUTPUT
        outputs[written] = Output.model_validate({"from": step, "mode": "append"})
    rewritten = spec.model_copy(update={"sources": sources, "outputs": outputs})
    return replace(compiled, loaded=replace(compiled.loaded, spec=rewritten)), written


def _land(path: Path, rows: list[dict[str, Any]]) -> None:
    """One delivery's rows of a source as one JSON Lines file, landed whole (a stream never sees half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name("." + path.name)
    partial.write_text("".join(json.dumps(row, default=_json_value) + "\n" for row in rows), encoding="utf-8")
    partial.rename(path)


def _json_value(value: Any) -> str:
    return value.isoformat(sep=" ") if hasattr(value, "isoformat") else str(value)


def _table(spark: SparkSession, about: ProjectContext, compiled: CompiledPipeline, output: str) -> DataFrame | None:
    from framework.plan import plan_for

    table = next(o.table for o in plan_for(compiled, about.profile).outputs if o.name == output)
    return _read(spark, about, table)


def _read(spark: SparkSession, about: ProjectContext, table: str) -> DataFrame | None:
    from framework.io.delta import choose_store

    store = choose_store(spark, about.profile.delta_writer, about.profile.storage_options)
    return store.read(spark, table) if store.version(table) is not None else None


def _check(
    outcome: Outcome,
    what: str,
    spark: SparkSession,
    table: DataFrame | None,
    rows: list[dict[str, Any]],
    columns: list[str],
    exact: bool,
) -> None:
    if table is None:
        if rows:
            outcome.failure = f"{what}: expected {len(rows)} row(s), there are none (nothing was written)"
        return
    try:
        difference = compare_frame(spark, table, rows, columns, exact)
    except BadInput as e:
        outcome.failure = f"{what}: {e}"
        return
    if not difference.matches:
        outcome.differences.append((what, difference))


def _check_side(outcome: Outcome, what: str, table: DataFrame | None, wanted: int | list[dict[str, Any]]) -> None:
    """Late or quarantined rows: each recorded row is its table's columns (source, steps, reason,
    ...) and its record's (the row as it came, kept as JSON); compared as text on the columns the
    expected rows name, or counted."""
    if isinstance(wanted, int):
        found_rows = table.count() if table is not None else 0
        if found_rows != wanted:
            outcome.failure = f"{what}: expected {wanted} row(s), there are {found_rows}"
        return
    columns = list(dict.fromkeys(c for row in wanted for c in row))
    found = []
    for row in table.collect() if table is not None else []:
        values = row.asDict()
        record = values.get("record")
        if isinstance(record, str) and record.startswith("{"):
            with suppress(json.JSONDecodeError):
                values = {**json.loads(record), **{k: v for k, v in values.items() if k != "record"}}
        found.append(tuple(_as_text(_get(values, c)) for c in columns))
    expected = [tuple(_as_text(_get(row, c)) for c in columns) for row in wanted]
    difference = compare(columns, expected, found, exact=False)
    if not difference.matches:
        outcome.differences.append((what, difference))


def _get(row: dict[str, Any], column: str) -> Any:
    return row.get(column, next((v for k, v in row.items() if k.lower() == column.lower()), None))


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "isoformat"):
        return value.isoformat(sep=" ")
    return str(value)


def _same_instant(mark: str, expected: str) -> bool:
    from datetime import UTC, datetime

    def parse(text: str) -> datetime:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

    try:
        return parse(mark) == parse(expected)
    except ValueError:
        return False
