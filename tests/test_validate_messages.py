"""Validate's messages say what is wrong and what to write instead (issue 36, "Messages that should
say more"): the closest name by words, a `{{ … }}` value that needs quotes, indentation in plain
words, a misspelt macro, origin on text sources, `--var`, a per-side join event time, and answers
in bounded time.

These run without Spark (validate never starts a JVM), but for two small runs marked as such.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import empty_generated_folders, write

SERVICE_INSTANCES = "pipelines/service_instances.yaml"


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


# 1. A word-order swap beats a dropped word ------------------------------------------------------


def test_a_swapped_expectation_name_suggests_the_same_words(cli, project):
    replace_in(
        project / SERVICE_INSTANCES,
        "expect_column_values_to_not_be_null: {column: head_service}",
        "expect_column_values_to_be_not_null: {column: head_service}",
    )
    code, _, err = cli("validate", SERVICE_INSTANCES)
    assert code == 2
    assert "unknown expectation 'expect_column_values_to_be_not_null'" in err
    assert "did you mean 'expect_column_values_to_not_be_null'?" in err


def test_closest_ranks_the_same_words_first():
    from framework.spec.base import closest

    choices = ["expect_column_values_to_be_null", "expect_column_values_to_not_be_null"]
    assert closest("expect_column_values_to_be_not_null", choices) == "expect_column_values_to_not_be_null"
    assert closest("expect_column_values_to_be_nul", choices) == "expect_column_values_to_be_null"
    assert closest("service_head", ["head_service", "service"]) == "head_service"


# 2. An unquoted `{{ … }}` value -----------------------------------------------------------------


def test_an_unquoted_template_value_says_quote_it(cli, project):
    pipeline = project / SERVICE_INSTANCES
    replace_in(pipeline, "      size: 13\n", "      size: {{ var('n') }}\n")
    replace_in(pipeline, "\nsources:\n", "\nvars:\n  n: 13\nsources:\n")
    code, _, err = cli("validate", SERVICE_INSTANCES)
    assert code == 2
    assert "a key must be a plain value" not in err
    line = pipeline.read_text().splitlines().index("      size: {{ var('n') }}") + 1
    assert f"{SERVICE_INSTANCES}:{line}:" in err
    assert "quote" in err and "size: \"{{ var('n') }}\"" in err


def test_a_quoted_template_value_validates(cli, project):
    empty_generated_folders(project)  # its data is made by `tributary generate`
    pipeline = project / SERVICE_INSTANCES
    replace_in(pipeline, "      size: 13\n", "      size: \"{{ var('n') }}\"\n")
    replace_in(pipeline, "\nsources:\n", "\nvars:\n  n: 13\nsources:\n")
    code, out, err = cli("validate", SERVICE_INSTANCES)
    assert code == 0, err


def test_an_unquoted_template_at_the_start_of_a_longer_value_says_quote_it(cli, project):
    pipeline = project / "pipelines/service_calls.yaml"
    replace_in(pipeline, "    path: data/samples/service_calls/static\n", "    path: {{ var('root') }}/static\n")
    code, _, err = cli("validate", "pipelines/service_calls.yaml")
    assert code == 2
    assert "pipelines/service_calls.yaml:15:" in err
    assert "quote" in err and "path: \"{{ var('root') }}/static\"" in err


# 3. Indentation in plain words ----------------------------------------------------------------

INDENTED = """\
name: demo
sources:
  calls:
    format: json
    path: data/samples/service_calls/static
    schema: ts TIMESTAMP, head_service STRING
steps:
  recent:
    sql: select head_service from {{ source('calls') }}
outputs:
  recent: {}
"""


@pytest.mark.parametrize(
    ("good", "bad", "aligns_with"),
    [
        # a key between two levels: lines up with neither `recent:` (2) nor `sql:` (4)
        ("outputs:\n", "   description: x\noutputs:\n", "recent"),
        ("  recent:\n    sql", "  recent:\n      description: x\n    sql", "description"),
        # one column left of its siblings
        ("    schema: ts", "   schema: ts", "path"),
    ],
)
def test_bad_indentation_is_said_in_plain_words(cli, project, good, bad, aligns_with):
    text = INDENTED.replace(good, bad, 1)
    assert text != INDENTED
    write(project / "pipelines/demo.yaml", text)
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "expected <block end>" not in err and "block mapping" not in err
    assert "indent" in err and "line up" in err, err
    if aligns_with:
        assert aligns_with in err


def test_a_key_at_the_level_of_a_list_is_said_in_plain_words(cli, project):
    text = INDENTED.replace("  recent: {}\n", "  recent:\n    partition_by:\n    - day\n    mode: append\n")
    text = text.replace(
        "    partition_by:\n    - day\n    mode: append\n", "    partition_by:\n      - day\n      mode: append\n"
    )
    write(project / "pipelines/demo.yaml", text)
    code, _, err = cli("validate", "pipelines/demo.yaml")
    assert code == 2
    assert "found '?'" not in err and "<block end>" not in err
    assert "pipelines/demo.yaml:14:" in err
    assert "list" in err and "mode: append" in err and "- day" in err, err


# 4. A misspelt macro ----------------------------------------------------------------------------


def test_a_misspelt_macro_suggests_the_closest(cli, project):
    replace_in(project / "sql/service_stats.sql", "{{ p95('response_ms') }}", "{{ p59('response_ms') }}")
    code, _, err = cli("validate", "pipelines/service_calls.yaml")
    assert code == 2
    assert "sql/service_stats.sql:8:" in err and "'p59' is undefined" in err
    assert "did you mean 'p95'?" in err and "sql/macros/stats.sql" in err


def test_a_misspelt_function_of_the_template_suggests_it(cli, project):
    replace_in(project / "sql/service_stats.sql", "{{ ref('all_calls') }}", "{{ reff('all_calls') }}")
    code, _, err = cli("validate", "pipelines/service_calls.yaml")
    assert code == 2
    assert "did you mean 'ref'?" in err


def test_an_unknown_name_far_from_any_keeps_the_general_hint(cli, project):
    replace_in(project / "sql/service_stats.sql", "{{ p95('response_ms') }}", "{{ quantile_of('response_ms') }}")
    code, _, err = cli("validate", "pipelines/service_calls.yaml")
    assert code == 2
    assert "did you mean" not in err
    assert "a macro" in err


# 5. `origin: true` on a text source -------------------------------------------------------------

ORIGIN_LOGS = """\
name: logs
mode: batch
sources:
  access:
    format: text
    path: data/logs
    origin: {origin}
steps:
  lines:
    sql: select _file, _line, value from {{{{ source('access') }}}}
outputs:
  lines: {{}}
"""


def test_origin_true_is_accepted_on_a_text_source(cli, project):
    write(project / "data/logs/a.log", "first\nsecond\n")
    write(project / "pipelines/logs.yaml", ORIGIN_LOGS.format(origin="true"))
    code, out, err = cli("validate", "pipelines/logs.yaml", "--explain", "access")
    assert code == 0, err
    assert "_file" in out and "_line" in out


def test_origin_false_on_a_text_source_says_why_not(cli, project):
    write(project / "data/logs/a.log", "first\nsecond\n")
    write(project / "pipelines/logs.yaml", ORIGIN_LOGS.format(origin="false"))
    code, _, err = cli("validate", "pipelines/logs.yaml")
    assert code == 2
    assert "pipelines/logs.yaml:7:" in err and "always" in err and "_file" in err


@pytest.mark.spark
def test_a_text_source_with_origin_true_reads_each_line_once_with_its_place(spark, cli, project):
    from tests.conftest import delta_rows

    write(project / "data/logs/a.log", "first\nsecond\n")
    write(project / "data/logs/b.log", "third")
    write(project / "pipelines/logs.yaml", ORIGIN_LOGS.format(origin="true"))
    code, out, err = cli("run", "logs")
    assert code == 0, out + err
    rows = delta_rows(project / "warehouse/lines")
    assert sorted((Path(r["_file"]).name, r["_line"], r["value"]) for r in rows) == [
        ("a.log", 1, "first"),
        ("a.log", 2, "second"),
        ("b.log", 1, "third"),
    ]
    assert sorted(rows[0]) == ["_file", "_line", "value"]


# 6. `validate --var` ----------------------------------------------------------------------------


def test_validate_takes_vars_from_the_command_line(cli, project):
    replace_in(
        project / "pipelines/service_calls.yaml", "  min_calls: 1                   # drop services seen fewer times\n", ""
    )
    code, _, err = cli("validate", "pipelines/service_calls.yaml")
    assert code == 2 and "min_calls" in err
    code, out, err = cli("validate", "pipelines/service_calls.yaml", "--var", "min_calls=2")
    assert code == 0, err


# 7. A join's event time per input -------------------------------------------------------------

FLIGHTS = """\
name: flights
mode: batch
sources:
  departures:
    format: json
    path: data/flights/departures
    schema: origin STRING, dep_time TIMESTAMP, flight STRING
  weather:
    format: json
    path: data/flights/weather
    schema: origin STRING, obs_time TIMESTAMP, temp DOUBLE
steps:
  flight_weather:
    join:
      left: departures
      right: weather
      on: [origin]
      event_time: {event_time}
      within: {{before: 1h, after: 0s}}
outputs:
  flight_weather: {{}}
"""


def flights(project: Path, event_time: str) -> Path:
    write(
        project / "data/flights/departures/d.json",
        '{"origin": "BOS", "dep_time": "2026-11-01T10:30:00", "flight": "B6 1"}\n'
        '{"origin": "JFK", "dep_time": "2026-11-01T11:00:00", "flight": "AA 2"}\n',
    )
    write(
        project / "data/flights/weather/w.json",
        '{"origin": "BOS", "obs_time": "2026-11-01T10:00:00", "temp": 3.5}\n'
        '{"origin": "BOS", "obs_time": "2026-11-01T08:00:00", "temp": 1.0}\n'
        '{"origin": "JFK", "obs_time": "2026-11-01T11:30:00", "temp": 9.0}\n',
    )
    return write(project / "pipelines/flights.yaml", FLIGHTS.format(event_time=event_time))


def test_a_join_takes_an_event_time_per_input(cli, project):
    flights(project, "{left: dep_time, right: obs_time}")
    code, out, err = cli("validate", "pipelines/flights.yaml", "--explain", "flight_weather")
    assert code == 0, err
    assert "dep_time" in out and "obs_time" in out


def test_a_join_still_takes_one_event_time_for_both(cli, project):
    flights(project, "dep_time")
    code, _, err = cli("validate", "pipelines/flights.yaml")
    assert code == 2
    line = FLIGHTS.splitlines().index("      event_time: {event_time}") + 1
    assert f"pipelines/flights.yaml:{line}:" in err
    assert "event_time column 'dep_time' is not in input 'weather'" in err
    assert "is not in input 'departures'" not in err


@pytest.mark.parametrize(
    ("event_time", "side", "missing"),
    [("{left: dep_tme, right: obs_time}", "departures", "dep_tme"), ("{left: dep_time, right: obs_tim}", "weather", "obs_tim")],
)
def test_a_missing_event_time_column_is_named_per_input(cli, project, event_time, side, missing):
    flights(project, event_time)
    code, _, err = cli("validate", "pipelines/flights.yaml")
    assert code == 2
    assert f"event_time column '{missing}' is not in input '{side}'" in err
    assert "did you mean" in err
    other = "weather" if side == "departures" else "departures"
    assert f"is not in input '{other}'" not in err


@pytest.mark.spark
def test_a_batch_join_with_an_event_time_per_input_pairs_by_those_times(spark, cli, project):
    from tests.conftest import delta_rows

    flights(project, "{left: dep_time, right: obs_time}")
    code, out, err = cli("run", "flights")
    assert code == 0, out + err
    rows = delta_rows(project / "warehouse/flight_weather")
    # BOS 10:30 meets the 10:00 observation (within the hour before), not 08:00; JFK's is after it
    assert sorted((r["flight"], r["temp"]) for r in rows) == [("B6 1", 3.5)]
    assert {"origin", "dep_time", "flight", "obs_time", "temp"} == set(rows[0])


# 8. Answers in bounded time ---------------------------------------------------------------------
# Measured before and after by benchmarks/bench_validate_bounds.py; here only a generous bound.

CALLS = """\
name: {name}
sources:
  calls:
    format: json
    path: data/calls
    schema: ts TIMESTAMP, client_ip STRING, response_ms INT
steps:
{steps}
outputs:
  {output}: {{}}
"""


def timed_validate(cli, *args: str) -> tuple[float, int, str, str]:
    import time

    Path("data/calls").mkdir(parents=True, exist_ok=True)  # the sources' folder (cli runs in the project)
    began = time.perf_counter()
    code, out, err = cli("validate", *args)
    return time.perf_counter() - began, code, out, err


def test_a_huge_query_skips_the_column_check_with_a_note_at_its_line(cli, project):
    terms = " OR ".join(f"response_ms = {i}" for i in range(20_000))  # 380 KB
    write(project / "sql/big.sql", f"select client_ip, response_ms\nfrom {{{{ source('calls') }}}}\nwhere {terms}\n")
    steps = "  big:\n    sql: big.sql\n  after_big:\n    sql: select client_ip, not_a_column from {{ ref('big') }}"
    write(project / "pipelines/big.yaml", CALLS.format(name="big", steps=steps, output="after_big"))
    seconds, code, out, err = timed_validate(cli, "pipelines/big.yaml")
    assert code == 0, err
    assert seconds < 60, f"validate took {seconds:.1f} s"
    notes = out + err
    assert "sql/big.sql:1:" in notes and "not checked" in notes


def test_a_small_query_is_still_checked_in_full(cli, project):
    terms = " OR ".join(f"response_ms = {i}" for i in range(50))
    write(
        project / "sql/small.sql",
        f"select client_ip, response_ms\nfrom {{{{ source('calls') }}}}\nwhere {terms} or respons_ms < 0\n",
    )
    write(project / "pipelines/small.yaml", CALLS.format(name="small", steps="  small:\n    sql: small.sql", output="small"))
    code, _, err = cli("validate", "pipelines/small.yaml")
    assert code == 2
    assert "sql/small.sql:3:" in err and "unknown column 'respons_ms'" in err


def test_a_huge_cron_expression_is_refused_at_once(cli, project):
    minutes = ",".join(str(i % 60) for i in range(40_000))[:100_000].rstrip(",")  # 100 KB
    steps = "  s:\n    sql: select * from {{ source('calls') }}"
    text = CALLS.format(name="cron", steps=steps, output="s").replace(
        "sources:", f'schedule:\n  cron: "{minutes} * * * *"\nsources:', 1
    )
    write(project / "pipelines/cron.yaml", text)
    seconds, code, _, err = timed_validate(cli, "pipelines/cron.yaml")
    assert code == 2
    assert seconds < 10, f"validate took {seconds:.1f} s"
    assert "pipelines/cron.yaml:3:" in err and "cron" in err and "characters" in err


def test_past_the_pipeline_budget_the_column_check_stops_with_one_note(cli, project):
    from framework.schemas.query_size import PIPELINE_BUDGET, QUERY_OVERHEAD

    count = PIPELINE_BUDGET // QUERY_OVERHEAD + 50  # more tiny queries than the budget holds
    first = "  s0:\n    sql: select ts, client_ip, respons_ms from {{ source('calls') }}"
    rest = [f"  s{i}:\n    sql: select ts, client_ip from {{{{ ref('s{i - 1}') }}}}" for i in range(1, count)]
    write(project / "pipelines/many.yaml", CALLS.format(name="many", steps="\n".join([first, *rest]), output=f"s{count - 1}"))
    seconds, code, _, err = timed_validate(cli, "pipelines/many.yaml")
    assert code == 2 and "unknown column 'respons_ms'" in err  # the first steps are checked
    assert seconds < 120, f"validate took {seconds:.1f} s"
    replace_in(project / "pipelines/many.yaml", "respons_ms", "response_ms")
    code, out, err = cli("validate", "pipelines/many.yaml")
    assert code == 0, err
    assert (out + err).count("column-check budget") == 1


def test_a_location_at_line_100_is_printed_as_written(cli, project):
    """`file.yaml:100:7` is a location, not the emoji code `:100:` (Rich would print 💯)."""
    body = "name: hundred\n" + "".join(f"# line {i}\n" for i in range(2, 99)) + "sources:\n  b: x: y\n"  # line 100
    write(project / "pipelines/hundred.yaml", body)
    code, out, err = cli("validate", "hundred")
    assert code == 2
    assert "💯" not in out + err and "hundred.yaml:100:7" in out + err
