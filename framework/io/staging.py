"""The Parquet files Spark wrote for a staged output (any filesystem pyarrow knows)."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from framework.io.locations import is_uri

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem a location is on, and the path on it. A local path is not made a URI: a
    folder named with a space, '#' or '%' is not URI syntax."""
    if is_uri(location):
        return pafs.FileSystem.from_uri(location)
    return pafs.LocalFileSystem(), os.path.abspath(location.removeprefix("file://").removeprefix("file:"))


def list_parquet(folder: str) -> list[dict[str, Any]]:
    """Data files under folder with their relative path, size, partition values (from col=val
    folders) and row count (from the Parquet footer). Spark's checksum and marker files are removed."""
    fs, root = filesystem(folder)
    files = []
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        if info.type != pafs.FileType.File:
            continue
        relative = info.path[len(root) :].lstrip("/")
        name = relative.rsplit("/", 1)[-1]
        if name.endswith(".crc") or name.startswith(("_", ".")):
            fs.delete_file(info.path)
            continue
        with fs.open_input_file(info.path) as handle:
            rows = pq.read_metadata(handle).num_rows
        files.append(
            {
                "path": relative,
                "size": info.size,
                "mtime_ms": int(info.mtime.timestamp() * 1000) if info.mtime else 0,
                "partition_values": partition_values(relative),
                "rows": rows,
            }
        )
    return files


def partition_values(relative_path: str) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for part in relative_path.split("/")[:-1]:
        key, sep, value = part.partition("=")
        if sep:
            raw = unquote(value)
            values[unquote(key)] = None if raw == HIVE_NULL else raw
    return values


def move_into(staging: str, files: list[dict[str, Any]], table: str) -> None:
    fs, staging_root = filesystem(staging)
    _, table_root = filesystem(table)
    for f in files:
        target = f"{table_root}/{f['path']}"
        fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        fs.move(f"{staging_root}/{f['path']}", target)


def remove_tree(location: str) -> None:
    fs, root = filesystem(location)
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.Directory:
        fs.delete_dir(root)
    elif info.type == pafs.FileType.File:
        fs.delete_file(root)


def exists(location: str) -> bool:
    fs, root = filesystem(location)
    return fs.get_file_info(root).type != pafs.FileType.NotFound
