"""Step kinds of the spec. A step is a mapping holding exactly one kind key (`sql:`, `union:`...).

Kinds register themselves in STEP_KINDS; the pipeline model accepts any registered kind, so a new
kind is a new class here plus an operator in framework/operators, never a new branch elsewhere.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Union

from pydantic import Discriminator, Field, Tag

from framework.spec.base import Name, SpecModel

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
