"""Trying a pipeline: `tributary run --limit N` reads each source's first N rows and writes into the
scratch warehouse, never the real one; `tributary show --scratch` looks at what it wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from tests.conftest import delta_rows, delta_version, write

pytestmark = pytest.mark.spark

CALLS = "ts TIMESTAMP, head_service STRING, n INT"


def _rows(start: int, count: int) -> list[dict]:
    return [
        {"ts": f"2026-11-02T08:{(start + i) // 60:02d}:{(start + i) % 60:02d}Z", "head_service": f"/p{start + i}", "n": start + i}
        for i in range(count)
    ]


def _write_source(folder: Path, file_format: str, files: list[list[dict]]) -> None:
    """Files named so that path order is not creation order."""
    folder.mkdir(parents=True)
    for i, rows in reversed(list(enumerate(files))):
        name = folder / f"part-{i:03d}.{file_format if file_format != 'text' else 'log'}"
        if file_format == "json":
            name.write_text("".join(json.dumps(r) + "\n" for r in rows))
        elif file_format == "csv":
            name.write_text("ts,head_service,n\n" + "".join(f"{r['ts']},{r['head_service']},{r['n']}\n" for r in rows))
        elif file_format == "text":
            name.write_text("".join(f"{r['n']} {r['head_service']}\n" for r in rows))
        else:
            table = pa.table(
                {
                    "ts": pa.array([r["ts"] for r in rows]).cast(pa.timestamp("us", tz="UTC")),
                    "head_service": [r["head_service"] for r in rows],
                    "n": pa.array([r["n"] for r in rows], pa.int32()),
                }
            )
            pq.write_table(table, name, row_group_size=3)


FILES = [_rows(0, 4), _rows(4, 5), _rows(9, 4)]  # 13 rows in three files


@pytest.mark.parametrize("file_format", ["json", "csv", "parquet", "text"])
def test_a_limited_source_is_its_first_rows_in_path_and_line_order(spark, tmp_path, file_format):
    from framework.io.delta import local_store
    from framework.io.sources import read_source
    from framework.spec.models import FileSource, TextSource

    folder = tmp_path / file_format
    _write_source(folder, file_format, FILES)
    if file_format == "text":
        spec = TextSource.model_validate(
            {
                "format": "text",
                "path": str(folder),
                "parse": {"pattern": r"^(\d+) (\S+)$", "columns": {"n": "INT", "head_service": "STRING"}},
            }
        )
    else:
        spec = FileSource.model_validate({"format": file_format, "path": str(folder), "schema": CALLS})
    everything = [r["n"] for rows in FILES for r in rows]
    for limit in (1, 4, 6, 13, 50):
        frame = read_source(spark, "calls", spec, str(folder), local_store(), limit=limit)
        got = [r["n"] for r in frame.df.collect()]
        assert sorted(got) == everything[:limit], (file_format, limit, got)


def test_a_try_writes_scratch_tables_only_and_reads_the_files_it_needs(spark, cli, project):
    write(
        project / "pipelines" / "tried.yaml",
        f"""\
name: tried
sources:
  calls: {{format: json, path: incoming, schema: "{CALLS}"}}
steps:
  picked:
    sql: select head_service, n from {{{{ source('calls') }}}} where n >= {{{{ var('least', 0) | lit }}}}
outputs:
  picked: {{mode: append}}
""",
    )
    _write_source(project / "incoming", "json", FILES[:2])
    (project / "incoming" / "part-009.json").write_text('{"ts": "not a time", "n": "x"}\n' * 3)  # read only by a full run

    code, out, err = cli("run", "tried", "--limit", "6")
    assert code == 0, err
    assert "a try over the first 6 rows of each source" in out and ".tributary/scratch" in out
    scratch = project / ".tributary" / "scratch"
    assert sorted(r["n"] for r in delta_rows(scratch / "picked")) == [0, 1, 2, 3, 4, 5]
    assert not (project / "warehouse").exists(), "a try wrote into the real warehouse"
    assert not (scratch / "_tributary" / "quarantine").exists(), "the malformed file was read"
    assert "/p0" in out  # the first rows are shown

    code, out, err = cli("run", "tried", "--limit", "6")  # an identical try commits nothing
    assert code == 0 and "unchanged, already written by run" in out, err
    assert delta_version(scratch / "picked") == 0

    code, out, err = cli("run", "tried", "--limit", "3", "--var", "least=1")  # a try is rebuilt whole, not appended
    assert code == 0, err
    assert sorted(r["n"] for r in delta_rows(scratch / "picked")) == [1, 2]
    assert delta_version(scratch / "picked") == 1

    code, out, err = cli("show", "picked", "--scratch", "--version", "0", "--json")
    assert code == 0 and len(out.splitlines()) == 6, err
    code, out, err = cli("history", "picked", "--scratch", "--json")
    assert code == 0 and [json.loads(line)["rows"] for line in out.splitlines()] == [2, 6], err

    code, out, err = cli("runs", "--scratch")
    assert code == 0 and "tried: runs" in out and out.count("│ ok ") == 3, out

    code, out, err = cli("run", "tried")  # the real run reads everything, the bad file included
    assert code == 0, err
    assert len(delta_rows(project / "warehouse" / "picked")) == 9
    assert len(delta_rows(project / "warehouse" / "_tributary" / "quarantine")) == 3
    assert sorted(r["n"] for r in delta_rows(scratch / "picked")) == [1, 2]  # the try's tables stay as they were


def test_a_try_of_a_stream_runs_one_batch_and_leaves_no_checkpoints(spark, cli, project):
    code, out, err = cli("run", "contact_join", "--limit", "40", "--show", "0")
    assert code == 0, err
    scratch = project / ".tributary" / "scratch"
    assert delta_rows(scratch / "contacts"), "the try joined nothing"
    assert not (project / "warehouse").exists()
    assert not list(project.rglob("checkpoints")), "a try started a stream"
    code, out, err = cli("run", "contact_join", "--limit", "40", "--continuous")
    assert code == 2 and "give one" in err


def test_a_try_reads_delta_sources_from_the_real_warehouse(spark, cli, project):
    table = project / "warehouse" / "orders"
    for start in (0, 4, 8):  # three files of four rows
        write_deltalake(str(table), pa.table({"n": list(range(start, start + 4))}), mode="append")
    write(
        project / "pipelines" / "downstream.yaml",
        """\
name: downstream
sources:
  orders: {format: delta, table: orders}
steps:
  doubled:
    sql: select n * 2 as twice from {{ source('orders') }}
outputs:
  doubled: {mode: overwrite}
""",
    )
    code, out, err = cli("run", "downstream", "--limit", "5", "--show", "0")
    assert code == 0, err
    assert sorted(r["twice"] for r in delta_rows(project / ".tributary" / "scratch" / "doubled")) == [0, 2, 4, 6, 8]
    assert not (project / "warehouse" / "doubled").exists() and delta_version(table) == 2


def test_limit_and_scratch_mistakes_are_bad_input(cli, project):
    code, out, err = cli("run", "service_calls", "--limit", "0")
    assert code == 2 and "at least 1 row" in err
    code, out, err = cli("run", "service_calls", "--limit", "5", "--sample")
    assert code == 2 and "give one" in err
    (project / "configs" / "local.yaml").write_text("warehouse: ./warehouse\nscratch: ./warehouse/tries\n")
    code, out, err = cli("run", "service_calls", "--limit", "5")
    assert code == 2 and "overlap" in err
