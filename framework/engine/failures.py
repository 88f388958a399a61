"""A run that fails inside Spark, said in one line: the step, where in its template Spark's error
points (when it does), and Spark's own message. The Java stack is in Spark's log file
(framework.engine.session), which the CLI names and `run --verbose` prints.
"""

from __future__ import annotations

import re
from typing import Any

from framework.engine.context import RunContext
from framework.errors import TributaryError
from framework.operators import kinds


def _task_failure() -> re.Pattern[str] | None:
    """The line a kind's Python code raises in a task, naming its step (StepKind.task_failure)."""
    names = sorted({k.task_failure for k in kinds().values() if k.task_failure})
    return re.compile(rf"(?:{'|'.join(map(re.escape, names))}): ([^\n]+)") if names else None


_TASK_FAILURE = _task_failure()


def one_line(error: BaseException) -> str:
    """An error as one line: Tributary's own as said, another with its type and first line."""
    text = str(error).strip() or type(error).__name__
    return text if isinstance(error, TributaryError) else f"{type(error).__name__}: {text.splitlines()[0]}"


def is_spark_error(error: BaseException) -> bool:
    """Raised by Spark: a JVM error PySpark converted (pyspark.errors) or one it passed through
    (py4j), or the connection to a JVM that died (refused or reset when py4j called it)."""
    module = type(error).__module__
    return module.startswith(("pyspark.errors", "py4j")) or isinstance(error, (ConnectionRefusedError, ConnectionResetError))


def spark_failure(run: RunContext, error: BaseException, step: str | None = None) -> str:
    """`step 'x' (sql/x.sql:7): [ERROR_CLASS] message`; the step from Spark's query context when
    it points into a step's SQL, else `step` (what the run was computing)."""
    message = spark_message(error)
    if message.startswith("step '"):  # a kind's task failure (a group function's) names its step itself
        return message
    located = _in_template(run, error)
    if located is not None:
        step, file, line = located
        where = f"step '{step}' ({file}:{line}): "
    else:
        where = f"step '{step}': " if step else ""
    return where + message


#: the line a Python traceback ends with: the exception raised and its message (not a line of a
#: plan or a stack Spark appends after it)
_RAISED = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Iteration|Warning)(: |$)")


def spark_message(error: BaseException) -> str:
    """Spark's message, first line only, without its SQLSTATE code; for a group function that
    failed in a task, the runner's own line (step, key, the udfs/ line, the error)."""
    text = str(getattr(error, "java_exception", None) or error).strip()
    lost = _lost_jvm(error, text)
    if lost is not None:
        return lost
    failure = _TASK_FAILURE.search(text) if _TASK_FAILURE is not None else None
    if failure:
        return failure.group(1).strip()
    raised = raised_in_python(text)
    if raised is not None:
        return raised
    if hasattr(error, "java_exception"):  # Py4JJavaError: "org.apache...Exception: message"
        text = text.split(": ", 1)[-1]
    first = text.splitlines()[0] if text else type(error).__name__
    return first.split(" SQLSTATE:")[0].strip()


def raised_in_python(text: str) -> str | None:
    """The error Python code raised, from a text that holds its traceback (a udf in a task, a
    stream's sink), in one line; None when the text holds no traceback."""
    if "Traceback (most recent call last)" not in text:
        return None
    lines = [line for line in text.splitlines() if line.strip() and not line[0].isspace()]
    raised = [line.strip() for line in lines if _RAISED.match(line)] or [
        line.strip() for line in lines if not line.startswith("Traceback") and "Traceback (most recent" not in line
    ]  # an exception of the analyst's own name
    if not raised:
        return None
    name, _, said = raised[-1].partition(": ")
    if name.startswith("pyspark.errors.") and (returned := _udf_result_misfit(said, text)):
        return returned
    if name.startswith("pyspark.errors."):  # Spark's own error, met by a stream's sink (Python) as it wrote
        return said.split(" SQLSTATE:")[0].strip()
    if name.startswith("framework."):  # Tributary's own code in a task (a stream's reader): its words alone
        return said.strip()
    failure = _TASK_FAILURE.search(text) if _TASK_FAILURE is not None else None
    if failure:
        return failure.group(1).strip()
    frames = _UDFS_FRAME.findall(text)  # the project's own code: where in udfs/ it raised
    where = f" ({frames[-1][0]}:{frames[-1][1]} in {frames[-1][2]})" if frames else ""
    return "Python code in a task failed: " + raised[-1] + where


#: pyspark's words when a function's results do not fit the Arrow type of its declared return type
_ARROW_MISFIT = re.compile(r"Failed to convert the value of the column '_\d+' with type '(\w+)' to Arrow type '(\w+)'")
#: pyarrow's, a line above them, with the value
_ARROW_VALUE = re.compile(r"ArrowInvalid: Could not convert (.+?) with type (\w+): tried to convert to (\w+)")


def _udf_result_misfit(said: str, text: str) -> str | None:
    """A user function that returned values of another type than its `returns=`: pyspark names the
    result column `_0` and the pandas type `object`; said with the value and the declared type."""
    misfit = _ARROW_MISFIT.search(said)
    if misfit is None:
        return None
    value = _ARROW_VALUE.search(text)
    shown = f"{value.group(1)} ({value.group(2)})" if value else f"values of pandas type {misfit.group(1)}"
    declared = _SPARK_TYPE_OF_ARROW.get(misfit.group(2), misfit.group(2))
    return (
        f"a user function (@udf) returned {shown}, which does not fit the type it declares "
        f"({declared}): return values of that type, or change its returns="
    )


_SPARK_TYPE_OF_ARROW = {
    "int8": "TINYINT", "int16": "SMALLINT", "int32": "INT", "int64": "BIGINT", "float": "FLOAT", "double": "DOUBLE",
    "bool": "BOOLEAN", "string": "STRING", "large_string": "STRING", "date32": "DATE",
}  # fmt: skip


#: a traceback's frame in a module of the project's udfs/ (shipped by value, it keeps its file's path)
_UDFS_FRAME = re.compile(r'File "[^"]*/(udfs/[^"]+)", line (\d+), in (\w+)')


#: what a run says when Spark's JVM ran out of memory or died: one line, never py4j's traceback
OUT_OF_MEMORY = (
    "Spark ran out of memory (java.lang.OutOfMemoryError: {what}): one task or the driver held more than its heap; "
    "raise spark.driver.memory (embedded) or spark.executor.memory (a cluster) in the profile's spark.conf, "
    "or give Spark smaller pieces (more files, smaller splits: spark.sql.files.maxPartitionBytes)"
)
JVM_GONE = (
    "Spark's JVM stopped answering ({what}): it died, most often out of memory; "
    "its log (named above, or `run --verbose`) has the cause; raise spark.driver.memory in the profile's spark.conf"
)


def _lost_jvm(error: BaseException, text: str) -> str | None:
    """The one line for a JVM out of memory or gone, from Spark's message or its causes."""
    whole = f"{text}\n{error}"
    memory = re.search(r"OutOfMemoryError:? ?([^\n]*)", whole)
    if memory:
        return OUT_OF_MEMORY.format(what=memory.group(1).strip() or "no detail")
    gone = ("Answer from Java side is empty", "Error while receiving")
    if type(error).__name__ in ("Py4JNetworkError", "ConnectionRefusedError", "ConnectionResetError") or any(
        g in whole for g in gone
    ):
        return JVM_GONE.format(what=type(error).__name__)
    return None


def _in_template(run: RunContext, error: BaseException) -> tuple[str, str, int] | None:
    """(step, template file, line) of the fragment Spark's query context names, if it is in a step's SQL."""
    contexts: list[Any] = []
    try:
        contexts = list(error.getQueryContext()) if hasattr(error, "getQueryContext") else []  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - an error without contexts
        return None
    for context in contexts:
        try:
            fragment, start = context.fragment(), context.startIndex()
        except Exception:  # noqa: BLE001 - a DataFrame context has no SQL text
            continue
        for step, sql in run.compiled.sql.items():
            if fragment and start >= 0 and sql.text[start : start + len(fragment)] == fragment:
                file, line = sql.source_map.locate(start)
                return step, file, line
    return None
