"""Reports about runs: `tributary report` reads one run's logged records (gather.py) into a
RunReport (model.py) and renders it as one HTML page (render.py)."""

from framework.reporting.gather import gather_run
from framework.reporting.model import RunReport
from framework.reporting.render import render_html

__all__ = ["RunReport", "gather_run", "render_html"]
