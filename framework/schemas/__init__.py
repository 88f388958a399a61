"""Schemas before Spark starts: the columns and types of every source and step, so `validate` can
name a misspelt column, a merge key the output lacks or an expectation on the wrong type of column
without a JVM.

columns.py holds what a schema is (and reads Spark DDL); query.py follows a Spark SQL query with
sqlglot; expectations.py checks expectations against the columns they name. Each step kind says
what its own output columns are (`output_schema` in framework.operators.registry), and the
compiler carries the schemas through the pipeline in graph order.
"""

from framework.schemas.columns import Column, Schema, from_ddl, from_pairs

__all__ = ["Column", "Schema", "from_ddl", "from_pairs"]
