"""Predicted and observed state of a run's `swa` and `tumbling` steps (framework.integration.capacity).

Batch: the prediction reads the step's input in one aggregation; the observation reads only the
window columns of the Parquet files the step's output staged, with pyarrow, so the windows are
not computed twice. A step whose windows are not an output of the run (a SQL step reads them),
or whose output an identical run already wrote, is predicted but not observed; the figures say so.

Streaming: the SWA operator reports each micro-batch's closed windows and the state it holds at
the batch's end (framework.operators.swa.stream: its `batches`); per batch the model takes λ and 1/μ from the
windows that closed, predicts the open windows and compares them with the state held.

Figures never fail a run: a measurement that cannot be made is a note in the figures.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from framework.engine.context import RunContext
from framework.engine.frames import Frames
from framework.integration.capacity import WINDOW_COLUMNS, Figures, input_load, observe, predict
from framework.integration.learned_sizes import describe
from framework.io import staging as staging_files
from framework.operators import StepContext, kind_of
from framework.operators.keyed_windows import checked_input
from framework.operators.window_sizes import with_sizes
from framework.spec.steps import AUTO

if TYPE_CHECKING:
    from framework.engine.transaction import Staged


def window_steps(run: RunContext) -> list[Any]:
    """The run's selected steps that hold tuples in keyed windows (their kind has `units`)."""
    return [s for s in run.plan.steps if s.selected and s.kind.units is not None]


def measure_batch(run: RunContext, frames: Frames, staged: list[Staged]) -> None:
    for step in window_steps(run):
        spec = step.kind.settings(step.spec)
        figures = Figures(step.name, step.spec.kind, spec.size, getattr(spec, "timeout", None))
        try:
            figures, bytes_per_tuple, timeout_s = predicted(frames.contexts[step.name])
            windows = _staged_windows(step.name, staged)
            if windows is None:
                figures.notes.append("not observed: the step's windows are not an output written by this run")
            else:
                figures.observed = observe(figures.model, _number(figures.size), timeout_s, windows, bytes_per_tuple)
        except Exception as e:  # noqa: BLE001 - figures must not fail a run that wrote its outputs
            figures.notes.append(f"not measured: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
        run.result.capacity.append(figures)


def predicted(context: StepContext) -> tuple[Figures, float, float | None]:
    """A window step's figures with the model's prediction from its input (one aggregation), the
    bytes a tuple takes, and the timeout to observe its windows with (learned timeouts: the
    fallback's, an approximation the notes mention)."""
    spec = kind_of(context.spec).settings(context.spec)
    probe = StepContext(context.spark, context.name, context.spec, context.inputs)  # its own quarantine list
    rows = checked_input(probe)
    sizes = context.sizes if getattr(spec, "learns", False) else None
    if sizes is not None:
        rows = with_sizes(rows, spec, sizes)
    load = input_load(rows, spec)
    figures = Figures(context.name, context.spec.kind, spec.size, getattr(spec, "timeout", None))
    size = sizes.fallback[0] if sizes is not None and spec.size == AUTO else int(spec.size)
    figures.predicted, figures.notes = predict(figures.model, size, load)
    timeout_s = getattr(spec, "timeout", None)
    if sizes is not None:
        figures.notes.insert(0, f"size: auto / timeout: auto: {describe(sizes)}")
        if spec.timeout == AUTO:
            timeout_s = sizes.fallback[1] / 1e6
            figures.notes.append(f"observed lifetimes of windows closed by timeout use t = {timeout_s:g} s (the fallback)")
    return figures, load.bytes_per_tuple, timeout_s


def _number(size: int | str) -> int:
    return size if isinstance(size, int) else 0


def _staged_windows(step: str, staged: list[Staged]) -> Any:
    """The window columns of the step's staged output rows (a pyarrow Table), or None."""
    import pyarrow.parquet as pq

    for item in staged:
        write = item.write
        if item.result.step != step or any(c in write.partition_by for c in WINDOW_COLUMNS):
            continue
        fs, root = staging_files.filesystem(write.staging)
        paths = [f"{root}/{f['path']}" for f in write.files]
        if not paths:
            return None
        return pq.ParquetDataset(paths, filesystem=fs).read(columns=list(WINDOW_COLUMNS))
    return None


def streaming_figures(step: str, kind: str, spec: Any, batches: list[dict[str, Any]], sizes: Any = None) -> Figures:
    """Per micro-batch: the model on the batch's closed windows next to the state held at its end
    (`kind`: the step's kind, `spec` its settings)."""
    figures = Figures(step, kind, spec.size, spec.timeout, batches=[])
    size = sizes.fallback[0] if sizes is not None and spec.size == AUTO else _number(spec.size)
    for batch in batches:
        advance, closed = batch.get("advance_s") or 0.0, batch.get("windows_closed") or 0
        entry = {
            "batch": batch["batch"],
            "open_windows": batch.get("open_windows"),
            "state_rows": batch.get("state_rows"),
            "windows_closed": closed,
        }
        if advance > 0 and closed:
            rate, lifetime = closed / advance, batch["lifetime_sum_s"] / closed
            entry.update(
                instances_per_s=rate, lifetime_s=lifetime, predicted_open_windows=math.floor(round(rate * lifetime, 9)) + 1
            )
        figures.batches.append(entry)
    modelled = [b for b in figures.batches if "predicted_open_windows" in b]
    if modelled:
        figures.predicted = {
            "open_windows": float(sum(b["predicted_open_windows"] for b in modelled) / len(modelled)),
            "instances_per_s": sum(b["instances_per_s"] for b in modelled) / len(modelled),
            "lifetime_s": sum(b["lifetime_s"] for b in modelled) / len(modelled),
        }
        figures.predicted["tuples_held"] = figures.predicted["open_windows"] * size
        figures.observed = {
            "open_windows_mean": float(sum(b["open_windows"] or 0 for b in modelled) / len(modelled)),
            "open_windows_max": float(max(b["open_windows"] or 0 for b in figures.batches)),
            "tuples_held_mean": float(sum(b["state_rows"] or 0 for b in modelled) / len(modelled)),
            "tuples_held_max": float(max(b["state_rows"] or 0 for b in figures.batches)),
        }
    else:
        figures.notes.append("no micro-batch closed windows while event time advanced: nothing to model yet")
    return figures
