"""Hand-built graphs for the cost model's tests (the sketch library: linear, softmax, conv1d)."""

from __future__ import annotations

from stratagem.ir import Graph, Op, Role, TensorSpec


def mlp(batch: int = 64, width: int = 1024, hidden: int = 4096, dtype: str = "float32",
        activation: bool = False) -> Graph:
    """x[b, d] -> fc1 (w1[h, d]) -> h[b, h] (-> softmax -> a) -> fc2 (w2[d, h]) -> y[b, d]."""
    tensors = [TensorSpec("x", (batch, width), dtype, Role.INPUT, 0),
               TensorSpec("w1", (hidden, width), dtype, Role.WEIGHT),
               TensorSpec("h", (batch, hidden), dtype, Role.ACTIVATION, 0),
               TensorSpec("w2", (width, hidden), dtype, Role.WEIGHT),
               TensorSpec("y", (batch, width), dtype, Role.ACTIVATION, 0)]
    ops = [Op("fc1", "linear", ("x", "w1"), ("h",))]
    middle = "h"
    if activation:
        tensors.append(TensorSpec("a", (batch, hidden), dtype, Role.ACTIVATION, 0))
        ops.append(Op("act", "softmax", ("h",), ("a",), {"dim": 1}))
        middle = "a"
    ops.append(Op("fc2", "linear", (middle, "w2"), ("y",)))
    return Graph.build("mlp", tensors, ops, ["y"])


def conv(batch: int = 8, channels: int = 16, length: int = 64, kernel: int = 3) -> Graph:
    """x[b, c, l] -> conv1d (f[c, c, k]) -> y[b, c, l-k+1] -> conv1d (g) -> z."""
    out1, out2 = length - kernel + 1, length - 2 * kernel + 2
    tensors = [TensorSpec("x", (batch, channels, length), role=Role.INPUT, sample_dim=0),
               TensorSpec("f", (channels, channels, kernel), role=Role.WEIGHT),
               TensorSpec("y", (batch, channels, out1), sample_dim=0),
               TensorSpec("g", (channels, channels, kernel), role=Role.WEIGHT),
               TensorSpec("z", (batch, channels, out2), sample_dim=0)]
    ops = [Op("c1", "conv1d", ("x", "f"), ("y",)), Op("c2", "conv1d", ("y", "g"), ("z",))]
    return Graph.build("conv", tensors, ops, ["z"])


def mlp_with_views(batch: int = 32, width: int = 64, hidden: int = 128, transposed: bool = False) -> Graph:
    """mlp with its hidden activation viewed on the way to fc2: h[b, h] -> reshape r[b, 2, h/2]
    (-> transpose t[b, h/2, 2] when `transposed`: the reshape back then copies) -> reshape
    h2[b, h] -> fc2. Without the transpose the views change nothing a device holds."""
    half = hidden // 2
    tensors = [TensorSpec("x", (batch, width), role=Role.INPUT, sample_dim=0),
               TensorSpec("w1", (hidden, width), role=Role.WEIGHT),
               TensorSpec("h", (batch, hidden), sample_dim=0),
               TensorSpec("r", (batch, 2, half), sample_dim=0),
               TensorSpec("h2", (batch, hidden), sample_dim=0),
               TensorSpec("w2", (width, hidden), role=Role.WEIGHT),
               TensorSpec("y", (batch, width), sample_dim=0)]
    ops = [Op("fc1", "linear", ("x", "w1"), ("h",)), Op("split", "reshape", ("h",), ("r",), {"shape": (batch, 2, half)})]
    viewed = "r"
    if transposed:
        tensors.append(TensorSpec("t", (batch, half, 2), sample_dim=0))
        ops.append(Op("swap", "transpose", ("r",), ("t",), {"dim0": 1, "dim1": 2}))
        viewed = "t"
    ops += [Op("merge", "reshape", (viewed,), ("h2",), {"shape": (batch, hidden)}),
            Op("fc2", "linear", ("h2", "w2"), ("y",))]
    return Graph.build("mlp_with_views", tensors, ops, ["y"])


def fanout(batch: int = 32, width: int = 64, hidden: int = 128) -> Graph:
    """x[b, d] -> fc1 (w1) -> h[b, h], read by two linears fc2a (w2a) and fc2b (w2b) -> ya, yb[b, d]
    -> add -> y: one activation two consumers read (and keep for backward)."""
    tensors = [TensorSpec("x", (batch, width), role=Role.INPUT, sample_dim=0),
               TensorSpec("w1", (hidden, width), role=Role.WEIGHT),
               TensorSpec("h", (batch, hidden), sample_dim=0),
               TensorSpec("w2a", (width, hidden), role=Role.WEIGHT),
               TensorSpec("w2b", (width, hidden), role=Role.WEIGHT),
               TensorSpec("ya", (batch, width), sample_dim=0),
               TensorSpec("yb", (batch, width), sample_dim=0),
               TensorSpec("y", (batch, width), sample_dim=0)]
    ops = [Op("fc1", "linear", ("x", "w1"), ("h",)), Op("fc2a", "linear", ("h", "w2a"), ("ya",)),
           Op("fc2b", "linear", ("h", "w2b"), ("yb",)), Op("sum", "add", ("ya", "yb"), ("y",))]
    return Graph.build("fanout", tensors, ops, ["y"])
