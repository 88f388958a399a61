"""How much work the column check of a query would be, known before it starts, and the budget one
pipeline's queries share.

sqlglot's qualifier follows each column up through the expressions that hold it (to find its
scope, its select, its aggregate), so its time grows with the column references times how deep
they sit: a WHERE clause of 20,000 `OR` terms is a chain 20,000 levels deep, and its 380 KB kept
`validate` busy for more than two minutes, while the parse that the syntax check and the SQL
policy need took seconds. A wide SELECT costs by its nodes (a 1,000-column one took 2 s), and
every query a fixed part (about as much as 500 nodes' depth). So a query's cost, in units of about
10 µs of sqlglot on one core, is

    QUERY_OVERHEAD + NODE_COST × nodes + the depth of every column reference, summed

and the column check (framework.schemas.query) is skipped for a query costing more than
MAX_QUERY_COST, and for every query once a pipeline's queries have spent PIPELINE_BUDGET (a
2,000-step pipeline took 9.8 s). A skipped step's columns are then unknown (the steps after it
are not checked either), Spark checks them in the run, and validate says so in a note at the
query's line. Ordinary queries are far below: the largest of tests/sql_corpus.py's ~100 costs
about 1,300 units; a chain of 150 `OR` terms, or a 300-column SELECT, about 10,000.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlglot import exp

QUERY_OVERHEAD = 500
NODE_COST = 30
#: A query costing more is not column-checked (about a second).
MAX_QUERY_COST = 100_000
#: One pipeline's queries together (a few seconds): past it, the remaining queries are not column-checked.
PIPELINE_BUDGET = 500_000


@dataclass(frozen=True)
class QuerySize:
    nodes: int
    columns: int  # column references
    depth: int  # the deepest expression
    work: int  # every column reference's depth, summed

    @property
    def cost(self) -> int:
        return QUERY_OVERHEAD + NODE_COST * self.nodes + self.work

    def said(self) -> str:
        return f"{self.nodes:,} expressions, {self.columns:,} column references, up to {self.depth:,} levels deep"


def query_size(statement: exp.Expr) -> QuerySize:
    """One walk of the tree, without recursion (a deep chain would exhaust Python's stack)."""
    from sqlglot import exp

    nodes = columns = depth = work = 0
    stack: list[tuple[exp.Expr, int]] = [(statement, 0)]
    while stack:
        node, level = stack.pop()
        nodes += 1
        depth = max(depth, level)
        if isinstance(node, exp.Column):
            columns += 1
            work += level
        stack.extend((child, level + 1) for child in node.iter_expressions())
    return QuerySize(nodes, columns, depth, work)


@dataclass
class ColumnBudget:
    """What is left of one pipeline's PIPELINE_BUDGET; once a query does not fit, none does, so
    the steps checked are the first ones in graph order whatever their sizes after."""

    left: int = PIPELINE_BUDGET
    checked: int = 0
    spent: bool = False

    def why_not(self, size: QuerySize) -> tuple[str, bool] | None:
        """Why the query is not column-checked and whether to say so (once for the budget: at the
        first query past it), or None when it is checked (and its cost is spent)."""
        if size.cost > MAX_QUERY_COST:
            return f"its query is too large for validate's column check ({size.said()})", True
        if self.spent or size.cost > self.left:
            first, self.spent = not self.spent, True
            why = f"the pipeline's queries used up validate's column-check budget after the first {self.checked:,} in order"
            return why, first
        self.left -= size.cost
        self.checked += 1
        return None
