"""Writes through views, made functional so that the IR (where every tensor has one producer and
never changes) computes what eager PyTorch computes.

Export's default IR keeps in-place ops. One on a tensor itself (`x.relu_()`, `x.masked_fill_(m, 0)`)
is already safe: later readers of `x` read the in-place node, and capture runs it out of place. One
on a view writes into the view's base, which later nodes read under the base's old name:

    shifted = labels.new_zeros(b, t)
    shifted[:, 1:] = labels[:, :-1]       # copy_(slice(shifted, 1, 1, end), ...): no users
    shifted[:, 0] = start                 # fill_(select(shifted, 1, 0), start): no users
    use(shifted)                          # reads new_zeros

`functionalize_view_writes` rewrites each in-place op on a `slice` or `select` of a base into its
out-of-place op followed by `slice_scatter` / `select_scatter` into the base, and points the base's
later readers at the result. A base that is a placeholder (a buffer, a parameter) gets an explicit
`copy_(base, result)` too, so the write to the module's state is not lost (frontend/state.py
carries it for a buffer and refuses it for a parameter). Writes through deeper view chains, or read back through another view
taken before the write, are left as they are (they are rare; `capture` does not detect them).
"""

from __future__ import annotations

import copy

import torch
from torch import fx

from stratagem.frontend.calls import functional_target

SCATTERS = {"slice": torch.ops.aten.slice_scatter.default, "select": torch.ops.aten.select_scatter.default}


def functionalize_view_writes(gm: fx.GraphModule) -> int:
    """Rewrite in place; returns how many writes were rewritten."""
    writes = [n for n in gm.graph.nodes if _writes_into_view(n)]
    for node in writes:
        _rewrite(gm.graph, node)
    if writes:
        gm.recompile()
    return len(writes)


def _writes_into_view(node: fx.Node) -> bool:
    if node.op != "call_function" or functional_target(node.target) is node.target:
        return False
    view = node.args[0] if node.args else None
    return (isinstance(view, fx.Node) and view.op == "call_function"
            and getattr(view.target, "_opname", None) in SCATTERS and isinstance(view.args[0], fx.Node))


def _rewrite(graph: fx.Graph, node: fx.Node) -> None:
    view = node.args[0]
    base = view.args[0]
    with graph.inserting_after(node):
        value = graph.call_function(functional_target(node.target), node.args, node.kwargs)
    with graph.inserting_after(value):
        rebuilt = graph.call_function(SCATTERS[view.target._opname], (base, value, *view.args[1:]))
    value.meta = copy.copy(node.meta)
    rebuilt.meta = {**copy.copy(node.meta), "val": base.meta.get("val")}
    node.replace_all_uses_with(value)
    order = {n: i for i, n in enumerate(graph.nodes)}
    for user in list(base.users):
        if order[user] > order[rebuilt]:
            user.replace_input_with(base, rebuilt)
    graph.erase_node(node)
    if base.op == "placeholder":        # a buffer (or parameter) written through a view: say so
        with graph.inserting_after(rebuilt):
            write = graph.call_function(torch.ops.aten.copy_.default, (base, rebuilt))
        write.meta = {**copy.copy(rebuilt.meta)}
