"""Scheduled intervals that can be trusted: each run reads its interval's input (a templated
source path) and replaces its interval's rows (an interval-sliced output), in one Delta commit;
`backfill --rerun` redoes committed intervals on purpose, safely in parallel and after a SIGKILL;
`runs` says which committed intervals are stale because their input changed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.conftest import delta_rows, delta_version, write

pytestmark = pytest.mark.spark

DAYS = [date(2013, 1, d) for d in range(1, 11)]


def flights(project: Path, day: date, rows: int, dep_delay: int = 5) -> Path:
    """A day's flights file, as nycflights13 split per day: `rows` flights departing that day (New York time)."""
    lines = ["time_hour,carrier,dep_delay"]
    lines += [f"{day.isoformat()} {6 + i:02d}:00:00,UA,{dep_delay + i}" for i in range(rows)]
    return write(project / f"data/flights_daily/flights_{day.isoformat()}.csv", "\n".join(lines) + "\n")


def daily(name: str, output: str, path: str = "data/flights_daily/flights_{{ interval_start.date() }}.csv") -> str:
    return f"""\
name: {name}
schedule:
  cron: "0 0 * * *"
  timezone: America/New_York
  retries: 0
sources:
  flights:
    format: csv
    path: "{path}"
    schema: "time_hour STRING, carrier STRING, dep_delay INT"
    options: {{header: true}}
steps:
  per_flight:
    sql: >
      select to_date(time_hour) as day, carrier, dep_delay
      from {{{{ source('flights') }}}}
      where to_date(time_hour) >= {{{{ interval_start.date() }}}} and to_date(time_hour) < {{{{ interval_end.date() }}}}
outputs:
  per_flight:
{output}
"""


SLICED = "    interval: {column: day}"


def day_interval(day: date) -> str:
    return f"{day.isoformat()}/{date.fromordinal(day.toordinal() + 1).isoformat()}"


def rows_of(project: Path, table: str = "per_flight") -> dict[date, int]:
    found: dict[date, int] = {}
    for row in delta_rows(project / f"warehouse/{table}"):
        found[row["day"]] = found.get(row["day"], 0) + 1
    return found


def test_a_date_slice_of_a_schedule_that_never_runs_whole_days_is_bad_input_at_validate(project, cli):
    """'30 2 * * *' with an output sliced on a DATE column: validate passed, and every run failed as
    'not whole days' (exit 2), which the scheduler tried again each day."""
    flights(project, DAYS[0], 3)
    write(
        project / "pipelines/flights.yaml", daily("flights", SLICED, path="data/flights_daily").replace("0 0 * * *", "30 2 * * *")
    )
    code, out, err = cli("validate", "flights")
    assert code == 2, out + err
    assert "flights.yaml:20:" in out + err and "not whole days" in out + err and "'30 2 * * *' in America/New_York" in out + err
    write(project / "pipelines/flights.yaml", daily("flights", SLICED, path="data/flights_daily"))  # at midnight: fine
    code, out, err = cli("validate", "flights")
    assert code == 0, out + err


def test_an_interval_column_in_other_letter_case_is_bad_input_at_validate(project, cli):
    """`interval: {column: Day}` for the step's `day`: Spark found it, so the first interval was
    written, and every later one failed in delta-rs' words (No field named "Day")."""
    flights(project, DAYS[0], 3)
    write(project / "pipelines/flights.yaml", daily("flights", "    interval: {column: Day}", path="data/flights_daily"))
    code, out, err = cli("validate", "flights")
    said = " ".join((out + err).split())
    assert code == 2, said
    assert "flights.yaml:20:" in said and "interval column 'Day' is spelled 'day'" in said, said


def test_a_changed_interval_rerun_replaces_its_slice_in_one_commit_and_never_duplicates(spark, project, cli):
    """The bug: one row added to 2013-01-05's file, that interval run again: the day had 6 rows, not 4."""
    for day in DAYS[:6]:
        flights(project, day, 3)
    write(project / "pipelines/flights.yaml", daily("flights", SLICED, path="data/flights_daily"))
    for day in DAYS[:6]:
        code, out, err = cli("run", "flights", "--interval", day_interval(day))
        assert code == 0, out + err
    assert set(rows_of(project).values()) == {3}
    before = delta_version(project / "warehouse/per_flight")

    code, out, err = cli("run", "flights", "--interval", day_interval(DAYS[4]))  # identical: commits nothing
    assert code == 0 and "already written by run" in out, out + err
    assert delta_version(project / "warehouse/per_flight") == before

    flights(project, DAYS[4], 4)  # late data for 2013-01-05
    code, out, err = cli("run", "flights", "--interval", day_interval(DAYS[4]))
    assert code == 0, out + err
    assert delta_version(project / "warehouse/per_flight") == before + 1  # one commit: the slice replaced
    assert rows_of(project) == {d: (4 if d == DAYS[4] else 3) for d in DAYS[:6]}

    # a slice is found by its column: an output row outside the run's interval is refused, nothing committed
    text = (
        (project / "pipelines/flights.yaml")
        .read_text()
        .replace("where to_date(time_hour) >=", "where true or to_date(time_hour) >=")
    )
    write(project / "pipelines/flights.yaml", text)
    code, out, err = cli("run", "flights", "--interval", day_interval(DAYS[2]))
    assert code == 1 and "outside the run's interval" in out + err, out + err
    assert delta_version(project / "warehouse/per_flight") == before + 1


def test_a_sliced_output_whose_step_changed_its_columns_is_refused_at_its_line(spark, project, cli):
    """An interval-sliced output keeps the table's other slices, so it needs the table's columns as
    append and merge do: 1.7D into a BIGINT column stored 1, and a new column ended in delta-rs's
    SchemaMismatchError (exit 1, no line)."""
    for day in DAYS[:2]:
        flights(project, day, 2)
    pipeline = project / "pipelines/flights.yaml"
    write(pipeline, daily("flights", SLICED, path="data/flights_daily"))
    assert cli("run", "flights", "--interval", day_interval(DAYS[0]))[0] == 0
    before = delta_version(project / "warehouse/per_flight")
    for change in ("carrier, dep_delay + 0.7D as dep_delay", "carrier, dep_delay, 1 as extra"):
        write(pipeline, daily("flights", SLICED, path="data/flights_daily").replace("carrier, dep_delay", change, 1))
        code, out, err = cli("run", "flights", "--interval", day_interval(DAYS[1]))
        assert code == 2, out + err
        assert "the step's columns do not match the table" in err and "pipelines/flights.yaml:" in err, err
        assert delta_version(project / "warehouse/per_flight") == before


def test_an_interval_committed_by_another_definition_is_stale(spark, project, cli):
    """runs marked an interval stale when its inputs changed, not when the pipeline did: after the
    SQL changed (sum to max, a filter), a backfill skipped the days done and the table mixed both
    versions with nothing said."""
    for day in DAYS[:2]:
        flights(project, day, 2)
    pipeline = project / "pipelines/flights.yaml"
    write(pipeline, daily("flights", SLICED, path="data/flights_daily"))
    for day in DAYS[:2]:
        assert cli("run", "flights", "--interval", day_interval(day))[0] == 0
    code, out, err = cli("runs", "--pipeline", "flights")
    assert code == 0 and "stale" not in out, out + err
    write(pipeline, daily("flights", SLICED, path="data/flights_daily").replace("carrier, dep_delay", "carrier, dep_delay * 2"))
    code, out, err = cli("runs", "--pipeline", "flights")
    assert code == 0, out + err
    assert len([line for line in out.splitlines() if "stale" in line]) == 2, out

    # `runs -n 1` shows the interval run last (the first day, run again), and checks that one
    write(pipeline, daily("flights", SLICED, path="data/flights_daily"))
    assert cli("run", "flights", "--interval", day_interval(DAYS[0]))[0] == 0
    write(pipeline, daily("flights", SLICED, path="data/flights_daily").replace("carrier, dep_delay", "carrier, dep_delay * 2"))
    code, out, err = cli("runs", "--pipeline", "flights", "-n", "1")
    assert code == 0 and "2013-01-01" in out and "stale" in out, out + err


def test_a_scheduled_output_without_a_mode_is_sliced_by_its_sources_event_time(spark, project, cli):
    """The default rule: a scheduled pipeline's output that names no mode replaces the interval's
    rows of the event-time column its sources name."""
    for day in DAYS[:2]:
        flights(project, day, 2)
    text = daily("flights", "    description: per flight", path="data/flights_daily").replace(
        "    options: {header: true}", "    options: {header: true}\n    event_time: day"
    )
    write(project / "pipelines/flights.yaml", text)
    for day in DAYS[:2]:
        assert cli("run", "flights", "--interval", day_interval(day))[0] == 0
    flights(project, DAYS[0], 3)
    assert cli("run", "flights", "--interval", day_interval(DAYS[0]))[0] == 0
    assert rows_of(project) == {DAYS[0]: 3, DAYS[1]: 2}  # the old default overwrote the whole table


def test_a_templated_source_path_reads_only_its_intervals_file_and_waits_for_a_missing_one(spark, project, cli):
    for day in DAYS[:3]:
        flights(project, day, 2 + day.day)
    write(project / "pipelines/flights.yaml", daily("flights", SLICED))
    code, out, err = cli("plan", "flights", "--interval", day_interval(DAYS[1]))
    assert code == 0, out + err
    assert "flights_2013-01-02.csv" in out.replace("\n", "") and "{{" not in out, out
    code, out, err = cli("run", "flights", "--interval", day_interval(DAYS[1]))
    assert code == 0, out + err
    assert rows_of(project) == {DAYS[1]: 4}

    code, out, err = cli("run", "flights", "--interval", day_interval(DAYS[5]))  # not landed yet: retryable
    assert code == 1, out + err
    assert "waiting for data/flights_daily/flights_2013-01-06.csv" in out + err, out + err


def test_an_interval_folder_without_files_is_waited_for_not_committed_empty(spark, project, cli):
    """A day's folder whose file was not there (yet, or any more) committed 0 rows: its slice was
    emptied, and a new interval was done for good, its files never read when they landed."""
    for day in DAYS[:2]:
        folder = project / f"data/by_day/day={day.isoformat()}"
        folder.mkdir(parents=True)
        flights(project, day, 2).rename(folder / "part-0.csv")
    write(project / "pipelines/flights.yaml", daily("flights", SLICED, path="data/by_day/day={{ interval_start.date() }}"))
    assert cli("run", "flights", "--interval", day_interval(DAYS[0]))[0] == 0
    assert rows_of(project) == {DAYS[0]: 2}

    (project / f"data/by_day/day={DAYS[0].isoformat()}/part-0.csv").unlink()
    code, out, err = cli("run", "flights", "--interval", day_interval(DAYS[0]))
    assert code == 1 and "waiting for data/by_day/day=2013-01-01" in out + err, out + err
    assert rows_of(project) == {DAYS[0]: 2}
    (project / "data/by_day/day=2013-01-03").mkdir()  # made before its files land
    code, out, err = cli("run", "flights", "--interval", day_interval(DAYS[2]))
    assert code == 1 and "waiting for" in out + err, out + err


def test_an_unrendered_template_in_a_spec_field_is_bad_input_at_its_line(spark, project, cli):
    write(project / "data/flights_daily/flights_2013-01-01.csv", "time_hour,carrier,dep_delay\n")
    write(
        project / "pipelines/typo.yaml", daily("typo", SLICED, path="data/flights_daily/flights_{{ interval_begin.date() }}.csv")
    )
    code, out, err = cli("validate", "pipelines/typo.yaml")
    assert code == 2, out + err
    assert "pipelines/typo.yaml:9" in err and "interval_begin" in err, err

    text = daily("other", SLICED).replace(
        '    schema: "time_hour', '    options: {sep: "{{ var(\'sep\') }}"}\n    schema: "time_hour'
    )
    text = text.replace("    options: {header: true}\n", "")
    write(project / "pipelines/other.yaml", text)
    code, out, err = cli("validate", "pipelines/other.yaml")
    assert code == 2, out + err
    assert "pipelines/other.yaml:10" in err and "not rendered" in err, err


def test_validate_warns_when_a_scheduled_pipeline_appends(project, cli):
    flights(project, DAYS[0], 1)
    write(project / "pipelines/flights.yaml", daily("flights", "    mode: append"))
    code, out, err = cli("validate", "pipelines/flights.yaml")
    assert code == 0, out + err
    assert "appends" in out + err and "interval: {column:" in out + err, out + err


def _child_environment() -> dict[str, str]:
    """For a `tributary` process of the test's own: this Python, this checkout."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}


def _backfill_process(project: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "framework", "backfill", *args],
        cwd=project,
        env=_child_environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


#: `tributary ARGS...` in a process that dies right after its first Delta commit, before it logs its end
DIE_AFTER_COMMITTING = """
import os, sys
from framework.io.delta.delta_rs import DeltaRsStore
original = DeltaRsStore.commit
def commit(self, *args, **kwargs):
    original(self, *args, **kwargs)
    os._exit(9)
DeltaRsStore.commit = commit
from framework.cli import main
sys.argv = ["tributary", *sys.argv[1:]]
main()
"""


def test_a_rerun_killed_after_its_commit_is_not_taken_for_stale(spark, project, cli):
    """The bug: a rerun of a changed interval died after committing the new input's rows, before
    logging its end. `runs` said the interval was stale, comparing its input with the older run's
    (the last one that had logged what it read), and still did once the next backfill had logged
    the killed run ok."""
    day, next_day = DAYS[0], DAYS[1]
    flights(project, day, 2)
    write(project / "pipelines/flights.yaml", daily("flights", SLICED))
    assert cli("run", "flights", "--interval", day_interval(day))[0] == 0
    flights(project, day, 3, dep_delay=50)
    command = [sys.executable, "-c", DIE_AFTER_COMMITTING, "run", "flights", "--interval", day_interval(day)]
    died = subprocess.run(command, cwd=project, env=_child_environment(), capture_output=True, text=True, timeout=300)
    assert died.returncode == 9, died.stdout + died.stderr
    assert sorted(r["dep_delay"] for r in delta_rows(project / "warehouse/per_flight")) == [50, 51, 52]

    code, out, err = cli("runs", "--pipeline", "flights")
    assert code == 0 and "stale" not in out, out + err
    code, out, err = cli("backfill", "flights", "--from", day.isoformat(), "--to", next_day.isoformat())
    assert code == 0 and "1 already committed, 0 to run" in out, out + err
    code, out, err = cli("runs", "--pipeline", "flights")
    assert code == 0 and "stale" not in out and "ok" in out, out + err

    flights(project, day, 1)  # a change since the killed run's commit is still seen
    code, out, err = cli("runs", "--pipeline", "flights")
    assert code == 0 and "stale" in out, out + err


def test_a_parallel_rerun_killed_in_the_middle_then_run_again_leaves_each_slice_as_one_clean_run(spark, project, cli):
    days = DAYS[:3]
    for day in days:
        flights(project, day, 2)
    write(project / "pipelines/flights.yaml", daily("flights", SLICED))
    span = ("--from", days[0].isoformat(), "--to", date(2013, 1, 4).isoformat())
    code, out, err = cli("backfill", "flights", *span, "--parallel", "2")
    assert code == 0, out + err
    assert rows_of(project) == dict.fromkeys(days, 2)
    code, out, err = cli("backfill", "flights", *span, "--rerun")  # nothing changed: nothing committed
    assert code == 0 and "3 to rerun" in out, out + err
    table = project / "warehouse/per_flight"
    settled = delta_version(table)
    assert settled == 2

    for n, day in enumerate(days):  # every day's input changed: a rerun must replace each slice
        flights(project, day, 3 + n, dep_delay=50)
    process = _backfill_process(project, "flights", *span, "--rerun", "--parallel", "2")
    deadline = time.time() + 180
    while time.time() < deadline and process.poll() is None and (delta_version(table) or 0) < settled + 1:
        time.sleep(0.02)
    assert process.poll() is None, "the rerun ended before it could be killed"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert (delta_version(table) or 0) < settled + 3, "killed after every interval committed: no kill in the middle"

    code, out, err = cli("backfill", "flights", *span, "--rerun", "--parallel", "2")
    assert code == 0, out + err
    rows = delta_rows(table)
    for n, day in enumerate(days):
        got = sorted((r["carrier"], r["dep_delay"]) for r in rows if r["day"] == day)
        assert got == [("UA", 50 + i) for i in range(3 + n)], (day, got)  # one clean run's rows, once
    assert len(rows) == 3 + 4 + 5

    code, out, err = cli("runs", "--pipeline", "flights")
    assert code == 0 and "stale" not in out, out
    flights(project, days[1], 1)
    code, out, err = cli("runs", "--pipeline", "flights")
    assert code == 0, out + err
    stale = [line for line in out.splitlines() if "stale" in line]
    assert len(stale) == 1 and "2013-01-02" in stale[0], out


def test_a_parallel_run_that_ends_while_another_reads_the_log_is_not_taken_for_interrupted(spark, project, monkeypatch):
    """The bug (one CI run of the suite): in a parallel backfill, interval 3's run read the run log
    (to undo runs killed mid-commit) while interval 1's run was ending. Interval 1's run logged
    its end and left the set of live runs between that read and the check against the set, so it
    was logged a second time, as "interrupted: the process ended before the run finished", and
    `runs` showed a run that had ended ok as interrupted. Here the read is held open until the
    other run (a real one, on its own Spark session) has ended."""
    from framework.engine import runner
    from framework.io.delta.delta_rs import DeltaRsStore
    from framework.project_context import ProjectContext
    from framework.spec.intervals import Interval

    for day in DAYS[:2]:
        flights(project, day, 2)
    write(project / "pipelines/flights.yaml", daily("flights", SLICED))
    context = ProjectContext.load("flights", start=project)
    zone = "America/New_York"

    def compiled(day: date):
        start = datetime.combine(day, datetime.min.time(), ZoneInfo(zone))
        return context.compile(Interval(start, start + timedelta(days=1), zone))

    concurrent: set[str] = set()
    other_waits, other_may_go = threading.Event(), threading.Event()
    real_batch, real_query = runner.run_batch, DeltaRsStore.query

    def batch(run):
        if threading.current_thread() is other:  # the other run has logged its start: hold it
            other_waits.set()
            other_may_go.wait(120)
        real_batch(run)

    def query(self, table, sql):
        found = real_query(self, table, sql)
        if (
            threading.current_thread() is threading.main_thread()
            and sql.startswith("SELECT run_id, event,")  # the recovery's read of the run log
            and not other_may_go.is_set()
        ):
            other_may_go.set()  # this run's recovery has read the log: the other run now ends
            other.join(120)
        return found

    monkeypatch.setattr(runner, "run_batch", batch)
    monkeypatch.setattr(DeltaRsStore, "query", query)
    ended: list = []
    other = threading.Thread(
        target=lambda: ended.append(context.run(compiled(DAYS[0]), spark=spark.newSession(), concurrent=concurrent))
    )
    other.start()
    assert other_waits.wait(120), "the other run never started"
    this = context.run(compiled(DAYS[1]), spark=spark, concurrent=concurrent)
    other.join(120)
    assert other_may_go.is_set(), "the recovery's read of the run log was not held: the test tested nothing"
    assert ended and ended[0].status == "ok" and this.status == "ok"

    events = delta_rows(project / "warehouse/_tributary/events")
    run_ends = [(e["run_id"], e["status"], e["error"]) for e in events if e["event"] == "run_end"]
    assert sorted(run_ends, key=repr) == sorted([(ended[0].run_id, "ok", None), (this.run_id, "ok", None)], key=repr), run_ends


def test_a_date_slice_of_a_day_whose_midnight_the_clocks_skip_is_a_whole_day():
    """Santiago, 6 September 2026: 00:00 becomes 01:00. The day 5 September ran from 00:00-04 to
    01:00-03, a whole local day, and its run failed as 'not whole days' (exit 2, retried for ever)."""
    from pyspark.sql.types import DateType, StructField, StructType

    from framework.io.delta.base import Slice

    schema = StructType([StructField("day", DateType())])
    zone = ZoneInfo("America/Santiago")
    day = Slice("day", datetime(2026, 9, 5, tzinfo=zone), datetime(2026, 9, 6, 1, tzinfo=zone), "America/Santiago")
    assert day.bounds(schema) == ("DATE", "2026-09-05", "2026-09-06")
    half = Slice("day", datetime(2026, 9, 5, 2, 30, tzinfo=zone), datetime(2026, 9, 6, 2, 30, tzinfo=zone), "America/Santiago")
    with pytest.raises(ValueError, match="is not whole days"):
        half.bounds(schema)
