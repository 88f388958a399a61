"""A synthetic web-page invocation trace shaped like the one in
"Service Intelligence Oriented Distributed Data Stream Integration" (Li et al., §3.5, §5 and §6).

Pages are composite services: the HTML file is the head, its styles, scripts and images are the
subordinate services. One page view is an *instance*: a primary invocation of the page plus one
subordinate invocation per sub-service. The model, and why:

- Instances start as a Poisson process with a mean interval of 9.778 ms, the mean of the paper's
  instance-level (primary) stream, expression (6) in section 6.
- ~`pages` distinct pages with Zipf-like popularity (p ∝ 1/rank^0.9), as page requests in the wiki
  trace the paper replays: few hot pages, a long tail, many instances of the same page.
- Each page's degree is drawn once from the paper's fit, formula (4): Erlang(k=100, rate=8.7963),
  rounded (mean ≈ 11.37; F(12)=0.72, F(13)=0.92). Every instance of the page has that many tuples.
- Each instance's duration (first to last invocation) follows the two-branch hyper-Erlang of
  formula (5): Exp(0.0404) w.p. 0.0247, else Erlang(k=4, rate=0.3666); mean ≈ 11.25 s, a long tail.
- Static files (HTML, CSS, JS) and images live in two domains (section 3.5), so the invocations are
  logged into two streams with different transport delays: dispersity and asynchronism.
- About 2% of instances are the same client re-opening the same page 0.05-1 s later, the case the
  "head + client + time" strategy cannot tell apart when both fall in the same second (Table 5).

`instance_id` is the ground truth: `seed * 10**9 + i` for the i-th instance by start time, so
traces of different seeds written into one folder never share an id.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

START = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)

INTERARRIVAL_MS = 9.778  # mean interval of the instance-level stream, expression (6)
DEGREE_K, DEGREE_RATE = 100, 8.7963  # formula (4)
DURATION_P_EXP, DURATION_EXP_RATE = 0.0247, 0.0404  # formula (5), exponential branch
DURATION_K, DURATION_RATE = 4, 0.3666  # formula (5), Erlang branch
PAGE_ZIPF = 0.9
CLIENTS, CLIENT_ZIPF = 5000, 0.5
REOPEN_SHARE, REOPEN_GAP_S = 0.02, (0.05, 1.0)
IMAGE_SHARE = 0.6
STATIC_DELAY_MEAN_MS = 40.0
IMAGE_DELAY_MIN_MS, IMAGE_DELAY_MEAN_MS = 200.0, 600.0
DELAY_CAP_MS = 5000.0
STREAMS = ("static", "images")
INSTANCE_ID_BASE = 10**9

SCHEMA = pa.schema(
    [
        ("head_service", pa.string()),
        ("requested_service", pa.string()),
        ("client_ip", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("instance_ts", pa.timestamp("us", tz="UTC")),
        ("response_ms", pa.int32()),
        ("bytes", pa.int64()),
        ("instance_id", pa.int64()),
        ("is_primary", pa.bool_()),
    ]
)


@dataclass(frozen=True)
class TraceSummary:
    out: str
    seed: int
    fmt: str
    instances: int
    tuples: int
    tuples_per_stream: dict[str, int]
    files_per_stream: dict[str, int]
    files_written: int
    pages: int  # distinct pages in the catalogue
    pages_used: int  # pages with at least one instance
    clients_used: int
    reopens: int  # instances that re-open a page the same client opened 0.05-1 s before
    corrupted: int  # tuples given a logging glitch on purpose (--corrupt): null key or impossible response time
    mean_degree: float  # over instances (tuples / instances)
    mean_page_degree: float  # over the page catalogue, the quantity formula (4) describes
    max_degree: int
    mean_duration_s: float  # drawn instance durations, formula (5)
    mean_interarrival_ms: float
    first_ts: str
    last_ts: str
    first_instance_id: int
    # instances / distinct keys per association strategy: how many instances share a key
    distinct_keys: dict[str, int] = field(default_factory=dict)


def generate_service_trace(
    out: Path,
    instances: int = 15000,
    seed: int = 1,
    files: int = 20,
    fmt: str = "json",
    pages: int = 10000,
    corrupt: int = 0,
    site_seed: int | None = None,
) -> TraceSummary:
    """Write `out/static/` and `out/images/` (`files` files each, in arrival order) and `out/_trace.json`.

    `site_seed`: the pages (popularity, degree, layout) and the clients come from their own random
    stream, so traces of different seeds are different days of the same site (history to learn
    window sizes from, then a day to measure them on). Without it, everything comes from `seed`.

    `corrupt` tuples get a logging glitch (a null head_service or client_ip, or a negative or absurd
    response time), drawn from their own random stream so the rest of the trace does not change."""
    if fmt not in ("json", "parquet"):
        raise ValueError(f"fmt must be 'json' or 'parquet', not {fmt!r}")
    if instances < 1 or pages < 1 or files < 1:
        raise ValueError("instances, pages and files must be at least 1")
    out = Path(out)
    rng = np.random.default_rng(seed)
    site = np.random.default_rng(site_seed) if site_seed is not None else rng
    n = instances

    # --- pages: popularity, degree, and per position which sub-services are images / css / js
    popularity = 1.0 / np.arange(1, pages + 1) ** PAGE_ZIPF
    popularity = site.permutation(popularity / popularity.sum())
    page_degree = np.maximum(1, np.rint(site.gamma(DEGREE_K, 1.0 / DEGREE_RATE, size=pages))).astype(np.int64)
    max_degree = int(page_degree.max())
    is_image_at = site.random((pages, max_degree)) < IMAGE_SHARE
    is_css_at = site.random((pages, max_degree)) < 0.5

    # --- clients: a pool of distinct IPv4 addresses, mildly skewed use
    raw = site.integers(0x0B000000, 0xDF000000, size=CLIENTS * 2, dtype=np.int64)
    _, first = np.unique(raw, return_index=True)
    pool = raw[np.sort(first)][:CLIENTS]
    client_names = np.array([f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}" for a in pool.tolist()], dtype=object)
    client_weight = site.permutation(1.0 / np.arange(1, len(pool) + 1) ** CLIENT_ZIPF)
    client_weight /= client_weight.sum()

    # --- instances: Poisson starts, page, client, duration; then ~2% re-opens copy an earlier one
    start_ms = np.rint(START.timestamp() * 1000 + np.cumsum(rng.exponential(INTERARRIVAL_MS, size=n))).astype(np.int64)
    page = rng.choice(pages, size=n, p=popularity)
    client = rng.choice(len(pool), size=n, p=client_weight)
    duration_s = np.where(
        rng.random(n) < DURATION_P_EXP,
        rng.exponential(1.0 / DURATION_EXP_RATE, size=n),
        rng.gamma(DURATION_K, 1.0 / DURATION_RATE, size=n),
    )
    reopen = rng.random(n) < REOPEN_SHARE
    lo = np.searchsorted(start_ms, start_ms - int(REOPEN_GAP_S[1] * 1000), side="left")
    hi = np.searchsorted(start_ms, start_ms - int(REOPEN_GAP_S[0] * 1000), side="right")
    reopen &= hi > lo
    source = np.arange(n)
    pick = lo + np.floor(rng.random(n) * (hi - lo)).astype(np.int64)
    source[reopen] = pick[reopen]
    while not np.array_equal(source[source], source):  # a re-open of a re-open: follow to the original
        source = source[source]
    page, client = page[source], client[source]
    degree = page_degree[page]

    # --- tuples: position 0 is the primary; subordinates at sorted uniform offsets, the last at the end
    total = int(degree.sum())
    inst = np.repeat(np.arange(n), degree)
    first_row = np.cumsum(degree) - degree
    pos = np.arange(total) - first_row[inst]
    primary = pos == 0
    # order statistics of m-1 uniforms plus 1.0 = cumulative sums of m exponentials / their total
    spacing = np.where(primary, 0.0, rng.exponential(1.0, size=total))
    run = np.cumsum(spacing)
    run_before = run[first_row][inst]  # == run at the primary, whose spacing is 0
    run_total = run[first_row + degree - 1][inst] - run_before
    frac = np.divide(run - run_before, run_total, out=np.zeros(total), where=run_total > 0)
    ts_ms = start_ms[inst] + np.rint(frac * duration_s[inst] * 1000).astype(np.int64)
    instance_ts_ms = (start_ms // 1000 * 1000)[inst]
    tuple_page = page[inst]
    image = ~primary & is_image_at[tuple_page, pos]

    # requested_service and its size are stable per (page, position): format each distinct one once
    code = tuple_page * max_degree + pos
    used = np.zeros(pages * max_degree, dtype=bool)
    used[code] = True
    codes = np.flatnonzero(used)
    code_index = (np.cumsum(used) - 1)[code]  # like np.unique(return_inverse=True) without the sort
    c_page, c_pos = codes // max_degree, codes % max_degree
    c_image, c_css = is_image_at[c_page, c_pos], is_css_at[c_page, c_pos]
    names = [
        f"/page/{p:05d}.html" if k == 0 else f"/img/p{p:05d}/{k}.png" if im else f"/static/p{p:05d}/s{k}.{'css' if css else 'js'}"
        for p, k, im, css in zip(c_page.tolist(), c_pos.tolist(), c_image.tolist(), c_css.tolist(), strict=True)
    ]
    requested = pa.array(names, pa.string()).take(pa.array(code_index))
    size_median = np.where(c_pos == 0, 40_000, np.where(c_image, 25_000, 12_000))
    code_bytes = np.clip(rng.lognormal(np.log(size_median), 1.0), 64, 50_000_000).astype(np.int64)
    nbytes = code_bytes[code_index]
    # HTML pages are dynamic: their size varies per view around the page's usual size
    nbytes = np.where(primary, np.maximum(64, nbytes * rng.lognormal(0.0, 0.2, size=total)).astype(np.int64), nbytes)
    response_median = np.where(primary, 120.0, np.where(image, 60.0, 40.0))
    response_ms = np.clip(np.rint(rng.lognormal(np.log(response_median), 0.9)), 1, 60_000).astype(np.int32)

    page_names = pa.array([f"/page/{p:05d}.html" for p in range(pages)], pa.string())
    table = pa.table(
        [
            page_names.take(pa.array(tuple_page)),
            requested,
            pa.array(client_names, pa.string()).take(pa.array(client[inst])),
            pa.array(ts_ms * 1000, pa.int64()).cast(SCHEMA.field("ts").type),
            pa.array(instance_ts_ms * 1000, pa.int64()).cast(SCHEMA.field("instance_ts").type),
            pa.array(response_ms, pa.int32()),
            pa.array(nbytes, pa.int64()),
            pa.array(seed * INSTANCE_ID_BASE + inst, pa.int64()),
            pa.array(primary, pa.bool_()),
        ],
        schema=SCHEMA,
    )

    table = _corrupted(table, corrupt, np.random.default_rng([seed, 0xBAD]))

    # --- two streams, each with its own transport delay; files cut in arrival order
    delay = np.where(
        image,
        IMAGE_DELAY_MIN_MS + rng.exponential(IMAGE_DELAY_MEAN_MS, size=total),
        rng.exponential(STATIC_DELAY_MEAN_MS, size=total),
    )
    arrival = ts_ms + np.minimum(delay, DELAY_CAP_MS)
    mtime_base = int(time.time()) - files - 1  # increasing per file, never in the future
    suffix = "json" if fmt == "json" else "parquet"
    tuples_per_stream, files_per_stream = {}, {}
    for stream, rows in (("static", np.flatnonzero(~image)), ("images", np.flatnonzero(image))):
        rows = rows[np.argsort(arrival[rows], kind="stable")]
        folder = out / stream
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob(f"part-{seed:04d}-*.*"):  # an earlier run of this seed with more files
            if stale.suffix in (".json", ".parquet"):
                stale.unlink()
        written = 0
        for i, chunk in enumerate(np.array_split(rows, files)):
            if not len(chunk):
                continue
            path = folder / f"part-{seed:04d}-{i:05d}.{suffix}"
            _write(table.take(pa.array(chunk)), path, fmt)
            os.utime(path, (mtime_base + i, mtime_base + i))
            written += 1
        tuples_per_stream[stream], files_per_stream[stream] = len(rows), written

    instance_ts_s = start_ms // 1000
    summary = TraceSummary(
        out=str(out),
        seed=seed,
        fmt=fmt,
        instances=n,
        tuples=total,
        tuples_per_stream=tuples_per_stream,
        files_per_stream=files_per_stream,
        files_written=sum(files_per_stream.values()),
        pages=pages,
        pages_used=int(len(np.unique(page))),
        clients_used=int(len(np.unique(client))),
        reopens=int(reopen.sum()),
        corrupted=min(corrupt, total),
        mean_degree=round(total / n, 4),
        mean_page_degree=round(float(page_degree.mean()), 4),
        max_degree=max_degree,
        mean_duration_s=round(float(duration_s.mean()), 4),
        mean_interarrival_ms=round(float((start_ms[-1] - start_ms[0]) / (n - 1)) if n > 1 else 0.0, 4),
        first_ts=_iso_ms(int(ts_ms.min())),
        last_ts=_iso_ms(int(ts_ms.max())),
        first_instance_id=seed * INSTANCE_ID_BASE,
        distinct_keys={
            "head": int(len(np.unique(page))),
            "head+time": _distinct(page, instance_ts_s),
            "head+client": _distinct(page, client),
            "head+client+time": _distinct(page, client, instance_ts_s),
        },
    )
    parameters = {
        "start": _iso_ms(int(START.timestamp() * 1000)),
        "interarrival_ms": INTERARRIVAL_MS,
        "degree_erlang": {"k": DEGREE_K, "rate": DEGREE_RATE, "mean": DEGREE_K / DEGREE_RATE},
        "duration_hyper_erlang": {
            "branches": [
                {"p": DURATION_P_EXP, "k": 1, "rate": DURATION_EXP_RATE},
                {"p": 1 - DURATION_P_EXP, "k": DURATION_K, "rate": DURATION_RATE},
            ],
            "mean_s": DURATION_P_EXP / DURATION_EXP_RATE + (1 - DURATION_P_EXP) * DURATION_K / DURATION_RATE,
        },
        "page_zipf_exponent": PAGE_ZIPF,
        "clients": len(pool),
        "client_zipf_exponent": CLIENT_ZIPF,
        "reopen_share": REOPEN_SHARE,
        "reopen_gap_s": list(REOPEN_GAP_S),
        "image_share": IMAGE_SHARE,
        "delay_ms": {
            "static": {"exponential_mean": STATIC_DELAY_MEAN_MS, "cap": DELAY_CAP_MS},
            "images": {"min": IMAGE_DELAY_MIN_MS, "exponential_mean": IMAGE_DELAY_MEAN_MS, "cap": DELAY_CAP_MS},
        },
        "instance_id": f"seed * {INSTANCE_ID_BASE} + index by start time",
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "_trace.json").write_text(json.dumps({"summary": asdict(summary), "parameters": parameters}, indent=2) + "\n")
    return summary


def _corrupted(table: pa.Table, count: int, rng: np.random.Generator) -> pa.Table:
    """`count` tuples, chosen at random, each with one glitch, taking turns: null head_service,
    response_ms -1, null client_ip, response_ms 10 minutes."""
    if count <= 0:
        return table
    rows = rng.choice(table.num_rows, size=min(count, table.num_rows), replace=False)
    glitch = np.full(table.num_rows, -1)
    glitch[rows] = np.arange(len(rows)) % 4
    for kind, column, value in (
        (0, "head_service", None),
        (1, "response_ms", -1),
        (2, "client_ip", None),
        (3, "response_ms", 600_000),
    ):
        i = table.schema.get_field_index(column)
        hit = pa.array(glitch == kind)
        replaced = pc.if_else(hit, pa.scalar(value, table.schema.field(i).type), table.column(i))
        table = table.set_column(i, table.schema.field(i), replaced)
    return table


def _write(table: pa.Table, path: Path, fmt: str) -> None:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path)
        return
    # JSON lines built column-wise in Arrow: no value needs escaping (names, IPs, numbers, times)
    col = table.column

    def stamp(name: str) -> pa.ChunkedArray:  # "2026-11-02T08:00:00.123"; strftime / tz-aware casts are 10x slower
        text = col(name).cast(pa.timestamp("ms")).cast(pa.string())  # naive = the UTC wall clock
        return pc.binary_replace_slice(text, start=10, stop=11, replacement="T")

    def text(name: str) -> pa.ChunkedArray:  # "value", or null (a --corrupt glitch)
        quoted = pc.binary_join_element_wise('"', col(name), '"', "")
        return pc.fill_null(quoted, "null")

    def number(name: str) -> pa.ChunkedArray:
        return pc.fill_null(col(name).cast(pa.string()), "null")

    lines = pc.binary_join_element_wise(
        '{"head_service":',
        text("head_service"),
        ',"requested_service":',
        text("requested_service"),
        ',"client_ip":',
        text("client_ip"),
        ',"ts":"',
        stamp("ts"),
        'Z","instance_ts":"',
        stamp("instance_ts"),
        'Z","response_ms":',
        number("response_ms"),
        ',"bytes":',
        number("bytes"),
        ',"instance_id":',
        number("instance_id"),
        ',"is_primary":',
        pc.if_else(col("is_primary"), "true", "false"),
        "}\n",
        "",
    )
    with path.open("wb") as f:
        for chunk in lines.chunks:
            offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32)[chunk.offset : chunk.offset + len(chunk) + 1]
            f.write(memoryview(chunk.buffers()[2])[offsets[0] : offsets[-1]])


def _distinct(*keys: np.ndarray) -> int:
    return int(len(np.unique(np.stack(keys, axis=1), axis=0)))


def _iso_ms(ms: int) -> str:
    t = datetime.fromtimestamp(ms // 1000, UTC).replace(microsecond=ms % 1000 * 1000)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")
