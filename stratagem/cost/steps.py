"""One communication step of a plan: a collective run by several device groups at once."""

from __future__ import annotations

from dataclasses import dataclass

Groups = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class CommStep:
    """`kind` run by every group of `groups` concurrently; `num_bytes` per group is the full
    logical buffer (nccl-tests convention). For "p2p" steps each group is a (src, dst) pair and
    `pair_bytes` gives each pair's bytes (`num_bytes` is then the largest)."""

    kind: str
    groups: Groups
    num_bytes: float
    time_s: float
    pair_bytes: tuple[float, ...] | None = None

    @property
    def group_size(self) -> int:
        return len(self.groups[0]) if self.groups else 0

    def __str__(self) -> str:
        where = f"{len(self.groups)}x{self.group_size}" if len(self.groups) > 1 else str(self.groups[0])
        return f"{self.kind}[{where}] {self.num_bytes / 2**20:.3g} MiB {self.time_s * 1e6:.1f} us"
