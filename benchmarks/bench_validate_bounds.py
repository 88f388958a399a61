"""Wall time of `tributary validate` on three inputs that once kept it busy (issue 36): a 380 KB
query of 20,000 `OR` terms, a pipeline of 2,000 steps, a 100 KB cron expression. Each runs in a
fresh process with a time limit; `--tree` runs another checkout (e.g. main) for the figures
before. CPU seconds are printed beside wall time: on a shared machine they move less.

.venv/bin/python benchmarks/bench_validate_bounds.py [--tree PATH] [--limit 180] [--repeat 1] [--cases many_steps]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO

SOURCE = """\
name: {name}
{schedule}sources:
  calls:
    format: json
    path: data/calls
    schema: ts TIMESTAMP, client_ip STRING, response_ms INT
steps:
{steps}
outputs:
  {output}: {{}}
"""


def huge_query(project: Path) -> str:
    """20,000 `OR` terms: a 380 KB WHERE clause."""
    terms = " OR ".join(f"response_ms = {i}" for i in range(20_000))
    (project / "sql/big.sql").write_text(f"select client_ip, response_ms\nfrom {{{{ source('calls') }}}}\nwhere {terms}\n")
    text = SOURCE.format(name="big", schedule="", steps="  big:\n    sql: big.sql", output="big")
    (project / "pipelines/big.yaml").write_text(text)
    return "pipelines/big.yaml"


def many_steps(project: Path, count: int = 2_000) -> str:
    """A chain of `count` SQL steps, each reading the one before."""
    first = "  s0:\n    sql: select ts, client_ip, response_ms from {{ source('calls') }}"
    rest = [
        f"  s{i}:\n    sql: select ts, client_ip, response_ms + 1 as response_ms from {{{{ ref('s{i - 1}') }}}}"
        for i in range(1, count)
    ]
    text = SOURCE.format(name="many", schedule="", steps="\n".join([first, *rest]), output=f"s{count - 1}")
    (project / "pipelines/many.yaml").write_text(text)
    return "pipelines/many.yaml"


def huge_cron(project: Path) -> str:
    """A 100 KB minute field: 0,1,…,59 over and over."""
    minutes = ",".join(str(i % 60) for i in range(40_000))[:100_000].rstrip(",")
    steps = "  s:\n    sql: select * from {{ source('calls') }}"
    text = SOURCE.format(name="cron", schedule=f'schedule:\n  cron: "{minutes} * * * *"\n', steps=steps, output="s")
    (project / "pipelines/cron.yaml").write_text(text)
    return "pipelines/cron.yaml"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose framework/ runs")
    parser.add_argument("--limit", type=float, default=180.0, help="seconds before a run is stopped")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--cases", nargs="*", default=["huge_query", "many_steps", "huge_cron"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        for sub in ("pipelines", "sql", "configs", "data/calls"):
            (project / sub).mkdir(parents=True)
        (project / "configs/local.yaml").write_text("warehouse: ./warehouse\n")
        env = {**os.environ, "PYTHONPATH": str(args.tree.resolve()), "TRIBUTARY_ENGINE": "0"}
        print(f"tree: {args.tree.resolve()}; load average {os.getloadavg()[0]:.1f}")
        for case in (c for c in (huge_query, many_steps, huge_cron) if c.__name__ in args.cases):
            pipeline = case(project)
            for _ in range(args.repeat):
                cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
                began = time.perf_counter()
                try:
                    done = subprocess.run(
                        [sys.executable, "-m", "framework", "validate", pipeline],
                        cwd=project,
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=args.limit,
                    )
                    seconds, said = time.perf_counter() - began, f"exit {done.returncode}"
                    last = (done.stdout + done.stderr).strip().splitlines()
                    said += f": {last[-1][:110] if last else ''}"
                except subprocess.TimeoutExpired:
                    seconds, said = time.perf_counter() - began, f"stopped at the {args.limit:.0f} s limit"
                cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
                # CPU time counts a child only once it is waited for: a stopped run's is in its wall time
                print(f"{case.__name__:<11} {seconds:7.1f} s wall, {cpu:6.1f} s CPU  {said}")


if __name__ == "__main__":
    main()
