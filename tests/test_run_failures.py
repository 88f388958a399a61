"""A run that fails, or meets a value it cannot hold, says so plainly: one line naming the step and
the template line Spark points at, Spark's Java stack in a log file, nothing silently changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, delta_rows, write

CALLS = """\
sources:
  calls:
    format: json
    path: incoming
    schema: head_service STRING, response_ms DOUBLE
"""

PIPELINE = (
    """\
name: failing
"""
    + CALLS
    + """\
steps:
  parsed:
    sql: parsed.sql
outputs:
  parsed: {mode: overwrite}
"""
)

TEMPLATE = """\
-- one row per call
select head_service,
       response_ms,
       cast(head_service as int) as page_number
from {{ source('calls') }}
"""


def test_a_spark_failure_is_one_line_naming_the_step_and_its_template_line(spark, cli, project):
    write(project / "pipelines" / "failing.yaml", PIPELINE)
    write(project / "sql" / "parsed.sql", TEMPLATE)
    write(project / "incoming" / "a.json", '{"head_service": "/index.html", "response_ms": 12.5}\n')
    code, out, err = cli("run", "failing")
    assert code == 1
    log = _one_line_failure(err)
    assert "CAST_INVALID_INPUT" in log and "\tat org.apache.spark" in log
    assert not (project / "warehouse" / "parsed").exists()


def _one_line_failure(err: str) -> str:
    """The failed cast's one line (and the log's name) on stderr, nothing of Java's; the log's text."""
    lines = [
        line for line in err.splitlines() if line.strip() and not line.startswith(("WARNING: Using incubator", "NOTE: Picked up"))
    ]
    assert lines[-1].startswith("run failed: step 'parsed' (sql/parsed.sql:4): [CAST_INVALID_INPUT]"), err
    assert "\tat org.apache" not in err and len(lines) <= 3, err
    log = next(line for line in lines if line.startswith("Spark's log: ")).removeprefix("Spark's log: ").split(" (")[0]
    return Path(log).read_text()


def test_a_profiles_own_java_options_keep_sparks_log_off_the_console(project):
    """A profile setting `spark.driver.extraJavaOptions` (a time zone, a heap flag) adds to the
    options Tributary starts the driver's JVM with, not in place of them: a failure is still one
    line, Spark's log and Java stack still go to the log file. Before, the profile's value replaced
    Tributary's log settings and a failed run printed Spark's whole log (183 lines)."""
    write(project / "pipelines" / "failing.yaml", PIPELINE)
    write(project / "sql" / "parsed.sql", TEMPLATE)
    write(project / "incoming" / "a.json", '{"head_service": "/index.html", "response_ms": 12.5}\n')
    (project / "configs" / "local.yaml").write_text(
        "spark:\n  master: local[1]\n  conf:\n    spark.driver.extraJavaOptions: -Duser.language=en\nwarehouse: ./warehouse\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRIBUTARY_ENGINE": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "framework", "run", "failing"], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "\tat org.apache.spark" in _one_line_failure(done.stderr)


def test_a_number_too_large_for_its_column_is_quarantined_not_infinity(spark, cli, project):
    write(project / "pipelines" / "failing.yaml", PIPELINE.replace("sql: parsed.sql", "sql: select * from {{ source('calls') }}"))
    write(
        project / "incoming" / "a.json",
        '{"head_service": "/a.html", "response_ms": 12.5}\n{"head_service": "/b.html", "response_ms": 1e400}\n'
        '{"head_service": "/c.html", "response_ms": -Infinity}\n',  # Jackson reads it; it was said to be "too large"
    )
    code, out, err = cli("run", "failing")
    assert code == 0, err
    assert delta_rows(project / "warehouse" / "parsed") == [{"head_service": "/a.html", "response_ms": 12.5}]
    bad = delta_rows(project / "warehouse" / "_tributary" / "quarantine")
    assert sorted(json.loads(r["record"])["head_service"] for r in bad) == ["/b.html", "/c.html"]
    assert {r["source"] for r in bad} == {"calls"}
    assert {r["reason"] for r in bad} == {
        "malformed json record: the number in column response_ms is infinite: too large for its type, or written as Infinity"
    }


def test_check_arguments_are_shown_as_written_not_as_markup():
    from rich.console import Console

    from framework.display import quality_table
    from framework.quality.results import ExpectationResult

    result = ExpectationResult(
        "calls", "step", "expect_column_values_to_match_regex", {"column": "page", "regex": "^[a-z]+$"}, "warn", False,
        threshold="regex=^[a-z]+$",
    )  # fmt: skip
    compound = ExpectationResult(  # it was shown as compound_columns_to_be_unique(), no columns
        "calls", "step", "expect_compound_columns_to_be_unique", {"column_list": ["instance", "service"]}, "warn", True
    )
    console = Console(width=200, record=True)
    console.print(quality_table([result, compound]))
    shown = console.export_text()
    assert "regex=^[a-z]+$" in shown
    assert "compound_columns_to_be_unique(instance, service)" in shown


def test_a_jvm_out_of_memory_or_gone_is_one_line_with_the_likely_cause():
    """Spark's OutOfMemoryError (in its message or its causes) and a JVM that stopped answering
    (py4j's network error, a refused connection) are one line saying what to change, never
    py4j's traceback or Spark's 'You hit a bug in Spark'."""
    from py4j.protocol import Py4JNetworkError

    from framework.engine.failures import is_spark_error, spark_message

    internal = RuntimeError(
        "[INTERNAL_ERROR] The Spark SQL phase execution failed with an internal error. You hit a bug in Spark ...\n"
        "Caused by: java.lang.OutOfMemoryError: Java heap space\n\tat java.base/java.util.Arrays.copyOf"
    )
    said = spark_message(internal)
    assert said.startswith("Spark ran out of memory (java.lang.OutOfMemoryError: Java heap space)")
    assert "spark.driver.memory" in said and "\n" not in said and "bug in Spark" not in said
    for gone in (Py4JNetworkError("Answer from Java side is empty"), ConnectionRefusedError(111, "Connection refused")):
        assert is_spark_error(gone)
        said = spark_message(gone)
        assert said.startswith("Spark's JVM stopped answering") and "out of memory" in said and "\n" not in said


def test_a_source_with_no_rows_grouped_commits_an_empty_table(spark, cli, project):
    """A CSV of only its header, grouped: Spark runs no task over the source, so its row counts were
    never observed, and reading them ended in Java's "assertion failed" (exit 1): an empty
    interval could never commit, and a scheduler would retry it for ever."""
    write(project / "data" / "empty" / "a.csv", "id,name,amount\n")
    write(
        project / "pipelines" / "grouped.yaml",
        """\
name: grouped
sources:
  rows: {format: csv, path: data/empty, schema: "id INT, name STRING, amount INT"}
steps:
  kept:
    sql: select * from {{ source('rows') }}
    expectations:
      - expect_column_values_to_not_be_null: {column: name}
        severity: drop
      - expect_table_row_count_to_be_between: {min_value: 0}
        severity: warn
  per_name:
    sql: select name, count(*) as n, sum(amount) as total from {{ ref('kept') }} group by name
    expectations:
      - expect_column_values_to_not_be_null: {column: name}
        severity: fail
outputs:
  per_name: {mode: overwrite}
""",
    )
    code, out, err = cli("run", "grouped")
    assert code == 0, out + err
    assert delta_rows(project / "warehouse" / "per_name") == []
    assert "0 of 0 rows" in out  # the checks judged the empty rows


def test_counting_a_json_or_csv_sources_rows_reads_them(spark, cli, project):
    """`select count(*)` needs no column of the source, so the only one read was the corrupt-record
    column, which Spark refuses (QUERY_ONLY_CORRUPT_RECORD_COLUMN, exit 1)."""
    write(project / "data" / "counted" / "a.json", '{"ts": "2026-11-01T10:00:00Z", "n": 1}\n{"n": 2}\nnot json\n')
    write(project / "data" / "counted_csv" / "a.csv", "ts,n\n2026-11-01T10:00:00Z,1\n2026-11-01T11:00:00Z,x\n")
    write(
        project / "pipelines" / "counted.yaml",
        """\
name: counted
sources:
  rows: {format: json, path: data/counted, schema: "ts TIMESTAMP, n INT"}
  lines: {format: csv, path: data/counted_csv, schema: "ts TIMESTAMP, n INT"}
steps:
  total:
    sql: |
      select (select count(*) from {{ source('rows') }}) as json_rows, (select count(*) from {{ source('lines') }}) as csv_rows
  times:
    sql: select ts from {{ source('lines') }}
outputs:
  total: {mode: overwrite}
  times: {mode: overwrite}
""",
    )
    code, out, err = cli("run", "counted")
    assert code == 0, out + err
    assert delta_rows(project / "warehouse" / "total") == [{"json_rows": 2, "csv_rows": 1}]
    # a record with a value that fits no column is quarantined, also for a query that does not read that column
    assert len(delta_rows(project / "warehouse" / "times")) == 1
    assert len(delta_rows(project / "warehouse" / "_tributary" / "quarantine")) == 2


def test_a_commit_that_landed_stands_when_deltas_checkpoint_after_it_fails(spark, cli, project):
    """delta-rs writes a checkpoint after some commits (every `delta.checkpointInterval`), after the
    commit itself, and raises when that fails (a full disk, a storage error). The commit had landed:
    the run said it failed (exit 1) while the table held its rows, so a failed run left a table
    changed. The commit stands, as Delta's own writers treat a failed checkpoint, and the run says
    what failed after it; a rerun finds the run's transaction and writes nothing twice."""
    from deltalake import DeltaTable

    write(
        project / "pipelines" / "calls.yaml",
        "name: calls\n" + CALLS + "steps:\n  kept:\n"
        "    sql: select head_service, response_ms from {{ source('calls') }}\noutputs:\n  kept: {mode: append}\n",
    )
    write(project / "incoming" / "a.json", '{"head_service": "/a", "response_ms": 1.5}\n')
    assert cli("run", "calls")[0] == 0
    table = project / "warehouse" / "kept"
    DeltaTable(str(table)).alter.set_table_properties({"delta.checkpointInterval": "1"})  # every commit
    last_checkpoint = table / "_delta_log" / "_last_checkpoint"
    last_checkpoint.unlink()
    last_checkpoint.mkdir()  # the checkpoint's pointer cannot be written: the next checkpoint fails
    version = DeltaTable(str(table)).version()

    write(project / "incoming" / "b.json", '{"head_service": "/b", "response_ms": 2.5}\n')
    code, out, err = cli("run", "calls")
    assert code == 0, out + err
    assert DeltaTable(str(table)).version() == version + 1
    assert sorted(r["head_service"] for r in delta_rows(table)) == ["/a", "/a", "/b"]  # append: a.json again, b.json
    assert "the commit landed, then delta-rs failed" in " ".join(out.split()), out
    assert "Is a directory" in out, out  # the error's own words, all of them
    code, out, err = cli("run", "calls")  # the same inputs again
    assert code == 0, out + err
    assert DeltaTable(str(table)).version() == version + 1 and len(delta_rows(table)) == 3


TWO_OUTPUTS = (
    """\
name: two
"""
    + CALLS
    + """\
steps:
  first:
    sql: select head_service, response_ms from {{ source('calls') }}
  second:
    sql: select head_service, count(*) as calls from {{ source('calls') }} group by head_service
outputs:
  first: {mode: append}
  second: {mode: overwrite}
"""
)


def _block_version(table: Path, version: int) -> Path:
    """A folder where the table's commit of `version` would go: delta-rs cannot write that commit
    (what a storage outage does to every write), and fails after its retries."""
    blocked = table / "_delta_log" / f"{version:020d}.json"
    blocked.mkdir()
    return blocked


def test_a_commit_its_failed_run_could_not_restore_is_said_and_restored_by_the_next_run(spark, cli, project):
    """A run commits its outputs in turn and restores those already committed when a later commit
    fails. When that restore fails too (the same outage), the output was reported 'rolled back'
    while it held the failed run's rows, and no later run undid them: a rerun with new input then
    appended on top of them. Now its line says it was not rolled back, at which version, and the
    next run of the pipeline restores it before it runs."""
    from deltalake import DeltaTable

    write(project / "pipelines" / "two.yaml", TWO_OUTPUTS)
    write(project / "incoming" / "a.json", '{"head_service": "/a", "response_ms": 1.5}\n')
    assert cli("run", "two")[0] == 0
    first, second = project / "warehouse" / "first", project / "warehouse" / "second"
    assert DeltaTable(str(first)).version() == 0

    write(project / "incoming" / "b.json", '{"head_service": "/b", "response_ms": 2.5}\n')
    outage = [_block_version(second, 1), _block_version(first, 2)]  # second's commit, then first's restore
    code, out, err = cli("run", "two")
    assert code == 1, out + err
    said = " ".join(out.split())
    assert DeltaTable(str(first)).version() == 1  # the failed run's commit: its restore failed
    assert "not rolled back" in said and "still at version 1" in said, out
    assert "rolled back" not in said.replace("not rolled back", ""), out

    for blocked in outage:  # the outage is over
        blocked.rmdir()
    write(project / "incoming" / "c.json", '{"head_service": "/c", "response_ms": 3.5}\n')
    code, out, err = cli("run", "two")
    assert code == 0, out + err
    # the first run's rows, then this run's: nothing of the failed run
    assert sorted(r["head_service"] for r in delta_rows(first)) == ["/a", "/a", "/b", "/c"]
    assert "restored" in " ".join(out.split()), out


def test_a_restore_that_landed_before_deltas_checkpoint_failed_is_rolled_back(spark, cli, project):
    """The restore of a failed run's commit is a commit too, and delta-rs raises when the checkpoint
    after it fails, though the restore landed: the output must say rolled back (it is), not that
    it still holds the failed run's rows."""
    from deltalake import DeltaTable

    write(project / "pipelines" / "two.yaml", TWO_OUTPUTS)
    write(project / "incoming" / "a.json", '{"head_service": "/a", "response_ms": 1.5}\n')
    assert cli("run", "two")[0] == 0
    first, second = project / "warehouse" / "first", project / "warehouse" / "second"
    DeltaTable(str(first)).alter.set_table_properties({"delta.checkpointInterval": "1"})  # every commit (version 1)
    last_checkpoint = first / "_delta_log" / "_last_checkpoint"
    last_checkpoint.unlink()
    last_checkpoint.mkdir()  # every checkpoint of first fails from now on

    write(project / "incoming" / "b.json", '{"head_service": "/b", "response_ms": 2.5}\n')
    _block_version(second, 1)  # second's commit fails: first's is restored
    code, out, err = cli("run", "two")
    assert code == 1, out + err
    said = " ".join(out.split())
    assert DeltaTable(str(first)).version() == 3  # the run's commit (2), its restore (3)
    assert sorted(r["head_service"] for r in delta_rows(first)) == ["/a"]
    assert "not rolled back" not in said and "rolled back" in said, out
