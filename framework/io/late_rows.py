"""Rows later than their source's watermark: found, counted and kept, never silently dropped.

Spark's stateful operators drop rows older than the query watermark (the minimum over its
sources of max event time seen − delay) without a trace. For each source with a watermark this
monitor tracks the same quantity for that source alone and writes every row older than it to
<warehouse>/_tributary/late_rows. A source's own watermark is never below the query's, so every
row Spark may drop is recorded (a row between the two is recorded yet may still be processed).

The max event time before each batch is kept beside the checkpoint as {batch, before, after}, so
a replayed batch is judged against the same watermark as the first time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pyarrow.fs as pafs

from framework.io.staging import filesystem

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass
class LateRowMonitor:
    source: str
    steps: tuple[str, ...]
    event_time: str
    delay_s: float
    state_file: str
    run_id: str
    pipeline: str
    late: int = 0

    def _read_state(self) -> dict | None:
        fs, path = filesystem(self.state_file)
        if fs.get_file_info(path).type == pafs.FileType.NotFound:
            return None
        with fs.open_input_stream(path) as handle:
            return json.loads(handle.read().decode())

    def _write_state(self, state: dict) -> None:
        fs, path = filesystem(self.state_file)
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with fs.open_output_stream(path + ".tmp") as handle:
            handle.write(json.dumps(state).encode())
        fs.move(path + ".tmp", path)

    def max_before(self, batch_id: int) -> datetime | None:
        state = self._read_state()
        if state is None:
            return None
        value = (
            state["before"] if state["batch"] == batch_id else state["after"] if state["batch"] < batch_id else state["before"]
        )
        return datetime.fromisoformat(value) if value else None

    def __call__(self, batch: DataFrame, batch_id: int) -> DataFrame:
        """The late rows of this micro-batch, shaped for the late-rows table."""
        from pyspark.sql import functions as F

        before = self.max_before(batch_id)
        newest = batch.agg(F.max(self.event_time).alias("m")).first()
        batch_max = newest["m"] if newest is not None else None
        after = max([t for t in (before, _utc(batch_max)) if t is not None], default=None)
        self._write_state(
            {"batch": batch_id, "before": before.isoformat() if before else None, "after": after.isoformat() if after else None}
        )
        if before is None:
            return batch.limit(0).select(*self._columns(batch, None))
        watermark = before - timedelta(seconds=self.delay_s)
        late = batch.where(F.col(self.event_time) < F.lit(watermark))
        return late.select(*self._columns(late, watermark))

    def _columns(self, frame: DataFrame, watermark: datetime | None) -> list:
        from pyspark.sql import functions as F

        mark = F.lit(watermark).cast("timestamp") if watermark else F.lit(None).cast("timestamp")
        reason = F.format_string(
            f"{self.event_time} %s is older than the watermark %s of source '{self.source}' "
            f"(latest event time so far − {self.delay_s:g}s)",
            F.col(self.event_time).cast("string"),
            mark.cast("string"),
        )
        return [
            F.lit(self.run_id).alias("run_id"),
            F.lit(self.pipeline).alias("pipeline"),
            F.lit(self.source).alias("source"),
            F.lit(", ".join(self.steps)).alias("steps"),
            F.col(self.event_time).cast("timestamp").alias("event_time"),
            mark.alias("watermark"),
            F.to_json(F.struct(*[F.col(f"`{c}`") for c in frame.columns])).alias("record"),
            reason.alias("reason"),
        ]


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
