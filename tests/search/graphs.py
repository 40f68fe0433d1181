"""Hand-built graphs for the search tests (the sketch library's linear op only)."""

from __future__ import annotations

from stratagem.ir import Graph, Op, Role, TensorSpec


def chain(layers: int = 3, batch: int = 64, width: int = 256, dtype: str = "float32") -> Graph:
    """x0[b, w] -> fc0 (w0) -> x1 -> ... -> fc{n-1} -> x{n}: a linear chain of linear layers."""
    tensors = [TensorSpec("x0", (batch, width), dtype, Role.INPUT, 0)]
    ops = []
    for i in range(layers):
        tensors.append(TensorSpec(f"w{i}", (width, width), dtype, Role.WEIGHT))
        tensors.append(TensorSpec(f"x{i + 1}", (batch, width), dtype, Role.ACTIVATION, 0))
        ops.append(Op(f"fc{i}", "linear", (f"x{i}", f"w{i}"), (f"x{i + 1}",)))
    return Graph.build("chain", tensors, ops, [f"x{layers}"])


def unrolled(steps: int = 2, batch: int = 64, width: int = 256, dtype: str = "float32") -> Graph:
    """An embedding-free recurrent sketch: h{t+1} = fc(h{t}, w) for `steps` timesteps sharing w,
    then a classifier fc_out (wo). The timesteps read one weight: a recurrent graph."""
    tensors = [TensorSpec("h0", (batch, width), dtype, Role.INPUT, 0),
               TensorSpec("w", (width, width), dtype, Role.WEIGHT),
               TensorSpec("wo", (width, width), dtype, Role.WEIGHT)]
    ops = []
    for t in range(steps):
        tensors.append(TensorSpec(f"h{t + 1}", (batch, width), dtype, Role.ACTIVATION, 0))
        ops.append(Op(f"step{t}", "linear", (f"h{t}", "w"), (f"h{t + 1}",)))
    tensors.append(TensorSpec("y", (batch, width), dtype, Role.ACTIVATION, 0))
    ops.append(Op("out", "linear", (f"h{steps}", "wo"), ("y",)))
    return Graph.build("unrolled", tensors, ops, ["y"])
