"""`format: text` sources: a row per line with its file and line number, split by a regex into
typed columns, bad lines quarantined with where they came from, and an event time written as an
expression over the columns (batch and streaming)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import delta_rows, write

PATTERN = r'^(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\S+)$'
LOGS = """
name: logs
mode: {mode}
sources:
  access:
    format: text
    path: data/logs
    parse:
      pattern: '{pattern}'
      columns: {{client: STRING, ts_text: STRING, method: STRING, path: STRING, status: INT, bytes: BIGINT}}
    event_time: "to_timestamp(ts_text, 'dd/MMM/yyyy:HH:mm:ss Z')"
    watermark: 2s
    max_files_per_trigger: 1
steps:
  {steps}
outputs:
  {outputs}
"""
HITS = "hits:\n    sql: select _file, _line, client, _event_time, path, status, bytes from {{ source('access') }}"
VISITS = """visits:
    swa:
      input: access
      key: [client]
      size: 3
      timeout: 5s
      event_time: _event_time
      tiebreak: [_file, _line]
      aggregates: {lines: collect_list(_line), bytes: sum(bytes)}"""


def line(client: str, second: int, path: str = "/index.html", size: str = "512") -> str:
    return f'{client} - - [02/Nov/2026:08:00:{second:02d} +0000] "GET {path} HTTP/1.1" 200 {size}'


def land(project: Path, files: dict[str, str]) -> None:
    for i, (name, text) in enumerate(files.items()):
        path = write(project / "data" / "logs" / name, text)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # a stream reads files in this order


def test_lines_keep_their_file_and_number_and_bad_lines_go_to_quarantine(spark, cli, project):
    land(
        project,
        {
            "a.log": f"{line('10.0.0.1', 1)}\r\n{line('10.0.0.1', 2, '/a.css')}\r\ngarbage\n{line('10.0.0.2', 3, size='xyz')}\n",
            "b.log": "\n".join(line(f"10.0.1.{i}", 10 + i) for i in range(30)),  # no final newline
            "c.log": "",
        },
    )
    write(project / "pipelines" / "logs.yaml", LOGS.format(mode="batch", pattern=PATTERN, steps=HITS, outputs="hits: {}"))
    code, out, err = cli("run", "logs")
    assert code == 0, out + err
    rows = delta_rows(project / "warehouse" / "hits")
    got = sorted((Path(r["_file"]).name, r["_line"], r["client"], r["bytes"]) for r in rows)
    assert got == sorted(
        [("a.log", 1, "10.0.0.1", 512), ("a.log", 2, "10.0.0.1", 512)] + [("b.log", i + 1, f"10.0.1.{i}", 512) for i in range(30)]
    )
    assert {r["_event_time"].second for r in rows if r["_line"] == 2 and r["_file"].endswith("a.log")} == {2}
    quarantined = sorted(
        (Path(r["file"]).name, r["line"], r["record"], r["reason"])
        for r in delta_rows(project / "warehouse" / "_tributary" / "quarantine")
    )
    assert quarantined == [
        ("a.log", 3, "garbage", "text line: the line does not match the pattern"),
        ("a.log", 4, line("10.0.0.2", 3, size="xyz"), "text line: value(s) of bytes do not cast to the declared type"),
    ]
    assert "quarantined 2 from access" in out


def test_a_stream_of_log_files_integrated_by_swa_equals_the_batch_run(spark, cli, project):
    """Files arrive in time order; each is a micro-batch. The stream's windows are the batch run's
    windows that its final watermark closed."""
    files = {f"part-{i}.log": "\n".join(line(f"10.0.0.{c}", 4 * i + c) for c in range(3)) + "\n" for i in range(5)}
    land(project, files)
    write(
        project / "pipelines" / "logs.yaml",
        LOGS.format(mode="streaming", pattern=PATTERN, steps=VISITS, outputs="visits: {mode: append}"),
    )
    code, out, err = cli("run", "logs")
    assert code == 0, out + err
    streamed = {(r["client"], r["window_start"], tuple(r["lines"])) for r in delta_rows(project / "warehouse" / "visits")}

    write(project / "pipelines" / "logs.yaml", LOGS.format(mode="batch", pattern=PATTERN, steps=VISITS, outputs="visits: {}"))
    import shutil

    shutil.rmtree(project / "warehouse")
    code, out, err = cli("run", "logs")
    assert code == 0, out + err
    batch = delta_rows(project / "warehouse" / "visits")
    final_mark = 4 * 4 + 2 - 2  # newest event second minus the watermark delay
    closed = {
        (r["client"], r["window_start"], tuple(r["lines"]))
        for r in batch
        if r["window_start"].second + 5 < final_mark or r["closed_by"] == "count"
    }
    assert streamed and streamed == closed


def test_named_groups_in_another_order_than_their_columns_are_exit_2(cli, project):
    """Columns take the groups in order: a pattern that names its groups as the columns, in another
    order, swapped the columns' values silently (exit 0); now validate says so at the line."""
    land(project, {"a.log": line("10.0.0.1", 1)})
    swapped = PATTERN.replace(r"^(\S+)", r"^(?<client>\S+)").replace(r'"(\S+)', r'"(?<method>\S+)')
    text = LOGS.format(mode="batch", pattern=swapped, steps=HITS, outputs="hits: {}")
    write(
        project / "pipelines" / "logs.yaml",
        text.replace("{client: STRING, ts_text: STRING, method: STRING,", "{method: STRING, ts_text: STRING, client: STRING,"),
    )
    code, out, err = cli("validate", "logs")
    assert code == 2, out + err
    text_err = " ".join(err.split())
    assert "sources.access.parse" in text_err and "group 1 is named 'client', but column 'client' is column 3" in text_err
    write(project / "pipelines" / "logs.yaml", text)  # the same names in the pattern's order: fine
    code, out, err = cli("validate", "logs")
    assert code == 0, out + err


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("columns: {client: STRING,", "columns: {extra: STRING, client: STRING,"),
        ("columns: {client: STRING,", "columns: {_line: STRING,"),  # the run failed: COLUMN_ALREADY_EXISTS, no line
        (r"'^(\S+)", r"'^((\S+)"),
    ],
)
def test_a_pattern_that_does_not_fit_its_columns_is_exit_2(cli, project, change, expected):
    text = LOGS.format(mode="batch", pattern=PATTERN, steps=HITS, outputs="hits: {}").replace(change, expected)
    write(project / "pipelines" / "logs.yaml", text)
    code, out, err = cli("validate", "logs")
    assert code == 2
    assert "sources.access.parse" in err and ("group(s)" in err or "not a regular expression" in err or "_file and _line" in err)


@pytest.mark.parametrize(
    ("event_time", "expected"),
    [
        ("to_timestamp(no_such_column)", "is neither a column nor an expression over them"),
        ("length(ts_text)", "gives integer, not a timestamp"),
    ],
)
def test_an_event_time_expression_that_cannot_be_one_is_exit_2(spark, cli, project, event_time, expected):
    land(project, {"a.log": line("10.0.0.1", 1) + "\n"})
    text = LOGS.format(mode="batch", pattern=PATTERN, steps=HITS, outputs="hits: {}")
    text = text.replace("\"to_timestamp(ts_text, 'dd/MMM/yyyy:HH:mm:ss Z')\"", f'"{event_time}"')
    write(project / "pipelines" / "logs.yaml", text)
    code, out, err = cli("run", "logs")
    assert code == 2, out + err
    assert expected in err


def test_the_access_log_example_in_batch_and_streaming(spark, cli, project):
    """The raw-log example of docs/raw-logs.md: the stream emits the batch run's page views, but those its
    final watermark leaves open, which it says it still holds."""
    for path in (project / "data" / "samples" / "access_log").glob("*.log"):
        # as `tributary generate access-log` leaves them (a git checkout does not keep mtimes):
        # a stream reads files in modification order, both servers' files of a period together
        period = int(path.stem.rsplit("-", 1)[1])
        os.utime(path, (1_700_000_000 + period, 1_700_000_000 + period))
    code, out, err = cli("run", "access_log")
    assert code == 0, out + err
    assert "quarantined 3 from requests" in out
    batch = {(r["page"], r["client"], r["window_start"], r["requests"]) for r in delta_rows(project / "warehouse" / "page_views")}
    code, out, err = cli("run", "access_log_streaming")
    assert code == 0, out + err
    streamed = {
        (r["page"], r["client"], r["window_start"], r["requests"])
        for r in delta_rows(project / "warehouse" / "page_views_streaming")
    }
    held = [e for e in delta_rows(project / "warehouse" / "_tributary" / "events") if e["event"] == "held"]
    assert streamed < batch and len(batch - streamed) == int(out.split("tuples in ")[1].split(" open windows")[0])
    assert held and f"still holds {held[0]['rows']:,} tuples" in out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(alphabet="ab1-2 x", max_size=10), min_size=1, max_size=30))
def test_the_jvm_match_splits_lines_as_sparks_regex_functions_do(spark, monkeypatch, values):
    """One JVM match a line (tributary.RegexGroups) gives what Spark's rlike and regexp_extract
    give: the same lines matched, the same groups' texts (a group that took no part is empty), the
    same casts and the same reasons, for lines that match, match in part or not at all."""
    from pyspark.sql import functions as F

    from framework import jvm
    from framework.io.origin import FILE, LINE
    from framework.io.text_source import split_lines
    from framework.spec.models import TextSource

    spec = TextSource(
        format="text",
        path="unused",
        parse={"pattern": r"(a+)?(b*)-(\d+)?( x)?", "columns": {"a": "STRING", "b": "STRING", "n": "TINYINT", "x": "STRING"}},
    )
    rows = spark.createDataFrame(
        [(f"f{i % 2}", i + 1, v) for i, v in enumerate(values)], f"{FILE} string, {LINE} int, value string"
    )

    def split(jvm_functions: str) -> tuple[list, list]:
        monkeypatch.setenv("TRIBUTARY_JVM", jvm_functions)
        assert (jvm.regex_groups(spark, F.col("value"), "a") is not None) == (jvm_functions == "1")
        good, bad = split_lines(rows, spec)
        assert bad is not None
        return sorted(good.collect()), sorted(bad.orderBy(F.col("line")).collect())

    with_jvm, spark_only = split("1"), split("0")
    assert with_jvm == spark_only


@pytest.mark.parametrize("bad_lines", [3, 12_000])
def test_bad_lines_are_kept_as_the_run_reads_them_or_read_again_when_many(spark, tmp_path, bad_lines):
    """The run's read keeps a source's bad lines (up to 1,000) as it counts them, so the quarantine
    does not parse the whole source again: the kept lines are the ones a second read finds, file,
    line, record and reason; past the bound (10,000) the read keeps none, and the quarantine reads
    again."""
    from pyspark.sql import Observation

    from framework.io.bad_records import kept_records
    from framework.io.text_source import read_text
    from framework.spec.models import TextSource

    lines = [line(f"10.0.0.{i % 200}", i % 60) for i in range(30_000)]
    for i in range(bad_lines):
        lines[(i * 7) % len(lines)] = f"garbage {i}" if i % 2 else line("10.0.0.1", 1, size="many")
    (tmp_path / "a.log").write_text("\n".join(lines) + "\n")
    spec = TextSource(
        format="text",
        path=str(tmp_path),
        parse={
            "pattern": PATTERN,
            "columns": {
                "client": "STRING",
                "ts_text": "STRING",
                "method": "STRING",
                "path": "STRING",
                "status": "INT",
                "bytes": "BIGINT",
            },
        },
    )
    counter = Observation(f"kept_{bad_lines}")
    good, bad = read_text(spark, spec, str(tmp_path), counter=counter)
    good.write.format("noop").mode("overwrite").save()
    assert bad is not None
    again = sorted(bad.collect())
    assert len(again) == len({(i * 7) % len(lines) for i in range(bad_lines)})
    kept = kept_records(spark, counter)
    if bad_lines <= 10_000:
        assert kept is not None and sorted(kept.collect()) == again
    else:
        assert kept is None
