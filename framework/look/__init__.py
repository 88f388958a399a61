"""Looking at tables without a JVM: `tributary show`, `history` and `query`.

tables.py says which Delta table a name means (an output, Tributary's own tables, a folder);
delta_tables.py reads its rows at a version and its history with delta-rs; sql.py runs `--where`
and `query` in a sandboxed DuckDB over Arrow datasets; commands.py is what each command does.
Nothing here imports Spark or Great Expectations (tests/test_foundations.py checks it).
"""
