"""Inside the tasks of a `group:` step: close each key's groups by the rule, call the function.

Spark hands every task the rows of its keys as Arrow batches, sorted by key, the key's state row
first, then the events in their total order (framework.operators.group). For each key, GroupRunner
finds the groups its rule closes (`close_groups`), calls `f(events, state, args)` once per closed
group with the group's events as a pandas DataFrame, and gives back, in one Arrow schema:

- OUT rows: what the function returned, after the key columns;
- STATE rows: the key's state after its last group (JSON), if it has one;
- HELD rows: the events of groups not closed yet (streaming keeps them for the next micro-batch);
- QUARANTINED rows: the events of a context that never completed, with the reason.

Why in one pass over Arrow batches: Spark's own stateful Python operators make a round trip to
the JVM per key and per timer (about 2.4 ms a key here, see ../shared/PLATFORM.md); here a task
walks all its keys in one Python call and converts each Arrow batch to pandas once.

A group is final when no event still to come can change it: events to come are at or after the
watermark (mark), since older ones are late. count: its last event is before the mark; timeout:
its first event + t is before the mark; every: its interval ends at or before the mark. A rule's
groups are a prefix of the key's events, so the first group that is not final and everything after
it stay held. At the end of a batch run's input (`end_of_input`) every group is final: the last
one closes as `end_of_input`, unless event time passed its timeout (the mark of a batch run is
its newest event time), and `every` closes a group as `every` only when an event reached the end
of its interval. So streaming over any split into micro-batches, then the end of input, calls the
function on the same groups, in the same order, with the same state, as one batch run.

`all_inputs`: a context is the key's events from its first one to first + timeout (`_contexts`).
It closes as soon as every input has sent an event of it; one still missing an input when event
time passes its first event + timeout (or the input ends) is quarantined, in batch as on streams.
The stream equals the batch run when each input's events of a context arrive in one micro-batch.

This module runs on executors: it needs numpy, pandas and pyarrow only, and the engine pickles
it by value, so executors do not import `framework`.
"""

from __future__ import annotations

import json
import math
import os
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

ROLE = "__tributary_role"  # in: 0 state row, 1 event; out: one of ROLES
KEY = "__tributary_key"  # the key columns as JSON text: sorts, compares and names the key
STATE = "__tributary_state"  # the key's state as JSON text (state rows)
REASON = "__tributary_reason"  # why events were quarantined
MICROS = "__tributary_micros"  # event time as microseconds since the epoch
EVENT = "__tributary_e_"  # prefix of an event's columns in HELD and QUARANTINED rows
INPUT = "_input"  # which input an event came from (steps with several inputs)

STATE_ROW, EVENT_ROW = 0, 1
OUT, STATE_OUT, HELD, QUARANTINED = "out", "state", "held", "quarantined"


@dataclass(frozen=True)
class Rule:
    """A close rule in the units the runner compares: counts and microseconds."""

    count: int | None = None
    timeout_us: int | None = None
    every_us: int | None = None
    all_inputs: tuple[str, ...] = ()  # the inputs a context needs (all_inputs)

    @property
    def name(self) -> str:
        if self.all_inputs:
            return "all_inputs"
        if self.every_us is not None:
            return "every"
        return "+".join(n for n, v in (("count", self.count), ("timeout", self.timeout_us)) if v is not None)


@dataclass
class Closed:
    """What the rule decided for one key's events: closed groups (start, stop, how), quarantined
    ranges (start, stop, reason), and the first event that stays held."""

    groups: list[tuple[int, int, str]] = field(default_factory=list)
    quarantined: list[tuple[int, int, str]] = field(default_factory=list)
    held_from: int = 0


def close_groups(micros: Any, inputs: Any, rule: Rule, mark: int | None, end_of_input: bool) -> Closed:
    """The groups `rule` closes among one key's events (sorted; `micros` their event times)."""
    import numpy as np

    m = len(micros)
    done = Closed(held_from=m)
    if m == 0:
        return done
    if rule.all_inputs:
        return _contexts(micros, inputs, rule, mark, end_of_input)
    if rule.every_us is not None:
        every = rule.every_us
        bucket = micros // every
        starts = [0, *(np.flatnonzero(bucket[1:] != bucket[:-1]) + 1).tolist()]
        for i, start in enumerate(starts):
            stop = starts[i + 1] if i + 1 < len(starts) else m
            # event time reached the end of the group's interval (at the end of a batch run's
            # input, the mark is its newest event time); otherwise only the input's end closes it
            reached = mark is not None and (int(bucket[start]) + 1) * every <= mark
            if not (end_of_input or reached):
                done.held_from = start
                return done
            done.groups.append((start, stop, "every" if reached else "end_of_input"))
        return done
    count = rule.count if rule.count is not None else m + 1
    start = 0
    while start < m:
        first = int(micros[start])
        stop = min(start + count, m)
        if rule.timeout_us is not None:
            stop = min(stop, int(np.searchsorted(micros, first + rule.timeout_us, side="right")))
        # event time has passed the group's first event + t (at the end of a batch run's input, the
        # mark is its newest event time)
        timed_out = rule.timeout_us is not None and mark is not None and first + rule.timeout_us < mark
        if stop - start == count:
            how, final = "count", end_of_input or timed_out or (mark is not None and int(micros[stop - 1]) < mark)
        elif stop < m or timed_out:
            how, final = "timeout", end_of_input or timed_out
        else:
            how, final = "end_of_input", end_of_input
        if not final:
            done.held_from = start
            return done
        done.groups.append((start, stop, how))
        start = stop
    return done


def _contexts(micros: Any, inputs: Any, rule: Rule, mark: int | None, end_of_input: bool) -> Closed:
    """A context join over one key's events: a context is the events from its first one to the
    first + timeout (all of them without a timeout). It closes once every input has sent one of
    them; it is quarantined as incomplete once event time passes its first event + timeout, or at
    the end of a batch run's input, while an input is still missing. Its later events start the
    next context."""
    import numpy as np

    m = len(micros)
    done = Closed(held_from=m)
    present_of = inputs.tolist() if inputs is not None else [None] * m
    start = 0
    while start < m:
        first = int(micros[start])
        stop = m if rule.timeout_us is None else int(np.searchsorted(micros, first + rule.timeout_us, side="right"))
        present = set(present_of[start:stop])
        missing = [i for i in rule.all_inputs if i not in present]
        if not missing:
            done.groups.append((start, stop, "all_inputs"))
        elif end_of_input or (rule.timeout_us is not None and mark is not None and first + rule.timeout_us < mark):
            done.quarantined.append((start, stop, f"incomplete context: missing {', '.join(missing)}"))
        else:
            done.held_from = start
            return done
        start = stop
    return done


class GroupFailure(Exception):
    """The function failed on a group, or returned what the step does not declare. Its message is
    one line (step, key, where in udfs/, what), which framework.engine.failures shows as is."""

    MARK = "GroupFailure: "


class GroupState:
    """The `state` a group function gets: the key's value kept between its groups.

    Read `state.value` (None at first); replace it with `state.update(v)`; drop it with
    `state.clear()`. The value must be JSON: numbers, strings, booleans, lists, dicts (numpy
    numbers and pandas timestamps are converted). Also: `state.key` (the key's columns as a dict)
    and `state.closed_by` (why this group closed: count, timeout, every, all_inputs, end_of_input).
    """

    __slots__ = ("key", "closed_by", "value")

    def __init__(self, key: dict[str, Any], value: Any) -> None:
        self.key = key
        self.value = value
        self.closed_by = ""

    def update(self, value: Any) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None

    @property
    def exists(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class GroupRunner:
    """What each task runs (mapInArrow): rows of its keys in, OUT/STATE/HELD/QUARANTINED rows out."""

    step: str
    function: str
    fn: Callable[..., Any]
    args: dict[str, Any]
    rule: Rule
    key_columns: tuple[str, ...]
    event_columns: tuple[str, ...]  # every column of an event row but ROLE, KEY and STATE
    shown_columns: tuple[str, ...]  # what the function sees of an event (no hidden columns)
    returns: Any  # pyarrow schema of the function's rows
    schema: Any  # pyarrow schema of what the runner yields (framework.operators.group.runner_schema)
    spark_schema: Any  # the same as Spark's StructType
    mark: int | None = None
    end_of_input: bool = True
    root: str = ""  # the project's root: udfs/ files are named relative to it

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        pending = None
        for batch in batches:
            if batch.num_rows == 0:
                continue
            table = pa.Table.from_batches([batch])
            if pending is not None:
                table = pa.concat_tables([pending, table])
            keys = table.column(KEY)
            # the last key may go on in the next batch: keep its rows for then (rows are sorted by key)
            same = pc.equal(keys, keys[table.num_rows - 1]).to_numpy(zero_copy_only=False)
            first_of_last = int(np.argmax(same))
            if first_of_last > 0:
                yield from self._keys(table.slice(0, first_of_last))
            pending = table.slice(first_of_last)
        if pending is not None and pending.num_rows:
            yield from self._keys(pending)

    # -- one stretch of whole keys ---------------------------------------------------------------

    def _keys(self, table: Any) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        keys = table.column(KEY).to_numpy(zero_copy_only=False)
        roles = table.column(ROLE).to_numpy(zero_copy_only=False)
        micros = table.column(MICROS).fill_null(0).to_numpy(zero_copy_only=False)
        inputs = table.column(INPUT).to_numpy(zero_copy_only=False) if INPUT in table.column_names else None
        states = table.column(STATE).to_pylist() if STATE in table.column_names else [None] * table.num_rows
        events = table.select(list(self.shown_columns)).to_pandas()
        starts = [0, *(np.flatnonzero(keys[1:] != keys[:-1]) + 1).tolist(), table.num_rows]

        results, result_rows = [], []  # the function's rows, and the event row each one's key comes from
        state_keys, state_values = [], []
        held, quarantined, reasons = [], [], []
        for a, b in zip(starts[:-1], starts[1:], strict=True):
            key_text = keys[a]
            state = GroupState(json.loads(key_text), None)
            if roles[a] == STATE_ROW:
                state.value = json.loads(states[a]) if states[a] is not None else None
                a += 1
            closed = close_groups(micros[a:b], None if inputs is None else inputs[a:b], self.rule, self.mark, self.end_of_input)
            for start, stop, how in closed.groups:
                state.closed_by = how
                rows = self._call(events.iloc[a + start : a + stop].reset_index(drop=True), state, key_text)
                if rows is not None and len(rows):
                    results.append(rows)
                    result_rows.append(np.full(len(rows), a + start))
            for start, stop, reason in closed.quarantined:
                quarantined.append(np.arange(a + start, a + stop))
                reasons += [reason] * (stop - start)
            held.append(np.arange(a + closed.held_from, b))
            if state.value is not None:
                state_keys.append(key_text)
                state_values.append(self._state_json(state, key_text))

        parts = []
        if results:
            parts.append(self._out(table, results, np.concatenate(result_rows)))
        if state_keys:
            parts.append(
                {ROLE: pa.array([STATE_OUT] * len(state_keys)), KEY: pa.array(state_keys), STATE: pa.array(state_values)}
            )
        for role, rows, extra in ((HELD, held, {}), (QUARANTINED, quarantined, {REASON: pa.array(reasons, pa.string())})):
            index = np.concatenate(rows) if rows else np.array([], dtype=np.int64)
            if len(index):
                picked = table.select(list(self.event_columns)).take(pa.array(index))
                columns = {EVENT + name: picked.column(name) for name in self.event_columns}
                parts.append(
                    {ROLE: pa.array([role] * len(index)), KEY: table.column(KEY).take(pa.array(index)), **columns, **extra}
                )
        for part in parts:
            yield from self._shaped(part).to_batches()

    def _call(self, events: Any, state: GroupState, key_text: str) -> Any:
        """The function's rows for one group, as a DataFrame with the declared columns."""
        import pandas as pd

        try:
            returned = self.fn(events, state, self.args)
        except (Exception, SystemExit) as error:  # noqa: BLE001 - the analyst's code may raise anything, sys.exit() too
            raise GroupFailure(self._failure(key_text, error)) from None
        if returned is None:
            return None
        if isinstance(returned, dict):
            returned = pd.DataFrame([returned])
        elif isinstance(returned, list):
            returned = pd.DataFrame(returned)
        if not isinstance(returned, pd.DataFrame):
            raise GroupFailure(
                f"step '{self.step}', key {key_text}: {self.function} returned {type(returned).__name__}; "
                "return None, a dict (one row), a list of dicts or a pandas DataFrame"
            )
        declared = list(self.returns.names)
        if list(returned.columns) != declared:
            got = [str(c) for c in returned.columns]
            if set(got) == set(declared):
                return returned[declared]
            missing = [c for c in declared if c not in got]
            extra = [c for c in got if c not in declared]
            said = "; ".join(
                part for part in (f"missing {missing}" if missing else "", f"not declared {extra}" if extra else "") if part
            )
            raise GroupFailure(
                f"step '{self.step}', key {key_text}: {self.function} returned columns {got}, "
                f"the step declares {declared} ({said})"
            )
        return returned

    def _out(self, table: Any, results: list[Any], rows: Any) -> dict[str, Any]:
        import pandas as pd
        import pyarrow as pa

        frame = pd.concat(results, ignore_index=True) if len(results) > 1 else results[0]
        try:
            returned = pa.Table.from_pandas(frame, schema=self.returns, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as error:
            raise GroupFailure(self._type_failure(frame, error)) from None
        keys = table.select(list(self.key_columns)).take(pa.array(rows))
        return {
            ROLE: pa.array([OUT] * len(rows)),
            **{name: keys.column(name) for name in self.key_columns},
            **{name: returned.column(name) for name in self.returns.names},
        }

    def _shaped(self, columns: dict[str, Any]) -> Any:
        """One part as the runner's schema: the columns it has, nulls for the others."""
        import pyarrow as pa

        rows = len(next(iter(columns.values())))
        arrays = []
        for f in self.schema:
            column = columns.get(f.name)
            if column is None:
                arrays.append(pa.nulls(rows, f.type))
            else:
                arrays.append(column.cast(f.type) if column.type != f.type else column)
        return pa.Table.from_arrays(
            [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays], schema=self.schema
        )

    # -- saying what went wrong ------------------------------------------------------------------

    def _failure(self, key_text: str, error: BaseException) -> str:
        frames = traceback.extract_tb(error.__traceback__)
        own = [f for f in frames if f.filename == getattr(getattr(self.fn, "__code__", None), "co_filename", None)]
        inside = (own or frames[-1:])[-1] if (own or frames) else None
        where = ""
        if inside is not None:
            name = inside.filename
            if self.root and name.startswith(self.root.rstrip("/") + "/"):
                name = os.path.relpath(name, self.root)
            where = f"{name}:{inside.lineno} in {inside.name}: "
        text = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return f"step '{self.step}', key {key_text}: {where}{type(error).__name__}" + (f": {text}" if text else "")

    def _type_failure(self, frame: Any, error: BaseException) -> str:
        import pyarrow as pa

        for name in self.returns.names:
            try:
                pa.Table.from_pandas(frame[[name]], schema=pa.schema([self.returns.field(name)]), preserve_index=False)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e:
                declared = self.returns.field(name).type
                first = str(e).strip().splitlines()[0]
                return f"step '{self.step}': {self.function} returned column '{name}' that is not {declared}: {first}"
        return f"step '{self.step}': {self.function} returned rows that do not fit the declared columns: {error}"

    def _state_json(self, state: GroupState, key_text: str) -> str:
        try:
            return json.dumps(state.value, default=_plain, allow_nan=True)
        except (TypeError, ValueError) as error:
            raise GroupFailure(
                f"step '{self.step}', key {key_text}: {self.function} kept a state that is not JSON "
                f"({error}); keep numbers, strings, booleans, lists and dicts"
            ) from None


def _plain(value: Any) -> Any:
    """numpy numbers and arrays, pandas timestamps: as JSON can hold them."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    raise TypeError(f"{type(value).__name__} is not JSON")
