"""The columns a source's rows have, known before Spark starts (framework.schemas).

As framework.io.sources reads them: a file source's declared schema (or the one its Parquet
footers agree on), then `_file` and `_line` with `origin: true`; a text source's `_file`, `_line`
and `value` (or the columns `parse:` splits it into); a Delta table's schema from its log; and last
`_event_time` when `event_time:` is an expression. A JSON or CSV source without `schema:` is typed
by Spark when it reads the files, and a Delta table that does not exist yet has no log: their
columns are not known, and the steps reading them are not checked.
"""

from __future__ import annotations

from framework.io.origin import FILE, LINE
from framework.io.sources import EVENT_TIME, AnySource, event_time_column
from framework.schemas import Column, Schema, from_ddl
from framework.schemas.columns import spark_type
from framework.spec.models import DeltaSource, FileSource, TextSource


def source_columns(spec: AnySource, log_ddl: str | None = None) -> Schema:
    """The source's columns; `log_ddl` is a Delta source's schema from its log (None: no table)."""
    if isinstance(spec, TextSource):
        typed = spec.parse.typed() if spec.parse is not None else {"value": "STRING"}
        schema = Schema((Column(FILE, "STRING"), Column(LINE, "INT"), *(Column(n, spark_type(t)) for n, t in typed.items())))
    elif isinstance(spec, DeltaSource):
        if log_ddl is None:
            return Schema.unknown("no Delta log to read its columns from at validate (no table there yet, or a remote one)")
        schema = from_ddl(log_ddl)
    else:
        schema = _file_columns(spec)
    if event_time_column(spec) == EVENT_TIME and schema.find(spec.event_time or "") is None:
        schema = Schema((*schema.columns, Column(EVENT_TIME, "TIMESTAMP", inferred=True)), schema.complete, schema.why_incomplete)
    return schema


def _file_columns(spec: FileSource) -> Schema:
    ddl = spec.ddl()
    if ddl is None:
        why = (
            "no schema: Spark infers it when it reads the files"
            if spec.format != "parquet"
            else "no schema, and no Parquet files to read it from at validate (none there yet, or remote ones)"
        )
        return Schema.unknown(why)
    schema = from_ddl(ddl)
    if spec.origin:
        line_type = "BIGINT" if spec.format == "parquet" else "INT"  # a row index, or a line number
        schema = Schema(
            (*schema.columns, Column(FILE, "STRING"), Column(LINE, line_type)), schema.complete, schema.why_incomplete
        )
    return schema


def event_time_problems(name: str, spec: AnySource, schema: Schema) -> list[tuple[str, str | None]]:
    """(message, hint) for each column an `event_time:` expression names that the source lacks,
    and for a watermark over a TIMESTAMP_NTZ column (Spark refuses it when the stream starts)."""
    import sqlglot

    from framework.schemas.query import analyze

    plain = event_time_column(spec)
    found = schema.find(plain) if plain is not None and plain != EVENT_TIME else None
    if spec.watermark is not None and found is not None and (found.type or "").upper() == "TIMESTAMP_NTZ":
        return [
            (
                f"event_time '{plain}' is a TIMESTAMP_NTZ (a time without a time zone, as pandas and pyarrow write "
                "by default), and a watermark needs a TIMESTAMP",
                f'read it as a TIMESTAMP in the session\'s time zone: event_time: "cast({plain} AS TIMESTAMP)"',
            )
        ]
    if plain != EVENT_TIME or not schema.complete:
        return []
    try:
        parsed = sqlglot.parse_one(f"SELECT {spec.event_time} AS {EVENT_TIME} FROM `{name}`", read="spark")
    except sqlglot.errors.SqlglotError:
        return []  # the run says what Spark makes of it
    known = Schema(tuple(c for c in schema.columns if c.name != EVENT_TIME))
    findings = analyze(parsed, {name: known}).findings
    return [
        (f"event_time '{spec.event_time}' is neither a column nor an expression over them: {f.message}", f.hint) for f in findings
    ]
