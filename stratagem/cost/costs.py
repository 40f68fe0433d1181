"""The values the cost model returns: per-op costs, per-edge costs, and a strategy's totals."""

from __future__ import annotations

from dataclasses import dataclass

from stratagem.cost.memory import MemoryCost
from stratagem.cost.steps import CommStep
from stratagem.errors import ConfigError


@dataclass(frozen=True)
class WeightCopies:
    """Bytes of the copies an op makes of its own weights to read them (gathered from shards, or
    cast to the compute dtype), per device, by how long they live: freed after its forward; kept
    until its backward; freed after forward and made again for backward ("sharded")."""
    freed_bytes: float = 0.0
    kept_bytes: float = 0.0
    regathered_bytes: float = 0.0

    @property
    def forward_bytes(self) -> float:
        """Live while the op runs forward and gone after it."""
        return self.freed_bytes + self.regathered_bytes


@dataclass(frozen=True)
class OpCost:
    """One device of the configuration (all its devices alike). TensorOpt Eq. 1:
    t = t_c + t_s (forward + backward + update, + gradient sync) and m = m_p + m_t."""

    forward_time_s: float
    backward_time_s: float
    update_time_s: float
    sync: tuple[CommStep, ...]
    sync_time_s: float
    memory: MemoryCost
    compute_source: str = "roofline"      # "roofline" or "table"
    gather: tuple[CommStep, ...] = ()     # sharded weights' all-gathers before forward (cost.weight_state)
    regather: bool = False                # the same gathers again before backward ("sharded")
    weight_copies: WeightCopies = WeightCopies()
    offload: tuple[CommStep, ...] = ()    # its activations sent to the host after forward (cost.activation_offload)
    reload: tuple[CommStep, ...] = ()     # and back before its backward

    @property
    def compute_time_s(self) -> float:
        return self.forward_time_s + self.backward_time_s + self.update_time_s

    @property
    def gather_time_s(self) -> float:
        return sum((s.time_s for s in self.gather), 0.0) * (2 if self.regather else 1)

    @property
    def host_copy_time_s(self) -> float:
        """Its activations' copies to the host and back (none unless its block offloads)."""
        return sum((s.time_s for s in self.offload + self.reload), 0.0)

    @property
    def communication_time_s(self) -> float:
        """Gradient sync, weight gathers and activation copies to the host and back."""
        return self.sync_time_s + self.gather_time_s + self.host_copy_time_s

    @property
    def time_s(self) -> float:
        return self.compute_time_s + self.communication_time_s

    @property
    def memory_bytes(self) -> float:
        return self.memory.total_bytes


@dataclass(frozen=True)
class ReuseOption:
    """Tensor reuse (TensorOpt §4.2) for a tensor both ends keep for backward, relative to keeping
    both copies: `keep_both`, `keep_before` (the producer's copy; the consumer's is rebuilt in
    backward by re-scheduling again), `keep_after` (the consumer's; the producer's is rebuilt by
    re-scheduling back), or `shared` when no re-scheduling happens and both ends hold one buffer."""

    name: str
    memory_delta_bytes: float             # <= 0: memory saved per device
    backward_steps: tuple[CommStep, ...]  # extra communication in backward
    backward_time_s: float


@dataclass(frozen=True)
class EdgeCost:
    """Re-scheduling of one tensor from its producer's layout to a consumer's (TensorOpt Eq. 2):
    forward, and for the gradient from the consumer's input-gradient placement back to the
    producer's output-gradient placement."""

    forward_steps: tuple[CommStep, ...]
    backward_steps: tuple[CommStep, ...]
    forward_time_s: float
    backward_time_s: float
    extra_memory_bytes: float             # the default reuse option's memory delta
    temporary_bytes: float                # largest intermediate block while re-scheduling
    reuse: tuple[ReuseOption, ...] = ()
    default_reuse: str | None = None      # the option priced: the default, or with_reuse's choice

    @property
    def time_s(self) -> float:
        return self.forward_time_s + self.backward_time_s

    def with_reuse(self, name: str) -> "EdgeCost":
        """The same edge under another reuse option (its memory and extra backward traffic)."""
        option = next((o for o in self.reuse if o.name == name), None)
        if option is None:
            raise ConfigError(f"no reuse option {name!r} for this edge",
                              expected=f"one of {[o.name for o in self.reuse]}", got=repr(name))
        base = next(o for o in self.reuse if o.name == self.default_reuse)
        return EdgeCost(self.forward_steps, self.backward_steps + option.backward_steps,
                        self.forward_time_s, self.backward_time_s + option.backward_time_s
                        - base.backward_time_s, option.memory_delta_bytes, self.temporary_bytes,
                        self.reuse, name)


@dataclass(frozen=True)
class PlanCost:
    """A strategy's totals (TensorOpt Eq. 3). time_s and communication_time_s are the additive
    sums; memory_bytes is the largest over devices of the op and edge memory there plus the
    largest transient term there (cost.transient; ops on sub-blocks of devices only count where
    they run)."""

    time_s: float
    memory_bytes: float
    communication_time_s: float
    compute_time_s: float
    per_device_memory_bytes: tuple[float, ...]
