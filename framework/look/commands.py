"""What `tributary show`, `history` and `query` do, from names to Arrow rows (the CLI draws them).

SQL a person typed (`show --where`, `query`) runs in a child process (framework.look.isolated):
`show` and `query` hand their work to it, and it calls `show_here` and `query_here`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from framework.errors import BadInput, Problem
from framework.look import delta_tables, per_run
from framework.look.sql import DEFAULT_TIMEOUT_S, filter_rows, run_query
from framework.look.tables import Catalog, TableRef

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class Rows:
    """Rows to show, and what they are."""

    title: str
    rows: pa.Table
    more: bool  # rows were left out (the limit)
    total: int | None = None  # rows of the table or version, when known without reading them
    location: str = ""


def show(
    catalog: Catalog,
    name: str,
    *,
    version: int | None = None,
    timestamp: str | None = None,
    where: str | None = None,
    limit: int = 20,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    run: str | None = None,
    latest: bool = False,
) -> Rows:
    """A table's first rows, now or at an older version, optionally those matching `where` (in a
    child process); of one of Tributary's tables, optionally those one run wrote (`run`, or the
    newest run with rows there: `latest`; framework.look.per_run)."""
    _check_limit(limit)
    if run is not None and latest:
        raise BadInput(Problem("--run and --latest both choose a run: give one"))
    if where is None:
        return show_here(catalog, name, version=version, timestamp=timestamp, limit=limit, run=run, latest=latest)
    if run is not None or latest:  # the run's rows matching `where`: one condition for the child
        chosen = _chosen_run(catalog, name, version, timestamp, run, latest)
        where = f"{per_run.RUN_COLUMN} = '{(chosen or '').replace(chr(39), chr(39) * 2)}' AND ({where})"
    arguments = dict(catalog=catalog, name=name, version=version, timestamp=timestamp, where=where, limit=limit)
    return _in_child("show_here", timeout_s, **arguments)


def show_here(
    catalog: Catalog,
    name: str,
    *,
    version: int | None = None,
    timestamp: str | None = None,
    where: str | None = None,
    limit: int = 20,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_start: Callable[[], None] | None = None,
    run: str | None = None,
    latest: bool = False,
) -> Rows:
    """`show` in this process."""
    _check_limit(limit)
    if version is not None and timestamp is not None:
        raise BadInput(Problem("--version and --timestamp both choose a version: give one"))
    ref = catalog.resolve(name)
    table = delta_tables.open_table(ref, catalog.profile.storage_options, version, timestamp)
    title = f"{name} · {ref.about} · {delta_tables.describe_version(table, ref.location, catalog.profile.storage_options)}"
    with delta_tables.reading(lambda: ref.location):  # a data file missing or damaged: bad input
        if run is not None or latest:
            found = per_run.run_rows(ref, table, run, latest, limit)
            title += f" · {'the latest ' if latest else ''}run {found.run_id}" if found.run_id else " · no run has rows here"
            if not found.total and found.other_runs:
                title += f" · runs with rows here: {', '.join(found.other_runs)}"
            return Rows(title, found.rows.slice(0, limit), found.rows.num_rows > limit, found.total, ref.location)
        if where is not None:
            answer = filter_rows(delta_tables.dataset(table, ref.location), where, limit, timeout_s, on_start)
            return Rows(f"{title} · where {where}", answer.rows, answer.more, None, ref.location)
        rows = delta_tables.rows(table, ref.location, limit + 1)
        total = delta_tables.row_count(table)
    return Rows(title, rows.slice(0, limit), rows.num_rows > limit, total, ref.location)


def _chosen_run(
    catalog: Catalog, name: str, version: int | None, timestamp: str | None, run: str | None, latest: bool
) -> str | None:
    ref = catalog.resolve(name)
    table = delta_tables.open_table(ref, catalog.profile.storage_options, version, timestamp)
    return per_run.chosen_run(ref, table, run, latest)


def history(catalog: Catalog, name: str, limit: int = 20) -> Rows:
    """A table's newest versions, newest first."""
    _check_limit(limit)
    ref = catalog.resolve(name)
    table = delta_tables.open_table(ref, catalog.profile.storage_options)
    versions = delta_tables.history(ref, table, limit)
    more = versions.num_rows > 0 and versions.column("version")[-1].as_py() > 0
    return Rows(f"history of {name} · {ref.about}", versions, more, table.version() + 1, ref.location)


def query(catalog: Catalog, sql: str, limit: int = 100, timeout_s: float = DEFAULT_TIMEOUT_S) -> Rows:
    """One SELECT over the tables it names, current versions (in a child process)."""
    _check_limit(limit)
    return _in_child("query_here", timeout_s, catalog=catalog, sql=sql, limit=limit)


def query_here(
    catalog: Catalog,
    sql: str,
    limit: int = 100,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_start: Callable[[], None] | None = None,
) -> Rows:
    """`query` in this process."""
    _check_limit(limit)
    opened: list[TableRef] = []

    def open_table(name: str) -> object:
        ref = catalog.resolve(name)
        opened.append(ref)
        return delta_tables.dataset(delta_tables.open_table(ref, catalog.profile.storage_options), ref.location)

    with delta_tables.reading(lambda: ", ".join(r.location for r in opened) or "?"):
        answer = run_query(sql, limit, open_table, timeout_s, on_start)
    tables = ", ".join(f"{r.name} ({r.about})" for r in opened) or "no tables"
    return Rows(f"query over {tables}", answer.rows, answer.more)


def _in_child(target: str, timeout_s: float, **arguments: object) -> Rows:
    from framework.look.isolated import run

    if not timeout_s > 0:
        raise BadInput(Problem(f"--timeout {timeout_s:g}: give a number of seconds above 0"))
    fields, rows = run(target, timeout_s, timeout_s=timeout_s, **arguments)
    return Rows(fields["title"], rows, fields["more"], fields["total"], fields["location"])


def _check_limit(limit: int) -> None:
    if limit < 0:
        raise BadInput(Problem(f"--limit {limit}: give a number of rows, 0 or more"))
