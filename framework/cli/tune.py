"""Commands that size and judge stateful steps: tune (an swa window's size and timeout), capacity
(what the steps need, predicted and observed), evaluate (completeness and correctness against
ground truth)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from framework.cli.common import (
    DebugOpt,
    EngineOpt,
    PipelineArg,
    ProfileOpt,
    VarOpt,
    context,
    guard_spark,
    say,
    term,
    through_engine,
)

if TYPE_CHECKING:
    from framework.capacity.tuning import Tuning

app = typer.Typer()


@app.command()
def tune(
    ctx: typer.Context,
    pipeline: PipelineArg,
    step: Annotated[str, typer.Argument(help="The swa step whose size and timeout to choose.")],
    alpha: Annotated[float, typer.Option("--alpha", help="n: the smallest size with F(n) >= alpha (degree CDF).")] = 0.9,
    beta: Annotated[float, typer.Option("--beta", help="t: the smallest whole second with 1 - F(t) <= beta.")] = 0.05,
    sample: Annotated[
        Optional[float], typer.Option("--sample", help="Fit on this share of the instances (0-1], whole instances kept.")
    ] = None,
    plots: Annotated[Optional[Path], typer.Option("--plots", help="Folder for the PNG plots (default: reports/tune/).")] = None,
    write: Annotated[bool, typer.Option("--write", help="Set size: and timeout: in the pipeline's YAML.")] = False,
    learn: Annotated[
        bool, typer.Option("--learn", help="size: auto steps: add the input to the step's history of per-head sizes.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the tuning as JSON.")] = False,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    no_engine: EngineOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Choose an swa step's window size n and timeout t from its input (Li et al., §5.2–5.3): fit
    the instances' degree (Erlang) and duration (hyper-Erlang), print F around the choice, draw
    the fits, and with --write put them in the YAML."""

    def body() -> None:
        from framework.tasks import tune as tuning_task

        about = context(pipeline, profile, var)
        request = tuning_task.checked(about, step, alpha, beta, sample, learn)
        through_engine(ctx, about.profile, no_engine)
        if learn:
            sizes, history = tuning_task.learn(about, request, term.err.status)
            say(f"{step}: {sizes}")
            say(f"history: {history}")
            return
        tuning, pictures = tuning_task.tune(about, request, alpha, beta, sample, plots, term.err.status)
        _show_tuning(tuning, pictures, as_json)
        if write:
            say(tuning_task.write_tuning(request, tuning))

    guard_spark(debug, body)


def _show_tuning(tuning: Tuning, pictures: list[Path], as_json: bool) -> None:
    from framework.capacity.tuning import report_lines, summary

    if as_json:
        term.out.print_json(json.dumps({**summary(tuning), "plots": [str(p) for p in pictures]}))
        return
    for line in report_lines(tuning):
        say(line)
    say("  plots: " + ", ".join(str(p) for p in pictures))


@app.command()
def capacity(
    pipeline: PipelineArg,
    step: Annotated[Optional[str], typer.Option("--step", help="One join, swa or tumbling step (default: all of them).")] = None,
    sample: Annotated[int, typer.Option("--sample", help="Rows per input used to time one pair comparison.")] = 1500,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    debug: DebugOpt = False,
) -> None:
    """What the pipeline's stateful steps need, predicted from their input, next to what the last
    run observed: nodes for a windowed join (n = max(K)·Δt·2·max(N)), open windows and state for
    swa (c = ⌊λ/μ⌋ + 1, state c × n × tuple), queue length and residence time for tumbling
    (formula (11)); docs/references.md. After a streaming run, each per-micro-batch step's
    micro-batches with the partitions and executors they had."""

    def body() -> None:
        from framework.capacity.join import JoinCapacity
        from framework.display import capacity_table, join_capacity_table, micro_batches_table
        from framework.tasks.capacity import MicroBatchSpreads
        from framework.tasks.capacity import capacity as measure

        for found in measure(context(pipeline, profile, var), step, sample, term.err.status):
            if isinstance(found, MicroBatchSpreads):
                term.out.print(micro_batches_table(found.step, found.run_id, found.batches))
            elif isinstance(found, JoinCapacity):
                term.out.print(join_capacity_table(found.step, found.rows()))
            else:
                term.out.print(capacity_table(found))

    guard_spark(debug, body)


@app.command()
def evaluate(
    ctx: typer.Context,
    pipeline: PipelineArg,
    step: Annotated[
        Optional[list[str]], typer.Option("--step", help="A swa/tumbling step (default: all declaring truth:).")
    ] = None,
    profile: ProfileOpt = None,
    var: VarOpt = None,
    no_engine: EngineOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Completeness and correctness of SWA/tumbling steps against the ground truth in their input
    (truth: {instance, primary}), over all input read in batch; figures go to
    _tributary/integration_quality. Writes no outputs."""

    def body() -> None:
        from framework.display import integration_table
        from framework.tasks.evaluate import evaluable_steps
        from framework.tasks.evaluate import evaluate as judge

        about = context(pipeline, profile, var)
        compiled, chosen = evaluable_steps(about, step)
        through_engine(ctx, about.profile, no_engine)
        with term.out.status("evaluating") as status:
            evaluations, table = judge(about, compiled, chosen, status.update)
        term.out.print(integration_table(evaluations))
        say(f"figures appended to {table}")

    guard_spark(debug, body)
