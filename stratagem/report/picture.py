"""The strategy as a picture: ops along x, devices along y, each cell colored by how the op is split
on that device (FlexFlow Fig. 12-13 draw the same: which devices compute each op, and how).

    cells = strategy_cells(plan, analyses)      # {op: (category, devices)}
    text  = picture_text(plan, cells)           # runs of alike ops, one character per device
    write_picture_png(plan, cells, "strategy.png")
A category names the dim kinds the op's mesh axes split (sample, parameter, attribute, reduction),
with "replicated" for replicating axes and "whole" for an op on one device.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from stratagem.plan import Plan
from stratagem.report.plots import pyplot, save
import numpy as np

ORDER = ("sample", "parameter", "attribute", "reduction", "replicated")
LETTER = {"sample": "S", "parameter": "P", "attribute": "A", "reduction": "R", "replicated": "=",
          "whole": "1"}
IDLE, MIXED = ".", "*"


@dataclass(frozen=True)
class OpCells:
    category: str                  # "sample", "sample+parameter", "whole", ...
    devices: tuple[int, ...]


def category(analysis, config) -> str:
    if not config.levels:
        return "whole"
    kinds = {analysis.dim(level.dim).kind if level.dim else "replicated" for level in config.levels}
    return "+".join(k for k in ORDER if k in kinds)


def strategy_cells(plan: Plan, analyses: Mapping) -> dict[str, OpCells]:
    return {op.name: OpCells(category(analyses[op.name], plan.strategy[op.name]),
                             tuple(plan.strategy[op.name].devices)) for op in plan.graph.ops}


def letter(category_name: str) -> str:
    return LETTER.get(category_name, MIXED)


def _row(cells: OpCells, num_devices: int) -> str:
    mark = letter(cells.category)
    used = set(cells.devices)
    return "".join(mark if d in used else IDLE for d in range(num_devices))


def picture_text(plan: Plan, cells: Mapping[str, OpCells]) -> str:
    """Consecutive ops with the same configuration are one line: `first..last (n ops)`."""
    lines = [f"devices 0..{plan.num_devices - 1} left to right; " + ", ".join(
        f"{v} {k}" for k, v in LETTER.items()) + f", {MIXED} several kinds, {IDLE} idle"]
    ops = [op.name for op in plan.graph.ops]
    start = 0
    for i in range(1, len(ops) + 1):
        if i < len(ops) and str(plan.strategy[ops[i]]) == str(plan.strategy[ops[start]]) \
                and cells[ops[i]].category == cells[ops[start]].category:
            continue
        first, last = ops[start], ops[i - 1]
        name = first if i - 1 == start else f"{first}..{last} ({i - start} ops)"
        lines.append(f"{_row(cells[first], plan.num_devices)}  {str(plan.strategy[first]):18s} "
                     f"{cells[first].category:18s} {name}")
        start = i
    return "\n".join(lines)


def categories(cells: Mapping[str, OpCells]) -> list[str]:
    found = {c.category for c in cells.values()}
    return sorted(found, key=lambda c: (c != "whole", c.count("+"), [ORDER.index(k) if k in ORDER else 9
                                                                      for k in c.split("+")]))


def write_picture_png(plan: Plan, cells: Mapping[str, OpCells], path: str | Path) -> Path:
    """ops x devices grid, a color per category, with a legend."""
    plt = pyplot()
    ops = [op.name for op in plan.graph.ops]
    names = categories(cells)
    grid = np.full((plan.num_devices, len(ops)), np.nan)
    for x, op in enumerate(ops):
        for d in cells[op].devices:
            grid[d, x] = names.index(cells[op].category)
    colors = plt.get_cmap("tab10" if len(names) <= 10 else "tab20").colors     # one color per category
    cmap = plt.matplotlib.colors.ListedColormap([colors[i % len(colors)] for i in range(len(names))]
                                                ).with_extremes(bad="white")
    width = min(max(6.0, len(ops) * 0.06), 24.0)
    figure, axes = plt.subplots(figsize=(width, 1.5 + 0.25 * plan.num_devices))
    axes.imshow(np.ma.masked_invalid(grid), aspect="auto", interpolation="nearest", cmap=cmap,
                vmin=-0.5, vmax=len(names) - 0.5, origin="lower")
    axes.set_xlabel(f"operators in graph order ({len(ops)})")
    axes.set_ylabel("device")
    axes.set_title(f"{plan.model or plan.graph.name} on {plan.cluster}, {plan.num_devices} devices, "
                   f"{plan.algorithm}: how each op is split")
    handles = [plt.matplotlib.patches.Patch(color=cmap(i), label=name) for i, name in enumerate(names)]
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return save(figure, path)

