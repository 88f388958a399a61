"""Schedules without Spark: cron intervals across clock changes, the spec, interval parsing and
rendering, what is due when, and the light commands (`next`, `runs`) staying light."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from framework.errors import BadInput
from framework.schedule.due import outlook
from framework.schedule.history import ABANDONED, FAILED, OK, SCHEDULE, RunRecord, Slot
from framework.schedule.pipelines import ScheduledPipeline
from framework.spec.intervals import Cron, Interval, parse_interval
from framework.spec.schedule import Schedule
from tests.conftest import REPO, write


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# -- cron intervals and clock changes ---------------------------------------------------------


def test_hourly_intervals_through_the_night_clocks_go_back_cover_every_hour_once():
    cron = Cron("0 * * * *", "Europe/Berlin")  # 2026-10-25 03:00 CEST -> 02:00 CET
    intervals = list(cron.intervals(utc(2026, 10, 24, 22), utc(2026, 10, 25, 3)))
    assert [i.label() for i in intervals] == [
        "2026-10-25 00:00+02:00 → 01:00+02:00",
        "2026-10-25 01:00+02:00 → 02:00+02:00",
        "2026-10-25 02:00+02:00 → 02:00+01:00",  # the hour the clock repeats: its own interval
        "2026-10-25 02:00+01:00 → 03:00+01:00",
        "2026-10-25 03:00+01:00 → 04:00+01:00",
    ]
    assert all(i.end - i.start == timedelta(hours=1) for i in intervals)
    assert len({i.tag for i in intervals}) == 5  # each its own transaction ids


def test_a_daily_job_runs_once_on_both_nights_the_clock_changes():
    cron = Cron("30 2 * * *", "Europe/Berlin")
    spring = list(cron.intervals(utc(2026, 3, 27, 1, 30), utc(2026, 3, 30, 1)))
    # 02:30 does not exist on 29 March: the job runs when the clock jumps, at 03:00 (Debian cron)
    assert [str(i) for i in spring] == [
        "2026-03-27T02:30:00+01:00/2026-03-28T02:30:00+01:00",
        "2026-03-28T02:30:00+01:00/2026-03-29T03:00:00+02:00",
        "2026-03-29T03:00:00+02:00/2026-03-30T02:30:00+02:00",
    ]
    autumn = list(cron.intervals(utc(2026, 10, 24, 0, 30), utc(2026, 10, 27, 2)))
    # 02:30 happens twice on 25 October: the job runs once, at the first (croniter would fire twice)
    assert [i.end - i.start for i in autumn] == [timedelta(hours=24), timedelta(hours=25), timedelta(hours=24)]
    assert [i.end for i in autumn][:2] == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


@settings(max_examples=60, deadline=None)
@given(
    expression=st.sampled_from(["0 * * * *", "*/20 * * * *", "30 2 * * *", "0 0 * * 0", "15 1,2,3 * * *", "@daily"]),
    timezone=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]),
    begin=st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2026, 12, 20)),
    hours=st.integers(1, 24 * 9),
)
# 01:15 EDT on 1 November 2026, just before the clocks go back: read back from the repeated hour,
# the fire was missed (CronSim's reverse iteration), and the latest interval was the day before's
@example(expression="15 1,2,3 * * *", timezone="America/New_York", begin=datetime(2026, 10, 24, 6, 0), hours=192)
def test_intervals_tile_time_whatever_the_clocks_do(expression, timezone, begin, hours):
    cron = Cron(expression, timezone)
    start, end = begin.replace(tzinfo=UTC), begin.replace(tzinfo=UTC) + timedelta(hours=hours)
    intervals = list(cron.intervals(start, end))
    for first, second in zip(intervals, intervals[1:], strict=False):
        assert first.end == second.start  # no gap, no overlap
    for interval in intervals:
        assert start <= interval.start < interval.end <= end
        assert cron.next_fire(interval.start) == interval.end  # no fire inside an interval
        assert cron.interval_ending(interval.end) == interval
    latest = cron.latest_complete(end)
    assert latest.end <= end < cron.next_fire(latest.end)
    assert list(itertools.islice(cron.intervals_back(end), len(intervals))) == intervals[::-1]  # read back, the same intervals


# -- the spec ---------------------------------------------------------------------------------


def test_schedule_spec_shorthands_and_retry_waits():
    schedule = Schedule.model_validate({"cron": "@hourly", "retries": 3})
    assert schedule.retries.count == 3 and schedule.catch_up is True and schedule.timezone == "UTC"
    waits = Schedule.model_validate({"cron": "0 * * * *", "retries": {"count": 5, "delay": "30s", "max_delay": "2min"}}).retries
    assert [waits.wait(n) for n in (1, 2, 3, 4)] == [30, 60, 120, 120]
    naive = Schedule.model_validate({"cron": "0 0 * * *", "timezone": "Europe/Berlin", "start": "2026-10-25"})
    assert naive.start_at() == utc(2026, 10, 24, 22)


BAD_SCHEDULES = [
    ("cron: '61 * * * *'", "cron '61 * * * *': Bad minute", "cron"),
    ("cron: '0 * * * * *'", "five fields", "cron"),
    ("cron: '@hourly'\n  timezone: Mars/Olympus", "unknown timezone 'Mars/Olympus'", "timezone"),
    ("cron: '@hourly'\n  retries: true", "retries is a count", "retries"),
    ("cron: '@hourly'\n  start: 2026-11-02\n  end: 2026-11-01", "'end' must come after 'start'", "schedule"),
    ("cron: '@hourly'\n  on_failure: ''", "an alert command cannot be empty", "on_failure"),
    ("cron: '@hourly'\n  catchup: true", "unknown key 'catchup'", "catchup"),
]


@pytest.mark.parametrize(("block", "message", "key"), BAD_SCHEDULES)
def test_a_wrong_schedule_is_bad_input_at_its_line(cli, project, block, message, key):
    text = (project / "pipelines/service_calls.yaml").read_text() + f"schedule:\n  {block}\n"
    path = write(project / "pipelines/service_calls.yaml", text)
    code, out, err = cli("validate", "pipelines/service_calls.yaml")
    assert code == 2 and message in err, err
    lines = path.read_text().splitlines()
    at = max(i for i, line in enumerate(lines, 1) if line.strip().startswith(f"{key}:"))
    assert f"pipelines/service_calls.yaml:{at}:" in err, err


FAR_START = """\
name: far_start
schedule:
  cron: "* * * * *"
  start: 2026-08-01
steps:
  minutes:
    sql: select {{ interval_start }} as minute_start
outputs:
  minutes: {mode: append}
"""


def _line_of(path: Path, key: str) -> int:
    return max(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.strip().startswith(f"{key}:"))


def test_a_start_that_would_catch_up_too_many_intervals_is_bad_input_naming_the_count_and_catch_up(cli, project):
    path = write(project / "pipelines/far_start.yaml", FAR_START)  # a minute's intervals since August: 100,000s
    code, _, err = cli("validate", "far_start")
    assert code == 2, err
    assert f"pipelines/far_start.yaml:{_line_of(path, 'start')}:" in err, err
    assert re.search(r"about [\d,]{7,} intervals", err) and "catch_up:" in err, err
    assert "Traceback" not in err and "--debug" not in err
    # `next` names it and still lists the others
    write(project / "pipelines/interval_calls.yaml", INTERVAL_PIPELINE)
    code, out, err = cli("next")
    assert code == 2 and "interval_calls" in out and "far_start" not in out, out + err
    assert err.count("not scheduled: pipelines/far_start.yaml") == 1 and "catch_up:" in err, err
    # what it says fixes it
    write(path, FAR_START.replace("start: 2026-08-01", "start: 2026-08-01\n  catch_up: 60"))
    assert cli("validate", "far_start")[0] == 0
    code, out, err = cli("next", "far_start")
    assert code == 0 and "60: from" in out, out + err


OUT_OF_RANGE = [
    ("start: 0001-01-01", "start"),
    ("start: 0001-01-01\n  timezone: Pacific/Kiritimati\n  end: 2026-01-01", "start"),
    ("start: 9999-12-31", "start"),
    ("start: 2026-01-01\n  end: 9999-12-31T23:00:00\n  timezone: America/New_York", "end"),
]


@pytest.mark.parametrize(("block", "key"), OUT_OF_RANGE)
def test_dates_out_of_range_are_bad_input_at_their_line_never_an_overflow(cli, project, block, key):
    text = (project / "pipelines/service_calls.yaml").read_text() + f"schedule:\n  cron: '0 0 * * *'\n  {block}\n"
    path = write(project / "pipelines/service_calls.yaml", text)
    for command in (["validate", "service_calls"], ["next", "service_calls"]):
        code, out, err = cli(*command)
        assert code == 2, out + err
        assert f"pipelines/service_calls.yaml:{_line_of(path, key)}:" in err and "out of range" in err, err
        assert "Overflow" not in out + err and "--debug" not in out + err


def test_dates_out_of_range_on_the_command_line_are_bad_input(cli, project):
    write(project / "pipelines/interval_calls.yaml", INTERVAL_PIPELINE)
    for command in (
        ["backfill", "interval_calls", "--from", "0001-01-01", "--to", "0001-01-03"],
        ["run", "interval_calls", "--interval", "0001-01-01/0001-01-02"],
        ["compile", "interval_calls", "--interval", "9999-12-31T20:00/9999-12-31T23:00"],
    ):
        code, out, err = cli(*command)
        assert code == 2 and "out of range" in err, (command, out + err)
        assert "Overflow" not in out + err and "--debug" not in out + err


def test_catch_up_latest_all_or_a_count():
    now = utc(2026, 11, 2, 11, 30)
    cron = Cron("0 * * * *")
    latest = cron.latest_complete(now)
    assert _pipeline(catch_up="latest").schedule.catch_up_limit() == 1 == _pipeline(catch_up=False).schedule.catch_up_limit()
    assert _pipeline(catch_up="all").schedule.catch_up_limit() is None is _pipeline().schedule.catch_up_limit()
    two = outlook(_pipeline(start="2026-11-01", catch_up=2), {}, now).due
    assert [d.interval for d in two] == [cron.interval_ending(latest.start), latest]  # the two latest, oldest first
    assert [d.interval for d in outlook(_pipeline(start="2026-11-02T10:00:00Z", catch_up=5), {}, now).due] == [latest]
    for wrong in (0, -3, 10_001, "some", 2.5):
        with pytest.raises(ValueError, match="catch_up"):
            _pipeline(catch_up=wrong)


def test_a_backlog_past_the_bound_since_the_newest_run_is_refused_not_crashed():
    from framework.schedule.due import BadSchedule

    p = _pipeline(cron="* * * * *")  # no start: resumes after the newest interval the scheduler ran
    long_ago = Cron("* * * * *").interval_ending(utc(2026, 1, 1))
    slots = {long_ago: Slot([_attempt(long_ago, OK, utc(2026, 1, 1))], done=True)}
    with pytest.raises(BadSchedule, match=r"about [\d,]+ intervals.*catch_up"):
        outlook(p, slots, utc(2026, 11, 2, 11, 30))
    assert len(outlook(_pipeline(cron="* * * * *", catch_up=10), slots, utc(2026, 11, 2, 11, 30)).due) == 10


def test_the_catch_up_bound_counts_what_is_left_to_run_not_what_was_run():
    from framework.schedule.due import BadSchedule

    cron, now = Cron("* * * * *"), utc(2026, 11, 25, 12, 0, 30)
    start = utc(2026, 11, 25, 12) - timedelta(minutes=20_000)
    p = _pipeline(cron="* * * * *", start=start.isoformat())
    intervals = list(cron.intervals(start, now))
    assert len(intervals) == 20_000

    def done(interval: Interval) -> Slot:
        return Slot([_attempt(interval, OK, interval.end)], done=True)

    # kept up with: nothing due, then the newest interval only, however far back `start:` lies
    kept_up = {i: done(i) for i in intervals}
    seen = outlook(p, kept_up, now)
    assert seen.due == [] and seen.next_fire == utc(2026, 11, 25, 12, 1)
    newest = cron.interval_ending(utc(2026, 11, 25, 12, 1))
    assert [d.interval for d in outlook(p, kept_up, now + timedelta(minutes=1)).due] == [newest]
    # catch_up: all still means every interval: gaps inside the history run, oldest first; one
    # whose tries failed out (retries: 0) does not
    gaps = [intervals[0], intervals[7_000], intervals[-2]]
    slots = {i: done(i) for i in intervals if i not in gaps}
    slots[intervals[12_345]] = Slot([_attempt(intervals[12_345], FAILED, intervals[12_345].end)])
    assert [d.interval for d in outlook(p, slots, now).due] == gaps
    gaps = [intervals[7_000], intervals[-2]]
    assert [d.interval for d in outlook(p, {i: done(i) for i in intervals if i not in gaps}, now).due] == gaps
    # a history another cron wrote (every 20 minutes, from the same start) settles none of this one's
    twenty = {i: done(i) for i in Cron("*/20 * * * *").intervals(start, now)}
    with pytest.raises(BadSchedule, match=r"would run 20,000 intervals"):
        outlook(p, twenty, now)
    # intervals of changing length (a daily job across both clock changes) are followed too
    daily = _pipeline(cron="30 2 * * *", timezone="Europe/Berlin", start="2026-01-01")
    days = list(daily.schedule.parsed().intervals(daily.schedule.start_at(), now))
    assert outlook(daily, {i: done(i) for i in days}, now).due == []
    assert [d.interval for d in outlook(daily, {i: done(i) for i in days if i != days[200]}, now).due] == [days[200]]
    # more than the bound left to run: refused, naming how many are left and from when
    with pytest.raises(BadSchedule, match=r"since 2026-11-17T20:40:00\+00:00 would run 11,000 intervals"):
        outlook(p, {i: done(i) for i in intervals[:9_000]}, now)


def test_a_minutely_schedule_kept_up_with_stays_valid_however_far_back_its_start(cli, project):
    from tests.conftest import log_scheduled_runs

    cron = Cron("* * * * *")
    latest = cron.latest_complete(datetime.now(UTC))
    start = latest.end - timedelta(minutes=20_000)
    text = FAR_START.replace("2026-08-01", f"{start:%Y-%m-%dT%H:%M:%SZ}")
    path = write(project / "pipelines/far_start.yaml", text)
    log_scheduled_runs(project, "far_start", list(cron.intervals(start, latest.end)))  # the scheduler kept up
    code, out, err = cli("validate", "far_start")
    assert code == 0, out + err
    code, out, err = cli("next", "far_start")
    assert code == 0 and "not scheduled" not in err and "far_start" in out, out + err
    due = re.search(r"(\d+): from", out)
    assert due is None or int(due.group(1)) <= 2, out  # the newest, if the minute turned meanwhile
    # the same schedule never run would catch up 20,000 intervals: refused where its start is written
    shutil.rmtree(project / "warehouse")
    code, _, err = cli("validate", "far_start")
    assert code == 2 and f"pipelines/far_start.yaml:{_line_of(path, 'start')}:" in err, err
    assert re.search(r"would run 20,00\d intervals", err) and "catch_up:" in err and "backfill" in err, err


def test_a_start_in_the_far_future_waits_and_next_says_its_first_run():
    p = _pipeline(start="8999-06-01")
    seen = outlook(p, {}, utc(2026, 11, 2, 11, 30))
    assert seen.due == [] and seen.next_fire == utc(8999, 6, 1, 1)  # its first interval ends then


def test_intervals_are_generated_as_they_are_read():
    cron = Cron("* * * * *", "Europe/Berlin")
    began = utc(1970, 1, 1)
    every_minute = cron.intervals(began, utc(8999, 1, 1))  # billions: only those read are made
    first = list(itertools.islice(every_minute, 3))
    assert [i.start for i in first] == [began, began + timedelta(minutes=1), began + timedelta(minutes=2)]
    newest = list(itertools.islice(cron.intervals_back(utc(2026, 11, 2, 11, 30)), 2))
    assert [i.end for i in newest] == [utc(2026, 11, 2, 11, 30), utc(2026, 11, 2, 11, 29)]
    assert cron.count(began, utc(2026, 1, 1), up_to=1000).approximate


def test_next_over_a_very_long_range_answers_within_the_fuzz_limits(tmp_path):
    from tests.fuzz_corpus import Case, write_corpus

    text = FAR_START.replace("start: 2026-08-01", "start: 1970-01-01\n  catch_up: 10000")
    write_corpus(tmp_path, [Case("long range", ["next", "far_start"], {"pipelines/far_start.yaml": text.encode()}, "ok")])
    runner = REPO / "tests/fuzz_runner.py"
    done = subprocess.run(
        [sys.executable, str(runner), str(tmp_path), "--seconds", "8", "--memory-mib", "3072"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    (result,) = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert result["code"] == 0 and not result["crashed"], result
    assert any("10000: from" in line or "far_start" in line for line in result["tail"]), result


# -- intervals on the command line and in templates ------------------------------------------


def test_interval_text_is_parsed_in_the_schedule_timezone():
    interval = parse_interval("2026-10-25/2026-10-26", "Europe/Berlin")
    assert interval.start == utc(2026, 10, 24, 22) and interval.end == utc(2026, 10, 25, 23)  # 25 h: the clock went back
    assert parse_interval("2026-10-25T00:00Z/2026-10-25T02:00+01:00", "Europe/Berlin").end == utc(2026, 10, 25, 1)
    for text, why in [
        ("2026-10-25", "expected START/END"),
        ("2026-10-26/2026-10-25", "must end after it starts"),
        ("2026-13-01/2026-10-25", "is not a date or time"),
        ("yesterday/today", "is not a date or time"),
    ]:
        with pytest.raises(BadInput, match=why):
            parse_interval(text, "UTC")


INTERVAL_PIPELINE = """\
name: interval_calls
schedule:
  cron: "0 * * * *"
  timezone: Europe/Berlin
sources:
  calls:
    format: json
    path: data/samples/service_calls/static
    schema: ts TIMESTAMP, client_ip STRING, head_service STRING, requested_service STRING, response_ms INT
steps:
  hourly:
    sql: >
      select {{ interval_start }} as interval_start, {{ interval_start.date() }} as local_day, count(*) as calls
      from {{ source('calls') }} where ts >= {{ interval_start }} and ts < {{ interval_end | lit }}
outputs:
  hourly: {mode: append}
"""


def test_templates_see_the_interval_as_typed_timestamp_literals(cli, project):
    write(project / "pipelines/interval_calls.yaml", INTERVAL_PIPELINE)
    code, out, err = cli("compile", "interval_calls", "--interval", "2026-10-25T02:00+02:00/2026-10-25T02:00+01:00")
    assert code == 0, err
    assert "TIMESTAMP '2026-10-25 02:00:00+02:00' as interval_start" in out
    assert "DATE '2026-10-25' as local_day" in out  # the schedule's local date
    assert "ts < TIMESTAMP '2026-10-25 02:00:00+01:00'" in out
    # without --interval: the schedule's latest complete interval
    code, out, _ = cli("compile", "interval_calls")
    assert code == 0 and "-- interval " in out


def test_a_run_that_needs_an_interval_and_has_none_is_bad_input(cli, project):
    unscheduled = (
        INTERVAL_PIPELINE.split("sources:")[0].split("schedule:")[0] + "sources:" + INTERVAL_PIPELINE.split("sources:")[1]
    )
    write(project / "pipelines/interval_calls.yaml", unscheduled)
    assert cli("validate", "interval_calls")[0] == 0  # rendered with a sample interval
    code, _, err = cli("run", "interval_calls")
    assert code == 2 and "step(s) hourly read interval_start / interval_end" in err and "--interval" in err
    code, _, err = cli("run", "contact_join", "--interval", "2026-11-01/2026-11-02")
    assert code == 2 and "a streaming run has no time interval" in err
    code, _, err = cli("run", "interval_calls", "--interval", "2026-11-01")
    assert code == 2 and "expected START/END" in err


def test_a_streaming_template_using_the_interval_is_told_why(cli, project):
    text = (project / "pipelines/contact_join.yaml").read_text()
    assert "mode: streaming" in text
    write(project / "sql/uses_interval.sql", "select * from {{ source('phones') }} where ts >= {{ interval_start }}\n")
    write(project / "pipelines/contact_join.yaml", text.replace("steps:\n", "steps:\n  late:\n    sql: uses_interval.sql\n", 1))
    code, _, err = cli("validate", "contact_join")
    assert code == 2 and "interval_start: a streaming run has no time interval" in err and "uses_interval.sql:1" in err


# -- what is due ------------------------------------------------------------------------------


def _pipeline(**schedule) -> ScheduledPipeline:
    spec = Schedule.model_validate({"cron": "0 * * * *", **schedule})
    return ScheduledPipeline(Path("p.yaml"), "p.yaml", "p", "batch", spec)


def _attempt(interval: Interval, outcome: str, finished: datetime, trigger: str = SCHEDULE) -> RunRecord:
    status = "ok" if outcome == OK else "failed"
    return RunRecord(
        "r",
        "p",
        interval=interval,
        status=status,
        outcome=outcome,
        attempt={"trigger": trigger, "finished_at": finished.isoformat()},
    )


def test_catch_up_runs_every_interval_since_start_oldest_first_and_retries_after_their_wait():
    p = _pipeline(start="2026-11-02T08:00:00Z", retries={"count": 2, "delay": "10min", "backoff": 3})
    cron, now = p.schedule.parsed(), utc(2026, 11, 2, 11, 30)
    nine, ten, eleven = (cron.interval_ending(utc(2026, 11, 2, h)) for h in (9, 10, 11))
    seen = outlook(p, {}, now)
    assert [d.interval for d in seen.due] == [nine, ten, eleven] and seen.next_fire == utc(2026, 11, 2, 12)
    slots = {
        nine: Slot([_attempt(nine, OK, utc(2026, 11, 2, 9, 1))], done=True),
        ten: Slot([_attempt(ten, FAILED, utc(2026, 11, 2, 11, 25))]),
        eleven: Slot([_attempt(eleven, FAILED, utc(2026, 11, 2, 11, 1)), _attempt(eleven, FAILED, utc(2026, 11, 2, 11, 2))]),
    }
    seen = outlook(p, slots, now)
    assert seen.due == [] and [(d.interval, d.attempt, d.at) for d in seen.waiting] == [
        (ten, 2, utc(2026, 11, 2, 11, 35)),  # 10 min after its failure
        (eleven, 3, utc(2026, 11, 2, 11, 32)),  # 10 min x 3 after its second
    ]
    assert seen.wake == utc(2026, 11, 2, 11, 32)
    slots[eleven].runs.append(_attempt(eleven, FAILED, utc(2026, 11, 2, 11, 40)))  # the third and last try
    assert [d.interval for d in outlook(p, slots, utc(2026, 11, 2, 11, 45)).due] == [ten]


def test_abandoned_and_killed_runs_use_up_no_try_and_are_due_at_once():
    p = _pipeline(start="2026-11-02T08:00:00Z", retries=0)
    nine = p.schedule.parsed().interval_ending(utc(2026, 11, 2, 9))
    killed = RunRecord("k", "p", interval=nine)  # no end in the log, no commit
    slots = {nine: Slot([_attempt(nine, ABANDONED, utc(2026, 11, 2, 9, 5)), killed])}
    due = outlook(p, slots, utc(2026, 11, 2, 9, 30)).due
    assert [(d.interval, d.attempt) for d in due] == [(nine, 1)]


def test_without_catch_up_or_start_only_the_latest_interval_runs_first():
    now = utc(2026, 11, 2, 11, 30)
    latest = Cron("0 * * * *").latest_complete(now)
    assert [d.interval for d in outlook(_pipeline(catch_up=False, start="2026-11-01"), {}, now).due] == [latest]
    assert [d.interval for d in outlook(_pipeline(), {}, now).due] == [latest]
    # later, the scheduler resumes from the newest interval it ran
    nine = Cron("0 * * * *").interval_ending(utc(2026, 11, 2, 9))
    resumed = outlook(_pipeline(), {nine: Slot([_attempt(nine, OK, utc(2026, 11, 2, 9))], done=True)}, now).due
    assert [d.interval.end.hour for d in resumed if d.interval] == [10, 11]
    assert outlook(_pipeline(start="2026-12-01"), {}, now).due == []  # not begun yet
    assert outlook(_pipeline(start="2026-11-02T08:00:00Z", end="2026-11-02T10:00:00Z"), {}, now).next_fire is None


# -- light commands -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["next"], ["runs"], ["runs", "--failed", "--pipeline", "service_calls"]])
def test_next_and_runs_never_import_pyspark(command):
    code = (
        f"import sys; from framework.cli import main; sys.argv=['tributary', *{command!r}]\n"
        "try:\n main()\nexcept SystemExit: pass\nprint('pyspark' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.stdout.strip().endswith("False"), done.stdout + done.stderr


def test_next_lists_each_schedule(cli, project):
    write(project / "pipelines/interval_calls.yaml", INTERVAL_PIPELINE)
    code, out, _ = cli("next")
    assert code == 0 and "interval_calls" in out and "0 * * * * (Europe/Berlin)" in out
    write(project / "pipelines/broken.yaml", "name: broken\nschedule: {cron: 'every hour'}\n")
    code, out, err = cli("next")
    assert code == 2 and "interval_calls" in out and "not scheduled: pipelines/broken.yaml:2" in err


def test_a_restore_undoes_a_commit_for_idempotency(tmp_path):
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    from framework.io.delta.delta_rs import DeltaRsStore

    table = str(tmp_path / "t")
    write_deltalake(table, pa.table({"a": [1]}))
    meta = {"tributary.app_id": "tributary/p/o/k", "tributary.run_id": "run-1"}
    properties = CommitProperties(app_transactions=[Transaction("tributary/p/o/k", 0)], custom_metadata=meta)
    write_deltalake(table, pa.table({"a": [2]}), mode="append", commit_properties=properties)
    store = DeltaRsStore()
    assert store.written_by(table, "tributary/p/o/k", latest_only=False) == "run-1" and store.holds_run(table, "run-1")
    DeltaTable(table).restore(0)  # what recovery does to a run killed between its commits
    assert store.transaction_version(table, "tributary/p/o/k") == 0  # Delta keeps the id ...
    assert store.written_by(table, "tributary/p/o/k", latest_only=False) is None  # ... but its rows are gone
    assert not store.holds_run(table, "run-1")


# -- after: dependencies between pipelines (issue 35) -------------------------------------------


def test_an_interval_waits_until_its_upstream_committed_time_covering_it():
    from framework.schedule.dependencies import Upstream, covered

    hourly, three_hourly = Cron("0 * * * *"), Cron("0 */3 * * *")
    hours = list(hourly.intervals(utc(2026, 11, 2, 0), utc(2026, 11, 2, 3)))
    block = three_hourly.interval_ending(utc(2026, 11, 2, 3))
    # the rule: the upstream's committed intervals together cover the downstream's
    assert covered(hours[1], hours) and covered(block, hours)  # the same interval; shorter ones tiling it
    assert covered(hours[2], [block])  # a longer one holding it
    assert not covered(block, [hours[0], hours[2]])  # a gap
    assert not covered(block, [])

    p = ScheduledPipeline(
        Path("down.yaml"), "down.yaml", "down", "batch", Schedule.model_validate({"cron": "0 */3 * * *", "after": ["up"]})
    )
    now = utc(2026, 11, 2, 3, 5)
    waiting = outlook(p, {}, now, Upstream({"up": hours[:2]}))
    assert waiting.due == [] and [(d.interval, names) for d, names in waiting.blocked] == [(block, ["up"])]
    assert waiting.wake == now + timedelta(minutes=1)  # it looks again for a commit made elsewhere
    ready = outlook(p, {}, now, Upstream({"up": hours}))
    assert [d.interval for d in ready.due] == [block] and ready.blocked == []


AFTER = """\
name: {name}
schedule:
  cron: "@hourly"
  after: [{after}]
steps:
  t: {{sql: "select 1 as one"}}
outputs:
  t: {{mode: append, name: {name}_t}}
"""


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"down": "nope"}, "after: no pipeline is named 'nope'"),
        ({"down": "service_calls"}, "after: 'service_calls' (pipelines/service_calls.yaml) has no schedule"),
        ({"down": "up", "up": "down"}, "the pipelines wait for each other in a cycle: down → up → down"),
    ],
)
def test_after_names_pipelines_with_schedules_and_no_cycle(cli, project, files, message):
    for name, after in files.items():
        write(project / f"pipelines/{name}.yaml", AFTER.format(name=name, after=after))
    code, _, err = cli("validate", "pipelines/down.yaml")
    assert code == 2 and message in err, err
    assert "pipelines/down.yaml:4:" in err, err  # the line of the name under after:


class _Noon:
    """A clock at mid-day: an interval label spanning midnight is longer and wraps in the table."""

    def now(self) -> datetime:
        return datetime(2026, 6, 15, 12, 30, tzinfo=UTC)


def test_next_says_what_waits_for_what(cli, project, monkeypatch):
    monkeypatch.setattr("framework.schedule.upcoming.SystemClock", _Noon)
    write(project / "pipelines/up.yaml", AFTER.format(name="up", after="").replace("  after: []\n", ""))
    write(project / "pipelines/down.yaml", AFTER.format(name="down", after="up"))
    code, _, err = cli("validate", "pipelines/down.yaml", "pipelines/up.yaml")
    assert code == 0, err
    code, out, err = cli("next", "down")
    assert code == 0, err
    assert "waiting for upstream" in out and "(for up)" in out, out


def test_graph_all_draws_the_pipelines_the_tables_between_them_and_who_waits_for_whom(cli, project, tmp_path):
    write(project / "pipelines/up.yaml", AFTER.format(name="up", after="").replace("  after: []\n", ""))
    down = AFTER.format(name="down", after="up").replace(
        'steps:\n  t: {sql: "select 1 as one"}',
        "sources:\n  ups: {format: delta, table: up_t}\nsteps:\n  t: {sql: \"select count(*) as n from {{ source('ups') }}\"}",
    )
    write(project / "pipelines/down.yaml", down)
    code, out, err = cli("graph", "--all")
    assert code == 0, err
    ids = dict(re.findall(r"  (\w+)\[\(?\"([^\"<]+)", out))  # node id -> its label
    named = {label: node for node, label in ids.items()}
    assert f"{named['up']} ==> {named['up_t']}" in out and f"{named['up_t']} --> {named['down']}" in out, out
    assert f"{named['up']} -. after .-> {named['down']}" in out
    assert f"{named['service_calls']} ==> {named['service_stats']}" in out  # the example's pipelines too
    picture = tmp_path / "all.svg"
    code, out, err = cli("graph", "--all", "--svg", str(picture))
    assert code == 0 and out.strip() == str(picture), err
    assert "<svg" in picture.read_text() and "up_t" in picture.read_text()
    code, _, err = cli("graph")
    assert code == 2 and "give one of them" in err


# -- source freshness (issue 35) ---------------------------------------------------------------

FRESH = """\
name: fresh
sources:
  calls:
    format: json
    path: data/fresh_calls
    schema: "ts TIMESTAMP, n INT"
    freshness: {warn_after: 1h, error_after: 1d}
  ticks:
    format: parquet
    path: data/ticks
    event_time: ts
    freshness: {error_after: 6h}
steps:
  t: {sql: "select n from {{ source('calls') }} union all select n from {{ source('ticks') }}"}
outputs:
  t: {mode: overwrite}
"""


def test_freshness_warns_and_errors_by_file_time_or_newest_event_time(cli, project):
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    write(project / "pipelines/fresh.yaml", FRESH)
    calls = write(project / "data/fresh_calls/a.json", '{"ts": "2026-11-02T08:00:00Z", "n": 1}\n')
    now = datetime.now(UTC)
    (project / "data/ticks").mkdir(parents=True)
    newest = now - timedelta(hours=3)  # the file itself is new: the event time is what counts
    ticks = pa.table({"ts": pa.array([newest - timedelta(hours=1), newest], pa.timestamp("us", tz="UTC")), "n": [1, 2]})
    pq.write_table(ticks, project / "data/ticks/t.parquet")

    two_hours_ago = (now - timedelta(hours=2)).timestamp()
    os.utime(calls, (two_hours_ago, two_hours_ago))
    code, out, err = cli("freshness", "fresh")
    assert code == 0, out + err  # a warning alone
    assert re.search(r"calls\s+│\s+warn\s+│\s+2 h", out), out
    assert re.search(r"ticks\s+│\s+ok\s+│\s+3 h", out) and "newest event time (ts, from Parquet footers)" in out, out
    assert "0 past error_after, 1 past warn_after" in out

    two_days_ago = (now - timedelta(days=2)).timestamp()
    os.utime(calls, (two_days_ago, two_days_ago))
    pq.write_table(
        ticks.slice(0, 1).set_column(0, "ts", pa.array([now - timedelta(hours=7)], pa.timestamp("us", tz="UTC"))),
        project / "data/ticks/t.parquet",
    )
    code, out, err = cli("freshness", "fresh")
    assert code == 1, out + err  # as dbt source freshness: an error exits non-zero
    assert re.search(r"calls\s+│\s+error\s+│\s+2 d", out) and re.search(r"ticks\s+│\s+error\s+│\s+7 h", out), out

    write(
        project / "pipelines/fresh.yaml", FRESH.replace("{warn_after: 1h, error_after: 1d}", "{warn_after: 2d, error_after: 1d}")
    )
    code, _, err = cli("validate", "pipelines/fresh.yaml")
    assert code == 2 and "warn_after must be shorter than error_after" in err and "fresh.yaml:7:" in err, err


def test_runs_shows_at_least_one_row_per_pipeline(cli, project):
    """`runs -n 0` and `-n -1` ended in an IndexError (exit 1); a limit below one is a usage error."""
    from tests.conftest import log_scheduled_runs

    cron = Cron("0 * * * *")
    latest = cron.latest_complete(datetime.now(UTC))
    log_scheduled_runs(project, "calls_per_interval", list(cron.intervals(latest.end - timedelta(hours=3), latest.end)))
    for limit in ("0", "-1"):
        code, out, err = cli("runs", "-n", limit)
        assert code == 2 and "Traceback" not in out + err and "--limit" in err, out + err
    code, out, err = cli("runs", "-n", "1")
    assert code == 0 and "calls_per_interval" in out, out + err
