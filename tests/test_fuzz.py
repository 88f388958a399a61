"""Bad input never crashes, hangs or goes unlocated: a seeded corpus of mutated example pipelines,
templates and profiles (tests/fuzz_corpus.py) through the real CLI entry point, every case under a
time limit and the whole run under a memory limit (tests/fuzz_runner.py)."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

from tests.fuzz_corpus import corpus, write_corpus

RUNNER = Path(__file__).with_name("fuzz_runner.py")


def test_no_input_crashes_hangs_or_fails_without_a_location(tmp_path: Path):
    cases = corpus()
    write_corpus(tmp_path, cases)
    done = subprocess.run(
        [sys.executable, str(RUNNER), str(tmp_path), "--seconds", "8"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(cases)

    def outcome(r: dict) -> str:
        if r["code"] == "timeout":
            return "timeout"
        if r["crashed"] or r["code"] not in (0, 2):
            return "crash"
        if r["code"] == 2:
            return "bad input, located" if r["located"] else "bad input, no location"
        return "ok"

    counts = collections.Counter(outcome(r) for r in results)
    print(f"{len(results)} cases: {dict(counts)}")  # shown with -s, e.g. for a closing note
    wrong = [
        f"{outcome(r)}: {r['name']} ({' '.join(r['command'])}): {' | '.join(r['tail'])[:300]}"
        for r in results
        if outcome(r) in ("timeout", "crash", "bad input, no location")
        or (r["expect"] == "bad" and r["code"] != 2)
        or (r["expect"] == "ok" and r["code"] != 0)
    ]
    assert wrong == [], "\n".join(wrong)
    # the corpus keeps finding mistakes: most targeted cases are bad input
    assert counts["bad input, located"] > len(cases) / 2
