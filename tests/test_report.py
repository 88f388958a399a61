"""`tributary report`: a real run plus logged quality rows, rendered as one page by headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.conftest import delta_rows, write

pytestmark = pytest.mark.spark

CHROMIUM = Path("/usr/bin/chromium")

PIPELINE = """\
name: calls
description: Slow calls per page.
sources:
  calls:
    format: json
    path: incoming
    schema: ts TIMESTAMP, head_service STRING, response_ms INT
steps:
  slow:
    sql: |
      select head_service, response_ms, ts
      from {{ source('calls') }}
      where response_ms >= 20
  per_page:
    sql: |
      select head_service, count(*) as calls, max(response_ms) as worst_ms
      from {{ ref('slow') }}
      group by head_service
outputs:
  slow:
    mode: append
  per_page:
    mode: overwrite
"""


def tributary(project: Path, *args: str) -> tuple[int, str, str]:
    """The CLI in-process, from the project folder."""
    from framework.cli import app

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(project)
        mp.delenv("TRIBUTARY_PROFILE", raising=False)
        result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def new_project(root: Path) -> Path:
    write(
        root / "configs" / "local.yaml",
        "spark:\n  master: local[2]\n  conf:\n    spark.sql.shuffle.partitions: 2\nwarehouse: ./warehouse\n",
    )
    write(root / "pipelines" / "calls.yaml", PIPELINE)
    return root


@pytest.fixture(scope="module")
def ran(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One real run (with a malformed record, so something is quarantined), then quality figures for it."""
    from framework.integration.evaluation import StepEvaluation
    from framework.integration.evaluation import record as record_integration
    from framework.integration.metrics import IntegrationMetrics
    from framework.io.delta.delta_rs import DeltaRsStore
    from framework.io.locations import INTEGRATION_TABLE, QUALITY_TABLE
    from framework.quality.results import ExpectationResult, record

    project = new_project(tmp_path_factory.mktemp("report"))
    calls = [{"ts": f"2026-11-02T08:00:{i:02d}Z", "head_service": f"/p{i % 3}.html", "response_ms": 10 * i} for i in range(10)]
    write(project / "incoming" / "a.json", "".join(json.dumps(c) + "\n" for c in calls) + "this is not json\n")
    code, _, err = tributary(project, "run", "calls")
    assert code == 0, err
    (run_id,) = {e["run_id"] for e in delta_rows(project / "warehouse" / "_tributary" / "events")}

    store, warehouse = DeltaRsStore(), project / "warehouse"
    passing = ExpectationResult(
        "slow", "step", "expect_column_values_to_not_be_null", {"column": "head_service"}, "fail", True,
        meta={"dimension": "completeness"}, element_count=8, unexpected_count=0, unexpected_percent=0.0, threshold="no nulls",
    )  # fmt: skip
    failing = ExpectationResult(
        "slow", "step", "expect_column_values_to_be_between", {"column": "response_ms", "max_value": 60}, "fail", False,
        element_count=8, unexpected_count=3, unexpected_percent=37.5, threshold="response_ms ≤ 60",
        failing_samples=[{"head_service": f"/p{i % 3}.html", "response_ms": 10 * i} for i in (7, 8, 9)],
    )  # fmt: skip
    record(store, str(warehouse / QUALITY_TABLE), [passing, failing], run_id, "calls")
    metrics = IntegrationMetrics(
        tuples=114, instances=10, units=12, completeness={1.0: 0.8, 0.85: 0.9, 0.75: 1.0}, partial_completeness=0.93,
        recall=0.97, correct_rate=0.88, windows_open_max=4, windows_open_mean=1.75, tuples_held_max=30, tuples_held_mean=11.2,
    )  # fmt: skip
    record_integration(
        store, str(warehouse / INTEGRATION_TABLE), [StepEvaluation("slow", "swa", "page", 12, 5.0, metrics)], run_id, "calls"
    )
    return project, run_id


def test_report_of_a_real_run_renders_offline_in_chromium(ran, tmp_path: Path):
    project, run_id = ran
    page = tmp_path / "report.html"
    code, out, err = tributary(project, "report", "--run", run_id, "--out", str(page))
    assert code == 0, err
    assert str(page) in out
    html = page.read_text(encoding="utf-8")
    _assert_self_contained(html)

    screenshot = tmp_path / "report.png"
    _chromium(tmp_path, f"--screenshot={screenshot}", "--window-size=1280,2000", page.as_uri())
    pixels = _png_pixels(screenshot)
    assert pixels.shape == (2000, 1280, 3)
    red, green, blue = pixels.reshape(-1, 3).astype(int).T
    assert len(np.unique(red * 65536 + green * 256 + blue)) > 200, "the screenshot is (almost) one colour"
    assert ((green > red + 60) & (green > blue + 30)).sum() > 500, "no green (ok/pass) badges in the screenshot"
    assert ((red > green + 80) & (red > blue + 60)).sum() > 200, "no red (failing) marks in the screenshot"

    dom = _chromium(tmp_path, "--dump-dom", page.as_uri())
    sections = _sections(dom)
    assert {"summary", "steps", "outputs", "quality", "integration", "quarantine", "graph"} <= set(sections)
    assert run_id in dom and "delta-rs" in dom and "local" in dom
    steps = sections["steps"]
    assert "slow" in steps and "per_page" in steps and ">8<" in steps and ">3<" in steps
    outputs = sections["outputs"]
    assert "per_page" in outputs and "overwrite" in outputs and "append" in outputs
    assert "_quarantine" in outputs and "internal" in outputs
    quality = sections["quality"]
    assert "expect_column_values_to_be_between" in quality and "expect_column_values_to_not_be_null" in quality
    assert "column=response_ms, max_value=60" in quality and "37.50 %" in quality
    assert quality.count("badge pass") == 1 and quality.count("badge fail") == 1
    assert "Failing samples" in quality and "/p1.html" in quality and ">90<" in quality  # the samples as a table
    assert "Completeness (γ = 0.85)" in sections["integration"] and "90.00 %" in sections["integration"]
    quarantine = sections["quarantine"]
    assert "malformed json record" in quarantine and "this is not json" in quarantine
    graph = sections["graph"]
    assert "<svg" in graph and ">per_page<" in graph and "Delta output" in graph


def test_latest_run_by_default_into_the_reports_folder(ran):
    project, run_id = ran
    code, out, err = tributary(project, "report", "calls")
    assert code == 0, err
    page = project / "reports" / f"calls-{run_id}.html"
    assert page.is_file() and str(page) in out
    assert "no expectations declared" not in page.read_text().lower()


def test_unknown_run_id_exits_2_and_lists_recent_runs(ran):
    project, run_id = ran
    code, _, err = tributary(project, "report", "--run", "20990101T000000-abcdef")
    assert code == 2
    assert "no run '20990101T000000-abcdef'" in err and run_id in err  # the hint lists the recent runs


def test_a_pipeline_that_no_longer_compiles_gets_a_note_not_a_failure(ran, tmp_path: Path):
    project, run_id = ran
    copy = tmp_path / "copy"
    shutil.copytree(project, copy)
    write(copy / "pipelines" / "calls.yaml", PIPELINE.replace("ref('slow')", "ref('slowest')"))
    page = tmp_path / "broken.html"
    code, _, err = tributary(copy, "report", "--run", run_id, "--out", str(page))
    assert code == 0, err
    graph = _sections(page.read_text())["graph"]
    assert "does not compile now" in graph and "slowest" in graph and "<svg" not in graph


def test_a_var_the_pipeline_has_not_is_bad_input_not_a_page_without_its_graph(ran, tmp_path: Path):
    project, run_id = ran
    page = tmp_path / "typo.html"
    code, _, err = tributary(project, "report", "--run", run_id, "--var", "min_cals=5", "--out", str(page))
    assert code == 2
    assert "--var min_cals: this pipeline has no var 'min_cals'" in err
    assert not page.exists()


def test_out_never_replaces_a_table_file_or_a_file_of_another_kind(ran, tmp_path: Path):
    """A report written over a table's commit file made the table unreadable; over a pipeline, the
    pipeline was gone. Both exit 0 before."""
    project, run_id = ran
    commit = project / "warehouse" / "slow" / "_delta_log" / "00000000000000000000.json"
    pipeline = project / "pipelines" / "calls.yaml"
    kept = {path: path.read_bytes() for path in (commit, pipeline)}
    for path, said in ((commit, "is inside the warehouse"), (pipeline, "is a file of another kind")):
        code, _, err = tributary(project, "report", "--run", run_id, "--out", str(path))
        assert code == 2 and said in err, err
        assert path.read_bytes() == kept[path]
    assert len(delta_rows(project / "warehouse" / "slow")) > 0
    page = tmp_path / "again.html"  # a report is replaced by the next
    for _ in range(2):
        code, _, err = tributary(project, "report", "--run", run_id, "--out", str(page))
        assert code == 0, err


def test_no_runs_yet_exits_2_with_a_hint(tmp_path: Path):
    code, _, err = tributary(new_project(tmp_path), "report")
    assert code == 2 and "no runs yet" in err and "run a pipeline first" in err


def test_a_run_without_expectations_says_so(ran, tmp_path: Path):
    from framework.profiles import Profile
    from framework.project import Project
    from framework.project_context import ProjectContext
    from framework.reporting import gather_run, render_html

    project, run_id = ran
    report = gather_run(ProjectContext(Project(project), Profile()), run_id=run_id)
    report.quality = []
    assert "No expectations declared" in _sections(render_html(report))["quality"]


FLIGHTS = """\
name: flights
sources:
  raw:
    format: json
    path: incoming
    schema: id BIGINT, carrier STRING, air_time INT
steps:
  flights:
    sql: select id, carrier, air_time from {{ source('raw') }}
    expectations:
      - expect_column_values_to_be_between: {column: air_time, min_value: 20, max_value: 700}
        severity: drop
      - expect_column_values_to_not_be_null: {column: carrier}
        severity: drop
outputs:
  flights: {mode: append}
"""


@pytest.fixture(scope="module")
def reran(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A run that quarantines 240 rows (200 distinct air_time values, 40 without a carrier), then an
    identical rerun (every output skipped: unchanged)."""
    project = tmp_path_factory.mktemp("reran")
    write(
        project / "configs" / "local.yaml",
        "spark:\n  master: local[2]\n  conf:\n    spark.sql.shuffle.partitions: 2\nwarehouse: ./warehouse\n",
    )
    write(project / "pipelines" / "flights.yaml", FLIGHTS)
    rows = [{"id": i, "carrier": "UA", "air_time": 100 + i} for i in range(100)]
    rows += [{"id": 1000 + i, "carrier": "AA", "air_time": 701 + i} for i in range(200)]  # 200 distinct values too long
    rows += [{"id": 2000 + i, "carrier": None, "air_time": 50} for i in range(40)]
    write(project / "incoming" / "a.json", "".join(json.dumps(r) + "\n" for r in rows))
    for _ in range(2):
        code, out, err = tributary(project, "run", "flights")
        assert code == 0, out + err
    starts = [e for e in delta_rows(project / "warehouse" / "_tributary" / "events") if e["event"] == "run_start"]
    first, rerun = (e["run_id"] for e in sorted(starts, key=lambda e: e["ts"]))
    return project, first, rerun


def test_a_run_that_changed_nothing_says_so_and_names_the_run_that_wrote_the_data(reran, tmp_path: Path):
    project, first, rerun = reran
    page = tmp_path / "rerun.html"
    code, out, err = tributary(project, "report", "flights", "--run", rerun, "--out", str(page))
    assert code == 0, out + err
    html = page.read_text(encoding="utf-8")
    summary = _sections(html)["summary"]
    assert "changed nothing" in summary and first in summary  # names the run whose commit holds the data
    assert f"tributary report flights --run {first}" in summary
    cards = html.split("<div class='cards'>")[1].split("<nav>")[0]
    assert "Quarantined" in cards and ">240<" not in cards and ">0<" in cards
    quality = _sections(html)["quality"]
    assert re.search(r">200\b", quality)  # the checks' counts are the data's (200 unexpected) ...
    assert "written by run" in quality and first in quality  # ... and what they quarantined is the first run's


def test_report_without_run_takes_the_latest_run_that_wrote_data_and_says_so(reran):
    project, first, rerun = reran
    code, out, err = tributary(project, "report", "flights")
    assert code == 0, out + err
    assert (project / "reports" / f"flights-{first}.html").is_file()
    assert not (project / "reports" / f"flights-{rerun}.html").exists()
    assert f"the latest run that wrote data: {first}" in err and "1 later run changed nothing" in err
    assert out.strip().endswith(f"flights-{first}.html") and len(out.strip().splitlines()) == 1  # stdout: the file alone


def test_the_report_groups_the_quarantine_by_reason_with_counts_and_sample_values(reran, tmp_path: Path):
    project, first, _ = reran
    page = tmp_path / "first.html"
    code, out, err = tributary(project, "report", "flights", "--run", first, "--out", str(page))
    assert code == 0, out + err
    quarantine = _sections(page.read_text(encoding="utf-8"))["quarantine"]
    between = "expect_column_values_to_be_between(column=air_time, min_value=20, max_value=700)"
    assert quarantine.count(between) <= 3  # one group (its line and its samples' caption), not one per value
    assert ">200<" in quarantine and ">40<" in quarantine  # each reason's count
    values = re.findall(r"air_time=(\d+)", quarantine)
    assert 1 <= len(set(values)) <= 10  # a few sample values, not 200
    assert "carrier=null" in quarantine


# -- helpers -----------------------------------------------------------------------------------


def _assert_self_contained(html: str) -> None:
    """Nothing to fetch: no scripts, stylesheets, fonts or images, no network addresses but the SVG namespace."""
    addresses = set(re.findall(r"https?://[^\s\"'<>)]*", html))
    assert addresses <= {"http://www.w3.org/2000/svg"}, addresses
    assert "<script" not in html.lower() and "@import" not in html and "@font-face" not in html
    assert not re.search(r"\ssrc\s*=", html, re.IGNORECASE)
    assert all(u.startswith("url(#") for u in re.findall(r"url\([^)]*\)", html)), "only in-page url(#id) references"
    assert all("href='data:" in link or 'href="data:' in link for link in re.findall(r"<link[^>]*>", html))


def _chromium(tmp_path: Path, *args: str) -> str:
    if not CHROMIUM.is_file():
        pytest.fail(
            f"chromium is missing ({CHROMIUM}): `./bootstrap.sh test` installs it as root with apt-get, "
            "or run: apt-get install -y chromium"
        )
    profile = tmp_path / "chromium-profile"
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _sections(dom: str) -> dict[str, str]:
    """Each <section>'s markup by its id (the page quotes attributes with ', Chromium's DOM dump with ")."""
    return {m[1]: m[2] for m in re.finditer(r"<section id=[\"']([\w-]+)[\"'](.*?)</section>", dom, re.DOTALL)}


def _png_pixels(path: Path) -> np.ndarray:
    """An 8-bit RGB(A), non-interlaced PNG (what Chromium writes) as a height × width × 3 array."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, chunks, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    assert header is not None, "no IHDR"
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    raw = zlib.decompress(b"".join(chunks))
    image = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=y * (stride + 1) + 1)
        if kind == 0:  # None
            image[y] = line
        elif kind == 1:  # Sub: a running sum per channel along the row
            image[y] = (np.cumsum(line.reshape(width, bpp), axis=0, dtype=np.uint64) % 256).reshape(stride)
        elif kind == 2:  # Up
            image[y] = line + prev
        else:  # Average, Paeth: each byte needs the one just decoded to its left
            image[y] = np.frombuffer(_unfilter_left(kind, bytearray(line.tobytes()), prev.tobytes(), bpp), dtype=np.uint8)
        prev = image[y]
    return image.reshape(height, width, bpp)[:, :, :3]


def _unfilter_left(kind: int, cur: bytearray, up: bytes, bpp: int) -> bytes:
    for i in range(len(cur)):
        a = cur[i - bpp] if i >= bpp else 0
        b = up[i]
        if kind == 3:
            cur[i] = (cur[i] + ((a + b) >> 1)) & 0xFF
        else:
            c = up[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
    return bytes(cur)
