"""`stratagem ops`: the TDL operator library with the splits the analysis derives.

    stratagem ops                 one line per op at its example shapes: dims, kinds, reductions
                                  ([irregular]: a halo-like split; [no 2-way split]: not offered)
    stratagem ops NAME            one op in detail: description, dims, each 2-way split's regions
    stratagem ops --coverage [-v] how many core ATen ops capture describes (-v: list the rest); an
                                  overload counts when aten_map has a converter for it (a few
                                  argument values, e.g. a transposed convolution, still give None)

A rich table when writing to a terminal; plain aligned text when piped.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from stratagem.tdl.analysis import Analysis, Split
from stratagem.tdl.library import LIBRARY
from stratagem.tdl.symbolic import SymInterval
from rich.console import Console
from rich.table import Table
from stratagem.tdl import lookup
from stratagem.tdl.expr import FULL
from stratagem.tdl.regions import full_ranges, iter_accesses


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="show one op in detail")
    parser.add_argument("--coverage", action="store_true",
                        help="how many core ATen ops (torch.Tag.core) capture describes")
    parser.add_argument("-v", "--verbose", action="store_true", help="with --coverage: list the rest")


def run(args: argparse.Namespace) -> int:
    try:
        if args.coverage:
            return _coverage(args.verbose)
        if args.name:
            return _detail(args.name)
        return _listing()
    except BrokenPipeError:                       # `stratagem ops | head`: the reader left
        sys.stdout = open(os.devnull, "w")       # noqa: SIM115 - silence the exit-time flush
        return 0


# ---- the listing ---------------------------------------------------------------------------------

def example_analysis(name: str) -> Analysis:
    return Analysis(LIBRARY[name].describe_example())


def symbols(analysis: Analysis) -> dict[int, str]:
    """Symbol (upper-case index name) of each dim's index variable, by uid."""
    return {analysis.index_var(name).uid: sym for name, sym in analysis.symbols.items()}


def input_dims(analysis: Analysis) -> list[list[str]]:
    """Each input's dims as the symbol of the index that addresses it directly, else its size."""
    sym = symbols(analysis)
    found: list[list[str] | None] = [None] * len(analysis.desc.inputs)
    for out in analysis.desc.outputs:
        for acc, _, _ in iter_accesses(out, full_ranges(analysis.desc)):
            pos = acc.tensor.position
            dims = [_dim_label(index, size, sym, analysis.desc.extents)
                    for index, size in zip(acc.indices, acc.tensor.shape)]
            if found[pos] is None or _named(dims) > _named(found[pos]):
                found[pos] = dims
    return [f if f is not None else [str(s) for s in ref.shape]
            for f, ref in zip(found, analysis.desc.inputs)]


def _named(dims: list[str]) -> int:
    return sum(1 for d in dims if not d.isdigit())


def _dim_label(index: Any, size: int, sym: dict[int, str], extents) -> str:
    """The symbol of the index that walks the whole dim directly, else the dim's size."""
    var = None if index is FULL else index.as_single_var()
    if var is None or var.uid not in sym or extents[var.uid] != size:
        return str(size)
    return sym[var.uid]


def signature(analysis: Analysis, attrs: dict[str, Any] | None = None) -> str:
    """`linear(x[B,K], weight[J,K], bias[J]) -> out[B,J]`, with the given attributes after `;`."""
    sym = symbols(analysis)
    args = ", ".join(f"{ref.name}[{','.join(dims)}]"
                     for ref, dims in zip(analysis.desc.inputs, input_dims(analysis)))
    if attrs:
        args += ("; " if args else "") + ", ".join(f"{k}={v!r}" for k, v in attrs.items())
    outs = ",".join(sym[v.uid] for v in analysis.desc.output_vars)
    results = " ".join(f"out[{outs}]" if analysis.desc.num_outputs == 1 else f"out{i}[{outs}]"
                       for i in range(analysis.desc.num_outputs))
    return f"{analysis.name}({args}) -> {results}"


def dims_text(analysis: Analysis) -> str:
    """Each dim as `name:kind`; `[irregular]` when its 2-way split needs a region no DTensor
    placement expresses (a halo), `[no 2-way split]` when a worker would read more than it needs."""
    return "  ".join(_dim_text(analysis, d) for d in analysis.dims)


def _dim_text(analysis: Analysis, dim) -> str:
    text = str(dim)
    if not dim.splittable:
        return text
    if not analysis.can_split(dim.name, 2):
        return f"{text}[no 2-way split]"
    return text if analysis.split(dim.name, 2).is_regular else f"{text}[irregular]"


def rows() -> list[tuple[str, str]]:
    out = []
    for name, opdef in LIBRARY.items():
        if opdef.example is None:
            out.append((f"{name}  (no example: {opdef.doc})", ""))
            continue
        analysis = example_analysis(name)
        out.append((signature(analysis, opdef.example[1]), dims_text(analysis)))
    return out


def _listing() -> int:
    table = rows()
    if sys.stdout.isatty():
        return _rich_listing(table)
    width = max(len(sig) for sig, _ in table)
    for sig, dims in table:
        print(f"{sig.ljust(width)}   {dims}".rstrip())
    print(f"\n{len(LIBRARY)} ops")
    return 0


def _rich_listing(table: list[tuple[str, str]]) -> int:
    view = Table(title=f"TDL library: {len(LIBRARY)} ops at their example shapes", show_lines=False)
    view.add_column("op", overflow="fold")
    view.add_column("dims (kind, reduction -> placement)", overflow="fold")
    for sig, dims in table:
        view.add_row(sig, dims)
    Console().print(view)
    return 0


# ---- one op in detail -------------------------------------------------------------------------------

def _detail(name: str) -> int:
    opdef = lookup(name)
    print(f"{name}: {opdef.doc}")
    if opdef.example is None:
        print("  (no example shapes: nothing to analyze)")
        return 0
    shapes, attrs = opdef.example
    analysis = example_analysis(name)
    print(f"  at example shapes {[list(s) for s in shapes]}: {signature(analysis, attrs)}")
    print(f"  description: {analysis.desc}")
    print("  dims:")
    for dim in analysis.dims:
        print(f"    {dim.name:8s} size {dim.size:<4d} {dim}")
    for dim in analysis.dims:
        if analysis.can_split(dim.name, 2):
            _print_split(analysis, analysis.split(dim.name, 2))
        else:
            why = dim.why_not or "a worker would read more than it needs"
            print(f"  split {dim.name} 2 ways: not offered ({why})")
    return 0


def _print_split(analysis: Analysis, split: Split) -> None:
    placements = ", ".join(f"{ref.name}:{p or 'irregular'}"
                           for ref, p in zip(analysis.desc.inputs, split.placements))
    print(f"  split {split.dim} 2 ways -> output {split.output_placement} ({split.combine}); "
          f"inputs {placements}")
    for worker, share in enumerate(split.workers):
        regions = analysis.symbolic_regions(split.dim, split.parts, worker)
        print(f"    worker {worker}: output {_box(share.output_box)}")
        for ref, box, symbolic in zip(analysis.desc.inputs, share.input_boxes, regions):
            sym_text = "nothing" if symbolic is None else _sym_box(symbolic)
            print(f"      {ref.name:10s} {sym_text:40s} = {_box(box) if box else 'nothing'}")


def _box(box) -> str:
    return "[" + ", ".join(f"{a}:{b}" for a, b in box) + "]"


def _sym_box(intervals: tuple[SymInterval, ...]) -> str:
    return "[" + ", ".join(str(i) for i in intervals) + "]"


# ---- ATen coverage ----------------------------------------------------------------------------------

def core_aten_overloads() -> list[str]:
    import torch
    found = []
    for packet_name in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, packet_name)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        for overload in packet.overloads():
            if torch.Tag.core in getattr(packet, overload).tags:
                found.append(str(getattr(packet, overload)))
    return sorted(found)


def _coverage(verbose: bool) -> int:
    from stratagem.frontend.aten_map import described_targets
    core = core_aten_overloads()
    described = described_targets()
    missing = [name for name in core if name not in described]
    covered = len(core) - len(missing)
    print(f"core ATen ops described: {covered} of {len(core)} ({100.0 * covered / len(core):.0f}%); "
          f"{len(described)} ATen overloads described in all")
    if verbose:
        print("not described:")
        for name in missing:
            print(f"  {name}")
    elif missing:
        print(f"{len(missing)} not described (-v lists them)")
    return 0
