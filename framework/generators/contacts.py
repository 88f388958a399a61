"""Two streams about the same people: A carries phones, B e-mails, each row timestamped.

A person's A and B rows arrive close together (within `spread_s`), with some people present in
only one stream, so window joins have matches, near misses and unmatched rows.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

START = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)


def generate_contacts(
    out: Path, people: int = 2000, files: int = 8, seed: int = 1, spread_s: float = 20.0, rate_per_s: float = 50.0
) -> dict[str, int]:
    rng = random.Random(seed)
    a_rows, b_rows = [], []
    t = START
    for i in range(people):
        t += timedelta(seconds=rng.expovariate(rate_per_s))
        name = f"person{rng.randrange(max(people // 3, 1)):05d}"  # names recur: a key has several rows
        present = rng.random()
        if present < 0.9:
            a_rows.append(
                {
                    "name": name,
                    "ts": _iso(t + timedelta(seconds=rng.uniform(0, spread_s))),
                    "phone": f"+49-30-{rng.randrange(10**7):07d}",
                }
            )
        if present > 0.1:
            b_rows.append(
                {"name": name, "ts": _iso(t + timedelta(seconds=rng.uniform(0, spread_s))), "email": f"{name}.{i}@example.org"}
            )
    for stream, rows in (("phones", a_rows), ("emails", b_rows)):
        rows.sort(key=lambda r: r["ts"])
        folder = out / stream
        folder.mkdir(parents=True, exist_ok=True)
        size = -(-len(rows) // files)
        for part in range(files):
            chunk = rows[part * size : (part + 1) * size]
            if chunk:
                (folder / f"part-{seed:04d}-{part:03d}.json").write_text("".join(json.dumps(r) + "\n" for r in chunk))
    return {"phones": len(a_rows), "emails": len(b_rows)}


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")
