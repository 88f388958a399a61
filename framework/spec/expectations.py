"""Expectations in the spec: Great Expectations checks on a step's or an output's rows.

In YAML an expectation is written as GX names it, with its arguments, plus what to do when it
fails:

    expectations:
      - expect_column_values_to_not_be_null: {column: head_service, mostly: 0.999}
        severity: drop            # warn | drop | fail (default)
        meta: {dimension: completeness}
      - expect_column_values_to_be_between: {column: completeness_100, min_value: 0.8}
        on: integration           # the step's row in _tributary/integration_quality
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from framework.spec.base import SpecModel
from framework.spec.expectation_catalog import COLUMN_ARGS, catalog, expectation_problems, is_row_level

Severity = Literal["warn", "drop", "fail"]

#: Columns of the integration quality table (framework.integration.evaluation.metrics_rows), which
#: `on: integration` expectations check.
INTEGRATION_COLUMNS = (
    "run_id", "pipeline", "step", "operator", "strategy", "size", "timeout_s",
    "tuples", "instances", "units", "completeness_100", "completeness_85", "completeness_75",
    "partial_completeness", "recall", "correct_rate",
    "windows_open_max", "windows_open_mean", "tuples_held_max", "tuples_held_mean", "evaluated_at",
)  # fmt: skip

#: A row's failed `drop` expectations travel as the bits of one positive 64-bit number.
MAX_DROP_EXPECTATIONS = 63


#: What an expectation may say besides its one `expect_...` key.
_SETTINGS = ("severity", "on", "meta")


class ExpectationSpec(SpecModel):
    """One expectation: its GX name and arguments, its severity and what it looks at."""

    name: str = Field(description="A Great Expectations expectation, e.g. expect_column_values_to_not_be_null.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="The expectation's arguments (column, mostly, ...).")
    severity: Severity = Field(
        "fail",
        description="warn: record and go on; drop: quarantine failing rows, keep the rest; fail: stop before committing.",
    )
    on: Literal["rows", "integration"] = Field(
        "rows", description="rows: the step's rows; integration: the step's integration quality figures (truth:)."
    )
    meta: dict[str, Any] = Field(default_factory=dict, description="Free-form, e.g. {dimension: completeness}.")

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        """The YAML shape (one `expect_...` key plus settings), so editors complete the names."""
        fields = handler(core_schema)
        fields = handler.resolve_ref_schema(fields) if "$ref" in fields else fields
        settings = {k: v for k, v in fields.get("properties", {}).items() if k in _SETTINGS}
        names = {
            name: {"type": "object", "description": f"Great Expectations {entry['class']}: its arguments"}
            for name, entry in sorted(catalog().items())
        }
        return {
            "type": "object",
            "description": cls.__doc__,
            "properties": {**names, **settings},
            "additionalProperties": False,
            "minProperties": 1,
        }

    @model_validator(mode="before")
    @classmethod
    def _from_yaml_shape(cls, data: Any) -> Any:
        """`{expect_x: {...}, severity: ...}` → `{name: expect_x, kwargs: {...}, severity: ...}`."""
        if not isinstance(data, dict) or "name" in data:
            return data
        names = [k for k in data if k not in _SETTINGS]
        if len(names) != 1:
            raise ValueError(
                "an expectation is one `expect_...: {arguments}` key plus optional severity, on and meta"
                + (f"; this one has {', '.join(map(str, names))}" if names else "")
            )
        name = str(names[0])
        kwargs = data[name] if data[name] is not None else {}
        if not isinstance(kwargs, dict):
            raise ValueError(f"{name}: its arguments must be a mapping, e.g. {name}: {{column: x}}")
        return {"name": name, "kwargs": kwargs, **{k: data[k] for k in _SETTINGS if k in data}}

    @model_validator(mode="after")
    def _known_expectation(self) -> ExpectationSpec:
        problems = expectation_problems(self.name, self.kwargs)
        if problems:
            raise ValueError("; ".join(problems))
        if self.severity == "drop" and not self.row_level:
            raise ValueError(
                f"{self.name} judges the whole table, not single rows, so it cannot drop rows; use severity warn or fail"
            )
        if self.severity == "drop" and self.on == "integration":
            raise ValueError("integration figures are not rows of the pipeline: use severity warn or fail")
        return self

    @property
    def row_level(self) -> bool:
        return is_row_level(self.name)

    @property
    def label(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.kwargs.items())
        return f"{self.name}({args})"

    def columns(self) -> list[str]:
        """The columns its arguments name (column, column_A, column_B, column_list)."""
        named: list[str] = []
        for arg in COLUMN_ARGS:
            value = self.kwargs.get(arg)
            named += [str(c) for c in value] if isinstance(value, list) else [str(value)] if value is not None else []
        return named


Expectations = list[ExpectationSpec]


def expectations_field() -> Any:
    return Field(
        default_factory=list,
        description="Great Expectations checks, e.g. - expect_column_values_to_not_be_null: {column: id}",
    )
