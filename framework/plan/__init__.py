"""The run plan: a compiled pipeline turned into what one run reads, builds, checks and writes.

model.py holds the plan as data; planner.py builds it. The engine (framework.engine) executes it.
"""

from framework.plan.model import CheckScope, PlannedOutput, PlannedSource, PlannedStep, QuarantineSplit, RunMode, RunPlan, Sample
from framework.plan.planner import plan_for, plan_run

__all__ = [
    "CheckScope",
    "PlannedOutput",
    "PlannedSource",
    "PlannedStep",
    "QuarantineSplit",
    "RunMode",
    "RunPlan",
    "Sample",
    "plan_for",
    "plan_run",
]
