"""The pipeline spec as JSON Schema, for editors (yaml-language-server) and other tools."""

from __future__ import annotations

from typing import Any

from framework.spec.models import Pipeline


def pipeline_json_schema() -> dict[str, Any]:
    schema = Pipeline.model_json_schema(by_alias=True, mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema, "title": "Tributary pipeline"}
