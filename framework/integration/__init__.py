"""How well an integration step put tuples back together: completeness, recall and correct rate of
SWA and tumbling windows against the ground truth in their input (Li et al., §3.4), and the state
the windows held.

A different idea from Great Expectations' row checks (framework.quality): these figures compare a
step's units with the true instances. Each run measures the steps that declare `truth:` and
appends one row per step to <warehouse>/_tributary/integration_quality, where `on: integration`
expectations put thresholds on them.
"""
