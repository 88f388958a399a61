"""Shared pydantic base for spec models: unknown keys are errors with a 'did you mean'."""

from __future__ import annotations

import difflib
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, model_validator
from pydantic_core import PydanticCustomError

#: The longest name: it becomes a folder's name (a table, a checkpoint), and file systems take 255
#: bytes at most, with room left for what Tributary adds to it.
MAX_NAME = 128

#: Names of sources, steps and outputs: they become SQL view names, so plain identifiers.
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=MAX_NAME)]

#: Table names under the warehouse: `daily` or `sales.daily` (<warehouse>/sales/daily).
TableName = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$", max_length=2 * MAX_NAME + 1)
]

#: Window lengths and counts reach Spark as Java ints.
MAX_COUNT = 2**31 - 1


def _whole_number(value: Any) -> Any:
    """YAML's true/false are not numbers (pydantic would read true as 1)."""
    if isinstance(value, bool):
        raise ValueError("expected a whole number, not true/false")
    return value


#: A positive count that fits a Java int (window sizes, files per trigger).
Count = Annotated[int, BeforeValidator(_whole_number), Field(ge=1, le=MAX_COUNT)]
#: A Delta table version (a Java long).
Version = Annotated[int, BeforeValidator(_whole_number), Field(ge=0, le=2**63 - 1)]


def _words(name: str) -> list[str]:
    return sorted(name.lower().replace("-", "_").split("_"))


def closest(word: str, choices: list[str] | set[str]) -> str | None:
    """The choice `word` most likely means. The same words in another order come first
    (`expect_column_values_to_be_not_null` means `…_to_not_be_null`, though difflib, counting
    characters, finds `…_to_be_null` closer), then difflib's closest."""
    ordered = sorted(choices)
    if "_" in word:
        same_words = [choice for choice in ordered if _words(choice) == _words(word)]
        if same_words:
            return (difflib.get_close_matches(word, same_words, n=1, cutoff=0) or same_words)[0]
    matches = difflib.get_close_matches(word, ordered, n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, choices: list[str] | set[str]) -> str:
    match = closest(word, choices)
    if match:
        return f"did you mean '{match}'?"
    return f"valid: {', '.join(sorted(choices))}" if choices else ""


def problem_at(key: str, message: str, hint: str | None = None) -> PydanticCustomError:
    """An error a model's own validator finds in one of its keys, located at that key's line (not
    the model's) and with a hint (framework.spec.loader): raise it from a model validator."""
    return PydanticCustomError("at_key", "{message}", {"key": key, "message": message, "hint": hint or ""})


class SpecModel(BaseModel):
    """A part of the pipeline spec. Rejects unknown keys naming the closest valid one."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            allowed = {field.alias or name for name, field in cls.model_fields.items()}
            for key in data:
                if key not in allowed:
                    raise PydanticCustomError(
                        "unknown_key",
                        "unknown key '{key}'; {suggestion}",
                        {"key": key, "suggestion": did_you_mean(str(key), allowed)},
                    )
        return data
