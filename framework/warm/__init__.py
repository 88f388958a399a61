"""The warm engine: one long-lived local process with one embedded SparkSession, shared by CLI calls.

Why: an analyst's day is the edit-run loop, and most of a small run's wall time is starting a JVM
and a SparkSession (and warming them up), not the run. The warm engine pays that once: `tributary
run` (also `tune` and `evaluate`) hands its command to an engine process that already holds a
session, which runs it exactly as the embedded path would (the same typer command, in the same
kind of session the test suite shares between hundreds of runs), streams the console output back
and returns the exit code.

Why a process of our own and not Spark Connect: Tributary uses the driver's JVM directly (the SWA
fold registered through py4j, the streaming checks, the status tracker, the choice of Delta
writer); over Spark Connect each of those would need a fallback. An engine that *is* the embedded
driver keeps every feature as it is.

- place.py: where an engine lives (a per-user folder, 0700) and its key (a hash of everything that
  shapes the session: master, confs, Python, the framework's own source), so a client never uses an
  engine started with other settings or an older Tributary.
- protocol.py: newline-delimited JSON messages over a Unix domain socket (never TCP).
- server.py: the engine process: start the session, take requests one at a time, isolate runs from
  each other, stop when idle.
- client.py: find or start the engine for a profile, hand it a command, relay its output, pass
  Ctrl-C on; fall back to the embedded engine when it cannot start.
- warm_up.py (and warm-up-project/): what an engine `tributary engine start` started does while it
  waits for its first command: runs tests of its own, so that command runs as a second one would.
"""

#: True in the engine process itself: commands it runs must not hand themselves on again
serving = False
