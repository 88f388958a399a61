"""`tributary generate`: synthetic input data for the examples and benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from framework.cli.common import guard, term
from framework.errors import BadInput

app = typer.Typer(name="generate", help="Write synthetic input data for the examples and benchmarks.", no_args_is_help=True)


@app.command("contacts")
def generate_contacts_cmd(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to write phones/ and emails/ into.")] = Path(
        "data/samples/contacts"
    ),
    people: Annotated[int, typer.Option("--people", help="How many people (rows per stream, roughly).")] = 2000,
    files: Annotated[int, typer.Option("--files", help="Files per stream.")] = 8,
    seed: Annotated[int, typer.Option("--seed")] = 1,
) -> None:
    """Two timestamped streams about the same people (phones, e-mails) for the contact-join example."""
    from framework.generators.contacts import generate_contacts

    counts = generate_contacts(out_dir, people=people, files=files, seed=seed)
    term.out.print(f"wrote {counts['phones']:,} phone rows and {counts['emails']:,} e-mail rows under {out_dir}/", markup=False)


@app.command("ticks")
def generate_ticks_cmd(
    requests: Annotated[int, typer.Option("--requests", help="Requests (contexts): each gets every stock's tick list.")] = 10,
    stocks: Annotated[int, typer.Option("--stocks", help="Stocks per request (2-10).")] = 5,
    ticks: Annotated[int, typer.Option("--ticks", help="Ticks per stock and request (the paper: 30,000).")] = 30_000,
    first: Annotated[int, typer.Option("--first", help="Id of the first request (to add requests later).")] = 0,
    seed: Annotated[int, typer.Option("--seed")] = 1,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to write one folder per stock into.")] = Path(
        "data/samples/ticks"
    ),
) -> None:
    """Stock tick lists per request for the trading example (one Parquet file per stock and request)."""
    from framework.generators.ticks import generate_ticks

    def body() -> None:
        if not 2 <= stocks <= 10 or requests < 1 or ticks < 2 or first < 0:
            raise BadInput("--stocks must be 2-10, --requests at least 1, --ticks at least 2, --first at least 0")
        counts = generate_ticks(out_dir, requests=requests, stocks=stocks, ticks=ticks, seed=seed, first=first)
        term.out.print(f"wrote {requests:,} request(s) × {len(counts)} stocks × {ticks:,} ticks under {out_dir}/", markup=False)

    guard(False, body)


@app.command("service-trace")
def generate_service_trace_cmd(
    instances: Annotated[int, typer.Option("--instances", help="Page instances (about 11.4 tuples each).")] = 15000,
    seed: Annotated[int, typer.Option("--seed")] = 1,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to write static/, images/ and _trace.json into.")] = Path(
        "data/samples/service_trace"
    ),
    files: Annotated[int, typer.Option("--files", help="Files per stream, cut in arrival order.")] = 20,
    fmt: Annotated[str, typer.Option("--format", help="json or parquet.")] = "json",
    corrupt: Annotated[
        int, typer.Option("--corrupt", help="Give this many tuples a logging glitch (null key, impossible response time).")
    ] = 0,
    site_seed: Annotated[
        Optional[int],
        typer.Option("--site-seed", help="Pages and clients from this seed: other --seed values are other days of one site."),
    ] = None,
) -> None:
    """Page-view invocations in two streams (static, images) with the paper's degree and duration statistics."""
    if fmt not in ("json", "parquet"):
        raise typer.BadParameter("must be json or parquet", param_hint="--format")
    from framework.generators.service_trace import generate_service_trace

    s = generate_service_trace(
        out_dir, instances=instances, seed=seed, files=files, fmt=fmt, corrupt=corrupt, site_seed=site_seed
    )
    per_stream = ", ".join(f"{count:,} {stream}" for stream, count in s.tuples_per_stream.items())
    term.out.print(
        f"wrote {s.instances:,} instances, {s.tuples:,} tuples ({per_stream}) as {fmt} in {s.files_written} files under {out_dir}/"
        + (f", {s.corrupted:,} of them with a glitch" if s.corrupted else ""),
        markup=False,
    )


@app.command("access-log")
def generate_access_log_cmd(
    instances: Annotated[int, typer.Option("--instances", help="Page views (about 11 requests each).")] = 120,
    seed: Annotated[int, typer.Option("--seed")] = 1,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the servers' log files.")] = Path("data/samples/access_log"),
    files: Annotated[int, typer.Option("--files", help="Files per server.")] = 2,
) -> None:
    """Raw access logs of two web servers (static files, images) in the Combined Log Format, for the
    text-source example: the service trace's page views as the servers would have logged them."""
    from framework.generators.access_log import generate_access_log

    s = generate_access_log(out_dir, instances=instances, seed=seed, files=files)
    term.out.print(
        f"wrote {s.lines:,} log lines of {s.instances:,} page views in {s.files} files under {out_dir}/ ({s.garbage} malformed)",
        markup=False,
    )
