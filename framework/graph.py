"""The pipeline DAG: sources → steps → outputs. Ordering by graphlib; selection like dbt's."""

from __future__ import annotations

import graphlib
from dataclasses import dataclass
from html import escape

from framework.errors import BadInput, Problem
from framework.spec.base import did_you_mean


class StepCycle(BadInput):
    """The steps read each other in a loop; `cycle` lists them, each read by the next."""

    def __init__(self, cycle: list[str]):
        super().__init__(
            Problem(
                f"the steps form a cycle: {' → '.join(cycle)}",
                hint="each step reads the one before it; break the loop by removing one of those reads",
            )
        )
        self.cycle = cycle


@dataclass(frozen=True)
class PipelineGraph:
    """`inputs[step]` = the sources and steps it reads; `kinds[node]` = 'source' or a step kind."""

    inputs: dict[str, tuple[str, ...]]
    kinds: dict[str, str]
    outputs: dict[str, str]  # output name -> step it writes

    @classmethod
    def build(cls, inputs: dict[str, tuple[str, ...]], kinds: dict[str, str], outputs: dict[str, str]) -> PipelineGraph:
        graph = cls(inputs, kinds, outputs)
        graph.order()  # raises on a cycle
        return graph

    @property
    def steps(self) -> list[str]:
        return [n for n in self.order() if self.kinds[n] != "source"]

    def order(self) -> list[str]:
        """Sources and steps, each after everything it reads."""
        sorter = graphlib.TopologicalSorter({node: self.inputs.get(node, ()) for node in self.kinds})
        try:
            return list(sorter.static_order())
        except graphlib.CycleError as e:
            raise StepCycle(list(e.args[1])) from None  # each node is read by the next one

    def upstream(self, node: str) -> set[str]:
        seen: set[str] = set()
        todo = list(self.inputs.get(node, ()))
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(self.inputs.get(n, ()))
        return seen

    def downstream(self, node: str) -> set[str]:
        readers: dict[str, list[str]] = {}
        for step, ins in self.inputs.items():
            for i in ins:
                readers.setdefault(i, []).append(step)
        seen: set[str] = set()
        todo = list(readers.get(node, []))
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(readers.get(n, []))
        return seen

    def select(self, selector: str | None) -> list[str]:
        """Steps chosen by `a`, `+a` (with upstream), `a+` (with downstream), comma-separated."""
        steps = self.steps
        if not selector:
            return steps
        chosen: set[str] = set()
        for raw in selector.split(","):
            item = raw.strip()
            if not item:
                continue
            name = item.strip("+")
            if name not in steps:
                raise BadInput(
                    Problem(f"--select: no step named '{name}'", hint=did_you_mean(name, set(steps)) or "see `tributary graph`")
                )
            chosen.add(name)
            if item.startswith("+"):
                chosen |= {n for n in self.upstream(name) if self.kinds[n] != "source"}
            if item.endswith("+"):
                chosen |= self.downstream(name)
        return [s for s in steps if s in chosen]

    def readers_count(self, node: str, among: set[str]) -> int:
        return sum(1 for step in among if node in self.inputs.get(step, ()))

    def to_mermaid(self) -> str:
        lines = ["flowchart LR"]
        for node in self.order():
            kind = self.kinds[node]
            if kind == "source":
                lines.append(f'  {node}(["{node}"])')
            else:
                lines.append(f'  {node}["{node}<br/><small>{kind}</small>"]')
        for node in self.order():
            for i in self.inputs.get(node, ()):
                lines.append(f"  {i} --> {node}")
        for out, step in self.outputs.items():
            lines.append(f'  out_{out}[("{out}")]')
            lines.append(f"  {step} ==> out_{out}")
        lines += [
            "  classDef source fill:#eef6ff,stroke:#4a7fb5",
            "  classDef output fill:#eefaf0,stroke:#3c8d4f",
        ]
        sources = [n for n in self.kinds if self.kinds[n] == "source"]
        if sources:
            lines.append(f"  class {','.join(sources)} source")
        if self.outputs:
            lines.append(f"  class {','.join('out_' + o for o in self.outputs)} output")
        return "\n".join(lines) + "\n"

    def to_svg(self) -> str:
        """A standalone SVG of the DAG (layered left to right); no scripts or network assets."""
        layer: dict[str, int] = {}
        for node in self.order():
            layer[node] = 1 + max((layer[i] for i in self.inputs.get(node, ())), default=-1)
        boxes = {f"out:{o}": layer[s] + 1 for o, s in self.outputs.items()}
        layer.update(boxes)
        columns: dict[int, list[str]] = {}
        for node, col in layer.items():
            columns.setdefault(col, []).append(node)
        box_w, box_h, gap_x, gap_y, pad = 170, 46, 70, 22, 20
        pos: dict[str, tuple[float, float]] = {}
        for col, nodes in sorted(columns.items()):
            for row, node in enumerate(nodes):
                pos[node] = (pad + col * (box_w + gap_x), pad + row * (box_h + gap_y))
        width = pad * 2 + (max(columns) + 1) * (box_w + gap_x) - gap_x
        height = pad * 2 + max(len(v) for v in columns.values()) * (box_h + gap_y) - gap_y
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            'font-family="Helvetica, Arial, sans-serif" font-size="13">',
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#667"/></marker></defs>',
        ]
        edges = [(i, n) for n in self.kinds for i in self.inputs.get(n, ())]
        edges += [(s, f"out:{o}") for o, s in self.outputs.items()]
        for a, b in edges:
            (x1, y1), (x2, y2) = pos[a], pos[b]
            x1, y1, y2 = x1 + box_w, y1 + box_h / 2, y2 + box_h / 2
            mid = (x1 + x2) / 2
            parts.append(
                f'<path d="M {x1} {y1} C {mid} {y1}, {mid} {y2}, {x2} {y2}" fill="none" stroke="#667" '
                'stroke-width="1.4" marker-end="url(#arrow)"/>'
            )
        for node, (x, y) in pos.items():
            if node.startswith("out:"):
                label, sub, fill, stroke, rx = node[4:], "Delta output", "#eefaf0", "#3c8d4f", 4
            elif self.kinds[node] == "source":
                label, sub, fill, stroke, rx = node, "source", "#eef6ff", "#4a7fb5", 23
            else:
                label, sub, fill, stroke, rx = node, self.kinds[node], "#fff8e8", "#b58a2e", 4
            parts.append(
                f"<g><title>{escape(label)} ({escape(sub)})</title>"
                f'<rect x="{x}" y="{y}" width="{box_w}" height="{box_h}" rx="{rx}" fill="{fill}" stroke="{stroke}"/>'
                f'<text x="{x + box_w / 2}" y="{y + 20}" text-anchor="middle" font-weight="bold">{escape(label)}</text>'
                f'<text x="{x + box_w / 2}" y="{y + 36}" text-anchor="middle" fill="#555" font-size="11">{escape(sub)}</text></g>'
            )
        parts.append("</svg>")
        return "\n".join(parts) + "\n"
