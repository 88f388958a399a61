"""Raw web-server access logs of the service trace (framework.generators.service_trace): the same
page views, as the two servers would have logged them, one line per request in the Combined Log
Format without the user agent:

    10.4.7.1 - - [02/Nov/2026:08:00:01 +0000] "GET /page/12/img/3.png HTTP/1.1" 200 5120 "/page/12"

Why: the example of reading raw text (`format: text`, `parse:`) needs a log that nobody cleaned.
What a log loses against the trace: event times only to the second (the order within a second is
the line order), no instance id, no instance timestamp; the page a request belongs to is its
Referer (a page's own request has none, "-"). So the head of an instance is derived in SQL and the
key is head+client (the strategy that needs neither).

Each server writes its own files (`static-NNNN.log`, `images-NNNN.log`), lines in the order the
server logged them, a few malformed lines (`--garbage`) as real logs have.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from framework.generators.service_trace import STREAMS, generate_service_trace


@dataclass(frozen=True)
class LogSummary:
    out: str
    instances: int
    lines: int
    files: int
    garbage: int


def generate_access_log(out: Path, instances: int = 200, seed: int = 1, files: int = 2, garbage: int = 3) -> LogSummary:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed + 7)
    written, lines_total = 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        generate_service_trace(Path(tmp), instances=instances, seed=seed, files=1, fmt="parquet")
        for stream in STREAMS:
            table = pq.read_table(Path(tmp) / stream).sort_by([("ts", "ascending"), ("requested_service", "ascending")])
            lines = _lines(table)
            lines_total += len(lines)
            for i, chunk in enumerate(np.array_split(np.arange(len(lines)), files)):
                text = [lines[j] for j in chunk]
                for _ in range(garbage if stream == STREAMS[0] and i == 0 else 0):
                    text.insert(int(rng.integers(0, len(text) + 1)), "-- log rotated: truncated line --")
                path = out / f"{stream}-{i:04d}.log"
                path.write_text("\n".join(text) + "\n", encoding="utf-8")
                os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
                written += 1
    return LogSummary(str(out), instances, lines_total, written, garbage)


def _lines(table: pa.Table) -> list[str]:
    seconds = pc.cast(pc.floor_temporal(table.column("ts"), unit="second"), pa.timestamp("s", tz="UTC"))
    stamp = pc.strftime(seconds, format="%d/%b/%Y:%H:%M:%S +0000", locale="C")
    referer = pc.if_else(table.column("is_primary"), pa.scalar("-"), table.column("head_service"))
    status = pc.if_else(pc.less(table.column("response_ms"), 0), pa.scalar(500), pa.scalar(200))
    columns = [
        c.to_pylist()
        for c in (table.column("client_ip"), stamp, table.column("requested_service"), status, table.column("bytes"), referer)
    ]
    return [
        f'{ip} - - [{ts}] "GET {path} HTTP/1.1" {code} {size} "{ref}"'
        for ip, ts, path, code, size, ref in zip(*columns, strict=True)
    ]
