"""A chained step's query writes the step's outputs too, from the same rows, each exactly once.

A chained step (framework.plan.model.Chain) commits its emitted rows to its internal table; its
outputs could read that table as streams of their own, but each such query reads the rows again
and starts a Python data source on the driver (framework.io.delta_stream). Instead the chain's
sink hands the same rows to each output's exactly-once sink, as side rows of the batch: each
output commits them with its own (app id, batch id) before the chain's table does, so a batch
replayed after a crash skips what was committed and commits the rest (framework.io.stream_sink).
The operator's files are moved into a table when committed, so each output gets its own copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from framework.io.staging import filesystem
from framework.io.stream_sink import WrittenRows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from framework.operators.micro_batch import Held, MicroBatchOperator

OUTPUT_SIDE = "output:"  # the side name of an output's rows (WrittenRows.side)


@dataclass
class ChainFeedsOutputs:
    """The `prepare` of a chain's sink: the operator's rows, with a copy of them per output."""

    operator: MicroBatchOperator
    sides: tuple[str, ...]  # OUTPUT_SIDE + output name
    current: dict[str, WrittenRows] | None = None

    @property
    def step(self) -> str:
        return self.operator.step

    @property
    def spec(self) -> Any:
        return self.operator.spec

    @property
    def figures(self) -> dict[str, int]:
        return self.operator.figures

    @property
    def side_tables(self) -> tuple[str, ...]:
        return self.operator.side_tables

    def held(self) -> Held | None:
        return self.operator.held()

    def __call__(self, batch: DataFrame, batch_id: int) -> WrittenRows:
        written = self.operator(batch, batch_id)
        self.current = {side: WrittenRows(_copy(written.folder, side), written.schema) for side in self.sides}
        placeholder = batch.sparkSession.range(0)  # the output's sink takes its rows from rows_for
        return WrittenRows(written.folder, written.schema, {**written.side, **dict.fromkeys(self.sides, placeholder)})

    def rows_for(self, sink_name: str) -> Any:
        """The `prepare` of the output `sink_name`'s sink: this batch's copy of the rows."""

        def prepare(_batch: DataFrame, _batch_id: int) -> WrittenRows:
            assert self.current is not None, "the chain's sink hands an output its rows after the operator ran"
            return self.current[OUTPUT_SIDE + sink_name]

        return prepare


def _copy(folder: str, side: str) -> str:
    """The Parquet files of `folder` copied to a sibling folder (emptied first: a replay copies again)."""
    fs, path = filesystem(folder)
    target = f"{path}-{side.replace(':', '-')}"
    if fs.get_file_info(target).type != pafs.FileType.NotFound:
        fs.delete_dir(target)
    fs.create_dir(target, recursive=True)
    for info in fs.get_file_info(pafs.FileSelector(path, allow_not_found=True)):
        if info.type == pafs.FileType.File and info.base_name.endswith(".parquet"):
            fs.copy_file(info.path, f"{target}/{info.base_name}")
    return folder.rsplit(path, 1)[0] + target if folder != path else target
