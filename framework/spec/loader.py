"""Read a pipeline YAML file into a validated `Pipeline`, with errors at file:line:col."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from framework.errors import BadInput, Problem
from framework.spec.base import did_you_mean
from framework.spec.models import Pipeline
from framework.spec.step_vars import render_step_values
from framework.spec.steps import STEP_KINDS
from framework.spec.yaml_source import LocatedDocument, load_yaml_file


@dataclass(frozen=True)
class LoadedPipeline:
    """A validated pipeline and where it came from (for locating later errors)."""

    spec: Pipeline
    path: Path
    shown_as: str
    doc: LocatedDocument
    vars_used: frozenset[str] = frozenset()  # by `{{ var() }}` in step values (framework.spec.step_vars)

    def problem(self, message: str, at: tuple[Any, ...] = (), hint: str | None = None) -> Problem:
        line_col = self.doc.locate(at)
        line, col = line_col if line_col else (None, None)
        return Problem(message, file=self.shown_as, line=line, col=col, hint=hint)


def load_pipeline(path: Path, shown_as: str | None = None, variables: dict[str, Any] | None = None) -> LoadedPipeline:
    """The validated pipeline; `variables` (the profile's and the command line's) and the
    pipeline's own `vars:` fill `{{ var() }}` in step values first."""
    shown = shown_as or str(path)
    doc = load_yaml_file(path, shown)
    if doc.data is None:
        raise BadInput(Problem("the file is empty", file=shown, line=1, hint="a pipeline needs at least name, steps and outputs"))
    if not isinstance(doc.data, dict):
        raise BadInput(Problem("a pipeline file must be a mapping (name:, steps:, outputs: ...)", file=shown, line=1))
    own = doc.data.get("vars")
    used = render_step_values(doc, {**(own if isinstance(own, dict) else {}), **(variables or {})})
    try:
        spec = Pipeline.model_validate(doc.data)
    except ValidationError as e:
        raise BadInput(*validation_problems(e, doc)) from None
    loaded = LoadedPipeline(spec, path, shown, doc, frozenset(used))
    _check_names(loaded)
    return loaded


def _check_names(p: LoadedPipeline) -> None:
    spec = p.spec
    problems = []
    for name in spec.steps:
        if name in spec.sources:
            problems.append(
                p.problem(f"'{name}' is both a source and a step", ("steps", name), hint="give one of them another name")
            )
    for out_name in spec.outputs:
        step = spec.output_step(out_name)
        if step not in spec.steps:
            at = ("outputs", out_name, "from") if spec.outputs[out_name].from_ else ("outputs", out_name)
            problems.append(
                p.problem(
                    f"output '{out_name}' writes step '{step}', which does not exist",
                    at,
                    hint=did_you_mean(step, set(spec.steps)) + " (set 'from:' to the step to write)",
                )
            )
    if problems:
        raise BadInput(*problems)


def validation_problems(error: ValidationError, doc: LocatedDocument) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[tuple[Any, ...]] = set()
    for err in error.errors():
        loc = tuple(err["loc"])
        message, hint, loc = _describe(err, loc)
        if (loc, message) in seen:
            continue
        seen.add((loc, message))
        line_col = doc.locate(loc)
        line, col = line_col if line_col else (None, None)
        where = ".".join(str(part) for part in _keys_on_path(doc, loc))
        text = f"{where}: {message}" if where else message
        problems.append(Problem(text, file=doc.file, line=line, col=col, hint=hint))
    return problems[:10]


def _keys_on_path(doc: LocatedDocument, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """The parts of a pydantic loc that are real YAML keys, in order (a union tag such as a step's
    kind appears in the loc twice, once as the tag: it is named once)."""
    path: tuple[Any, ...] = ()
    for i, part in enumerate(loc):
        following = loc[i + 1] if i + 1 < len(loc) else None
        if following is not None and (*path, following) in doc.positions and (*path, part, following) not in doc.positions:
            continue
        if (*path, part) in doc.positions:
            path = (*path, part)
    return path


def _describe(err: Mapping[str, Any], loc: tuple[Any, ...]) -> tuple[str, str | None, tuple[Any, ...]]:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "unknown_key":
        return f"unknown key '{ctx['key']}'", ctx.get("suggestion") or None, (*loc, ctx["key"])
    if kind == "at_key":
        return str(ctx["message"]), ctx.get("hint") or None, (*loc, ctx["key"])
    if kind == "step_kind":
        message, hint, relative = _describe_step_kind(err.get("input"))
        return message, hint, (*loc, *relative)
    if kind == "missing":
        return f"missing required key '{loc[-1]}'", None, loc
    if kind == "union_tag_not_found":
        tag = str(ctx.get("discriminator", "")).strip("'")
        typo = _near_key(err.get("input"), tag)
        if typo is not None:
            return f"unknown key '{typo}'", f"did you mean '{tag}'?", (*loc, typo)
        return f"missing required key '{tag}'", "one of: json, csv, parquet, text, delta" if tag == "format" else None, loc
    if kind == "union_tag_invalid":
        return (
            f"{ctx.get('discriminator', 'value')} {ctx.get('tag')!r} is not one of {ctx.get('expected_tags')}",
            None,
            loc,
        )
    if kind == "value_error":
        return str(ctx.get("error", err["msg"])), None, loc
    if kind == "string_pattern_mismatch":
        return f"{err['input']!r} is not a valid name", "use letters, digits and _ (not starting with a digit)", loc
    if kind == "literal_error":
        return f"{err['input']!r} is not allowed; expected {ctx.get('expected')}", None, loc
    return err["msg"], None, loc


def _near_key(raw: Any, wanted: str) -> str | None:
    if isinstance(raw, dict):
        for key in raw:
            if did_you_mean(str(key), {wanted}).startswith("did you mean"):
                return str(key)
    return None


def _describe_step_kind(raw: Any) -> tuple[str, str | None, tuple[Any, ...]]:
    kinds = ", ".join(sorted(STEP_KINDS))
    if not isinstance(raw, dict):
        return "a step must be a mapping with one kind key", f"kinds: {kinds}", ()
    present = [k for k in raw if k in STEP_KINDS]
    if len(present) > 1:
        return f"a step is one kind, this one has {' and '.join(present)}", "split it into two steps", ()
    for key in raw:
        suggestion = did_you_mean(str(key), set(STEP_KINDS))
        if suggestion.startswith("did you mean"):
            return f"unknown step kind '{key}'", suggestion, (key,)
    return f"a step needs a kind key ({kinds})", None, ()
