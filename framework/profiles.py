"""Profiles (configs/<name>.yaml): where Spark runs, where the warehouse is, which Delta writer.

`local` is the embedded default. Values may use ${ENV} or ${ENV:-default}.
"""

from __future__ import annotations

import os
import re
from typing import Any, Literal

from pydantic import Field, ValidationError

from framework.errors import BadInput, Problem
from framework.project import Project
from framework.spec.base import SpecModel, did_you_mean
from framework.spec.yaml_source import load_yaml_file

DEFAULT_PROFILE = "local"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class SparkSettings(SpecModel):
    master: str | None = Field("local[*]", description="Spark master URL, e.g. local[*] or spark://host:7077.")
    remote: str | None = Field(None, description="Spark Connect URL (sc://host:15002); used instead of master.")
    remote_silence_s: float | None = Field(
        60.0,
        gt=0,
        description="Spark Connect: a run gives up on a server that answered nothing for this many seconds "
        "(a frozen process, a lost network) and fails with exit 1; null waits for it as long as it takes.",
    )
    app_name: str = "tributary"
    conf: dict[str, str | int | float | bool] = Field(default_factory=dict, description="Extra Spark confs.")


class Profile(SpecModel):
    """Where and how pipelines run."""

    name: str = DEFAULT_PROFILE
    spark: SparkSettings = Field(default_factory=SparkSettings)
    warehouse: str = Field("./warehouse", description="Folder or URI holding the Delta tables.")
    delta_writer: Literal["auto", "delta-rs", "spark"] = Field(
        "auto", description="auto: Spark's Delta writer when its jars are on the classpath, else delta-rs."
    )
    vars: dict[str, Any] = Field(default_factory=dict, description="Values for var(), over the pipeline's defaults.")
    storage_options: dict[str, str] = Field(default_factory=dict, description="Object-store options for delta-rs.")
    sql_policy: Literal["default", "strict"] = Field(
        "default",
        description="strict: a step's SQL may read only its declared sources, refs and CTEs and call only Spark's built-ins "
        "(minus those that reach outside: reflect, java_method, xpath, ...) and the project's udfs; no scripts. Checked at "
        "validate and again on the SQL Spark receives (docs/security.md).",
    )
    scratch: str | None = Field(
        None,
        description="Where `tributary run --limit` writes (a warehouse of its own; default: .tributary/scratch beside the warehouse).",
    )
    engine: Literal["warm", "embedded"] = Field(
        "warm",
        description="warm: a local profile's runs go through a long-lived engine process shared between commands "
        "(tributary engine status); embedded: every command starts its own Spark.",
    )
    engine_idle_minutes: float = Field(
        15.0, gt=0, description="A warm engine stops after this many minutes without work ($TRIBUTARY_ENGINE_IDLE overrides)."
    )
    external_roots: list[str] = Field(
        default_factory=list,
        description="Folders or URIs outside the warehouse that outputs may write to with path: (nothing else is allowed).",
    )


def load_profile(project: Project, name: str | None = None) -> Profile:
    name = name or os.environ.get("TRIBUTARY_PROFILE") or DEFAULT_PROFILE
    if "/" in name or "\\" in name or name.startswith("."):
        raise BadInput(
            Problem(
                f"profile '{name}' is a path; a profile is named by its file in {project.relative(project.configs_dir)}/",
                hint="give its name (e.g. local for configs/local.yaml), or copy the file into configs/",
            )
        )
    path = project.configs_dir / f"{name}.yaml"
    try:
        found = path.is_file()
    except OSError:  # a name too long for the file system
        found = False
    if not found:
        known = sorted(p.stem for p in project.configs_dir.glob("*.yaml")) if project.configs_dir.is_dir() else []
        if name == DEFAULT_PROFILE and not known:
            return Profile()
        raise BadInput(
            Problem(f"profile '{name}' not found in {project.relative(project.configs_dir)}/", hint=did_you_mean(name, known))
        )
    doc = load_yaml_file(path, project.relative(path))
    unset: list[str] = []
    data = _expand_env(doc.data or {}, unset)
    if unset:
        text = path.read_text(encoding="utf-8", errors="replace")
        raise BadInput(
            *(
                Problem(
                    f"${{{name}}} is not set in the environment, and the profile gives no default",
                    file=project.relative(path),
                    line=_line_of(text, "${" + name + "}"),
                    hint=f"set {name}, or give a default: ${{{name}:-value}}",
                )
                for name in dict.fromkeys(unset)
            )
        )
    if not isinstance(data, dict):
        raise BadInput(Problem("a profile must be a mapping", file=doc.file, line=1))
    data.setdefault("name", name)
    try:
        return Profile.model_validate(data)
    except ValidationError as e:
        from framework.spec.loader import validation_problems  # the pipeline models: only for a bad profile

        raise BadInput(*validation_problems(e, doc)) from None


def _expand_env(value: Any, unset: list[str]) -> Any:
    """${NAME} and ${NAME:-default} as a shell reads them: the default also when NAME is set but
    empty (an empty WAREHOUSE made the project folder the warehouse); a NAME without a default that
    is not set goes to `unset` (said as bad input, not read as "")."""
    if isinstance(value, str):

        def expanded(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if os.environ.get(name):
                return os.environ[name]
            if default is None and name not in os.environ:
                unset.append(name)
            return default or ""

        return _ENV_REF.sub(expanded, value)
    if isinstance(value, dict):
        return {k: _expand_env(v, unset) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_env(v, unset) for v in value]
    return value


def _line_of(text: str, written: str) -> int:
    """The line where `written` first stands outside a comment (else where it first stands)."""
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if written in line.split("#", 1)[0]:
            return number
    return next((n for n, line in enumerate(lines, 1) if written in line), 1)
