"""Type check framework/ with mypy against a recorded baseline that may only shrink.

The baseline (.ci/mypy-baseline.txt) counts mypy's errors per file. A file with more errors than
it records, or errors in a file it does not list, fails the check; fewer errors pass and ask for
the baseline to be rewritten (`python .ci/mypy_baseline.py --update`), so it only ever shrinks.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / ".ci" / "mypy-baseline.txt"
ERROR = re.compile(r"^(?P<file>[^:]+):\d+(?::\d+)?: error: ")


def errors() -> tuple[Counter[str], list[str]]:
    done = subprocess.run([sys.executable, "-m", "mypy", "framework"], cwd=ROOT, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if ERROR.match(line)]
    if done.returncode not in (0, 1) or (done.returncode == 1 and not lines):
        sys.exit(f"mypy did not run: {done.stdout}{done.stderr}")
    return Counter(ERROR.match(line)["file"] for line in lines), lines  # type: ignore[index]


def read_baseline() -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in BASELINE.read_text().splitlines() if BASELINE.exists() else []:
        if line.strip() and not line.startswith("#"):
            file, count = line.rsplit(" ", 1)
            counts[file] = int(count)
    return counts


def write_baseline(counts: Counter[str]) -> None:
    header = "# mypy errors per file in framework/ that are allowed to remain (.ci/mypy_baseline.py); may only shrink\n"
    BASELINE.write_text(header + "".join(f"{file} {n}\n" for file, n in sorted(counts.items())))


def main() -> int:
    found, lines = errors()
    if "--update" in sys.argv:
        write_baseline(found)
        print(f"mypy baseline: {sum(found.values())} error(s) in {len(found)} file(s) recorded")
        return 0
    allowed = read_baseline()
    worse = {f: n for f, n in found.items() if n > allowed.get(f, 0)}
    if worse:
        print(
            "mypy: more errors than the baseline allows in "
            + ", ".join(f"{f} ({n} > {allowed.get(f, 0)})" for f, n in worse.items())
        )
        print("\n".join(line for line in lines if ERROR.match(line)["file"] in worse))  # type: ignore[index]
        return 1
    if found != allowed:
        print(
            f"mypy: {sum(allowed.values()) - sum(found.values())} fewer error(s) than the baseline: run python .ci/mypy_baseline.py --update"
        )
        return 1
    print(f"mypy: {sum(found.values())} error(s), as the baseline records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
