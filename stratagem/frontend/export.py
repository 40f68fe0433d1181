"""torch.export, the way capture uses it: non-strict, default (training) IR, no decomposition.

The coarse ATen ops the planner works with (linear, layer_norm, scaled_dot_product_attention,
lstm_cell, conv2d, batch_norm, max_pool2d, cross_entropy_loss, embedding) survive only in the
default export IR, so `run_decompositions` is never called. A module on the meta device is exported
with meta as the default device, so tensors its forward creates without a device (`torch.zeros(n)`)
land on meta too.

Writes through views are made functional (`mutation.py`). Export wraps code run under
`torch.no_grad()` or `torch.autocast` in higher-order ops whose bodies are submodules;
`inline_wrapped_bodies` copies those bodies into the top graph, since the IR has no nested graphs.
Copied nodes carry the grad mode they ran under (`GRAD_ENABLED` in their meta), so the saved-tensor
run (saved.py) keeps no-grad code from saving anything; the IR itself has no no-grad regions, so
the planner treats such ops as if gradients flowed through them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch
from torch import fx

from stratagem.errors import StratagemError
from stratagem.frontend.mutation import functionalize_view_writes
from stratagem.frontend.repeats import twins_traced_once


GRAD_ENABLED = "stratagem_grad_enabled"   # node meta: the grad mode an inlined body ran under


class ExportFailed(StratagemError):
    """torch.export could not trace the module's forward."""


def export_program(module: torch.nn.Module, inputs: Sequence[Any],
                   dynamic_shapes: Any = None) -> torch.export.ExportedProgram:
    """The exported program; `dynamic_shapes` (torch.export's argument) makes sizes symbolic.
    With static sizes, twin blocks are traced once per kind of call and copied (repeats.py)."""
    twins = twins_traced_once(module) if dynamic_shapes is None else contextlib.nullcontext()
    with _default_device(module, inputs), _without_stack_traces(), _lazy_recompiles(), twins:
        try:
            program = torch.export.export(module, tuple(inputs), strict=False, dynamic_shapes=dynamic_shapes)
        except Exception as error:     # noqa: BLE001 - whatever export raises, said plainly
            raise _export_failure(module, error) from error
    inline_wrapped_bodies(program.graph_module)
    functionalize_view_writes(program.graph_module)
    return program


def _export_failure(module: torch.nn.Module, error: Exception) -> ExportFailed:
    first = next((line for line in str(error).splitlines() if line.strip()), type(error).__name__)
    what = f"torch.export could not trace {type(module).__name__}.forward"
    if "data-dependent" in str(error) or "GuardOnDataDependent" in type(error).__name__:
        return ExportFailed(what, got=f"a Python value computed from tensor data ({first})",
                            hint="stratagem plans static computations: avoid .item(), float(tensor) and branches on "
                                 "tensor values in forward (e.g. batch norm's momentum=None reads its step count)")
    return ExportFailed(what, got=f"{type(error).__name__}: {first}",
                        hint="Make forward traceable by torch.export (strict=False), or capture a wrapper whose "
                             "forward is")


@contextlib.contextmanager
def _without_stack_traces():
    """Tracing without recording each node's Python stack (`stack_trace` in its meta, which
    nothing here reads): 10-20 % of an export's time on hf:llama-7b. torch's flag, restored after."""
    config = torch.fx.config
    before = config.do_not_emit_stack_traces
    config.do_not_emit_stack_traces = True
    try:
        yield
    finally:
        config.do_not_emit_stack_traces = before


def _lazy_recompiles() -> contextlib.AbstractContextManager:
    """Export's passes regenerate the graph module's Python code after each rewrite (six times on
    a decoder, ~40 ms per 1,000 nodes each); with torch's lazy graph modules, as torch.compile
    uses them, only when the code is read or run (20 % of a 48-layer decoder's export). A torch
    without them exports as before."""
    try:
        from torch.fx._lazy_graph_module import _use_lazy_graph_module
    except ImportError:                       # pragma: no cover - older or newer torch
        return contextlib.nullcontext()
    return _use_lazy_graph_module(True)


def _default_device(module: torch.nn.Module, inputs: Sequence[Any]) -> contextlib.AbstractContextManager:
    tensors = [*module.parameters(), *module.buffers(),
               *(x for x in torch.utils._pytree.tree_leaves(list(inputs)) if isinstance(x, torch.Tensor))]
    on_meta = bool(tensors) and all(t.device.type == "meta" for t in tensors)
    return torch.device("meta") if on_meta else contextlib.nullcontext()


def _wrapper_ops() -> tuple[Any, ...]:
    hops = torch.ops.higher_order
    return tuple(getattr(hops, name) for name in ("wrap_with_set_grad_enabled", "wrap_with_autocast")
                 if hasattr(hops, name))


def inline_wrapped_bodies(gm: fx.GraphModule) -> None:
    """Replace every no-grad / autocast wrapper call by a copy of its body, in place. A body that
    itself holds submodules stays wrapped (capture then records the wrapper as one opaque op)."""
    wrappers = _wrapper_ops()
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in wrappers]
    inlined = [node for node in calls if _inline(gm, node)]
    if inlined:
        gm.graph.eliminate_dead_code()
        gm.recompile()


def _inline(gm: fx.GraphModule, node: fx.Node) -> bool:
    body_at = next(i for i, a in enumerate(node.args)
                   if isinstance(a, fx.Node) and a.op == "get_attr"
                   and isinstance(getattr(gm, a.target), fx.GraphModule))
    body: fx.GraphModule = getattr(gm, node.args[body_at].target)
    if any(inner.op == "get_attr" for inner in body.graph.nodes):
        return False
    placeholders = [n for n in body.graph.nodes if n.op == "placeholder"]
    env: dict[fx.Node, Any] = dict(zip(placeholders, node.args[body_at + 1:]))
    results: Any = None
    sets_grad = node.target is getattr(torch.ops.higher_order, "wrap_with_set_grad_enabled", None)
    grad_enabled = node.args[0] if sets_grad else None
    with gm.graph.inserting_before(node):
        for inner in body.graph.nodes:
            if inner.op == "output":
                results = fx.node.map_arg(inner.args[0], lambda n: env[n])
            elif inner.op != "placeholder":
                env[inner] = gm.graph.node_copy(inner, lambda n: env[n])
                if grad_enabled is not None:
                    env[inner].meta[GRAD_ENABLED] = bool(grad_enabled)
    _replace_results(node, results)
    return True


def _replace_results(node: fx.Node, results: Any) -> None:
    if isinstance(results, (list, tuple)):
        for user in list(node.users):
            user.replace_all_uses_with(results[user.args[1]])
            user.graph.erase_node(user)
    else:
        node.replace_all_uses_with(results)
    node.graph.erase_node(node)
