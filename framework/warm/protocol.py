"""Messages between a client and the warm engine: one JSON object per line over a Unix socket.

Client → engine, first message: {"t": "run", "argv", "cwd", "env", "out": {"tty", "width"},
"err": {...}}, or {"t": "status"}, or {"t": "stop"}; later, during a run: {"t": "cancel"}.
Engine → client: {"t": "out"|"err", "d": text} as the command prints, {"t": "busy", "with": ...}
while another run holds the engine, and last {"t": "exit", "code": n} (with "died": reason when
the engine cannot go on), or {"t": "status", ...} for a status request.

Why JSON lines: text and a few numbers, readable in a debugger, no framing to get wrong. The
socket lives in a 0700 folder; only its owner can connect.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from typing import Any


class Channel:
    """One connection: whole messages in, whole messages out (sending is thread-safe)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buffer = b""
        self._send_lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, ensure_ascii=False) + "\n").encode()
        with self._send_lock:
            self.sock.sendall(data)

    def receive(self) -> dict[str, Any] | None:
        """The next message, or None when the other side closed the connection."""
        while b"\n" not in self._buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ValueError("a message must be a JSON object")
        return message

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def connect(path: str, timeout: float | None = None) -> Channel:
    """Connect to an engine's socket (FileNotFoundError / ConnectionRefusedError when none listens)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    sock.settimeout(None)
    return Channel(sock)


def ask(path: str, message: dict[str, Any], timeout: float = 5.0) -> dict[str, Any] | None:
    """One question, one answer (status, stop); None when no engine answers there."""
    try:
        channel = connect(path, timeout)
    except OSError:
        return None
    try:
        channel.sock.settimeout(timeout)
        channel.send(message)
        return channel.receive()
    except (OSError, ValueError):
        return None
    finally:
        channel.close()
