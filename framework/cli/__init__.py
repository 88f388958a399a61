"""The `tributary` command line: framework/cli/app.py is the root, one module per activity
(author, run, look, report, schedule, tune, engine, generate) holds its commands."""

from framework.cli.app import app, main

__all__ = ["app", "main"]
