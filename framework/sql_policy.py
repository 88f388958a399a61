"""The strict SQL policy (a profile's `sql_policy: strict`): what a step's SQL may read and call,
as an allow-list, judged on the query's tree.

Why an allow-list: on a shared cluster a step's SQL runs with the engine's rights. A deny-list of
known-bad names kept missing spellings Spark accepts (a data source by class name,
`org.apache...TextFileFormat`.`/file`; a script run by `TRANSFORM ... USING`). So a query may:

- read only the relations ref()/source() rendered (the step's declared sources and refs, the
  views the engine registers), and its own CTEs where Spark's scoping makes them visible (a CTE
  named later in the same WITH is not: Spark reads a catalog table of that name there); any
  qualified name (`format`.`path`, a class name, catalog.db.table) is refused;
- read table-valued functions only when they are generators over values the query already has
  (GENERATORS); read_files, identifier(), table(), python_worker_logs and the rest are refused;
- call only Spark's built-in functions (framework/functions/spark_functions.txt) and the
  project's udfs, by their plain names, minus DENIED_FUNCTIONS;
- carry only Spark's own hints (their arguments are expressions and are checked like the rest);
- not run a script (`TRANSFORM`/`MAP`/`REDUCE ... USING`) nor hold any statement but one query
  (SET, ADD JAR/FILE, CREATE FUNCTION, ... are refused before this module: see the compiler).

Deliberately allowed: every built-in not denied below (including input_file_name() and the other
metadata of declared sources), the project's udfs (the project's own code), and Tributary's own
tables under <warehouse>/_tributary when a pipeline declares them as sources.

Denied functions, each for a reason (DENIED_FUNCTIONS holds the words the errors show):
- reflect, java_method, try_reflect: call any static Java method on the cluster.
- xpath and its typed variants, from_xml, schema_of_xml: run the JVM's XML parser and XPath engine
  over text the query builds; Tributary cannot vouch that every Spark build turns off DTDs and
  external entities (which read files and URLs), nor XPath's Java extension functions.
- from_protobuf, to_protobuf: read a descriptor file by path, or load a Java class by name.
- current_user, user, session_user, version: reveal the engine's environment (the cluster's
  user, Spark's build), which the `${system:user.name}` leak showed is not the pipeline's data.
- python_worker_logs: reads the Python workers' logs, other jobs' output on a shared cluster.

The same checks run twice: at `validate` on sqlglot's tree (file:line, exit 2), and when a run
hands the text to spark.sql() (framework/operators/sql.py): sqlglot's tree of that exact text
again, then Spark's own parser's plan (SparkPlanCheck), because where sqlglot and Spark read a
text differently, only Spark's reading decides what runs. A tree node the checks cannot classify
(a relation that is neither a name nor a function) is refused rather than let through.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp

from framework.functions.builtins import spark_functions
from framework.spec.base import closest, did_you_mean

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

POLICY = "strict SQL policy"
_JAVA = "calls Java methods"
_XML = "runs the JVM's XML parser (external entities read files and URLs)"
_ENVIRONMENT = "reveals the engine's environment, not the pipeline's data"

#: Spark built-ins a strict query may not call, and why (the module's docstring says more).
DENIED_FUNCTIONS: dict[str, str] = {
    "reflect": _JAVA,
    "java_method": _JAVA,
    "try_reflect": _JAVA,
    **{
        name: "evaluates XPath with the JVM's XML parser (external entities read files and URLs)"
        for name in (
            "xpath",
            "xpath_boolean",
            "xpath_double",
            "xpath_float",
            "xpath_int",
            "xpath_long",
            "xpath_number",
            "xpath_short",
            "xpath_string",
        )
    },
    "from_xml": _XML,
    "schema_of_xml": _XML,
    "from_protobuf": "reads a descriptor file by path or loads a Java class by name",
    "to_protobuf": "reads a descriptor file by path or loads a Java class by name",
    "current_user": _ENVIRONMENT,
    "user": _ENVIRONMENT,
    "session_user": _ENVIRONMENT,
    "version": _ENVIRONMENT,
    "python_worker_logs": "reads the Python workers' logs (other jobs' output on a shared cluster)",
}

#: Table-valued functions a strict query may read: generators over the query's own values.
GENERATORS = frozenset(
    {
        "range",
        "explode",
        "explode_outer",
        "posexplode",
        "posexplode_outer",
        "inline",
        "inline_outer",
        "stack",
        "json_tuple",
        "variant_explode",
        "variant_explode_outer",
    }
)

#: Spark's query hints (ResolveHints); their arguments are checked as expressions.
SPARK_HINTS = frozenset(
    {
        "broadcast",
        "broadcastjoin",
        "mapjoin",
        "merge",
        "shuffle_merge",
        "mergejoin",
        "shuffle_hash",
        "shuffle_replicate_nl",
        "coalesce",
        "repartition",
        "repartition_by_range",
        "rebalance",
    }
)

_READ_HINT = "declare the data as a source and read it with source(), or another step with ref()"
_CALL_HINT = "compute it with Spark SQL functions, or in a user function (udfs/)"
_SCRIPT_HINT = "compute it with Spark SQL functions, or in a user function (udfs/)"


@dataclass(frozen=True)
class Refusal:
    """One thing the policy refuses: `what` the query does, `why` (the error's words), a hint,
    and the line of the rendered SQL it is on (1 when only Spark's plan shows it)."""

    what: str
    why: str
    hint: str
    line: int = 1

    @property
    def message(self) -> str:
        return f"{self.why}, which the {POLICY} refuses"

    @property
    def full_hint(self) -> str:
        return f"{self.hint} (the profile's sql_policy: strict)"


def allowed_functions(udfs: Iterable[str]) -> frozenset[str]:
    """Spark's built-ins minus the denied ones, and the project's udfs (lower case)."""
    return (spark_functions() - DENIED_FUNCTIONS.keys()) | {u.lower() for u in udfs}


# -- sqlglot: at validate, and on the exact text a run hands to Spark ------------------------------

_WINDOW_CALL = re.compile(r"\bwindow(\s*\()", re.IGNORECASE)


def for_sqlglot(text: str) -> str:
    """Spark's `window(ts, '1 minute')` grouping function reads to sqlglot as a WINDOW clause after
    GROUP BY; quoting the name keeps the check honest. Lines stay where they are."""
    return _WINDOW_CALL.sub(r"`window`\1", text)


def refusals(statement: exp.Expr, reads: Iterable[str], udfs: Iterable[str]) -> list[Refusal]:
    """What the policy refuses in one parsed query. `reads`: the relations ref()/source() rendered
    (the step's sources and refs); `udfs`: the names udfs/ registers."""
    declared = {r.lower() for r in reads}
    allowed = allowed_functions(udfs)
    found: list[Refusal] = []
    for node in statement.walk():
        refusal = _judge(node, declared, allowed)
        if refusal is not None and refusal not in found:
            found.append(refusal)
    return found


def bare_function_refusals(statement: exp.Expr, columns: set[str] | None) -> list[Refusal]:
    """`select user from t`: Spark calls user() when nothing the query reads has a column of that
    name, which sqlglot cannot know; `columns`: the names the query's inputs have (None: not all
    known). A name the query itself gives a column (an alias, a CTE's column) is a column too."""
    named = {str(alias.alias).lower() for alias in statement.find_all(exp.Alias)} | {
        column.name.lower() for alias in statement.find_all(exp.TableAlias) for column in alias.columns
    }  # `with t (user) as`, `values (...) as t(user)`, `lateral view explode(...) v as user`
    found: list[Refusal] = []
    for column in statement.find_all(exp.Column):
        name = column.name.lower()
        if column.table or name not in _BARE_FUNCTIONS or name in named or (columns is not None and name in columns):
            continue
        why = f"{column.name} (Spark's {name}() without parentheses) {DENIED_FUNCTIONS[name]}"
        hint = (
            f"to read a column named {column.name}, qualify it (t.{column.name}), or declare the schema of the source that has it"
        )
        refusal = Refusal(column.name, why, hint, _line(column))
        if refusal not in found:
            found.append(refusal)
    return found


def text_refusals(text: str, reads: Iterable[str], udfs: Iterable[str]) -> list[Refusal]:
    """The same, on rendered SQL text (the run's second look): text sqlglot cannot read as one
    query is refused, since what it holds cannot be judged."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))  # as the compiler: deeply nested generated SQL
    try:
        statements = [s for s in sqlglot.parse(for_sqlglot(text), read="spark") if s is not None]
    except (sqlglot.errors.SqlglotError, RecursionError) as e:
        why = f"the query cannot be read as Spark SQL ({type(e).__name__})"
        return [Refusal("the query", why, "fix the query; `tributary validate` shows where")]
    finally:
        sys.setrecursionlimit(limit)
    if len(statements) != 1 or not isinstance(statements[0], (exp.Query, exp.Values)):
        return [Refusal("the query", "the SQL is not one query", "write one SELECT/WITH/VALUES query")]
    return refusals(statements[0], reads, udfs)


def expression_refusals(expression: str, udfs: Iterable[str]) -> list[Refusal]:
    """The policy on one SQL expression a spec holds (a source's event_time, an aggregate, an
    expectation's row_condition): Spark evaluates it as it does a step's query, and it may read
    nothing but its own row. Text sqlglot cannot read is left to the checks that report syntax."""
    try:
        tree = sqlglot.parse_one(f"SELECT {for_sqlglot(expression)}", read="spark")
    except (sqlglot.errors.SqlglotError, RecursionError):
        return []
    return refusals(tree, (), udfs)


def _judge(node: exp.Expr, declared: set[str], allowed: frozenset[str]) -> Refusal | None:
    if isinstance(node, exp.QueryTransform):
        why = "TRANSFORM ... USING runs a program on the cluster"
        return Refusal("TRANSFORM ... USING", why, _SCRIPT_HINT, _line(node))
    if isinstance(node, (exp.Command, exp.Set, exp.DDL, exp.DML, exp.Use)):
        kind = node.key.upper()
        return Refusal(kind, f"the query holds a {kind} statement", "a step holds one query", _line(node))
    if isinstance(node, exp.Hint):
        return _judge_hint(node)
    if isinstance(node, exp.Table):
        return _judge_table(node, declared, allowed)
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        name = node.sql("spark").split("(", 1)[0]
        why = f"the query calls {name}(), a function by a qualified name"
        return Refusal(name, why, "call Spark's functions and udfs by their plain names", _line(node))
    if isinstance(node, exp.Func):
        return _judge_function(node, allowed)
    return None


def _judge_function(node: exp.Func, allowed: frozenset[str]) -> Refusal | None:
    if isinstance(node, exp.Anonymous):
        name = str(node.name)
        lowered = name.lower()
        if isinstance(node.parent, exp.Hint) and lowered in SPARK_HINTS:
            return None
        if isinstance(node.parent, exp.Table) and node.parent.this is node:
            return None  # a table-valued function: judged as a relation
        if lowered in DENIED_FUNCTIONS:
            return Refusal(f"{name}()", f"{name}() {DENIED_FUNCTIONS[lowered]}", _CALL_HINT, _line(node))
        if lowered not in allowed and not isinstance(node.parent, exp.Dot):
            why = f"{name}() is neither one of Spark's built-in functions nor a udf"
            hint = did_you_mean(lowered, set(allowed)) if closest(lowered, set(allowed)) else None
            return Refusal(f"{name}()", why, hint or _CALL_HINT, _line(node))
        return None
    # sqlglot's own node for a function it knows: the names it may have been written as
    for written in type(node).sql_names():
        if written.lower() in DENIED_FUNCTIONS:
            name = written.lower()
            return Refusal(f"{name}()", f"{name}() {DENIED_FUNCTIONS[name]}", _CALL_HINT, _line(node))
    return None


def _judge_hint(hint: exp.Hint) -> Refusal | None:
    for item in hint.expressions:
        name = item.name if isinstance(item, (exp.Anonymous, exp.JoinHint, exp.Var, exp.Column)) else ""
        if str(name).lower() not in SPARK_HINTS:
            shown = str(name) or item.sql("spark")
            why = f"the hint {shown} is not one of Spark's hints"
            return Refusal(shown, why, "use Spark's hints (BROADCAST, MERGE, REPARTITION, ...) or none", _line(hint))
    return None


def _judge_table(table: exp.Table, declared: set[str], allowed: frozenset[str]) -> Refusal | None:
    if table.find_ancestor(exp.Hint) is not None:
        return None  # BROADCAST(t) names a relation of the query; it reads nothing
    this = table.this
    if isinstance(this, exp.Func):
        name = (str(this.name) if isinstance(this, exp.Anonymous) else type(this).sql_names()[0]).lower()
        if name in GENERATORS or (name in allowed and name not in spark_functions()):
            return None  # a generator over the query's values, or a udf
        why = f"the query reads the table-valued function {name}(), which is not a generator the policy allows"
        return Refusal(f"{name}()", why, _READ_HINT, _line(table))
    shown = table.sql("spark").split(" AS ", 1)[0]
    if isinstance(this, exp.Identifier) and table.args.get("db") and not table.args.get("catalog") and _is_path(table.name):
        why = f"{table.text('db')}.`{table.name}` reads files by path, not a declared source"
        return Refusal(shown, why, _READ_HINT, _line(table))
    if not isinstance(this, exp.Identifier) or table.args.get("db") or table.args.get("catalog"):
        why = f"the query reads '{shown}': not a declared source, a ref or one of its CTEs"
        return Refusal(shown, why, _READ_HINT, _line(table))
    name = table.name.lower()
    if name in declared or name in _ctes_in_scope(table):
        return None
    why = f"the query reads '{shown}': not a declared source, a ref or one of its CTEs"
    return Refusal(shown, why, _READ_HINT, _line(table))


def _is_path(name: str) -> bool:
    """`format`.`<this>`: a file, folder or URI (Spark's SQL on files)."""
    return any(c in name for c in "/\\:")


def _ctes_in_scope(table: exp.Expr) -> set[str]:
    """The CTE names Spark resolves at `table`: a query's CTEs in its body, and inside a CTE
    the ones defined before it (itself too, in a WITH RECURSIVE)."""
    names: set[str] = set()
    below: exp.Expr = table
    node = table.parent
    while node is not None:
        if isinstance(node, exp.With):
            for cte in node.expressions:
                if cte is below:
                    if node.args.get("recursive"):
                        names.add(cte.alias_or_name.lower())
                    break
                names.add(cte.alias_or_name.lower())
        else:
            with_ = node.args.get("with_") or node.args.get("with")
            if isinstance(with_, exp.With) and with_ is not below:
                names |= {cte.alias_or_name.lower() for cte in with_.expressions}
        below, node = node, node.parent
    return names


def _line(node: exp.Expr) -> int:
    for part in node.walk():
        line = part.meta.get("line") if hasattr(part, "meta") else None
        if line:
            return int(line)
    return 1


# -- Spark's own parser: what a run hands to spark.sql() ------------------------------------------

_SCRIPT_PLANS = ("ScriptTransformation",)
#: Names Spark reads as a function call when no column has them (`select user from t`): the
#: parser leaves a column reference, so the check needs the columns of what the query reads.
_BARE_FUNCTIONS = frozenset({"user", "current_user", "session_user"})
_STATEMENT = re.compile(r"(Command|Statement)$")


class SparkPlanCheck:
    """The policy on the plan Spark's own parser makes of a text (unresolved: nothing is read or
    looked up). One parse and one JSON of the plan per query: tens of milliseconds.

    `views`: the relations the query may read (the step's sources and refs, as registered);
    `columns`: their columns (a bare `user` is a column when one has that name, else Spark's user())."""

    def __init__(self, spark: SparkSession, views: Iterable[str], udfs: Iterable[str], columns: Iterable[str] = ()):
        self.parser = spark._jsparkSession.sessionState().sqlParser()  # type: ignore[attr-defined]
        self.command = spark._jvm.java.lang.Class.forName(  # type: ignore[union-attr]
            "org.apache.spark.sql.catalyst.plans.logical.Command"
        )
        self.views = {v.lower() for v in views}
        self.allowed = allowed_functions(udfs)
        self.udfs = {u.lower() for u in udfs}
        self.columns = {c.lower() for c in columns}

    def refusals(self, text: str) -> list[Refusal]:
        plan = self.parser.parsePlan(text)
        found: list[Refusal] = []
        if self.command.isInstance(plan):
            name = plan.getClass().getSimpleName()
            found.append(Refusal(name, f"Spark reads the SQL as the command {name}", "a step holds one query"))
        nodes = json.loads(plan.toJSON())
        for refusal in self._tree(nodes, set()):
            if refusal not in found:
                found.append(refusal)
        return found

    def _tree(self, flat: list[Any], visible: set[str]) -> Iterator[Refusal]:
        """A TreeNode's JSON: its nodes in pre-order, each with its number of children."""
        position = 0

        def subtree(visible: set[str]) -> Iterator[Refusal]:
            nonlocal position
            node = flat[position]
            position += 1
            inner = visible
            if isinstance(node, dict) and node.get("class", "").endswith(".UnresolvedWith"):
                inner = set(visible)
                recursive = bool(node.get("allowRecursion"))
                for relation in node.get("cteRelations") or []:
                    name = str(relation.get("_1", "")).lower()
                    yield from self._tree(relation.get("_2") or [], inner | ({name} if recursive else set()))
                    inner = inner | {name}
            if isinstance(node, dict):
                yield from self._node(node, visible)
                for key, value in node.items():
                    if key != "cteRelations":
                        yield from self._values(value, visible)
            for _ in range(int(node.get("num-children", 0)) if isinstance(node, dict) else 0):
                yield from subtree(inner)

        while position < len(flat):
            yield from subtree(visible)

    def _values(self, value: Any, visible: set[str]) -> Iterator[Refusal]:
        """Trees held in a node's fields (expressions, subquery plans), at any depth."""
        if isinstance(value, list):
            if value and all(isinstance(v, dict) and "class" in v for v in value):
                yield from self._tree(value, visible)
            else:
                for v in value:
                    yield from self._values(v, visible)
        elif isinstance(value, dict) and "class" not in value:
            for v in value.values():
                yield from self._values(v, visible)

    def _node(self, node: dict[str, Any], visible: set[str]) -> Iterator[Refusal]:
        kind = node.get("class", "").rsplit(".", 1)[-1]
        if any(s in kind for s in _SCRIPT_PLANS):
            yield Refusal("TRANSFORM ... USING", "TRANSFORM ... USING runs a program on the cluster", _SCRIPT_HINT)
        elif _STATEMENT.search(kind):
            yield Refusal(kind, f"Spark reads part of the SQL as {kind}", "a step holds one query")
        elif kind == "UnresolvedRelation":
            parts = _parts(node.get("multipartIdentifier"))
            if len(parts) != 1 or (parts[0].lower() not in self.views and parts[0].lower() not in visible):
                shown = ".".join(parts)
                why = f"the query reads '{shown}': not a declared source, a ref or one of its CTEs"
                yield Refusal(shown, why, _READ_HINT)
        elif kind == "UnresolvedTableValuedFunction":
            parts = _parts(node.get("name"))
            if len(parts) != 1 or (parts[0].lower() not in GENERATORS and parts[0].lower() not in self.udfs):
                shown = ".".join(parts)
                why = f"the query reads the table-valued function {shown}(), which is not a generator the policy allows"
                yield Refusal(f"{shown}()", why, _READ_HINT)
        elif kind in ("UnresolvedFunction", "UnresolvedGenerator"):
            name = node.get("name")
            parts = [str(name["funcName"])] if isinstance(name, dict) and "funcName" in name else _parts(node.get("nameParts"))
            lowered = parts[-1].lower() if parts else ""
            shown = ".".join(parts)
            if len(parts) != 1:
                yield Refusal(shown, f"the query calls {shown}(), a function by a qualified name", _CALL_HINT)
            elif lowered in DENIED_FUNCTIONS:
                yield Refusal(f"{shown}()", f"{shown}() {DENIED_FUNCTIONS[lowered]}", _CALL_HINT)
            elif lowered not in self.allowed:
                yield Refusal(f"{shown}()", f"{shown}() is neither one of Spark's built-in functions nor a udf", _CALL_HINT)
        elif kind == "UnresolvedAttribute":
            parts = _parts(node.get("nameParts"))
            name = parts[0].lower() if len(parts) == 1 else ""
            if name in _BARE_FUNCTIONS and name not in self.columns:
                why = f"{parts[0]} (Spark's {name}() without parentheses) {DENIED_FUNCTIONS[name]}"
                yield Refusal(parts[0], why, _CALL_HINT)
        elif kind == "UnresolvedHint":
            name = str(node.get("name", ""))
            if name.lower() not in SPARK_HINTS:
                yield Refusal(name, f"the hint {name} is not one of Spark's hints", "use Spark's hints or none")


def _parts(value: Any) -> list[str]:
    """A multipart name as Spark's JSON writes it: "[a, b]" (or already a list)."""
    if isinstance(value, list):
        return [str(v) for v in value]
    text = str(value or "")
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return [p for p in text.split(", ")] if text else []
