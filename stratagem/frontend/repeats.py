"""Repeated blocks traced once (issue 19: repeated layers solved once): torch.export traces every op
of every layer through fake tensors and proxies, ~40 ms a layer of a 1024-wide decoder, which made
capture most of what a deeper model adds to planning. Here the twins among a model's layers are
traced once per kind of input, and copied after.

Twins: children of one nn.ModuleList or nn.Sequential with the same fingerprint: the same class,
the same plain attributes (numbers, strings, None: by name and type; dtypes, devices, tuples of
them: equal; any other object, a list too, only if it is the same object), the same parameters and
buffers by name, shape, stride, dtype and requires_grad, and the same children, recursively; no
hooks inside them (the block's own hooks run as always) and no global module hooks. A module's
trace is a function of its code, its attributes, its tensors' metadata and its arguments. Twins
may differ in the values of plain attributes (a layer's index): while the model is exported, every
read of such an attribute is recorded (attribute_reads.py), and a template holds the values its
trace read (those of twin blocks copied inside it too). Twins called on arguments of the same
metadata whose attributes equal the template's wherever its trace read them add the same nodes:

    first call of (fingerprint, arguments' key):  trace it; keep its nodes as a template if
        copying them is exact (below), with the differing attributes its trace read
    a later call with the same key:               where a template's reads equal this twin's
        attributes, for each template node a node of the same op on the mapped arguments (the
        twin's own inputs and parameters for the template's), named as tracing names it (the op's
        base name, numbered on) and placed in the module stack of this twin; its outputs are
        fresh fake tensors of the template's outputs' metadata, tracked to the copied nodes;
        elsewhere traced, and kept as a further template

Arguments' key: the pytree structure of (args, kwargs); per tensor leaf its shape, stride, storage
offset, dtype, device, requires_grad and which earlier leaf it is the same tensor as; per other
leaf its type and value (None, bool, int, float, str only; anything else and the call is traced).

A template is kept only where copying it is exact: every node outside it that its nodes read is
an argument or one of the block's own parameters and buffers; it holds no placeholder, get_attr
(constants, subgraphs) or mutating op; the call left the proxies of the block's tensors and the
attributes of its modules as they were, and an argument's proxy either so or moved to a node of
the call (an op that returns its input itself, as `x.to(dtype)` of x's own dtype does, is tracked
on it: a copy moves the twin's argument to its copy of that node); sizes are concrete (no symbolic
shapes); its outputs are tensors it made, dense, at offset 0 (none of them an argument), or the
plain constants above. Otherwise the block is traced at every call, as export would.

What differs from tracing every block: a copied node's `torch_fn` and `seq_nr` meta keep the
template's (nothing here reads them); tests/frontend/test_repeats.py checks that the capture is
otherwise the same graph (names, ops, arguments, values, module stacks), and the IR graph equal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import fx, nn
from torch.fx.experimental import proxy_tensor
from torch.fx.graph import _name_regex
from torch.utils import _pytree as pytree

from stratagem.frontend.attribute_reads import Recorder, recording

PLAIN = (type(None), bool, int, float, str)
_MISSING = object()          # an attribute a twin does not hold
MODULE_BOOKKEEPING = frozenset({
    "_parameters", "_buffers", "_modules", "_non_persistent_buffers_set", "training",
    "_backward_pre_hooks", "_backward_hooks", "_is_full_backward_hook", "_forward_hooks",
    "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs", "_state_dict_hooks", "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks"})
HOOKS = ("_backward_pre_hooks", "_backward_hooks", "_forward_hooks", "_forward_pre_hooks")


@contextlib.contextmanager
def twins_traced_once(module: nn.Module) -> Iterator[None]:
    """While this is entered, an export of `module` traces each kind of call of its twin blocks once
    and copies it for the others (the module docstring). Nothing changes where it has no twins."""
    groups = {key: members for key, members in _twin_groups(module).items() if len(members) > 1}
    differing = {key: _differing(members) for key, members in groups.items()}
    watched = [(type(block.get_submodule(path)), name) for key, members in groups.items() for block in members
               for path, name in differing[key]]
    calls = _Calls()
    patched = [(block, key) for key, members in groups.items() for block in members]
    with recording(watched) as recorder:
        for block, key in patched:
            block.forward = _traced_once(block, key, block.forward, calls, recorder)
        try:
            yield
        finally:
            for block, _ in patched:
                block.__dict__.pop("forward", None)


@dataclass(frozen=True)
class _Calls:
    """One export's twin bookkeeping: the templates per (group, arguments' key), and the keys
    whose trace could not be copied exactly (traced at every call)."""

    templates: dict[Any, list[_Template]] = field(default_factory=dict)
    traced_always: set[Any] = field(default_factory=set)


# ---- twins ----------------------------------------------------------------------------------
def has_twins(module: nn.Module) -> bool:
    """Whether an export of `module` would trace some blocks once for several (twins)."""
    return any(len(members) > 1 for members in _twin_groups(module).values())


def _twin_groups(module: nn.Module) -> dict[Any, list[nn.Module]]:
    """Children of one ModuleList or Sequential grouped by loose fingerprint (a block whose forward
    is already an attribute of its own is left alone)."""
    if _global_hooks():
        return {}
    groups: dict[Any, list[nn.Module]] = {}
    for container in module.modules():
        if not isinstance(container, (nn.ModuleList, nn.Sequential)):
            continue
        for block in container.children():
            key = fingerprint(block, loose=True)
            if key is not None and "forward" not in vars(block):
                groups.setdefault((id(container), key), []).append(block)
    return groups


def _global_hooks() -> bool:
    from torch.nn.modules import module as nn_module
    return any(getattr(nn_module, name, None) for name in (
        "_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
        "_global_backward_pre_hooks", "_global_forward_hooks_always_called"))


def fingerprint(block: nn.Module, loose: bool = False) -> Any:
    """What a block's trace depends on besides its code and arguments (None: not comparable, as
    where a module inside it has hooks); `loose`: plain attributes (PLAIN) by type, not value."""
    parts = []
    for path, m in block.named_modules():
        if path and any(getattr(m, h, None) for h in HOOKS):
            return None
        attributes = tuple(sorted((k, (type(v),) if loose and isinstance(v, PLAIN) else _value_key(v))
                                  for k, v in vars(m).items() if k not in MODULE_BOOKKEEPING))
        tensors = tuple((kind, name, _tensor_key(t)) for kind, found in (("p", m._parameters), ("b", m._buffers))
                        for name, t in found.items())
        parts.append((path, type(m), m.training, attributes, tensors, tuple(sorted(m._non_persistent_buffers_set))))
    return tuple(parts)


def _plain_attributes(block: nn.Module) -> dict[tuple[str, str], Any]:
    return {(path, k): (type(v), v) for path, m in block.named_modules() for k, v in vars(m).items()
            if k not in MODULE_BOOKKEEPING and isinstance(v, PLAIN)}


def _differing(members: list[nn.Module]) -> tuple[tuple[str, str], ...]:
    """The (path, name) of the plain attributes whose values differ among twins."""
    first, *others = [_plain_attributes(block) for block in members]
    return tuple(at for at, value in first.items() if any(other[at] != value for other in others))


def _value_key(value: Any) -> Any:
    if isinstance(value, PLAIN) or isinstance(value, (torch.dtype, torch.device)):
        return (type(value), value)
    if type(value) is tuple:
        return (tuple, tuple(_value_key(v) for v in value))
    return ("same object", id(value))


def _tensor_key(t: torch.Tensor | None) -> Any:
    if t is None:
        return None
    return (type(t), tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.device, t.requires_grad)


# ---- one block's calls ----------------------------------------------------------------------
@dataclass(frozen=True)
class _Template:
    """A traced call: its nodes and their base names; where each node it reads from outside comes
    from (("arg", leaf index) or ("own", tensor name)); per node, its module stack inside the
    block as (path below the block, which call of that module counted from the call's first, its
    class); how many times the call called each module inside the block; the output's structure
    and per leaf a node index or a plain constant; the arguments whose proxy moved to a node of
    the call (leaf index, node index); and the watched attributes of the block's modules that its
    trace read, with their values (path, name, (type, value))."""

    nodes: tuple[fx.Node, ...]
    bases: tuple[str, ...]
    outside: Mapping[fx.Node, tuple[str, Any]]
    stacks: tuple[tuple[tuple[str, int, str], ...], ...]
    inner_calls: Mapping[str, int]
    out_spec: Any
    out_leaves: tuple[tuple[str, Any], ...]
    repointed: tuple[tuple[int, int], ...] = ()
    reads: tuple[tuple[str, str, Any], ...] = ()


def _reads_inside(seen: list[tuple[Any, str, Any]], block: nn.Module) -> tuple[tuple[str, str, Any], ...]:
    """Of the reads seen, those of the block's own modules: (path, name, (type, value)). All of
    them, not only of the attributes its twins differ in: a block that holds twins of its own is
    itself copied with the reads of those copied inside it, and its twins may differ there."""
    paths = {id(m): path for path, m in block.named_modules()}
    found: dict[tuple[str, str], Any] = {}
    for module, name, value in seen:
        at = (paths.get(id(module)), name)
        if at[0] is not None and at not in found:
            found[at] = (type(value), value)
    return tuple((path, name, value) for (path, name), value in found.items())


def _reads_hold(template: _Template, block: nn.Module) -> bool:
    """Whether the block's attributes equal the template's wherever its trace read them."""
    for path, name, value in template.reads:
        found = vars(block.get_submodule(path)).get(name, _MISSING)
        if (type(found), found) != value:
            return False
    return True


def _traced_once(block: nn.Module, group: Any, forward: Any, calls: _Calls, recorder: Recorder) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        mode = proxy_tensor.get_proxy_mode()
        if mode is None or not isinstance(getattr(mode.tracer, "num_calls", None), dict):
            return forward(*args, **kwargs)
        tracer = mode.tracer
        leaves, spec = pytree.tree_flatten((args, kwargs))
        with torch._C.DisableTorchFunction():     # bookkeeping: no torch-function mode need see it
            key = _arguments_key(leaves, spec, tracer)
            own = _own_tensors(block)
            template = next((t for t in calls.templates.get((group, key), ()) if _reads_hold(t, block)), None)
            if template is not None:
                recorder.told((block.get_submodule(path), name, value[1]) for path, name, value in template.reads)
                return _copied(template, tracer, leaves, own)
        if key is None or (group, key) in calls.traced_always:
            return forward(*args, **kwargs)
        with recorder.reading() as reads:
            out, template = _recorded(block, forward, args, kwargs, leaves, own, tracer)
        if template is None:
            calls.traced_always.add((group, key))
        else:
            template = replace(template, reads=_reads_inside(reads.seen, block))
            calls.templates.setdefault((group, key), []).append(template)
        return out
    return call


def _arguments_key(leaves: list[Any], spec: Any, tracer: Any) -> Any:
    parts = []
    nodes: dict[fx.Node, int] = {}
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, torch.Tensor):
            node = _node_of(leaf, tracer)
            if node is None or not _concrete(leaf):
                return None
            parts.append((_tensor_key(leaf), nodes.setdefault(node, i)))
        elif isinstance(leaf, PLAIN):
            parts.append((type(leaf), leaf))
        else:
            return None
    return (spec, tuple(parts))


def _concrete(t: torch.Tensor) -> bool:
    return all(type(s) is int for s in (*t.shape, *t.stride(), t.storage_offset()))


def _node_of(t: torch.Tensor, tracer: Any) -> fx.Node | None:
    found = proxy_tensor.get_proxy_slot(t, tracer, None)
    return None if found is None else found.proxy.node


def _block_path(tracer: Any) -> str:
    """The path of the module being called, as the tracer's module stack names it."""
    return next(reversed(tracer.module_stack.values()))[0]


def _own_tensors(block: nn.Module) -> dict[str, torch.Tensor]:
    return {f"{path}.{name}" if path else name: t
            for path, m in block.named_modules()
            for found in (m._parameters, m._buffers) for name, t in found.items() if t is not None}


def _attributes(block: nn.Module) -> list[dict[str, int]]:
    return [{k: id(v) for k, v in vars(m).items()} for m in block.modules()]


def _recorded(block: nn.Module, forward: Any, args: tuple, kwargs: dict, leaves: list[Any],
              own: dict[str, torch.Tensor], tracer: Any) -> tuple[Any, _Template | None]:
    """Trace the call; its template, or None where copying it would not be exact."""
    graph = tracer.graph
    before_last = graph._root.prev
    arg_nodes = {i: _node_of(t, tracer) for i, t in enumerate(leaves) if isinstance(t, torch.Tensor)}
    own_nodes = {name: _node_of(t, tracer) for name, t in own.items()}
    attributes = _attributes(block)
    calls_before = dict(tracer.num_calls)
    out = forward(*args, **kwargs)
    nodes = []
    node = before_last.next
    while node is not graph._root:
        nodes.append(node)
        node = node.next
    unchanged = (own_nodes == {n: _node_of(t, tracer) for n, t in own.items()} and attributes == _attributes(block)
                 and not _tensor_ids(pytree.tree_leaves(out)) & _tensor_ids(leaves))
    repointed = _repointed(leaves, arg_nodes, tracer)
    template = _template(nodes, arg_nodes, own_nodes, tracer, calls_before, out, repointed) \
        if unchanged and repointed is not None else None
    return out, template


def _tensor_ids(leaves: list[Any]) -> set[int]:
    return {id(t) for t in leaves if isinstance(t, torch.Tensor)}


def _repointed(leaves: list[Any], arg_nodes: dict[int, fx.Node | None], tracer: Any) -> dict[int, fx.Node] | None:
    """The arguments whose proxy the call moved to a node of its own (an op that returns its input
    itself, as `x.to(dtype)` of x's dtype does, is tracked on it): leaf index -> that node; None
    where such a proxy holds a constant."""
    moved = {}
    for i, before in arg_nodes.items():
        slot = proxy_tensor.get_proxy_slot(leaves[i], tracer, None)
        if slot is not None and slot.proxy.node is not before:
            if slot.constant is not None:
                return None
            moved[i] = slot.proxy.node
    return moved


def _template(nodes: list[fx.Node], arg_nodes: dict[int, fx.Node | None], own_nodes: dict[str, fx.Node | None],
              tracer: Any, calls_before: dict[str, int], out: Any, repointed: dict[int, fx.Node]) -> _Template | None:
    index = {n: i for i, n in enumerate(nodes)}
    if any(not _copyable(n) for n in nodes) or None in own_nodes.values() or not set(repointed.values()) <= set(index):
        return None
    outside = _outside(nodes, arg_nodes, own_nodes)
    block_path = _block_path(tracer)
    inner_calls = {fqn[len(block_path):]: count - calls_before.get(fqn, 0) for fqn, count in tracer.num_calls.items()
                   if fqn.startswith(block_path + ".") and count != calls_before.get(fqn, 0)}
    stacks = [_stack_inside(n, tracer, calls_before, inner_calls) for n in nodes]
    out_leaves = _output_leaves(out, nodes, tracer)
    if outside is None or None in stacks or out_leaves is None:
        return None
    bases = tuple(_name_regex.match(n.name).group(1) for n in nodes)
    return _Template(tuple(nodes), bases, outside, tuple(stacks), inner_calls, pytree.tree_structure(out),
                     out_leaves, tuple((i, index[node]) for i, node in repointed.items()))


def _outside(nodes: list[fx.Node], arg_nodes: dict[int, fx.Node | None],
             own_nodes: dict[str, fx.Node]) -> dict[fx.Node, tuple[str, Any]] | None:
    """Where each node outside the call that its nodes read comes from (None: from neither an
    argument nor the block's own tensors)."""
    sources: dict[fx.Node, tuple[str, Any]] = {}
    for name, node in own_nodes.items():
        sources.setdefault(node, ("own", name))
    for i, node in arg_nodes.items():
        sources.setdefault(node, ("arg", i))
    inside = set(nodes)
    outside: dict[fx.Node, tuple[str, Any]] = {}
    for node in nodes:
        for read in node.all_input_nodes:
            if read not in inside:
                if read not in sources:
                    return None
                outside[read] = sources[read]
    return outside


def _stack_inside(node: fx.Node, tracer: Any, calls_before: dict[str, int],
                  inner_calls: dict[str, int]) -> tuple[tuple[str, int, str], ...] | None:
    """The node's module stack below the block's: (path below the block, which call of it since the
    block's call began, class); None where the stack does not begin with the tracer's at the block's
    call, or a module inside it is keyed otherwise than tracing keys it (`path` or `path@call`)."""
    stack = list((node.meta.get("nn_module_stack") or {}).items())
    outer = list(tracer.module_stack)
    if not outer or [k for k, _ in stack[:len(outer)]] != outer:
        return None
    block_path = _block_path(tracer)
    inside = []
    for key, (fqn, cls) in stack[len(outer):]:
        below = fqn[len(block_path):]
        if not fqn.startswith(block_path + ".") or below not in inner_calls:
            return None
        ordinal = 0 if key == fqn else int(key[len(fqn) + 1:]) if key.startswith(fqn + "@") else None
        if ordinal is None or not 0 <= ordinal - calls_before.get(fqn, 0) < inner_calls[below]:
            return None
        inside.append((below, ordinal - calls_before.get(fqn, 0), cls))
    return tuple(inside)


def _output_leaves(out: Any, nodes: list[fx.Node], tracer: Any) -> tuple[tuple[str, Any], ...] | None:
    """Per output leaf ("node", index) or ("constant", value); None where a tensor was not made by
    the call, or could not be made fresh with its metadata, or a leaf is no plain constant."""
    index = {n: i for i, n in enumerate(nodes)}
    found = []
    for leaf in pytree.tree_leaves(out):
        if isinstance(leaf, torch.Tensor):
            node = _node_of(leaf, tracer)
            if node not in index or "tensor_meta" not in node.meta or not _dense_at_zero(leaf):
                return None
            found.append(("node", index[node]))
        elif isinstance(leaf, PLAIN):
            found.append(("constant", leaf))
        else:
            return None
    return tuple(found)


def _copyable(node: fx.Node) -> bool:
    if node.op != "call_function":
        return False
    schema = getattr(node.target, "_schema", None)
    return schema is None or not schema.is_mutable


def _dense_at_zero(t: torch.Tensor) -> bool:
    """Whether a tensor of this shape and stride made fresh (empty_strided) has its geometry: its
    elements dense in some order of its dims, from offset 0."""
    if t.storage_offset() != 0:
        return False
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride()), key=lambda p: p[1]):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


# ---- copying ----------------------------------------------------------------------------------
def _copied(template: _Template, tracer: Any, leaves: list[Any], own: dict[str, torch.Tensor]) -> Any:
    graph = tracer.graph
    made: dict[fx.Node, fx.Node] = {}
    for read, (kind, which) in template.outside.items():
        made[read] = _node_of(leaves[which] if kind == "arg" else own[which], tracer)
    prefix = _converted_stack(tracer.module_stack)
    block_path = _block_path(tracer)
    first_call = {below: tracer.num_calls.get(block_path + below, 0) for below in template.inner_calls}
    for node, base, inside in zip(template.nodes, template.bases, template.stacks):
        new = graph.create_node(node.op, node.target, fx.node.map_arg(node.args, made.__getitem__),
                                fx.node.map_arg(node.kwargs, made.__getitem__), name=base, type_expr=node.type)
        new.meta = dict(node.meta)
        new.meta["nn_module_stack"] = _stack_of_copy(prefix, block_path, first_call, inside)
        made[node] = new
    for below, count in template.inner_calls.items():
        tracer.num_calls[block_path + below] = first_call[below] + count
    outputs = []
    for kind, what in template.out_leaves:
        if kind == "constant":
            outputs.append(what)
            continue
        fresh = _fresh_like(template.nodes[what])
        proxy_tensor.track_tensor_tree(fresh, fx.Proxy(made[template.nodes[what]], tracer), constant=None,
                                       tracer=tracer)
        outputs.append(fresh)
    for leaf, node in template.repointed:
        proxy_tensor.set_proxy_slot(leaves[leaf], tracer,
                                    proxy_tensor._ProxyTensor(fx.Proxy(made[template.nodes[node]], tracer), None))
    return pytree.tree_unflatten(outputs, template.out_spec)


def _converted_stack(stack: Mapping[str, tuple[str, Any]]) -> dict[str, tuple[str, str]]:
    """The tracer's module stack as node meta holds it (classes as 'module.qualname')."""
    return {key: (fqn, cls.__module__ + "." + cls.__qualname__ if isinstance(cls, type) else cls)
            for key, (fqn, cls) in stack.items()}


def _stack_of_copy(prefix: dict[str, tuple[str, str]], block_path: str, first_call: Mapping[str, int],
                   inside: tuple[tuple[str, int, str], ...]) -> dict[str, tuple[str, str]]:
    """A copied node's module stack: the tracer's at this call, then the template's modules inside
    the block, keyed as tracing keys them (`path`, or `path@n` for a module's n-th call)."""
    stack = dict(prefix)
    for below, ordinal, cls in inside:
        fqn = block_path + below
        call = first_call[below] + ordinal
        stack[fqn if call == 0 else f"{fqn}@{call}"] = (fqn, cls)
    return stack


def _fresh_like(node: fx.Node) -> torch.Tensor:
    """A new fake tensor of the node's output's metadata, made without tracing (and not a leaf
    where the output requires grad, as an op's output is). The node's `val` is a detached
    snapshot; whether the output required grad is in its `tensor_meta`."""
    val = node.meta["val"]
    with proxy_tensor.disable_proxy_modes_tracing(), val.fake_mode:
        fresh = torch.empty_strided(val.shape, val.stride(), dtype=val.dtype, device=val.device)
        if node.meta["tensor_meta"].requires_grad:
            fresh = fresh.requires_grad_().clone(memory_format=torch.preserve_format)
    return fresh
