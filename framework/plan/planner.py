"""Compiled pipeline → run plan (framework.plan.model). No Spark: `tributary plan` shows it."""

from __future__ import annotations

from dataclasses import replace

from framework.compiler import CompiledPipeline
from framework.errors import BadInput
from framework.io.locations import Warehouse, in_scratch, link_problems, output_location, scratch_warehouse
from framework.io.sources import source_location
from framework.operators.registry import Streaming, kind_of
from framework.plan.model import (
    CHAINS_DIR,
    Chain,
    CheckScope,
    PlannedOutput,
    PlannedSource,
    PlannedStep,
    QuarantineSplit,
    RunMode,
    RunPlan,
    Sample,
)
from framework.profiles import Profile


def plan_for(compiled: CompiledPipeline, profile: Profile, full_refresh: bool = False, limit: int | None = None) -> RunPlan:
    """The plan of a run under a profile, or of a try over each source's first `limit` rows."""
    if limit is not None and limit < 1:
        raise BadInput(f"--limit {limit}: a try reads at least 1 row of each source")
    warehouse = Warehouse.of(compiled.project, profile)
    scratch = scratch_warehouse(compiled.project, profile) if limit is not None else None
    return plan_run(compiled, warehouse, full_refresh, limit, scratch)


def plan_run(
    compiled: CompiledPipeline,
    warehouse: Warehouse,
    full_refresh: bool = False,
    limit: int | None = None,
    scratch: Warehouse | None = None,
) -> RunPlan:
    """The run of the compiled pipeline's selection; with `limit` (and the `scratch` warehouse), a
    try over each source's first `limit` rows (model.Sample)."""
    spec, graph = compiled.spec, compiled.graph
    mode = RunMode(spec.mode)
    sample = None
    if limit is not None:
        assert scratch is not None, "a try writes into a scratch warehouse"
        sample, mode, full_refresh = Sample(limit, warehouse), RunMode.BATCH, True
    needed: set[str] = set()
    for step in compiled.selected:
        needed |= {step} | graph.upstream(step)
    order = tuple(n for n in graph.order() if n in needed)
    selected_outputs = compiled.selected_outputs()
    written_by = {o: spec.output_step(o) for o in selected_outputs}

    def readers(node: str) -> int:
        return graph.readers_count(node, needed) + sum(step == node for step in written_by.values())

    steps: list[PlannedStep] = []
    for name in order:
        if name in spec.sources:
            continue
        step = spec.steps[name]
        planned = PlannedStep(
            name, kind_of(step), step, graph.inputs[name], compiled.sql.get(name), readers(name), name in compiled.selected
        )
        if planned.drops_rows:
            planned = replace(planned, split_by=_only_reader(compiled, name, needed))
        if mode is RunMode.STREAMING and graph.readers_count(name, needed):
            planned = replace(planned, chain=_chain(compiled, warehouse, planned, steps))
        steps.append(planned)

    outputs = []
    for name, step_name in written_by.items():
        output = spec.outputs[name]
        table = output_table(compiled, warehouse, name)
        if sample is not None:
            assert scratch is not None
            table = in_scratch(warehouse, scratch, table)
        if any(e.on == "rows" and e.severity == "drop" for e in output.expectations):
            split: QuarantineSplit | None = QuarantineSplit(name, CheckScope.OUTPUT)
        elif next((s.split_by for s in steps if s.name == step_name), None) == name:
            split = QuarantineSplit(step_name, CheckScope.STEP)
        else:
            split = None
        planned_output = PlannedOutput(
            name,
            step_name,
            table,
            "overwrite" if full_refresh and mode is RunMode.BATCH else output.mode,
            tuple(output.keys),
            tuple(output.partition_by),
            tuple(output.expectations),
            split,
            (spec.sliced_by(name) or None) if sample is None and compiled.interval is not None else None,
        )
        outputs.append(planned_output)

    sources = tuple(
        PlannedSource(
            name,
            spec.sources[name],
            source_location(compiled.project, warehouse, spec.sources[name]),
            tuple(s.name for s in steps if name in s.inputs),
            limit,
        )
        for name in order
        if name in spec.sources
    )
    written = scratch if sample is not None and scratch is not None else warehouse
    problems = link_problems(written, {o.name: o.table for o in outputs})
    if problems:
        raise BadInput(*problems)
    return RunPlan(spec.name, mode, written, full_refresh, sources, tuple(steps), tuple(outputs), order, sample)


def _chain(compiled: CompiledPipeline, warehouse: Warehouse, step: PlannedStep, earlier: list[PlannedStep]) -> Chain | None:
    """A per-micro-batch step other steps read on a stream: its internal table, and the watermark
    its readers see (the delay behind its inputs plus the kind's emission lag)."""
    kind = step.kind
    if kind.streaming(step.spec) is not Streaming.PER_MICRO_BATCH or kind.chain_time is None:
        return None
    event_time, lag = kind.chain_time(step.spec)
    columns = compiled.schemas.get(step.name)
    if event_time is not None and columns is not None and columns.complete and columns.find(event_time) is None:
        event_time = None  # e.g. a group function that does not return the event-time column
    return Chain(
        warehouse.internal(f"{CHAINS_DIR}/{compiled.spec.name}/{step.name}"),
        event_time,
        max((_delay(compiled, i, earlier) for i in step.inputs), default=0.0),
        lag,
    )


def _delay(compiled: CompiledPipeline, node: str, earlier: list[PlannedStep]) -> float:
    """The largest watermark delay of what `node` reads: a source's own, a chain's, or its inputs'."""
    spec = compiled.spec
    if node in spec.sources:
        return spec.sources[node].watermark or 0.0
    step = next(s for s in earlier if s.name == node)
    if step.chain is not None:
        return step.chain.delay_s
    return max((_delay(compiled, i, earlier) for i in step.inputs), default=0.0)


def output_table(compiled: CompiledPipeline, warehouse: Warehouse, output: str) -> str:
    return output_location(compiled.project, warehouse, output, compiled.spec.outputs[output])


def _only_reader(compiled: CompiledPipeline, step: str, needed: set[str]) -> str | None:
    """The output that stages the step's rows as they are, when it is their only reader and has no
    row checks of its own: its write can split off the rows the step's expectations refuse."""
    spec = compiled.spec
    writers = [o for o in compiled.selected_outputs() if spec.output_step(o) == step]
    if compiled.graph.readers_count(step, needed) or len(writers) != 1:
        return None
    return None if any(e.on == "rows" for e in spec.outputs[writers[0]].expectations) else writers[0]
