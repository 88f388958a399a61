"""`tributary graph --all`: the project's pipelines and the tables between them.

One pipeline's graph shows its steps; a project's shows which pipeline writes each table and
which pipelines read it (a `format: delta` source by `table:` or `path:`), and which pipelines
wait for which (`schedule: {after: [...]}`, dotted): what to run first, and what a failed
pipeline holds up. Mermaid text by default (paste it into Markdown), or the same standalone SVG
a pipeline's graph draws (framework.graph).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from framework.errors import BadInput
from framework.graph import PipelineGraph
from framework.project_context import ProjectContext

#: what a table node is called in the picture, beside the pipelines
TABLE = "Delta table"


@dataclass
class Lineage:
    """Pipelines (name -> what it is), tables, and the edges between them."""

    pipelines: dict[str, str] = field(default_factory=dict)  # name -> "batch · 0 * * * *" / "streaming"
    writes: set[tuple[str, str]] = field(default_factory=set)  # (pipeline, table)
    reads: set[tuple[str, str]] = field(default_factory=set)  # (table, pipeline)
    after: set[tuple[str, str]] = field(default_factory=set)  # (upstream, downstream)

    @property
    def tables(self) -> list[str]:
        return sorted({t for _, t in self.writes} | {t for t, _ in self.reads})

    def to_mermaid(self) -> str:
        ids = {f"p:{p}": f"p_{i}" for i, p in enumerate(sorted(self.pipelines))}
        ids.update({f"t:{t}": f"t_{i}" for i, t in enumerate(self.tables)})
        lines = ["flowchart LR"]
        for name in sorted(self.pipelines):
            lines.append(f'  {ids["p:" + name]}["{name}<br/><small>{self.pipelines[name]}</small>"]')
        for table in self.tables:
            lines.append(f'  {ids["t:" + table]}[("{table}")]')
        for pipeline, table in sorted(self.writes):
            lines.append(f"  {ids['p:' + pipeline]} ==> {ids['t:' + table]}")
        for table, pipeline in sorted(self.reads):
            lines.append(f"  {ids['t:' + table]} --> {ids['p:' + pipeline]}")
        for upstream, downstream in sorted(self.after):
            lines.append(f"  {ids['p:' + upstream]} -. after .-> {ids['p:' + downstream]}")
        lines += ["  classDef table fill:#eefaf0,stroke:#3c8d4f", "  classDef pipeline fill:#fff8e8,stroke:#b58a2e"]
        if self.tables:
            lines.append(f"  class {','.join(ids['t:' + t] for t in self.tables)} table")
        if self.pipelines:
            lines.append(f"  class {','.join(ids['p:' + p] for p in sorted(self.pipelines))} pipeline")
        return "\n".join(lines) + "\n"

    def to_svg(self) -> str:
        """The picture a pipeline's graph draws, with pipelines and tables as its boxes."""
        key = {t: (f"{t} (table)" if t in self.pipelines else t) for t in self.tables}
        inputs: dict[str, list[str]] = {}
        for pipeline, table in self.writes:
            inputs.setdefault(key[table], []).append(pipeline)
        for table, pipeline in self.reads:
            inputs.setdefault(pipeline, []).append(key[table])
        for upstream, downstream in self.after:
            inputs.setdefault(downstream, []).append(upstream)
        kinds = {name: f"pipeline · {what}" for name, what in self.pipelines.items()}
        kinds.update({key[t]: TABLE for t in self.tables})
        return PipelineGraph.build({n: tuple(sorted(i)) for n, i in inputs.items()}, kinds, {}).to_svg()


def lineage(context: ProjectContext) -> Lineage:
    """Every pipeline under pipelines/ compiled under the context's profile and vars (BadInput
    names the first that does not), and what it writes, reads and waits for."""
    found, compiled = Lineage(), []
    paths = context.project.all_pipelines()
    context = context.across(paths)
    for path in paths:
        compiled.append(context.for_pipeline(path).compiled)
        spec = compiled[-1].spec
        schedule = spec.schedule
        found.pipelines[spec.name] = spec.mode + (f" · {schedule.cron}" if schedule is not None else "")
        written = set()
        for name, output in spec.outputs.items():
            table = _table(output.path, output.name or name)
            written.add(table)
            found.writes.add((spec.name, table))
        for source in spec.sources.values():
            if getattr(source, "format", None) != "delta" or getattr(source, "own_output", False):
                continue
            table = _table(getattr(source, "path", None), getattr(source, "table", None) or "")
            if table not in written:
                found.reads.add((table, spec.name))
        for upstream in schedule.after if schedule is not None else []:
            found.after.add((upstream, spec.name))
    found.after = {(u, d) for u, d in found.after if u in found.pipelines}
    typo = context.vars_none_has(compiled)
    if typo:
        raise BadInput(*typo)
    return found


def _table(path: str | None, name: str) -> str:
    """A table as the picture names it: its name under the warehouse, or its path as written."""
    if path is None:
        return name
    return str(PurePosixPath(path))
