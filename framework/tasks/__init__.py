"""What a command does, without the terminal: each function here takes a project context
(framework.project_context), does one command's work and returns data the CLI renders.

The CLI parses flags and renders; the work lives here or in the package that owns it (a run is
`ProjectContext.run`, a schedule's outlook is framework.schedule). These are the commands whose
work spans packages: validating many pipelines against the run history, predicting capacity,
tuning a window and evaluating integration quality. As dbt's commands build a Task and hand over,
and SQLMesh's call one method of their Context.
"""
