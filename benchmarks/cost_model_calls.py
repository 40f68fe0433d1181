"""Calls per second of CostModel.op_cost / edge_cost / plan_cost, cold (first call) and warm.

    PYTHONPATH=. python benchmarks/cost_model_calls.py [--cluster h100-4x8] [--layers 8]

A deep MLP (linear + softmax per layer) on a cluster; every configuration of every op with up to
two mesh axes is priced once (cold: builds layouts, re-scheduling plans, collective plans), then
random (op, configuration) and (edge, source configuration, target configuration) calls are
repeated from the memo (warm: what a search sees after its first sweep).
"""

from __future__ import annotations

import argparse
import random
import time

from stratagem.cost import CostModel
from stratagem.ir import Graph, Op, Role, TensorSpec
from stratagem.space import SpaceOptions


def deep_mlp(layers: int, batch: int = 256, width: int = 4096) -> Graph:
    tensors = [TensorSpec("x0", (batch, width), "bfloat16", Role.INPUT, 0)]
    ops = []
    for i in range(layers):
        tensors += [TensorSpec(f"w{i}", (width, width), "bfloat16", Role.WEIGHT),
                    TensorSpec(f"h{i}", (batch, width), "bfloat16", Role.ACTIVATION, 0),
                    TensorSpec(f"x{i + 1}", (batch, width), "bfloat16", Role.ACTIVATION, 0)]
        ops += [Op(f"fc{i}", "linear", (f"x{i}", f"w{i}"), (f"h{i}",)),
                Op(f"act{i}", "softmax", (f"h{i}",), (f"x{i + 1}",))]
    return Graph.build("deep_mlp", tensors, ops, [f"x{layers}"])


def rate(calls: int, seconds: float) -> str:
    return f"{calls / seconds:,.0f} calls/s ({seconds * 1e6 / calls:.2f} us/call, {calls} calls)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cluster", default="h100-4x8")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--warm-calls", type=int, default=1_000_000)
    args = parser.parse_args()
    model = CostModel(deep_mlp(args.layers), args.cluster, mixed_precision=True)
    options = SpaceOptions(max_axes=2)
    configs = {op.name: model.configurations(op.name, options) for op in model.graph.ops}
    print(f"{args.cluster}: {model.num_devices} devices, {len(model.graph.ops)} ops, "
          f"{sum(map(len, configs.values()))} configurations")

    start = time.perf_counter()
    pairs = [(name, c) for name, cs in configs.items() for c in cs]
    for name, config in pairs:
        model.op_cost(name, config)
    print("op_cost   cold:", rate(len(pairs), time.perf_counter() - start))

    rng = random.Random(0)
    edges = [e for e in model.edges() if e.src_op is not None]
    edge_calls = [(e, rng.choice(configs[e.src_op]), rng.choice(configs[e.dst_op])) for e in edges
                  for _ in range(400)]
    start = time.perf_counter()
    for e, a, b in edge_calls:
        model.edge_cost(e.tensor, e.src_op, a, e.dst_op, b)
    print("edge_cost cold:", rate(len(edge_calls), time.perf_counter() - start))

    warm_ops = [rng.choice(pairs) for _ in range(args.warm_calls)]
    start = time.perf_counter()
    for name, config in warm_ops:
        model.op_cost(name, config)
    print("op_cost   warm:", rate(len(warm_ops), time.perf_counter() - start))

    warm_edges = [rng.choice(edge_calls) for _ in range(args.warm_calls)]
    start = time.perf_counter()
    for e, a, b in warm_edges:
        model.edge_cost(e.tensor, e.src_op, a, e.dst_op, b)
    print("edge_cost warm:", rate(len(warm_edges), time.perf_counter() - start))

    strategies = [{name: rng.choice(cs) for name, cs in configs.items()} for _ in range(200)]
    start = time.perf_counter()
    for strategy in strategies:
        model.plan_cost(strategy)
    print("plan_cost     :", rate(len(strategies), time.perf_counter() - start))


if __name__ == "__main__":
    main()
