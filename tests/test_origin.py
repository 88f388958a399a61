"""`origin: true`: every JSON-lines, CSV and Parquet row knows its file and line, for any number of
files and partitions, batch and streaming, and the quarantine records carry them too."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import delta_rows, write

PIPELINE = """
name: traced
mode: {mode}
sources:
  calls:
    format: {format}
    path: data/calls
    origin: true
    schema: n INT, ms INT, ts TIMESTAMP
    event_time: ts
    watermark: 1h
steps:
  checked:
    sql: select * from {{{{ source('calls') }}}}
{expectations}
outputs:
  checked: {{mode: {output_mode}}}
"""
EXPECTATIONS = """    expectations:
      - expect_column_values_to_be_between: {column: ms, min_value: 0, max_value: 1000}
        severity: drop"""


def json_lines(records: list[dict | str]) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n"


def land(project: Path, files: dict[str, str]) -> None:
    for i, (name, text) in enumerate(files.items()):
        os.utime(write(project / "data" / "calls" / name, text), (1_700_000_000 + i, 1_700_000_000 + i))


def pipeline(project: Path, mode: str = "batch", file_format: str = "json") -> None:
    output_mode, expectations = "overwrite", EXPECTATIONS
    if mode == "streaming":  # streaming runs check expectations in a batch pipeline reading the output
        output_mode, expectations = "append", ""
    text = PIPELINE.format(mode=mode, format=file_format, output_mode=output_mode, expectations=expectations)
    write(project / "pipelines" / "traced.yaml", text)


def call(n: int, ms: int = 5) -> dict:
    return {"n": n, "ms": ms, "ts": f"2026-11-02T08:{n % 60:02d}:00"}


def files_with_trouble() -> dict[str, str]:
    """a.json: line 1 a call, 2 blank, 3 a call, 4 malformed, 5 a call the expectation drops.
    b.json: 3000 calls whose n is their line number."""
    a = json_lines([call(1), "", call(3), '{"n": "four"', call(5, ms=99_999)])
    return {"a.json": a, "b.json": json_lines([call(i + 1) for i in range(3000)])}


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_rows_and_quarantined_records_name_their_file_and_line(spark, cli, project, mode):
    land(project, files_with_trouble())
    pipeline(project, mode)
    code, out, err = cli("run", "traced")
    assert code == 0, out + err
    rows = delta_rows(project / "warehouse" / "checked")
    dropped = {("a.json", 5)} if mode == "batch" else set()
    origin = {(Path(r["_file"]).name, r["_line"]) for r in rows}
    assert origin == {("a.json", 1), ("a.json", 3), ("a.json", 5)} - dropped | {("b.json", i + 1) for i in range(3000)}
    assert all(r["_line"] == r["n"] for r in rows), "each call's n is its line number"
    quarantine = delta_rows(project / "warehouse" / "_tributary" / "quarantine")
    where = sorted((r["source"], Path(r["file"]).name, r["line"]) for r in quarantine)
    assert where == [("calls", "a.json", 4)] + [("checked", *d) for d in dropped]


def test_csv_lines_count_the_header(spark, cli, project):
    land(project, {"a.csv": "n,ms,ts\n2,5,2026-11-02 08:00:00\n\n4,x,2026-11-02 08:00:00\n5,5,2026-11-02 08:00:00\n"})
    pipeline(project, file_format="csv")
    code, out, err = cli("run", "traced")
    assert code == 0, out + err
    assert sorted((r["n"], r["_line"]) for r in delta_rows(project / "warehouse" / "checked")) == [(2, 2), (5, 5)]
    quarantine = delta_rows(project / "warehouse" / "_tributary" / "quarantine")
    assert [(r["line"], r["record"]) for r in quarantine] == [(4, "4,x,2026-11-02 08:00:00")]


def test_parquet_rows_are_numbered_by_their_position_in_the_file(spark, cli, project):
    for name, first in (("a.parquet", 0), ("b.parquet", 1000)):
        path = project / "data" / "calls" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        ns = list(range(first + 1, first + 1001))
        table = pa.table({"n": pa.array(ns, pa.int32()), "ms": pa.array([5] * 1000, pa.int32())})
        table = table.append_column("ts", pa.array([None] * 1000, pa.timestamp("us", tz="UTC")))
        pq.write_table(table, path, row_group_size=100)  # several row groups, read by several tasks
    pipeline(project, file_format="parquet")
    code, out, err = cli("run", "traced")
    assert code == 0, out + err
    rows = delta_rows(project / "warehouse" / "checked")
    assert len(rows) == 2000
    assert all(r["_line"] == r["n"] - (1000 if r["_file"].endswith("b.parquet") else 0) for r in rows)


def test_a_quarantine_from_before_lines_gets_the_column(spark, cli, project):
    from deltalake import write_deltalake

    old = pa.table(
        {
            "run_id": ["r0"],
            "pipeline": ["traced"],
            "source": ["calls"],
            "file": ["old.json"],
            "record": ["{"],
            "reason": ["malformed"],
            "quarantined_at": pa.array([None], pa.timestamp("us", tz="UTC")),
        }
    )
    write_deltalake(str(project / "warehouse" / "_tributary" / "quarantine"), old)
    land(project, files_with_trouble())
    pipeline(project)
    code, out, err = cli("run", "traced")
    assert code == 0, out + err
    quarantine = delta_rows(project / "warehouse" / "_tributary" / "quarantine")
    assert sorted((r["file"].rsplit("/", 1)[-1], r["line"]) for r in quarantine) == [
        ("a.json", 4),
        ("a.json", 5),
        ("old.json", None),
    ]


def test_origin_with_multiline_records_is_exit_2(cli, project):
    pipeline(project)
    text = (
        (project / "pipelines" / "traced.yaml")
        .read_text()
        .replace("origin: true", "origin: true\n    options: {multiLine: true}")
    )
    write(project / "pipelines" / "traced.yaml", text)
    code, out, err = cli("validate", "traced")
    assert code == 2
    assert "sources.calls" in err and "multiLine" in err


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.lists(st.sampled_from(["call", "blank", "bad"]), min_size=0, max_size=40),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from([None, 64, 300]),
)
def test_line_numbers_are_right_for_any_files(spark, tmp_path_factory, files, split_bytes):
    """Any number of files, each any mix of records, blank and malformed lines, read whole or split
    between tasks at any byte: every good row and every malformed record is found at its own line."""
    from framework.io.sources import read_source
    from framework.spec.models import FileSource

    folder = tmp_path_factory.mktemp("calls")
    expected_good, expected_bad = set(), set()
    for f, kinds in enumerate(files):
        text = []
        for i, kind in enumerate(kinds):
            text.append({"call": json.dumps({"n": i + 1, "ms": 1}), "blank": "  ", "bad": "{not json"}[kind])
            if kind == "call":
                expected_good.add((f"f{f}.json", i + 1))
            elif kind == "bad":
                expected_bad.add((f"f{f}.json", i + 1))
        (folder / f"f{f}.json").write_text("\n".join(text))
    spec = FileSource(format="json", path=str(folder), schema="n INT, ms INT", origin=True)
    with _split_size(spark, split_bytes):
        frame = read_source(spark, "calls", spec, str(folder), None)  # type: ignore[arg-type]
        rows = frame.df.collect()
        bad = {(Path(r["file"]).name, r["line"]) for r in frame.bad_rows.collect()}  # type: ignore[union-attr]
    good = {(Path(r["_file"]).name, r["_line"]) for r in rows}
    assert all(r["n"] == r["_line"] for r in rows)
    assert (good, bad) == (expected_good, expected_bad)


@pytest.mark.parametrize("jvm_functions", ["1", "0"])
def test_a_large_text_file_is_read_by_many_tasks_with_exact_lines(spark, tmp_path, monkeypatch, jvm_functions):
    """A file larger than a split is read split by split (a 200 MB log read whole killed the JVM),
    and each line keeps its number, `\\r\\n` endings, blank lines and a last line without a
    newline included: each task numbering its own lines, or counted first (no JVM functions)."""
    from framework.io.text_source import read_text

    monkeypatch.setenv("TRIBUTARY_JVM", jvm_functions)
    from framework.spec.models import TextSource

    lines = [f"{'x' * (i % 50)} line {i + 1}" if i % 11 else "" for i in range(2000)]
    text = "".join(line + ("\r\n" if i % 7 == 0 else "\n") for i, line in enumerate(lines)).rstrip("\n")
    (tmp_path / "big.log").write_text(text, newline="")
    with _split_size(spark, 4096):
        rows, _ = read_text(spark, TextSource(format="text", path=str(tmp_path)), str(tmp_path))
        tasks = rows.rdd.getNumPartitions()
        read = sorted((r["_line"], r["value"]) for r in rows.collect())
    assert tasks > 10, "one task per split, not one per file"
    assert read == [(i + 1, line) for i, line in enumerate(lines)]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.lists(st.text(alphabet="ab é\r", max_size=12), max_size=40), min_size=1, max_size=4),
    st.booleans(),
    st.sampled_from([None, 7, 64, 300]),
)
def test_tasks_number_their_lines_as_the_counting_pass_does(
    spark, tmp_path_factory, monkeypatch, files, final_newline, split_bytes
):
    """Any files, split between tasks at any byte: a batch read whose tasks number their own lines
    (the JVM function) and a stream read the same lines with the same numbers as the read that
    counts each split's lines first (no JVM functions), and each file's lines are numbered 1 to its
    line count."""
    from framework.io.origin import file_lines, stream_lines

    folder = tmp_path_factory.mktemp("text")
    counts = {}
    for f, lines in enumerate(files):
        text = "\n".join(lines) + ("\n" if final_newline and lines else "")
        (folder / f"f {f}.log").write_bytes(text.encode())
        counts[f"f {f}.log"] = len(text.split("\n")) - text.endswith("\n") if text else 0  # a final newline ends the last line
    with _split_size(spark, split_bytes):
        with monkeypatch.context() as without_jvm:
            without_jvm.setenv("TRIBUTARY_JVM", "0")
            counted = _lines(file_lines(spark, spark.read, str(folder)).collect())
        batch = _lines(file_lines(spark, spark.read, str(folder)).collect())
        streamed = _lines(_streamed(stream_lines(spark, spark.readStream, str(folder)))[0])
    assert batch == counted and streamed == counted
    assert {name: sorted(n for file, n, _ in counted if file == name) for name in counts} == {
        name: list(range(1, count + 1)) for name, count in counts.items()
    }


def test_a_large_file_in_a_stream_is_read_by_many_tasks_with_exact_lines(spark, tmp_path, monkeypatch):
    """A stream reads a file larger than a split split by split too (it read each file whole, as one
    string: a 300 MB log killed the JVM), plain, gzip (never split) or bzip2 (split by its blocks),
    and each line keeps its number, whatever characters the file's name holds."""
    import bz2
    import gzip

    from framework.io.text_source import read_text
    from framework.spec.models import TextSource

    lines = [f"{'x' * (i % 50)} line {i + 1}" if i % 11 else "" for i in range(20000)]
    text = "".join(line + ("\r\n" if i % 7 == 0 else "\n") for i, line in enumerate(lines)).encode()
    (tmp_path / "big é#%20.log").write_bytes(text)
    (tmp_path / "big é#%20.log.gz").write_bytes(gzip.compress(text))
    (tmp_path / "big é#%20.log.bz2").write_bytes(bz2.compress(text, compresslevel=1))  # blocks of 100 kB
    with _split_size(spark, 4096):
        rows, _ = read_text(spark, TextSource(format="text", path=str(tmp_path)), str(tmp_path), stream=True)
        read, tasks = _streamed(rows)
    assert tasks > 10, "one task per split, not one per file"
    for name in ("big é#%20.log", "big é#%20.log.gz", "big é#%20.log.bz2"):
        assert sorted((n, value) for file, n, value in _lines(read) if file == name) == [
            (i + 1, line) for i, line in enumerate(lines)
        ]


def _lines(rows: list) -> list[tuple[str, int, str]]:
    """(file name, line, value) of rows of numbered lines, sorted."""
    from urllib.parse import unquote

    return sorted((unquote(Path(r["_file"]).name), r["_line"], r["value"]) for r in rows)


def _streamed(frame) -> tuple[list, int]:
    """The rows of a stream, read until it has no new files, and the most tasks a micro-batch had."""
    import tempfile

    rows: list = []
    tasks = [0]

    def collect(batch, _batch_id: int) -> None:
        tasks[0] = max(tasks[0], batch.rdd.getNumPartitions())
        rows.extend(batch.collect())

    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            frame.writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
        )
        query.awaitTermination()
    return rows, tasks[0]


@contextmanager
def _split_size(spark, split_bytes: int | None) -> Iterator[None]:
    """Spark's split size for file reads (maxPartitionBytes) set for a while, then as it was."""
    key = "spark.sql.files.maxPartitionBytes"
    before = spark.conf.get(key)
    if split_bytes is not None:
        spark.conf.set(key, str(split_bytes))
    try:
        yield
    finally:
        spark.conf.set(key, before)
