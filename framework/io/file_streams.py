"""Options every file source's stream reads with, besides the source's own.

Why its own module: JSON, CSV, Parquet (framework.io.sources) and text (framework.io.text_source)
streams read folders the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from framework.spec.models import FileSource, TextSource

#: how old a file may be, next to the newest one a stream has read, and still be read: Spark's
#: default, a week, skipped files copied in with their old times (`cp -p`, `rsync -t`, an archive
#: unpacked) for good, with nothing said
MAX_FILE_AGE = "36500d"


def stream_reading(spec: FileSource | TextSource, options: dict[str, str]) -> dict[str, str]:
    """Its files per trigger, and every file however old (unless `options`, the source's own, say
    otherwise)."""
    found = {} if any(k.lower() == "maxfileage" for k in options) else {"maxFileAge": MAX_FILE_AGE}
    if spec.max_files_per_trigger:
        found["maxFilesPerTrigger"] = str(spec.max_files_per_trigger)
    return found
