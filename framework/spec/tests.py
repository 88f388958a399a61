"""Unit tests of a pipeline, as YAML: given rows for what a step reads, the rows it must produce.

They live beside the pipeline they test, in its `tests:` key or in `pipelines/<name>.tests.yaml`,
so they are read, located (file:line) and refused like the rest of the spec: a misspelt key is a
"did you mean" at its line before anything runs. `tributary test` runs them
(framework.testing); `validate` checks their names and columns against the columns the compiler
knows before Spark starts.

The rows are plain YAML mappings (or a small CSV / JSON file beside the tests): values are typed by
the columns they fill, as a source's declared schema or a step's known columns type them, so a
timestamp is written as its ISO text and a number as a number.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from framework.spec.base import Name, SpecModel, problem_at

Row = dict[str, Any]


class RowsFile(SpecModel):
    """Rows kept in a file beside the tests."""

    file: str = Field(
        description="A CSV file with a header line, or a JSON file (one array of objects, or one object per line); "
        "relative to the file holding the tests."
    )


Rows = list[Row] | RowsFile


def _rows_or_expected(value: Any) -> Any:
    """`expect:` as a plain list is its rows, compared in any order."""
    return {"rows": value} if isinstance(value, list) else value


class Expected(SpecModel):
    """What the checked step or output must produce."""

    rows: Rows = Field(default_factory=list, description="The rows it produces (all of them).")
    match: Literal["any_order", "exact"] = Field(
        "any_order", description="any_order: the same rows in any order; exact: the same rows in the same order."
    )
    columns: list[str] | None = Field(
        None, description="Compare only these columns (default: every column of the step; each row then names them all)."
    )
    quarantined: Rows | None = Field(
        None,
        description="The rows its drop expectations send to the quarantine, compared on the columns the rows name "
        "(a column a row leaves out is null).",
    )


class Delivery(SpecModel):
    """One delivery of a streaming scenario: rows landing in the sources, then a run over what is
    new, then what the stream has done so far."""

    rows: dict[Name, Rows] = Field(description="Rows landing now, per source (each source's rows as one file).")
    emitted: Annotated[Expected | list[Row] | None, BeforeValidator(_rows_or_expected)] = Field(
        None, description="Every row the checked step has emitted so far: a list (any order), or {rows, match, columns}."
    )
    held: int | None = Field(
        None,
        ge=0,
        description="How many rows the step still holds when the run ends (waiting for the watermark, a count or a missing input).",
    )
    watermark: str | None = Field(None, description="The stream's watermark after this delivery (an ISO time).")

    @field_validator("watermark")
    @classmethod
    def _an_iso_time(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise ValueError(f"'{value}' is not a time: write it as ISO, e.g. 2026-11-02T08:00:00Z") from None
        return value

    late: int | list[Row] | None = Field(
        None,
        description="The rows recorded as late so far (behind their source's watermark): how many, or the rows on the "
        "columns they name (the row's own columns, and source, reason...), compared as text.",
    )
    quarantined: int | list[Row] | None = Field(
        None,
        description="The rows sent to the quarantine so far: how many, or the rows on the columns they name (the "
        "row's own columns, and reason...), compared as text.",
    )

    @property
    def expected(self) -> Expected | None:
        return self.emitted if isinstance(self.emitted, Expected) else None


class UnitTest(SpecModel):
    """One test: a step (or output) run over given rows, its rows compared with the expected ones."""

    description: str = ""
    step: Name = Field(description="The step or output it checks; only it and the steps between it and the given rows run.")
    given: dict[Name, Rows] = Field(
        default_factory=dict,
        description="Rows for the sources and steps it reads; a given step's own inputs are not read. Every source the "
        "checked step needs is given (an empty list: no rows).",
    )
    vars: dict[str, Any] = Field(default_factory=dict, description="Vars for this test (over the pipeline's and the profile's).")
    interval: str | None = Field(None, description="The time interval START/END the run covers, as --interval reads it.")
    expect: Annotated[Expected | list[Row] | None, BeforeValidator(_rows_or_expected)] = Field(
        None, description="Its rows: a list (any order), or {rows, match, columns, quarantined}."
    )
    then: list[Delivery] | None = Field(
        None,
        min_length=1,
        description="Streaming pipelines: deliveries in order; after each one the stream runs over what is new "
        "(a real micro-batch run) and the delivery's emitted, held, late and quarantined rows are checked.",
    )
    fails: bool | str = Field(
        False,
        description="The run must stop (a `fail` expectation, an error); a text: the error's message must contain it.",
    )

    @property
    def expected(self) -> Expected | None:
        """`expect:` (a list of rows was read as {rows: ...})."""
        return self.expect if isinstance(self.expect, Expected) else None

    @model_validator(mode="after")
    def _expects_something(self) -> UnitTest:
        if self.then is not None:
            if self.expect is not None or self.given or self.fails is not False:
                raise problem_at(
                    "then", "a scenario's rows and expectations are in its deliveries (then:), not given:/expect:/fails:"
                )
            return self
        if self.expect is None and self.fails is False:
            raise problem_at("step", "a test expects rows (expect:) or a failure (fails:)", "add expect: [ ...rows... ]")
        if self.expect is not None and self.fails is not False:
            raise problem_at("fails", "a test expects rows or a failure, not both", "drop expect: or fails:")
        return self


Tests = dict[Name, UnitTest]


class TestsFile(SpecModel):
    """`pipelines/<name>.tests.yaml`: the tests of pipelines/<name>.yaml."""

    __test__ = False  # not a pytest class

    tests: Tests = Field(min_length=1, description="Tests by name.")


def tests_field() -> Any:
    return Field(
        default_factory=dict,
        description="Unit tests of its steps (`tributary test`): given rows, expected rows. Also in pipelines/<name>.tests.yaml.",
    )
