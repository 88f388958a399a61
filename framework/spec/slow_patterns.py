"""Regular expressions in a pipeline that may never finish on some value: said as warnings.

Why: Spark runs an expectation's regex and a text source's `parse.pattern` with java.util.regex,
which backtracks and has no time limit. A pattern that repeats a repetition (`(a+)+$`) takes
exponential time on a long value that almost matches, so one such value in the data stops the
run for good (Ctrl-C or the schedule's `timeout:` end it). Such patterns are usually meant, and
usually fine on the data at hand, so they are not refused: `validate` and the run say where they
are and how to write them so that each character has one way to match.
"""

from __future__ import annotations

from framework.errors import Problem
from framework.spec.java_regex import repeats_a_repetition
from framework.spec.loader import LoadedPipeline
from framework.spec.models import TextSource

HINT = (
    "on a long value that almost matches, Java tries every way to split it between the repetitions "
    "(exponential time, no time limit): repeat a part once (\\d+ not (\\d+)+), end each round with a character "
    "the inner part cannot match (([a-z]+\\.)+), or make the inner part possessive (a++)"
)


def slow_pattern_warnings(loaded: LoadedPipeline) -> list[Problem]:
    """One warning per regex of the spec that repeats a repetition ambiguously, at its line."""
    spec = loaded.spec
    found: list[tuple[str, tuple[object, ...]]] = []
    for name, source in spec.sources.items():
        if isinstance(source, TextSource) and source.parse is not None:
            found.append((source.parse.pattern, ("sources", name, "parse", "pattern")))
    owners = [("steps", name, step) for name, step in spec.steps.items()]
    owners += [("outputs", name, output) for name, output in spec.outputs.items()]
    for part, name, owner in owners:
        for i, expectation in enumerate(getattr(owner, "expectations", None) or []):
            for arg in ("regex", "regex_list"):
                value = expectation.kwargs.get(arg)
                for pattern in value if isinstance(value, list) else [value]:
                    if isinstance(pattern, str):
                        found.append((pattern, (part, name, "expectations", i, expectation.name, arg)))
    return [
        loaded.problem(
            f"the regular expression {pattern!r} repeats a repetition: some values could make it run for ever", at, HINT
        )
        for pattern, at in found
        if repeats_a_repetition(pattern)
    ]
