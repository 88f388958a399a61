"""A stream resumes only with the stateful queries and the sources it started with.

Spark keeps a stream's state (an aggregation's groups, a stream-stream join's buffers, DISTINCT's
seen rows) in its checkpoint, shaped by the query that built it, and each query's offsets per
source. Resumed after the query changed, Spark carries the old state on under the new query:
a join's window widened from 30 s to 60 s found none of the matches the state had already let go
(464 of 1,070 pairs lost, exit 0), and a window aggregation from 1 to 2 minutes counted half of
what a fresh run counts. Resumed after a source was added to an output's query, Spark stops with
its own message ("There are [1] sources in the checkpoint offsets and now there are [2]"), exit 1,
after the other outputs' queries may have committed.

So the first run pins, beside the checkpoints, each stateful step's definition (a SQL step whose
query aggregates, joins or takes DISTINCT: its rendered query; a `join` step: its settings) and
the sources each output reads; a later run compares before any query starts, and a difference is
bad input at the step or output, with the way out (`--full-refresh` starts the stream over; the
outputs keep their history). A stateless step may change: its new query applies to the rows read
from then on. Steps that run per micro-batch (swa, group, tumbling, count-window joins) carry
state of their own, the rows of their windows or groups still open: their settings are pinned too
(an SWA `size` changed from 3 to 4 went on with the held tuples into size-4 windows, after
size-3 ones were emitted: windows no run of either size makes), all but `partitions:` (a stream
may rescale) and `truth:` (only measured against).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from framework.engine.source_pins import read_pins, write_pins
from framework.errors import BadInput, Problem
from framework.operators import kind_of
from framework.operators.registry import Streaming

if TYPE_CHECKING:
    from framework.engine.context import RunContext

PINS_FILE = "_stateful_queries.json"
#: settings of a per-micro-batch step that may change between runs of its stream
FREE = ("partitions", "truth")
HINT = (
    "a stream resumes only with the queries and sources its state was built with: run again with "
    "--full-refresh to start it over (the outputs keep their history), or give the step back its former definition"
)


def check_stateful_queries(run: RunContext) -> None:
    """Bad input when a stateful step's definition, or an output's sources, changed since the
    stream's first run (nothing pinned yet: nothing to compare)."""
    pinned = _read(run)
    if run.plan.full_refresh or pinned is None:
        return
    now = pins(run)
    problems: list[Problem] = []
    for step, definition in now["steps"].items():
        before = pinned.get("steps", {}).get(step)
        if before is None and isinstance(definition, str) and (resumed := _resumed_outputs(run, pinned, step)):
            message = (
                f"step '{step}' keeps state in this stream now (an aggregation, a join or DISTINCT), and it did not when "
                f"the stream of output '{resumed[0]}' started: its checkpoint holds no state for it (Spark stops with "
                "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY)"
            )
            problems.append(run.problem(message, ("steps", step), hint=HINT))
            continue
        if before is None or before == definition:
            continue
        if isinstance(definition, dict) and isinstance(before, dict):  # a per-micro-batch step's settings
            changed = sorted(k for k in definition.keys() | before.keys() if definition.get(k) != before.get(k))
            said = ", ".join(f"{k}: {_short(before.get(k))} → {_short(definition.get(k))}" for k in changed)
            message = (
                f"step '{step}' holds rows in this stream (those of its windows or groups still open), and its settings "
                f"changed since the stream's state was written ({said}): the rows it holds were gathered under the former ones"
            )
            kind = kind_of(run.compiled.spec.steps[step]).name
            problems.append(run.problem(message, ("steps", step, kind, changed[0]), hint=HINT))
        else:
            message = (
                f"step '{step}' keeps state in this stream (an aggregation, a join or DISTINCT), and its definition "
                "changed since the stream's checkpoints were written: Spark would carry on the state the former one built"
            )
            problems.append(run.problem(message, ("steps", step), hint=HINT))
    for output, sources in now["outputs"].items():
        before = pinned.get("outputs", {}).get(output)
        if before is not None and before != sources:
            problems.append(
                run.problem(
                    f"output '{output}' reads the sources {sources} now, and {before} when its stream started: "
                    "its checkpoint holds offsets for those",
                    ("outputs", output),
                    hint=HINT.replace("give the step back its former definition", "read the former sources"),
                )
            )
    if problems:
        raise BadInput(*problems)


def _resumed_outputs(run: RunContext, pinned: dict[str, Any], step: str) -> list[str]:
    """The outputs reading `step` whose streams ran before (their checkpoints go on)."""
    graph = run.compiled.graph
    return [
        output.name
        for output in run.plan.outputs
        if output.name in pinned.get("outputs", {}) and (step == output.step or step in graph.upstream(output.step))
    ]


def pin_stateful_queries(run: RunContext) -> None:
    """Keep the stateful steps' definitions and the outputs' sources beside the checkpoints (new
    ones added, the ones pinned kept: they are what the state was built with)."""
    pinned = _read(run) or {"steps": {}, "outputs": {}}
    now = pins(run)
    merged = {key: now[key] | pinned.get(key, {}) for key in ("steps", "outputs")}
    if merged != pinned:
        write_pins(run, PINS_FILE, merged)


def pins(run: RunContext) -> dict[str, dict[str, Any]]:
    """{"steps": {step: digest of its definition, or a per-micro-batch step's settings}, "outputs":
    {output: [sources it reads]}}."""
    compiled = run.compiled
    graph, steps = compiled.graph, compiled.spec.steps
    found: dict[str, Any] = {}
    for name in graph.steps:
        step = steps[name]
        query = compiled.sql[name].text if name in compiled.sql else None
        kind = kind_of(step)
        if kind.keeps_spark_state(step, query):
            definition = (
                " ".join(query.split()) if query is not None else json.dumps(step.model_dump(mode="json"), sort_keys=True)
            )
            found[name] = _digest(definition)
        elif kind.streaming(step) is Streaming.PER_MICRO_BATCH:  # its settings as they are: a change is named
            settings = kind.settings(step).model_dump(mode="json")
            found[name] = {k: v for k, v in settings.items() if k not in FREE}
    outputs = {
        output.name: sorted(node for node in graph.upstream(output.step) if graph.kinds[node] == "source")
        for output in run.plan.outputs
    }
    return {"steps": found, "outputs": outputs}


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _read(run: RunContext) -> dict[str, dict[str, Any]] | None:
    pinned: dict[str, dict[str, Any]] | None = read_pins(run, PINS_FILE)
    return pinned
