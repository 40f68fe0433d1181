"""What edge-by-edge pricing counts that the simulator holds once: re-scheduled copies shared by
readers of one layout (cost.shared_moves)."""

from __future__ import annotations

from stratagem.cost.memory import keeps_copy
from stratagem.ir import dtype_bytes
from stratagem.sim.state import SimState
from stratagem.space import as_strategy


def shared_copies_bytes(model, strategy) -> float:
    """Each reader of another reader's re-scheduled copy (SimState.mover_of) that keeps it for
    backward: the copy it is charged edge by edge, which the simulator does not hold."""
    strategy = as_strategy(strategy)
    state = SimState(model, strategy, strategy.reuse)
    found = 0.0
    for k, e in enumerate(state.edges):
        if state.mover_of(k) != k and keeps_copy(model.graph, model.graph.op(e.dst_op), e.tensor,
                                                 state.edge_cost(k).default_reuse):
            spec = model.graph.tensors[e.tensor]
            found += state.target_layout(k).local_num_elements(spec.shape) * dtype_bytes(spec.dtype)
    return found
