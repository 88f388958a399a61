"""Every kind of bad input gets one clear message naming where it is, exit code 2, and changes nothing.

These run without Spark: validation never starts a JVM.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import empty_generated_folders, write

GOOD = """\
name: demo
sources:
  calls:
    format: json
    path: data/samples/service_calls/static
    schema: ts TIMESTAMP, head_service STRING, response_ms INT
steps:
  recent:
    sql: |
      select head_service, response_ms
      from {{ source('calls') }}
  stats:
    sql: stats.sql
outputs:
  stats:
    mode: overwrite
"""

STATS_SQL = """\
select head_service,
       count(*) as calls
from {{ ref('recent') }}
group by head_service
"""


@pytest.fixture
def demo(project: Path) -> Path:
    write(project / "sql" / "stats.sql", STATS_SQL)
    return write(project / "pipelines" / "demo.yaml", GOOD)


def test_the_good_pipeline_validates(cli, demo):
    code, out, err = cli("validate", "pipelines/demo.yaml")
    assert code == 0, err
    assert "✓ pipelines/demo.yaml" in out


def test_malformed_yaml_names_file_line_and_column(cli, demo):
    demo.write_text(GOOD.replace("  recent:\n", "  recent:\n   bad: [unclosed\n"))
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "pipelines/demo.yaml:10:8:" in err and "malformed YAML" in err


def test_unknown_key_suggests_the_closest(cli, demo):
    demo.write_text(GOOD.replace("    format: json", "    formt: json\n    format: json"))
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "pipelines/demo.yaml:4:5" in err
    assert "unknown key 'formt'" in err and "did you mean 'format'" in err


def test_unknown_step_kind_suggests_the_closest(cli, demo):
    demo.write_text(GOOD.replace("    sql: stats.sql", "    sqll: stats.sql"))
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "unknown step kind 'sqll'" in err and "did you mean 'sql'" in err and ":13:" in err


def test_a_wrong_value_in_a_step_names_the_step_and_key_once(cli, demo):
    demo.write_text(
        GOOD.replace(
            "  stats:\n    sql: stats.sql",
            "  stats:\n    swa: {input: recent, key: [head_service], event_time: ts, size: many, timeout: 5s}",
        )
    )
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "steps.stats.swa.size: Input should be a valid integer" in err and "swa.swa" not in err


def test_duplicate_step_names_are_reported(cli, demo):
    demo.write_text(GOOD.replace("  stats:\n    sql: stats.sql", "  stats:\n    sql: stats.sql\n  stats:\n    sql: stats.sql"))
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "duplicate key 'stats'" in err and "first defined on line 12" in err


def test_missing_template_file(cli, demo):
    demo.write_text(GOOD.replace("sql: stats.sql", "sql: stat.sql"))
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "template 'stat.sql' not found" in err and "did you mean 'stats.sql'" in err


def test_undefined_var_points_at_the_template_line(cli, project, demo):
    write(project / "sql" / "stats.sql", STATS_SQL.replace("group by", "where calls > {{ var('min_calls') }}\ngroup by"))
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "sql/stats.sql:4:" in err and "var('min_calls') is not defined" in err and "--var min_calls=" in err


def test_an_output_with_a_column_twice_is_refused_at_the_output(cli, project, demo):
    """`select ts, ts` in a step that is an output: validate passed it and the run failed in
    Spark's words ([COLUMN_ALREADY_EXISTS], the step but no line). A table cannot hold a name
    twice (Spark and Delta compare names without case), so it is bad input at the output's line;
    a step that is not an output may have it (only a query naming that column must not)."""
    write(
        project / "sql" / "stats.sql",
        STATS_SQL.replace("count(*) as calls", "count(*) as calls,\n       max(response_ms) as CALLS"),
    )
    for command in ("validate", "run"):
        code, _, err = cli(command, "pipelines/demo.yaml")
        assert code == 2, (command, err)
        assert "pipelines/demo.yaml:15:" in err and "output 'stats': step 'stats' has the column 'calls' twice" in err, err
        assert "CALLS AS" in err, err
    write(project / "sql" / "stats.sql", STATS_SQL)
    write(
        project / "pipelines" / "demo.yaml",
        GOOD.replace("      select head_service, response_ms\n", "      select head_service, response_ms, response_ms\n"),
    )
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 0, err


def test_a_column_twice_that_only_spark_can_see_is_refused_by_the_run_at_the_output(cli, project, demo):
    """The same when the source declares no schema, so validate cannot list the step's columns:
    the run refuses it before writing, exit 2 at the output's line (it failed in Spark's words,
    exit 1)."""
    write(
        project / "pipelines" / "demo.yaml", GOOD.replace("    schema: ts TIMESTAMP, head_service STRING, response_ms INT\n", "")
    )
    write(project / "sql" / "stats.sql", "select *, head_service from {{ ref('recent') }}\n")
    code, _, err = cli("run", "pipelines/demo.yaml")
    assert code == 2, err
    assert "pipelines/demo.yaml:14:" in err and "output 'stats': step 'stats' has the column 'head_service' twice" in err, err


def test_sql_syntax_error_points_at_the_template_line(cli, project, demo):
    write(
        project / "sql" / "stats.sql",
        "{% set n = 2 %}\nselect head_service,\n  count(*) as calls\nfrom {{ ref('recent') }}\ngroup head_service\n",
    )
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "sql/stats.sql:5:" in err and "SQL syntax error" in err and "step 'stats'" in err


def test_sql_syntax_error_in_inline_sql_points_at_the_pipeline_line(cli, demo):
    demo.write_text(GOOD.replace("select head_service, response_ms", "select head_service response_ms bogus"))
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "pipelines/demo.yaml:10:" in err and "step 'recent'" in err


def test_unknown_ref(cli, project, demo):
    write(project / "sql" / "stats.sql", STATS_SQL.replace("ref('recent')", "ref('recnt')"))
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "sql/stats.sql:3:" in err and "no step named 'recnt'" in err and "did you mean 'recent'" in err


def test_reading_a_step_without_ref_is_flagged(cli, project, demo):
    write(project / "sql" / "stats.sql", STATS_SQL.replace("{{ ref('recent') }}", "recent"))
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "reads 'recent' directly" in err and "ref('recent')" in err


def test_cycle_is_reported_with_its_full_path(cli, demo):
    looped = GOOD.replace("from {{ source('calls') }}", "from {{ source('calls') }} join {{ ref('c') }} using (head_service)")
    looped = looped.replace(
        "outputs:", "  b:\n    sql: select * from {{ ref('stats') }}\n  c:\n    sql: select * from {{ ref('b') }}\noutputs:"
    )
    demo.write_text(looped)
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    cycle = err.split("cycle: ")[1].splitlines()[0]
    names = [n.strip() for n in cycle.split("→")]
    assert names[0] == names[-1] and set(names) == {"recent", "stats", "b", "c"} and len(names) == 5


def test_merge_without_keys(cli, demo):
    demo.write_text(GOOD.replace("mode: overwrite", "mode: merge"))
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "pipelines/demo.yaml:15:" in err and "needs 'keys'" in err and "keys: [id]" in err


@pytest.mark.parametrize("bad", ["min_calls", "=3", "1x=3"])
def test_bad_var_syntax(cli, demo, bad):
    code, _, err = cli("run", "pipelines/demo.yaml", "--var", bad)
    assert code == 2
    assert f"bad --var '{bad}'" in err


@pytest.mark.parametrize("given", ["min_calls=", "min_calls=  "])
def test_a_var_without_a_value_is_refused(cli, demo, given):
    """`--var min_calls=$MIN` in a scheduled job whose MIN is unset gave the SQL '' and the run went
    on (a filter on '' matches nothing: an empty output, exit 0). A var without a value is bad
    input; an empty text is still a quoted value."""
    from framework.variables import parse_cli_vars

    code, _, err = cli("compile", "pipelines/demo.yaml", "--var", given)
    assert code == 2
    assert "--var min_calls has no value" in err and "--var min_calls='\"\"'" in err, err
    assert parse_cli_vars(['min_calls=""', "note=''"]) == {"min_calls": "", "note": ""}


def test_var_the_pipeline_does_not_use(cli, demo):
    code, _, err = cli("compile", "pipelines/demo.yaml", "--var", "min_cals=3")
    assert code == 2
    assert "has no var 'min_cals'" in err


def test_a_var_given_to_many_pipelines_goes_to_those_that_have_it(cli, project):
    """As the profile's vars: `validate --var min_calls=3` of the whole project checks each
    pipeline, and only one of them has that var; a var none of them has is still a typo."""
    empty_generated_folders(project)
    code, out, err = cli("validate", "--var", "min_calls=3")
    assert code == 0, err
    assert "service_calls.yaml" in out and "access_log.yaml" in out
    code, _, err = cli("validate", "--var", "min_cals=3")
    assert code == 2
    assert "--var min_cals: none of the pipelines validated has var 'min_cals'" in err and "min_calls" in err
    code, _, err = cli("validate", "pipelines/access_log.yaml", "--var", "min_calls=3")
    assert code == 2 and "this pipeline has no var 'min_calls'" in err
    for command in (["graph", "--all"], ["freshness"]):  # each over every pipeline, as validate
        code, _, err = cli(*command, "--var", "min_calls=3")
        assert code == 0, (command, err)
        code, _, err = cli(*command, "--var", "min_cals=3")
        assert code == 2 and "none of the pipelines has var 'min_cals'" in err, (command, err)


def test_missing_source_path_fails_before_spark_starts(cli, demo, monkeypatch):
    import framework.engine.session

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark was asked for before the inputs were checked")

    monkeypatch.setattr(framework.engine.session, "spark_session", no_spark)  # whatever earlier tests started
    demo.write_text(GOOD.replace("data/samples/service_calls/static", "data/nowhere"))
    code, _, err = cli("run", "pipelines/demo.yaml")
    assert code == 2
    assert "source 'calls': path not found" in err


def test_streaming_output_cannot_overwrite(cli, demo):
    demo.write_text("mode: streaming\n" + GOOD)
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "pipelines/demo.yaml:17:5" in err and "cannot overwrite" in err and "mode: append" in err


def test_streaming_source_needs_a_schema(cli, demo):
    demo.write_text(
        "mode: streaming\n"
        + GOOD.replace("    schema: ts TIMESTAMP, head_service STRING, response_ms INT\n", "").replace("overwrite", "append")
    )
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "pipelines/demo.yaml:4:" in err and "streaming source needs a 'schema'" in err


def test_output_of_unknown_step(cli, demo):
    demo.write_text(GOOD + "  other:\n    from: stast\n")
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "writes step 'stast'" in err and "did you mean 'stats'" in err


def test_bad_select(cli, demo):
    code, _, err = cli("compile", "pipelines/demo.yaml", "--select", "+stat")
    assert code == 2
    assert "no step named 'stat'" in err


def test_several_problems_are_reported_together(cli, demo):
    demo.write_text(GOOD.replace("    format: json", "    formt: json").replace("mode: overwrite", "mode: upsert"))
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "formt" in err and "upsert" in err


def test_yaml_keys_stay_names(tmp_path):
    from framework.spec.yaml_source import load_yaml

    doc = load_yaml("on: [name]\nyes: 1\nnull: x\n", "f.yaml")
    assert doc.data == {"on": ["name"], "yes": 1, "null": "x"}


def test_streaming_join_needs_watermarks(cli, project):
    text = (project / "pipelines" / "contact_join.yaml").read_text().replace("    watermark: 1 min\n", "", 1)
    write(project / "pipelines" / "contact_join.yaml", text)
    code, _, err = cli("validate", "pipelines/contact_join.yaml")
    assert code == 2
    assert "step 'contacts': a streaming join needs a watermark" in err and "['phones']" in err


def test_spark_window_grouping_passes_the_syntax_check(cli, demo, project):
    demo.write_text(
        GOOD.replace("select head_service, response_ms", "select window(ts, '1 minute') as w, count(*) as n").replace(
            "from {{ source('calls') }}", "from {{ source('calls') }}\n      group by window(ts, '1 minute')"
        )
    )
    write(project / "sql" / "stats.sql", "select w.start, w.end, n from {{ ref('recent') }}\n")
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 0, err


VARS = """\
name: demo
vars: {n: 3}
sources:
  calls:
    format: json
    path: data/samples/service_calls/static
    schema: ts TIMESTAMP, head_service STRING, response_ms INT
steps:
  windows:
    swa: {input: calls, key: [head_service], event_time: ts, size: "{{ var('n') }}", timeout: "{{ var('t', '5s') }}"}
outputs:
  windows: {}
"""


def test_a_step_value_may_be_a_var_typed_after_rendering(cli, project):
    from framework.project_context import ProjectContext

    write(project / "pipelines" / "demo.yaml", VARS)
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 0, err
    compiled = ProjectContext.load("demo", variables=["n=7"], start=project).compiled
    assert compiled.spec.steps["windows"].swa.size == 7 and compiled.spec.steps["windows"].swa.timeout == 5.0


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("var('n')", "steps.windows.swa.size: var('m') is not defined"),
        ("many", "steps.windows.swa.size: Input should be a valid integer"),
    ],
)
def test_a_bad_var_in_a_step_value_is_exit_2_at_its_line(cli, project, change, expected):
    text = VARS.replace("var('n')", "var('m')") if change == "var('n')" else VARS.replace("{n: 3}", "{n: many}")
    write(project / "pipelines" / "demo.yaml", text)
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert expected in err and "pipelines/demo.yaml:10" in err


def test_a_named_pipe_or_device_is_named_not_read(project, demo):
    """A named pipe among the pipelines or in a source's folder blocked validate until someone
    wrote to it, and a pipeline file linked to /dev/zero was read until memory ran out: each is
    now named as what it is, exit 2, in a subprocess with a time limit (a hang fails the test)."""
    import os
    import subprocess
    import sys

    def validate(*args: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "TRIBUTARY_PROFILE"}
        return subprocess.run(
            [sys.executable, "-m", "framework", "validate", *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    os.mkfifo(project / "pipelines" / "notes.yaml")
    (project / "pipelines" / "zero.yaml").symlink_to("/dev/zero")
    done = validate()
    assert done.returncode == 2, done.stdout + done.stderr
    assert "notes.yaml: it is a named pipe (FIFO), not a text file" in done.stderr, done.stderr
    assert "zero.yaml: it is a character device, not a text file" in done.stderr, done.stderr
    done = validate("pipelines/notes.yaml")
    assert done.returncode == 2 and "it is a named pipe (FIFO), not a pipeline file" in done.stderr, done.stderr
    (project / "pipelines" / "notes.yaml").unlink()
    (project / "pipelines" / "zero.yaml").unlink()

    incoming = project / "incoming"
    write(incoming / "a.csv", "head_service,response_ms\n/a,1\n")
    os.mkfifo(incoming / "b.csv")
    pipeline = demo.read_text()
    pipeline = pipeline.replace("format: json\n    path: data/samples/service_calls/static", "format: csv\n    path: incoming")
    write(demo, pipeline)
    done = validate("demo")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "source 'calls': incoming/b.csv: it is a named pipe (FIFO), not a file" in done.stderr, done.stderr


def test_a_warehouse_that_is_the_project_folder_or_an_unset_variable_is_refused(cli, project, demo, monkeypatch):
    """An empty WAREHOUSE made `${WAREHOUSE:-./warehouse}` the project folder itself (a set but
    empty variable took the place of the default), and an output named `sql` would then have been
    written into the templates' folder; an unset `${X}` without a default became ""."""
    profile = project / "configs" / "shared.yaml"
    write(profile, "warehouse: ${WAREHOUSE:-./warehouse}\n")
    monkeypatch.setenv("WAREHOUSE", "")
    code, out, err = cli("plan", "demo", "--profile", "shared")
    assert code == 0, err
    assert "warehouse/stats" in out, out  # the default, as a shell reads ${WAREHOUSE:-...}

    write(profile, 'warehouse: ""\n')
    code, _, err = cli("validate", "demo", "--profile", "shared")
    assert code == 2 and "configs/shared.yaml: the warehouse" in err and "is the project folder" in err, err

    write(
        profile,
        "# ${TRIBUTARY_NOT_SET_ANYWHERE_ROOT} once, ${TRIBUTARY_NOT_SET_ANYWHERE:-x} in tests\n"
        "spark: {master: 'local[1]'}\nwarehouse: ${TRIBUTARY_NOT_SET_ANYWHERE}/tables\n",
    )
    monkeypatch.delenv("TRIBUTARY_NOT_SET_ANYWHERE", raising=False)
    code, _, err = cli("validate", "demo", "--profile", "shared")
    assert code == 2, err
    assert "configs/shared.yaml:3: ${TRIBUTARY_NOT_SET_ANYWHERE} is not set" in err, err  # its own line, not the comment's


def test_an_output_into_a_folder_of_other_files_is_refused_at_its_line(cli, project, demo):
    """A Delta table written into a folder of someone else's files mixes its files with theirs,
    and cleaning the table up could delete them."""
    write(project / "warehouse" / "stats" / "notes.txt", "mine\n")
    code, _, err = cli("validate", "demo")
    assert code == 2, err
    assert "pipelines/demo.yaml:15:3: output 'stats' would write its Delta table into warehouse/stats" in err, err
    assert "not a Delta table's (no _delta_log), e.g. notes.txt" in err, err
    (project / "warehouse" / "stats" / "notes.txt").unlink()
    write(project / "warehouse" / "stats" / "part-00000.parquet", "")  # a killed first commit's file
    assert cli("validate", "demo")[0] == 0


def test_a_damaged_delta_table_is_named_with_exit_2(cli, project, demo):
    """A damaged _delta_log ended show, history, query and runs in "run failed: DeltaError" (or
    a Rust stack frame) with exit 1, and a Delta source given a file in exit 1 from validate."""
    broken = project / "broken"
    write(broken / "_delta_log" / "00000000000000000000.json", "not json\n")
    said = f"the Delta table at {broken} cannot be read: Kernel error"
    for args in (("show", "broken"), ("history", "broken"), ("query", "select * from 'broken'")):
        code, out, err = cli(*args)
        assert code == 2 and said in err and "Traceback" not in out + err, (args, out + err)
    events = project / "warehouse" / "_tributary" / "events"
    write(events / "_delta_log" / "00000000000000000000.json", "not json\n")
    code, out, err = cli("runs")
    assert code == 2 and f"the Delta table at {events} cannot be read" in err, out + err

    delta_source = (
        "format: delta\n    path: stats.sql\n  unused_calls:\n    format: json\n    path: data/samples/service_calls/static"
    )
    write(demo, demo.read_text().replace("format: json\n    path: data/samples/service_calls/static", delta_source))
    write(project / "stats.sql", "select 1\n")
    code, out, err = cli("validate", "demo")
    assert code == 2 and "source 'calls': cannot read the Delta table at" in err and "0: <unknown>" not in err, out + err


def test_a_name_too_long_for_a_folder_is_bad_input(cli, project, demo):
    """A 300-character output name passed validate (its table's folder cannot exist), and `show`
    or `--profile` with such a name ended in "File name too long" (exit 1)."""
    long = "o" * 300
    write(demo, demo.read_text().replace("outputs:\n  stats:", f"outputs:\n  {long}:\n    from: stats"))
    code, _, err = cli("validate", "demo")
    assert code == 2 and "at most 128 characters" in err, err
    write(demo, GOOD)
    for args in (("show", long), ("validate", "--profile", long), ("validate", long), ("graph", "demo", "--svg", long + ".svg")):
        code, out, err = cli(*args)
        assert code == 2 and "--debug for the traceback" not in out + err, (args, out + err)  # said, not failed


def test_an_output_folder_that_cannot_be_read_is_bad_input_at_its_line(cli, project, demo, monkeypatch):
    """validate looks into an output's folder for files no table has; a folder it may not read
    ended in PermissionError, exit 1 (the OS is asked to refuse: these tests run as root)."""
    import os

    (project / "warehouse" / "stats").mkdir(parents=True)
    scandir = os.scandir

    def refused(path):
        if str(path).endswith("stats"):
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refused)
    code, _, err = cli("validate", "demo")
    assert code == 2 and "pipelines/demo.yaml:" in err and "cannot be read (Permission denied)" in err, err


@pytest.mark.parametrize(
    ("sql", "said", "not_said"),
    [
        ("select {{ source }} as x", "{{ source }} prints a function, not SQL", "sqlglot"),
        ("select {{ (2**256)**256 }} as x", "a number of more than 4,300 digits", "set_int_max_str_digits"),
    ],
)
def test_template_and_sql_mistakes_are_said_in_tributarys_words(cli, project, demo, sql, said, not_said):
    write(project / "sql" / "stats.sql", sql + "\n")
    code, out, err = cli("validate", "demo")
    assert code == 2 and said in err and not_said not in out + err, out + err


def test_sqlglot_says_nothing_of_its_own_on_validates_output(project, demo):
    """sqlglot logged "... contains unsupported syntax. Falling back to parsing as a 'Command'."
    onto stderr, in the middle of validate's ✗ line."""
    import os
    import subprocess
    import sys

    write(project / "sql" / "stats.sql", "execute immediate 'select 1'\n")
    env = {k: v for k, v in os.environ.items() if k != "TRIBUTARY_PROFILE"}
    done = subprocess.run(
        [sys.executable, "-m", "framework", "validate", "demo"], cwd=project, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "a SQL step holds one query" in done.stderr, done.stderr
    assert "Falling back to parsing" not in done.stdout + done.stderr, done.stdout + done.stderr


@pytest.mark.parametrize("name", ["../shared", "/etc/passwd", ".hidden"])
def test_a_profile_is_a_name_in_configs_not_a_path(cli, project, demo, name):
    """`--profile ../x` loaded x.yaml from beside the project (and an absolute path from anywhere)."""
    code, _, err = cli("plan", "demo", "--profile", name)
    assert code == 2 and f"profile '{name}' is a path" in err, err


DAILY = """\
name: daily
schedule: {cron: "0 0 * * *", start: 2026-11-01}
sources:
  rows:
    format: json
    path: "data/days/{{ interval_start.strftime('%Y-%m-%d') }}"
    schema: ts TIMESTAMP, n INT
steps:
  per_day:
    sql: select {{ interval_start }} as day, count(*) as rows from {{ source('rows') }}
outputs:
  per_day: {mode: merge, keys: [day]}
"""


def test_an_interval_a_run_would_get_wrong_is_refused_before_it_runs(cli, project):
    """A path rendered from the interval names one interval's files: a run over two days read the
    first day's alone and replaced both days' rows with them (exit 0); an interval that has not
    ended committed what had come so far as done; --full-refresh with --interval rebuilt every
    output from that one interval's rows."""
    write(project / "data" / "days" / "2026-11-01" / "a.json", '{"ts": "2026-11-01T10:00:00Z", "n": 1}\n')
    write(project / "pipelines" / "daily.yaml", DAILY)
    assert cli("validate", "daily", "--interval", "2026-11-01/2026-11-02")[0] == 0

    code, _, err = cli("run", "daily", "--interval", "2026-11-01/2026-11-03")
    assert code == 2 and "--interval 2026-11-01" in err and "2 of the schedule's intervals" in err, err
    assert "source 'rows'" in err and "tributary backfill daily --from 2026-11-01" in err, err
    code, _, err = cli("run", "daily", "--interval", "2099-01-01/2099-01-02")
    assert code == 2 and "has not ended" in err, err
    code, _, err = cli("run", "daily", "--interval", "2026-11-01/2026-11-02", "--full-refresh", "--yes")
    assert code == 2 and "--full-refresh" in err and "--interval" in err, err
    assert not (project / "warehouse" / "per_day").exists()

    # a path that does not read the interval reads every file, and SQL keeps the interval's rows
    code, _, err = cli("validate", "calls_per_interval", "--interval", "2026-11-02T08:00/2026-11-02T08:04")
    assert code == 0, err
    # an interval across two of the schedule's replaced half of each one's slice, and the run log took it for neither
    code, _, err = cli("run", "calls_per_interval", "--interval", "2026-11-02T08:01/2026-11-02T08:03")
    assert code == 2 and "does not begin and end where the schedule's intervals do" in err, err
    # the schedule's start: and end: bound every interval, by hand too
    code, _, err = cli("run", "calls_per_interval", "--interval", "2026-11-02T07:58/2026-11-02T08:00")
    assert code == 2 and "outside the schedule's start: and end:" in err, err
    assert not (project / "warehouse" / "calls_per_interval").exists()


def test_two_pipelines_writing_one_table_are_warned_about_at_validate(cli, project, demo):
    """A copied pipeline overwrote the other's table (validate passed, saying nothing)."""
    write(project / "pipelines" / "copy.yaml", GOOD.replace("name: demo", "name: copy"))
    code, out, err = cli("validate", "demo", "copy")
    assert code == 0, out + err
    assert "output 'stats' writes warehouse/stats, which pipeline(s) copy write too" in err, err
    assert "output 'stats' writes warehouse/stats, which pipeline(s) demo write too" in err, err


def test_a_yaml_merge_key_merges_the_mapping_it_names():
    """`<<: *row` (rows of a test sharing most values) was read as a key named '<<': "'static_calls'
    has no column '<<'"."""
    from framework.errors import BadInput
    from framework.spec.yaml_source import load_yaml

    text = "a: &row {x: 1, y: 2}\nb: {<<: *row, y: 3}\nc:\n  <<: [*row, {z: 9}]\n  x: 5\n"
    assert load_yaml(text, "f.yaml").data == {"a": {"x": 1, "y": 2}, "b": {"x": 1, "y": 3}, "c": {"x": 5, "y": 2, "z": 9}}
    with pytest.raises(BadInput, match="'<<' merges a mapping"):
        load_yaml("a: &v 1\nb: {<<: *v}\n", "f.yaml")
