"""Rendering a run report as one self-contained HTML page (`tributary report`): inline CSS and an
inline SVG, no scripts, fonts, images or links to fetch, so it renders offline and can be mailed or
archived. Every value from the logs is HTML-escaped.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from html import escape
from typing import TYPE_CHECKING, Any

from framework.engine.results import CheckOutcome, RunStatus, Tone, tone

if TYPE_CHECKING:
    pass

from framework.reporting.model import CELL_CHARS, SAMPLE_ROWS, QuarantineGroup, RunReport, logged_json

# -- rendering ---------------------------------------------------------------------------------


def render_html(report: RunReport) -> str:
    """The page: header, cards, then one section per part of the run."""
    title = f"{report.pipeline} · run {report.run_id}"
    sections = [
        _summary(report),
        _steps(report),
        _outputs(report),
        _quality(report),
        _integration(report),
        _state(report),
        _quarantine(report),
        _graph(report),
    ]
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_e(title)} · Tributary</title><link rel='icon' href='data:,'>"
        f"<style>{_CSS}</style></head>\n<body>\n{_header(report)}\n<main class='wrap'>\n{_cards(report)}\n{_nav()}\n"
        + "\n".join(sections)
        + f"\n</main>\n{_footer(report)}\n</body></html>\n"
    )


_NAV = [
    ("summary", "Summary"),
    ("steps", "Steps"),
    ("outputs", "Outputs"),
    ("quality", "Quality"),
    ("integration", "Integration quality"),
    ("state", "State"),
    ("quarantine", "Quarantine"),
    ("graph", "Pipeline graph"),
]


def _header(r: RunReport) -> str:
    facts = [
        ("Run id", f"<code>{_e(r.run_id)}</code>"),
        ("Started", _e(_when(r.started))),
        ("Duration", _e(_duration(r.duration_s))),
        ("Profile", _e(r.profile or "–")),
        ("Writer", _e(r.writer or "–")),
    ]
    items = "".join(f"<div><dt>{label}</dt><dd>{value}</dd></div>" for label, value in facts)
    return (
        "<header class='top'><div class='wrap'>"
        "<div class='eyebrow'>Tributary · run report</div>"
        f"<div class='title'><h1>{_e(r.pipeline)}</h1>{_badge(r.status, solid=True)}</div>"
        f"<dl class='facts'>{items}</dl></div></header>"
    )


def _cards(r: RunReport) -> str:
    failed = r.failed_expectations
    blocking = [q for q in failed if q.get("severity") == "fail" or q.get("error")]
    if not r.quality:
        quality = ("Expectations", "–", "none declared", "neutral")
    else:
        shade = Tone.FAIL if blocking else Tone.WARN if failed else Tone.PASS
        quality = ("Expectations", f"{len(r.quality) - len(failed)}/{len(r.quality)}", f"passed · {len(failed)} failing", shade)
    written = [o for o in r.outputs if not o.internal]
    cards = [
        ("Status", r.status, r.error.splitlines()[0][:60] if r.error else "", tone(r.status)),
        (
            "Duration",
            _duration(r.duration_s),
            f"ended {_when(r.ended, short=True)}" if r.ended else "no run_end logged",
            "neutral",
        ),
        ("Steps", f"{len(r.steps)}", f"{sum(1 for s in r.steps if tone(s.status) is Tone.PASS)} ok", Tone.NEUTRAL),
        (
            "Rows written",
            f"{r.rows_written:,}",
            "changed nothing: skipped as unchanged" if r.changed_nothing else f"to {len(written)} output(s)",
            "neutral",
        ),
        quality,
        ("Quarantined", f"{r.quarantined:,}", "rows set aside by this run", "warn" if r.quarantined else "neutral"),
    ]
    return (
        "<div class='cards'>"
        + "".join(
            f"<div class='card {shade}'><div class='label'>{_e(label)}</div><div class='value'>{_e(value)}</div>"
            f"<div class='sub'>{_e(sub)}</div></div>"
            for label, value, sub, shade in cards
        )
        + "</div>"
    )


def _nav() -> str:
    return "<nav>" + "".join(f"<a href='#{anchor}'>{_e(label)}</a>" for anchor, label in _NAV) + "</nav>"


def _section(anchor: str, title: str, body: str, count: int | None = None) -> str:
    counted = f" <span class='count'>{count:,}</span>" if count is not None else ""
    return f"<section id='{anchor}' class='panel'><h2>{_e(title)}{counted}</h2>\n{body}\n</section>"


def _summary(r: RunReport) -> str:
    rows = [
        ("Status", _badge(r.status)),
        ("Started", _e(_when(r.started))),
        ("Ended", _e(_when(r.ended))),
        ("Duration", _e(_duration(r.duration_s))),
        ("Steps selected", _e(", ".join(r.selected)) if r.selected else _muted("all")),
        ("Vars", _e(_compact(r.variables)) if r.variables else _muted("none")),
        ("Warehouse", f"<code>{_e(r.warehouse)}</code>"),
    ]
    body = "<table class='kv'>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"
    if r.error:
        body += f"<div class='alert fail'><strong>Error</strong><pre>{_e(r.error)}</pre></div>"
    elif r.status == RunStatus.INCOMPLETE:
        body += "<div class='alert warn'>No <code>run_end</code> was logged: the run is still going or its process died.</div>"
    if r.changed_nothing:
        body += f"<div class='alert warn'>{_changed_nothing(r)}</div>"
    if r.chosen:
        body += f"<p class='muted small'>Reported without <code>--run</code>: {_e(r.chosen)}.</p>"
    for note in r.notes:
        body += f"<div class='alert warn'>{_e(note)}</div>"
    return _section("summary", "Summary", body)


def _changed_nothing(r: RunReport) -> str:
    text = (
        "<strong>This run changed nothing.</strong> Every output was skipped as unchanged: an identical run had "
        "already written it, so no table has a new version and nothing was quarantined by this run."
    )
    if r.written_by:
        text += (
            f" The data, and its quarantine, were written by run <code>{_e(r.written_by)}</code>: "
            f"<code>tributary report {_e(r.pipeline)} --run {_e(r.written_by)}</code>."
        )
    return text


def _steps(r: RunReport) -> str:
    if not r.steps:
        return _section("steps", "Steps", _empty("No step_end events were logged for this run."))
    rows = [[_e(s.name), _chip(s.kind), _badge(s.status), _num(s.rows), _num_s(s.seconds)] for s in r.steps]
    return _section("steps", "Steps", _table(["Step", "Kind", "Status", "Rows", "Plan time"], rows, numeric={3, 4}), len(r.steps))


def _outputs(r: RunReport) -> str:
    if not r.outputs:
        return _section("outputs", "Outputs", _empty("No outputs were written by this run."))
    rows = []
    for o in r.outputs:
        name = (
            f"<span class='nowrap'>{_e(o.name)}"
            + (" <span class='chip internal'>internal</span>" if o.internal else "")
            + "</span>"
        )
        extra = f"<div class='small'>{_e(_compact(o.details))}</div>" if o.details else ""
        rows.append(
            [
                name,
                f"<code title='{_e(o.table)}'>{_e(_under(o.table, r.warehouse))}</code>{extra}",
                _chip(o.mode),
                _badge(o.status),
                _num(o.rows),
                _num(o.version),
                _num(o.previous_version),
                _num_s(o.seconds),
            ]
        )
    head = ["Output", "Table (in the warehouse)", "Mode", "Status", "Rows", "Delta version", "Previous", "Time"]
    classes = ["internal" if o.internal else "" for o in r.outputs]
    return _section("outputs", "Outputs", _table(head, rows, numeric={4, 5, 6, 7}, row_classes=classes), len(r.outputs))


def _quality(r: RunReport) -> str:
    if not r.quality:
        return _section("quality", "Quality", _empty("No expectations declared: this run has no rows in _tributary/quality."))
    targets: dict[str, list[dict[str, Any]]] = {}
    for row in r.quality:
        targets.setdefault(str(row.get("target")), []).append(row)
    parts = [_quality_target(target, rows) for target, rows in targets.items()]
    writers = sorted({str(q["written_by"]) for q in r.quality if q.get("written_by")})
    if writers:
        note = (
            "These checks ran on rows this run did not write (it changed nothing): their counts are the data's, "
            f"and the rows they quarantined are those written by run {', '.join(writers)}, in its quarantine."
        )
        parts.insert(0, f"<div class='alert warn'>{_e(note)}</div>")
    return _section("quality", "Quality", "\n".join(parts), len(r.quality))


def _quality_target(target: str, rows: list[dict[str, Any]]) -> str:
    failed = sum(1 for q in rows if not q.get("success"))
    scopes = sorted({str(q.get("scope")) for q in rows if q.get("scope")})
    tally = f"{len(rows) - failed} passed" + (f" · <span class='fail-text'>{failed} failing</span>" if failed else "")
    head = ["Expectation", "Severity", "Result", "Observed", "Threshold", "Checked", "Unexpected", "Quarantined"]
    body = []
    for q in rows:
        body.append(
            "<tr>"
            f"<td>{_expectation(q)}</td><td>{_chip(q.get('severity') or '–', q.get('severity'))}</td>"
            f"<td>{_result(q)}</td><td>{_observed(q.get('observed_value'))}</td>"
            f"<td>{_e(q.get('threshold')) if q.get('threshold') else _muted('–')}</td>"
            f"<td class='num'>{_num(q.get('element_count'))}</td><td class='num'>{_unexpected(q)}</td>"
            f"<td class='num'>{_num(q.get('quarantined'))}</td></tr>"
        )
        detail = _expectation_detail(q)
        if detail:
            body.append(f"<tr class='detail'><td colspan='{len(head)}'>{detail}</td></tr>")
    widths = (28, 8, 8, 11, 15, 8, 11, 11)  # % per column, the same in every target's table
    table = (
        "<div class='scroll'><table class='grid quality'><colgroup>"
        + "".join(f"<col style='width:{w}%'>" for w in widths)
        + "</colgroup><thead><tr>"
        + "".join(f"<th{' class=num' if i >= 5 else ''}>{_e(h)}</th>" for i, h in enumerate(head))
        + "</tr></thead><tbody>"
        + "".join(body)
        + "</tbody></table></div>"
    )
    chips = "".join(_chip(s) for s in scopes)
    return f"<div class='target'><h3>{_e(target)} {chips}<span class='tally'>{tally}</span></h3>{table}</div>"


def _expectation(q: dict[str, Any]) -> str:
    name = f"<span class='expectation'>{_e(q.get('expectation'))}</span>"
    kwargs = logged_json(q.get("kwargs")) or {}
    args = f"<div class='kwargs'>{_e(_compact(kwargs))}</div>" if kwargs else ""
    dimension = f" {_chip(q['dimension'])}" if q.get("dimension") else ""
    return name + dimension + args


def _result(q: dict[str, Any]) -> str:
    if q.get("error"):
        return _badge(CheckOutcome.ERROR)
    if q.get("success"):
        return _badge(CheckOutcome.PASS)
    return _badge({"warn": CheckOutcome.WARN, "drop": CheckOutcome.DROPPED}.get(str(q.get("severity")), CheckOutcome.FAIL))


def _observed(value: str | None) -> str:
    if value is None:
        return _muted("–")
    shown = logged_json(value)
    text = _fmt(shown) if isinstance(shown, (int, float)) else _compact(shown)
    return f"<code>{_e(_cut(text))}</code>"


def _unexpected(q: dict[str, Any]) -> str:
    count, percent = q.get("unexpected_count"), q.get("unexpected_percent")
    if count is None and percent is None:
        return _muted("–")
    shown = _num(count)
    if percent is not None:
        shown += f" <span class='muted'>({percent:.2f} %)</span>"
    return shown


def _expectation_detail(q: dict[str, Any]) -> str:
    parts = []
    if q.get("error"):
        parts.append(f"<div class='alert fail'><strong>Could not evaluate:</strong> {_e(q['error'])}</div>")
    samples = logged_json(q.get("failing_samples"))
    if isinstance(samples, list) and samples:
        rows = [s if isinstance(s, dict) else {"value": s} for s in samples]
        more = len(rows) - SAMPLE_ROWS
        caption = f"Failing samples ({min(len(rows), SAMPLE_ROWS)} of {len(rows)} shown)" if more > 0 else "Failing samples"
        parts.append(f"<div class='samples'><div class='caption'>{caption}</div>{_records(rows[:SAMPLE_ROWS])}</div>")
    return "".join(parts)


_INTEGRATION_KEYS = ("run_id", "pipeline", "step", "operator", "strategy", "size", "timeout_s", "evaluated_at")
_SHARES = {"partial_completeness", "recall", "correct_rate"}
_INDICATORS = {
    "partial_completeness": "Partial completeness",
    "recall": "Recall",
    "correct_rate": "Correct rate",
    "tuples": "Tuples",
    "instances": "Instances",
    "units": "Units",
    "windows_open_max": "Windows open (max)",
    "windows_open_mean": "Windows open (mean)",
    "tuples_held_max": "Tuples held (max)",
    "tuples_held_mean": "Tuples held (mean)",
}


def _integration(r: RunReport) -> str:
    """One column per evaluated step, one row per indicator (like `tributary evaluate` prints it)."""
    if not r.integration:
        return _section(
            "integration",
            "Integration quality",
            _empty("No integration quality figures for this run (steps declaring truth: are evaluated)."),
        )
    columns = [c for c in r.integration[0] if c not in _INTEGRATION_KEYS]
    head = ["Indicator", *(_integration_label(row) for row in r.integration)]
    rows = []
    for label, key in (("Operator", "operator"), ("Strategy", "strategy"), ("Size", "size"), ("Timeout", "timeout_s")):
        if key in r.integration[0]:
            rows.append([_e(label), *(_integration_value(key, row.get(key), row.get("operator")) for row in r.integration)])
    for column in columns:
        rows.append([_e(_indicator(column)), *(_integration_value(column, row.get(column)) for row in r.integration)])
    table = _table(head, rows, numeric=set(range(1, len(head))), css="grid narrow")
    return _section("integration", "Integration quality", table, len(r.integration))


def _state(r: RunReport) -> str:
    """Per window step: the queueing model's prediction next to what the run held (and, for a
    stream, a chart of both per micro-batch)."""
    if not r.capacity:
        return _section("state", "State: predicted and observed", _empty("No swa or tumbling step in this run."))
    parts = []
    for figures in r.capacity:
        setting = figures.setting
        rows = [[_e(q), _e(p), _e(o), _e(err)] for q, p, o, err in figures.rows()]
        parts.append(f"<h3>{_e(figures.kind)} step <code>{_e(figures.step)}</code> ({_e(setting)})</h3>")
        parts.append(_table(["Quantity", "Predicted", "Observed", "Error"], rows, numeric={1, 2, 3}, css="grid narrow"))
        parts += [f"<p class='note'>{_e(note)}</p>" for note in figures.notes]
        if len(figures.batches) > 1:
            parts.append(_batches_chart(figures))
    return _section("state", "State: predicted and observed", "\n".join(parts), len(r.capacity))


def _batches_chart(figures: Any) -> str:
    """Open windows per micro-batch, predicted and held, as an inline SVG (matplotlib)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = figures.batches
    figure, axis = plt.subplots(figsize=(8, 2.6), constrained_layout=True)
    axis.plot(
        [b["batch"] for b in batches], [b.get("open_windows") or 0 for b in batches], marker="o", label="held at the batch's end"
    )
    modelled = [b for b in batches if "predicted_open_windows" in b]
    axis.plot(
        [b["batch"] for b in modelled],
        [b["predicted_open_windows"] for b in modelled],
        ls="--",
        marker="x",
        label="predicted c = ⌊λ/μ⌋ + 1",
    )
    axis.set_xlabel("micro-batch")
    axis.set_ylabel("open windows")
    axis.legend(fontsize=8)
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg")
    plt.close(figure)
    svg = buffer.getvalue()
    return f"<div class='chart'>{svg[svg.index('<svg') :]}</div>"


def _integration_label(row: dict[str, Any]) -> str:
    return _e(str(row.get("step", "?")))


def _indicator(column: str) -> str:
    if column.startswith("completeness_"):
        level = column.removeprefix("completeness_").replace("_", ".")
        try:
            return f"Completeness (γ = {float(level) / 100:g})"
        except ValueError:
            return column
    return _INDICATORS.get(column, column.replace("_", " ").capitalize())


def _learns_sizes(operator: str | None) -> bool:
    """The integration row's operator (a step kind) may learn its sizes per head (StepKind.learns_sizes)."""
    from framework.operators import kinds

    kind = kinds().get(operator or "")
    return kind is not None and kind.learns_sizes


def _integration_value(column: str, value: Any, operator: str | None = None) -> str:
    if value is None:  # a null size or timeout of a kind that learns them per head (size: auto)
        return _muted("auto" if _learns_sizes(operator) and column in ("size", "timeout_s") else "–")
    if column.startswith("completeness_") or column in _SHARES:
        return _bar(float(value))
    if column == "timeout_s":
        return _e(f"{value:g} s")
    return _e(_fmt(value))


def _quarantine(r: RunReport) -> str:
    if not r.quarantine:
        if r.changed_nothing and r.written_by:
            text = f"This run quarantined nothing: it changed nothing. The quarantine of these rows is run {r.written_by}'s."
            return _section("quarantine", "Quarantine", _empty(text))
        return _section("quarantine", "Quarantine", _empty("Nothing was quarantined in this run."))
    head = ["Source / step", "Why (expectation or reason)", "Rows", "Most frequent values"]
    summary = [[_e(g.source), _e(g.reason), _num(g.count), _group_values(g)] for g in r.quarantine]
    parts = [_table(head, summary, numeric={2})]
    for g in r.quarantine:
        if g.samples:
            what = f"{g.source} · {g.reason}"
            shown = f"{len(g.samples)} of {g.count:,}"
            parts.append(
                f"<div class='samples'><div class='caption'>Sample records — {_e(what)} ({shown})</div>{_records(g.samples)}</div>"
            )
    return _section("quarantine", "Quarantine", "\n".join(parts), r.quarantined)


def _group_values(g: QuarantineGroup) -> str:
    if not g.values:
        return _muted("–")
    shown = ", ".join(f"<code>{_e(_cut(value, 60))}</code> <span class='muted'>×{n:,}</span>" for value, n in g.values)
    distinct = sum(n for _, n in g.values)
    more = f" <span class='muted'>and {g.count - distinct:,} more rows</span>" if g.count > distinct else ""
    return shown + more


def _graph(r: RunReport) -> str:
    if r.graph_svg is None:
        return _section("graph", "Pipeline graph", f"<div class='alert warn lines'>{_e(r.graph_note or 'No graph.')}</div>")
    note = "<p class='muted small'>The pipeline as its file compiles now (it may have changed since this run).</p>"
    return _section("graph", "Pipeline graph", f"{note}<div class='graph'>{r.graph_svg}</div>")


def _footer(r: RunReport) -> str:
    return (
        f"<footer class='wrap'>Generated by <code>tributary report</code> on {_e(_when(r.generated_at))} from "
        f"<code>{_e(r.warehouse)}/_tributary</code>.</footer>"
    )


# -- small pieces ------------------------------------------------------------------------------


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _badge(status: str | None, solid: bool = False) -> str:
    text = status or "unknown"
    return f"<span class='badge {tone(text)}{' solid' if solid else ''}'>{_e(text)}</span>"


def _chip(text: str, kind: str | None = None) -> str:
    return f"<span class='chip{' sev-' + _e(kind) if kind else ''}'>{_e(text)}</span>"


def _muted(text: str) -> str:
    return f"<span class='muted'>{_e(text)}</span>"


def _empty(text: str) -> str:
    return f"<p class='empty'>{_e(text)}</p>"


def _num(value: int | float | None) -> str:
    return _muted("–") if value is None else _e(_fmt(value))


def _num_s(seconds: float | None) -> str:
    return _muted("–") if seconds is None else _e(f"{seconds:,.2f} s")


def _bar(share: float) -> str:
    width = max(0.0, min(1.0, share)) * 100
    shade = Tone.PASS if share >= 0.95 else Tone.WARN if share >= 0.75 else Tone.FAIL
    return (
        f"<span class='bar'><span class='fill {shade}' style='width:{width:.1f}%'></span></span>"
        f"<span class='pct'>{share * 100:.2f} %</span>"
    )


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value or abs(value) >= 1e15 or 0 < abs(value) < 1e-4:  # nan, huge, tiny
            return f"{value:g}"
        return f"{value:,.4f}".rstrip("0").rstrip(".")
    if isinstance(value, datetime):
        return _when(value)
    return str(value)


def _compact(value: Any) -> str:
    """`{"column": "ms", "max_value": 60}` → `column=ms, max_value=60`; other JSON as compact JSON."""
    if isinstance(value, dict):
        return ", ".join(f"{k}={_compact_value(v)}" for k, v in value.items())
    return _compact_value(value)


def _compact_value(value: Any) -> str:
    if isinstance(value, str):
        return value if re.fullmatch(r"[\w./:@+-]+", value) else json.dumps(value, ensure_ascii=False)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _under(table: str, warehouse: str) -> str:
    """A table's location relative to the warehouse when it is inside it."""
    root = warehouse.rstrip("/") + "/"
    return table[len(root) :] if warehouse and table.startswith(root) else table


def _cut(text: str, limit: int = CELL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _records(rows: list[dict[str, Any]]) -> str:
    """A few records (failing samples, quarantined rows) as a small table of their keys."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    body = [[_muted("null") if row.get(c) is None else f"<code>{_e(_cut(_fmt(row[c])))}</code>" for c in columns] for row in rows]
    return _table(columns, body, css="grid records")


def _table(
    head: list[str],
    rows: list[list[str]],
    numeric: set[int] | None = None,
    row_classes: list[str] | None = None,
    css: str = "grid",
) -> str:
    """A table of already-escaped cells."""
    numeric = numeric or set()
    th = "".join(f"<th{' class=num' if i in numeric else ''}>{_e(h)}</th>" for i, h in enumerate(head))
    trs = []
    for n, row in enumerate(rows):
        css_row = f" class='{row_classes[n]}'" if row_classes and row_classes[n] else ""
        tds = "".join(f"<td{' class=num' if i in numeric else ''}>{cell}</td>" for i, cell in enumerate(row))
        trs.append(f"<tr{css_row}>{tds}</tr>")
    return f"<div class='scroll'><table class='{css}'><thead><tr>{th}</tr></thead><tbody>{''.join(trs)}</tbody></table></div>"


def _when(moment: datetime | None, short: bool = False) -> str:
    if moment is None:
        return "–"
    moment = moment.astimezone(UTC) if moment.tzinfo else moment
    return moment.strftime("%H:%M:%S UTC" if short else "%Y-%m-%d %H:%M:%S UTC")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


_CSS = """
:root{--ink:#1f2328;--muted:#656d76;--line:#d8dee4;--soft:#f6f8fa;--bg:#eef1f5;--accent:#0969da;
--pass:#1a7f37;--pass-bg:#dafbe1;--pass-line:#8ddb9f;--fail:#cf222e;--fail-bg:#ffebe9;--fail-line:#ffb8b0;
--warn:#9a6700;--warn-bg:#fff5cc;--warn-line:#f0d37a;--mono:ui-monospace,"SFMono-Regular","DejaVu Sans Mono",Menlo,Consolas,monospace}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Liberation Sans","DejaVu Sans",Helvetica,Arial,sans-serif}
.wrap{max-width:1240px;margin:0 auto;padding:0 28px}
code{font-family:var(--mono);font-size:12.5px}
header.top{background:linear-gradient(135deg,#0b1f33 0%,#163a5c 100%);color:#fff;padding:26px 0 22px}
.eyebrow{text-transform:uppercase;letter-spacing:.12em;font-size:11px;color:#9fb6cc;font-weight:600}
.title{display:flex;align-items:center;gap:14px;margin:4px 0 14px}
.title h1{margin:0;font-size:28px;font-weight:650;letter-spacing:-.01em}
.facts{display:flex;flex-wrap:wrap;gap:8px 36px;margin:0}
.facts dt{font-size:11px;text-transform:uppercase;letter-spacing:.08em;color:#9fb6cc}
.facts dd{margin:0;font-size:14px;color:#fff}
.facts code{color:#fff;font-size:13.5px}
.cards{display:grid;grid-template-columns:repeat(6,minmax(0,1fr));gap:14px;padding-top:20px}
.card{background:#fff;border:1px solid var(--line);border-radius:10px;padding:14px 16px;border-top:4px solid #8c959f;
box-shadow:0 1px 2px rgba(31,35,40,.06)}
.card.pass{border-top-color:var(--pass)}.card.fail{border-top-color:var(--fail)}.card.warn{border-top-color:#d4a72c}
.card .label{font-size:11px;text-transform:uppercase;letter-spacing:.08em;color:var(--muted);font-weight:600}
.card .value{font-size:23px;font-weight:650;margin:2px 0 0;font-variant-numeric:tabular-nums;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.card.pass .value{color:var(--pass)}.card.fail .value{color:var(--fail)}.card.warn .value{color:var(--warn)}
.card .sub{font-size:12px;color:var(--muted);white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
nav{display:flex;flex-wrap:wrap;gap:6px;margin:18px 0 4px}
nav a{font-size:12.5px;color:var(--accent);text-decoration:none;background:#fff;border:1px solid var(--line);
border-radius:999px;padding:3px 12px}
nav a:hover{background:var(--soft)}
.panel{background:#fff;border:1px solid var(--line);border-radius:10px;padding:18px 22px 20px;margin:16px 0;
box-shadow:0 1px 2px rgba(31,35,40,.06)}
.panel h2{margin:0 0 12px;font-size:17px;font-weight:650;display:flex;align-items:center;gap:8px}
.count{font-size:12px;font-weight:600;color:var(--muted);background:var(--soft);border:1px solid var(--line);
border-radius:999px;padding:0 8px}
.target{margin:6px 0 18px}
.target h3{font-size:14.5px;margin:10px 0 8px;display:flex;align-items:center;gap:8px}
.tally{margin-left:auto;font-size:12.5px;font-weight:500;color:var(--muted)}
.fail-text{color:var(--fail);font-weight:600}
.scroll{overflow-x:auto}
table.grid{border-collapse:collapse;width:100%;font-size:13px}
table.grid th{text-align:left;font-size:11.5px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);
font-weight:600;background:var(--soft);border-bottom:1px solid var(--line);padding:7px 10px;white-space:nowrap}
table.grid td{padding:7px 10px;border-bottom:1px solid #eaeef2;vertical-align:top}
table.grid tbody tr:hover td{background:#fafbfc}
table.grid .num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.internal td{background:#fbfbfc;color:#57606a}
tr.detail td{background:#fcfcfd;padding:4px 10px 12px 26px}
table.records{width:auto;min-width:50%;font-size:12px;background:#fff;border:1px solid var(--line)}
table.records th{font-size:11px;text-transform:none;letter-spacing:0;padding:4px 8px}
table.records td{padding:4px 8px}
table.records code{font-size:11.5px;word-break:break-all}
.samples{margin:8px 0 2px}
.samples .caption{font-size:12px;font-weight:600;color:var(--muted);margin:0 0 4px}
table.grid.narrow{width:auto;min-width:520px}
table.grid.quality{table-layout:fixed;min-width:980px}
table.grid.quality td{overflow-wrap:anywhere}
table.grid.quality th{white-space:normal}
table.kv{border-collapse:collapse;font-size:13.5px}
table.kv th{text-align:left;font-weight:600;color:var(--muted);padding:4px 24px 4px 0;white-space:nowrap;vertical-align:top}
table.kv td{padding:4px 0}
.badge{display:inline-block;font-size:11.5px;font-weight:700;line-height:18px;padding:0 9px;border-radius:999px;
border:1px solid var(--line);text-transform:uppercase;letter-spacing:.04em;background:var(--soft);color:var(--muted);white-space:nowrap}
.badge.pass{background:var(--pass-bg);color:var(--pass);border-color:var(--pass-line)}
.badge.fail{background:var(--fail-bg);color:var(--fail);border-color:var(--fail-line)}
.badge.warn{background:var(--warn-bg);color:var(--warn);border-color:var(--warn-line)}
.badge.solid{font-size:13px;line-height:24px;padding:0 14px;border:0}
.badge.solid.pass{background:#2da44e;color:#fff}.badge.solid.fail{background:#cf222e;color:#fff}
.badge.solid.warn{background:#d4a72c;color:#1f2328}.badge.solid.neutral{background:#57606a;color:#fff}
.chip{display:inline-block;font-size:11.5px;padding:0 7px;line-height:18px;border-radius:4px;background:#eef1f4;
color:#424a53;border:1px solid #dde3e8;font-weight:500;white-space:nowrap}
.chip.internal{background:#f3eefc;color:#6639ba;border-color:#d8c8f5}
.chip.sev-fail{background:#fff0f0;color:#a40e26;border-color:#ffcdd2}
.chip.sev-warn{background:#fff8e1;color:#7d5400;border-color:#f3dc9b}
.chip.sev-drop{background:#eef4ff;color:#0550ae;border-color:#c5d9f7}
.expectation{font-family:var(--mono);font-size:12.5px;font-weight:600}
.kwargs{font-family:var(--mono);font-size:11.5px;color:var(--muted);margin-top:2px}
.muted{color:var(--muted)}.small{font-size:12px}.nowrap{white-space:nowrap}
.empty{color:var(--muted);font-style:italic;margin:4px 0}
.alert{border-radius:8px;padding:10px 14px;margin:12px 0 0;font-size:13px;border:1px solid}
.alert.fail{background:var(--fail-bg);border-color:var(--fail-line);color:#82071e}
.alert.warn{background:var(--warn-bg);border-color:var(--warn-line);color:#6f4b00}
.alert.lines{white-space:pre-line}
.alert pre{margin:6px 0 0;white-space:pre-wrap;font-family:var(--mono);font-size:12px}
.pct{display:inline-block;min-width:62px;text-align:right}
.bar{display:inline-block;width:70px;height:7px;background:#eaeef2;border-radius:4px;vertical-align:middle;overflow:hidden;margin-right:6px}
.bar .fill{display:block;height:100%}.fill.pass{background:#2da44e}.fill.warn{background:#d4a72c}.fill.fail{background:#cf222e}
.graph{overflow-x:auto;padding:8px;background:var(--soft);border:1px solid var(--line);border-radius:8px}
.graph svg{display:block;max-width:none}
footer{color:var(--muted);font-size:12px;padding:8px 28px 36px}
@media (max-width:1000px){.cards{grid-template-columns:repeat(3,minmax(0,1fr))}}
@media print{body{background:#fff}.panel,.card{box-shadow:none}nav{display:none}}
"""
