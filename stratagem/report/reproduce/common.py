"""What every reproduction shares: settings, its outcome and how it is written, the paper clusters
and their variants, models by name or by hidden size, frontiers with their baselines.

Files written per reproduction NAME under Settings.out_dir:
    NAME.md    the paper's figure or table it reproduces, the command, the tables, the notes
    NAME.csv   every number behind the tables (the first table when there are several: NAME-<i>.csv)
    NAME.png   the figure, when there is one
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stratagem.report.frontier_plot import frontier_points
from stratagem.report.tables import Table
from stratagem.search.ft_search import FTSearchOptions, frontier
from stratagem.cluster import Cluster, parse_spec
from stratagem.cluster.loader import PRESET_DIR
import yaml

COMMAND = "stratagem reproduce"


@dataclass(frozen=True)
class Settings:
    out_dir: Path
    quick: bool = False
    track: Callable[[Iterable[Any], str], Iterable[Any]] = field(default=lambda items, _: items, repr=False)


@dataclass(frozen=True)
class Outcome:
    tables: tuple[Table, ...]
    notes: tuple[str, ...] = ()
    draw: Callable[[Path], Path] | None = None      # writes the figure to the path it is given


def command_line(name: str, settings: Settings) -> str:
    return f"{COMMAND} {name}" + (" --quick" if settings.quick else "")


def write_outcome(settings: Settings, name: str, paper: str, outcome: Outcome, elapsed_s: float) -> tuple[Path, ...]:
    out = Path(settings.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for i, table in enumerate(outcome.tables):
        path = out / (f"{name}.csv" if i == 0 else f"{name}-{i + 1}.csv")
        path.write_text(table.to_csv())
        files.append(path)
    figure = outcome.draw(out / f"{name}.png") if outcome.draw else None
    lines = [f"# {paper}", "", f"Made by `{command_line(name, settings)}` in {elapsed_s:.0f} s"
             + (" (quick: tiny models, few devices)" if settings.quick else "") + ".", ""]
    if figure is not None:
        lines += [f"![{paper}]({figure.name})", ""]
    for table in outcome.tables:
        lines += ([f"**{table.title}**", ""] if table.title else []) + [table.to_markdown(), ""]
    lines += [f"- {note}" for note in outcome.notes]
    md = out / f"{name}.md"
    md.write_text("\n".join(lines).rstrip() + "\n")
    return (md, *files, *([figure] if figure else []))


def write_pending(settings: Settings, name: str, paper: str, about: str, missing: Sequence[str]) -> tuple[Path, ...]:
    out = Path(settings.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md = out / f"{name}.md"
    md.write_text(f"# {paper}\n\nPending: {about} needs the search algorithm(s) {', '.join(missing)}, which "
                  f"`stratagem.search.registry` does not register yet. No numbers are shown until "
                  f"it does; then `{command_line(name, settings)}` makes them.\n")
    return (md,)


# ---- models --------------------------------------------------------------------------------------

def zoo_graph(name: str):
    from stratagem import zoo
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zoo.build(name)


def transformer_graph(dim: int, heads: int, layers: int = 6, vocab: int = 37000, length: int = 64,
                      batch: int = 256, name: str | None = None):
    """Vaswani's Transformer (the zoo's `transformer`) at another hidden size (TensorOpt Fig. 7a)."""
    import torch

    from stratagem.frontend.capture import capture
    from stratagem.frontend.zoo import inputs
    from stratagem.frontend.zoo.transformer import Transformer
    meta = torch.device("meta")
    with meta:
        module = Transformer(vocab, dim, heads, 4 * dim, layers, max(512, length), 0.0)
    example = inputs.translation(batch, meta, None, source_vocab=vocab, target_vocab=vocab, source_length=length,
                                 target_length=length)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture(module, example, name=name or f"transformer-d{dim}")


# ---- clusters ------------------------------------------------------------------------------------

def preset_data(name: str) -> dict:

    return yaml.safe_load((PRESET_DIR / f"{name}.yaml").read_text())


def cluster_variant(base: str, name: str, edit: Callable[[dict], None]):
    """A preset's spec with `edit` applied to a copy of its data (bandwidths, NICs, fabrics, nodes)."""
    data = copy.deepcopy(preset_data(base))
    edit(data)
    data["name"] = name
    return Cluster(parse_spec(data, f"{base} edited as {name}"))


def scale_network(factor: float) -> Callable[[dict], None]:
    def edit(data: dict) -> None:
        for key in ("link", "attach_link"):
            data["network"][key]["bandwidth_bytes_per_s"] *= factor
    return edit


def cross_node_bus_bandwidth(cluster) -> float:
    """Ring all-reduce bus bandwidth of 1 GiB over every device (what the network sustains)."""
    n = cluster.num_devices
    group = tuple(range(n))
    return 2 * (n - 1) / n * 2 ** 30 / cluster.collective_time_s("all_reduce", 2 ** 30, group)


# ---- frontiers -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Series:
    label: str
    points: tuple            # FrontierPoint


def frontier_and_points(ctx):
    front = frontier(ctx, FTSearchOptions(runnable=False))      # the papers' whole space
    return front, tuple(frontier_points(front, ctx.model))


def knee_index(mem: Sequence[float], time: Sequence[float]) -> int:
    """The turning point (TensorOpt §5.1): Kneedle, the point farthest below the chord."""
    mem, time = np.asarray(mem, float), np.asarray(time, float)
    if len(mem) < 3 or mem[-1] == mem[0] or time[0] == time[-1]:
        return 0
    x = (mem - mem[0]) / (mem[-1] - mem[0])
    y = (time - time[-1]) / (time[0] - time[-1])
    return int(np.argmax((1 - x) - y))


def gib(num_bytes: float) -> str:
    return f"{num_bytes / 2 ** 30:.4g}"


def seconds(time_s: float) -> str:
    return f"{time_s:.4g}"


def points_rows(label: str, points: Sequence, extra: Mapping[str, str] | None = None) -> list[tuple[str, ...]]:
    return [(label, str(i), gib(p.additive_memory_bytes), seconds(p.additive_time_s), seconds(p.compute_time_s),
             seconds(p.network_time_s), gib(p.peak_memory_bytes), seconds(p.iteration_time_s))
            for i, p in enumerate(points)]


POINT_COLUMNS = ("series", "#", "memory GiB (additive)", "time s (additive)", "compute s", "network s",
                 "peak memory GiB (simulated)", "iteration s (simulated)")
