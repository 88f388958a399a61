"""What the checks that need no Spark find (framework.operators.registry: a kind's `checks`,
`output_schema`): a module of its own, so that the column helpers (framework.operators.columns)
can say problems without importing the registry, which imports them back through the operators'
context (no import circle).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SpecProblem:
    """A problem found without Spark, at a path inside the step's YAML (below its name)."""

    message: str
    at: tuple[str | int, ...] = ()
    hint: str = ""
