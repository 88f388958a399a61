"""Several Parquet folders from one pass over a DataFrame, each written by the tasks themselves.

Why: an operator whose one result feeds two places (a streaming SWA batch: the closed windows go
to the output, the tuples of the open ones to the state) would otherwise materialise the result
and then run one Spark write per place, each a job of its own. Here every task hands its rows to
Python as Arrow (`mapInArrow`), picks each folder's rows with a pyarrow function, and writes them
with pyarrow: one job, and each task holds one Arrow batch at a time, as Spark's writer would.

Each task writes at most one file per folder, named by the job and its partition, so a retried
task overwrites what a failed attempt left, and files of different jobs can share a folder (the
sink moves them all into the table's). The `pick` functions run in the tasks: they must be
picklable and need only pyarrow (a nested function is pickled by value; one defined at a module's
top level would make the executors import that module).

A folder may also say what to count in the tasks (`figures`), summed over the job: an operator
that reports figures about what it wrote (windows emitted, windows still open) gets them from the
same pass instead of reading its files back.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framework.io.staging import filesystem

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class Folder:
    location: str
    pick: Callable[[pa.Table], pa.Table]  # the rows (and columns) of one Arrow batch that go here
    #: whole numbers to count in one Arrow batch (before `pick`), summed over every batch of the job
    figures: Callable[[pa.Table], dict[str, int]] | None = None


def write_folders(frame: DataFrame, folders: dict[str, Folder]) -> dict[str, int]:
    """Run `frame` once, writing each folder's rows; returns the rows written per folder. Every
    folder exists afterwards, empty when no row went there."""
    return write_counted(frame, folders)[0]


def write_counted(frame: DataFrame, folders: dict[str, Folder]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """`write_folders`, also returning each folder's `figures` summed over the job (a folder
    without `figures`: an empty dict)."""
    targets = {}
    for name, folder in folders.items():
        fs, path = filesystem(folder.location)
        fs.create_dir(path, recursive=True)
        targets[name] = (fs, path, folder.pick, folder.figures)
    written = dict.fromkeys(folders, 0)
    counted: dict[str, dict[str, int]] = {name: {} for name in folders}
    writer = _task_writer(targets, uuid.uuid4().hex)
    for row in frame.mapInArrow(writer, "folder string, rows long, figures map<string, bigint>").collect():
        written[row["folder"]] += row["rows"]
        for figure, value in (row["figures"] or {}).items():
            counted[row["folder"]][figure] = counted[row["folder"]].get(figure, 0) + value
    return written, counted


def _task_writer(targets: dict, job: str) -> Callable[[Iterator[Any]], Iterator[Any]]:  # the function mapInArrow runs
    def write(batches: Iterator[Any]) -> Iterator[Any]:  # RecordBatches, both ways
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        running = TaskContext.get()
        assert running is not None  # mapInArrow calls this inside a task
        task = running.partitionId()
        writers: dict = {}
        rows = dict.fromkeys(targets, 0)
        counted: dict = {name: {} for name in targets}
        try:
            for batch in batches:
                table = pa.Table.from_batches([batch])
                for name, (fs, path, pick, figures) in targets.items():
                    for figure, value in (figures(table) if figures else {}).items():
                        counted[name][figure] = counted[name].get(figure, 0) + int(value)
                    picked = pick(table)
                    if picked.num_rows == 0:
                        continue
                    if name not in writers:
                        writers[name] = pq.ParquetWriter(f"{path}/part-{task:05d}-{job}.parquet", picked.schema, filesystem=fs)
                    writers[name].write_table(picked)
                    rows[name] += picked.num_rows
        finally:
            for writer in writers.values():
                writer.close()
        schema = pa.schema([("folder", pa.string()), ("rows", pa.int64()), ("figures", pa.map_(pa.string(), pa.int64()))])
        figures = [list(counted[name].items()) for name in rows]
        yield pa.RecordBatch.from_pydict({"folder": list(rows), "rows": list(rows.values()), "figures": figures}, schema=schema)

    return write
