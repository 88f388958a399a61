"""The pipeline spec: YAML with positions, the pydantic models of pipelines, steps and expectations.

The lightest layer: it imports no other part of Tributary but `framework.errors`, and no Spark or
Great Expectations, so `tributary validate` answers in well under a second.
"""
