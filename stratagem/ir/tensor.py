"""TensorSpec: a tensor's name, shape, dtype and role in training."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from stratagem.ir.dtypes import dtype_bytes


class Role(str, Enum):
    INPUT = "input"                  # fed by the data loader (sample dim split under data parallel)
    ACTIVATION = "activation"        # produced by an op in the forward pass
    WEIGHT = "weight"                # trainable parameter
    BUFFER = "buffer"                # non-trainable state (e.g. batch-norm running statistics)
    GRADIENT = "gradient"            # gradient of a weight or activation
    OPTIMIZER_STATE = "optimizer_state"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    role: Role = Role.ACTIVATION
    sample_dim: int | None = None     # the batch dim, when the tensor has one

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        object.__setattr__(self, "role", Role(self.role))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_elements(self) -> int:
        return math.prod(self.shape)

    @property
    def num_bytes(self) -> int:
        return self.num_elements * dtype_bytes(self.dtype)

    @property
    def is_parameter(self) -> bool:
        return self.role is Role.WEIGHT

    def __str__(self) -> str:
        dims = ",".join(str(s) for s in self.shape)
        return f"{self.name}[{dims}]:{self.dtype}"
