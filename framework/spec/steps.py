"""Step kinds of the spec. A step is a mapping holding exactly one kind key (`sql:`, `union:`...).

Kinds register themselves in STEP_KINDS; the pipeline model accepts any registered kind. What a
kind does and can do is its entry in the step-kind registry (framework.operators.registry), which
refuses to load when a kind here has no entry there.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BeforeValidator, Discriminator, Field, Tag, TypeAdapter, ValidationError, model_validator

from framework.spec.base import Count, Name, SpecModel
from framework.spec.durations import Duration
from framework.spec.expectations import Expectations, expectations_field

STEP_KINDS: dict[str, type[StepSpec]] = {}


def step_kind(cls: type[StepSpec]) -> type[StepSpec]:
    STEP_KINDS[cls.kind] = cls
    return cls


class StepSpec(SpecModel):
    kind: ClassVar[str]
    description: str = ""
    expectations: Expectations = expectations_field()

    def declared_inputs(self) -> list[str]:
        """Inputs named in the spec itself (SQL steps find theirs by rendering ref()/source())."""
        return []


@step_kind
class SqlStep(StepSpec):
    """A Spark SQL query: a template file under sql/ (`x.sql`) or the query inline."""

    kind: ClassVar[str] = "sql"
    sql: str = Field(min_length=1, description="A template file under sql/ (ending in .sql) or inline Spark SQL.")

    @property
    def template_file(self) -> str | None:
        return template_file(self.sql)


def template_file(sql: str) -> str | None:
    """The template file a step's `sql:` names (`x.sql`), or None when it holds the query itself."""
    text = sql.strip()
    if text.endswith(".sql") and not any(c.isspace() for c in text):
        return text
    return None


@step_kind
class UnionStep(StepSpec):
    """All rows of the inputs, columns matched by name (missing ones become null), plus `_source`."""

    kind: ClassVar[str] = "union"
    union: list[Name] = Field(min_length=1, description="Sources or steps to stack.")

    def declared_inputs(self) -> list[str]:
        return list(self.union)


class TimeWindow(SpecModel):
    """Right rows whose event time lies in [left.ts - before, left.ts + after]."""

    before: Duration = Field(0.0, description="How far the right row may precede the left one.")
    after: Duration = Field(0.0, description="How far the right row may follow the left one.")


class CountWindow(SpecModel):
    """Each row meets the matching rows among the last `left` rows of the left input and the last
    `right` rows of the right input, counted when the later row of a pair arrived."""

    left: Count = Field(description="W_A: window length of the left input, in rows.")
    right: Count = Field(description="W_B: window length of the right input, in rows.")


class JoinEventTime(SpecModel):
    """Each input's event-time column, where the two inputs name it differently."""

    left: str = Field(description="Timestamp column of the left input.")
    right: str = Field(description="Timestamp column of the right input.")


class JoinSpec(SpecModel):
    left: Name
    right: Name
    on: list[str] = Field(min_length=1, description="Equality key columns present in both inputs.")
    type: Literal["inner", "left"] = "inner"
    event_time: str | JoinEventTime = Field(
        "ts",
        description="Timestamp column of both inputs (the order of arrival), or one per input: "
        "{left: dep_time, right: obs_time}.",
    )
    within: TimeWindow | None = Field(None, description="A time window.")
    last: CountWindow | None = Field(None, description="A count window.")
    tiebreak: list[str] = Field(default_factory=list, description="Columns ordering rows with equal event times.")
    partitions: Count | None = Field(
        None,
        description=(
            "On a stream, with a count window: the tasks each micro-batch spreads the keys over (hash N). It may change between runs: "
            "the next micro-batch redistributes the carried state. Default: the profile's spark.sql.shuffle.partitions."
        ),
    )

    @model_validator(mode="after")
    def _one_window(self) -> JoinSpec:
        if (self.within is None) == (self.last is None):
            raise ValueError("a join needs exactly one window: 'within' (time) or 'last' (count)")
        if self.left == self.right:
            raise ValueError("a join reads two different inputs")
        if self.within is not None and self.partitions is not None:
            raise ValueError(
                "'partitions' spreads a count window's keys; a time window is Spark's own stream-stream join, "
                "whose partitions its checkpoint pins: leave 'partitions' out"
            )
        return self

    @property
    def left_event_time(self) -> str:
        """The left input's event-time column."""
        return self.event_time if isinstance(self.event_time, str) else self.event_time.left

    @property
    def right_event_time(self) -> str:
        """The right input's event-time column."""
        return self.event_time if isinstance(self.event_time, str) else self.event_time.right

    def event_time_at(self, side: Literal["left", "right"]) -> tuple[str, ...]:
        """Where a side's event time is written in the YAML (under the step's `join:`)."""
        return ("join", "event_time") if isinstance(self.event_time, str) else ("join", "event_time", side)


@step_kind
class JoinStep(StepSpec):
    """Two inputs joined on equal keys within a time or count window (Liu et al., Algorithm 1; see docs/references.md)."""

    kind: ClassVar[str] = "join"
    join: JoinSpec

    def declared_inputs(self) -> list[str]:
        return [self.join.left, self.join.right]


#: Association strategies (Li et al., §4.2; see docs/references.md): which roles make up the key that ties a tuple to its
#: instance. Roles map to the input's columns through `columns:`.
STRATEGIES: dict[str, tuple[str, ...]] = {
    "head": ("head",),
    "head+time": ("head", "time"),
    "head+client": ("head", "client"),
    "head+client+time": ("head", "client", "time"),
}


class AssociationColumns(SpecModel):
    """The input columns behind each role of an association strategy."""

    head: str | None = Field(None, description="The composite service (page) a tuple belongs to.")
    client: str | None = Field(None, description="The client (IP, user) that made the invocation.")
    time: str | None = Field(None, description="The instance's own timestamp, carried by each of its tuples.")


class Truth(SpecModel):
    """Ground truth in the input, for measuring integration quality (tributary evaluate)."""

    instance: str = Field(description="Column holding each tuple's true instance id.")
    primary: str = Field(description="Boolean column: true for the instance's primary (head) invocation.")


class KeyedWindowSpec(SpecModel):
    """What SWA and the tumbling baseline share: an input, a key, an order, aggregates."""

    input: Name = Field(description="The step or source whose tuples are grouped.")
    key: str | list[str] = Field(
        description="An association strategy (head, head+time, head+client, head+client+time) or a list of columns."
    )
    columns: AssociationColumns = Field(
        default_factory=AssociationColumns, description="The columns behind the strategy's roles."
    )
    event_time: str = Field(description="Timestamp column ordering the tuples.")
    tiebreak: list[str] = Field(default_factory=list, description="Columns ordering tuples with equal event times.")
    aggregates: dict[str, str] = Field(
        default_factory=dict, description="Output column -> Spark SQL aggregate over the window's tuples, e.g. sum(bytes)."
    )
    truth: Truth | None = Field(None, description="Ground-truth columns: measure completeness and correctness.")
    partitions: Count | None = Field(
        None,
        description=(
            "On a stream: the tasks each micro-batch spreads the keys over (hash N). It may change between runs: "
            "the next micro-batch redistributes the carried state. Default: the profile's spark.sql.shuffle.partitions."
        ),
    )

    @model_validator(mode="after")
    def _known_strategy(self) -> KeyedWindowSpec:
        if isinstance(self.key, str):
            if self.key not in STRATEGIES:
                raise ValueError(
                    f"unknown association strategy '{self.key}'; valid: {', '.join(STRATEGIES)}, or a list of columns"
                )
            missing = [role for role in STRATEGIES[self.key] if getattr(self.columns, role) is None]
            if missing:
                wanted = ", ".join(f"{role}: <column>" for role in missing)
                raise ValueError(f"strategy '{self.key}' needs the column of role(s) {missing}: add columns: {{{wanted}}}")
        elif not self.key:
            raise ValueError("key needs at least one column")
        return self

    def key_columns(self) -> list[str]:
        if isinstance(self.key, list):
            return list(self.key)
        return [getattr(self.columns, role) for role in STRATEGIES[self.key]]

    def key_label(self) -> str:
        return self.key if isinstance(self.key, str) else "+".join(self.key)


class LearnSpec(SpecModel):
    """How `size: auto` / `timeout: auto` learn n and t per head (framework.operators.window_sizes)."""

    alpha: float = Field(0.9, gt=0, lt=1, description="n per head: the smallest size covering this share of its instances.")
    beta: float = Field(0.05, gt=0, lt=1, description="t per head: the smallest whole second at most this share outlasts.")
    min_instances: Count = Field(
        1, description="Heads with fewer instances in history use the global n and t (a head's t needs ⌈1/β⌉ instances too)."
    )
    by: str | None = Field(None, description="The column whose values get their own n and t (default: the head role's).")


AUTO = "auto"


def _auto_or(kind: Any, what: str) -> Any:
    """A validator keeping `auto` and checking anything else as `kind`, with one message for both."""
    adapter = TypeAdapter(kind)

    def check(value: Any) -> Any:
        if value == AUTO:
            return value
        try:
            checked = adapter.validate_python(value)
        except ValidationError as e:
            reason = e.errors()[0]["msg"].removeprefix("Value error, ")
            raise ValueError(f"{reason} (or auto: learned per head)") from None
        if not checked > 0:
            raise ValueError(f"{what} must be more than 0 (or auto: learned per head)")
        return checked

    return BeforeValidator(check)


class SwaSpec(KeyedWindowSpec):
    size: Annotated[Count | Literal["auto"], _auto_or(Count, "size")] = Field(
        description="n: a window closes when it holds this many tuples; auto: learned per head."
    )
    timeout: Annotated[Duration | Literal["auto"], _auto_or(Duration, "timeout")] = Field(
        description="t: a tuple more than t after the window's first tuple opens a new window; auto: learned per head."
    )
    learn: LearnSpec = Field(default_factory=LearnSpec, description="size: auto / timeout: auto: how n and t are learned.")

    @model_validator(mode="after")
    def _positive_and_learnable(self) -> SwaSpec:
        if self.learns and self.learned_by is None:
            raise ValueError(
                "size: auto / timeout: auto learn n and t per head: use a strategy with a head (head, head+client, ...) "
                "or name the column in learn: {by: <column>}"
            )
        return self

    @property
    def learns(self) -> bool:
        """Whether n or t is learned per head (else both are the numbers written here)."""
        return AUTO in (self.size, self.timeout)

    @property
    def learned_by(self) -> str | None:
        if self.learn.by is not None:
            return self.learn.by
        return self.columns.head if isinstance(self.key, str) and "head" in STRATEGIES[self.key] else None

    @property
    def timeout_micros(self) -> int:
        """t in the unit the fold compares event times in (a fixed timeout only)."""
        assert self.timeout != AUTO, "a learned timeout is a column (framework.operators.window_sizes)"
        return round(float(self.timeout) * 1_000_000)


@step_kind
class SwaStep(StepSpec):
    """Small window array (Li et al., §5.1): per key, windows closed by count n or timeout t."""

    kind: ClassVar[str] = "swa"
    swa: SwaSpec

    def declared_inputs(self) -> list[str]:
        return [self.swa.input]


class TumblingSpec(KeyedWindowSpec):
    size: Count = Field(description="W: tuples per count window (advance = W) over the whole input.")


@step_kind
class TumblingStep(StepSpec):
    """The paper's baseline: count windows of W tuples over all keys, grouped by key inside each."""

    kind: ClassVar[str] = "tumbling"
    tumbling: TumblingSpec

    def declared_inputs(self) -> list[str]:
        return [self.tumbling.input]


class CloseRule(SpecModel):
    """When a group of a key is complete and its function runs: the PE buffer's flush strategy of
    Satzger et al. (ESC), §4; see docs/references.md."""

    count: Count | None = Field(None, description="Close after this many events (with timeout: whichever comes first).")
    timeout: Duration | None = Field(
        None, gt=0, description="Close when event time passes the group's first event + timeout (with all_inputs: give up)."
    )
    every: Duration | None = Field(None, gt=0, description="Close every interval of event time (aligned to the epoch).")
    all_inputs: bool = Field(False, description="Close when an event of the key (context) has come from every input.")

    @model_validator(mode="after")
    def _one_rule(self) -> CloseRule:
        if self.count is None and self.timeout is None and self.every is None and not self.all_inputs:
            raise ValueError("say when a group closes: count, timeout, every or all_inputs")
        if self.every is not None and (self.count is not None or self.timeout is not None or self.all_inputs):
            raise ValueError("'every' closes groups by event time alone: drop count, timeout and all_inputs")
        if self.all_inputs and self.count is not None:
            raise ValueError("'all_inputs' closes a context when every input has come: drop count (timeout gives up on it)")
        return self

    @property
    def name(self) -> str:
        if self.all_inputs:
            return "all_inputs"
        if self.every is not None:
            return "every"
        return "+".join(rule for rule in ("count", "timeout") if getattr(self, rule) is not None)


class GroupSpec(SpecModel):
    """A keyed stateful user function: events grouped per key until the close rule says the group
    is complete, then f(events, state, args) from udfs/ (framework.operators.group)."""

    inputs: list[Name] = Field(min_length=1, description="Sources or steps whose events are grouped (tagged by _input).")
    key: list[str] | None = Field(None, min_length=1, description="Columns grouping the events (the function's key).")
    context: str | list[str] | None = Field(None, description="The context join's key: another name for key.")
    event_time: str = Field(description="Timestamp column ordering the events.")
    tiebreak: list[str] = Field(default_factory=list, description="Columns ordering events with equal event times.")
    close: CloseRule = Field(description="When a group is complete: count, timeout, every or all_inputs.")
    function: str = Field(min_length=1, description="A @group_function from udfs/.")
    args: dict[str, Any] = Field(default_factory=dict, description="Passed to the function as its third argument.")
    returns: str | dict[str, str] | None = Field(
        None, description="Spark DDL of the function's rows (default: the decorator's returns=)."
    )
    partitions: Count | None = Field(None, description="Spread keys over this many tasks (hash N).")

    @model_validator(mode="after")
    def _consistent(self) -> GroupSpec:
        if (self.key is None) == (self.context is None):
            raise ValueError("give the grouping columns as 'key' (or, for a context join, 'context'), exactly one of them")
        if self.close.all_inputs and len(self.inputs) < 2:
            raise ValueError("'all_inputs' joins the contexts of two or more inputs; list them under inputs")
        if len(set(self.inputs)) != len(self.inputs):
            raise ValueError("an input is listed twice under inputs")
        return self

    def key_columns(self) -> list[str]:
        chosen = self.key if self.key is not None else self.context
        return [chosen] if isinstance(chosen, str) else list(chosen or [])


@step_kind
class GroupStep(StepSpec):
    """Per key, groups of events closed by a rule and handed to a user function with per-key state."""

    kind: ClassVar[str] = "group"
    group: GroupSpec

    def declared_inputs(self) -> list[str]:
        return list(self.group.inputs)


def kind_of(raw: Any) -> str | None:
    """The step's kind: the one registered kind key it holds (None if zero or several)."""
    if isinstance(raw, StepSpec):
        return raw.kind
    if isinstance(raw, dict):
        kinds = [key for key in raw if key in STEP_KINDS]
        if len(kinds) == 1:
            return kinds[0]
    return None


def any_step_type() -> Any:
    """The pydantic type accepting every registered kind (built once all kinds are defined)."""
    members = tuple(Annotated[cls, Tag(kind)] for kind, cls in STEP_KINDS.items())
    return Annotated[
        Union[members],  # a runtime-built union needs the Union form
        Discriminator(
            kind_of,
            custom_error_type="step_kind",
            custom_error_message="a step needs exactly one kind key",
        ),
    ]
