"""The synthetic service trace: shape, ground truth, the paper's statistics, files, CLI (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from framework.generators.service_trace import SCHEMA, generate_service_trace

COLUMNS = [
    "head_service",
    "requested_service",
    "client_ip",
    "ts",
    "instance_ts",
    "response_ms",
    "bytes",
    "instance_id",
    "is_primary",
]


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, pd.DataFrame]:
    out = tmp_path_factory.mktemp("trace")
    summary = generate_service_trace(out, instances=5000, seed=7, files=6)
    frames = []
    for stream in ("static", "images"):
        for path in sorted((out / stream).glob("*.json")):
            frame = pd.read_json(path, lines=True, dtype=False)
            frame["stream"] = stream
            frames.append(frame)
    rows = pd.concat(frames, ignore_index=True)
    rows["ts"] = pd.to_datetime(rows["ts"], utc=True)
    rows["instance_ts"] = pd.to_datetime(rows["instance_ts"], utc=True)
    return out, summary, rows


def test_same_seed_same_bytes_other_seed_differs(tmp_path: Path) -> None:
    a = generate_service_trace(tmp_path / "a", instances=300, seed=3, files=2)
    b = generate_service_trace(tmp_path / "b", instances=300, seed=3, files=2)
    c = generate_service_trace(tmp_path / "c", instances=300, seed=4, files=2)
    assert a.tuples == b.tuples
    for stream in ("static", "images"):
        names = sorted(p.name for p in (tmp_path / "a" / stream).iterdir())
        assert names == [f"part-0003-{i:05d}.json" for i in range(2)]
        for name in names:
            assert (tmp_path / "a" / stream / name).read_bytes() == (tmp_path / "b" / stream / name).read_bytes()
    first = (tmp_path / "a" / "static" / "part-0003-00000.json").read_text()
    assert first != (tmp_path / "c" / "static" / "part-0004-00000.json").read_text()
    assert c.first_instance_id == 4 * 10**9


def test_json_lines_have_the_columns_in_order(trace) -> None:
    out, _, _ = trace
    line = (out / "static" / "part-0007-00000.json").open().readline()
    row = json.loads(line)
    assert list(row) == COLUMNS
    assert row["ts"].endswith("Z") and len(row["ts"]) == len("2026-11-02T08:00:00.123Z")
    assert row["instance_ts"].endswith(".000Z")
    assert isinstance(row["response_ms"], int) and isinstance(row["is_primary"], bool)


def test_ground_truth_instances(trace) -> None:
    out, summary, rows = trace
    assert len(rows) == summary.tuples == sum(summary.tuples_per_stream.values())
    assert rows["instance_id"].nunique() == summary.instances == 5000
    per = rows.groupby("instance_id")
    assert (per["is_primary"].sum() == 1).all()
    primary = rows[rows["is_primary"]].set_index("instance_id").sort_index()
    assert (primary["requested_service"] == primary["head_service"]).all()
    assert primary["requested_service"].str.fullmatch(r"/page/\d{5}\.html").all()
    assert (primary["stream"] == "static").all()
    # one head, one client, one instance_ts per instance; instance_ts = primary ts cut to the second
    assert (per[["head_service", "client_ip", "instance_ts"]].nunique() == 1).all().all()
    assert (primary["instance_ts"] == primary["ts"].dt.floor("s")).all()
    assert (per["ts"].min() == primary["ts"]).all()
    # every instance of a page has the page's degree, and the page's sub-services are stable
    degree = per.size().rename("degree").to_frame().join(primary["head_service"])
    assert (degree.groupby("head_service")["degree"].nunique() == 1).all()
    services = rows.groupby("head_service")["requested_service"].nunique()
    assert (services == degree.groupby("head_service")["degree"].first()).all()
    subs = rows[~rows["is_primary"]]
    images = subs["requested_service"].str.fullmatch(r"/img/p\d{5}/\d+\.png")
    assert (images == (subs["stream"] == "images")).all()
    assert subs.loc[~images, "requested_service"].str.fullmatch(r"/static/p\d{5}/s\d+\.(css|js)").all()
    assert 0.5 < images.mean() < 0.7
    assert rows["response_ms"].between(1, 60000).all() and (rows["bytes"] > 0).all()


def test_paper_statistics(trace) -> None:
    _, summary, rows = trace
    per = rows.groupby("instance_id")
    assert per.size().mean() == pytest.approx(100 / 8.7963, abs=0.3)  # formula (4): 11.37
    assert summary.mean_page_degree == pytest.approx(100 / 8.7963, abs=0.1)
    duration_s = (per["ts"].max() - per["ts"].min()).dt.total_seconds()
    assert duration_s.mean() == pytest.approx(11.2513, abs=0.6)  # formula (5)
    assert 0.85 < (duration_s <= 20).mean() < 0.95  # "nearly 90% ... no more than 20 s"
    starts = rows.loc[rows["is_primary"], "ts"].sort_values()
    assert starts.diff().dt.total_seconds().mean() * 1000 == pytest.approx(9.778, rel=0.05)
    assert starts.iloc[0] >= pd.Timestamp("2026-11-02T08:00:00Z")
    # re-opens: the same client and page again within a second, as head+client+time cannot separate
    assert 50 < summary.reopens < 150
    keys = summary.distinct_keys
    assert keys["head"] <= keys["head+time"] <= keys["head+client+time"] < summary.instances
    assert keys["head+client"] <= keys["head+client+time"]
    truth = json.loads((Path(summary.out) / "_trace.json").read_text())
    assert truth["summary"]["tuples"] == summary.tuples
    assert truth["parameters"]["degree_erlang"] == {"k": 100, "rate": 8.7963, "mean": pytest.approx(11.3685, abs=1e-3)}
    assert truth["parameters"]["duration_hyper_erlang"]["mean_s"] == pytest.approx(11.2513, abs=0.01)


def test_files_in_arrival_order_with_increasing_mtimes(trace) -> None:
    out, summary, rows = trace
    for stream in ("static", "images"):
        paths = sorted((out / stream).glob("part-0007-*.json"))
        assert len(paths) == summary.files_per_stream[stream] == 6
        mtimes = [p.stat().st_mtime for p in paths]
        assert all(a < b for a, b in zip(mtimes, mtimes[1:], strict=False))
        # files hold consecutive arrival ranges: their invocation times move forward file by file
        medians = [pd.to_datetime(pd.read_json(p, lines=True, dtype=False)["ts"], utc=True).median() for p in paths]
        assert medians == sorted(medians)
    assert summary.files_written == 12


def test_parquet_types(tmp_path: Path) -> None:
    summary = generate_service_trace(tmp_path, instances=400, seed=2, files=3, fmt="parquet")
    paths = sorted((tmp_path / "images").glob("*.parquet")) + sorted((tmp_path / "static").glob("*.parquet"))
    assert len(paths) == 6 and [p.name for p in tmp_path.rglob("*.json")] == ["_trace.json"]
    table = pa.concat_tables(pq.read_table(p) for p in paths)
    assert table.schema.equals(SCHEMA)
    assert table.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("response_ms").type == pa.int32()
    assert table.schema.field("bytes").type == pa.int64() and table.schema.field("instance_id").type == pa.int64()
    assert table.schema.field("is_primary").type == pa.bool_()
    assert table.num_rows == summary.tuples
    assert pa.compute.sum(table["is_primary"]).as_py() == summary.instances


def test_rerun_with_fewer_files_leaves_no_stale_parts(tmp_path: Path) -> None:
    generate_service_trace(tmp_path, instances=200, seed=5, files=4)
    generate_service_trace(tmp_path, instances=200, seed=5, files=2, fmt="parquet")
    assert sorted(p.name for p in (tmp_path / "static").iterdir()) == ["part-0005-00000.parquet", "part-0005-00001.parquet"]


def test_cli_generates_service_trace(cli, project: Path) -> None:
    code, stdout, _ = cli("generate", "service-trace", "--instances", "500", "--seed", "3", "--files", "4")
    assert code == 0
    folder = project / "data" / "samples" / "service_trace"
    assert "500 instances" in stdout and "static" in stdout and "images" in stdout
    assert len(list((folder / "static").glob("part-0003-*.json"))) == 4
    assert len(list((folder / "images").glob("part-0003-*.json"))) == 4
    assert json.loads((folder / "_trace.json").read_text())["summary"]["instances"] == 500

    code, _, _ = cli("generate", "service-trace", "--instances", "100", "--out", "elsewhere", "--format", "parquet")
    assert code == 0 and len(list((project / "elsewhere" / "static").glob("*.parquet"))) == 20
