"""Parquet sources without `schema:` are typed from their files' footers (no JVM), the files must
agree; Delta sources' schemas come from their logs; the schemas a run used are in its run log, and
a stream does not resume over a source whose columns changed."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from framework.errors import BadInput
from framework.io.source_schema import footer_schema
from tests.conftest import delta_rows, write

TABLE = pa.table(
    {
        "name": ["a", "b"],
        "ts": pa.array([datetime.datetime(2026, 1, 1, 8), datetime.datetime(2026, 1, 1, 9)], pa.timestamp("us", tz="UTC")),
        "local": pa.array([datetime.datetime(2026, 1, 1), None], pa.timestamp("us")),
        "n": pa.array([1, 2], pa.int32()),
        "price": pa.array([Decimal("1.50"), None], pa.decimal128(10, 2)),
        "tags": [["x"], []],
        "point": [{"x": 1.0, "y": 2.0}, None],
    }
)


def test_the_schema_comes_from_the_footers_as_spark_ddl(tmp_path: Path):
    for i in range(2):
        pq.write_table(TABLE, tmp_path / f"part-{i}.parquet")
    assert footer_schema("s", str(tmp_path)) == (
        "`name` STRING, `ts` TIMESTAMP, `local` TIMESTAMP_NTZ, `n` INT, `price` DECIMAL(10, 2), "
        "`tags` ARRAY<STRING>, `point` STRUCT<`x`: DOUBLE, `y`: DOUBLE>"
    )
    assert footer_schema("s", str(tmp_path / "none-*.parquet")) is None


@pytest.mark.parametrize(
    ("other", "expected"),
    [
        (TABLE.drop_columns(["n"]), "it lacks column 'n'"),
        (TABLE.set_column(3, "n", pa.array(["1", "2"])), "column 'n' is string, not int32"),
        (TABLE.append_column("extra", pa.array([1, 2])), "it has column(s) ['extra'] more"),
    ],
)
def test_files_that_disagree_are_named_with_the_column(tmp_path: Path, other: pa.Table, expected: str):
    pq.write_table(TABLE, tmp_path / "part-0.parquet")
    pq.write_table(other, tmp_path / "part-1.parquet")
    with pytest.raises(BadInput, match="part-1.parquet has another schema than .*part-0.parquet") as raised:
        footer_schema("s", str(tmp_path))
    assert expected in str(raised.value)


def test_files_differing_only_in_nullability_or_string_width_agree(tmp_path: Path):
    """A file whose columns are NOT NULL (duckdb's COPY of a not-null table) beside one whose
    columns may hold nulls was refused as 'its columns are in another order', the same order."""
    full = TABLE.drop_null()  # rows without nulls, written as NOT NULL columns
    strict = pa.schema([f.with_nullable(False) for f in full.schema])
    pq.write_table(TABLE, tmp_path / "part-0.parquet")
    pq.write_table(full.cast(strict), tmp_path / "part-1.parquet")
    wide = pa.schema([f.with_type(pa.large_string()) if pa.types.is_string(f.type) else f for f in TABLE.schema])
    pq.write_table(TABLE.cast(wide), tmp_path / "part-2.parquet")
    assert footer_schema("s", str(tmp_path)) == footer_schema("s", str(tmp_path / "part-0.parquet"))


STREAM = """
name: typed
mode: streaming
sources:
  events: {format: parquet, path: data/events, event_time: ts, watermark: 1s}
steps:
  named:
    sql: select name, ts, n from {{ source('events') }}
outputs:
  named: {mode: append}
"""


def test_a_streaming_parquet_source_runs_without_a_schema_and_the_run_log_keeps_it(spark, cli, project):
    write(project / "pipelines" / "typed.yaml", STREAM)
    code, _, err = cli("validate", "typed")
    assert code == 2 and "a streaming source needs a 'schema'" in err and "reads it from its files once one is there" in err
    (project / "data" / "events").mkdir(parents=True)
    pq.write_table(TABLE, project / "data" / "events" / "part-0.parquet")
    code, out, err = cli("run", "typed")
    assert code == 0, out + err
    assert sorted(r["name"] for r in delta_rows(project / "warehouse" / "named")) == ["a", "b"]
    start = next(e for e in delta_rows(project / "warehouse" / "_tributary" / "events") if e["event"] == "run_start")
    assert json.loads(start["details"])["source_schemas"]["events"].startswith("`name` STRING, `ts` TIMESTAMP")

    pq.write_table(TABLE.drop_columns(["n"]), project / "data" / "events" / "part-1.parquet")
    code, _, err = cli("run", "typed")
    assert code == 2 and "part-1.parquet has another schema than" in err and "it lacks column 'n'" in err


DELTA_STREAM = """
name: relayed
mode: streaming
sources:
  upstream: {format: delta, path: data/upstream, event_time: ts, watermark: 1s}
steps:
  relayed:
    sql: select * from {{ source('upstream') }}
outputs:
  relayed: {mode: append}
"""


def test_a_delta_source_schema_is_pinned_and_a_stream_stops_when_it_changes(spark, cli, project):
    from deltalake import write_deltalake

    table = project / "data" / "upstream"
    first = pa.table({"name": ["a"], "ts": pa.array([datetime.datetime(2026, 1, 1)], pa.timestamp("us", tz="UTC"))})
    write_deltalake(table, first)
    write(project / "pipelines" / "relayed.yaml", DELTA_STREAM)
    code, out, err = cli("run", "relayed")
    assert code == 0, out + err
    start = next(e for e in delta_rows(project / "warehouse" / "_tributary" / "events") if e["event"] == "run_start")
    assert json.loads(start["details"])["source_schemas"] == {"upstream": "`name` STRING, `ts` TIMESTAMP"}

    second = pa.table({"name": ["b"], "ts": first["ts"], "n": pa.array([1], pa.int64())})
    write_deltalake(table, second, mode="append", schema_mode="merge")
    code, out, err = cli("run", "relayed")
    assert code == 2, out + err
    assert "source 'upstream': its columns changed since this stream's checkpoints were written: new column(s) ['n']" in err
    assert "--full-refresh" in err
    assert sorted(r["name"] for r in delta_rows(project / "warehouse" / "relayed")) == ["a"]  # nothing written twice

    code, out, err = cli("run", "relayed", "--full-refresh", "--yes")
    assert code == 0, out + err
    assert sorted((r["name"], r["n"]) for r in delta_rows(project / "warehouse" / "relayed")) == [("a", None), ("b", 1)]


def test_a_watermark_over_a_timestamp_without_time_zone_is_bad_input_at_validate(spark, cli, project):
    """pandas and pyarrow write times without a time zone by default: validate passed, and the
    stream failed with Spark's EVENT_TIME_IS_NOT_ON_TIMESTAMP_TYPE (exit 1, no line)."""
    naive = TABLE.set_column(1, "ts", TABLE.column("ts").cast(pa.timestamp("ms")))
    (project / "data" / "events").mkdir(parents=True)
    pq.write_table(naive, project / "data" / "events" / "part-0.parquet")
    write(project / "pipelines" / "typed.yaml", STREAM)
    code, out, err = cli("validate", "typed")
    assert code == 2, out + err
    assert "typed.yaml:5:" in err and "event_time 'ts' is a TIMESTAMP_NTZ" in err, err
    write(project / "pipelines" / "typed.yaml", STREAM.replace("event_time: ts", 'event_time: "cast(ts AS TIMESTAMP)"'))
    code, out, err = cli("run", "typed")  # the hint's way
    assert code == 0, out + err
    assert sorted(r["name"] for r in delta_rows(project / "warehouse" / "named")) == ["a", "b"]
