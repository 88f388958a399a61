"""Tributary's own tables read per run: the rows one run wrote, without a hand-written filter.

The quarantine, the quality and integration logs, the run log and the late rows carry the id of
the run that wrote each row (`run_id`). `show quarantine --run ID` is that run's rows, counted;
`--latest` is the rows of the newest run that wrote any here (by the table's own time column), so
"what did the last run quarantine" needs no run id at all. A run that changed nothing (every
output "skipped: unchanged") wrote no quarantine rows: asked for by id, its answer is 0 rows and
the runs that do have rows here.

Read with pyarrow alone (no JVM, no SQL engine): a filter on one column, and a count of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from framework.errors import BadInput, Problem
from framework.look import delta_tables
from framework.look.tables import TableRef

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

RUN_COLUMN = "run_id"
#: when a row was written, in each of Tributary's tables (the first one a table has is used)
_TIME_COLUMNS = ("quarantined_at", "checked_at", "evaluated_at", "ts")
_LISTED_RUNS = 5


@dataclass(frozen=True)
class RunRows:
    run_id: str
    rows: pa.Table  # up to limit + 1 rows (one more says there are more)
    total: int
    other_runs: list[str]  # newest first, when the run has no rows here


def run_rows(ref: TableRef, table: DeltaTable, run_id: str | None, latest: bool, limit: int) -> RunRows:
    """The rows `run_id` (or, with `latest`, the newest run) wrote into one of Tributary's tables."""
    import pyarrow.compute as pc

    data = _dataset(ref, table)
    if latest:
        runs = runs_newest_first(data)
        if not runs:
            return RunRows("", data.head(0), 0, [])
        run_id = runs[0]
    assert run_id is not None
    matching = pc.field(RUN_COLUMN) == run_id
    total = data.count_rows(filter=matching)
    rows = data.head(limit + 1, filter=matching) if total else data.head(0)
    others = [] if total else runs_newest_first(data)[:_LISTED_RUNS]
    return RunRows(run_id, rows, total, others)


def chosen_run(ref: TableRef, table: DeltaTable, run_id: str | None, latest: bool) -> str | None:
    """The run id `--run`/`--latest` mean for this table (None: the table has no rows)."""
    if not latest:
        _dataset(ref, table)  # the checks
        return run_id
    runs = runs_newest_first(_dataset(ref, table))
    return runs[0] if runs else None


def runs_newest_first(data: ds.Dataset) -> list[str]:
    """The run ids with rows in the table, the newest (by the table's time column) first."""
    names = data.schema.names
    when = next((c for c in _TIME_COLUMNS if c in names), None)
    columns = [RUN_COLUMN, *([when] if when else [])]
    read = data.to_table(columns=columns)
    if read.num_rows == 0:
        return []
    if when is None:  # run ids start with their UTC start time
        return sorted({str(r) for r in read.column(RUN_COLUMN).to_pylist() if r is not None}, reverse=True)
    newest = (
        read.group_by(RUN_COLUMN).aggregate([(when, "max")]).sort_by([(f"{when}_max", "descending"), (RUN_COLUMN, "descending")])
    )
    return [str(r) for r in newest.column(RUN_COLUMN).to_pylist() if r is not None]


def _dataset(ref: TableRef, table: DeltaTable) -> ds.Dataset:
    import pyarrow as pa
    import pyarrow.dataset as ds

    if not ref.internal or RUN_COLUMN not in pa.schema(table.schema().to_arrow()).names:
        raise BadInput(
            Problem(
                f"--run and --latest read Tributary's own tables (quarantine, quality, integration_quality, events, "
                f"late_rows) by the run that wrote each row; '{ref.name}' has no {RUN_COLUMN} column",
                hint=f"an output's versions name the runs that wrote them: tributary history {ref.name}",
            )
        )
    data = delta_tables.dataset(table, ref.location)
    return ds.dataset(data) if isinstance(data, pa.Table) else data
