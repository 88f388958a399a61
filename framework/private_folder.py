"""This user's private folder: what one user's processes share and nobody else may read or replace.

The warm engines' sockets, locks and logs (framework.warm.place) and the secrets of the local
clusters this user started (framework.cluster_auth) live there. It is $TRIBUTARY_RUNTIME_DIR,
else $XDG_RUNTIME_DIR/tributary, else <tmp>/tributary-<uid>, created with mode 0700 and refused
when it belongs to someone else or others may enter it.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class NotPrivate(Exception):
    """The folder cannot be made, or is not this user's alone; the message says which."""


def private_folder() -> Path:
    chosen = os.environ.get("TRIBUTARY_RUNTIME_DIR")
    if chosen:
        folder = Path(chosen)
    elif os.environ.get("XDG_RUNTIME_DIR"):
        folder = Path(os.environ["XDG_RUNTIME_DIR"]) / "tributary"
    else:
        folder = Path(tempfile.gettempdir()) / f"tributary-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.stat()
    except OSError as e:
        raise NotPrivate(f"cannot create {folder}: {e.strerror}") from None
    if info.st_uid != os.getuid():
        raise NotPrivate(f"{folder} belongs to another user")
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise NotPrivate(f"{folder} is open to other users (chmod 700 {folder})")
    return folder
