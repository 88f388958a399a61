"""`tributary test`: a pipeline's unit tests (docs/testing.md).

The examples' own tests pass and write nothing; a wrong expected row or a broken template fails
with a readable difference (exit 1); a malformed test is bad input at its line (exit 2), in
`validate` as in `test`, before Spark starts.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pyarrow as pa

from tests.conftest import delta_version, write

SERVICE_TESTS = "pipelines/service_calls.tests.yaml"


def test_malformed_tests_are_bad_input_at_their_line(cli, project: Path):
    tests = project / SERVICE_TESTS
    text = tests.read_text()
    write(tests, text.replace("    given:\n      static_calls:", "    givne:\n      static_calls:", 1))
    code, _, err = cli("test", "service_calls")
    assert code == 2, err
    assert "service_calls.tests.yaml:6:5:" in err and "unknown key 'givne'" in err and "did you mean 'given'?" in err

    write(tests, text.replace("requested_service: /style.css, _source: static_calls}", "requested_servic: /style.css}", 1))
    code, out, err = cli("validate", "service_calls")
    assert code == 2, out + err
    assert "service_calls.tests.yaml:14:12:" in err and "'all_calls' has no column 'requested_servic'" in err, err
    assert "did you mean 'requested_service'?" in err

    write(tests, text.replace("      image_calls: []\n", "", 1))
    code, _, err = cli("test", "service_calls", "--no-engine")
    assert code == 2, err
    assert "reads source 'image_calls', and the test gives no rows for it" in err, err

    # a scenario's expectations are checked before its stream runs: each was a failed test (exit 1), or passed unchecked
    streaming = project / "pipelines/trading_correlation_streaming.yaml"
    scenario = streaming.read_text()
    for key, said in (("watermark", "watermark: not a time"), ("held", "held: -3")):
        write(streaming, scenario.replace("        quarantined: 0\n", f"        quarantined: 0\n        {said}\n", 1))
        code, out, err = cli("validate", "trading_correlation_streaming")
        assert code == 2 and "trading_correlation_streaming.yaml:79:9" in err and f"then.1.{key}" in err, out + err
    write(streaming, scenario[: scenario.index("    then:\n")] + "    then: []\n")
    code, out, err = cli("validate", "trading_correlation_streaming")
    assert code == 2 and "then" in err, out + err


def test_a_given_value_that_does_not_fit_its_column_is_bad_input_at_its_line(cli, project: Path, spark):
    """Spark casts a given value only where the checked step reads it: 'slow' for an INT failed the
    test in Spark's words (exit 1, no line) when the step read the column, and was null when not."""
    tests = project / SERVICE_TESTS
    text = tests.read_text()
    write(
        tests,
        text.replace("requested_service: /style.css, response_ms: 12}", "requested_service: /style.css, response_ms: slow}", 1),
    )
    code, out, err = cli("test", "service_calls", "--no-engine")
    assert code == 2, out + err
    assert (
        "service_calls.tests.yaml:8:" in err
        and "given row 1 of 'static_calls': response_ms 'slow' does not fit its type INT" in err
    )
    assert "CAST_INVALID_INPUT" not in out + err


def test_an_expected_value_that_does_not_fit_its_column_is_bad_input_at_its_line(cli, project: Path, spark):
    """'many' for the BIGINT calls failed the test in Spark's words (CAST_INVALID_INPUT, exit 1,
    no line): now it is a malformed test at its line, as a given value is."""
    tests = project / SERVICE_TESTS
    text = tests.read_text()
    write(tests, text.replace("{requested_service: /style.css, calls: 3,", "{requested_service: /style.css, calls: many,", 1))
    code, out, err = cli("test", "service_calls", "--no-engine")
    said = " ".join(err.split())
    assert code == 2, out + err
    assert "service_calls.tests.yaml:27:" in said and "expected row 1: calls 'many' does not fit its type BIGINT" in said, said
    assert "CAST_INVALID_INPUT" not in out + err


def test_examples_pass_and_write_nothing(cli, project: Path, spark):
    """Every example's tests pass, in one session (batch tests and the streaming scenarios); the
    warehouse is as it was (a table in it keeps its version, nothing is added) and nothing is
    left in the scratch warehouse either (a scenario's own warehouse is removed after it)."""
    table = project / "warehouse/service_stats"
    from framework.io.delta.delta_rs import DeltaRsStore

    DeltaRsStore().append_rows(str(table), pa.table({"requested_service": ["/old.css"]}))
    before = sorted(p.relative_to(project) for p in (project / "warehouse").rglob("*"))
    report = project / "out/junit.xml"
    code, out, err = cli("test", "--junit-xml", str(report), "--no-engine")
    assert code == 0, out + err
    assert "13 passed, 0 failed" in out, out
    assert delta_version(table) == 0
    assert sorted(p.relative_to(project) for p in (project / "warehouse").rglob("*")) == before
    left = sorted(str(p.relative_to(project)) for p in (project / ".tributary").rglob("*"))
    assert not (project / ".tributary").exists(), left
    cases = ElementTree.parse(report).getroot().findall(".//testcase")
    assert len(cases) == 13 and not any(c.find("failure") is not None for c in cases)
    assert {c.get("classname") for c in cases} >= {"service_calls", "service_instances", "trading_correlation"}


def test_a_wrong_row_or_a_broken_template_fails_with_a_difference(cli, project: Path, spark):
    tests = project / SERVICE_TESTS
    write(
        tests,
        tests.read_text().replace("calls: 3, clients: 2, avg_response_ms: 20.0", "calls: 4, clients: 2, avg_response_ms: 20.0"),
    )
    write(
        project / "pipelines/checked.yaml",
        """name: checked
sources:
  calls: {format: json, path: data/none, schema: "service STRING, ms INT"}
steps:
  timed:
    sql: select service, ms from {{ source('calls') }}
    expectations:
      - expect_column_values_to_not_be_null: {column: ms}
        severity: fail
outputs:
  timed: {}
tests:
  untimed_call_stops_the_run:
    step: timed
    given: {calls: [{service: a, ms: 1}, {service: b, ms: null}]}
    fails: expect_column_values_to_not_be_null
""",
    )
    report = project / "junit.xml"
    code, out, err = cli("test", "--select", "stats_per_service,both_streams_are_stacked,timed", "--junit-xml", str(report))
    assert code == 1, out + err
    assert "✓ checked::untimed_call_stops_the_run" in out and "✓ service_calls::both_streams_are_stacked" in out, out
    assert "✗ service_calls::stats_per_service" in out
    assert "rows: expected 1, got 1; 1 missing, 1 unexpected" in out
    assert (
        "- {requested_service: /style.css, calls: 4, clients: 2, avg_response_ms: 20.0, first_call: 2026-11-02 08:00:00}" in out
    )
    assert (
        "- {requested_service: /style.css, calls: 3, clients: 2, avg_response_ms: 20.0, first_call: 2026-11-02 08:00:00}" in out
    )
    assert "2 passed, 1 failed" in out
    failed = [c for c in ElementTree.parse(report).getroot().iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["stats_per_service"]

    sql = project / "sql/service_stats.sql"
    write(tests, tests.read_text().replace("calls: 4, clients: 2", "calls: 3, clients: 2"))
    write(sql, sql.read_text().replace("count(distinct client_ip)", "count(client_ip)"))  # a template gone wrong
    code, out, err = cli("test", "service_calls", "--select", "stats_per_service")
    assert code == 1, out + err
    assert "✗ service_calls::stats_per_service" in out
    assert "- {requested_service: /style.css, calls: 3, clients: 3, avg_response_ms: 20.0" in out, out

    scenario = project / "pipelines/access_log_streaming.yaml"  # a stream's scenario stops at its first wrong delivery
    write(scenario, scenario.read_text().replace("        held: 2\n", "        held: 3\n", 1))
    code, out, err = cli("test", "access_log_streaming")
    assert code == 1, out + err
    assert "after delivery 1: held: expected 3 row(s), the step holds 2" in out, out


def test_a_rows_file_outside_the_project_too_large_or_not_text_is_bad_input(cli, project: Path):
    """A test reads the project's own small text files: a path out of the project, a file past
    the size bound, or bytes that are not UTF-8 are refused at the test's line, never read."""
    tests = project / SERVICE_TESTS
    text = tests.read_text()
    assert "{file: tests/service_calls_all_calls.csv}" in text
    (project / "pipelines/tests/big.csv").write_bytes(b"a\n" + b"1\n" * (6 * 2**20))
    (project / "pipelines/tests/binary.csv").write_bytes(b"\xff\xfe\x00bad")
    os.mkfifo(project / "pipelines/tests/pipe.csv")
    for path, said in (
        ("../../../../../../etc/passwd", "rows file outside the project"),
        ("tests/big.csv", "rows file too large"),
        ("tests/binary.csv", "not UTF-8 text"),
        ("tests/pipe.csv", "is not a regular file"),  # was "not found": it is there
    ):
        write(tests, text.replace("{file: tests/service_calls_all_calls.csv}", f"{{file: {path}}}", 1))
        code, out, err = cli("validate", "service_calls")
        assert code == 2 and said in err, (path, out + err)


def test_a_scenario_builds_its_stream_once(cli, project: Path, spark, monkeypatch):
    """Each delivery of a scenario is a streaming run of its own, over the frames the first
    delivery's run built (framework.engine.streaming.KeptFrames): three deliveries, one build."""
    import framework.engine.streaming as streaming

    built: list[str] = []
    build = streaming.build_frames
    monkeypatch.setattr(streaming, "build_frames", lambda run, reading: built.append(run.run_id) or build(run, reading))
    code, out, err = cli("test", "access_log_streaming", "--no-engine")
    assert code == 0, out + err
    assert "1 passed, 0 failed" in out, out
    assert len(built) == 1, built


def test_tests_run_with_the_test_settings_and_put_the_session_back(cli, project: Path, spark, monkeypatch):
    """A test runs with one shuffle partition and no adaptive execution (framework.testing.run:
    fewer jobs for a few rows, the same rows); the session's own settings are back afterwards (a
    warm engine runs the next command on the same session)."""
    from pyspark.sql import SparkSession

    import framework.testing.batch as batch
    from framework.testing.run import TEST_CONF

    session = SparkSession.getActiveSession() or spark  # the one `tributary test` in-process runs on
    seen: list[dict[str, str | None]] = []
    run_test = batch.run_test

    def watched(context, compiled, test, used):
        assert used is session
        seen.append({key: used.conf.get(key, None) for key in TEST_CONF})
        return run_test(context, compiled, test, used)

    monkeypatch.setattr(batch, "run_test", watched)
    before = {key: session.conf.get(key, None) for key in TEST_CONF}
    code, out, err = cli("test", "service_calls", "--select", "both_streams_are_stacked", "--no-engine")
    assert code == 0, out + err
    assert "1 passed, 0 failed" in out, out
    assert seen == [TEST_CONF]
    assert {key: session.conf.get(key, None) for key in TEST_CONF} == before


def test_a_jvm_started_for_the_tests_maps_the_class_archive_and_compiles_at_the_first_tier(cli, project, tmp_path, monkeypatch):
    """`tributary test --no-engine` starting its JVM: the class archive (when there is one) and the
    first JIT tier only (framework.testing.run.TEST_JAVA_OPTIONS: 33.5 s instead of 55.7 s cold)."""
    from framework.testing.run import TEST_JAVA_OPTIONS
    from framework.warm import class_archive
    from tests.test_class_archive import spied_archive

    monkeypatch.chdir(project)
    archive, asked = spied_archive(tmp_path, monkeypatch)
    code, _, err = cli("test", "service_calls", "--select", "both_streams_are_stacked", "--no-engine")
    assert code == 0, err
    assert asked == [f"-XX:SharedArchiveFile={archive} {class_archive._QUIET} {TEST_JAVA_OPTIONS}"]
    assert TEST_JAVA_OPTIONS.startswith("-XX:TieredStopAtLevel=1")


def test_a_jvm_on_the_first_jit_tier_keeps_the_code_cache_both_tiers_have():
    """On the first tier only, HotSpot reserves a 48 MB code cache, which Spark's generated code
    fills in a JVM that lives a while: the suite's Spark Connect server died of it ("Out of space in
    CodeCache for adapters"). The warm engine, `tributary test` and the suite's daemons all start
    their JVMs with these options (framework.engine.jit)."""
    from framework.engine.jit import FIRST_TIER_ONLY
    from framework.testing.run import TEST_JAVA_OPTIONS
    from framework.warm.place import DEFAULT_JAVA_OPTIONS

    assert TEST_JAVA_OPTIONS == DEFAULT_JAVA_OPTIONS == FIRST_TIER_ONLY
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    assert java is not None
    flags = subprocess.run([java, *FIRST_TIER_ONLY.split(), "-XX:+PrintFlagsFinal", "-version"], capture_output=True, text=True)
    found = re.search(r"\bReservedCodeCacheSize\s*=\s*(\d+)", flags.stdout)
    assert found is not None, flags.stdout[-2000:] + flags.stderr[-2000:]
    assert int(found.group(1)) >= 240 * 1024 * 1024


def test_tests_run_two_at_a_time_each_on_a_session_of_its_own(cli, project: Path, spark, monkeypatch):
    """Several tests run side by side (framework.testing.run): two at once, on two threads, each
    with a session of its own (a step's frame is a temporary view named after the step: two tests
    of one pipeline on one session would replace each other's) with the test settings; the
    caller's session is left as it was, and the report lists the tests in their declared order."""
    import threading

    from pyspark.sql import SparkSession

    import framework.testing.batch as batch
    from framework.testing.run import TEST_CONF

    session = SparkSession.getActiveSession() or spark
    together = threading.Barrier(2, timeout=120)  # broken unless two tests are under way at once
    seen: list[tuple[str, object, dict[str, str | None]]] = []
    run_test = batch.run_test

    def watched(context, compiled, test, used):
        seen.append((threading.current_thread().name, used, {key: used.conf.get(key, None) for key in TEST_CONF}))
        if len(seen) <= 2:
            together.wait()
        return run_test(context, compiled, test, used)

    monkeypatch.setattr(batch, "run_test", watched)
    before = {key: session.conf.get(key, None) for key in TEST_CONF}
    report = project / "out/junit.xml"
    code, out, err = cli("test", "service_calls", "--junit-xml", str(report), "--no-engine")
    assert code == 0, out + err
    assert "3 passed, 0 failed" in out, out
    assert len(seen) == 3 and all(conf == TEST_CONF for _, _, conf in seen)
    threads = {name for name, _, _ in seen}
    assert len(threads) == 2 and threading.current_thread().name not in threads
    used = {id(s) for _, s, _ in seen}
    assert len(used) == 2 and id(session) not in used
    assert {key: session.conf.get(key, None) for key in TEST_CONF} == before
    names = [c.get("name") for c in ElementTree.parse(report).getroot().findall(".//testcase")]
    assert names == ["both_streams_are_stacked", "stats_per_service", "pages_per_day"], names


def test_ctrl_c_stops_the_tests_and_reports_none_of_those_under_way(project: Path, spark, monkeypatch):
    """Ctrl-C while tests run side by side: KeyboardInterrupt reaches the caller at once, no
    further test starts, and the tests under way are not reported (their jobs were cancelled under
    them: a failure would not be theirs). A test that starts Spark work after the cancel (as a
    scenario starts its next delivery's run) has that work cancelled too: it does not run on for
    its whole length, which held up a warm engine's next command (its warm-up's scenarios did)."""
    import _thread
    import contextlib
    import threading
    import time

    import pytest

    import framework.testing.batch as batch
    from framework.project_context import ProjectContext
    from framework.testing.run import run_tests, tests_to_run

    monkeypatch.chdir(project)
    planned = tests_to_run(ProjectContext.load(None), "service_calls", None)
    started = threading.Event()
    calls: list[str] = []
    run_test = batch.run_test

    def watched(context, compiled, test, used):
        calls.append(test.name)
        started.set()
        for _ in range(2):  # the second: work a test starts after the cancel (a scenario's next delivery)
            with contextlib.suppress(Exception):  # cancelled by the Ctrl-C: the test goes on, as run_test would
                used.sql("select reflect('java.lang.Thread', 'sleep', cast(30000 as bigint))").collect()  # a while
        return run_test(context, compiled, test, used)

    pressed: list[float] = []

    def press_ctrl_c() -> None:
        if started.wait(120):
            time.sleep(1.0)
            pressed.append(time.monotonic())
            _thread.interrupt_main()

    monkeypatch.setattr(batch, "run_test", watched)
    heard: list[object] = []
    threading.Thread(target=press_ctrl_c, daemon=True).start()
    began = time.monotonic()
    context = spark.sparkContext
    context.setJobGroup("tributary-ctrl-c-test", "a warm engine's run", interruptOnCancel=True)  # a run has one
    try:
        with pytest.raises(KeyboardInterrupt):
            run_tests(planned, heard.append)
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            context.setLocalProperty(key, None)  # type: ignore[arg-type]
    assert time.monotonic() - pressed[0] < 15  # not the 30 s of the work started after the cancel
    assert time.monotonic() - began < 90
    assert heard == []
    assert len(calls) == 2  # the two under way; the third never started


def test_two_scenarios_side_by_side_leave_no_scratch_folder(project: Path, spark, monkeypatch):
    """Two scenarios run side by side; whichever ends last, the scratch folders the command made
    (.tributary/scratch/tests) are gone after it. The order forced here: the second scenario starts
    while the first runs, and lands its first delivery only after the first has ended (CI saw the
    natural version of this leave `.tributary` behind)."""
    import threading

    import framework.testing.stream as stream
    from framework.project_context import ProjectContext
    from framework.testing.run import run_tests, tests_to_run

    monkeypatch.chdir(project)
    context = ProjectContext.load(None)
    planned = tests_to_run(context, "access_log_streaming", None) + tests_to_run(context, "trading_correlation_streaming", None)
    first_landed, first_ended = threading.Event(), threading.Event()
    real_scenario, real_land = stream.run_scenario, stream._land

    def scenario(context, compiled, test, used):
        if test.pipeline == "access_log_streaming":
            try:
                return real_scenario(context, compiled, test, used)
            finally:
                first_ended.set()
        assert first_landed.wait(120)
        return real_scenario(context, compiled, test, used)

    def land(path: Path, rows) -> None:
        if "access_log_streaming" in str(path):
            real_land(path, rows)
            first_landed.set()
        else:
            assert first_ended.wait(120)
            real_land(path, rows)

    monkeypatch.setattr(stream, "run_scenario", scenario)
    monkeypatch.setattr(stream, "_land", land)
    outcomes = run_tests(planned, lambda outcome: None).outcomes
    assert [o.passed for o in outcomes] == [True, True], [o.failure for o in outcomes]
    assert first_ended.is_set()
    left = sorted(str(p.relative_to(project)) for p in (project / ".tributary").rglob("*"))
    assert not (project / ".tributary").exists(), left
