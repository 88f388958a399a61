"""A Spark standalone cluster on this machine: a master and workers started from pyspark's own
launcher, for a user who wants to try a cluster (`tributary cluster up`) and for the suite's
cluster tests. Nothing here is needed to run on a real cluster: a profile's `spark.master` is."""
