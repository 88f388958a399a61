"""What a streaming query's checkpoint says about its batches, read without Spark: which batches
committed, each batch's watermark, and the files each file source read.

Spark writes `offsets/<batch>` (one line per source: how far the batch read) before the batch
runs and `commits/<batch>` after it; a file source logs the files it takes in
`sources/<i>/<log offset>`, folding every tenth log into `<log offset>.compact`. So inside
foreachBatch the running batch's files are already known.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any

import pyarrow.fs as pafs

from framework.io.locations import from_spark_path
from framework.io.staging import filesystem

COMPACT = ".compact"


@dataclass(frozen=True)
class StreamCheckpoint:
    folder: str

    def committed(self) -> list[int]:
        return sorted(int(i.base_name) for i in self._list("commits") if i.base_name.isdigit())

    def watermark(self, batch: int) -> datetime | None:
        lines = self._offset_lines(batch)
        millis = json.loads(lines[1]).get("batchWatermarkMs", 0) if len(lines) > 1 else 0
        return datetime.fromtimestamp(millis / 1000, tz=UTC).replace(tzinfo=None) if millis else None

    def offsets(self, batch: int) -> list[Any]:
        """Per source, the offset a batch read up to (None for a source that is not a file log)."""
        return [json.loads(line) if line.startswith("{") else None for line in self._offset_lines(batch)[2:]]

    def files(self, batch: int, location: str = "") -> list[str]:
        """Files under `location` (a file, folder or glob; default: of every file source) that one
        batch read: the file source log entries between the previous batch's log offset and this
        one's. Only the logs that can hold them are read: each offset's own log, or the first
        compact log after it once Spark has folded it away."""
        prefix = from_spark_path(location).rstrip("/")
        now, before = self.offsets(batch), self.offsets(batch - 1) if batch > 0 else []
        files: set[str] = set()
        for index, offset in enumerate(now):
            if not isinstance(offset, dict) or "logOffset" not in offset:
                continue
            previous = before[index] if index < len(before) and isinstance(before[index], dict) else {}
            low, high = previous.get("logOffset", -1), offset["logOffset"]
            for entry in self._log_entries(f"sources/{index}", low, high):
                if _is_under(from_spark_path(entry["path"]), prefix):
                    files.add(entry["path"])
        return sorted(files)

    # -- Spark's log files -----------------------------------------------------------------------

    def _log_entries(self, log: str, low: int, high: int) -> list[dict[str, Any]]:
        """Entries with low < batchId <= high of a compacting file log."""
        plain: set[int] = set()
        compact: list[int] = []
        for info in self._list(log):
            number = info.base_name.removesuffix(COMPACT)
            if not number.isdigit():
                continue  # checksum and temporary files
            if info.base_name.endswith(COMPACT):
                compact.append(int(number))
            else:
                plain.add(int(number))
        names: set[str] = set()
        for offset in range(low + 1, high + 1):
            if offset in plain:
                names.add(str(offset))
            elif covering := [c for c in compact if c >= offset]:
                names.add(f"{min(covering)}{COMPACT}")
        entries = []
        for name in sorted(names):
            for line in self._lines(f"{log}/{name}")[1:]:
                entry = json.loads(line)
                if low < entry.get("batchId", -1) <= high:
                    entries.append(entry)
        return entries

    def _offset_lines(self, batch: int) -> list[str]:
        return self._lines(f"offsets/{batch}") if batch >= 0 else []

    def _list(self, folder: str) -> list[pafs.FileInfo]:
        fs, path = filesystem(f"{self.folder}/{folder}")
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return [i for i in infos if i.type == pafs.FileType.File and not i.base_name.startswith(".")]

    def _lines(self, relative: str) -> list[str]:
        fs, path = filesystem(f"{self.folder}/{relative}")
        try:
            with fs.open_input_stream(path) as handle:
                return handle.read().decode().splitlines()
        except FileNotFoundError:
            return []


def _is_under(path: str, location: str) -> bool:
    if not location or path == location or path.startswith(location + "/"):
        return True
    return any(c in location for c in "*?[") and (fnmatchcase(path, location) or fnmatchcase(path, location + "/*"))
