"""Is a Spark Connect server answering? Asked once before a session starts, then watched while
it runs.

Why: PySpark's client waits for ever on a server that does not answer. It retries a refused or
dropped connection with a growing backoff for many minutes, it waits on a listener that takes
the connection and says nothing (another program's port, a stuck server), and a call under way
has no deadline (a job may take hours), so a server that freezes in the middle of a run (a
stopped process, a network dropping its packets) held the run until someone pressed Ctrl-C twice.

Both checks ask the server one cheap question with a deadline: the details of an error that
never was (FetchErrorDetails, which creates no session on the server). Any answer, even an error
status, says a server is there. A slow job and a silent server look the same from inside the
job's call, but not from beside it: a server busy with a job still answers other calls at once
(gRPC's threads are not its tasks). So `check` refuses a URL where nothing answers (exit 2, before
any work), and `ServerWatch` asks again every few seconds on a channel of its own while the
session is open. When nothing answered for the profile's `spark.remote_silence_s`, it closes the
session's client, which ends every call waiting on it: the run fails (exit 1) with the watch's
reason (`lost`), and commits nothing, since a run commits its outputs last.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
import weakref
from typing import TYPE_CHECKING, Any

from framework import cluster_auth
from framework.engine.context import quietly
from framework.errors import BadInput, Problem
from framework.profiles import Profile

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: how often a watch asks its server, at most (more often when the silence allowed is short)
ASK_EVERY_S = 5.0

#: the watch of each Spark Connect session started here
_watches: weakref.WeakKeyDictionary[Any, ServerWatch] = weakref.WeakKeyDictionary()


def where(profile: Profile) -> str:
    """The server as messages name it: its URL without a token, and the setting it came from."""
    return f"{cluster_auth.shown_url(str(profile.spark.remote))} (profile '{profile.name}', spark.remote)"


def _ask(builder: Any, channel: Any, timeout_s: float) -> Any:
    """None when the server answered the cheap question, else the call's gRPC error (whose
    `code()` says whether that was the server's own refusal or no answer at all)."""
    import grpc
    from pyspark.sql.connect.proto import base_pb2, base_pb2_grpc

    question = base_pb2.FetchErrorDetailsRequest(session_id=str(uuid.uuid4()), error_id=str(uuid.uuid4()))
    question.user_context.user_id = builder.userId or "tributary"
    try:
        base_pb2_grpc.SparkConnectServiceStub(channel).FetchErrorDetails(question, timeout=timeout_s, metadata=builder.metadata())
    except grpc.RpcError as e:
        return e
    return None


def check(profile: Profile, timeout_s: float = 10.0) -> None:
    """Refuse a Spark Connect URL where no Spark Connect server answers, within seconds (exit 2,
    saying which case it is). A server that wants a token this process does not have says so too."""
    import grpc
    from pyspark.errors import PySparkValueError
    from pyspark.sql.connect.client.core import DefaultChannelBuilder

    url, at = str(profile.spark.remote), where(profile)
    try:
        builder = DefaultChannelBuilder(cluster_auth.connect_url(url))
    except PySparkValueError as e:
        raise BadInput(
            Problem(f"spark.remote of profile '{profile.name}' is no Spark Connect URL: {e}", hint="write it as sc://host:port")
        ) from None
    host, port = cluster_auth.connect_address(url)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as e:
        raise BadInput(
            Problem(
                f"no Spark Connect server answers at {at}: {e.strerror or e}",
                hint='start the server (docs/profiles.md, "Spark Connect") or set spark.remote to where it listens',
            )
        ) from None
    with builder.toChannel() as channel:
        error = _ask(builder, channel, timeout_s)
    code = error.code() if error is not None else None
    if code == grpc.StatusCode.UNAUTHENTICATED:
        raise BadInput(
            Problem(
                f"the Spark Connect server at {at} takes only clients with its token, and this run "
                f"has {'another one' if builder.token else 'none'}",
                hint="a server `tributary cluster up --connect` started gives this user's runs its token "
                "while it runs (dial it as localhost or 127.0.0.1); for another server, set "
                f"{cluster_auth.TOKEN_ENV} to its token and dial it as sc://localhost:<port>",
            )
        )
    if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
        what = (
            f"it answered nothing in {timeout_s:g} s"
            if code == grpc.StatusCode.DEADLINE_EXCEEDED
            else f"it dropped the connection ({error.details()})"
        )
        raise BadInput(
            Problem(
                f"what listens at {at} is no Spark Connect server, or one that is stuck: {what}",
                hint="check the port in spark.remote (a local cluster's: `tributary cluster status`); "
                "a stuck server's own log says why",
            )
        )
    # any other answer is the server's own (a refusal PySpark's client then says in its words)


class ServerWatch:
    """Asks a session's server the cheap question every few seconds; once nothing answered for
    `silence_s`, sets `lost` (the run's error) and closes the session's client."""

    def __init__(self, spark: SparkSession, profile: Profile, silence_s: float):
        self.spark, self.profile, self.silence_s = spark, profile, silence_s
        self.lost: str | None = None
        self._thread = threading.Thread(target=self._watch, name="tributary-connect-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        import grpc
        from pyspark.sql.connect.client.core import DefaultChannelBuilder

        every = min(ASK_EVERY_S, self.silence_s / 4)
        builder = DefaultChannelBuilder(cluster_auth.connect_url(str(self.profile.spark.remote)))
        answered = time.monotonic()
        with builder.toChannel() as channel:
            while not self.spark.is_stopped:  # type: ignore[attr-defined]
                error = _ask(builder, channel, every)
                code = error.code() if error is not None else None
                if code not in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
                    answered = time.monotonic()
                elif time.monotonic() - answered >= self.silence_s:
                    self.lost = (
                        f"the Spark Connect server at {where(self.profile)} stopped answering: nothing for "
                        f"{self.silence_s:g} s; the run let go of it (for a server that pauses longer, raise "
                        "spark.remote_silence_s in the profile)"
                    )
                    quietly(self.spark.client.close)  # type: ignore[attr-defined]
                    return
                if code != grpc.StatusCode.DEADLINE_EXCEEDED:  # that call waited its deadline already
                    time.sleep(every)


def watch(spark: SparkSession, profile: Profile) -> None:
    """Watch a Spark Connect session's server while the session is open (module docstring)."""
    silence = profile.spark.remote_silence_s
    if silence is not None and spark not in _watches:
        _watches[spark] = ServerWatch(spark, profile, silence)


def lost(spark: SparkSession | None) -> str | None:
    """Why the session's client was closed, when its server stopped answering; else None."""
    found = _watches.get(spark) if spark is not None else None
    return found.lost if found is not None else None
