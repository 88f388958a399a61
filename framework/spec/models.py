"""The pipeline spec: what a pipeline YAML file may say. Validation only, no Spark here."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field, model_validator

from framework.spec.base import Count, Name, SpecModel, TableName, Version, problem_at
from framework.spec.durations import Duration
from framework.spec.expectations import Expectations, expectations_field
from framework.spec.schedule import Schedule
from framework.spec.steps import any_step_type
from framework.spec.tests import Tests, tests_field

Scalar = Union[str, int, float, bool]


class Freshness(SpecModel):
    """How old a source's newest data may be before a scheduled run warns or fails (dbt's source
    freshness): measured on its newest event time when it has `event_time` and it can be read
    without Spark (Parquet footers, Delta), else on its newest file's time (Delta: its last commit)."""

    warn_after: Duration | None = Field(None, gt=0, description="Older than this: a warning (the run goes on), e.g. 1h.")
    error_after: Duration | None = Field(
        None, gt=0, description="Older than this: the scheduled run fails (retried like any failure), e.g. 1d."
    )

    @model_validator(mode="after")
    def _one_and_ordered(self) -> Freshness:
        if self.warn_after is None and self.error_after is None:
            raise ValueError("freshness needs warn_after, error_after or both, e.g. {warn_after: 1h, error_after: 1d}")
        if self.warn_after is not None and self.error_after is not None and self.warn_after >= self.error_after:
            raise ValueError("warn_after must be shorter than error_after: a source warns before it fails")
        return self


class _EventTimed(SpecModel):
    """What every source has: its rows' event time and how late they may come."""

    event_time: str | None = Field(
        None,
        description="Timestamp column giving each row's event time, or a SQL expression over the columns (then it is the column _event_time).",
    )
    watermark: Duration | None = Field(None, description="How late rows may arrive (streaming), e.g. 30s.")
    freshness: Freshness | None = Field(
        None,
        description="How old its newest data may be: {warn_after: 1h, error_after: 1d}; `tributary freshness` and "
        "the scheduler (before each run) check it.",
    )
    description: str = ""

    @model_validator(mode="after")
    def _event_time(self) -> _EventTimed:
        if self.watermark is not None and self.event_time is None:
            raise ValueError("'watermark' needs 'event_time': the timestamp column it applies to")
        return self


class _Files(_EventTimed):
    """What file sources have: where the files are and how many a micro-batch takes."""

    path: str = Field(description="File, folder or glob; relative paths start at the project root.")
    max_files_per_trigger: Count | None = Field(None, description="Streaming: at most this many new files per micro-batch.")


class FileSource(_Files):
    """Files (a file, a folder or a glob) in JSON lines, CSV or Parquet."""

    format: Literal["json", "csv", "parquet"]
    schema_: str | dict[str, str] | None = Field(
        None,
        alias="schema",
        description="Spark DDL ('ts TIMESTAMP, n INT') or a mapping column: type. Without it the schema is inferred "
        "(Parquet: read from the files' footers).",
    )
    options: dict[str, Scalar] = Field(default_factory=dict, description="Spark reader options.")
    origin: bool = Field(
        False,
        description="Add _file and _line: the file each row came from and its 1-based line (Parquet: row) in that file.",
    )

    @model_validator(mode="after")
    def _numbered_records(self) -> FileSource:
        multi_line = any(k.lower() == "multiline" and str(v).lower() == "true" for k, v in self.options.items())
        if self.origin and multi_line:
            raise ValueError("'origin' numbers a record by its line, and a multiLine record spans several: drop one of them")
        return self

    def ddl(self) -> str | None:
        if self.schema_ is None or isinstance(self.schema_, str):
            return self.schema_
        return ", ".join(f"`{col}` {typ}" for col, typ in self.schema_.items())


class DeltaSource(_EventTimed):
    """A Delta table by path or by name under the warehouse, optionally at a past version."""

    format: Literal["delta"]
    path: str | None = Field(None, description="Table location (relative paths start at the project root).")
    table: TableName | None = Field(None, description="Table name under the warehouse (see outputs' name).")
    version: Version | None = Field(None, description="Time travel: read this table version.")
    timestamp: datetime | None = Field(None, description="Time travel: read the table as of this time.")
    own_output: bool = Field(
        False,
        description="This pipeline also writes the table: read it on purpose (e.g. its previous version, for an incremental build).",
    )
    ignore_changes: bool = Field(
        False,
        description="Streaming: a commit that removes rows (an overwrite, a merge, a delete) no longer stops the stream; "
        "the rows it adds are streamed, so rows it rewrote come again.",
    )

    @model_validator(mode="after")
    def _one_location(self) -> DeltaSource:
        if (self.path is None) == (self.table is None):
            raise ValueError("a delta source needs exactly one of 'path' or 'table'")
        if self.version is not None and self.timestamp is not None:
            raise ValueError("give 'version' or 'timestamp', not both")
        return self


class LineParse(SpecModel):
    """Splitting each line of a text source into named columns by a regular expression."""

    pattern: str = Field(description="A Java regular expression; its groups, in order, are the columns.")
    columns: list[str] | dict[str, str] = Field(
        description="The groups' column names (text), or a mapping column: Spark type (cast; a value that does not cast "
        "sends its line to the quarantine)."
    )

    @model_validator(mode="after")
    def _valid(self) -> LineParse:
        from framework.spec.java_regex import java_group_names, java_groups

        groups = java_groups(self.pattern)  # Spark runs it with java.util.regex
        if groups != len(self.columns):
            raise ValueError(f"pattern has {groups} group(s) and columns names {len(self.columns)}: give one column per group")
        columns = [c.lower() for c in self.columns]
        taken = [c for c in self.columns if c.lower() in ("_file", "_line")]
        if taken:
            raise ValueError(
                f"column '{taken[0]}' is a name every text row has already (where it came from: _file and _line): "
                "name the group's column otherwise"
            )
        for name, number in sorted(java_group_names(self.pattern).items(), key=lambda item: item[1]):
            if name.lower() in columns and columns.index(name.lower()) != number - 1:
                raise ValueError(
                    f"the pattern's group {number} is named '{name}', but column '{name}' is column "
                    f"{columns.index(name.lower()) + 1}: the columns take the groups in order, not by name; "
                    "list the columns in the pattern's order"
                )
        return self

    def typed(self) -> dict[str, str]:
        return dict(self.columns) if isinstance(self.columns, dict) else {c: "STRING" for c in self.columns}


class TextSource(_Files):
    """Text files read one row per line: `value` (or the columns `parse:` splits it into), with
    `_file` and `_line` (1-based) naming where each line came from."""

    format: Literal["text"]
    parse: LineParse | None = Field(
        None, description="Split each line into columns by a regex; lines that do not match are quarantined."
    )
    origin: bool = Field(
        True,
        description="A text source always has _file and _line: `origin: true` (as on the other file sources) changes "
        "nothing, and false is refused.",
    )

    @model_validator(mode="after")
    def _always_numbered(self) -> TextSource:
        if not self.origin:
            raise problem_at(
                "origin",
                "a text source always has _file and _line (its lines are numbered as they are read)",
                "drop 'origin: false'; leave the two columns out in the SQL that reads the source",
            )
        return self


Source = Annotated[Union[FileSource, TextSource, DeltaSource], Field(discriminator="format")]


class IntervalSlice(SpecModel):
    """How a scheduled run's rows are found in an output: those whose `column` lies in the run's
    interval [interval_start, interval_end). A run of the interval replaces exactly them."""

    column: str | None = Field(
        None,
        description="A TIMESTAMP column (compared with the interval's instants) or a DATE column (with its local dates); "
        "default: the event_time column the pipeline's sources name.",
    )


def _interval_slice(value: Any) -> Any:
    """`interval: day` is short for `interval: {column: day}`; `interval: true` slices by the sources' event time."""
    if value is True:
        return {}
    if value is False or value is None:
        return None
    return {"column": value} if isinstance(value, str) else value


def _interval_schema(schema: dict[str, Any]) -> None:
    """In the JSON Schema, `interval` is a column name, true/false, or the mapping (as the validator reads it)."""
    ref = next((s["$ref"] for s in schema.pop("anyOf", []) if "$ref" in s), None)
    schema["anyOf"] = [{"type": "string"}, {"type": "boolean"}, {"type": "null"}, *([{"$ref": ref}] if ref else [])]


class Output(SpecModel):
    """A Delta table written from a step."""

    from_: Name | None = Field(None, alias="from", description="The step to write (default: the output's own name).")
    name: TableName | None = Field(None, description="Table name under the warehouse (default: the output's own name).")
    path: str | None = Field(
        None,
        description="Explicit table location instead of a name under the warehouse: inside the warehouse, or under "
        "one of the profile's external_roots.",
    )
    mode: Literal["append", "overwrite", "merge"] = "overwrite"
    keys: list[str] = Field(default_factory=list, description="Columns identifying a row (required for merge).")
    partition_by: list[str] = Field(default_factory=list)
    interval: Annotated[IntervalSlice | None, BeforeValidator(_interval_slice)] = Field(
        None,
        description="Scheduled batch pipelines: the output holds one slice per interval, and a run replaces its "
        "interval's rows (those whose column lies in [interval_start, interval_end)) in one Delta commit: "
        "{column: day}, or a column name, or true (the sources' event_time column). An output of a scheduled "
        "pipeline that names no mode is sliced by its sources' event_time column.",
        json_schema_extra=_interval_schema,
    )
    description: str = ""
    expectations: Expectations = expectations_field()

    @model_validator(mode="after")
    def _consistent(self) -> Output:
        if self.interval is not None and self.mode != "overwrite":
            raise ValueError(
                f"'interval' replaces the run's interval's rows, and mode '{self.mode}' does not replace: "
                "drop mode (or write mode: overwrite), or drop interval"
            )
        if self.mode == "merge" and not self.keys:
            raise ValueError("mode 'merge' needs 'keys': the columns that identify a row, e.g. keys: [id]")
        if self.keys and self.mode != "merge":
            raise ValueError(f"'keys' only apply to mode 'merge' (this output's mode is '{self.mode}')")
        if self.name is not None and self.path is not None:
            raise ValueError("give 'name' or 'path', not both")
        return self


class Trigger(SpecModel):
    """When a streaming pipeline processes new data. `tributary run` processes everything new and
    stops (available now); `tributary run --continuous` runs every `processing_time`."""

    processing_time: Duration = Field(10.0, gt=0, description="Interval between micro-batches with --continuous.")


class Elastic(SpecModel):
    """Streaming only: widen the keyed per-micro-batch steps (swa, tumbling, count join, group) of a
    stream that falls behind, as the balancers of "ESC: Towards an Elastic Stream Computing Platform
    for the Cloud" (§4) widen under load: when `slow_batches` micro-batches in a row take longer than
    the trigger interval, the step's partitions are multiplied by `factor` (hash N → hash 3N), up to
    `max_partitions`. The next micro-batch spreads the state it carries over the new N."""

    slow_batches: Count = Field(
        3, le=1000, description="Micro-batches in a row over the trigger interval before a step is widened."
    )
    factor: int = Field(3, ge=2, le=10, description="How much wider: partitions × factor.")
    max_partitions: Count = Field(200, le=10_000, description="Never more partitions than this.")


class Pipeline(SpecModel):
    """A pipeline: sources are read, steps transform them, outputs write steps to Delta."""

    name: Name
    description: str = ""
    mode: Literal["batch", "streaming"] = "batch"
    trigger: Trigger = Field(default_factory=Trigger, description="Streaming only: micro-batch timing.")
    elastic: Elastic | None = Field(
        None, description="Streaming only: widen keyed per-micro-batch steps that fall behind the trigger interval."
    )
    vars: dict[str, Any] = Field(default_factory=dict, description="Defaults for var(); overridden by the profile and --var.")
    sources: dict[Name, Source] = Field(default_factory=dict)
    steps: dict[Name, any_step_type()] = Field(min_length=1)  # type: ignore[valid-type]
    outputs: dict[Name, Output] = Field(min_length=1)
    schedule: Schedule | None = Field(
        None,
        description="When `tributary scheduler` runs the pipeline: a batch run covers the interval since the previous fire "
        "({{ interval_start }} / {{ interval_end }}); a streaming run processes what is new.",
    )
    tests: Tests = tests_field()

    def output_step(self, output_name: str) -> str:
        return self.outputs[output_name].from_ or output_name

    def sliced_by(self, output_name: str) -> str | None:
        """The column whose values in a run's interval are the output's slice for it (None: the
        output is not sliced by interval). An explicit `interval:` says so; in a scheduled batch
        pipeline an output that names no mode is sliced by its sources' event_time column."""
        output = self.outputs[output_name]
        if self.mode != "batch":
            return None
        if output.interval is not None:
            return output.interval.column or self.event_time_column() or ""
        if self.schedule is None or {"mode", "interval"} & output.model_fields_set:
            return None
        return self.event_time_column() or ""

    def event_time_column(self) -> str | None:
        """The event_time column the sources name, when they name one plain column."""
        named = {s.event_time for s in self.sources.values() if s.event_time}
        if len(named) != 1:
            return None
        column = named.pop()
        return column if column.replace("_", "a").isalnum() else None
