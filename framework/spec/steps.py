"""Step kinds of the spec. A step is a mapping holding exactly one kind key (`sql:`, `union:`...).

Kinds register themselves in STEP_KINDS; the pipeline model accepts any registered kind, so a new
kind is a new class here plus an operator in framework/operators, never a new branch elsewhere.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import Discriminator, Field, Tag, model_validator

from framework.spec.base import Name, SpecModel
from framework.spec.durations import Duration

STEP_KINDS: dict[str, type[StepSpec]] = {}


def step_kind(cls: type[StepSpec]) -> type[StepSpec]:
    STEP_KINDS[cls.kind] = cls
    return cls


class StepSpec(SpecModel):
    kind: ClassVar[str]
    description: str = ""

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
        text = self.sql.strip()
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

    left: int = Field(ge=1, description="W_A: window length of the left input, in rows.")
    right: int = Field(ge=1, description="W_B: window length of the right input, in rows.")


class JoinSpec(SpecModel):
    left: Name
    right: Name
    on: list[str] = Field(min_length=1, description="Equality key columns present in both inputs.")
    type: Literal["inner", "left"] = "inner"
    event_time: str = Field("ts", description="Timestamp column of both inputs (the order of arrival).")
    within: TimeWindow | None = Field(None, description="A time window.")
    last: CountWindow | None = Field(None, description="A count window.")
    tiebreak: list[str] = Field(default_factory=list, description="Columns ordering rows with equal event times.")

    @model_validator(mode="after")
    def _one_window(self) -> JoinSpec:
        if (self.within is None) == (self.last is None):
            raise ValueError("a join needs exactly one window: 'within' (time) or 'last' (count)")
        if self.left == self.right:
            raise ValueError("a join reads two different inputs")
        return self


@step_kind
class JoinStep(StepSpec):
    """Two inputs joined on equal keys within a time or count window (seed 001, Algorithm 1)."""

    kind: ClassVar[str] = "join"
    join: JoinSpec

    def declared_inputs(self) -> list[str]:
        return [self.join.left, self.join.right]


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
        Union[members],  # noqa: UP007 - a runtime-built union needs the Union form
        Discriminator(
            kind_of,
            custom_error_type="step_kind",
            custom_error_message="a step needs exactly one kind key",
        ),
    ]
