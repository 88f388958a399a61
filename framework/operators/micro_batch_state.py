"""State carried between micro-batches by operators that run inside an output's foreachBatch.

Each batch writes its state to its own folder beside the query's checkpoint
(<state>/batch-<id>/<table>/ Parquet + meta.json, meta written last to mark the folder complete).
A batch reads the state of the latest complete batch before it, so a batch that Spark replays
after a crash recomputes the same rows from the same state. The last few folders are kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from framework.io.locations import join as join_path
from framework.io.staging import filesystem
from framework.io.stream_sink import WrittenRows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

KEEP = 3  # state folders kept (a replay needs the one before it)
OUTPUT = "out"  # in a batch's folder: the output files it wrote, until the sink commits them


@dataclass(frozen=True)
class MicroBatchState:
    root: str

    def folder(self, batch_id: int) -> str:
        return join_path(self.root, f"batch-{batch_id:09d}")

    def previous(self, batch_id: int) -> str | None:
        """The folder of the latest complete state before `batch_id`, if any."""
        fs, root = filesystem(self.root)
        done = sorted(
            int(i.base_name.removeprefix("batch-"))
            for i in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))
            if i.base_name.startswith("batch-") and fs.get_file_info(f"{i.path}/meta.json").type == pafs.FileType.File
        )
        earlier = [b for b in done if b < batch_id]
        return self.folder(earlier[-1]) if earlier else None

    def latest(self) -> str | None:
        """The folder of the newest complete state (what the stream holds now), if any."""
        return self.previous(2**62)

    @staticmethod
    def rows(folder: str, name: str, where: Any = None) -> int:
        """Rows of a state table, read without Spark (Parquet footers; `where`: a pyarrow filter)."""
        import pyarrow.dataset as ds

        fs, path = filesystem(folder)
        if fs.get_file_info(f"{path}/{name}").type != pafs.FileType.Directory:
            return 0
        return ds.dataset(f"{path}/{name}", filesystem=fs, format="parquet").count_rows(filter=where)

    @staticmethod
    def meta(folder: str | None) -> dict[str, Any]:
        if folder is None:
            return {}
        fs, path = filesystem(folder)
        with fs.open_input_stream(f"{path}/meta.json") as handle:
            return json.loads(handle.read().decode())

    @staticmethod
    def has(folder: str, name: str) -> bool:
        fs, path = filesystem(folder)
        return fs.get_file_info(f"{path}/{name}").type == pafs.FileType.Directory

    @staticmethod
    def table(spark: SparkSession, folder: str | None, name: str, schema: StructType) -> DataFrame:
        """A table of a state folder, or no rows when there is no earlier state."""
        if folder is None:
            return spark.createDataFrame([], schema)
        return spark.read.schema(schema).parquet(join_path(folder, name))

    def save(self, batch_id: int, tables: dict[str, DataFrame], meta: dict[str, Any]) -> None:
        folder = self.begin(batch_id)
        for name, frame in tables.items():
            frame.write.parquet(join_path(folder, name))
        self.complete(batch_id, meta)

    def begin(self, batch_id: int) -> str:
        """The batch's folder, emptied: a replay writes the same state again. The state's tables
        go under it, then `complete` marks it done."""
        folder = self.folder(batch_id)
        fs, path = filesystem(folder)
        if fs.get_file_info(path).type != pafs.FileType.NotFound:
            fs.delete_dir(path)
        return folder

    def complete(self, batch_id: int, meta: dict[str, Any]) -> None:
        """Mark the batch's state complete (meta.json, written last) and drop folders no replay needs."""
        fs, path = filesystem(self.folder(batch_id))
        fs.create_dir(path, recursive=True)
        with fs.open_output_stream(f"{path}/meta.json") as handle:
            handle.write(json.dumps(meta).encode())
        for info in fs.get_file_info(pafs.FileSelector(filesystem(self.root)[1])):
            if info.base_name.startswith("batch-") and int(info.base_name.removeprefix("batch-")) <= batch_id - KEEP:
                fs.delete_dir(info.path)

    def write_output(self, batch_id: int, output: DataFrame) -> WrittenRows:
        """Write a batch's output beside its state, for the sink to commit as written: the state
        it was computed from may be pruned later, and a replay writes it again from that state."""
        target = join_path(self.folder(batch_id), OUTPUT)
        output.write.mode("overwrite").parquet(target)
        return WrittenRows(target, output.schema)
