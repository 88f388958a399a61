"""Reports about runs: `tributary report` turns one run's logged records into one HTML page."""

from framework.reporting.html_report import RunReport, gather_run, render_html

__all__ = ["RunReport", "gather_run", "render_html"]
