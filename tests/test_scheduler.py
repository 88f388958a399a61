"""The scheduler with real runs: a fast clock drives the fires (its waits move its time), the runs
are real runs of tiny pipelines on the session's Spark; and a real scheduler process killed with
SIGKILL in the middle of a run."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from framework.project_context import ProjectContext
from framework.schedule.history import ABANDONED, FAILED, INVALID, OK, TIMED_OUT, RunLog
from framework.schedule.scheduler import Scheduler
from framework.spec.intervals import Cron
from tests.conftest import delta_rows, delta_version, log_scheduled_runs, write

pytestmark = pytest.mark.spark

SCHEMA = "ts TIMESTAMP, client_ip STRING, head_service STRING, requested_service STRING, response_ms INT"


class FastClock:
    """A clock whose waits move its time at once; `actions` happen when the time passes theirs."""

    def __init__(self, start: datetime, actions: list[tuple[datetime, Callable[[], object]]] | None = None):
        self.time, self.actions, self.waits = start, sorted(actions or [], key=lambda a: a[0]), []

    def now(self) -> datetime:
        return self.time

    def sleep_until(self, when: datetime | None, wake: threading.Event) -> None:
        target = when or self.time + timedelta(hours=1)
        self.waits.append(target)
        while self.actions and self.actions[0][0] <= target:
            at, action = self.actions.pop(0)
            self.time = max(self.time, at)
            action()
        self.time = max(self.time, target)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def calls(folder: Path, name: str, times: list[datetime], response_ms: int = 20) -> Path:
    lines = [
        json.dumps(
            {
                "ts": t.isoformat(),
                "client_ip": "10.0.0.1",
                "head_service": "/",
                "requested_service": "/a.css",
                "response_ms": response_ms,
            }
        )
        for t in times
    ]
    return write(folder / name, "\n".join(lines) + "\n")


def pipeline(name: str, schedule: str, folder: str = "data/calls", extra_sql: str = "response_ms") -> str:
    return f"""\
name: {name}
schedule:
{schedule}
sources:
  calls: {{format: json, path: {folder}, schema: "{SCHEMA}"}}
steps:
  rows:
    sql: >
      select {{{{ interval_start }}}} as interval_start, ts, {extra_sql} as response_ms
      from {{{{ source('calls') }}}} where ts >= {{{{ interval_start }}}} and ts < {{{{ interval_end }}}}
  per_interval:
    sql: select interval_start, count(*) as calls from {{{{ ref('rows') }}}} group by interval_start
outputs:
  rows: {{mode: append}}
  per_interval: {{mode: merge, keys: [interval_start]}}
"""


def scheduler(project: Path, spark, clock, say: list[str], names: list[str] | None = None) -> Scheduler:
    return Scheduler(ProjectContext.load(start=project), say.append, names, clock=clock, spark=spark)


def test_the_scheduler_catches_up_across_the_night_the_clocks_go_back_retries_and_alerts(spark, project):
    # Berlin, 25 October 2026: 03:00 CEST becomes 02:00 CET. Hourly intervals from 01:00+02:00 to 03:00+01:00.
    data = project / "data/calls"
    good = [utc(2026, 10, 24, 23, 10) + timedelta(minutes=20 * i) for i in range(9)]  # 23:10Z .. 01:50Z
    calls(data, "good.json", good)
    calls(data, "bad-first.json", [utc(2026, 10, 25, 0, 30)], response_ms=-1)  # 02:30+02:00: fixed before its retry
    calls(data, "bad-second.json", [utc(2026, 10, 25, 1, 30)], response_ms=-1)  # 02:30+01:00: stays bad
    schedule = """\
  cron: "0 * * * *"
  timezone: Europe/Berlin
  start: 2026-10-25T01:00:00+02:00
  end: 2026-10-25T03:00:00+01:00
  retries: {count: 1, delay: 10min}
  on_success: "cat >> alerts-ok.jsonl"
  on_failure: ["sh", "-c", "cat >> alerts-failed.jsonl"]"""
    sql = "case when response_ms < 0 then raise_error('negative response time') else response_ms end"
    write(project / "pipelines/night.yaml", pipeline("night", schedule, extra_sql=sql))
    fixed = utc(2026, 10, 25, 2, 35)
    clock = FastClock(utc(2026, 10, 25, 2, 30), [(fixed, lambda: (data / "bad-first.json").unlink())])
    say: list[str] = []
    scheduler(project, spark, clock, say, ["night"]).serve(until=utc(2026, 10, 25, 5))

    slots = RunLog(*_log(project)).slots("night")
    labels = {i.label(): s for i, s in slots.items()}
    assert list(labels) == [
        "2026-10-25 01:00+02:00 → 02:00+02:00",
        "2026-10-25 02:00+02:00 → 02:00+01:00",
        "2026-10-25 02:00+01:00 → 03:00+01:00",
    ], say
    first, repeated, last = labels.values()
    assert [r.outcome for r in first.runs] == [OK] and first.done
    assert [r.outcome for r in repeated.runs] == [FAILED, OK] and repeated.done
    assert [r.outcome for r in last.runs] == [FAILED, FAILED] and not last.done
    failed_at, retried_at = repeated.runs[0].finished_at, datetime.fromisoformat(repeated.runs[1].attempt["started_at"])
    assert retried_at - failed_at >= timedelta(minutes=10)  # the retry waited its delay

    # every good row in exactly one interval, once; the failed interval wrote nothing
    rows = delta_rows(project / "warehouse/rows")
    assert sorted(r["ts"] for r in rows) == [t for t in good if t < utc(2026, 10, 25, 1)]
    per_interval = {r["interval_start"]: r["calls"] for r in delta_rows(project / "warehouse/per_interval")}
    assert per_interval == {utc(2026, 10, 24, 23): 3, utc(2026, 10, 25, 0): 3}

    ok = [json.loads(line) for line in (project / "alerts-ok.jsonl").read_text().splitlines()]
    assert [(a["attempt"], a["status"]) for a in ok] == [(1, "ok"), (2, "ok")]
    assert {o["name"] for o in ok[0]["outputs"]} == {"rows", "per_interval"}
    failed = [json.loads(line) for line in (project / "alerts-failed.jsonl").read_text().splitlines()]
    assert len(failed) == 1, "only the last try alerts"
    alert = failed[0]
    assert (alert["pipeline"], alert["status"], alert["attempt"], alert["attempts_allowed"], alert["exit_code"]) == (
        "night",
        "failed",
        2,
        2,
        1,
    )
    assert alert["interval"]["start"] == "2026-10-25T02:00:00+01:00" and "negative response time" in alert["error"]


def test_a_pipeline_broken_between_fires_fails_with_exit_2_and_the_others_keep_running(spark, project, cli):
    data = project / "data/calls"
    calls(data, "calls.json", [utc(2026, 11, 2, 8, 30), utc(2026, 11, 2, 9, 30)])
    schedule = '  cron: "0 * * * *"\n  start: 2026-11-02T{}:00:00Z'
    write(project / "pipelines/steady.yaml", pipeline("steady", schedule.format("09")))
    breaking = write(project / "pipelines/breaking.yaml", pipeline("breaking", schedule.format("08")))
    write(project / "pipelines/unreadable.yaml", "name: [unclosed\n")

    def break_it() -> None:
        breaking.write_text(breaking.read_text().replace("source('calls')", "source('callz')"))

    clock = FastClock(utc(2026, 11, 2, 9, 5), [(utc(2026, 11, 2, 9, 30), break_it)])
    say: list[str] = []
    scheduler(project, spark, clock, say, ["steady", "breaking", "unreadable"]).serve(until=utc(2026, 11, 2, 10, 10))

    assert any(line.startswith("not scheduled: pipelines/unreadable.yaml:") for line in say), say
    log = RunLog(*_log(project))
    steady = [(i.end.hour, s.last.outcome) for i, s in sorted(log.slots("steady").items(), key=lambda kv: kv[0].start)]
    assert steady == [(10, OK)]  # its first interval ends at 10:00, after the other broke
    broken = sorted(log.slots("breaking").items(), key=lambda kv: kv[0].start)
    assert [(i.end.hour, s.last.outcome) for i, s in broken] == [(9, OK), (10, INVALID)]
    run = broken[1][1].last
    assert run.exit == 2 and run.status == "failed" and "source('callz'): no source named 'callz'" in run.error

    code, out, _ = cli("runs", "--pipeline", "breaking", "--failed")
    assert code == 0 and "invalid" in out and "2026-11-02 10:00+00:00" not in out.split("invalid")[0][-5:]
    assert "callz" in out and "steady" not in out


def test_a_schedule_that_would_catch_up_too_much_is_named_once_and_the_others_still_run(spark, project, cli):
    calls(project / "data/calls", "calls.json", [utc(2026, 11, 2, 8, 30), utc(2026, 11, 2, 9, 30)])
    hours = '  cron: "0 * * * *"\n  start: 2026-11-02T08:00:00Z\n  end: 2026-11-02T10:00:00Z'
    write(project / "pipelines/steady.yaml", pipeline("steady", hours))
    far = write(project / "pipelines/far.yaml", pipeline("far", '  cron: "* * * * *"\n  start: 2026-08-01'))

    code, out, err = cli("scheduler", "steady", "far", "--once")
    assert code == 2, out + err  # the others ran; the one left out is bad input, as `next` says (it said 0)
    assert out.count("not scheduled: pipelines/far.yaml") == 1 and "catch_up:" in out, out
    start_line = next(i for i, line in enumerate(far.read_text().splitlines(), 1) if line.strip().startswith("start:"))
    assert f"pipelines/far.yaml:{start_line}:" in out, out
    slots = RunLog(*_log(project)).slots("steady")
    assert sorted((i.end.hour, s.last.outcome) for i, s in slots.items()) == [(9, OK), (10, OK)], out
    assert RunLog(*_log(project)).slots("far") == {}

    say: list[str] = []  # a long-running scheduler names it once too, however often it wakes
    scheduler(project, spark, FastClock(utc(2026, 11, 2, 10, 5)), say, ["steady", "far"]).serve(until=utc(2026, 11, 2, 14))
    assert len([line for line in say if line.startswith("not scheduled: pipelines/far.yaml")]) == 1, say


def test_a_var_goes_to_the_scheduled_pipelines_that_have_it_and_one_none_has_runs_nothing(spark, project, cli):
    calls(project / "data/calls", "calls.json", [utc(2026, 11, 2, 8, 10), utc(2026, 11, 2, 8, 20)], response_ms=20)
    hour = '  cron: "0 * * * *"\n  start: 2026-11-02T08:00:00Z\n  end: 2026-11-02T09:00:00Z'
    write(project / "pipelines/plain.yaml", pipeline("plain", hour))
    floored = pipeline("floored", hour, extra_sql="greatest(response_ms, {{ var('min_ms') | lit }})")
    write(project / "pipelines/floored.yaml", floored.replace("sources:", "vars:\n  min_ms: 0\nsources:", 1))

    code, out, err = cli("scheduler", "plain", "floored", "--once", "--var", "min_mss=25")
    assert code == 2, out + err
    assert "--var min_mss: none of the pipelines scheduled has var 'min_mss'" in err and "min_ms" in err
    assert RunLog(*_log(project)).slots("plain") == {}  # nothing ran
    code, out, err = cli("scheduler", "plain", "--once", "--var", "min_ms=25")
    assert code == 2 and "this pipeline has no var 'min_ms'" in err, out + err

    code, out, err = cli("scheduler", "plain", "floored", "--once", "--var", "min_ms=25")
    assert code == 0, out + err
    log = RunLog(*_log(project))
    assert [s.last.outcome for s in log.slots("plain").values()] == [OK]
    assert [s.last.outcome for s in log.slots("floored").values()] == [OK]
    assert sorted(r["response_ms"] for r in delta_rows(project / "warehouse" / "rows")) == [20, 20, 25, 25]

    # a backfill keeps within the schedule's start: and end: (it ran the hours before and after)
    code, out, err = cli("backfill", "plain", "--from", "2026-11-02T06:00", "--to", "2026-11-02T12:00")
    assert code == 0 and "1 interval(s)" in out and "1 already committed, 0 to run" in out, out + err


def test_a_minutely_schedule_kept_up_with_is_served_however_far_back_its_start(spark, project, cli):
    cron = Cron("* * * * *")
    latest = cron.latest_complete(datetime.now(UTC))
    start = latest.end - timedelta(minutes=20_000)
    calls(project / "data/calls", "calls.json", [latest.start])
    write(project / "pipelines/minutely.yaml", pipeline("minutely", f'  cron: "* * * * *"\n  start: {start:%Y-%m-%dT%H:%M:%SZ}'))
    log_scheduled_runs(project, "minutely", list(cron.intervals(start, latest.end)))  # it kept up, every minute

    code, out, err = cli("scheduler", "minutely", "--once")
    assert code == 0 and "not scheduled" not in out + err, out + err
    slots = RunLog(*_log(project)).slots("minutely")
    assert 20_000 <= len(slots) <= 20_002 and all(s.done for s in slots.values()), out  # the newest, if the minute turned


def test_backfill_runs_each_interval_once_and_running_it_again_writes_nothing(spark, project, cli):
    data = project / "data/calls"
    times = [utc(2026, 11, 2, 8) + timedelta(minutes=7 * i) for i in range(25)]  # 08:00 .. 10:48
    calls(data, "calls.json", times)
    write(project / "pipelines/hours.yaml", pipeline("hours", '  cron: "0 * * * *"\n  retries: 0'))

    code, out, err = cli("backfill", "hours", "--from", "2026-11-02T08:00", "--to", "2026-11-02T09:00")
    assert code == 0, out + err
    assert "1 interval(s)" in out and "0 already committed, 1 to run" in out
    code, out, err = cli("backfill", "hours", "--from", "2026-11-02T08:00", "--to", "2026-11-02T11:30", "--parallel", "2")
    assert code == 0, out + err
    assert "1 already committed, 2 to run, 2 at a time" in out
    versions = (delta_version(project / "warehouse/rows"), delta_version(project / "warehouse/per_interval"))
    code, out, _ = cli("backfill", "hours", "--from", "2026-11-02T08:00", "--to", "2026-11-02T11:00")
    assert code == 0 and "3 already committed, 0 to run" in out
    assert (delta_version(project / "warehouse/rows"), delta_version(project / "warehouse/per_interval")) == versions

    rows = delta_rows(project / "warehouse/rows")
    assert sorted(r["ts"] for r in rows) == times[: len(rows)] and len(rows) == len(times)  # each row once
    per_hour = Counter(r["interval_start"].hour for r in rows)
    assert per_hour == Counter(t.hour for t in times)

    # one interval again by hand: an identical run commits nothing
    code, out, err = cli("run", "hours", "--interval", "2026-11-02T09:00/2026-11-02T10:00")
    assert code == 0 and "already written by run" in out, out + err
    assert delta_version(project / "warehouse/rows") == versions[0]

    code, _, err = cli("backfill", "hours", "--from", "2026-11-02T08:20", "--to", "2026-11-02T08:50")
    assert code == 2 and "no interval of '0 * * * *'" in err
    text = (project / "pipelines/hours.yaml").read_text().replace("{mode: append}", "{mode: overwrite}")
    write(project / "pipelines/hours.yaml", text)
    code, _, err = cli("backfill", "hours", "--from", "2026-11-02", "--to", "2026-11-03", "--parallel", "2")
    assert code == 2 and "overwrite their table" in err


def test_a_rerun_after_an_undone_commit_writes_it_again(spark, project, cli, monkeypatch):
    """A run that fails between two commits has its first commit restored; the identical rerun
    must commit it again (Delta keeps the undone commit's transaction id)."""
    from framework.io.delta.delta_rs import DeltaRsStore

    calls(project / "data/calls", "calls.json", [utc(2026, 11, 2, 8, 10), utc(2026, 11, 2, 9, 10), utc(2026, 11, 2, 9, 20)])
    write(project / "pipelines/hours.yaml", pipeline("hours", '  cron: "0 * * * *"'))
    assert cli("run", "hours", "--interval", "2026-11-02T08:00/2026-11-02T09:00")[0] == 0  # the tables exist
    original, seen = DeltaRsStore.commit, []

    def second_fails(self, *args, **kwargs):
        seen.append(1)
        if len(seen) == 2:
            raise OSError("disk full")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(DeltaRsStore, "commit", second_fails)
    interval = "2026-11-02T09:00/2026-11-02T10:00"
    code, out, err = cli("run", "hours", "--interval", interval)
    assert code == 1 and "disk full" in err
    assert len(delta_rows(project / "warehouse/rows")) == 1  # its commit was restored
    monkeypatch.setattr(DeltaRsStore, "commit", original)
    code, out, err = cli("run", "hours", "--interval", interval)
    assert code == 0, out + err
    assert len(delta_rows(project / "warehouse/rows")) == 3 and "already written" not in out


SLEEPY = """\
name: sleepy
schedule:
  cron: "0 * * * *"
  start: 2026-11-02T08:00:00Z
  end: 2026-11-02T09:00:00Z
  timeout: {timeout}
steps:
  slow:
    sql: select {{{{ interval_start }}}} as at, reflect('java.lang.Thread', 'sleep', bigint(60000)) as slept
outputs:
  slow: {{mode: append}}
"""


def test_a_run_past_its_timeout_is_abandoned_and_a_stopped_scheduler_abandons_its_run(spark, project):
    write(project / "pipelines/sleepy.yaml", SLEEPY.format(timeout="2s"))
    say: list[str] = []
    began = time.monotonic()
    scheduler(project, spark, FastClock(utc(2026, 11, 2, 9, 30)), say, ["sleepy"]).serve(until=utc(2026, 11, 2, 9, 31))
    assert time.monotonic() - began < 45, "the sleeping task was cancelled"
    (slot,) = RunLog(*_log(project)).slots("sleepy").values()
    assert [r.outcome for r in slot.runs] == [TIMED_OUT] and "timed out after 2 s" in slot.last.error
    assert delta_version(project / "warehouse/slow") is None  # nothing committed

    write(project / "pipelines/sleepy.yaml", SLEEPY.format(timeout="10min").replace("end: 2026-11-02T09", "end: 2026-11-02T10"))
    stopping = scheduler(project, spark, FastClock(utc(2026, 11, 2, 10, 30)), say, ["sleepy"])
    threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    stopping.serve()
    slots = RunLog(*_log(project)).slots("sleepy")
    assert [r.outcome for r in slots[max(slots, key=lambda i: i.end)].runs] == [ABANDONED]
    assert say[-1] == "stopped"


STREAM = f"""\
name: stream_calls
mode: streaming
schedule: {{cron: "0 * * * *", start: 2026-11-02T08:00:00Z}}
sources:
  calls: {{format: json, path: data/calls, schema: "{SCHEMA}", event_time: ts, watermark: 1 min}}
steps:
  fast:
    sql: select ts, response_ms from {{{{ source('calls') }}}} where response_ms < 100
outputs:
  fast: {{mode: append}}
"""


def test_a_scheduled_stream_runs_available_now_at_each_fire(spark, project):
    data = project / "data/calls"
    calls(data, "a.json", [utc(2026, 11, 2, 8, 10), utc(2026, 11, 2, 8, 20)])
    write(project / "pipelines/stream_calls.yaml", STREAM)
    clock = FastClock(
        utc(2026, 11, 2, 9, 30), [(utc(2026, 11, 2, 9, 45), lambda: calls(data, "b.json", [utc(2026, 11, 2, 9, 40)]))]
    )
    say: list[str] = []
    scheduler(project, spark, clock, say, ["stream_calls"]).serve(until=utc(2026, 11, 2, 10, 5))
    slots = RunLog(*_log(project)).slots("stream_calls", streaming=True)
    assert sorted(f.hour for f in slots) == [9, 10] and all(s.done and s.last.interval is None for s in slots.values()), say
    assert sorted(r["ts"] for r in delta_rows(project / "warehouse/fast")) == [
        utc(2026, 11, 2, 8, 10),
        utc(2026, 11, 2, 8, 20),
        utc(2026, 11, 2, 9, 40),
    ]  # the second run read only the new file


def _log(project: Path) -> tuple:
    from framework.io.delta.delta_rs import DeltaRsStore

    return DeltaRsStore(), str(project / "warehouse/_tributary/events")


# -- a real scheduler process, killed --------------------------------------------------------------


def _start_scheduler(project: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.Popen(
        [sys.executable, "-m", "framework", "scheduler"],
        cwd=project,
        env=env,
        stdout=log.open("a"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_a_scheduler_killed_in_the_middle_of_a_run_resumes_and_commits_each_interval_once(spark, project, cli):
    times = [utc(2026, 11, 2, 8) + timedelta(minutes=1, seconds=17 * i) for i in range(25)]  # 08:01 .. 08:08
    calls(project / "data/calls", "calls.json", times)
    schedule = '  cron: "*/3 * * * *"\n  start: 2026-11-02T08:00:00Z\n  end: 2026-11-02T08:09:00Z'
    write(project / "pipelines/minutes.yaml", pipeline("minutes", schedule))
    rows_table, log = project / "warehouse/rows", project / "scheduler.log"
    rng = random.Random(int(os.environ.get("CRASH_SEED", "20261125")))

    process = _start_scheduler(project, log)
    target = rng.randint(1, 2)  # kill once this many intervals committed, plus a moment into the next run
    deadline = time.time() + 150
    while time.time() < deadline and process.poll() is None and (delta_version(rows_table) or -1) + 1 < target:
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 2.0))
    assert process.poll() is None, log.read_text()
    os.killpg(process.pid, signal.SIGKILL)  # the scheduler and its JVM
    process.wait()
    killed_at = (delta_version(rows_table), delta_version(project / "warehouse/per_interval"))

    code, out, err = cli("scheduler", "minutes", "--once")  # started again (in this process, on the tests' session)
    assert code == 0, out + err
    slots = RunLog(*_log(project)).slots("minutes")
    assert len(slots) == 3 and all(s.done for s in slots.values()), f"killed at {killed_at}\n{log.read_text()}\n{out}"
    rows = delta_rows(rows_table)
    assert sorted(r["ts"] for r in rows) == times, f"killed at {killed_at}\n{log.read_text()}\n{out}"  # each row once
    per_interval = {r["interval_start"]: r["calls"] for r in delta_rows(project / "warehouse/per_interval")}
    assert per_interval == dict(Counter(t.replace(minute=t.minute - t.minute % 3, second=0) for t in times))


STUCK_REGEX = """\
name: {name}
schedule:
  cron: "0 * * * *"
  start: {start}
  end: {end}
  timeout: {timeout}
  retries: 0
sources:
  one: {{format: json, path: lines/one, schema: "line STRING"}}
  two: {{format: json, path: lines/two, schema: "line STRING"}}
steps:
  matched:
    sql: |
      select {{{{ interval_start }}}} as at, line rlike '{pattern}' as m from {{{{ source('one') }}}}
      union all select {{{{ interval_start }}}} as at, line rlike '{pattern}' as m from {{{{ source('two') }}}}
outputs:
  matched: {{mode: append, name: {name}_matched}}
"""


def test_a_run_timed_out_in_a_task_that_ignores_interrupts_leaves_no_core_busy(project):
    """A regex in a JVM task does not stop when its job is cancelled: before, the timed-out run's
    two tasks kept both cores of the scheduler's JVM busy for every later run (which then timed
    out too). Now the scheduler ends that JVM after a grace period; the next run starts a new one."""
    for part in ("one", "two"):  # a task each: both cores of local[2]
        write(project / f"lines/{part}/l.json", f'{{"line": "{"a" * 40}b"}}\n')
    stuck = STUCK_REGEX.format(
        name="stuck", start="2026-11-02T08:00:00Z", end="2026-11-02T09:00:00Z", timeout="8s", pattern="^(.*a){12}$"
    )
    write(project / "pipelines/stuck.yaml", stuck)
    warm = STUCK_REGEX.format(name="warm", start="2026-11-02T07:00:00Z", end="2026-11-02T08:00:00Z", timeout="5min", pattern="b$")
    write(project / "pipelines/warm.yaml", warm)  # runs first: the stuck run's 8 s are the regex's, not the JVM's start
    log = project / "scheduler.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "framework", "scheduler", "warm", "stuck"],
        cwd=project,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        stdout=log.open("a"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and "nothing more to run" not in log.read_text():
            assert process.poll() is None, log.read_text()
            time.sleep(0.5)
        [slot] = RunLog(*_log(project)).slots("stuck").values()
        assert [r.outcome for r in slot.runs] == [TIMED_OUT], log.read_text()
        time.sleep(2.0)
        busy = _cpu_seconds(process.pid, 3.0) / 3.0  # cores the scheduler's processes keep busy, idle
        assert busy < 0.5, f"{busy:.2f} cores still busy after the timed-out run\n{log.read_text()}"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _cpu_seconds(group: int, seconds: float) -> float:
    """CPU seconds the processes of a process group use in the next `seconds`."""

    def used() -> float:
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == group:  # pgrp
                total += int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks
        return total / os.sysconf("SC_CLK_TCK")

    before = used()
    time.sleep(seconds)
    return used() - before


DOWNSTREAM = """\
name: down
schedule:
  cron: "0 */3 * * *"
  start: 2026-11-02T00:00:00Z
  end: 2026-11-02T03:00:00Z
  after: [up]
sources:
  up_rows: {format: delta, table: rows}
steps:
  totals:
    sql: >
      select {{ interval_start }} as interval_start, count(*) as calls from {{ source('up_rows') }}
      where ts >= {{ interval_start }} and ts < {{ interval_end }}
outputs:
  totals: {mode: append}
"""


def test_after_an_upstream_whose_hour_fails_the_downstream_runs_once_its_retry_committed(spark, project):
    """Issue 35: `after:`. A three-hour interval waits for the three hours of its upstream (covering,
    by shorter intervals), one of which fails first and commits at its retry."""
    data = project / "data/calls"
    good = [utc(2026, 11, 2, 0, 10) + timedelta(minutes=20 * i) for i in range(9)]  # 00:10 .. 02:50
    calls(data, "good.json", good)
    calls(data, "bad.json", [utc(2026, 11, 2, 1, 30)], response_ms=-1)  # fails 01:00-02:00 until removed
    schedule = """\
  cron: "0 * * * *"
  start: 2026-11-02T00:00:00Z
  end: 2026-11-02T03:00:00Z
  retries: {count: 1, delay: 10min}"""
    sql = "case when response_ms < 0 then raise_error('negative response time') else response_ms end"
    write(project / "pipelines/up.yaml", pipeline("up", schedule, extra_sql=sql))
    write(project / "pipelines/down.yaml", DOWNSTREAM)
    fixed = utc(2026, 11, 2, 3, 8)
    clock = FastClock(utc(2026, 11, 2, 3, 5), [(fixed, lambda: (data / "bad.json").unlink())])
    say: list[str] = []
    scheduler(project, spark, clock, say, ["down", "up"]).serve(until=utc(2026, 11, 2, 4))

    log = RunLog(*_log(project))
    up = {i.start.hour: s for i, s in log.slots("up").items()}
    assert [r.outcome for r in up[1].runs] == [FAILED, OK], say
    [down] = log.slots("down").values()
    assert [r.outcome for r in down.runs] == [OK], say  # it waited: no failed attempt, no try used
    started = datetime.fromisoformat(down.runs[0].attempt["started_at"])
    assert started >= up[1].runs[1].finished_at  # after the upstream's retry committed
    assert any("down 2026-11-02 00:00" in line and "waits for up" in line for line in say), say
    [total] = delta_rows(project / "warehouse/totals")
    assert total["calls"] == len(good)  # it saw all three hours


def test_a_stale_source_fails_its_interval_until_fresh_data_comes_and_a_warning_is_logged(spark, project):
    """Issue 35: freshness. Past error_after the attempt fails (a retryable failure, the reason in
    the run log) without starting a run; past warn_after it runs, and the warning is in the run log
    and the run's report."""
    import os

    from framework.reporting import gather_run

    data = project / "data/calls"
    old = calls(data, "calls.json", [utc(2026, 11, 2, 0, 30)])
    three_days_before = utc(2026, 10, 30).timestamp()
    os.utime(old, (three_days_before, three_days_before))
    schedule = """\
  cron: "0 0 * * *"
  start: 2026-11-01T00:00:00Z
  end: 2026-11-03T00:00:00Z
  retries: {count: 2, delay: 1h}"""
    text = pipeline("fresh", schedule).replace(
        'schema: "' + SCHEMA + '"}',
        'schema: "' + SCHEMA + '", freshness: {warn_after: 6h, error_after: 1d}}',
    )
    write(project / "pipelines/fresh.yaml", text)

    def arrives() -> None:  # the data comes: 20 h before the clock at 03:00 is past warn_after only
        new = calls(data, "calls.json", [utc(2026, 11, 2, 0, 30)])
        at = utc(2026, 11, 2, 7).timestamp()
        os.utime(new, (at, at))

    clock = FastClock(utc(2026, 11, 3, 0, 5), [(utc(2026, 11, 3, 0, 30), arrives)])
    say: list[str] = []
    scheduler(project, spark, clock, say, ["fresh"]).serve(until=utc(2026, 11, 3, 3))

    [slot] = [s for i, s in RunLog(*_log(project)).slots("fresh").items() if i.start == utc(2026, 11, 2)]
    assert [r.outcome for r in slot.runs] == [FAILED, OK], say
    failed, ok = slot.runs
    assert (
        failed.exit == 1 and "stale input: source calls: 4 d" in (failed.error or "") and "past error_after 1 d" in failed.error
    )
    assert failed.freshness is not None and failed.freshness.startswith("error")
    assert ok.freshness is not None and ok.freshness.startswith("warn") and "past warn_after 6 h" in ok.freshness
    assert any("fresh" in line and "warning: source calls: 18 h" in line for line in say), say
    report = gather_run(ProjectContext.load(start=project), run_id=ok.run_id)
    assert any("source calls was past warn_after before this run" in note for note in report.notes), report.notes


TWO_TABLES = """\
name: two_tables
schedule: {cron: "0 * * * *", timezone: UTC, retries: 0}
sources:
  ev: {format: json, path: data/ev, schema: "ts TIMESTAMP, n INT"}
steps:
  totals:
    sql: >
      select {{ interval_start }} as hour, sum(n) as total from {{ source('ev') }}
      where ts >= {{ interval_start }} and ts < {{ interval_end }}
  counts:
    sql: >
      select {{ interval_start }} as hour, count(*) as events from {{ source('ev') }}
      where ts >= {{ interval_start }} and ts < {{ interval_end }}
outputs:
  totals: {interval: {column: hour}}
  counts: {interval: {column: hour}}
"""


def test_an_interval_whose_rerun_was_killed_between_its_commits_is_run_again(spark, cli, project):
    """Killed between its two commits, a rerun left one table with the rerun's values and the
    other with the run before's; `backfill` said the interval was committed (an earlier run of it
    ended ok), and only a run of the pipeline would have undone the partial commit."""
    from deltalake import CommitProperties, write_deltalake

    from framework.engine.events import EventLog
    from framework.engine.results import RunStatus
    from framework.io.delta import local_store
    from framework.spec.intervals import Interval

    write(project / "data/ev/a.json", '{"ts": "2026-11-02T08:10:00Z", "n": 3}\n{"ts": "2026-11-02T08:20:00Z", "n": 4}\n')
    write(project / "pipelines/two_tables.yaml", TWO_TABLES)
    hour = ("--from", "2026-11-02T08:00", "--to", "2026-11-02T09:00")
    assert cli("backfill", "two_tables", *hour)[0] == 0
    totals, counts = project / "warehouse/totals", project / "warehouse/counts"
    assert [r["total"] for r in delta_rows(totals)] == [7]

    killed = "20261102T090500-killed"  # as a rerun killed after its first commit leaves things
    interval = Interval(datetime(2026, 11, 2, 8, tzinfo=UTC), datetime(2026, 11, 2, 9, tzinfo=UTC), "UTC")
    events = EventLog(local_store({}), str(project / "warehouse/_tributary/events"), killed, "two_tables")
    details = {
        "interval": interval.as_dict(),
        "outputs": ["totals", "counts"],
        "tables": {"totals": str(totals), "counts": str(counts)},
    }
    events.record("run_start", status=RunStatus.RUNNING, details=details)
    events.flush()
    rows = delta_rows(totals)
    import pyarrow as pa

    wrong = pa.table({"hour": [rows[0]["hour"]], "total": pa.array([70], pa.int64())})
    write_deltalake(
        str(totals), wrong, mode="overwrite", commit_properties=CommitProperties(custom_metadata={"tributary.run_id": killed})
    )

    code, out, err = cli("backfill", "two_tables", *hour)
    assert code == 0, out + err
    assert [r["total"] for r in delta_rows(totals)] == [7] and [r["events"] for r in delta_rows(counts)] == [2]


def test_scheduler_once_stopped_by_a_signal_says_interrupted(project):
    """SIGTERM or Ctrl-C of `scheduler --once` abandoned its run and ended with exit 1, a failed
    run's code; `backfill` says 130 for the same, as `run` does."""
    calls(project / "data/calls", "calls.json", [utc(2026, 11, 2, 8, 10)])
    hour = '  cron: "0 * * * *"\n  start: 2026-11-02T08:00:00Z\n  end: 2026-11-02T09:00:00Z'
    slow = pipeline("slow", hour, extra_sql="cast(reflect('java.lang.Thread', 'sleep', cast(30000 as bigint)) is null as int)")
    write(project / "pipelines/slow.yaml", slow)
    env = {**os.environ, "TRIBUTARY_ENGINE": "0", "PYSPARK_PYTHON": sys.executable}
    once = subprocess.Popen(
        [sys.executable, "-m", "framework", "scheduler", "slow", "--once"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lock = project / "warehouse/_tributary/locks/slow.lock"
    deadline = time.monotonic() + 240
    while not lock.exists() and once.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3.0)  # in the sleeping stage
    once.send_signal(signal.SIGTERM)
    out, err = once.communicate(timeout=120)
    assert once.returncode == 130, out + err
    assert not (project / "warehouse/rows").exists()
