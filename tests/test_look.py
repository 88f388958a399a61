"""Looking at tables without a JVM: `tributary show`, `history` and `query` on real Delta tables
(written here with delta-rs; tests/test_try.py looks at tables a Spark run wrote)."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

STATS = pa.schema([("requested_service", pa.string()), ("calls", pa.int64()), ("day", pa.date32())])


def stats(rows: list[tuple[str, int]], day: date = date(2026, 11, 2)) -> pa.Table:
    return pa.table(
        {"requested_service": [r[0] for r in rows], "calls": [r[1] for r in rows], "day": [day] * len(rows)}, schema=STATS
    )


def commit(table: Path, rows: pa.Table, mode: str = "append", run_id: str | None = None, **kwargs) -> None:
    meta = {"tributary.run_id": run_id} if run_id else None
    write_deltalake(str(table), rows, mode=mode, commit_properties=CommitProperties(custom_metadata=meta), **kwargs)


@pytest.fixture
def warehouse(project: Path) -> Path:
    """The example project with service_stats (two versions) and daily_head_stats written."""
    root = project / "warehouse"
    commit(root / "service_stats", stats([("/index.html", 285), ("/shop.html", 155), ("/about.html", 60)]), run_id="run-1")
    commit(root / "service_stats", stats([("/index.html", 300), ("/news.html", 100)]), mode="overwrite", run_id="run-2")
    daily = pa.table(
        {"day": [date(2026, 11, 2), date(2026, 11, 3)], "head_service": ["/index.html", "/shop.html"], "clients": [211, 131]}
    )
    commit(root / "daily_head_stats", daily, partition_by=["day"], run_id="run-2")
    return root


def test_show_reads_an_output_by_its_name_now_and_at_an_older_version(cli, warehouse):
    code, out, err = cli("show", "service_stats")
    assert code == 0, err
    assert "service_stats · output of pipeline service_calls · version 1" in out
    assert "/news.html" in out and "/shop.html" not in out and "2 rows" in out

    code, out, err = cli("show", "service_stats", "--version", "0", "--limit", "2")
    assert code == 0, err
    assert "version 0" in out and "/index.html" in out and "/shop.html" in out and "/about.html" not in out
    assert "first 2 of 3 rows" in out

    first = DeltaTable(str(warehouse / "service_stats")).history()[-1]["timestamp"]
    at = datetime.fromtimestamp(first / 1000 + 0.001, UTC).isoformat()
    code, out, err = cli("show", "service_stats", "--timestamp", at)
    assert code == 0, err
    assert "version 0" in out and "/about.html" in out


def test_show_of_an_older_version_says_when_that_version_was_committed(cli, warehouse):
    """delta-rs numbers the history of a table loaded at an older version from that version down:
    `show --version 0` said the latest commit's time."""
    import time

    table = warehouse / "service_stats"
    time.sleep(1.1)  # a third version, a second or more after the first
    commit(table, stats([("/later.html", 1)]), run_id="run-3")
    first = DeltaTable(str(table)).history()[-1]
    said = datetime.fromtimestamp(first["timestamp"] / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    code, out, err = cli("show", "service_stats", "--version", "0")
    assert code == 0, err
    assert f"version 0, committed {said} UTC" in out, out


def test_show_names_the_mistake_and_exits_2(cli, warehouse):
    code, out, err = cli("show", "servce_stats")
    assert code == 2 and "no table 'servce_stats'" in err and "did you mean 'service_stats'?" in err
    assert "Traceback" not in err + out

    for pipeline in ("visits_a", "visits_b"):  # two pipelines have an output of that name, neither table has it
        (warehouse.parent / f"pipelines/{pipeline}.yaml").write_text(
            f"name: {pipeline}\noutputs:\n  visits: {{name: {pipeline}}}\n"
        )
    code, out, err = cli("show", "visits")
    assert code == 2 and "visits_a.visits or visits_b.visits" in err, err

    code, out, err = cli("show", "service_stats", "--version", "7")
    assert code == 2 and "no version 7" in err and "0 to 1" in err

    code, out, err = cli("show", "service_stats", "--version", "0", "--timestamp", "2026-01-01")
    assert code == 2 and "give one" in err

    code, out, err = cli("show", "service_stats", "--timestamp", "yesterday")
    assert code == 2 and "ISO 8601" in err

    code, out, err = cli("show", "service_stats", "--timestamp", "2001-01-01")
    assert code == 2 and "no version at 2001-01-01" in err

    code, out, err = cli("show", "instances")  # an output no run has written yet
    assert code == 2 and "has no Delta table yet" in err and "tributary run service_instances" in err

    code, out, err = cli("show", "no/such/folder")
    assert code == 2 and "no Delta table at" in err


def test_show_accepts_pipeline_output_tributary_tables_and_folders(cli, warehouse):
    code, out, err = cli("show", "service_calls.service_stats")
    assert code == 0 and "/news.html" in out, err
    code, out, err = cli("show", "warehouse/daily_head_stats")
    assert code == 0 and "a Delta table folder" in out and "2026-11-03" in out, err

    quarantine = pa.table({"file": ["a.json"], "line": [3], "record": ["{bad"], "reason": ["malformed json record"]})
    commit(warehouse / "_tributary" / "quarantine", quarantine)
    for name in ("quarantine", "_tributary.quarantine"):
        code, out, err = cli("show", name)
        assert code == 0, err
        assert "Tributary's quarantine table" in out and "malformed json record" in out
    code, out, err = cli("show", "quality")
    assert code == 2 and "Tributary creates it" in err


def test_partitioned_tables_show_their_partition_values(cli, warehouse):
    code, out, err = cli("show", "daily_head_stats", "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert sorted(rows, key=lambda r: r["day"]) == [
        {"head_service": "/index.html", "clients": 211, "day": "2026-11-02"},
        {"head_service": "/shop.html", "clients": 131, "day": "2026-11-03"},
    ]


def test_where_filters_with_sql_and_cannot_reach_files(cli, warehouse, tmp_path):
    code, out, err = cli(
        "show", "service_stats", "--version", "0", "--where", "calls > 100 and requested_service like '/%'", "--csv"
    )
    assert code == 0, err
    assert sorted(r["requested_service"] for r in csv.DictReader(io.StringIO(out))) == ["/index.html", "/shop.html"]

    code, out, err = cli("show", "service_stats", "--where", "nosuch > 1")
    assert code == 2 and 'Referenced column "nosuch" not found' in err and "Traceback" not in err + out

    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    code, out, err = cli("show", "service_stats", "--where", f"calls in (select a from read_csv('{secret}'))")
    assert code == 2 and "Permission Error" in err and "no files" in err

    code, out, err = cli("show", "service_stats", "--where", f"true); copy (select 1) to '{tmp_path / 'out.csv'}'; select (1")
    assert code == 2 and "statements" in err
    assert not (tmp_path / "out.csv").exists()


def test_query_joins_outputs_by_name_and_refuses_anything_but_a_select(cli, warehouse, tmp_path):
    sql = (
        "select s.requested_service, s.calls, d.clients from service_stats s "
        "join daily_head_stats d on d.head_service = s.requested_service order by s.calls desc"
    )
    code, out, err = cli("query", sql, "--json")
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == [{"requested_service": "/index.html", "calls": 300, "clients": 211}]

    target = tmp_path / "written.csv"
    for statement, message in [
        (f"copy (select * from service_stats) to '{target}'", "COPY statement"),
        (f"attach '{tmp_path / 'x.duckdb'}'", "ATTACH statement"),
        ("select * from read_parquet('warehouse/service_stats/*.parquet')", "Permission Error"),
        ("set enable_external_access = true", "SET statement"),
        ("select 1; select 2", "2 statements"),
        ("select * from service_stats where", "syntax error"),
        ("select * from servce_stats", "did you mean 'service_stats'?"),
    ]:
        code, out, err = cli("query", statement)
        assert code == 2, (statement, out, err)
        assert message in err, (statement, err)
        assert "Traceback" not in err + out
    assert not target.exists() and not (tmp_path / "x.duckdb").exists()

    code, out, err = cli("query", "with t as (select * from service_stats) select count(*) as n from t, range(2)", "--csv")
    assert code == 0 and out.splitlines() == ['"n"', "4"], err


def test_a_query_that_runs_too_long_is_stopped(cli, warehouse):
    code, out, err = cli("query", "select count(*) from range(1000000000000)", "--timeout", "0.5")
    assert code == 2 and "longer than 0.5 s" in err


def test_history_lists_versions_runs_and_rows_from_the_log(cli, warehouse):
    table = DeltaTable(str(warehouse / "service_stats"))
    table.merge(
        stats([("/index.html", 310), ("/cart.html", 7)]),
        predicate="t.requested_service = s.requested_service",
        source_alias="s",
        target_alias="t",
        commit_properties=CommitProperties(custom_metadata={"tributary.run_id": "run-3"}),
    ).when_matched_update_all().when_not_matched_insert_all().execute()

    code, out, err = cli("history", "service_stats", "--json")
    assert code == 0, err
    versions = [json.loads(line) for line in out.splitlines()]
    assert [v["version"] for v in versions] == [2, 1, 0]
    assert [v["run_id"] for v in versions] == ["run-3", "run-2", "run-1"]
    merge, overwrite, create = versions
    assert merge["operation"] == "MERGE" and (merge["rows_added"], merge["rows_updated"], merge["rows"]) == (1, 1, 3)
    assert overwrite["operation"] == "WRITE (overwrite)"
    assert (overwrite["rows_added"], overwrite["rows_removed"], overwrite["rows"]) == (2, 3, 2)
    assert (create["rows_added"], create["rows_removed"], create["rows"]) == (3, 0, 3)

    code, out, err = cli("history", "service_stats", "--limit", "1")
    assert code == 0 and "run-3" in out and "run-2" not in out and "1 of 3 versions" in out, err


def test_history_counts_rows_of_commits_that_add_staged_files_without_metrics(cli, warehouse):
    """Tributary commits Parquet files Spark staged as add actions; such commits record no
    operation metrics, and the rows come from replaying the log."""
    import pyarrow.parquet as pq
    from deltalake import Schema, Transaction
    from deltalake.transaction import AddAction, create_table_with_add_actions

    folder = warehouse / "staged_table"
    folder.mkdir()
    pq.write_table(stats([("/a", 1), ("/b", 2)]), folder / "part-0.parquet")
    size = (folder / "part-0.parquet").stat().st_size
    create_table_with_add_actions(
        str(folder),
        Schema.from_arrow(STATS),
        [AddAction("part-0.parquet", size, {}, 0, True, json.dumps({"numRecords": 2}))],
        mode="error",
        commit_properties=CommitProperties(app_transactions=[Transaction("app", 0)], custom_metadata={"tributary.run_id": "r"}),
    )
    code, out, err = cli("history", "staged_table", "--json")
    assert code == 0, err
    (version,) = [json.loads(line) for line in out.splitlines()]
    assert (version["operation"], version["run_id"], version["rows_added"], version["rows"]) == ("CREATE TABLE", "r", 2, 2)


def test_scratch_names_the_tables_run_limit_wrote(cli, warehouse, project):
    code, out, err = cli("show", "service_stats", "--scratch")
    assert code == 2 and "tributary run service_calls --limit" in err
    commit(project / ".tributary" / "scratch" / "service_stats", stats([("/tried.html", 1)]))
    code, out, err = cli("show", "service_stats", "--scratch")
    assert code == 0 and "/tried.html" in out and "scratch" in out, err


VALUES = st.one_of(st.none(), st.integers(-(2**40), 2**40))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(
        st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), VALUES), min_size=0, max_size=6), min_size=1, max_size=4
    ),
    widen=st.booleans(),
    limit=st.integers(0, 30),
)
def test_first_rows_read_file_by_file_are_the_tables_rows(tmp_path_factory, batches, widen, limit):
    """Reading the files directly (the fast path of `show`) gives what delta-rs' own scan gives:
    the same rows, partition values filled in, columns added later null in older files."""
    from framework.look.delta_tables import _delta_scan, rows

    location = tmp_path_factory.mktemp("t") / "table"
    for i, batch in enumerate(batches):
        data = {"part": [k for k, _ in batch], "n": pa.array([v for _, v in batch], pa.int64())}
        if widen and i > 0:
            data["added"] = pa.array([f"x{i}"] * len(batch), pa.string())
        write_deltalake(str(location), pa.table(data), mode="append", partition_by=["part"], schema_mode="merge")
    table = DeltaTable(str(location))
    everything = rows(table, str(location))
    scanned = _delta_scan(table, None)
    key = lambda r: json.dumps(r, sort_keys=True, default=str)  # noqa: E731
    assert everything.schema == scanned.schema
    assert sorted(map(key, everything.to_pylist())) == sorted(map(key, scanned.to_pylist()))
    first = rows(table, str(location), limit)
    assert first.num_rows == min(limit, everything.num_rows)
    assert first.to_pylist() == everything.slice(0, limit).to_pylist()


@settings(max_examples=60, deadline=None)
@given(
    seconds=st.lists(st.one_of(st.none(), st.integers(-(2**34), 2**34)), max_size=8),  # years 1426 to 2514
    fraction=st.integers(0, 999_999),
    unit=st.sampled_from(["s", "ms", "us"]),
    zone=st.sampled_from(["UTC", "Europe/Paris", "America/New_York", "+02:00"]),
)
def test_rows_for_the_terminal_equal_pyarrows_own_conversion(seconds, fraction, unit, zone):
    """display.python_rows converts zoned timestamps itself (pyarrow's conversion imports pandas)."""
    from framework.display import python_rows

    scale = {"s": 1, "ms": 1_000, "us": 1_000_000}[unit]
    ticks = [None if s is None else s * scale + fraction % scale for s in seconds]
    column = pa.chunked_array([pa.array(ticks, pa.int64()).cast(pa.timestamp(unit, tz=zone))])
    table = pa.table({"at": column, "n": list(range(len(ticks)))})
    assert python_rows(table) == [tuple(r.values()) for r in table.to_pylist()]


def test_the_timeout_stops_any_expression_even_one_duckdb_cannot_interrupt(cli, warehouse):
    """DuckDB checks for an interrupt between vectors; a global regex replace over one 100 MB string
    runs on in one call (54 s here). The query runs in a child process the command kills at the deadline."""
    import time

    started = time.perf_counter()
    code, out, err = cli("query", "select regexp_replace(repeat('a', 100000000), 'a', 'b', 'g') as r", "--timeout", "1")
    assert code == 2 and "the query ran longer than 1 s and was stopped" in err and "hint:" in err, (out[:200], err)
    assert time.perf_counter() - started < 8


def test_the_memory_limit_holds_for_values_duckdb_does_not_count(cli, warehouse):
    """repeat('x', 1.5e9) grew to 3 GB under DuckDB's memory_limit of 2 GB: the child process has
    an address-space limit of its own."""
    code, out, err = cli("query", "select length(repeat('x', 1500000000)) as n", "--timeout", "120")
    assert code == 2 and "needs more memory than its limit (2 GB)" in err and "Traceback" not in err, (out[:200], err)


ESCAPES = "\x1b]0;pwned\x07\x1b[2J[bold]shout[/bold]\tnext\nline\x9b"


def _hostile(warehouse: Path) -> None:
    commit(warehouse / "service_stats", stats([(ESCAPES, 1)]), mode="overwrite", run_id="run-3")


def test_control_characters_in_the_data_are_shown_escaped(cli, warehouse):
    _hostile(warehouse)
    for command in (("show", "service_stats"), ("query", "select requested_service from service_stats")):
        code, out, err = cli(*command)
        assert code == 0, err
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out, command
        assert "\\x1b]0;pwned\\x07\\x1b[2J[bold]shout[/bold]\\tnext\\nline\\x9b" in out.replace("│", "").replace(" ", ""), out
    code, out, err = cli("show", "service_stats", "--where", "requested_service like '%pwned%'", "--limit", "5")
    assert code == 0 and "\x1b" not in out and "\\x1b]0;pwned" in out, err


def test_machine_formats_keep_the_data_exact(cli, warehouse):
    _hostile(warehouse)
    code, out, err = cli("query", "select requested_service from service_stats", "--json")
    assert code == 0 and json.loads(out)["requested_service"] == ESCAPES, err
    assert "\x1b" not in out  # JSON escapes control characters itself
    code, out, err = cli("show", "service_stats", "--csv")
    assert code == 0 and next(csv.DictReader(io.StringIO(out)))["requested_service"] == ESCAPES, err


def test_an_error_message_quoting_the_data_is_escaped_too(cli, warehouse):
    _hostile(warehouse)
    code, out, err = cli("query", "select cast(requested_service as int) from service_stats")
    assert code == 2 and "\x1b" not in err and "\\x1b" in err, err


def test_the_run_summary_and_progress_print_user_text_literally():
    """A table path, a scratch folder or a run's detail holding escapes or rich markup is printed
    as text: escaped, never interpreted (framework.display, used by run and watch)."""
    from rich.console import Console

    from framework.display import LiveProgress, run_summary
    from framework.engine.results import OutputResult, OutputStatus, RunResult, RunStatus, StepResult

    hostile = "/w/[bold]x[/bold]\x1b[2J\x1b]0;t\x07"
    result = RunResult("r1", "p", RunStatus.OK, steps=[StepResult("s", "sql")], limit=5, scratch=hostile)
    result.outputs = [OutputResult("o", "s", hostile, "append", OutputStatus.WRITTEN, rows=1, version=0)]
    console = Console(record=True, width=400, force_terminal=True, color_system=None)
    console.print(run_summary(result))
    with LiveProgress(Console(file=io.StringIO(), width=400)) as progress:
        progress.update("step", "s", "running", hostile)
        progress.console.file.seek(0)
        lines = progress.console.file.read()
    for text in (console.export_text(), lines):
        assert "\x1b" not in text and "\x07" not in text
        assert "/w/[bold]x[/bold]\\x1b[2J\\x1b]0;t\\x07" in text


def test_intervals_print_as_durations_and_exactly_in_machine_formats(cli, warehouse):
    """An INTERVAL read through Arrow (month_day_nano) is a duration to an analyst, not pyarrow's
    MonthDayNano(...); --json and --csv give it exactly, as an ISO 8601 duration."""
    sql = "select interval 90 minute as d, interval '1 month 2 days 3 seconds' as m, cast(null as interval) as n"
    code, out, err = cli("query", sql)
    assert code == 0, err
    assert "MonthDayNano" not in out and "1 h 30 min" in out and "1 month 2 days 3 s" in out, out
    code, out, err = cli("query", sql, "--json")
    assert code == 0 and json.loads(out) == {"d": "PT1H30M", "m": "P1M2DT3S", "n": None}, out
    code, out, err = cli("query", sql, "--csv")
    assert code == 0, err
    assert next(csv.DictReader(io.StringIO(out))) == {"d": "PT1H30M", "m": "P1M2DT3S", "n": ""}, out


def test_query_resolves_a_name_only_one_table_has(cli, warehouse):
    """`page_views` is an output of access_log (table page_views) and of access_log_streaming
    (table page_views_streaming): only one table has the name, so it is not ambiguous."""
    commit(warehouse / "page_views", pa.table({"views": [1, 2]}))
    commit(warehouse / "page_views_streaming", pa.table({"views": [3]}))
    code, out, err = cli("query", "select sum(views) as total from page_views")
    assert code == 0, err
    assert "page_views (output of pipeline access_log)" in out and "│ 3 " in out, out
    code, out, err = cli("show", "page_views")
    assert code == 0 and "page_views · output of pipeline access_log ·" in out, err
    code, out, err = cli("show", "access_log_streaming.page_views")
    assert code == 0 and "│ 3 " in out, err


def test_wide_previews_keep_their_headers_readable():
    """A table wider than the terminal keeps each header on one line: the columns that fit are
    shown, and the caption says how many were left out and which."""
    from rich.console import Console

    from framework.display import arrow_table

    names = [f"column_number_{i:02d}" for i in range(14)]
    table = pa.table({name: [f"value {i}"] for i, name in enumerate(names)})
    console = Console(record=True, width=80, force_terminal=True, color_system=None)
    console.print(arrow_table("wide", table))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    header = next(line for line in text.splitlines() if "column_number_00" in line)
    shown = [n for n in names if n in header]
    assert shown == names[: len(shown)] and len(shown) >= 2, text
    left = names[len(shown) :]
    assert left and f"{len(left)} more columns not shown: {', '.join(left)}" in " ".join(text.split()), text
    narrow = Console(record=True, width=200, force_terminal=True, color_system=None)
    narrow.print(arrow_table("wide", table.select(names[:3])))
    assert "not shown" not in narrow.export_text()


def test_a_rerun_that_changed_nothing_prints_no_empty_steps_table():
    from rich.console import Console

    from framework.display import run_summary
    from framework.engine.results import OutputResult, OutputStatus, RunResult, RunStatus, StepResult, StepStatus

    steps = [StepResult("all_calls", "union", StepStatus.PLANNED), StepResult("service_stats", "sql", StepStatus.PLANNED)]
    result = RunResult("r2", "service_calls", RunStatus.OK, steps=steps)
    result.outputs = [OutputResult("service_stats", "service_stats", "/w/s", "overwrite", OutputStatus.SKIPPED, written_by="r1")]
    console = Console(record=True, width=200, force_terminal=True, color_system=None)
    console.print(run_summary(result))
    text = console.export_text()
    assert "skipped: unchanged, already written by run r1" in text
    assert "steps" not in text.splitlines()[0] and "all_calls" not in text, text
    result.steps[0].status, result.steps[0].rows = StepStatus.OK, 5
    console = Console(record=True, width=200, force_terminal=True, color_system=None)
    console.print(run_summary(result))
    assert "all_calls" in console.export_text()


def test_durations_read_exactly_from_every_arrow_interval_type():
    from framework.display import csv_text, json_lines, python_rows

    table = pa.table(
        {
            "dur": pa.array([5_400_000_000, -1_500_000, None], pa.duration("us")),
            "mdn": pa.array([(14, 1, 0), (0, 0, -61_000_000_000), (0, 0, 0)], pa.month_day_nano_interval()),
        }
    )
    assert [tuple(map(str, row)) for row in python_rows(table)] == [
        ("1 h 30 min", "1 year 2 months 1 day"),
        ("-1.5 s", "-1 min 1 s"),
        ("None", "0 s"),
    ]
    assert [json.loads(line) for line in json_lines(table).splitlines()] == [
        {"dur": "PT1H30M", "mdn": "P1Y2M1D"},
        {"dur": "PT-1.5S", "mdn": "PT-1M-1S"},
        {"dur": None, "mdn": "PT0S"},
    ]
    assert csv_text(table).splitlines()[1:] == ['"PT1H30M","P1Y2M1D"', '"PT-1.5S","PT-1M-1S"', ',"PT0S"']


def test_the_quarantine_reads_per_run_without_a_hand_written_filter(cli, warehouse):
    def quarantined(run_id: str, reasons: list[str], at: datetime) -> pa.Table:
        n = len(reasons)
        return pa.table(
            {
                "run_id": [run_id] * n,
                "pipeline": ["orders"] * n,
                "source": ["orders"] * n,
                "record": [json.dumps({"id": i}) for i in range(n)],
                "reason": reasons,
                "quarantined_at": pa.array([at] * n, pa.timestamp("us", tz="UTC")),
            }
        )

    table = warehouse / "_tributary" / "quarantine"
    commit(table, quarantined("20261102T080000-aaaaaa", ["no customer"] * 3, datetime(2026, 11, 2, 8, tzinfo=UTC)))
    commit(table, quarantined("20261102T090000-bbbbbb", ["no customer"] * 2, datetime(2026, 11, 2, 9, tzinfo=UTC)))

    code, out, err = cli("show", "quarantine", "--run", "20261102T080000-aaaaaa", "--limit", "2")
    assert code == 0, err
    assert "run 20261102T080000-aaaaaa" in out and "first 2 of 3 rows" in out and "bbbbbb" not in out.split("\n", 1)[1]
    code, out, err = cli("show", "quarantine", "--latest", "--json")
    assert code == 0, err
    assert [json.loads(line)["run_id"] for line in out.splitlines()] == ["20261102T090000-bbbbbb"] * 2
    code, out, err = cli("show", "quarantine", "--run", "20990101T000000-cccccc")
    assert code == 0, err
    assert "0 rows" in out and "runs with rows here: 20261102T090000-bbbbbb, 20261102T080000-aaaaaa" in out
    code, _, err = cli("show", "service_stats", "--run", "20261102T080000-aaaaaa")
    assert code == 2 and "--run" in err and "tributary history service_stats" in err


def test_a_table_with_a_missing_or_damaged_data_file_is_bad_input_not_a_crash(cli, warehouse):
    table = warehouse / "service_stats"
    files = sorted(table.glob("*.parquet"))
    current = [f for f in files if f.name in DeltaTable(str(table)).file_uris()[0]] or files
    current[0].write_bytes(current[0].read_bytes()[:100])  # truncated
    for args in (("show", "service_stats"), ("query", "select count(*) from service_stats")):
        code, out, err = cli(*args)
        assert code == 2, (args, out, err)
        assert "cannot be read" in err and "Traceback" not in err + out
    current[0].unlink()  # gone
    code, out, err = cli("show", "service_stats")
    assert code == 2 and "cannot be read" in err, err


def test_a_query_nested_too_deeply_is_bad_input(cli, warehouse):
    code, out, err = cli("query", "select " + "(" * 300 + "1" + ")" * 300 + " as x")
    assert code == 2 and "nests too deeply" in err and "Traceback" not in err, err
    code, out, err = cli("show", "service_stats", "--where", "(" * 3000 + "calls > 0" + ")" * 3000)
    assert code == 2 and "max_expression_depth" not in err and "nest it less deeply" in err, err


def test_a_reader_that_goes_away_ends_the_command_quietly(warehouse):
    """`tributary query ... | head` exited 1, the code of a failed run."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "framework", "query", "select range as n from range(20000)", "--limit", "20000"]
    reading = subprocess.Popen(command, cwd=warehouse.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert reading.stdout is not None and reading.stdout.readline().startswith(b"query over no tables")
    reading.stdout.close()  # as `head -1` does
    _, err = reading.communicate(timeout=120)
    assert reading.returncode == 141, err
    assert b"Traceback" not in err and b"run failed" not in err and b"Exception ignored" not in err, err
