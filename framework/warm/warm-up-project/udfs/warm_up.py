"""The warm-up project's functions: a SQL udf and a group function, so the warm-up runs pandas
udfs and a group step's Python workers as a project's would."""

from __future__ import annotations

from typing import Any

from framework.functions import group_function, udf


@udf(returns="double")
def doubled(values):  # type: ignore[no-untyped-def]  # a pandas Series (annotations would make pandas read them)
    return values * 2.0


@group_function(returns="events bigint, total double")
def summed(events: Any, state: Any, args: Any) -> list[dict[str, Any]]:
    return [{"events": len(events), "total": float(events["v"].sum())}]
