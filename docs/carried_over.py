"""Which lines of an old README are not in the new README or the docs pages (issue 33's move check).

    python docs/carried_over.py [REV]     # REV: the commit whose README.md was split (default: main)

Whitespace and line breaks are ignored (a reflowed paragraph still matches), and so are Markdown link
targets and quotes around a section name (`"Security"` became `[Security](security.md)`). Trivial lines
(fences, table rules, blank, under 4 characters) are skipped. Prints each line not found and the count.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def normal(text: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # [text](target) -> text
    text = re.sub(r'"([A-Z][^"]{2,40})"', r"\1", text)  # "Section name" -> Section name
    text = text.replace("#", "")
    return re.sub(r"\s+", " ", text).strip()


def main(argv: list[str]) -> int:
    rev = argv[0] if argv else "main"
    old = subprocess.run(["git", "show", f"{rev}:README.md"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    corpus = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
    new = normal("\n".join(p.read_text(encoding="utf-8") for p in corpus))
    missing = []
    for number, line in enumerate(old.splitlines(), 1):
        text = normal(line)
        if len(text) < 4 or text.startswith("```") or set(text) <= set("|-: "):
            continue
        if text not in new:
            missing.append((number, line))
    for number, line in missing:
        print(f"README.md:{number}: {line}")
    print(f"{len(missing)} of {len(old.splitlines())} lines not carried over")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
