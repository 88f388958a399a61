"""JVM options for a JVM that runs many short plans: the warm engine, `tributary test`'s JVM, and
the suite's cluster and Spark Connect daemons.

The first JIT tier only (C1, `-XX:TieredStopAtLevel=1`): no code runs long enough for the second
tier's optimised compile to pay back, and its compiler threads take a core of two (the figures are
beside each use: framework.warm.place, framework.testing.run, CONTRIBUTING.md).

With the first tier only, HotSpot reserves a code cache of 48 MB instead of 240 MB. Spark
generates and loads code for every plan, and a JVM that lives long enough fills it: the JIT is
then switched off ("CodeCache is full. Compiler has been disabled"), and the JVM can die with
"Out of space in CodeCache for adapters", as a Spark Connect server of the suite did after 40 s of
the example pipelines. So the cache gets the size both tiers have; it is reserved address space,
and only the code compiled takes memory.
"""

from __future__ import annotations

FIRST_TIER_ONLY = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
