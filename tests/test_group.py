"""`group:` steps: close rules, per-key state, batch = streaming, the context join, udfs/ checks,
failures of the analyst's function, and the trading example against numpy."""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from framework.operators.group.runner import (
    EVENT,
    HELD,
    KEY,
    MICROS,
    OUT,
    REASON,
    ROLE,
    STATE,
    STATE_OUT,
    GroupRunner,
    Rule,
    close_groups,
)
from tests.conftest import delta_rows, delta_version, write

# -- the runner without Spark: any split into micro-batches gives the batch run's groups ------------

RETURNS = pa.schema([("n", pa.int64()), ("first", pa.int64()), ("last", pa.int64()), ("total", pa.int64()),
                     ("seen", pa.int64()), ("how", pa.string())])  # fmt: skip
EVENT_COLUMNS = ("k", "id", MICROS)


def _summary(events, state, args):  # the group function contract
    seen = (state.value or {"groups": 0})["groups"] + 1
    state.update({"groups": seen})
    return {"n": len(events), "first": int(events["id"].iloc[0]), "last": int(events["id"].iloc[-1]),
            "total": int(events[MICROS].sum()), "seen": seen, "how": state.closed_by}  # fmt: skip


def _runner(rule: Rule, mark: int | None, end_of_input: bool) -> GroupRunner:
    schema = pa.schema(
        [(ROLE, pa.string()), (KEY, pa.string()), (STATE, pa.string()), (REASON, pa.string()), ("k", pa.string()),
         *RETURNS, *[(EVENT + c, t) for c, t in (("k", pa.string()), ("id", pa.int64()), (MICROS, pa.int64()))]]
    )  # fmt: skip
    return GroupRunner(
        step="s", function="_summary", fn=_summary, args={}, rule=rule, key_columns=("k",),
        event_columns=EVENT_COLUMNS, shown_columns=("k", "id", MICROS), returns=RETURNS, schema=schema,
        spark_schema=None, mark=mark, end_of_input=end_of_input,
    )  # fmt: skip


def _feed(runner: GroupRunner, events: list[tuple[str, int, int]], held: list[dict], states: dict[str, str]):
    """Run one 'micro-batch' as Spark would hand it to the tasks: state rows and events sorted by
    key, role, event time, id; split into small Arrow batches. Returns (out rows, held, states)."""
    rows = [{KEY: k, ROLE: 0, STATE: s, "k": None, "id": None, MICROS: None} for k, s in states.items()]
    rows += [{KEY: json.dumps({"k": k}), ROLE: 1, STATE: None, "k": k, "id": i, MICROS: t} for k, t, i in events]
    rows += [{**h, ROLE: 1, STATE: None} for h in held]
    rows.sort(key=lambda r: (r[KEY], r[ROLE], r[MICROS] or 0, r["id"] or 0))
    schema = pa.schema([(KEY, pa.string()), (ROLE, pa.int8()), (STATE, pa.string()), ("k", pa.string()),
                        ("id", pa.int64()), (MICROS, pa.int64())])  # fmt: skip
    table = pa.Table.from_pylist(rows, schema=schema)
    out, kept, kept_states = [], [], {}
    for batch in runner(iter(table.to_batches(max_chunksize=3))):
        for row in batch.to_pylist():
            if row[ROLE] == OUT:
                out.append((row["k"], row["n"], row["first"], row["last"], row["total"], row["seen"], row["how"]))
            elif row[ROLE] == HELD:
                kept.append({KEY: row[KEY], **{c: row[EVENT + c] for c in EVENT_COLUMNS}})
            elif row[ROLE] == STATE_OUT:
                kept_states[row[KEY]] = row[STATE]
    return out, kept, kept_states


RULES = st.sampled_from([Rule(count=3), Rule(timeout_us=5), Rule(count=2, timeout_us=4), Rule(every_us=6), Rule(count=1)])


@settings(max_examples=300, deadline=None)
@given(rule=RULES, seed=st.integers(0, 10**6), events=st.integers(0, 40), batches=st.integers(1, 6), delay=st.integers(0, 5))
@example(rule=Rule(count=2, timeout_us=4), seed=1, events=30, batches=5, delay=3)
def test_streaming_in_any_split_then_end_of_input_equals_one_batch_run(rule, seed, events, batches, delay):
    """Events arrive out of order by at most the watermark delay (so none is late) and are cut into
    micro-batches anywhere: each batch closes only the groups its mark makes final, carrying held
    events and each key's state; the end of the input then closes the rest. Every group, its
    function call, its state and its `closed_by` equal one batch run's, in the same order per key."""
    rng = random.Random(seed)
    made = [(rng.choice("abc"), rng.randint(0, 30), i) for i in range(events)]
    arrival = sorted(made, key=lambda e: e[1] + rng.uniform(0, delay))
    cuts = sorted(rng.sample(range(1, len(arrival)), min(batches - 1, max(len(arrival) - 1, 0)))) if arrival else []
    parts = [arrival[a:b] for a, b in zip([0, *cuts], [*cuts, len(arrival)], strict=True)] if arrival else []
    newest = max((t for _, t, _ in made), default=None)

    whole, _, _ = _feed(_runner(rule, newest, end_of_input=True), made, [], {})

    streamed, held, states, seen, mark = [], [], {}, None, None
    for part in parts:
        assert mark is None or all(t >= mark for _, t, _ in part)  # none is late
        seen = max(t for _, t, _ in part) if seen is None else max(seen, *(t for _, t, _ in part))
        mark = seen - delay
        out, held, states = _feed(_runner(rule, mark, end_of_input=False), part, held, states)
        streamed += out
    out, held, states = _feed(_runner(rule, newest, end_of_input=True), [], held, states)
    streamed += out
    assert held == []
    by_key = lambda rows: sorted(rows, key=lambda r: (r[0], r[5]))  # noqa: E731 - per key, in call order
    assert by_key(streamed) == by_key(whole)
    assert sum(r[1] for r in whole) == len(made)  # every event in exactly one group


def test_close_rules_on_one_keys_events():
    micros = np.array([0, 1, 2, 10, 11, 30])
    assert close_groups(micros, None, Rule(count=2), mark=None, end_of_input=True).groups == [
        (0, 2, "count"), (2, 4, "count"), (4, 6, "count")]  # fmt: skip
    timed = close_groups(micros, None, Rule(count=5, timeout_us=5), mark=31, end_of_input=False)
    assert timed.groups == [(0, 3, "timeout"), (3, 5, "timeout")] and timed.held_from == 5
    assert close_groups(micros, None, Rule(every_us=10), mark=20, end_of_input=False).groups == [(0, 3, "every"), (3, 5, "every")]
    held = close_groups(micros, None, Rule(count=2), mark=10, end_of_input=False)
    assert held.groups == [(0, 2, "count")] and held.held_from == 2  # (2, 10) is complete but 10 is not before the mark
    inputs = np.array(["a", "a", "b", "a", "b", "a"])
    assert close_groups(micros, inputs, Rule(all_inputs=("a", "b")), None, False).groups == [(0, 6, "all_inputs")]
    waiting = close_groups(micros, np.array(["a"] * 6), Rule(all_inputs=("a", "b"), timeout_us=100), 50, False)
    assert waiting.groups == [] and waiting.quarantined == [] and waiting.held_from == 0
    given_up = close_groups(micros, np.array(["a"] * 6), Rule(all_inputs=("a", "b"), timeout_us=10), 50, False)
    # a context is its first event + timeout: later events start the next one
    assert given_up.quarantined == [(0, 4, "incomplete context: missing b"), (4, 5, "incomplete context: missing b"),
                                    (5, 6, "incomplete context: missing b")]  # fmt: skip


def test_every_marks_a_group_closed_by_every_only_when_event_time_reached_its_intervals_end():
    """docs/udfs.md: at the end of a batch run's input, a group whose interval event time has not
    passed closes as `end_of_input`, the group of the newest event as every other such group."""
    micros = np.array([0, 1, 2, 10, 11, 25])
    whole = close_groups(micros, None, Rule(every_us=10), mark=25, end_of_input=True)
    assert whole.groups == [(0, 3, "every"), (3, 5, "every"), (5, 6, "end_of_input")]
    ended = close_groups(micros[:5], None, Rule(every_us=10), mark=20, end_of_input=True)  # 20 reaches the end of [10, 20)
    assert ended.groups == [(0, 3, "every"), (3, 5, "every")]


def _contexts(events: list[tuple[str, int, str, int]], rule: Rule, mark: int | None, end_of_input: bool, held: dict):
    """One micro-batch of a context join, key by key as the runner does: (joined id sets,
    quarantined id sets with the reason, the events each key still holds)."""
    keys = {k for k, *_ in events} | set(held)
    joined, quarantined, kept = [], [], {}
    for key in sorted(keys):
        mine = sorted(held.get(key, []) + [e for e in events if e[0] == key], key=lambda e: (e[1], e[3]))
        micros, inputs = np.array([e[1] for e in mine]), np.array([e[2] for e in mine])
        closed = close_groups(micros, inputs, rule, mark, end_of_input)
        joined += [(key, frozenset(e[3] for e in mine[a:b]), how) for a, b, how in closed.groups]
        quarantined += [(key, frozenset(e[3] for e in mine[a:b]), why) for a, b, why in closed.quarantined]
        if closed.held_from < len(mine):
            kept[key] = mine[closed.held_from :]
    return joined, quarantined, kept


def _streamed_contexts(parts: list[list[tuple[str, int, str, int]]], rule: Rule, delay: int):
    joined, quarantined, held, seen = [], [], {}, None
    for part in parts:
        seen = max([seen, *(t for _, t, _, _ in part)] if seen is not None else [t for _, t, _, _ in part])
        out, given_up, held = _contexts(part, rule, seen - delay, False, held)
        joined, quarantined = joined + out, quarantined + given_up
    return joined, quarantined, held


MINUTE = 60_000_000


def test_the_issues_context_join_is_the_same_in_batch_and_in_every_split_of_its_stream():
    """Inputs a and b, timeout 20m, watermark 1m: a's events for context 1 at 00:00 and context 2 at
    00:40, then b's for context 1 at 01:00 and context 2 at 00:41. Context 1's inputs have not all
    come by 00:20: it is quarantined as incomplete in batch as on the stream (b's event starts a
    context of its own, which waits for a); context 2 is joined."""
    rule = Rule(all_inputs=("a", "b"), timeout_us=20 * MINUTE)
    arrival = [("1", 0, "a", 0), ("2", 40 * MINUTE, "a", 1), ("1", 60 * MINUTE, "b", 2), ("2", 41 * MINUTE, "b", 3)]
    batch, given_up, _ = _contexts(arrival, rule, 60 * MINUTE, True, {})
    assert batch == [("2", frozenset({1, 3}), "all_inputs")]
    assert given_up == [
        ("1", frozenset({0}), "incomplete context: missing b"),
        ("1", frozenset({2}), "incomplete context: missing a"),
    ]
    for cuts in ([], [1], [2], [1, 2]):  # splits in which no event is late (b's at 00:41 comes with or before 01:00)
        parts = [arrival[a:b] for a, b in zip([0, *cuts], [*cuts, len(arrival)], strict=True)]
        joined, quarantined, held = _streamed_contexts(parts, rule, delay=MINUTE)
        assert joined == batch, cuts
        assert quarantined == [("1", frozenset({0}), "incomplete context: missing b")], cuts
        assert {k: [e[3] for e in v] for k, v in held.items()} == {"1": [2]}, cuts  # waits for a until 01:20
    longer = Rule(all_inputs=("a", "b"), timeout_us=70 * MINUTE)  # now 01:00 is within context 1's timeout
    assert _contexts(arrival, longer, 60 * MINUTE, True, {})[0] == [
        ("1", frozenset({0, 2}), "all_inputs"), ("2", frozenset({1, 3}), "all_inputs")]  # fmt: skip
    assert (
        _streamed_contexts([arrival[:2], arrival[2:]], longer, MINUTE)[0] == _contexts(arrival, longer, 60 * MINUTE, True, {})[0]
    )


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**6), contexts=st.integers(0, 12), batches=st.integers(1, 6), delay=st.integers(0, 5),
       timeout=st.integers(1, 12))  # fmt: skip
def test_a_context_join_with_a_timeout_equals_batch_for_any_split(seed, contexts, batches, delay, timeout):
    """Each input sends at most one event per context (the paper's event: a whole tick list), at
    random event times, arriving out of order by at most the watermark delay (none late), cut into
    micro-batches anywhere. The stream joins and quarantines what one batch run does; what it still
    holds, the end of its input quarantines as the batch run did."""
    rng = random.Random(seed)
    rule = Rule(all_inputs=("a", "b", "c"), timeout_us=timeout)
    made = [(str(ctx), rng.randint(0, 30), i, 0) for ctx in range(contexts) for i in "abc" if rng.random() < 0.8]
    made = [(k, t, i, n) for n, (k, t, i, _) in enumerate(made)]
    arrival = sorted(made, key=lambda e: e[1] + rng.uniform(0, delay))
    cuts = sorted(rng.sample(range(1, len(arrival)), min(batches - 1, max(len(arrival) - 1, 0)))) if arrival else []
    parts = [arrival[a:b] for a, b in zip([0, *cuts], [*cuts, len(arrival)], strict=True)] if arrival else []
    newest = max((t for _, t, _, _ in made), default=None)
    batch, given_up, _ = _contexts(made, rule, newest, True, {})
    joined, quarantined, held = _streamed_contexts(parts, rule, delay)
    at_end, ended, rest = _contexts([], rule, newest, True, held)
    assert rest == {}
    assert sorted(joined + at_end, key=str) == sorted(batch, key=str)
    assert sorted(quarantined + ended, key=str) == sorted(given_up, key=str)
    for _, ids, _ in batch:  # a joined context's events are within the timeout of its first
        times = [t for _, t, _, n in made if n in ids]
        assert max(times) - min(times) <= timeout


@pytest.mark.parametrize(
    ("close", "waits"),
    [
        ({"count": 3}, "a group waits for 3 events of its key, then is emitted once the watermark passes its last one"),
        ({"all_inputs": True, "timeout": "20m"},
         "a context waits for an event from each input it misses; it is quarantined as incomplete once the watermark "
         "passes its first event + 20m"),
        ({"count": 3, "timeout": "30s"},
         "a group is emitted once the watermark passes its first event + 30s, or once it has 3 events and the watermark "
         "passes its last one"),
        ({"every": "1h"}, "a group is emitted once the watermark passes the end of its 1h interval"),
    ],
)  # fmt: skip
def test_the_held_events_message_says_what_each_rule_waits_for(tmp_path, close, waits):
    """The end of a run names what a streaming group step's held events wait for: a partial
    count-only group waits for events, a context missing an input for that input, not the watermark."""
    from types import SimpleNamespace

    import pyarrow.parquet as pq

    from framework.operators.group.stream import HELD_TABLE, STATES_TABLE, GroupStream
    from framework.operators.micro_batch_state import MicroBatchState
    from framework.spec.steps import CloseRule

    state = MicroBatchState(str(tmp_path / "state"))
    folder = Path(state.begin(0))
    for table, rows in (
        (HELD_TABLE, {KEY: ['{"k":"a"}'] * 2, MICROS: [1, 2]}),
        (STATES_TABLE, {KEY: ['{"k":"a"}'], STATE: ["1"]}),
    ):
        (folder / table).mkdir(parents=True)
        pq.write_table(pa.table(rows), folder / table / "part-0.parquet")
    state.complete(0, {"max": 120_000_000, "mark": 60_000_000})
    spec = SimpleNamespace(group=SimpleNamespace(close=CloseRule(**close)))
    line = GroupStream("g", spec, str(tmp_path / "state")).held().line("g")  # type: ignore[union-attr]
    assert line == (
        "step 'g' still holds 2 events of groups not yet closed (1 keys with state); the watermark is at "
        f"1970-01-01T00:01:00+00:00: {waits}"
    )


# -- on Spark, from the CLI --------------------------------------------------------------------------

UDFS = """
from framework.functions import group_function, udf

@group_function(returns="n bigint, total double, seen bigint, how string")
def summary(events, state, args):
    seen = (state.value or 0) + 1
    state.update(seen)
    return {"n": len(events), "total": float(events["v"].sum()) * args.get("scale", 1), "seen": seen, "how": state.closed_by}

@group_function(returns="n bigint")
def explode_on_b(events, state, args):
    if events["k"].iloc[0] == "b":
        raise ValueError("no b please")
    return {"n": len(events)}

@group_function(returns="n bigint")
def wrong_columns(events, state, args):
    return {"count": len(events)}

@group_function(returns="n bigint")
def exits_on_b(events, state, args):
    if events["k"].iloc[0] == "b":
        import sys
        sys.exit(3)
    return {"n": len(events)}

@udf(returns="double")
def plus_one(x):
    return x + 1.0
"""

GROUP = """
name: groups
mode: {mode}
sources:
  events: {{format: json, path: data/events, schema: "k STRING, ts TIMESTAMP, v DOUBLE", event_time: ts, watermark: {delay}s}}
steps:
  grouped:
    group:
      inputs: [events]
      key: [k]
      event_time: ts
      close: {close}
      function: {function}
      args: {{scale: 2}}
      partitions: 3
outputs:
  grouped: {{mode: {output_mode}}}
"""


def _pipeline(
    project: Path, mode: str = "batch", close: str = "{count: 2, timeout: 5s}", function: str = "summary", delay: int = 3
):
    write(project / "udfs" / "mine.py", UDFS)
    output_mode = "append" if mode == "streaming" else "overwrite"
    write(
        project / "pipelines" / "groups.yaml",
        GROUP.format(mode=mode, close=close, function=function, delay=delay, output_mode=output_mode),
    )


def _land(project: Path, name: str, rows: list[tuple]) -> None:
    lines = [json.dumps({"k": k, "ts": None if t is None else f"2026-01-01T00:00:{t:02d}", "v": v}) for k, t, v in rows]
    write(project / "data" / "events" / f"{name}.json", "\n".join(lines) + "\n")


def _grouped(project: Path) -> list[tuple]:
    return sorted((r["k"], r["seen"], r["n"], r["total"], r["how"]) for r in delta_rows(project / "warehouse" / "grouped"))


def test_batch_groups_close_by_their_rule_keep_state_and_quarantine_keyless_events(spark, cli, project):
    _pipeline(project)
    _land(
        project,
        "1",
        [("a", 0, 1.0), ("a", 1, 2.0), ("a", 3, 4.0), ("a", 20, 8.0), ("b", 2, 1.0), (None, 2, 9.0), ("b", None, 9.0)],
    )
    code, out, err = cli("run", "groups")
    assert code == 0, out + err
    assert _grouped(project) == [
        ("a", 1, 2, 6.0, "count"), ("a", 2, 1, 8.0, "timeout"), ("a", 3, 1, 16.0, "end_of_input"), ("b", 1, 1, 2.0, "timeout")]  # fmt: skip
    reasons = sorted(r["reason"] for r in delta_rows(project / "warehouse" / "_tributary" / "quarantine"))
    assert reasons == ["event_time ts is null", "key column(s) k null: the tuple has no instance key"]


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6))
def test_streaming_equals_batch_across_files_and_restarts(spark, cli, project, seed):
    """Files land in two runs (a restart between them): the stream emits exactly the batch run's
    groups that its final watermark closed, with the state each key had in the batch run."""
    import shutil

    for folder in ("data/events", "warehouse"):
        shutil.rmtree(project / folder, ignore_errors=True)
    rng = random.Random(seed)
    rows = [(rng.choice("ab"), rng.randint(0, 40), float(i)) for i in range(30)]
    arrival = sorted(rows, key=lambda r: r[1] + rng.uniform(0, 2.5))
    _pipeline(project, mode="batch")
    _land(project, "all", rows)
    assert cli("run", "groups")[0] == 0
    batch = _grouped(project)
    shutil.rmtree(project / "warehouse")
    shutil.rmtree(project / "data" / "events")

    _pipeline(project, mode="streaming")
    half = len(arrival) // 2
    _land(project, "1", arrival[:half])
    assert cli("run", "groups")[0] == 0
    _land(project, "2", arrival[half:])
    code, out, err = cli("run", "groups")
    assert code == 0, out + err
    streamed = _grouped(project) if (project / "warehouse" / "grouped").exists() else []
    assert streamed == _closed_by_mark(rows, mark=(max(t for _, t, _ in rows) - 3) * 1_000_000)
    assert set(streamed) <= set(batch)


def _closed_by_mark(rows: list[tuple], mark: int, rule: Rule = Rule(count=2, timeout_us=5_000_000)) -> list[tuple]:
    """The groups of `summary` (args scale: 2) that `rule` (by default the pipeline's `close:
    {count: 2, timeout: 5s}`) closes by `mark`, per key, numbered as `seen` numbers them."""
    closed = []
    for key in sorted({k for k, _, _ in rows}):
        mine = sorted((t * 1_000_000, v) for k, t, v in rows if k == key)
        micros = np.array([t for t, _ in mine])
        groups = close_groups(micros, None, rule, mark, end_of_input=False).groups
        for seen, (a, b, how) in enumerate(groups, start=1):
            closed.append((key, seen, b - a, sum(v for _, v in mine[a:b]) * 2, how))
    return sorted(closed)


CONTEXT = """
name: contexts
mode: {mode}
sources:
  left: {{format: json, path: data/left, schema: "ctx BIGINT, ts TIMESTAMP, x DOUBLE", event_time: ts, watermark: 1s}}
  right: {{format: json, path: data/right, schema: "ctx BIGINT, ts TIMESTAMP, x DOUBLE", event_time: ts, watermark: 1s}}
steps:
  joined:
    group:
      inputs: [left, right]
      context: ctx
      event_time: ts
      close: {{all_inputs: true, timeout: 10s}}
      function: sides
outputs:
  joined: {{mode: {output_mode}}}
"""
SIDES = """
from framework.functions import group_function

@group_function(returns="inputs string, n bigint")
def sides(events, state, args):
    return {"inputs": ",".join(sorted(set(events["_input"]))), "n": len(events)}
"""


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_a_context_closes_when_every_input_has_come_and_an_incomplete_one_is_quarantined(spark, cli, project, mode):
    write(project / "udfs" / "sides.py", SIDES)
    write(
        project / "pipelines" / "contexts.yaml",
        CONTEXT.format(mode=mode, output_mode="append" if mode == "streaming" else "overwrite"),
    )
    write(
        project / "data" / "left" / "1.json",
        '{"ctx": 1, "ts": "2026-01-01T00:00:01", "x": 1}\n{"ctx": 2, "ts": "2026-01-01T00:00:02", "x": 2}\n',
    )
    write(
        project / "data" / "right" / "1.json",
        '{"ctx": 1, "ts": "2026-01-01T00:00:03", "x": 3}\n{"ctx": 1, "ts": "2026-01-01T00:00:04", "x": 4}\n',
    )
    if mode == "streaming":  # event time moves past context 2's timeout
        write(project / "data" / "right" / "2.json", '{"ctx": 3, "ts": "2026-01-01T00:00:40", "x": 5}\n')
    code, out, err = cli("run", "contexts")
    assert code == 0, out + err
    assert [(r["ctx"], r["inputs"], r["n"]) for r in delta_rows(project / "warehouse" / "joined")] == [(1, "left,right", 3)]
    quarantined = delta_rows(project / "warehouse" / "_tributary" / "quarantine")
    # streaming: context 2 waited until event time passed its timeout; context 3 is still waiting
    assert [(r["reason"], json.loads(r["record"])["ctx"]) for r in quarantined] == [("incomplete context: missing right", 2)]


def test_a_context_join_that_quarantines_runs_each_groups_function_once(spark, cli, project):
    """Its output and its quarantined contexts were both read from the groups, which were computed
    twice: every group's function ran twice (356,148 calls for 178,074 groups over 200k contexts)."""
    calls = project / "calls"
    calls.mkdir()
    write(
        project / "udfs" / "sides.py",
        SIDES.replace(
            "    return {",
            f"    import os\n    open(os.path.join({str(calls)!r}, str(os.getpid())), 'a').write('x')\n    return {{",
        ),
    )
    write(project / "pipelines" / "contexts.yaml", CONTEXT.format(mode="batch", output_mode="overwrite"))
    left = "".join(f'{{"ctx": {c}, "ts": "2026-01-01T00:00:{c % 50:02d}", "x": 1}}\n' for c in range(40))
    right = "".join(f'{{"ctx": {c}, "ts": "2026-01-01T00:00:{c % 50 + 1:02d}", "x": 2}}\n' for c in range(0, 40, 2))
    write(project / "data" / "left" / "1.json", left)
    write(project / "data" / "right" / "1.json", right)
    code, out, err = cli("run", "contexts")
    assert code == 0, out + err
    assert len(delta_rows(project / "warehouse" / "joined")) == 20
    assert len(delta_rows(project / "warehouse" / "_tributary" / "quarantine")) == 20  # the odd contexts, missing right
    assert sum(len(f.read_text()) for f in calls.iterdir()) == 20, "each complete context's function, once"


TWO_STEPS = """
name: two
mode: {mode}
sources:
  a: {{format: json, path: data/a, schema: "ctx BIGINT, ts TIMESTAMP", event_time: ts, watermark: 1m}}
  b: {{format: json, path: data/b, schema: "ctx BIGINT, ts TIMESTAMP", event_time: ts, watermark: 1m}}
steps:
  joined:
    group: {{inputs: [a, b], context: ctx, event_time: ts, close: {{all_inputs: true, timeout: 20m}}, function: sides_how}}
  hourly:
    group: {{inputs: [a, b], key: [ctx], event_time: ts, close: {{every: 1h}}, function: sides_how}}
outputs:
  joined: {{mode: {output_mode}}}
  hourly: {{mode: {output_mode}}}
"""
SIDES_HOW = """
from framework.functions import group_function

@group_function(returns="inputs string, n bigint, how string")
def sides_how(events, state, args):
    return {"inputs": ",".join(sorted(set(events["_input"]))), "n": len(events), "how": state.closed_by}
"""


def _events(project: Path, path: str, rows: list[tuple]) -> None:
    lines = [json.dumps({"ctx": c, "ts": f"2026-01-01T{h:02d}:{m:02d}:00"}) for c, h, m in rows]
    write(project / "data" / path, "\n".join(lines) + "\n")


def _two(project: Path, mode: str) -> None:
    write(project / "udfs" / "sides_how.py", SIDES_HOW)
    output_mode = "append" if mode == "streaming" else "overwrite"
    write(project / "pipelines" / "two.yaml", TWO_STEPS.format(mode=mode, output_mode=output_mode))


def _rows_of(project: Path, table: str) -> list[tuple]:
    return sorted((r["ctx"], r["inputs"], r["n"], r["how"]) for r in delta_rows(project / "warehouse" / table))


def _quarantined(project: Path) -> list[tuple]:
    rows = delta_rows(project / "warehouse" / "_tributary" / "quarantine")
    return sorted((r["source"], json.loads(r["record"])["ctx"] or 0, r["reason"]) for r in rows)  # 0: no key


def test_batch_context_join_quarantines_a_context_incomplete_by_its_timeout_and_every_ends_with_the_input(spark, cli, project):
    """The issue's case in one batch run: context 1's b comes an hour after its a (timeout 20m),
    so both are quarantined as incomplete, as the stream does; context 2 is joined. `every`: a group
    whose hour event time did not reach closes as end_of_input."""
    _two(project, "batch")
    _events(project, "a/1.json", [(1, 0, 0), (None, 0, 10), (2, 0, 40), (3, 1, 5)])
    _events(project, "b/1.json", [(1, 1, 0), (2, 0, 41)])
    code, out, err = cli("run", "two")
    assert code == 0, out + err
    assert _rows_of(project, "joined") == [(2, "a,b", 2, "all_inputs")]
    assert _rows_of(project, "hourly") == [
        (1, "a", 1, "every"), (1, "b", 1, "end_of_input"), (2, "a,b", 2, "every"), (3, "a", 1, "end_of_input")]  # fmt: skip
    assert _quarantined(project) == [
        ("hourly", 0, "key column(s) ctx null: the tuple has no instance key"),
        ("joined", 0, "key column(s) ctx null: the tuple has no instance key"),
        ("joined", 1, "incomplete context: missing a"),
        ("joined", 1, "incomplete context: missing b"),
        ("joined", 3, "incomplete context: missing b"),
    ]


def test_streaming_two_steps_count_refused_rows_per_step_and_say_what_held_rows_wait_for(spark, cli, project):
    """The same events on a stream, a's first, then b's with one more a and a row late for both
    steps: outputs and quarantine are the batch run's but for what the stream still holds. A row
    refused by two steps is recorded at each, and counted per step in the summary, the run log and
    the report alike."""
    _two(project, "streaming")
    _events(project, "a/1.json", [(1, 0, 0), (None, 0, 10), (2, 0, 40)])
    (project / "data" / "b").mkdir()
    code, out, err = cli("run", "two")
    assert code == 0, out + err
    _events(project, "b/1.json", [(1, 1, 0), (2, 0, 41)])
    _events(project, "a/2.json", [(3, 1, 5), (4, 0, 5)])  # 00:05 is older than the watermark, 00:39
    code, out, err = cli("run", "two")
    assert code == 0, out + err
    assert _rows_of(project, "joined") == [(2, "a,b", 2, "all_inputs")]
    assert _rows_of(project, "hourly") == [(1, "a", 1, "every"), (2, "a,b", 2, "every")]
    assert _quarantined(project) == [
        ("hourly", 0, "key column(s) ctx null: the tuple has no instance key"),
        ("joined", 0, "key column(s) ctx null: the tuple has no instance key"),
        ("joined", 1, "incomplete context: missing b"),
    ]
    late = delta_rows(project / "warehouse" / "_tributary" / "late_rows")
    assert sorted((r["steps"], json.loads(r["record"])["ctx"]) for r in late) == [("hourly", 4), ("joined", 4)]
    events = delta_rows(project / "warehouse" / "_tributary" / "events")
    last = max(e["run_id"] for e in events)
    logged = {
        (e["event"], e["name"]): e["rows"] for e in events if e["run_id"] == last and e["event"] in ("late_rows", "quarantine")
    }
    assert logged == {("late_rows", "joined"): 1, ("late_rows", "hourly"): 1}
    summary = " ".join(out.split())
    assert "late rows: 1 from joined, 1 from hourly" in summary
    assert (
        "step 'joined' still holds 2 events of groups not yet closed (0 keys with state); the watermark is at "
        "2026-01-01T01:04:00+00:00: a context waits for an event from each input it misses" in summary
    )
    code, out, err = cli("report", "two")
    assert code == 0, out + err
    page = Path(out.strip()).read_text()
    assert "1 late row(s) from joined" in page and "1 late row(s) from hourly" in page


def test_sql_templates_call_udfs_and_validate_knows_their_names(spark, cli, project):
    write(project / "udfs" / "mine.py", UDFS)
    write(project / "data" / "nums" / "1.json", '{"x": 1.5}\n')
    body = textwrap.dedent(
        """\
        name: u
        sources:
          nums: {{format: json, path: data/nums, schema: "x DOUBLE"}}
        steps:
          s:
            sql: |
              SELECT
                {call}
              FROM {{{{ source('nums') }}}}
        outputs:
          s: {{}}
        """
    )
    write(project / "pipelines" / "u.yaml", body.format(call="plus_one(x) AS y"))
    code, out, err = cli("run", "u")
    assert code == 0, out + err
    assert [r["y"] for r in delta_rows(project / "warehouse" / "s")] == [2.5]

    write(project / "pipelines" / "u.yaml", body.format(call="plus_onee(x) AS y"))
    code, out, err = cli("validate", "u")
    assert (
        code == 2
        and "pipelines/u.yaml:8: step 's': unknown function 'plus_onee'" in out + err
        and "did you mean 'plus_one'?" in out + err
    )
    write(project / "pipelines" / "u.yaml", body.format(call="plus_one(x, x) AS y"))
    code, out, err = cli("validate", "u")
    assert code == 2 and "udf 'plus_one' takes 1 argument(s), called with 2" in out + err and "udfs/mine.py:" in out + err


def test_validate_names_a_missing_group_function_and_a_udfs_module_that_cannot_be_imported(cli, project):
    _pipeline(project, function="sumary")
    code, out, err = cli("validate", "groups")
    assert code == 2, out + err
    assert "pipelines/groups.yaml:13:7" in out + err and "group function 'sumary' is not registered" in out + err
    assert "did you mean 'summary'?" in out + err

    write(project / "udfs" / "broken.py", "import math\n\nLIMIT = math.sqrt(-1)\n")
    code, out, err = cli("validate", "groups")
    assert code == 2, out + err
    assert "udfs/broken.py:3: importing udfs module 'broken' failed: ValueError: math domain error" in out + err
    assert "Traceback" not in out + err


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        ("explode_on_b", 'step \'grouped\', key {"k":"b"}: udfs/mine.py:13 in explode_on_b: ValueError: no b please'),
        ("exits_on_b", 'step \'grouped\', key {"k":"b"}: udfs/mine.py:24 in exits_on_b: SystemExit: 3'),
        (
            "wrong_columns",
            "wrong_columns returned columns ['count'], the step declares ['n'] (missing ['n']; not declared ['count'])",
        ),
    ],
)
def test_a_failing_function_fails_the_run_naming_step_key_and_line_and_moves_no_table(spark, cli, project, function, expected):
    _pipeline(project, function="summary")
    _land(project, "1", [("a", 0, 1.0), ("b", 1, 2.0)])
    assert cli("run", "groups")[0] == 0
    before = delta_version(project / "warehouse" / "grouped")
    _pipeline(project, function=function)
    code, out, err = cli("run", "groups")
    assert code == 1, out + err
    assert "run failed: step 'grouped', key {\"k\":" in out + err and expected in out + err, out + err
    assert "Traceback" not in out + err
    assert delta_version(project / "warehouse" / "grouped") == before


def test_streaming_context_join_needs_a_timeout(cli, project):
    write(project / "udfs" / "sides.py", SIDES)
    write(
        project / "pipelines" / "contexts.yaml",
        CONTEXT.format(mode="streaming", output_mode="append").replace(", timeout: 10s", ""),
    )
    code, out, err = cli("validate", "contexts")
    assert code == 2 and "a context join on streams needs close.timeout" in out + err


# -- the trading example -----------------------------------------------------------------------------


def _numpy_best(folder: Path, request: int, points: int) -> tuple[str, float]:
    """The most correlated pair computed directly with numpy (nearest-tick homogenization)."""
    import pyarrow.parquet as pq

    series = {}
    for stock in sorted(p.name for p in folder.iterdir()):
        table = pq.read_table(folder / stock / f"request-{request:06d}.parquet")
        ts = table.column("ts").cast(pa.int64()).to_numpy()
        order = np.argsort(ts, kind="stable")
        series[stock] = (ts[order], table.column("price").to_numpy()[order])
    start = max(t[0] for t, _ in series.values())
    end = min(t[-1] for t, _ in series.values())
    grid = np.linspace(start, end, points)
    sampled = {}
    for stock, (t, p) in series.items():
        nearest = np.abs(t[None, :] - grid[:, None]).argmin(axis=1)
        sampled[stock] = p[nearest]
    pairs = [
        (f"{a}-{b}", np.corrcoef(sampled[a], sampled[b])[0, 1])
        for i, a in enumerate(sorted(sampled))
        for b in sorted(sampled)[i + 1 :]
    ]
    return max(pairs, key=lambda p: p[1])


def test_trading_example_finds_the_pair_numpy_finds_in_batch_and_streaming(spark, cli, project):
    code, out, err = cli("generate", "ticks", "--requests", "3", "--ticks", "2000", "--out", "data/samples/ticks")
    assert code == 0, out + err
    assert cli("run", "trading_correlation")[0] == 0
    best = {r["request"]: (r["pair"], r["correlation"], r["pairs"]) for r in delta_rows(project / "warehouse" / "trading_best")}
    for request in range(3):
        pair, correlation = _numpy_best(project / "data" / "samples" / "ticks", request, 1000)
        assert best[request][0] == pair and best[request][1] == pytest.approx(correlation, abs=1e-9)
        assert best[request][2] == 10
    code, out, err = cli("run", "trading_correlation_streaming")
    assert code == 0, out + err
    streamed = {r["request"]: (r["pair"], r["correlation"]) for r in delta_rows(project / "warehouse" / "trading_best_stream")}
    assert streamed == {k: v[:2] for k, v in best.items()}


# -- udfs/ on a real cluster ---------------------------------------------------------------------------


@pytest.mark.cluster
def test_udfs_reach_the_executors_of_a_standalone_cluster(project, standalone_cluster):
    """Executors of a real cluster cannot import the project's udfs/ (they run elsewhere); the run
    ships the functions by value, for the group step and the SQL udf alike."""
    import subprocess
    import sys

    master, env = standalone_cluster.master, standalone_cluster.env
    _pipeline(project, close="{count: 2}")
    _land(project, "1", [("a", 0, 1.0), ("a", 1, 2.0), ("b", 2, 4.0)])
    pipeline = (project / "pipelines" / "groups.yaml").read_text()
    step = "  plus:\n    sql: \"SELECT k, plus_one(total) AS total FROM {{ ref('grouped') }}\"\n"
    write(project / "pipelines" / "groups.yaml", pipeline.replace("outputs:", step + "outputs:") + "  plus: {}\n")
    write(project / "configs" / "standalone.yaml", f"spark:\n  master: {master}\n  conf:\n    spark.sql.shuffle.partitions: 2\n"
          "    spark.executor.memory: 1g\n    spark.executor.cores: 1\nwarehouse: ./warehouse\n")  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "framework", "run", "groups", "--profile", "standalone"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted((r["k"], r["total"]) for r in delta_rows(project / "warehouse" / "plus")) == [("a", 7.0), ("b", 9.0)]


def test_sigkill_mid_stream_loses_duplicates_and_replays_no_group(spark, cli, project):
    """Killed while its micro-batches commit, a streaming group step resumed to the end holds
    exactly the groups of an uninterrupted run, each with the state its key had there (`seen`
    counts the key's groups: a replay that saw a later state, or lost one, would number them
    differently). The uninterrupted run's groups are `_closed_by_mark`'s (what
    test_streaming_equals_batch_across_files_and_restarts checks a stream against), not a second
    streaming run of the same files."""
    import os

    from tests.conftest import kill_while_committing

    rng = random.Random(5)
    rows = [(rng.choice("abcd"), second, float(i)) for i, second in enumerate(sorted(rng.randint(0, 59) for _ in range(120)))]
    _pipeline(project, mode="streaming", close="{count: 3, timeout: 10s}", delay=2)
    text = (
        (project / "pipelines" / "groups.yaml").read_text().replace("watermark: 2s}", "watermark: 2s, max_files_per_trigger: 1}")
    )
    write(project / "pipelines" / "groups.yaml", text)
    for part in range(8):  # 8 micro-batches in time order (a stream takes files by mtime, in milliseconds)
        _land(project, f"{part:02d}", rows[part * 15 : (part + 1) * 15])
        os.utime(project / "data" / "events" / f"{part:02d}.json", (1_700_000_000 + part, 1_700_000_000 + part))
    # the stream's final mark is the newest event time minus the 2 s watermark (events come in time order: none is late)
    reference = _closed_by_mark(
        rows, mark=(max(t for _, t, _ in rows) - 2) * 1_000_000, rule=Rule(count=3, timeout_us=10_000_000)
    )

    table = project / "warehouse" / "grouped"
    kills = kill_while_committing(project, "groups", table, rng, kills=1, attempts=3, commits=3, linger=0.3)
    assert kills == 1, "the kill should land while the stream is running"
    assert len(_grouped(project)) < len(reference)
    code, out, err = cli("run", "groups")
    assert code == 0, out + err
    assert len(reference) > 15
    assert _grouped(project) == reference
