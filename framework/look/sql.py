"""SQL over Delta tables without a JVM, for `show --where` and `tributary query`: DuckDB over Arrow
datasets, in a sandbox.

Why DuckDB and not delta-rs' own SQL (`QueryBuilder`, DataFusion), which the run log's listings
use: these commands run SQL a person typed, so the engine must be unable to read or write
anything but the tables it is handed. QueryBuilder executes any statement, and DataFusion's SQL
has `COPY (...) TO '<file>'` and `CREATE EXTERNAL TABLE ... LOCATION '<file>'` (both tried: one
wrote a file, the other read /etc/passwd); it has no switch to turn them off. DuckDB has one, as
configuration: `enable_external_access = false` refuses every file, network and extension access
(COPY, ATTACH, read_csv, glob, INSTALL), `python_enable_replacements = false` stops queries from
reading the calling Python's variables, `lock_configuration = true` keeps a query from turning
them back on, and with no `temp_directory` nothing spills to disk. On top of that:

- one statement, and it must be a query (DuckDB's own parser says what the text holds);
- a memory limit, and a time limit after which the query is interrupted; both are DuckDB's own
  and cooperative, so the commands run this module in a child process with an OS memory limit,
  killed at the deadline (framework.look.isolated);
- its errors (syntax, unknown column, a cast that fails) are bad input: one message, exit 2.

Each table a query names is resolved by framework.look.tables (an output, Tributary's own
tables, a path) and handed to DuckDB as delta-rs' Arrow dataset of its current version, so DuckDB
pushes the columns and filters down and reads only the files and columns it needs. The names a
query uses are found by parsing it (sqlglot, with DuckDB's dialect): every table that is not a
CTE of the query, as written (`service_stats`, `service_calls.service_stats`, `'warehouse/t'`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framework.errors import BadInput, Problem

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

#: DuckDB settings of every connection here (see the module docstring)
SANDBOX: dict[str, str | int | float | list[str]] = {
    "enable_external_access": False,
    "python_enable_replacements": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "temp_directory": "",
    "memory_limit": "2GB",
    "lock_configuration": True,
}
#: settings of the connection itself, made before the configuration is locked
CONNECTION = {"enable_progress_bar": "false"}  # it wrote to standard output, past the caller

DEFAULT_TIMEOUT_S = 60.0

#: how much more address space the process running a query may map once it starts
#: (framework.look.isolated): DuckDB holds its buffers within 2 GB (memory_limit); the rest is for
#: the values that limit does not count (a 1.5 GB string from repeat())
MEMORY_LIMIT_BYTES = 2 * 2**30


def memory_problem(what: str = "the query", detail: str = "") -> Problem:
    return Problem(
        f"{what} needs more memory than its limit ({MEMORY_LIMIT_BYTES / 2**30:g} GB) and was stopped"
        + (f": {detail}" if detail else ""),
        hint="narrow it: fewer rows, smaller values",
    )


@dataclass(frozen=True)
class Answer:
    """The first rows of a query's result, and whether it had more."""

    rows: pa.Table
    more: bool


class Sandbox:
    """One in-memory DuckDB connection that can read only the tables registered with it."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S, on_start: Callable[[], None] | None = None):
        import duckdb

        unlocked = {key: value for key, value in SANDBOX.items() if key != "lock_configuration"}
        self.connection: duckdb.DuckDBPyConnection = duckdb.connect(":memory:", config=unlocked)
        for key, value in [*CONNECTION.items(), ("lock_configuration", "true")]:
            self.connection.execute(f"SET {key} = {value}")
        self.timeout_s = timeout_s
        self.on_start = on_start  # told just before the query runs (the child process caps its memory)
        self._registered = 0

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Shut DuckDB down now, its worker threads joined: left to the interpreter's exit, a
        worker still holding Python's Arrow objects can abort the process as it ends."""
        self.connection.close()

    def register(self, parts: tuple[str, ...], data: Any) -> None:
        """Make `data` (an Arrow dataset or table) readable as the name `parts` (schema.table or table)."""
        self._registered += 1
        hidden = f"__tributary_table_{self._registered}"
        self.connection.register(hidden, data)
        if len(parts) == 2:
            self.connection.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(parts[0])}")
        self.connection.execute(f"CREATE OR REPLACE VIEW {'.'.join(_quote(p) for p in parts)} AS SELECT * FROM {hidden}")

    def query(self, sql: str, limit: int, what: str = "the query") -> Answer:
        """The first `limit` rows of one SELECT statement."""
        import duckdb
        import pyarrow as pa

        statement = self._one_query(sql, what)
        if self.on_start is not None:
            self.on_start()
        timer = threading.Timer(self.timeout_s, self.connection.interrupt)
        timer.daemon = True
        timer.start()
        try:
            result = self.connection.sql(statement).limit(limit + 1).to_arrow_table()
        except (duckdb.OutOfMemoryException, MemoryError) as e:
            raise BadInput(memory_problem(what, _message(e).split("\n")[0] if str(e) else "")) from None
        except duckdb.InterruptException:
            raise BadInput(
                Problem(f"{what} ran longer than {self.timeout_s:g} s and was stopped", hint="narrow it, or pass --timeout")
            ) from None
        except duckdb.Error as e:
            raise BadInput(Problem(f"{what}: {_message(e)}", hint=_hint(e))) from None
        finally:
            timer.cancel()
            timer.join()
        rows = pa.table(result) if not isinstance(result, pa.Table) else result
        return Answer(rows.slice(0, limit), rows.num_rows > limit)

    def _one_query(self, sql: str, what: str) -> str:
        import duckdb

        try:
            statements = self.connection.extract_statements(sql)
        except duckdb.Error as e:
            raise BadInput(Problem(f"{what}: {_message(e)}", hint=_hint(e))) from None
        if len(statements) != 1:
            raise BadInput(Problem(f"{what} holds {len(statements)} statements", hint="give one SELECT"))
        statement = statements[0]
        if statement.type != duckdb.StatementType.SELECT:
            kind = str(statement.type).rsplit(".", 1)[-1]
            raise BadInput(Problem(f"{what} is a {kind} statement: only queries run here", hint="give one SELECT"))
        return statement.query.strip().rstrip(";")


def referenced_tables(sql: str) -> list[tuple[str, ...]]:
    """The tables a query reads, as written (CTEs and table functions left out); [] when the text
    does not parse here (DuckDB then says what is wrong with it)."""
    import sqlglot
    import sqlglot.errors
    from sqlglot import exp

    try:
        trees = [t for t in sqlglot.parse(sql, dialect="duckdb") if t is not None]
    except sqlglot.errors.SqlglotError:
        return []
    except RecursionError:  # sqlglot reads nested parentheses recursively
        raise BadInput(Problem("the query nests too deeply to be read", hint=DEPTH_HINT)) from None
    found: list[tuple[str, ...]] = []
    for tree in trees:
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for table in tree.find_all(exp.Table):
            if not isinstance(table.this, exp.Identifier):
                continue  # range(10), read_parquet(...): a function, not a name
            parts = tuple(p.name for p in table.parts)
            if len(parts) == 1 and parts[0].lower() in ctes:
                continue
            if parts not in found:
                found.append(parts)
    return found


def run_query(
    sql: str,
    limit: int,
    open_table: Callable[[str], Any],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_start: Callable[[], None] | None = None,
) -> Answer:
    """`tributary query`: each table the query names, opened by `open_table(name)` (an Arrow
    dataset), then the query's first `limit` rows."""
    with Sandbox(timeout_s, on_start) as sandbox:
        for parts in referenced_tables(sql):
            if len(parts) > 2:
                raise BadInput(Problem(f"table '{'.'.join(parts)}': a name has at most two parts (pipeline.output)"))
            sandbox.register(parts, open_table(".".join(parts)))
        return sandbox.query(sql, limit)


def filter_rows(
    data: Any, where: str, limit: int, timeout_s: float = DEFAULT_TIMEOUT_S, on_start: Callable[[], None] | None = None
) -> Answer:
    """`show --where`: the first `limit` rows of one table's rows matching a condition."""
    with Sandbox(timeout_s, on_start) as sandbox:
        sandbox.register(("t",), data)
        return sandbox.query(f"SELECT * FROM t WHERE ({where})", limit, what="--where")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


DEPTH_HINT = "nest it less deeply: a few dozen levels of parentheses at most"


def _message(error: BaseException) -> str:
    """DuckDB's message without its class prefix, keeping the LINE/caret lines that point at the
    spot, and without advice this sandbox refuses (SET max_expression_depth)."""
    lines = [line.rstrip() for line in str(error).strip().splitlines() if line.strip()]
    lines = [line.split(' Use "SET max_expression_depth')[0] for line in lines]
    return "\n  ".join(lines) if lines else type(error).__name__


def _hint(error: BaseException) -> str | None:
    import duckdb

    if isinstance(error, duckdb.PermissionException):
        return "queries here read the named tables only: no files, no extensions"
    if "max_expression_depth" in str(error):
        return DEPTH_HINT
    if isinstance(error, duckdb.CatalogException) and "Table with name" in str(error):
        return "name an output (e.g. service_stats or pipeline.output), a Tributary table (quality, quarantine) or a Delta folder in quotes"
    return None
