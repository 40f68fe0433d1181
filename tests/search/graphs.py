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


def fanout(readers: int = 3, batch: int = 64, width: int = 256, dtype: str = "float32") -> Graph:
    """x -> fc0 -> h; s = h + x (add keeps nothing); s read by `readers` linears that each keep it
    (a norm's output read by q, k and v); their outputs multiplied together (mul keeps its inputs,
    so one unkept tensor is live at a time). s is one buffer for every reader that reads it as add
    lays it out (cost.sharing)."""
    tensors = [TensorSpec("x", (batch, width), dtype, Role.INPUT, 0),
               TensorSpec("w0", (width, width), dtype, Role.WEIGHT),
               TensorSpec("h", (batch, width), dtype, Role.ACTIVATION, 0),
               TensorSpec("s", (batch, width), dtype, Role.ACTIVATION, 0)]
    ops = [Op("fc0", "linear", ("x", "w0"), ("h",)), Op("add", "add", ("h", "x"), ("s",))]
    total = None
    for i in range(readers):
        tensors += [TensorSpec(f"w{i + 1}", (width, width), dtype, Role.WEIGHT),
                    TensorSpec(f"y{i}", (batch, width), dtype, Role.ACTIVATION, 0)]
        ops.append(Op(f"fc{i + 1}", "linear", ("s", f"w{i + 1}"), (f"y{i}",)))
        if total is None:
            total = f"y{i}"
            continue
        tensors.append(TensorSpec(f"prod{i}", (batch, width), dtype, Role.ACTIVATION, 0))
        ops.append(Op(f"prod{i}", "mul", (total, f"y{i}"), (f"prod{i}",)))
        total = f"prod{i}"
    return Graph.build("fanout", tensors, ops, [total])


def residual(batch: int = 64, width: int = 256, dtype: str = "float32") -> Graph:
    """x -> fca -> a, x -> fcb -> b, s = a + b, y = fcc(s): the add keeps nothing and neither
    producer keeps its output, so a, b and s are all live while the add runs (a residual block's
    sum, whose two summands come from different layers)."""
    tensors = [TensorSpec("x", (batch, width), dtype, Role.INPUT, 0)]
    ops = []
    for name in ("a", "b"):
        tensors += [TensorSpec(f"w{name}", (width, width), dtype, Role.WEIGHT),
                    TensorSpec(name, (batch, width), dtype, Role.ACTIVATION, 0)]
        ops.append(Op(f"fc{name}", "linear", ("x", f"w{name}"), (name,)))
    tensors += [TensorSpec("s", (batch, width), dtype, Role.ACTIVATION, 0),
                TensorSpec("wc", (width, width), dtype, Role.WEIGHT),
                TensorSpec("y", (batch, width), dtype, Role.ACTIVATION, 0)]
    ops += [Op("add", "add", ("a", "b"), ("s",)), Op("fcc", "linear", ("s", "wc"), ("y",))]
    return Graph.build("residual", tensors, ops, ["y"])
