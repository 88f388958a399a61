"""Validate's messages say what is wrong and what to write instead (issue 36, "Messages that should
say more"): the closest name by words, a `{{ … }}` value that needs quotes, indentation in plain
words, a misspelt macro, origin on text sources, `--var`, a per-side join event time, and answers
in bounded time.

These run without Spark (validate never starts a JVM), but for two small runs marked as such.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write

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
