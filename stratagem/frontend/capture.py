"""capture(module, example_inputs) -> Graph: any nn.Module, through torch.export, into the IR.

1. `export.export_program`: torch.export, non-strict, default IR (the coarse ops the planner plans
   with), no decomposition. Parameters and inputs may be on the meta device or fake tensors, so a
   100-billion-parameter model captures with no memory for its weights. Twin layers are traced
   once per kind of call and their nodes copied for the others (`repeats.py`).
2. `batchdims.grown_export`: a second export with one more sample tells every tensor's batch dim.
3. `saved.record_saved`: a fake-tensor run under saved-tensor hooks tells what autograd keeps.
4. `lower.Lowering`: nodes -> ops, through `aten_map.convert`; what it cannot convert becomes
   `opaque`, and every such ATen target is named in one `OpaqueOpsWarning`.
5. `propagate_sample_dims` fills the sample dims the detection left open from the TDL analysis.

Graph.meta records `opaque_targets` (target -> op count), `saved_internal_num_bytes` (op -> bytes
autograd keeps that are no tensor of the IR, see saved.py), `constants` (the values of small
tensor constants the forward creates, when captured on a real device; see lower.py),
`state_updates` (buffer -> the tensor holding its value after the forward: running statistics,
counters; see state.py) and `cache_turned_off` (where a KV cache was turned off for capture).
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from dataclasses import dataclass
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import torch

from stratagem.errors import StratagemError
from stratagem.values import closest
from stratagem.forked import background
from stratagem.frontend.batchdims import dims_between, grown_export, is_one_sample, program_shapes
from stratagem.frontend.export import export_program
from stratagem.frontend.lower import Lowered, Lowering
from stratagem.frontend.saved import SavedTensors, record_saved
from stratagem.ir import Graph
from stratagem.tdl.graphops import propagate_sample_dims

SampleDims = Sequence[int | None] | Mapping[str, int | None] | None


class OpaqueOpsWarning(UserWarning):
    """Some ATen ops of a captured model have no TDL description and are planned as opaque ops."""


def capture(module: torch.nn.Module, example_inputs: Any, *, name: str | None = None,
            sample_dims: SampleDims = None, convert: Any = None) -> Graph:
    """The IR graph of one training step's forward pass of `module` on `example_inputs`.

    `sample_dims`: the batch dim of each tensor input (default 0; None for an input with no batch),
    as a sequence in input order or a mapping from forward-argument name.
    `convert`: node -> list of Converted or None, consulted instead of `aten_map.convert` (to
    describe ops of your own; returning None leaves a node opaque).
    """
    return capture_with_exports(module, example_inputs, name=name, sample_dims=sample_dims, convert=convert).graph


@dataclass(frozen=True)
class Captured:
    """A captured graph and the exports it was lowered from (`rebatch.py` derives the graph at
    other batch sizes from them): the program, and the one with one more sample (None where no
    input has a sample dim or that export failed): an ExportedProgram, rebatch.py's stand-in, or,
    where a forked worker exported it, its ProgramShapes with their node keys (all that the batch
    dims and rebatch.py read of it)."""

    graph: Graph
    program: torch.export.ExportedProgram
    grown: Any


def capture_with_exports(module: torch.nn.Module, example_inputs: Any, *, name: str | None = None,
                         sample_dims: SampleDims = None, convert: Any = None, grown: Any = None) -> Captured:
    """`capture`, keeping the exports. `grown`: the export with one more sample where the caller
    has it exactly (rebatch.py derives it), instead of exporting again. Without it, and with the
    default sample dims, that export runs in a forked worker while this process exports the
    program (stratagem.forked; the worker sends its ProgramShapes with their node keys, all that
    the batch dims and rebatch.py read of it)."""
    inputs = positional_inputs(module, example_inputs)
    name = name or type(module).__name__
    with caches_off(module) as turned_off:
        guess = _default_leaf_dims(inputs) if grown is None and sample_dims is None else None
        with _grown_in_worker(module, inputs, guess) as job:
            program = export_program(module, inputs)
            by_name = input_sample_dims(program, inputs, sample_dims)
            leaf_dims = _align_to_leaves(inputs, [by_name.get(n) for n in _user_input_names(program)])
            if job is not None and leaf_dims == guess:        # started only where grown was not given
                grown = next(job.messages(), None)
        if grown is None:
            grown = grown_export(module, inputs, leaf_dims)
    batch = {} if grown is None else dims_between(program, grown, is_one_sample(program, by_name))
    graph = lowered_graph(program, module, batch, by_name, record_saved(program), name, turned_off, convert)
    return Captured(graph, program, grown)


def _default_leaf_dims(inputs: tuple[Any, ...]) -> list[int | None]:
    """The sample dims per pytree leaf that the default gives (0 for every tensor with a dim)."""
    tensors = [x for x in torch.utils._pytree.tree_leaves(list(inputs)) if isinstance(x, torch.Tensor)]
    return _align_to_leaves(inputs, [0 if t.dim() > 0 else None for t in tensors])


@contextlib.contextmanager
def _grown_in_worker(module: torch.nn.Module, inputs: tuple[Any, ...], dims: list[int | None] | None):
    """The export with one more sample along `dims`, in a forked worker (None: not started)."""
    if dims is None or all(d is None for d in dims):
        yield None
        return
    with background(partial(_send_grown_shapes, module, inputs, dims)) as job:
        yield job


def _send_grown_shapes(module: torch.nn.Module, inputs: tuple[Any, ...], dims: list[int | None],
                       send: Callable[[Any], None]) -> None:
    """A worker's grown export: its ProgramShapes with their node keys, or None where it failed
    (this process then exports it again, and warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = grown_export(module, inputs, dims)
    send(None if found is None else program_shapes(found, with_keys=True))


def lowered_graph(program: Any, module: torch.nn.Module, batch_dims: Mapping[str, int | None],
                  sample_dims_by_name: Mapping[str, int | None], saved: SavedTensors, name: str,
                  caches_turned_off: list[str], convert: Any = None) -> Graph:
    """Steps 4 and 5: the program (an ExportedProgram, or rebatch.py's stand-in) lowered into the IR."""
    lowered = Lowering(program, module, batch_dims, sample_dims_by_name, saved, convert).run()
    _warn_opaque(name, lowered)
    meta = {"captured_from": type(module).__qualname__, "opaque_targets": lowered.opaque_targets,
            "saved_internal_num_bytes": lowered.internal_saved_num_bytes, "constants": lowered.constants,
            "cache_turned_off": caches_turned_off, "state_updates": lowered.state_updates}
    graph = Graph.build(name, lowered.tensors, lowered.ops, lowered.outputs, meta)
    return propagate_sample_dims(graph)


def positional_inputs(module: torch.nn.Module, example_inputs: Any) -> tuple[Any, ...]:
    """The forward's arguments in order: a tuple or list as given, one tensor as itself, a mapping
    by parameter name (bound to the forward's signature, defaults in between)."""
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs)
    if not isinstance(example_inputs, Mapping):
        return (example_inputs,)
    signature = inspect.signature(module.forward)
    named = [n for n, p in signature.parameters.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    unknown = [k for k in example_inputs if k not in named]
    if unknown:
        guess = closest(unknown[0], named)
        raise StratagemError("example inputs do not fit the module's forward",
                             expected=f"argument names of {type(module).__name__}.forward: {', '.join(named)}",
                             got=str(unknown), hint=guess)
    bound = signature.bind(**example_inputs)
    bound.apply_defaults()
    if bound.kwargs:
        raise StratagemError("example inputs name keyword-only arguments", got=str(sorted(bound.kwargs)),
                             hint="Pass them positionally, or wrap the module so forward takes tensors")
    return tuple(bound.args)


@contextlib.contextmanager
def caches_off(module: torch.nn.Module):
    """Hugging Face models built with their config's defaults return a KV cache (`use_cache`
    True), which is no training output and no tensor export can trace: it is turned off while the
    model is captured, and back on after. Yields the names of the submodules it was turned off in."""
    configs = {name: m.config for name, m in module.named_modules()
               if getattr(getattr(m, "config", None), "use_cache", False) is True}
    for config in configs.values():
        config.use_cache = False
    if configs:
        names = sorted(n or "(the model)" for n in configs)
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more submodules" if len(names) > 3 else "")
        warnings.warn(f"capture {type(module).__name__}: the KV cache (config.use_cache) is turned off for the "
                      f"training graph, in {shown}", CaptureNote, stacklevel=3)
    try:
        yield sorted(configs)
    finally:
        for config in configs.values():
            config.use_cache = True


class CaptureNote(UserWarning):
    """Something capture changed to trace the model for training, and says so."""


def _user_input_names(program: torch.export.ExportedProgram) -> list[str]:
    return [s.arg.name for s in program.graph_signature.input_specs if s.kind.name == "USER_INPUT"]


def input_sample_dims(program: torch.export.ExportedProgram, inputs: tuple[Any, ...],
                       given: SampleDims) -> dict[str, int | None]:
    """Placeholder name -> sample dim, for every tensor user input."""
    nodes = {n.name: n for n in program.graph.nodes}
    tensors = {n: nodes[n].meta["val"] for n in _user_input_names(program)
               if isinstance(nodes[n].meta.get("val"), torch.Tensor)}
    if given is None:
        dims = {n: (0 if t.dim() > 0 else None) for n, t in tensors.items()}
    elif isinstance(given, Mapping):
        unknown = sorted(set(given) - set(tensors))
        if unknown:
            raise StratagemError("sample_dims names unknown inputs", expected=f"names among {sorted(tensors)}",
                                 got=str(unknown))
        dims = {n: given.get(n, 0 if t.dim() > 0 else None) for n, t in tensors.items()}
    else:
        if len(given) != len(tensors):
            raise StratagemError("sample_dims has the wrong length",
                                 expected=f"{len(tensors)} (one per tensor input: {list(tensors)})",
                                 got=str(len(given)))
        dims = dict(zip(tensors, given))
    for n, d in dims.items():
        if d is not None and not -tensors[n].dim() <= d < tensors[n].dim():
            raise StratagemError(f"sample dim of input {n!r} out of range",
                                 expected=f"a dim of its shape {tuple(tensors[n].shape)} or None", got=str(d))
    return {n: (d % tensors[n].dim() if d is not None else None) for n, d in dims.items()}


def _align_to_leaves(inputs: tuple[Any, ...], placeholder_dims: list[int | None]) -> list[int | None]:
    """Sample dims per pytree leaf of `inputs` (export makes one placeholder per tensor leaf)."""
    leaves = torch.utils._pytree.tree_leaves(list(inputs))
    if len(leaves) == len(placeholder_dims):
        return placeholder_dims
    tensor_dims = iter(placeholder_dims)
    return [next(tensor_dims, None) if isinstance(x, torch.Tensor) else None for x in leaves]


def _warn_opaque(name: str, lowered: Lowered) -> None:
    if not lowered.opaque_targets:
        return
    counts = sorted(lowered.opaque_targets.items(), key=lambda kv: (-kv[1], kv[0]))
    listed = ", ".join(f"{target} x{count}" for target, count in counts)
    rejected = "".join(f"; conversion of {t} refused: {why}" for t, why in sorted(lowered.rejected.items()))
    total = sum(lowered.opaque_targets.values())
    warnings.warn(f"capture {name}: {total} ops of {len(counts)} ATen targets have no TDL description "
                  f"and are opaque (split only along the batch, else replicated): {listed}{rejected}. "
                  f"Describe them in stratagem/frontend/aten_map.py to plan their other splits",
                  OpaqueOpsWarning, stacklevel=2)
