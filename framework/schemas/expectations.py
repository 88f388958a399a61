"""Expectations against the columns of the rows they check, before Spark starts: a column an
expectation names must be there, and of a type it can judge.

Only certain failures are reported, said as the run says them (framework.engine.frames). A column
missing from a complete schema is one (the run refuses it too, for every expectation on rows). Types: the
statistics (mean, median, quantiles, sum, standard deviation, z-scores) need numbers, and Spark
refuses them on booleans, dates, timestamps, binary and nested types (a string column may still
hold numbers Spark casts, so it passes); lengths, regular expressions and LIKE patterns need text,
and Spark refuses them on arrays, maps and structs; Great Expectations refuses values between
bounds on strings.
"""

from __future__ import annotations

from typing import Any

from framework.errors import Problem
from framework.schemas.columns import Schema, is_complex, is_numeric, is_text, shown
from framework.spec.expectation_catalog import COLUMN_ARGS

NUMERIC = frozenset(
    {
        "expect_column_mean_to_be_between",
        "expect_column_median_to_be_between",
        "expect_column_quantile_values_to_be_between",
        "expect_column_stdev_to_be_between",
        "expect_column_sum_to_be_between",
        "expect_column_value_z_scores_to_be_less_than",
    }
)
TEXT = frozenset(
    {
        "expect_column_value_lengths_to_be_between",
        "expect_column_value_lengths_to_equal",
        "expect_column_values_to_match_regex",
        "expect_column_values_to_not_match_regex",
        "expect_column_values_to_match_regex_list",
        "expect_column_values_to_not_match_regex_list",
        "expect_column_values_to_match_like_pattern",
        "expect_column_values_to_not_match_like_pattern",
        "expect_column_values_to_match_like_pattern_list",
        "expect_column_values_to_not_match_like_pattern_list",
    }
)


def expectation_column_problems(loaded: Any, at: tuple[str, str], expectations: list[Any], schema: Schema) -> list[Problem]:
    """Problems of a step's or output's (`at`) row expectations against its schema, at the YAML
    line of the column named (`loaded` is the framework.spec.loader.LoadedPipeline)."""
    problems = []
    what = f"{at[0][:-1]} '{at[1]}'"
    for i, expectation in enumerate(expectations):
        if expectation.on != "rows":
            continue
        named = [
            (arg, j, column, (*at, "expectations", i, expectation.name, arg, *(() if j is None else (j,))))
            for arg, j, column in _named(expectation.kwargs)
        ]
        absent = [(column, where) for _, _, column, where in named if schema.lacks(column)]
        if absent:
            problems.append(
                loaded.problem(
                    f"{what}: {expectation.name} names column(s) {[c for c, _ in absent]} that it does not have",
                    absent[0][1],
                    hint=schema.hint(absent[0][0], "it"),
                )
            )
            continue
        for _, _, column, where in named:
            found = schema.find(column)
            type_ = found.known_type if found is not None else None
            if type_ is None:
                continue
            if expectation.name in NUMERIC and not (is_numeric(type_) or is_text(type_)):
                problems.append(
                    loaded.problem(
                        f"{what}: {expectation.name} needs a numeric column; '{column}' is {shown(type_)}",
                        where,
                        hint="check a numeric column, or cast this one in a SQL step",
                    )
                )
            elif expectation.name == "expect_column_values_to_be_between" and is_text(type_):
                problems.append(  # Great Expectations refuses it on Spark's strings (with drop: a KeyError)
                    loaded.problem(
                        f"{what}: {expectation.name} compares numbers, dates or times; '{column}' is {shown(type_)}",
                        where,
                        hint="cast it in a SQL step (e.g. cast(x as int)), or check its text with a regex",
                    )
                )
            elif expectation.name in TEXT and is_complex(type_):
                problems.append(
                    loaded.problem(
                        f"{what}: {expectation.name} needs a text column; '{column}' is {shown(type_)}",
                        where,
                        hint="check each element in a SQL step (e.g. explode it), or a text column",
                    )
                )
    return problems


def _named(kwargs: dict[str, Any]) -> list[tuple[str, int | None, str]]:
    """(argument, position in a list or None, column) of each column the arguments name."""
    named: list[tuple[str, int | None, str]] = []
    for arg in COLUMN_ARGS:
        value = kwargs.get(arg)
        if isinstance(value, list):
            named += [(arg, j, str(c)) for j, c in enumerate(value)]
        elif value is not None:
            named.append((arg, None, str(value)))
    return named
