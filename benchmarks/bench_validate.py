"""Wall time of `tributary validate pipelines/*.yaml` in a fresh process (target < 1 s).

.venv/bin/python benchmarks/bench_validate.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import REPO, example_copy, median_seconds, record


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    from framework.project import Project

    pipelines = [str(p.relative_to(REPO)) for p in Project(REPO).all_pipelines()]  # not their <name>.tests.yaml
    project = example_copy(Path(tempfile.mkdtemp(prefix="tributary-validate-")) / "project")

    def validate() -> None:
        subprocess.run([sys.executable, "-m", "framework", "validate", *pipelines], cwd=project, check=True, capture_output=True)

    def interpreter() -> None:
        subprocess.run([sys.executable, "-c", "pass"], check=True)

    validate()  # warm the file cache
    median, times = median_seconds(validate, args.repeat)
    bare, _ = median_seconds(interpreter, args.repeat)
    print(f"pipelines: {len(pipelines)}")
    print(f"tributary validate: median {median:.3f} s over {args.repeat} runs ({', '.join(f'{t:.3f}' for t in times)})")
    print(f"bare python start:  median {bare:.3f} s (baseline)")
    print(f"ratio validate / bare interpreter: {median / bare:.1f}x; target < 1 s: {'met' if median < 1 else 'MISSED'}")
    record("validate.all", median)


if __name__ == "__main__":
    main()
