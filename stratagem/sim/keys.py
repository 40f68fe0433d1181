"""Structural keys: the int64 tie-break that orders tasks of equal ready time (FlexFlow §5.2's
"ready time, then a fixed order"), increasing along every dependency of the task graph.

    key = ((phase · (N + 1) + position) · 8 + slot) · 2^32 + sub

phase: forward 0, backward 1, update 2; position: the op's place in topological order (reversed in
backward); slot: weight gathers, steps before compute, compute, backward steps, sync, activation offload (forward's copy
to the host; backward's copy back is a gather-slot task with sub RELOAD_SUB); sub: what tells tasks of one
(phase, op, slot) apart: a device, a sync step, or an edge and its step (edge · 2^10 + step).
Every field has its own bits, so keys are unique and exact up to 2^22 edges, 2^10 steps per edge
and 89 million ops; past that `structural_key` refuses rather than let keys collide (a float key of
the same fields lost order past 16,384 edges).
"""

from __future__ import annotations

from stratagem.errors import StratagemError

FORWARD, BACKWARD, UPDATE = 0, 1, 2
SLOT_GATHER, SLOT_STEPS, SLOT_COMPUTE, SLOT_BACKWARD_STEPS, SLOT_SYNC, SLOT_OFFLOAD = 0, 1, 2, 3, 4, 5
SUB_BITS = 32
STEP_BITS = 10
MAX_TOP = (1 << (63 - SUB_BITS)) - 1
RELOAD_SUB = 1 << (SUB_BITS - 1)     # an offloaded op's copy back from the host, before its backward


def structural_key(phase: int, position: int, num_ops: int, slot: int, sub: int) -> int:
    """The key of a task of the op at `position` (of `num_ops`), in `phase` and `slot`."""
    pos = num_ops - 1 - position if phase == BACKWARD else position
    top = (phase * (num_ops + 1) + pos) * 8 + slot
    if not 0 <= sub < 1 << SUB_BITS or top > MAX_TOP:
        raise StratagemError("task graph too large for the simulator's task keys",
                             expected=f"at most {MAX_TOP // 24:,} ops and {1 << (SUB_BITS - STEP_BITS):,} edges",
                             got=f"{num_ops:,} ops, a task sub-key {sub:,}")
    return (top << SUB_BITS) + sub


def edge_step_sub(edge: int, step: int) -> int:
    """The sub-key of step `step` of re-scheduling edge `edge`."""
    if step >= 1 << STEP_BITS:
        raise StratagemError("re-scheduling edge has too many steps for the simulator's task keys",
                             expected=f"fewer than {1 << STEP_BITS}", got=str(step + 1))
    return (edge << STEP_BITS) + step
