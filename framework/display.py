"""What the CLI draws: live progress per step/output, the run summary, tables of rows.

Table data and the user's text (names, paths, values, descriptions, error messages quoting data)
reach a terminal only through `for_terminal` and as rich Text, never as markup: text sources
ingest web logs whose paths and user agents an attacker writes, and an escape sequence in a cell
(`ESC]0;title BEL`, `ESC[2J`) would otherwise be run by the terminal, `[bold]` read by rich.
JSON Lines and CSV (--json, --csv) stay the exact data: they are for programs (JSON escapes
control characters itself).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from framework.engine.results import UNDER_WAY, OutputStatus, StepStatus, Tone, tone

if TYPE_CHECKING:
    import pyarrow as pa

    from framework.engine.results import RunResult
    from framework.plan.model import RunPlan
    from framework.project import Project
    from framework.schemas import Schema

#: what a terminal would act on: C0 controls, DEL, C1 controls (8-bit CSI, OSC...), the Unicode
#: controls that reorder or break lines (bidirectional overrides and isolates, line and paragraph separators)
_CONTROLS = [*range(0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029]
_SHOWN = {ord("\n"): "\\n", ord("\t"): "\\t", ord("\r"): "\\r"}
_ESCAPED = {c: _SHOWN.get(c, f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CONTROLS}
_ESCAPED_KEEPING_LINES = {**_ESCAPED, ord("\n"): "\n"}


def for_terminal(text: str, lines: bool = False) -> str:
    """`text` with every control character written out (`\\x1b`, `\\x07`, `\\u202e`; a newline
    and a tab in a cell as `\\n` and `\\t`); with `lines`, newlines kept (messages)."""
    return text.translate(_ESCAPED_KEEPING_LINES if lines else _ESCAPED)


def plain(text: str, style: str = "", lines: bool = False) -> Text:
    """User text as rich Text: printed as it is (no markup), control characters escaped."""
    return Text(for_terminal(text, lines), style=style)


_STYLE = {Tone.PASS: "green", Tone.WARN: "yellow", Tone.FAIL: "red", Tone.NEUTRAL: ""}


def _style(status: str) -> str:
    return _STYLE[tone(status)]


def _row(*cells: Any) -> list[Any]:
    """Table cells as plain text: data and spec values (`regex=^[a-z]+$`, a path with brackets)
    must not be read as rich markup, nor their control characters reach the terminal."""
    return [_escaped(cell) if isinstance(cell, Text) else plain(str(cell)) for cell in cells]


def _escaped(text: Text) -> Text:
    shown = for_terminal(text.plain)
    return text if shown == text.plain else Text(shown, style=text.style)


def _title(text: str | None) -> Text | None:
    return None if text is None else plain(text)


class LiveProgress:
    """One line per step and output, updated in place on a terminal, printed line by line elsewhere."""

    def __init__(self, console: Console):
        self.console = console
        self.rows: dict[tuple[str, str], tuple[str, str, float]] = {}
        self.started = time.perf_counter()
        self.live: Live | None = None

    def __enter__(self) -> LiveProgress:
        if self.console.is_terminal:
            self.live = Live(self._render(), console=self.console, refresh_per_second=8, transient=True)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live:
            self.live.__exit__(*exc)

    def update(self, kind: str, name: str, status: str, detail: str = "") -> None:
        self.rows[(kind, name)] = (status, detail, time.perf_counter() - self.started)
        if self.live:
            self.live.update(self._render())
        else:
            line = f"  {kind:<6} {name:<24} {status}{'  ' + detail if detail else ''}"
            self.console.print(plain(line), highlight=False, soft_wrap=True)

    def _render(self) -> Table:
        grid = Table.grid(padding=(0, 1))
        for (kind, name), (status, detail, _) in self.rows.items():
            icon = Spinner("dots", style="cyan") if status in UNDER_WAY else Text("✓", style="green")
            grid.add_row(icon, plain(f"{kind:<6} {name:<24} {status}  {detail}", _style(status)))
        return grid


def plan_tables(plan: RunPlan, project: Project | None = None) -> list[Table]:
    """`tributary plan`: the run's nodes in order, then its outputs. Files and tables inside the
    `project` folder are shown from it (`data/flights_2013-01-02.csv`): a narrow terminal cuts
    a long cell at its end, which is where a path's file name is."""

    def shown(location: str) -> str:
        return location if project is None or "://" in location else project.relative(Path(location))

    title = f"plan of {plan.pipeline} · {plan.mode}" + (" · full refresh" if plan.full_refresh and not plan.sample else "")
    if plan.sample is not None:
        title += f" · a try over the first {plan.sample.rows:,} rows of each source, into {plan.warehouse.root}"
    nodes = Table(title=_title(title), title_justify="left", header_style="bold")
    for column in ("#", "node", "kind", "reads", "runs", "checks"):
        nodes.add_column(column)
    for i, name in enumerate(plan.order, 1):
        if plan.is_source(name):
            source = plan.source(name)
            runs = f"first {source.limit:,} rows" if source.limit is not None else ""
            nodes.add_row(*_row(i, name, f"source ({getattr(source.spec, 'format', 'delta')})", shown(source.location), runs, ""))
            continue
        step = plan.step(name)
        runs = step.kind.streaming(step.spec).value if plan.streaming else "batch"
        if step.chain is not None:
            runs += (
                f" in a query of its own; its rows committed once to the internal table {step.chain.table}, "
                f"read as a stream by its readers with the watermark {step.chain.watermark()}"
            )
        chained = [i for i in step.inputs if plan.chain_of(i) is not None]
        if chained:
            runs += f"; reads {', '.join(chained)} from its chain table, after that query in an available-now run"
        if step.shared:
            runs += f", computed once for {step.readers} readers"
        if not step.selected:
            runs += ", needed by a selected step"
        checks = f"{len(step.expectations)} expectation(s)" if step.expectations else ""
        if step.kind.evaluable(step.spec):
            checks += f"{', ' if checks else ''}integration figures against truth"
        if step.split_by:
            checks += f", refused rows split off by output {step.split_by}"
        nodes.add_row(*_row(i, name, step.kind.name, ", ".join(step.inputs), runs, checks))
    outputs = Table(title="outputs", title_justify="left", header_style="bold")
    for column in ("output", "from", "mode", "keys / partitions", "checks", "table"):
        outputs.add_column(column)
    for output in plan.outputs:
        layout = " ".join(output.keys)
        if output.partition_by:
            layout += f"{', ' if layout else ''}by {' '.join(output.partition_by)}"
        checks = f"{len(output.expectations)} expectation(s)" if output.expectations else ""
        if output.split is not None:
            checks += f"{', ' if checks else ''}quarantines rows {output.split.target}'s checks refuse"
        mode = f"{output.mode} interval ({output.slice_by})" if output.slice_by else output.mode
        outputs.add_row(*_row(output.name, output.step, mode, layout, checks, shown(output.table)))
    return [nodes, outputs]


def schema_table(node: str, kind: str, schema: Schema, pipeline: str) -> Group:
    """The columns validate infers for a step or source (`validate --explain`): each with its type,
    and whether that type is certain (declared, or passed through) or sqlglot's inference."""
    table = Table()
    for header in ("column", "type", "type is"):
        table.add_column(header)
    for column in schema.columns:
        known = "unknown" if column.type is None else "inferred" if column.inferred else "certain"
        table.add_row(*_row(column.name, column.type or "?", known))
    what = "source" if kind == "source" else f"{kind} step"
    heading = plain(f"columns of {what} '{node}' ({pipeline})")
    parts: list[Any] = [heading, table]
    if not schema.complete:
        parts.append(plain(f"and more that validate cannot list: {schema.why_incomplete}"))
    return Group(*parts)


def run_summary(result: RunResult) -> Group:
    outputs = Table(
        title=_title(
            f"run {result.run_id} · {result.pipeline} · {result.status} in {result.duration_s:.1f}s"
            + (f" (first micro-batch after {result.startup_s:.1f}s)" if result.startup_s is not None else "")
        ),
        title_justify="left",
        header_style="bold",
    )
    for column in ("output", "mode", "rows written", "delta version", "status", "seconds", "table"):
        outputs.add_column(column, justify="right" if column in ("rows written", "delta version", "seconds") else "left")
    for out in result.outputs:
        status = out.status + (f": unchanged, already written by run {out.written_by}" if out.written_by else "")
        outputs.add_row(
            *_row(
                out.name,
                out.mode,
                _written(out),
                _n(out.version),
                Text(status, style=_style(out.status)),
                f"{out.duration_s:.2f}",
                out.table,
            )
        )
    steps = Table(header_style="bold", title="steps", title_justify="left")
    for column in ("step", "kind", "rows", "status"):
        steps.add_column(column, justify="right" if column == "rows" else "left")
    for step in result.steps:
        steps.add_row(*_row(step.name, step.kind, _n(step.rows), step.status))
    # a rerun that found nothing new only planned its steps: a table of dashes says nothing (a failed run keeps it)
    ran = any(step.rows is not None or step.status not in (StepStatus.PENDING, StepStatus.PLANNED) for step in result.steps)
    parts: list[Any] = [steps, outputs] if ran or result.error is not None else [outputs]
    if result.limit is not None:
        parts.append(
            plain(
                f"a try over the first {result.limit:,} rows of each source, in batch: written to the scratch warehouse "
                f"{result.scratch} (tributary show OUTPUT --scratch); the real tables were not touched",
                "cyan",
            )
        )
    if result.quarantined:
        counts = ", ".join(f"{n:,} from {s}" for s, n in result.quarantined.items())
        parts.append(
            plain(
                f"quarantined {counts} (malformed rows by source, rejected rows by the step that refused them, "
                "a row refused by several steps at each): see _tributary/quarantine",
                "yellow",
            )
        )
    if result.late:
        counts = ", ".join(f"{n:,} from {s}" for s, n in result.late.items())
        parts.append(
            plain(
                f"late rows: {counts}, older than the watermark (by the step that met them, a row late at several "
                "steps at each; by source where the source's watermark found them): see _tributary/late_rows",
                "yellow",
            )
        )
    for holder, held in result.held.items():
        parts.append(plain(held.line(holder), "yellow"))
    for chained, watermark in result.watermarks.items():
        parts.append(plain(f"step '{chained}' is chained: the steps reading it see the watermark {watermark}", "cyan"))
    if result.integration:
        parts.append(integration_table(result.integration))
    for figures in result.capacity:
        parts.append(capacity_table(figures))
    if result.quality:
        parts.append(quality_table(result.quality))
    return Group(*parts)


_SEVERITY_STYLE = {"fail": "red", "drop": "yellow", "warn": "yellow"}


def _written(out: Any) -> str:
    """Rows that reached the table: a skipped output wrote none, a failed run's staged rows did not count."""
    if out.status == OutputStatus.NOT_COMMITTED:
        return f"0 ({out.rows:,} staged, not committed)" if out.rows else "0"
    return _n(out.rows if out.status == OutputStatus.WRITTEN else 0)


def quality_table(results: list[Any]) -> Table:
    """One line per expectation, grouped by the step or output it checks (_tributary/quality)."""
    view = Table(title="quality (Great Expectations): see _tributary/quality", title_justify="left", header_style="bold")
    for column in ("checks", "expectation", "severity", "result", "observed", "needs"):
        view.add_column(column, overflow="fold")
    for r in sorted(results, key=lambda r: r.target):
        if r.error:
            verdict, seen = Text("error", style="red"), r.error
        else:
            verdict = Text("pass", style="green") if r.success else Text("FAIL", style=_SEVERITY_STYLE[r.severity])
            seen = _observed(r)
        view.add_row(
            *_row(
                r.target if r.scope != "integration" else f"{r.target} (integration)",
                _short_call(r.expectation, r.kwargs),
                r.severity,
                verdict,
                seen,
                r.threshold or "–",
            )
        )
    return view


def _observed(r: Any) -> str:
    if r.scope == "integration" and isinstance(r.observed_value, (int, float)):
        return f"{r.observed_value:,.4f}".rstrip("0").rstrip(".")
    if r.unexpected_count is not None:
        if r.element_count is None:  # a stream's quarantine query sees only the refused rows
            text = f"{r.unexpected_count:,} rows"
        else:
            text = f"{r.unexpected_count:,} of {r.element_count:,} rows ({r.unexpected_percent or 0:.2f}%)"
        if r.written_by and r.severity == "drop" and r.unexpected_count:  # a rerun that changed nothing
            return text + f", quarantined by run {r.written_by}"
        return text + (f", {r.quarantined:,} quarantined" if r.quarantined else "")
    if isinstance(r.observed_value, float):
        return f"{r.observed_value:,.4f}".rstrip("0").rstrip(".")
    return str(r.observed_value)


def _short_call(name: str, kwargs: dict[str, Any]) -> str:
    columns = [str(kwargs[k]) for k in ("column", "column_A", "column_B") if k in kwargs]
    if isinstance(kwargs.get("column_list"), list):  # compound checks name their key's columns
        columns += [str(c) for c in kwargs["column_list"]]
    return f"{name.removeprefix('expect_')}({', '.join(columns)})"


def integration_table(evaluations: list[Any]) -> Table:
    """Completeness and correctness per evaluated step, laid out like the paper's Tables 6/7."""
    from framework.integration.metrics import metrics_table

    return metrics_table({e.label: e.metrics for e in evaluations}, title="integration quality (against ground truth)")


def capacity_table(figures: Any) -> Group:
    """A window step's state, predicted by the queueing model and observed in the run."""
    setting = figures.setting
    where = f", {len(figures.batches)} micro-batches" if figures.batches else ""
    table = Table(
        title=_title(f"state of {figures.kind} step '{figures.step}' ({setting}{where}): predicted and observed"),
        title_justify="left",
        header_style="bold",
    )
    for column in ("quantity", "predicted", "observed", "error"):
        table.add_column(column, justify="left" if column == "quantity" else "right")
    for row in figures.rows():
        table.add_row(*_row(*row))
    notes = [plain(f"  {note}", "dim") for note in figures.notes]
    return Group(table, *notes)


#: a header longer than this may fold; shorter ones keep their line
_HEADER_CAP = 30


class Preview:
    """Rows of a table as wide as the terminal lets them be: each column at least as wide as its
    header (so no header is squeezed to a letter a line), the room left shared by the columns whose
    cells want more (folded to it); the columns that do not fit left out from the right and named
    below the table."""

    def __init__(self, title: str | None, table: pa.Table):
        self.title = title
        self.names = table.column_names
        self.rows = [[_cell(v) for v in row] for row in python_rows(table)]

    def __rich_console__(self, console: Console, options: Any) -> Any:
        from rich.cells import cell_len

        cells = [[plain(name), *(_row(*(row[i] for row in self.rows)))] for i, name in enumerate(self.names)]
        natural = [max(cell_len(text.plain) for text in column) for column in cells]
        least = [min(cell_len(text.plain), _HEADER_CAP) for text, *_ in cells]
        room, shown = options.max_width - 1, 0  # the table's left edge
        for width in least:
            if shown and room < width + 3:  # a cell's padding and right edge
                break
            room -= width + 3
            shown += 1
        widths = least[:shown]
        wants = [max(natural[i] - least[i], 0) for i in range(shown)]
        if sum(wants) <= room:
            widths = natural[:shown]
        else:
            room = max(room, 0)
            extra = [room * want // sum(wants) for want in wants]
            for i in sorted(range(shown), key=lambda i: -wants[i])[: room - sum(extra)]:
                extra[i] += 1
            widths = [width + more for width, more in zip(widths, extra, strict=True)]
        view = Table(title=_title(self.title), title_justify="left", header_style="bold")
        for column, width in zip(cells[:shown], widths, strict=True):
            view.add_column(column[0], width=max(width, 1), overflow="fold")
        for r in range(len(self.rows)):
            view.add_row(*(column[r + 1] for column in cells[:shown]))
        yield view
        left = self.names[shown:]
        if left:
            yield plain(f"{len(left)} more column{'s' if len(left) > 1 else ''} not shown: {', '.join(left)}", "dim")


def arrow_table(title: str | None, table: pa.Table) -> Preview:
    return Preview(title, table)


def rows_table(title: str, rows: list[dict[str, Any]]) -> Table:
    """Plain rows (dicts with the same keys) as a table; a `status` column gets its colour."""
    view = Table(title=_title(title), title_justify="left", header_style="bold")
    columns = list(rows[0]) if rows else []
    for name in columns:
        view.add_column(plain(name), overflow="fold")
    for row in rows:
        cells = [Text(_cell(row[c]), style=_style(str(row[c]))) if c == "status" else _cell(row[c]) for c in columns]
        view.add_row(*_row(*cells))
    return view


def python_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """The rows as Python values. Timestamps with a zone are converted here: pyarrow's own
    conversion imports pandas for them (~0.3 s, a third of a `tributary show`)."""
    columns = [_python_values(column) for column in table.columns]
    return list(zip(*columns, strict=True)) if columns else [() for _ in range(table.num_rows)]


def _python_values(column: Any) -> list[Any]:
    import datetime as dt

    import pyarrow as pa

    kind = column.type
    if pa.types.is_interval(kind) or pa.types.is_duration(kind):
        return _durations(column)
    if not pa.types.is_timestamp(kind) or kind.tz is None:
        return column.to_pylist()
    try:
        from zoneinfo import ZoneInfo

        zone: dt.tzinfo = dt.UTC if kind.tz in ("UTC", "+00:00", "Z") else ZoneInfo(kind.tz)
    except Exception:  # noqa: BLE001 - an offset pyarrow knows and zoneinfo does not
        return column.to_pylist()
    per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[kind.unit]
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    values: list[Any] = []
    for chunk in column.chunks if hasattr(column, "chunks") else [column]:
        for ticks in chunk.view(pa.int64()).to_pylist():
            if ticks is None:
                values.append(None)
            else:
                moment = epoch + dt.timedelta(microseconds=ticks * 1_000_000 // per_second)
                values.append(moment.astimezone(zone) if zone is not dt.UTC else moment)
    return values


@dataclass(frozen=True)
class Duration:
    """An INTERVAL or a duration read through Arrow, exactly: months, days and nanoseconds (a month
    and a day have no fixed length, so they stay apart). Printed for a person (`1 h 30 min`,
    `1 month 2 days 3 s`); `iso()` is ISO 8601 (`PT1H30M`, `P1M2DT3S`) for --json and --csv."""

    months: int
    days: int
    nanoseconds: int

    def __str__(self) -> str:
        years, months = _split(self.months, 12)
        parts = [_count(years, "year"), _count(months, "month"), _count(self.days, "day")]
        sign, ns = ("-" if self.nanoseconds < 0 else ""), abs(self.nanoseconds)
        hours, ns = divmod(ns, 3_600_000_000_000)
        minutes, ns = divmod(ns, 60_000_000_000)
        clock = [f"{hours} h" if hours else "", f"{minutes} min" if minutes else "", f"{_seconds(ns)} s" if ns else ""]
        clock = [part for part in clock if part]
        if clock:
            parts.append(sign + " ".join(clock))
        return " ".join(part for part in parts if part) or "0 s"

    def iso(self) -> str:
        years, months = _split(self.months, 12)
        date = "".join(f"{n}{unit}" for n, unit in ((years, "Y"), (months, "M"), (self.days, "D")) if n)
        sign, ns = ("-" if self.nanoseconds < 0 else ""), abs(self.nanoseconds)
        hours, ns = divmod(ns, 3_600_000_000_000)
        minutes, ns = divmod(ns, 60_000_000_000)
        time = "".join(f"{sign}{n}{unit}" for n, unit in ((hours, "H"), (minutes, "M")) if n)
        time += f"{sign}{_seconds(ns)}S" if ns else ""
        if not date and not time:
            return "PT0S"
        return f"P{date}" + (f"T{time}" if time else "")


def _split(months: int, per_year: int) -> tuple[int, int]:
    years, rest = divmod(abs(months), per_year)
    return (-years, -rest) if months < 0 else (years, rest)


def _count(n: int, unit: str) -> str:
    return "" if not n else f"{n} {unit}" + ("" if abs(n) == 1 else "s")


def _seconds(nanoseconds: int) -> str:
    whole, fraction = divmod(nanoseconds, 1_000_000_000)
    return str(whole) + (f".{fraction:09d}".rstrip("0") if fraction else "")


def _durations(column: Any) -> list[Any]:
    """An interval (month_day_nano, day_time, year_month) or duration column as Durations, exactly."""
    import pyarrow as pa

    kind = column.type
    if pa.types.is_duration(kind):
        per_ns = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}[kind.unit]
        chunks = column.chunks if hasattr(column, "chunks") else [column]
        ticks = [t for chunk in chunks for t in chunk.cast(pa.int64()).to_pylist()]
        return [None if t is None else Duration(0, 0, t * per_ns) for t in ticks]
    values: list[Duration | None] = []
    for value in column.to_pylist():
        if value is None:
            values.append(None)
        elif isinstance(value, int):  # year_month: months
            values.append(Duration(value, 0, 0))
        elif hasattr(value, "nanoseconds"):  # month_day_nano
            values.append(Duration(value.months, value.days, value.nanoseconds))
        else:  # day_time: (days, milliseconds)
            values.append(Duration(0, value[0], value[1] * 1_000_000))
    return values


def _cell(value: Any) -> str:
    if value is None:
        return "∅"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    return str(value)


def _n(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def json_lines(table: pa.Table) -> str:
    """Rows as JSON Lines, for scripts: one object per row; times, dates and durations in ISO 8601,
    decimals as text (exact), bytes as base64."""
    import json

    names = table.column_names
    return "".join(
        json.dumps(dict(zip(names, row, strict=True)), default=_json_value, ensure_ascii=False) + "\n"
        for row in python_rows(table)
    )


def csv_text(table: pa.Table) -> str:
    """Rows as CSV with a header; nested values (lists, structs, maps) as JSON in their cell."""
    import io
    import json

    import pyarrow as pa
    import pyarrow.csv as pacsv

    columns = []
    for column in table.columns:
        if pa.types.is_interval(column.type) or pa.types.is_duration(column.type):
            texts = [None if v is None else v.iso() for v in _durations(column)]
            column = pa.chunked_array([pa.array(texts, pa.string())])
        elif pa.types.is_nested(column.type) or pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            texts = [None if v is None else json.dumps(v, default=_json_value, ensure_ascii=False) for v in column.to_pylist()]
            column = pa.chunked_array([pa.array(texts, pa.string())])
        columns.append(column)
    sink = io.BytesIO()
    pacsv.write_csv(pa.table(columns, names=table.column_names), sink)
    return sink.getvalue().decode("utf-8")


def _json_value(value: Any) -> Any:
    import base64
    import datetime as dt
    import decimal

    if isinstance(value, Duration):
        return value.iso()
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def engine_table(statuses: list[dict[str, Any]]) -> Table:
    """`tributary engine status`: one row per running warm engine."""
    table = Table(title="warm engines", title_justify="left", header_style="bold")
    for column in ("pid", "master", "up", "runs", "now", "key", "socket / log"):
        table.add_column(column)
    for s in statuses:
        now = f"running {s['busy']}" if s.get("busy") else f"idle {_duration(s.get('idle_s'))}"
        if s.get("warming_up"):
            now = "warming up (a command stops it)"
        if s.get("waiting"):
            now += f", {s['waiting']} waiting"
        stops = f" (stops after {_duration(s.get('idle_stop_s'))} idle)" if s.get("idle_stop_s") else ""
        table.add_row(
            *_row(
                s.get("pid"),
                s.get("master"),
                _duration(s.get("uptime_s")),
                s.get("runs"),
                now + stops,
                s.get("key"),
            ),
            plain(f"{s.get('socket')}\n{s.get('log')}\n{s.get('spark_log')}", lines=True),
        )
    return table


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def graph_page(name: str, description: str | None, svg: str) -> str:
    """`graph --html`: a page holding the pipeline's picture, its name and description escaped."""
    from html import escape

    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(name)}</title>"
        "<style>body{font-family:Helvetica,Arial,sans-serif;margin:2em}</style></head>"
        f"<body><h1>{escape(name)}</h1><p>{escape(description or '')}</p>{svg}</body></html>\n"
    )


def join_capacity_table(name: str, rows: list[tuple[str, str, str]]) -> Table:
    """`capacity` of a windowed join: each quantity predicted and observed."""
    table = Table(title=f"capacity of join step '{name}'", title_justify="left", header_style="bold")
    for column in ("quantity", "predicted", "observed"):
        table.add_column(column)
    for row in rows:
        table.add_row(*(plain(cell) for cell in row))
    return table


def micro_batches_table(step: str, run_id: str, batches: list[dict[str, Any]]) -> Table:
    """`capacity` of a per-micro-batch step: the partitions and executors each micro-batch of its
    last streaming run had (consecutive batches alike are one row)."""
    table = Table(title=f"micro-batches of step '{step}' in run {run_id}", title_justify="left", header_style="bold")
    for column in ("output", "micro-batches", "partitions", "executors"):
        table.add_column(column)
    runs: list[list[Any]] = []
    for b in batches:
        same = runs and runs[-1][0] == b.get("output") and runs[-1][3:] == [b.get("partitions"), b.get("executors")]
        if same:
            runs[-1][2] = b["batch"]
        else:
            runs.append([b.get("output"), b["batch"], b["batch"], b.get("partitions"), b.get("executors")])
    for output, first, last, partitions, executors in runs:
        span = f"{first}" if first == last else f"{first}–{last}"
        table.add_row(*_row(output, span, partitions, "–" if executors is None else executors))
    return table
