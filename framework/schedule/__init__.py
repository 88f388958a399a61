"""Scheduled runs: Tributary runs its pipelines by their `schedule:` on one machine.

- pipelines.py: which pipelines have a schedule, read from their YAML alone;
- history.py: what the run log (<warehouse>/_tributary/events) and the output tables' Delta
  commits say was run, per time interval, and the rows of `tributary runs`;
- due.py: which intervals are due now and when the next one is (`tributary next`);
- attempt.py: one run in this process under the pipeline's lock, with a timeout, logged;
- alerts.py: on_failure / on_success commands; clock.py: the clock (a fast one in tests);
- scheduler.py: `tributary scheduler`; backfill.py: `tributary backfill`.

Nothing here keeps state of its own: what is done, what failed and how often come from the run log
and the Delta commits, so a scheduler killed at any moment resumes where it was.
"""
