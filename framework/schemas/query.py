"""A Spark SQL query's output columns, and the columns it names that its inputs lack, without a JVM.

sqlglot's qualifier (Spark dialect) resolves every column of the query against the schemas of the
views it reads (each a source or step of the pipeline), and its type annotation gives the output's
types. What is reported must be certain, because a false alarm blocks a query Spark would run.
So a query is checked only when every name in it can be listed: each view it reads has a complete
schema, and nothing in it makes columns whose names only Spark knows (a PIVOT, a `LATERAL VIEW`
without column names, a table function, a derived table or CTE with an unaliased expression such
as `explode(arr)` or `window(ts, '1 minute')`). Then a column is reported unknown only when no
view, alias or lambda of the query has that name, and never when it is qualified by something that
is not a table (`s.field` of a struct, `window.start`).

A column outside GROUP BY is reported in the plain case only: a bare column in the SELECT list of a
grouped or aggregating query that no GROUP BY expression equals (after sqlglot has resolved GROUP
BY aliases and positions); GROUP BY ALL, ROLLUP, CUBE and GROUPING SETS are left to Spark.

Output names are Spark's where they are certain: an alias, a column (`t.a` is `a`), a struct field
(`s.x` is `x`). Spark names an unaliased expression by its own rules (`count(1)`), so such a
column makes the output schema incomplete rather than guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from framework.schemas.columns import Column, Schema, normalized

#: Spark functions written without parentheses, which sqlglot may read as columns
NILADIC = frozenset(
    {
        "current_date", "current_timestamp", "current_time", "current_user", "user", "session_user",
        "localtimestamp", "current_catalog", "current_database", "current_schema",
    }
)  # fmt: skip
_TAG = "tributary_name"  # meta of a projection before qualification: its certain output name, or None
_GENERATED = re.compile(r"^_col_\d+$")  # sqlglot's name for an unaliased expression


@dataclass(frozen=True)
class Finding:
    """A problem in the query at a line of the text sqlglot read."""

    message: str
    line: int
    hint: str | None = None


@dataclass(frozen=True)
class Analysis:
    schema: Schema
    findings: list[Finding] = field(default_factory=list)


def analyze(statement: exp.Expr, relations: dict[str, Schema], text: str | None = None) -> Analysis:
    """The output schema of `statement` (a parsed query) over `relations` (view name -> schema),
    and what is certainly wrong with its columns. `text` is what sqlglot parsed (for names as
    written). Never raises: what sqlglot cannot follow is not checked."""
    from sqlglot.optimizer.qualify import qualify

    views = {name.lower(): schema for name, schema in relations.items()}
    tree = statement.copy()
    blockers = _blockers(tree, views)
    reordered = _star_over_using(tree)
    starred = _selects_star(tree)
    _tag_projections(tree)
    mapping = _mapping(views)
    try:
        qualified = qualify(
            tree,
            schema=mapping,
            dialect="spark",
            validate_qualify_columns=False,
            identify=False,
            quote_identifiers=False,
        )
    except Exception as e:  # noqa: BLE001 - sqlglot's optimizer may fail on Spark it does not know; then nothing is reported
        stopped = [] if blockers else _unknown_qualified(str(e), statement, text, views)
        return Analysis(_written_output(statement, views, "sqlglot cannot follow the query"), stopped)
    findings: list[Finding] = []
    if not blockers:
        try:
            findings = _unknown_columns(qualified, _names_defined(statement), views, text) + _ungrouped_columns(qualified, text)
        except Exception:  # noqa: BLE001 - a scope sqlglot cannot build: nothing certain to say
            findings = []
    try:
        from sqlglot.optimizer.annotate_types import annotate_types

        annotate_types(qualified, schema=mapping, dialect="spark")
    except Exception:  # noqa: BLE001 - types are a bonus: without them the names still stand
        pass
    schema = _output(qualified, views)
    if blockers and schema.complete and (starred or "PIVOT" in blockers):
        schema = schema.incomplete(f"Spark lists its columns itself ({blockers[0]})")
    if reordered and schema.complete:
        schema = schema.incomplete("Spark orders * over a USING or NATURAL join its own way")
    return Analysis(schema, findings)


def _selects_star(tree: exp.Expr) -> bool:
    root = _leftmost_select(tree)
    return root is not None and any(p.is_star for p in root.expressions)


def _star_over_using(tree: exp.Expr) -> bool:
    """The output selects * (or t.*) over a USING or NATURAL join, whose columns Spark orders itself."""
    root = _leftmost_select(tree)
    if root is None or not _selects_star(tree):
        return False
    return any(
        join.args.get("using") or "NATURAL" in (join.text("method") or "").upper() for join in root.args.get("joins") or []
    )


# -- what makes a query uncheckable -----------------------------------------------------------------


def _blockers(tree: exp.Expr, views: dict[str, Schema]) -> list[str]:
    """Why the names in the query cannot all be listed (empty: they can)."""
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    reasons = []
    for node in tree.walk():
        if isinstance(node, exp.Table):
            if node.find_ancestor(exp.Hint) is not None:
                continue
            name = node.name.lower()
            if not isinstance(node.this, exp.Identifier) or node.args.get("db") or node.args.get("catalog"):
                reasons.append(f"it reads {node.sql('spark')}")
            elif name not in ctes and (name not in views or not views[name].complete):
                reasons.append(f"the columns of '{node.name}' are not all known")
        elif isinstance(node, exp.Pivot):  # PIVOT and UNPIVOT
            reasons.append("PIVOT")
        elif isinstance(node, exp.Lateral):
            alias = node.args.get("alias")
            if alias is None or not alias.columns:
                reasons.append("a LATERAL VIEW without column names")
        elif isinstance(node, exp.Values):
            alias = node.args.get("alias")
            if alias is None or not alias.columns:
                reasons.append("VALUES without column names")
        elif isinstance(node, exp.QueryTransform):
            reasons.append("TRANSFORM ... USING")
        elif isinstance(node, exp.Select) and _exposes_names(node) and any(_certain_name(p) is None for p in node.expressions):
            reasons.append("a subquery with an unaliased expression")
    return reasons


def _exposes_names(select: exp.Select) -> bool:
    """The select is a CTE or a derived table: other parts of the query name its columns."""
    node: exp.Expr = select
    while isinstance(node.parent, (exp.Subquery, exp.SetOperation, exp.Paren)):
        if isinstance(node.parent, exp.Subquery) and node.parent.args.get("alias") is not None and node.parent.alias_column_names:
            return False  # `(...) AS q(a, b)` names them
        node = node.parent
    return isinstance(node.parent, (exp.CTE, exp.From, exp.Join, exp.Lateral))


def _certain_name(projection: exp.Expr) -> str | None:
    """The output name Spark gives a projection, when it is certain."""
    if isinstance(projection, exp.Alias):
        return projection.alias
    if isinstance(projection, exp.Aliases):
        return ",".join(e.name for e in projection.expressions)
    if isinstance(projection, exp.Column):
        return projection.name  # a column, a struct field (s.x), or t.* (expanded)
    if isinstance(projection, exp.Star):
        return "*"
    if isinstance(projection, exp.Dot):
        return projection.name
    return None


def _tag_projections(tree: exp.Expr) -> None:
    for select in tree.find_all(exp.Select):
        for projection in select.expressions:
            projection.meta[_TAG] = _certain_name(projection)


def _mapping(views: dict[str, Schema]) -> dict[str, object]:
    """sqlglot's schema: the views whose columns are all known (the others stay unknown tables)."""
    return {
        name: {_quoted(c.name): c.type or "UNKNOWN" for c in schema.columns} for name, schema in views.items() if schema.complete
    }


def _quoted(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else "`" + name.replace("`", "``") + "`"


# -- unknown columns ---------------------------------------------------------------------------------


def _unknown_columns(qualified: exp.Expr, named_here: set[str], views: dict[str, Schema], text: str | None) -> list[Finding]:
    """Columns that nothing the query reads has, in their scope or an enclosing one (correlated
    subqueries), and that are no alias or lambda parameter of the query (`named_here`, as
    written: the qualifier aliases every projection)."""
    from sqlglot.optimizer.scope import traverse_scope

    findings, seen = [], set()
    for scope in traverse_scope(qualified):
        if not isinstance(scope.expression, exp.Select) or scope.pivots:
            continue
        visible: set[str] | None = None
        for column in scope.external_columns:
            name = column.name.lower()
            if column.table or name in named_here or name in NILADIC or name.startswith("_metadata"):
                continue
            visible = _visible(scope, views) if visible is None else visible
            if not visible or name in visible:
                continue
            line = _line(column)
            if (name, line) in seen:
                continue
            seen.add((name, line))
            written = _as_written(column, text)
            findings.append(Finding(f"unknown column '{written}'", line, _hint(written, scope, views)))
    return findings


def _visible(scope: Any, views: dict[str, Schema]) -> set[str]:
    """The columns of what the scope and the scopes around it read (empty: not all known)."""
    names: set[str] = set()
    while scope is not None:
        for source in scope.sources.values():
            if isinstance(source, exp.Table):
                view = views.get(source.name.lower())
                if view is None or not view.complete:
                    return set()
                names |= {c.name.lower() for c in view.columns}
                continue
            select = _leftmost_select(getattr(source, "expression", None))
            if select is None or any(p.is_star for p in select.selects):  # a struct's fields: s.*
                return set()
            names |= {p.alias_or_name.lower() for p in select.selects}
        scope = scope.parent
    return names


def _unknown_qualified(error: str, statement: exp.Expr, text: str | None, views: dict[str, Schema]) -> list[Finding]:
    """sqlglot stops at `t.x` when table t has no column x (with every name known, that is certain)."""
    match = re.match(r"Unknown column: (.+)$", error)
    if not match:
        return []
    name = match.group(1).strip("`").lower()
    for column in statement.find_all(exp.Column):
        if column.name.lower() == name and column.table:
            table = views.get(_table_of(column, statement))
            written = _as_written(column, text)
            hint = table.hint(written, f"'{column.table}'") if table is not None else None
            return [Finding(f"unknown column '{column.table}.{written}'", _line(column), hint)]
    return []


def _table_of(column: exp.Column, statement: exp.Expr) -> str:
    """The view an alias qualifying a column stands for (its own name when it is no alias)."""
    alias = column.table.lower()
    for table in statement.find_all(exp.Table):
        if table.alias_or_name.lower() == alias:
            return table.name.lower()
    return alias


def _names_defined(tree: exp.Expr) -> set[str]:
    """Aliases, lambda parameters and column lists the query itself defines."""
    names = set()
    for node in tree.walk():
        if isinstance(node, exp.Alias):
            names.add(node.alias.lower())
        elif isinstance(node, exp.Aliases):
            names |= {e.name.lower() for e in node.expressions}
        elif isinstance(node, exp.TableAlias):
            names |= {c.name.lower() for c in node.columns}
            names.add(node.name.lower())
        elif isinstance(node, exp.Lambda):
            names |= {e.name.lower() for e in node.expressions}
    return names


def _hint(name: str, scope: Any, views: dict[str, Schema]) -> str | None:
    """The closest column of what the scope reads, else what each of those has."""
    parts: list[tuple[str, list[Column]]] = []
    for alias, source in scope.sources.items():
        if isinstance(source, exp.Table) and source.name.lower() in views:
            parts.append((source.name, list(views[source.name.lower()].columns)))
        elif isinstance(getattr(source, "expression", None), exp.Select):
            parts.append((alias, [Column(p.alias_or_name) for p in source.expression.selects]))
    everything = Schema(tuple(c for _, columns in parts for c in columns))
    if not everything.columns:
        return None
    hint = everything.hint(name, "")
    if hint.startswith("did you mean"):
        return hint
    return "; ".join(f"'{label}' has: {', '.join(c.name for c in columns)}" for label, columns in parts)


# -- columns outside GROUP BY ---------------------------------------------------------------------


def _ungrouped_columns(qualified: exp.Expr, text: str | None) -> list[Finding]:
    from sqlglot.optimizer.scope import traverse_scope

    findings = []
    for scope in traverse_scope(qualified):
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        group = select.args.get("group")
        if group is not None:
            if group.args.get("all") or group.find(exp.Rollup, exp.Cube, exp.GroupingSets) is not None:
                continue
            if any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets", "totals")):
                continue
            grouped = {e.sql("spark") for e in group.expressions}
        elif any(_aggregates(p, select) for p in select.expressions):
            grouped = set()
        else:
            continue
        tables = {alias for alias, source in scope.sources.items() if isinstance(source, exp.Table)}
        for column in (c for p in select.expressions for c in _outside_aggregates(p, grouped)):
            if column.table not in tables or len(column.parts) != 2:
                continue
            written = _as_written(column, text)
            where = "GROUP BY" if group is not None else "a GROUP BY (the query aggregates)"
            findings.append(
                Finding(
                    f"column '{written}' is neither in {where} nor inside an aggregate",
                    _line(column),
                    f"add it to GROUP BY, or aggregate it (e.g. first({written}), max({written}))",
                )
            )
    return findings


#: nodes whose value is a plain function of their operands' values, row by row: a column under
#: only these in a projection is read outside any aggregate (`sum(x) + y`); under anything else
#: (a function sqlglot does not know, which may be an aggregate or a udaf; a window; a subquery)
#: it is left to Spark
_SCALAR = (exp.Binary, exp.Paren, exp.Neg, exp.Not, exp.Cast, exp.TryCast, exp.Case, exp.If, exp.Alias)


def _outside_aggregates(projection: exp.Expr, grouped: set[str]) -> list[exp.Column]:
    """The columns of a projection read outside any aggregate and outside every GROUP BY expression."""
    found = []
    for column in projection.find_all(exp.Column):
        node: exp.Expr = column
        while node is not projection:
            if not isinstance(node.parent, _SCALAR) or (grouped and node.sql("spark") in grouped):
                break
            node = node.parent
        else:
            if not grouped or projection.sql("spark") not in grouped:
                found.append(column)
    return found


def _aggregates(projection: exp.Expr, select: exp.Select) -> bool:
    """An aggregate of this select (not of a subquery, not a window function) is in the projection."""
    for node in projection.find_all(exp.AggFunc):
        if node.find_ancestor(exp.Select) is select and node.find_ancestor(exp.Window) is None:
            return True
    return False


# -- the output ---------------------------------------------------------------------------------


def _output(qualified: exp.Expr, views: dict[str, Schema]) -> Schema:
    from sqlglot.optimizer.scope import traverse_scope

    root = _leftmost_select(qualified)
    if root is None:
        return Schema.unknown("the query is not a SELECT")
    try:
        scopes = {id(scope.expression): scope for scope in traverse_scope(qualified)}
    except Exception:  # noqa: BLE001 - without scopes, types are not followed through subqueries
        scopes = {}
    columns, uncertain = [], ""
    for projection in root.expressions:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        if inner.is_star:  # left unexpanded: over a view whose columns are not known, or a struct's fields
            uncertain = uncertain or "it selects * of something whose columns are not all known"
            continue
        if isinstance(projection, exp.Aliases):  # a generator's columns: `stack(...) AS (k, v)`
            columns += [Column(e.name) for e in projection.expressions]
            continue
        tag = projection.meta.get(_TAG, inner.meta.get(_TAG, ""))
        name = projection.alias_or_name
        if tag is None or (tag == "" and _GENERATED.match(name)):
            uncertain = uncertain or f"Spark names the unaliased expression {inner.sql('spark')} itself"
            continue
        if tag and "," not in tag and tag.lower() == name.lower():
            name = tag  # as written
        columns.append(_typed(name, inner, projection, _read_column(inner, scopes.get(id(root)), scopes, views)))
    if not isinstance(qualified, exp.Select):  # a set operation's type is its branches' widest
        columns = [Column(c.name, c.type, inferred=c.type is not None) for c in columns]
    return Schema(tuple(columns), complete=not uncertain, why_incomplete=uncertain)


def _leftmost_select(node: Any) -> exp.Select | None:
    while isinstance(node, (exp.SetOperation, exp.Subquery, exp.Paren)):
        node = node.this if not isinstance(node, exp.SetOperation) else node.left
    return node if isinstance(node, exp.Select) else None


def _typed(name: str, inner: exp.Expr, projection: exp.Expr, read: Column | None) -> Column:
    """The projection's column: a view's column passed through keeps its type (and spelling when
    not renamed); a cast has its target type; anything else gets sqlglot's inference, if any."""
    if read is not None:
        return Column(read.name if read.name.lower() == name.lower() else name, read.type, read.inferred)
    if isinstance(inner, (exp.Cast, exp.TryCast)) and inner.to is not None:
        return Column(name, normalized(inner.to.sql("spark")))
    type_ = projection.type or inner.type
    if type_ is None or type_.this in (exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL):
        return Column(name)
    return Column(name, normalized(type_.sql("spark")), inferred=True)


def _read_column(node: exp.Expr, scope: Any, scopes: dict[int, Any], views: dict[str, Schema], depth: int = 0) -> Column | None:
    """The view column a qualified column passes through unchanged, through derived tables and CTEs."""
    if scope is None or depth > 32 or not isinstance(node, exp.Column) or len(node.parts) != 2:
        return None
    source = scope.sources.get(node.table)
    if isinstance(source, exp.Table):
        view = views.get(source.name.lower())
        return view.find(node.name) if view is not None else None
    select = getattr(source, "expression", None)
    if not isinstance(select, exp.Select):  # a set operation's type is its branches' widest
        return None
    for projection in select.expressions:
        if projection.alias_or_name.lower() == node.name.lower():
            inner = projection.this if isinstance(projection, exp.Alias) else projection
            return _read_column(inner, scopes.get(id(select)), scopes, views, depth + 1)
    return None


# -- where and as written ---------------------------------------------------------------------------


def _line(node: exp.Expr) -> int:
    for candidate in (node, node.this if isinstance(node.this, exp.Expr) else None):
        if candidate is not None and candidate.meta.get("line"):
            return int(candidate.meta["line"])
    return 1


def _as_written(column: exp.Column, text: str | None) -> str:
    meta = column.this.meta if isinstance(column.this, exp.Expr) else {}
    start, end = meta.get("start"), meta.get("end")
    if text is not None and start is not None and end is not None:
        written = text[start : end + 1]
        return written[1:-1].replace("``", "`") if written.startswith("`") and written.endswith("`") else written
    return column.name


def _written_output(statement: exp.Expr, views: dict[str, Schema], why: str) -> Schema:
    """Names from the query as written, when sqlglot cannot qualify it: certain for aliases and
    plain columns; types only from casts."""
    root = _leftmost_select(statement)
    if root is None:
        return Schema.unknown(why)
    columns, complete = [], True
    for projection in root.expressions:
        name = _certain_name(projection)
        if isinstance(projection, exp.Aliases):
            columns += [Column(e.name) for e in projection.expressions]
            continue
        if name is None or projection.is_star:
            complete = False
            continue
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(inner, (exp.Cast, exp.TryCast)) and inner.to is not None:
            columns.append(Column(name, normalized(inner.to.sql("spark"))))
        else:
            columns.append(Column(name))
    return Schema(tuple(columns), complete=complete, why_incomplete="" if complete else why)
