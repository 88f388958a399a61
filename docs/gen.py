"""The docs pages made from the code, so they cannot drift from it.

- the CLI reference, from the Typer app (`framework.cli.app`): every command, its help, arguments and options;
- the spec reference, from `tributary.schema.json` (what `tributary schema` writes);
- the layer table in docs/architecture.md, from setup.cfg's `[importlinter]` layers;
- the benchmarks table in docs/benchmarks.md, from docs/benchmarks.yaml (the benchmark scripts record
  their headline figures there through `benchmarks/_common.py:record`).

The two references are rendered at build time only (docs/hooks.py adds them as pages; they are not in git).
The two tables live in their pages between markers, so they read on GitHub too; `mkdocs build --strict`
and tests/test_foundations.py fail when they are stale. This file lives outside `framework/`, so the
package's import layers do not see it.

    python docs/gen.py            # rewrite the tables between their markers
    python docs/gen.py --check    # exit 1 if a table is stale
    python docs/gen.py cli|spec   # print a reference page
"""

from __future__ import annotations

import configparser
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
BENCHMARKS_DATA = DOCS / "benchmarks.yaml"


# ---------------------------------------------------------------------------------------------------------
# Tables between markers


def _markers(name: str) -> tuple[str, str]:
    return (
        f"<!-- generated: {name} (python docs/gen.py; do not edit by hand) -->",
        f"<!-- end generated: {name} -->",
    )


def replace_between(text: str, name: str, body: str) -> str:
    begin, end = _markers(name)
    if begin not in text or end not in text:
        raise ValueError(f"the markers of {name!r} are missing: {begin} ... {end}")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n\n{body.rstrip()}\n\n{end}{tail}"


#: what each layer is called and what each package in it does; the layers and their order are setup.cfg's
LAYER_NAMES: dict[str, str] = {
    "cli": "command line",
    "tasks": "what commands do: tasks, the edit–run loop, the warm engine",
    "testing": "unit tests of pipelines",
    "project_context": "one project context",
    "reporting": "reading results, scheduling",
    "engine": "running",
    "quality": "judging rows",
    "plan": "planning",
    "compiler": "compiling",
    "operators": "step kinds",
    "io": "reading and writing",
    "schemas": "columns before Spark",
    "sql_policy": "the strict SQL policy",
    "graph": "building blocks",
    "spec": "the spec",
    "errors": "the ground",
    "private_folder": "this user's own",
}
PACKAGE_NOTES: dict[str, str] = {
    "cli": "one module per activity, loaded lazily",
    "tasks": "validate, capacity, tune, evaluate without the terminal",
    "testing": "`tributary test`: tests read and checked without Spark, run over given rows with the engine's own "
    "code, nothing written; [testing a pipeline](testing.md)",
    "project_context": "root, profile, vars, selection, interval, compiled pipeline, plan, run",
    "watch": "reruns on change: compiles, runs, draws",
    "localcluster": "`tributary cluster up|status|down`: a standalone master and workers on 127.0.0.1",
    "warm": "a long-lived process holding one SparkSession, which runs the CLI's Spark commands for clients over "
    "a Unix socket, each run in a session of its own; [the warm engine](warm-engine.md)",
    "reporting": "the HTML run report",
    "capacity": "`tune`: fits, plots; join node counts",
    "display": "CLI tables",
    "generators": "synthetic input for the examples and benchmarks: `tributary generate`",
    "schedule": "the scheduler runs pipelines through `engine.runner`, and reads the run log back",
    "look": "show, history, query without a JVM; typed SQL in a killable child process",
    "engine": "",
    "quality": "Great Expectations",
    "integration": "figures against ground truth, the state model, fits, learned window sizes",
    "plan": "",
    "compiler": "",
    "operators": "with the registry",
    "io": "sources, staging, `io/delta/`: the Delta stores and the choice between them; output locations, links resolved",
    "schemas": "a node's columns and types; a Spark SQL query's output and its unknown or ungrouped columns, by "
    "sqlglot; expectations against columns",
    "sql_policy": "what a query may read and call, as an allow-list: on sqlglot's tree at `validate`, on Spark's "
    "parsed plan at run time; [security](security.md)",
    "graph": "",
    "templating": "var data stays data",
    "profiles": "",
    "variables": "",
    "functions": "udfs/: the decorators, importing it, Spark's function names",
    "spec": "",
    "project": "",
    "errors": "",
    "observations": "",
    "jvm": "the SWA fold in Java, compiled at the first run",
    "cluster_auth": "the secret a local cluster takes from its drivers; [security](security.md)",
    "private_folder": "mode 0700: engines' sockets, clusters' secrets",
}


def importlinter_layers(setup_cfg: Path = REPO / "setup.cfg") -> list[list[str]]:
    """The layers of setup.cfg's layers contract, top first, each a list of package names without `framework.`."""
    parser = configparser.ConfigParser()
    parser.read(setup_cfg)
    lines = [line.strip() for line in parser["importlinter:contract:layers"]["layers"].splitlines() if line.strip()]
    return [[name.strip().removeprefix("framework.") for name in line.split("|")] for line in lines]


def layer_table(layers: list[list[str]] | None = None) -> str:
    layers = importlinter_layers() if layers is None else layers
    missing = [p for layer in layers for p in layer if p not in PACKAGE_NOTES] + [
        layer[0] for layer in layers if layer[0] not in LAYER_NAMES
    ]
    if missing:
        raise ValueError(f"setup.cfg names packages docs/gen.py does not describe: {', '.join(missing)}")
    rows = ["| layer | packages |", "|---|---|"]
    for layer in layers:
        cells = [f"`{p}` ({PACKAGE_NOTES[p]})" if PACKAGE_NOTES[p] else f"`{p}`" for p in layer]
        rows.append(f"| {LAYER_NAMES[layer[0]]} | {' · '.join(cells)} |")
    return "\n".join(rows)


def _load_yaml(path: Path) -> Any:
    import yaml

    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _cell(value: object) -> str:
    return "" if value is None else str(value).replace("|", "\\|").replace("\n", " ")


def benchmarks_table(data_file: Path = BENCHMARKS_DATA) -> str:
    data = _load_yaml(data_file)
    rows = [
        "| figure | target | last measured | date | machine | script |",
        "|---|---|---|---|---|---|",
    ]
    for figure in data["figures"]:
        value = figure.get("value")
        unit = figure.get("unit", "")
        shown = f"{value} {unit}".strip() if value is not None else "not measured"
        if figure.get("note"):
            shown += f" ({figure['note']})"
        rows.append(
            "| "
            + " | ".join(
                _cell(x)
                for x in (
                    figure["figure"],
                    figure.get("target"),
                    shown,
                    figure.get("date"),
                    figure.get("machine"),
                    f"`{figure['script']}`" if figure.get("script") else "",
                )
            )
            + " |"
        )
    return "\n".join(rows)


#: page -> (marker name, renderer) for the tables kept in git between markers
MARKED_TABLES = {
    "architecture.md": ("layers", layer_table),
    "benchmarks.md": ("benchmarks", benchmarks_table),
}


def render_marked(page: str, text: str) -> str:
    name, render = MARKED_TABLES[page]
    return replace_between(text, name, render())


def stale_pages() -> list[str]:
    return [page for page in MARKED_TABLES if (text := (DOCS / page).read_text(encoding="utf-8")) != render_marked(page, text)]


def write_marked() -> list[str]:
    changed = []
    for page in MARKED_TABLES:
        path = DOCS / page
        text = path.read_text(encoding="utf-8")
        new = render_marked(page, text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(page)
    return changed


# ---------------------------------------------------------------------------------------------------------
# The CLI reference


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def _param_row(param: Any, ctx: Any) -> str:
    record = param.get_help_record(ctx)
    name, help_text = record if record else (param.name, getattr(param, "help", "") or "")
    if param.param_type_name == "argument":
        kind = "argument" + (", repeatable" if param.nargs == -1 else "")
    else:
        kind = ("flag" if param.is_flag else "option") + (", repeatable" if param.multiple else "")
    return f"| `{name}` | {kind} | {_escape(help_text)} |"


def _command_section(command: Any, path: list[str], level: int) -> list[str]:
    from typer._click.core import Context

    title = " ".join(path)
    is_group = hasattr(command, "commands")
    ctx = Context(command, info_name=title)
    lines = [f"{'#' * level} `{title}`", ""]
    help_text = (command.help or "").strip()
    if help_text:
        lines += [help_text, ""]
    params = [p for p in command.params if not getattr(p, "hidden", False)]
    if is_group:
        subcommands = [name for name, sub in command.commands.items() if not sub.hidden]
        lines += [f"Commands: {', '.join(f'`{title} {name}`' for name in subcommands)}.", ""]
    else:
        usage = " ".join(command.collect_usage_pieces(ctx))
        lines += ["```", f"{title} {usage}".rstrip(), "```", ""]
    if params:
        lines += ["| argument or option | kind | help |", "|---|---|---|"]
        lines += [_param_row(p, ctx) for p in params]
        lines.append("")
    if is_group:
        for name, sub in command.commands.items():
            if not sub.hidden:
                lines += _command_section(sub, [*path, name], level + 1)
    return lines


def cli_reference() -> str:
    import typer

    from framework.cli import app
    from framework.cli.app import all_commands

    root = typer.main.get_command(app)
    lines = [
        "# CLI reference",
        "",
        "Generated from the `tributary` command itself (`framework/cli/`) when the site is built: every",
        "command, its help, arguments and options. `tributary COMMAND --help` prints the same at the terminal.",
        "",
        (root.help or "").strip(),
        "",
        "Exit codes: **0** ok, **1** the run failed, **2** bad input (spec, template, vars, missing source).",
        "",
    ]
    for name, command in all_commands().items():
        if not command.hidden:
            lines += _command_section(command, ["tributary", name], 2)
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------------------
# The spec reference


def _type_of(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema or "oneOf" in schema:
        parts = [_type_of(s) for s in schema.get("anyOf", schema.get("oneOf", []))]
        return " or ".join(dict.fromkeys(p for p in parts if p))
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type_of(schema.get('items', {})) or 'any'}"
    if kind == "object":
        extra = schema.get("additionalProperties")
        if not (isinstance(extra, dict) and extra) and len(schema.get("patternProperties", {})) == 1:
            extra = next(iter(schema["patternProperties"].values()))
        if isinstance(extra, dict) and extra:
            return f"map of name → {_type_of(extra)}"
        return "mapping"
    if isinstance(kind, list):
        return " or ".join(kind)
    return kind or "any"


def _properties_table(schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    if not properties:
        return []
    required = set(schema.get("required", []))
    lines = ["| key | type | required | default | meaning |", "|---|---|---|---|---|"]
    for key, prop in properties.items():
        default = f"`{json.dumps(prop['default'])}`" if "default" in prop and prop["default"] is not None else ""
        description = prop.get("description", "")
        lines.append(
            f"| `{key}` | {_type_of(prop)} | {'yes' if key in required else ''} | {_escape(default)} | {_escape(description)} |"
        )
    return lines + [""]


def spec_reference(schema_file: Path = REPO / "tributary.schema.json") -> str:
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    lines = [
        "# Spec reference",
        "",
        "Generated from `tributary.schema.json` (written by `tributary schema`) when the site is built: every key",
        "of a pipeline file, its type and what it means. What the keys do together: [pipelines](pipelines.md).",
        "",
        f"## {schema.get('title', 'Pipeline')}",
        "",
        (schema.get("description") or "").strip(),
        "",
        *_properties_table(schema),
    ]
    for name, definition in sorted(schema.get("$defs", {}).items()):
        lines += [f"## {name}", ""]
        if definition.get("description"):
            lines += [definition["description"].strip(), ""]
        table = _properties_table(definition)
        lines += table or [f"Type: {_type_of(definition)}", ""]
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(REPO))
    if argv[:1] == ["--check"]:
        stale = stale_pages()
        for page in stale:
            print(f"docs/{page}: the generated table is stale; run: python docs/gen.py", file=sys.stderr)
        return 1 if stale else 0
    if argv[:1] == ["cli"]:
        print(cli_reference(), end="")
        return 0
    if argv[:1] == ["spec"]:
        print(spec_reference(), end="")
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    for page in write_marked():
        print(f"wrote docs/{page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
