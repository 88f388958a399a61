"""The outcomes as JUnit XML, the report CI systems read (one testsuite per pipeline)."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

from framework.testing.run import TestRun


def write_junit(run: TestRun, path: Path) -> None:
    root = ElementTree.Element(
        "testsuites",
        name="tributary test",
        tests=str(len(run.outcomes)),
        failures=str(len(run.failed)),
        time=f"{run.seconds:.3f}",
    )
    suites: dict[str, ElementTree.Element] = {}
    for outcome in run.outcomes:
        test = outcome.test
        suite = suites.get(test.pipeline)
        if suite is None:
            suite = suites[test.pipeline] = ElementTree.SubElement(root, "testsuite", name=test.pipeline)
        case = ElementTree.SubElement(
            suite, "testcase", name=test.name, classname=test.pipeline, file=test.file, time=f"{outcome.seconds:.3f}"
        )
        if test.line:
            case.set("line", str(test.line))
        if not outcome.passed:
            text = "\n".join(outcome.lines())
            failure = ElementTree.SubElement(case, "failure", message=text.splitlines()[0] if text else "failed")
            failure.text = text
    for suite in suites.values():
        cases = list(suite)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
        suite.set("time", f"{sum(float(c.get('time', '0')) for c in cases):.3f}")
    ElementTree.indent(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    ElementTree.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
