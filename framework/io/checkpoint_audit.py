"""Malformed and late rows of file sources, found from a streaming query's own checkpoint.

Reading a source a second time (a separate audit query) doubled the cost of every streaming run.
Instead the main query counts malformed records as it reads (observed metrics) and observes each
batch's oldest event time per source: a batch whose oldest row is older than its watermark had
late rows, whichever operator met them (Spark counts the rows its stateful aggregations drop, but
not those a stream-stream join or a per-micro-batch operator leaves out). After batches commit, a
batch with nothing malformed and nothing late needs nothing; otherwise the files that batch read
(the checkpoint's `sources/<i>/` log) are read again and split into
- malformed records → the quarantine table, and
- rows older than that batch's watermark (the checkpoint's `offsets/<batch>`) → late_rows
  (every row Spark dropped is among them; a row just under the watermark that a join still
  matched is recorded too).
Each table commit carries (app id, batch id), so an audit repeated after a crash is skipped. A
batch whose counts were lost with a crashed process is audited by reading its files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from framework.io.staging import filesystem
from framework.io.stream_checkpoint import StreamCheckpoint
from framework.io.stream_sink import ExactlyOnceDeltaSink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class AuditedSource:
    name: str
    location: str
    read_batch: Any  # files -> (good rows, bad rows as file/record/reason) as static DataFrames
    event_time: str | None
    steps: tuple[str, ...]
    quarantine: ExactlyOnceDeltaSink | None
    late: ExactlyOnceDeltaSink | None


@dataclass
class CheckpointAuditor:
    spark: SparkSession
    checkpoint: str
    sources: list[AuditedSource]
    run_id: str
    pipeline: str
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # source -> {"bad": n, "late": n}

    def audit(self, progress: list[Any]) -> None:
        """Audit every committed batch not audited yet; `progress` holds this process's reports."""
        metrics = {_get(p, "batchId"): p for p in progress}
        last = self._last_audited()
        checkpoint = StreamCheckpoint(self.checkpoint)
        for batch in checkpoint.committed():
            if batch <= last:
                continue
            report = metrics.get(batch)
            dropped = (
                sum(_get(op, "numRowsDroppedByWatermark") or 0 for op in _get(report, "stateOperators") or []) if report else None
            )
            observed = (_get(report, "observedMetrics") or {}) if report else None
            for source in self.sources:
                bad = _bad_count(observed, source.name) if observed is not None else None
                needs_quarantine = source.quarantine is not None and (bad is None or bad > 0)
                late = _oldest_is_late(observed, source.name, checkpoint.watermark(batch))
                needs_late = source.late is not None and (late or (dropped is not None and dropped > 0))
                if needs_quarantine or needs_late:
                    self._audit_batch(batch, source, needs_quarantine, needs_late)
            self._mark_audited(batch)

    def _last_audited(self) -> int:
        fs, path = filesystem(self.checkpoint + ".audited")
        if fs.get_file_info(path).type == pafs.FileType.NotFound:
            return -1
        with fs.open_input_stream(path) as handle:
            return int(handle.read().decode().strip() or -1)

    def _mark_audited(self, batch: int) -> None:
        fs, path = filesystem(self.checkpoint + ".audited")
        with fs.open_output_stream(path + ".tmp") as handle:
            handle.write(str(batch).encode())
        fs.move(path + ".tmp", path)

    def _audit_batch(self, batch: int, source: AuditedSource, quarantine: bool, late: bool) -> None:
        from pyspark.sql import functions as F

        checkpoint = StreamCheckpoint(self.checkpoint)
        files = checkpoint.files(batch, source.location)
        if not files:
            return
        good, bad = source.read_batch(files)
        if quarantine and source.quarantine is not None:
            shaped = bad.select(
                F.lit(self.run_id).alias("run_id"), F.lit(self.pipeline).alias("pipeline"), F.lit(source.name).alias("source"),
                "file", "line", "record", "reason", F.lit(None).cast("string").alias("expectation"),
                F.current_timestamp().alias("quarantined_at"),
            )  # fmt: skip
            source.quarantine(shaped, batch)
            self._count(source.name, "bad", source.quarantine)
        watermark = checkpoint.watermark(batch)
        if late and source.late is not None and source.event_time and watermark is not None:
            rows = good.where(F.col(source.event_time) < F.lit(watermark))
            source.late(
                late_records(rows, source.name, source.steps, source.event_time, watermark, self.run_id, self.pipeline), batch
            )
            self._count(source.name, "late", source.late)

    def _count(self, source: str, kind: str, sink: ExactlyOnceDeltaSink) -> None:
        self.counts.setdefault(source, {"bad": 0, "late": 0})[kind] = sink.rows


def _oldest_is_late(observed: Any, source: str, watermark: datetime | None) -> bool:
    """Whether the batch's oldest row of `source` is older than the batch's watermark (True when
    the oldest event time is unknown: the audit then looks)."""
    from framework.io.sources import oldest_metric

    if watermark is None:
        return False
    row = observed.get(oldest_metric(source)) if isinstance(observed, dict) else None
    if row is None:
        return observed is None
    value = _get(row, "oldest")
    if value is None and hasattr(row, "asDict"):
        value = row.asDict().get("oldest")
    if value is None:
        return False  # the batch had no rows of this source
    return int(value) < round(watermark.replace(tzinfo=UTC).timestamp() * 1_000_000)


def _bad_count(observed: Any, source: str) -> int | None:
    row = observed.get(f"tributary_bad_{source}") if isinstance(observed, dict) else None
    if row is None:
        return None
    value = row.get("bad") if isinstance(row, dict) else getattr(row, "bad", None)
    if value is None and hasattr(row, "asDict"):
        value = row.asDict().get("bad")
    return int(value) if value is not None else None


def late_records(
    rows: DataFrame, source: str, steps: tuple[str, ...], event_time: str, watermark: datetime, run_id: str, pipeline: str
) -> DataFrame:
    """Late rows in the shape of the late-rows table: each row as JSON, its event time and the
    watermark it missed."""
    from pyspark.sql import functions as F

    mark = F.lit(watermark).cast("timestamp")
    return rows.select(
        F.lit(run_id).alias("run_id"), F.lit(pipeline).alias("pipeline"), F.lit(source).alias("source"),
        F.lit(", ".join(steps)).alias("steps"), F.col(event_time).cast("timestamp").alias("event_time"),
        mark.alias("watermark"),
        F.to_json(F.struct(*[F.col(f"`{c}`") for c in rows.columns if not c.startswith("__tributary")])).alias("record"),
        F.format_string(f"{event_time} %s is older than the watermark %s of the micro-batch that read it",
                        F.col(event_time).cast("string"), mark.cast("string")).alias("reason"),
    )  # fmt: skip


def _get(item: Any, name: str) -> Any:
    if item is None:
        return None
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)
