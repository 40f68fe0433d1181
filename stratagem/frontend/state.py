"""Forwards that change their module's state: buffers carried as state, parameters refused.

A training forward may write its module's buffers: batch norm updates its running statistics,
a model may count steps or keep its own running averages. Export's default IR keeps these writes
as in-place ops on the buffers' placeholders (`add_`, `copy_`, `mul_`, ...) and, for batch norm, as
the running-statistics arguments that `batch_norm(training=True)` updates implicitly. Capture
carries each write as state: the IR computes every written buffer's next value like any other
tensor, and `graph.meta["state_updates"]` maps the buffer to it, so the runtime writes it back
after each forward (runtime.execute), as eager PyTorch does:

    x.add_(v), x.mul_(v), ... on a buffer x   ->  its functional op's output is x's next value
    x.copy_(v) on a buffer x                  ->  v is x's next value
    batch_norm(training=True) with running    ->  batch_norm_running ops (tdl/library/norm.py) compute
    statistics                                    them from batch_norm_stats, as PyTorch does

A write to a parameter inside forward (an in-place update under no_grad) is refused: the optimizer
owns parameters, and a plan that splits them cannot apply a second, hidden update consistently.
A buffer written in a way capture cannot carry (through a view, by an op it leaves opaque) is
refused too, naming the op and the buffer: nothing trains differently without a word.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import fx

from stratagem.errors import StratagemError
from stratagem.frontend import calls
from stratagem.frontend.fxnodes import module_path

TRAINING_BATCH_NORMS = frozenset({"aten.batch_norm.default", "aten._native_batch_norm_legit.default",
                                  "aten._native_batch_norm_legit_functional.default"})


class StateWriteError(StratagemError):
    """A forward that writes its module's state in a way stratagem cannot carry."""


def written_arguments(node: fx.Node) -> list[fx.Node]:
    """The nodes `node` writes: arguments its schema marks as written, and the running statistics
    a training batch norm updates (its schema does not say so)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return []
    written = [value for arg, value in zip(schema.arguments, _arguments(node, schema))
               if arg.alias_info is not None and arg.alias_info.is_write and isinstance(value, fx.Node)]
    if calls.target_name(node.target) in TRAINING_BATCH_NORMS and _training(node, schema):
        written += [v for v in _arguments(node, schema)[3:5] if isinstance(v, fx.Node)]
    return list(dict.fromkeys(written))


def _arguments(node: fx.Node, schema) -> list:
    values = list(node.args)
    for arg in schema.arguments[len(values):]:
        values.append(node.kwargs.get(arg.name, arg.default_value if arg.has_default_value() else None))
    return values


def _training(node: fx.Node, schema) -> bool:
    names = [a.name for a in schema.arguments]
    return "training" not in names or bool(_arguments(node, schema)[names.index("training")])


def refuse_parameter_writes(node: fx.Node, written: list[fx.Node], kinds: Mapping[str, str],
                            names: Mapping[str, str]) -> None:
    for value in written:
        if kinds.get(value.name) == "PARAMETER":
            raise StateWriteError(
                f"op {calls.target_name(node.target)} in {module_path(node) or 'the forward'} writes parameter "
                f"{names.get(value.name, value.name)!r} during forward", expected="parameters changed by the "
                "optimizer only", got="an in-place update in forward",
                hint="Move the update out of forward (into the training loop, after optimizer.step()), or keep "
                     "the value in a buffer, which stratagem carries as state")


def new_value_of(node: fx.Node, buffer: fx.Node) -> fx.Node | None:
    """For an in-place op on `buffer`: the node whose value is the buffer's next one (copy_'s
    source; any other in-place op's own result), or None when it is neither."""
    target = calls.target_name(node.target)
    if not node.args or node.args[0] is not buffer:
        return None
    if target.startswith("aten.copy_."):
        return node.args[1] if isinstance(node.args[1], fx.Node) else None
    op_name = target.split(".")[1] if target.count(".") >= 2 else ""
    return node if op_name.endswith("_") and not op_name.startswith("_") else None


def refuse_uncarried(written: Mapping[str, str], carried: Mapping[str, str]) -> None:
    """Every buffer some op writes must have its next value carried."""
    for buffer, target in sorted(written.items()):
        if buffer not in carried:
            raise StateWriteError(f"op {target} writes buffer {buffer!r} in a way capture cannot carry",
                                  expected="an in-place op on the buffer itself, copy_ into it, or batch norm's "
                                           "running statistics",
                                  got=f"{target} (through a view, or an op left opaque)",
                                  hint="Compute the new value and assign it whole (self.buf.copy_(new)), or "
                                       "describe the op in stratagem/frontend/aten_map.py")
